"""The terminal side of ``autofix fix --interactive`` (part of the command line).

For each changed file, each piece of its fix (see :mod:`autofix.interactive`) is shown, with
the findings it fixes and its diff, and the user answers as with ``git add -p``. Answers are
lines read from standard input: the terminal, or whatever is piped in (so a review can be
scripted); the end of the input means quit. What was accepted in a file is verified as a whole
file, then written atomically; a file changed on disk meanwhile is not overwritten.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from typing import Iterator

from autofix import newlines, notebooks
from autofix.diffs import display_path, line_style, unified_diff
from autofix.interactive import Piece, Review
from autofix.output.formats import location
from autofix.results import FileResult
from autofix.run import Run
from autofix.sourcefile import SourceError, encode, write_all
from autofix.terminal import err, out

PROMPT = "Apply this fix? [y,n,a,d,q,?] "
HELP = """\
y - apply this fix
n - skip this fix
a - apply this fix and every later fix in this file
d - skip this fix and every later fix in this file
q - quit: skip this fix and all the ones after it (what was accepted in this file is written)
? - print this help"""


def fix_interactively(run: Run) -> Iterator[FileResult]:
    """The results of ``run``, each changed file reviewed piece by piece and written with what
    was accepted; the run's counts follow what was written."""
    quitting = False
    for result in run.results(write=False):
        shown = display_path(result.path)
        if result.changed and not result.error and not quitting:
            result, quitting = _review(result, run)
        if result.changed and not result.written:
            # Counted as a file to change when it arrived; it was not changed.
            run.counts["changed"] -= 1
            run.fixes.pop(shown, None)
        yield result


def _review(result: FileResult, run: Run) -> tuple[FileResult, bool]:
    """Ask about each piece of ``result``'s fix; write what was accepted. Returns the result as
    written (or not) and whether the user quit."""
    review = Review(result, run.options)
    pieces = review.pieces()
    accepted: list[Piece] = []
    rest: str | None = None  # "a" or "d": the answer for the pieces left in this file
    quit = False
    for number, piece in enumerate(pieces, 1):
        if rest is not None:
            if rest == "a":
                accepted.append(piece)
            continue
        _show(review, piece, number, len(pieces))
        answer = _ask()
        if answer in ("y", "a"):
            accepted.append(piece)
        if answer in ("a", "d"):
            rest = answer
        if answer == "q":
            quit = True
            break
    shown = display_path(result.path)
    if not accepted:
        return result, quit
    chosen = sorted(i for piece in accepted for i in piece.hunks)
    if not review.verified(chosen):
        err.print(f"warning: {shown}: the fixes accepted do not stand together; nothing written", style="yellow")
        return result, quit
    text = review.text_with(chosen)
    if result.also and text != result.new_text:
        err.print(f"warning: {shown}: its fix edits other files too and is written whole or not at all; nothing written", style="yellow")
        return result, quit
    try:
        writes = [(result.path, encode(text, result.encoding, result.bom), result.digest or "")]
        # A fix that spans files (see autofix.crossfile): every file or none.
        writes += [(path, encode(new, *result.encoding_of(path)), digest) for path, digest, _old, new in result.also]
        write_all(writes)
    except SourceError as exc:
        run.counts["errors"] += 1
        return replace(result, error=str(exc)), quit
    fixed = Counter(f.code for piece in accepted for f in piece.findings if f.fixable and not f.suppressed)
    run.fixes[shown] = fixed
    err.print(f"fixed {shown} ({len(accepted)} of {len(pieces)} fix{'es' if len(pieces) != 1 else ''})")
    return replace(result, new_text=text, written=True), quit


def _show(review: Review, piece: Piece, number: int, total: int) -> None:
    result = review.result
    shown = display_path(result.path)
    out.print()
    out.print(f"{shown}: fix {number} of {total}", style="bold")
    for finding in piece.findings:
        out.print(f"{location(result, finding)}: {finding.code} {finding.message}", style="yellow")
    after = review.text_with(piece.hunks)
    if result.notebook:
        diff = notebooks.cell_diffs(review.old, after, shown)
    else:
        # In the lines Python reads (a file whose lines end with a lone \r is one line to git).
        patch = unified_diff(review.old, after, result.path, result.encoding, result.bom, split=newlines.lines)
        diff = patch.decode(result.encoding, errors="replace")
    for line in diff.splitlines():
        out.print(line.rstrip("\r"), style=line_style(line))


def _ask() -> str:
    """One answer: a line of standard input; its end is ``q``, and so is no standard input at
    all (closed, ``<&-``)."""
    while True:
        out.print(PROMPT, style="bold blue", end="")
        line = _read_line()
        if not line:
            out.print()
            return "q"
        answer = line.strip().lower()
        if not _is_terminal(sys.stdin):
            # Answers read from a pipe are not echoed by a terminal: show what was read.
            out.print(answer)
        if answer in ("y", "n", "a", "d", "q"):
            return answer
        out.print(HELP)


def _read_line() -> str:
    stream = sys.stdin
    if stream is None:
        return ""
    try:
        return stream.readline()
    except (OSError, ValueError):  # closed, or not readable
        return ""


def _is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False
