"""``--format suggestions``: the fixes as pull-request review suggestions (a JSON list).

One entry per changed hunk of each fixed file::

    {"path": "train.py", "start_line": 4, "end_line": 5,
     "original": "<lines start_line..end_line of the file as it is>",
     "replacement": "<what those lines become>",
     "findings": [{"code": "TFD001", "line": 4, "column": 9, "cell": null, "cell_index": null, "message": "..."}],
     "body": "<Markdown with a ```suggestion block holding the replacement>"}

``start_line``/``end_line`` are 1-based and inclusive, in the file as it is (the pull request's
head: GitHub's ``side: RIGHT``; for a notebook, lines of its JSON, as GitHub's source diff shows
them); ``path`` is relative to the repository root. A review comment
must cover at least one line, so a pure insertion is anchored to the line above it (or, at the
top of a file, the line below), which its suggestion repeats. Hunks whose anchored ranges would
overlap are merged into one suggestion. Replacing each entry's lines by its ``replacement``
gives the fixed file. ``findings`` lists the findings whose fix the hunk is (see
:mod:`autofix.output.fixes`), plus any other fixable finding on its lines; a notebook's give
their cell as the json format does (``cell`` from 1, ``cell_index`` from 0) and the line and
column in it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Sequence

from autofix.diffs import display_path, lines_of
from autofix.newlines import has_lone_cr
from autofix.output.fixes import Hunk, hunks, overlaps, owners
from autofix.output.formats import Formatter
from autofix.output.locations import place, placed, root_relative, source_root
from autofix.results import FileResult, Finding


@dataclass
class ChangedLines:
    """Original lines ``first..last`` (1-based, inclusive) and the hunks that change them."""

    first: int
    last: int
    hunks: list[Hunk] = field(default_factory=list)

    def replacement(self, lines: list[str]) -> str:
        out: list[str] = []
        position = self.first - 1
        for hunk in self.hunks:
            out.extend(lines[position : hunk.start])
            out.extend(hunk.new)
            position = hunk.end
        out.extend(lines[position : self.last])
        return "".join(out)


def spans(file_hunks: list[Hunk], lines: list[str]) -> list[ChangedLines]:
    """Hunks as commentable line ranges, with insertions anchored, and hunks merged when their
    ranges overlap or only blank lines lie between them (a block moved into ``with`` keeps its
    blank lines: apart, its pieces would not be valid code)."""
    out: list[ChangedLines] = []
    for hunk in file_hunks:
        if not hunk.insertion:
            first, last = hunk.start + 1, hunk.end
        elif hunk.start > 0:
            first = last = hunk.start
        elif lines:
            first = last = 1
        else:
            continue  # an empty file has no line to comment on
        if out and (first <= out[-1].last or all(not line.strip() for line in lines[out[-1].last : first - 1])):
            out[-1].last = max(out[-1].last, last)
            out[-1].hunks.append(hunk)
        else:
            out.append(ChangedLines(first, last, [hunk]))
    return out


class SuggestionsFormatter(Formatter):
    name = "suggestions"

    def __init__(self, unsafe_fixes: bool = False) -> None:
        super().__init__(unsafe_fixes)
        self.root = source_root()
        self.items: list[dict] = []

    def result(self, result: FileResult) -> str:
        if not result.changed:
            return ""
        # Lines as git counts them (at \n only): the lines of the pull request's diff.
        lines = lines_of(result.old_text or "")
        file_hunks = hunks(result.old_text or "", result.new_text or "", lines_of)
        # Findings placed in the file's lines (a notebook's in its JSON). They count lines as
        # Python does, which only a file with lone \r newlines tells apart from git's.
        located = placed(result)
        by_line = located is not None and not has_lone_cr(result.old_text or "")
        located = located or list(result.findings)
        who = owners(located, file_hunks, by_line=by_line)
        path = root_relative(result.path, self.root) or display_path(result.path)
        file_spans = spans(file_hunks, lines)
        owner_of = {hunk: owner for hunk, owner in zip(file_hunks, who)}
        # The suggestions that make up each finding's fix, to say which belong together.
        parts: dict[int, list[ChangedLines]] = {}
        for span in file_spans:
            for owner in dict.fromkeys(owner_of[h] for h in span.hunks):
                if owner is not None:
                    parts.setdefault(owner, []).append(span)
        for span in file_spans:
            chosen: list[int] = []
            for hunk in span.hunks:
                others = [
                    i
                    for i, f in enumerate(located)
                    if f.fixable and not f.suppressed and by_line and overlaps(hunk, f)
                ]
                owner = owner_of[hunk]
                for index in ([owner] if owner is not None else []) + others:
                    if index not in chosen:
                        chosen.append(index)
            findings = sorted((result.findings[i] for i in chosen), key=lambda f: (-1 if f.cell is None else f.cell, f.line, f.column))
            together = sorted(
                {(s.first, s.last) for i in chosen for s in parts.get(i, ()) if s is not span}
            )
            replacement = span.replacement(lines)
            self.items.append(
                {
                    "path": path,
                    "start_line": span.first,
                    "end_line": span.last,
                    "original": "".join(lines[span.first - 1 : span.last]),
                    "replacement": replacement,
                    "findings": [
                        {"code": f.code, "line": f.line, "column": f.column, "cell": f.cell_number, "cell_index": f.cell, "message": f.message}
                        for f in findings
                    ],
                    "body": body(findings, replacement, together),
                }
            )
        return ""

    def finish(self) -> str:
        return json.dumps(self.items, indent=2, ensure_ascii=False) + "\n"


def body(findings: Sequence[Finding], replacement: str, together: Sequence[tuple[int, int]] = ()) -> str:
    """The review comment: what is fixed, then a ```suggestion block GitHub can apply.
    ``together`` are the line ranges of the other suggestions of the same fix."""
    if findings:
        lines = [f"autofix: **{f.code}** ({place(f)}) {f.message}" for f in findings]
    else:
        lines = ["autofix: part of this file's fix"]
    if together:
        where = ", ".join(f"line {a}" if a == b else f"lines {a}-{b}" for a, b in together)
        lines.append("")
        lines.append(f"Commit together with the suggestions on {where} (add them to one batch): each is only part of the fix.")
    text = replacement.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    block = f"{fence}suggestion\n{text}\n{fence}" if replacement else f"{fence}suggestion\n{fence}"
    return "\n".join(lines) + "\n\n" + block + "\n"
