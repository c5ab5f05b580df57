"""``autofix migrate``: what the engine does differently for a file it moves to a strategy.

A migration is the rules' own fix of the file, started by the migration rule (TFD010, which
creates the strategy) and run until nothing changes (each rule may find work only once
another has fixed something: the dataset is distributed once a step runs per replica, and only
then is its batch the one a replica is fed). It is kept only when ``check`` finds nothing left
in the migrated code: a finding there (a loss no rule can rescale, data that cannot be
distributed) means the migration would not be right, and the file is left as it was, with each
such finding named (as a TFD010 finding, at the original line it comes from).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import replace

import libcst as cst

from autofix.analysis.migration.importers import broken_importers
from autofix.analysis.migration.migrated import unscaled_batches
from autofix.analysis.migration.single_device import SingleDevice
from autofix.analysis.program import Program
from autofix.analysis.syntax import CELL_MARKER
from autofix.prefilter import NOT_TRAINING  # noqa: F401  (the engine names it through this module)
from autofix.results import NOT_MIGRATED, Finding

# The rules settle in at most this many passes after the first (measured on the corpus: two).
ROUNDS = 4


def uses_strategy(program: Program) -> bool:
    """Whether the file already uses tf.distribute: then the rules apply, not a migration."""
    return SingleDevice.of(program).uses_strategy


def trains(program: Program) -> bool:
    """Whether the file trains (``fit``, ``train_on_batch``, an optimizer update)."""
    return SingleDevice.of(program).trains


def unscaled(program: Program) -> list[tuple[int, str]]:
    """Where migrated code feeds training a batch not shown to be the global batch: (line,
    why) for each."""
    return [(program.line(r.node), r.reason) for r in unscaled_batches(program)]


def importers_broken(original: Program, migrated: Program | None, new_text: str) -> list[tuple[int, str]]:
    """Where the migration makes a definition read a global bound only when the module runs as
    a script, while another module of the project uses it: (line of the migrated code, why)
    for each (see :mod:`autofix.analysis.migration.importers`)."""
    if original.path is None:
        return []
    if migrated is None:
        migrated = Program(cst.parse_module(new_text), new_text)
    module = os.path.basename(original.path)
    return [(b.read.line, b.reason(module)) for b in broken_importers(original, migrated)]


def unfinished(program: Program, outcome) -> list[tuple[int, str]]:
    """Where migrated code still trains on one device, with why: a first pass moved a step
    written in a loop into a function (see :mod:`autofix.analysis.migration.inline_steps`), and the
    migration rule could not then migrate the file (its findings on that code say why)."""
    single = SingleDevice.of(program)
    if single.uses_strategy or not single.trains:
        return []
    reports = [r for r in (outcome.reports if outcome is not None else ()) if r.reason]
    found = [(program.line(r.node), r.reason) for r in reports]
    return found or [(1, "no strategy was made")]


def left_over(findings: list[Finding], unsafe_fixes: bool) -> list[Finding]:
    """The findings of ``check`` on migrated code that stop the migration (suggestions and
    suppressed findings do not)."""
    return [f for f in findings if not f.suppressed and not (f.unsafe and not unsafe_fixes)]


def with_migration_reasons(left: list[Finding], program: Program | None, settled: dict) -> list[Finding]:
    """``left`` with the reason the migration's own last pass gave for a finding at the same
    place (a rule that declines a rewrite only when it migrates: what ``check`` would offer
    to fix there is no migration of the original), where ``check`` gives none."""
    if program is None:
        return left
    reasons = {
        (rule.CODE, program.line(report.node)): report.reason
        for rule, outcome in settled.items()
        for report in (outcome.reports if outcome is not None else ())
        if report.reason
    }
    return [replace(f, reason=f"no automatic fix: {reasons[f.code, f.line]}") if f.reason is None and (f.code, f.line) in reasons else f for f in left]


def at_lines(original: str, migrated: str, lines: list[int]) -> str:
    """", at line 12" / ", at lines 12, 40" (the form a notebook's reasons are mapped to its cells
    from): where in the original what stops a migration is (``lines``: of the migrated code),
    for the finding that says it stopped at another line."""
    mapping = LineMap(original, migrated)
    found = sorted({mapping.original(line) for line in lines})
    if not found:
        return ""
    if len(found) == 1:
        return f", at line {found[0]}"
    return f", at lines {', '.join(map(str, found))}"


def unscaled_refusals(code: str, name: str, original: str, migrated: str, places: list[tuple[int, str]]) -> list[Finding]:
    """One finding of the migration rule for each batch in migrated code that is not shown to
    be global, at the line of the original it comes from."""
    lines = LineMap(original, migrated)
    found = []
    for line, why in places:
        at = lines.original(line)
        why = lines.mapped(why)
        found.append(Finding(code, name, NOT_MIGRATED, at, 1, at, 1, False, f"no automatic fix: {why}"))
    return found


def refusals(code: str, name: str, original: str, migrated: str, left: list[Finding]) -> list[Finding]:
    """One finding of the migration rule (``code``, ``name``) for each finding left in the
    migrated code, placed at the line of the original it comes from; line numbers in its
    reason are the original's too."""
    lines = LineMap(original, migrated)
    found = []
    for finding in left:
        line = lines.original(finding.line)
        end = max(line, lines.original(finding.end_line))
        why = lines.mapped(finding.reason or "it is not fixed").removeprefix("no automatic fix: ")
        found.append(
            Finding(
                code=code,
                name=name,
                message=f"{NOT_MIGRATED}: the migrated code would have {finding.code} {lines.mapped(finding.message)}",
                line=line,
                column=1,
                end_line=end,
                end_column=1,
                fixable=False,
                reason=f"no automatic fix: {why}",
            )
        )
    return found


def refused(findings: list[Finding], why: str) -> list[Finding]:
    """The first pass's findings, none of them fixed (the migration's says so)."""
    return [replace(f, message=NOT_MIGRATED, fixable=False, reason=f"no automatic fix: {why}") if f.fixable else f for f in findings]


def _unique_lines(lines: list[str]) -> dict[str, int]:
    """Each line of code (stripped, more than a bracket or a keyword) found only once, with its number."""
    seen: dict[str, int] = {}
    twice: set[str] = set()
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if len(text) < 12 or text.startswith("#"):
            continue
        if text in seen:
            twice.add(text)
        seen[text] = number
    return {text: number for text, number in seen.items() if text not in twice}


class LineMap:
    """Lines of migrated code mapped back to the original's: an unchanged line to itself, a
    changed one to the original line it replaces (line by line; lines added by the change
    to its last original line), an added one to the original line that follows it."""

    def __init__(self, original: str, migrated: str) -> None:
        old = original.splitlines()
        new = migrated.splitlines()
        self.old = old
        self.count = max(len(old), 1)
        self.map: dict[int, int] = {}
        # A statement the migration moved (the loop's sampler call, now after the step it
        # made a function of): a line found once, word for word, in each text is that line.
        unique_old = _unique_lines(old)
        unique_new = _unique_lines(new)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            for j in range(j1, j2):
                moved = new[j].strip()
                if tag == "equal":
                    self.map[j + 1] = i1 + (j - j1) + 1
                elif moved in unique_old and moved in unique_new:
                    self.map[j + 1] = unique_old[moved]
                elif tag == "replace":
                    self.map[j + 1] = i1 + min(j - j1, i2 - i1 - 1) + 1
                else:
                    self.map[j + 1] = min(i1 + 1, self.count)

    def mapped(self, text: str) -> str:
        """``text`` with every "line N" of the migrated code made the original's."""
        return re.sub(r"\b(lines?) (\d+)", lambda m: f"{m.group(1)} {self.original(int(m.group(2)))}", text)

    def original(self, line: int) -> int:
        found = self.map.get(line, min(line, self.count))
        # A notebook's cell boundary is no line of a cell: the line after it is.
        while found < len(self.old) and self.old[found - 1].startswith(f"{CELL_MARKER}("):
            found += 1
        return found
