"""A file's fix as line hunks, and which finding each hunk belongs to.

The engine fixes a file as a whole (rules are applied one after another, then checked), so it
knows the fixed text but not which characters each finding changed. Reports that attach a fix
to a finding (``json``, ``sarif``) divide the file's change among its findings:

- the change is split into hunks: difflib on the lines of ``old`` and ``new`` as Python reads
  them (:func:`autofix.newlines.lines`: a lone ``\r`` ends a line too), the lines the
  findings' own positions count;
- a hunk goes to the first fixable finding (in line order) whose line range it overlaps; an
  insertion overlaps a range it lies inside or right next to;
- a hunk that overlaps no fixable finding goes to the closest fixable finding above it, or
  else the closest one below.

Every hunk goes to exactly one finding, so applying the replacements of all findings of a file
gives exactly the fixed file. A fixable finding whose lines were already covered by an earlier
finding's hunk gets no replacements of its own: that hunk fixes both. A notebook's findings,
placed by cell and line in the cell, are first placed in the lines of its JSON text, where the
hunks are (:func:`autofix.output.locations.placed`), so that each finding's part of the fix is
its own cell's; only when they cannot be placed does the first fixable finding carry the
whole fix.

Positions follow SARIF text regions (1-based lines and columns in code points, the end column
one past the last character, a whole line with its newline ending at column 1 of the next
line, and the end of the file after the last character of the last line).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Sequence

from autofix.newlines import lines as source_lines
from autofix.output.locations import placed
from autofix.results import FileResult, Finding


@dataclass(frozen=True)
class Hunk:
    """Original lines ``[start, end)`` (0-based) are replaced by ``new``; ``start == end`` is a
    pure insertion before original line ``start``."""

    start: int
    end: int
    new: tuple[str, ...]

    @property
    def insertion(self) -> bool:
        return self.start == self.end


@dataclass(frozen=True)
class Replacement:
    """Replace the original text from (start_line, start_column) up to, not including,
    (end_line, end_column) by ``content``; offsets are in characters of the original."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    char_offset: int
    char_length: int
    content: str

    def as_json(self) -> dict:
        return {
            "start_line": self.start_line,
            "start_column": self.start_column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "content": self.content,
        }


def hunks(old: str, new: str, split: Callable[[str], list[str]] = source_lines) -> list[Hunk]:
    """The change from ``old`` to ``new`` as hunks of the lines ``split`` makes."""
    a, b = split(old), split(new)
    # autojunk would treat frequent lines (blank ones) as noise in files over 200 lines and
    # produce needlessly large hunks.
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [Hunk(i1, i2, tuple(b[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


class Positions:
    """Line/column and character offsets of line starts in one original text."""

    def __init__(self, text: str) -> None:
        self.lines = source_lines(text)
        self.offsets = [0]
        for line in self.lines:
            self.offsets.append(self.offsets[-1] + len(line))

    def at(self, index: int) -> tuple[int, int]:
        """The (line, column) of the start of 0-based line ``index``; past the last line, the
        end of the file."""
        if index < len(self.lines):
            return index + 1, 1
        if not self.lines:
            return 1, 1
        return len(self.lines), len(self.lines[-1]) + 1

    def replacement(self, hunk: Hunk) -> Replacement:
        start_line, start_column = self.at(hunk.start)
        end_line, end_column = self.at(hunk.end)
        offset = self.offsets[hunk.start]
        return Replacement(
            start_line,
            start_column,
            end_line,
            end_column,
            offset,
            self.offsets[hunk.end] - offset,
            "".join(hunk.new),
        )


def overlaps(hunk: Hunk, finding: Finding) -> bool:
    if hunk.insertion:
        # Between original lines `start` and `start + 1` (1-based): inside or next to the range.
        return finding.line <= hunk.start + 1 and hunk.start <= finding.end_line
    return hunk.start + 1 <= finding.end_line and finding.line <= hunk.end


def owners(findings: Sequence[Finding], file_hunks: Sequence[Hunk], by_line: bool = True) -> list[int | None]:
    """For each hunk, the index in ``findings`` of the finding it belongs to (None only when no
    finding is fixable). Without ``by_line`` (findings and hunks are not in the same lines),
    the first fixable finding gets every hunk."""
    fixable = sorted(
        (i for i, f in enumerate(findings) if f.fixable and not f.suppressed),
        key=lambda i: (findings[i].cell or 0, findings[i].line, findings[i].column, i),
    )
    if not by_line:
        return [fixable[0] if fixable else None for _ in file_hunks]
    result: list[int | None] = []
    for hunk in file_hunks:
        owner = next((i for i in fixable if overlaps(hunk, findings[i])), None)
        if owner is None:
            above = [i for i in fixable if findings[i].end_line <= hunk.start]
            below = [i for i in fixable if findings[i].line > hunk.end]
            if above:
                owner = max(above, key=lambda i: findings[i].end_line)
            elif below:
                owner = min(below, key=lambda i: findings[i].line)
        result.append(owner)
    return result


@dataclass(frozen=True)
class FileFixes:
    """A changed file's hunks, their owners, and each finding's replacements."""

    hunks: tuple[Hunk, ...]
    owners: tuple[int | None, ...]
    by_finding: dict[int, tuple[Replacement, ...]]


def file_fixes(result: FileResult) -> FileFixes | None:
    """The division of ``result``'s fix among its findings; None when the file is unchanged."""
    if not result.changed:
        return None
    old, new = result.old_text or "", result.new_text or ""
    file_hunks = hunks(old, new)
    located = placed(result)
    who = owners(located or result.findings, file_hunks, by_line=located is not None)
    positions = Positions(old)
    by_finding: dict[int, list[Replacement]] = {
        i: [] for i, f in enumerate(result.findings) if f.fixable and not f.suppressed
    }
    for hunk, owner in zip(file_hunks, who):
        if owner is not None:
            by_finding[owner].append(positions.replacement(hunk))
    return FileFixes(tuple(file_hunks), tuple(who), {i: tuple(r) for i, r in by_finding.items()})
