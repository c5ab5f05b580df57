"""The base class every rule in ``codemods/`` derives from.

A rule is a libcst codemod command, so ``python -m libcst.tool codemod <module>.<Class> PATH``
runs it directly; the engine instead calls :meth:`Rule.run` with a shared
:class:`~autofix.tf.program.Program`, so that one parse and one metadata pass serve all rules.
Rules never print: they return what they found and the tree they would write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext

from autofix.tf.program import Program

NO_FIX = "no automatic fix: "
# The reason a rule gives for a place it leaves alone because a comment says so.
SUPPRESSED = "suppressed by an autofix: ignore comment"


@dataclass(frozen=True)
class Example:
    """Code before and after the rule runs; ``after`` is None when the rule leaves it alone."""

    before: str
    after: str | None = None


@dataclass(frozen=True)
class Report:
    """A finding as a rule sees it: anchored to a node of the tree the rule was given."""

    node: cst.CSTNode
    message: str
    # None when the rule fixes it; otherwise why it does not (shown after "no automatic fix: ").
    reason: str | None = None


class Outcome:
    """What a rule found, and the tree it would write (None when it changes nothing).

    The tree is built only when asked for: ``check`` needs to know that a fix exists, not
    what it is, and building it is the expensive part.
    """

    def __init__(self, reports: list[Report] | None = None, module: cst.Module | None = None, edits=None, tree: cst.Module | None = None) -> None:
        self.reports = reports or []
        self._module = module
        self._edits = edits if edits else None
        self._tree = tree

    @property
    def changes(self) -> bool:
        return self._module is not None or self._edits is not None

    @property
    def module(self) -> cst.Module | None:
        if self._module is None and self._edits is not None:
            self._module = self._edits.apply(self._tree)
        return self._module


class Rule(CodemodCommand):
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    # An unsafe rule's fix can change what the program computes; it runs only when asked.
    SAFE: ClassVar[bool] = True
    EXAMPLES: ClassVar[tuple[Example, ...]] = ()

    def __init__(self, context: CodemodContext | None = None) -> None:
        super().__init__(context or CodemodContext())

    def run(self, program: Program) -> Outcome:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        """Entry point for ``python -m libcst.tool codemod``: warn for each finding, return the fix."""
        program = Program(tree)
        outcome = self.run(program)
        for report in outcome.reports:
            where = program.position(report.node).start
            suffix = f" ({NO_FIX}{report.reason})" if report.reason else ""
            self.warn(f"{where.line}:{where.column + 1}: {self.CODE} {report.message}{suffix}")
        return outcome.module if outcome.module is not None else tree
