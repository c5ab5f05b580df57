"""The base class every rule in ``codemods/`` derives from.

The engine calls :meth:`Rule.run` with a shared :class:`~autofix.tf.program.Program`, so that
one parse and one metadata pass serve all rules. Rules never print: they return what they found
and the tree they would write.

A rule is also a libcst codemod: ``python -m libcst.tool codemod <module>.<Class> PATH`` runs it.
The tool makes the command with a ``CodemodContext``; given one, the rule class makes an instance
of a ``CodemodCommand`` made for it (see :func:`codemod_command`). Rules do not derive from
``CodemodCommand`` themselves because importing ``libcst.codemod`` (and with it
``libcst.matchers``) takes almost half a second, which every ``autofix`` run would pay.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import libcst as cst

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


class Rule:
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    # An unsafe rule's fix can change what the program computes; it runs only when asked.
    SAFE: ClassVar[bool] = True
    EXAMPLES: ClassVar[tuple[Example, ...]] = ()

    def __new__(cls, context: Any = None, **codemod_args: Any) -> Any:
        if context is None:
            return super().__new__(cls)
        # ``python -m libcst.tool codemod`` makes the command with a CodemodContext.
        return codemod_command(cls)(context)

    # What ``python -m libcst.tool codemod`` asks of a command class besides making it.
    @staticmethod
    def add_args(parser: Any) -> None:
        """Rules take no arguments."""

    @classmethod
    def get_inherited_dependencies(cls) -> Any:
        return codemod_command(cls).get_inherited_dependencies()

    def run(self, program: Program) -> Outcome:  # pragma: no cover - abstract
        raise NotImplementedError


@lru_cache(maxsize=None)
def codemod_command(rule: type[Rule]) -> type:
    """A libcst ``CodemodCommand`` that runs ``rule``: it warns for each finding and returns
    the fixed tree."""
    from libcst.codemod import CodemodCommand

    class Command(CodemodCommand):
        DESCRIPTION = rule.DESCRIPTION

        def transform_module_impl(self, tree: cst.Module) -> cst.Module:
            program = Program(tree)
            outcome = rule().run(program)
            for report in outcome.reports:
                where = program.position(report.node).start
                suffix = f" ({NO_FIX}{report.reason})" if report.reason else ""
                self.warn(f"{where.line}:{where.column + 1}: {rule.CODE} {report.message}{suffix}")
            return outcome.module if outcome.module is not None else tree

        def __reduce__(self):
            # libcst's parallel runner pickles the command: rebuild it from the rule's class.
            return (rule, (self.context,))

    Command.__name__ = Command.__qualname__ = f"{rule.__name__}Command"
    Command.__module__ = rule.__module__
    return Command
