"""``autofix fix --interactive``: a file's fix cut into pieces that can be applied one by one.

The engine fixes a file as a whole (rules one after another, then verified). A piece offered
on its own is a set of hunks of that whole fix (the file's diff), and it is offered alone only
when it stands alone: the file with just that piece applied must be something the engine would
have come to on its way, i.e.

- it reads (it parses; a notebook is still a notebook), and
- fixing it again gives exactly the file's whole fix (the piece is not undone or changed, and
  the pieces left out can still be applied later).

Hunks start grouped by the finding they belong to (:func:`autofix.output.fixes.owners`, as in
the JSON and SARIF reports). A group that does not stand alone (the two halves of a moved
statement, a scaled batch whose use was rewritten by another rule) is merged with the group it
depends on: first with each other group alone, nearest first, then with its successors one by
one; in the worst case the whole file's fix is one piece, which the engine has verified. What
the user accepts is verified again as a whole file before it is written.
"""

from __future__ import annotations

import os

from dataclasses import dataclass
from typing import Sequence

from autofix.engine import Options, process_notebook, process_text
from autofix.newlines import lines as source_lines
from autofix.output.fixes import Hunk, hunks, owners
from autofix.output.locations import placed
from autofix.results import FileResult, Finding

# Beyond this many groups, a group that does not stand alone is only merged with the groups
# after it (each check is a whole analysis of the file).
PAIRING_LIMIT = 12


@dataclass(frozen=True)
class Piece:
    """Hunks (indexes into :attr:`Review.hunks`) offered as one fix, and the findings they fix."""

    hunks: tuple[int, ...]
    findings: tuple[Finding, ...]


class Review:
    """One changed file under review."""

    def __init__(self, result: FileResult, options: Options) -> None:
        assert result.old_text is not None and result.new_text is not None
        self.result = result
        self.options = options.for_path(result.path)
        self.old = result.old_text
        self.new = result.new_text
        self.lines = source_lines(self.old)
        self.hunks: list[Hunk] = hunks(self.old, self.new)
        self._verdicts: dict[tuple[int, ...], bool] = {}

    def text_with(self, chosen: Sequence[int]) -> str:
        """The original text with the hunks ``chosen`` applied."""
        out: list[str] = []
        position = 0
        for index in sorted(chosen):
            hunk = self.hunks[index]
            out.extend(self.lines[position : hunk.start])
            out.extend(hunk.new)
            position = hunk.end
        out.extend(self.lines[position:])
        return "".join(out)

    def verified(self, chosen: Sequence[int]) -> bool:
        """Whether the file with ``chosen`` applied reads, and fixing it gives the whole fix."""
        key = tuple(sorted(set(chosen)))
        if len(key) == len(self.hunks):
            return True  # the whole fix: the engine verified it
        if not key:
            return True
        known = self._verdicts.get(key)
        if known is None:
            text = self.text_with(key)
            process = process_notebook if self.result.notebook else process_text
            # (Read from a file: its project's modules are followed, as they were for the fix.)
            again = process(text, self.result.path, self.options, os.path.isfile(self.result.path))
            known = self._verdicts[key] = again.error is None and (again.new_text or text) == self.new
        return known

    def pieces(self) -> list[Piece]:
        findings = self._located_findings()
        who = owners(findings, self.hunks)
        groups: dict[int | None, list[int]] = {}
        for index, owner in enumerate(who):
            groups.setdefault(owner, []).append(index)
        pending = sorted((tuple(g) for g in groups.values()), key=lambda g: g[0])
        merged: list[tuple[int, ...]] = []
        while pending:
            group = pending.pop(0)
            if self.verified(group):
                merged.append(group)
                continue
            partner = self._partner(group, pending) if len(pending) < PAIRING_LIMIT else None
            if partner is not None:
                pending.remove(partner)
                merged.append(tuple(sorted(group + partner)))
                continue
            # Take the following groups in, one by one, until it stands (all of them does).
            while pending and not self.verified(group):
                group = tuple(sorted(group + pending.pop(0)))
            if not self.verified(group):
                # What depends on earlier pieces: everything becomes one piece.
                group = tuple(sorted({*group, *(i for g in merged for i in g)}))
                merged = []
            merged.append(group)
        merged.sort(key=lambda g: g[0])
        return [Piece(group, self._findings_of(group, findings, who)) for group in merged]

    def _partner(self, group: tuple[int, ...], others: list[tuple[int, ...]]) -> tuple[int, ...] | None:
        def distance(other: tuple[int, ...]) -> int:
            return min(abs(self.hunks[a].start - self.hunks[b].start) for a in group for b in other)

        for other in sorted(others, key=distance):
            if self.verified(group + other):
                return other
        return None

    def _located_findings(self) -> list[Finding]:
        """The result's findings placed in the lines of the file's text (a notebook's JSON)."""
        return placed(self.result) or list(self.result.findings)

    def _findings_of(self, group: tuple[int, ...], located: list[Finding], who: list[int | None]) -> tuple[Finding, ...]:
        """The findings a piece fixes: those owning its hunks, and the fixable ones whose
        lines its hunks touch."""
        chosen = set(group)
        indexes = {who[i] for i in group if who[i] is not None}
        for index, finding in enumerate(located):
            if not finding.fixable or finding.suppressed:
                continue
            if any(_touches(self.hunks[h], finding) for h in chosen):
                indexes.add(index)
        return tuple(self.result.findings[i] for i in sorted(indexes))  # type: ignore[index]


def _touches(hunk: Hunk, finding: Finding) -> bool:
    return hunk.start + 1 <= finding.end_line and finding.line <= max(hunk.end, hunk.start + 1)
