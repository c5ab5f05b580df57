"""The base class every rule in ``codemods/`` derives from.

A rule is a class with a code, a name, a one-line description, a docstring that says what it
will not fix, before/after :class:`Example` data, and one method, :meth:`Rule.check`, which
reads the shared analysis of the file and calls :meth:`Rule.report` for each finding and
``self.edits`` (a :class:`~autofix.codegen.BlockEdits`) for each change. The base applies
``# autofix: ignore`` comments, merges repeated reports of one place, and hands the engine an
:class:`Outcome`. Rules never print.

The engine calls :meth:`Rule.run` with a shared :class:`~autofix.analysis.program.Program`,
so that one parse and one analysis serve all rules.

A rule is also a libcst codemod: ``python -m libcst.tool codemod <module>.<Class> PATH`` runs
it. The tool makes the command with a ``CodemodContext``; given one, the rule class makes an
instance of a ``CodemodCommand`` made for it (see :func:`codemod_command`). Rules do not
derive from ``CodemodCommand`` themselves because importing ``libcst.codemod`` (and with it
``libcst.matchers``) takes almost half a second, which every ``autofix`` run would pay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Callable, ClassVar, Mapping

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.codegen import BlockEdits, NotFound

NO_FIX = "no automatic fix: "
# Why the finding of an unsafe rule that is not a suggestion is not fixed by default.
UNSAFE_FIX = "a fix that may change what the script computes is applied with --unsafe-fixes"
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
    # A suggestion (shown, not failing ``check``) whose fix changes how correct code runs: it
    # is made only with --unsafe-fixes, as an unsafe rule's are.
    suggestion: bool = False
    # A finding placed in another module of the project (the node is where this file uses
    # what that module makes): path, line, column, end line, end column, and whether an
    # ``# autofix: ignore`` comment there suppresses it. Never fixed here.
    elsewhere: tuple[str, int, int, int, int, bool] | None = None
    # Other places that explain it: (path, line, message); path None for this file.
    related: tuple[tuple[str | None, int, str], ...] = ()


class Outcome:
    """What a rule found, and the tree it would write (None when it changes nothing).

    The tree is built only when asked for: ``check`` needs to know that a fix exists, not
    what it is, and building it is the expensive part.
    """

    def __init__(
        self,
        reports: list[Report] | None = None,
        module: cst.Module | None = None,
        edits: BlockEdits | None = None,
        tree: cst.Module | None = None,
        parents: Mapping[cst.CSTNode, cst.CSTNode] | None = None,
    ) -> None:
        self._reports = reports or []
        self._sort: Callable[[Report], Any] | None = None
        self._module = module
        self._edits = edits if edits else None
        self._tree = tree
        # The tree's parent of each node: the edits then rebuild only the paths to the nodes
        # they change.
        self._parents = parents

    @property
    def reports(self) -> list[Report]:
        """The findings, in the order of their places in the file."""
        if self._sort is not None:
            self._reports.sort(key=self._sort)
            self._sort = None
        return self._reports

    def sorted_by(self, key: Callable[[Report], Any]) -> "Outcome":
        """Sort the reports by ``key`` when they are first read: a pass that only verifies a
        fix never reads them, and needs no positions."""
        self._sort = key
        return self

    @property
    def changes(self) -> bool:
        return self._module is not None or self._edits is not None

    @property
    def module(self) -> cst.Module | None:
        if self._module is None and self._edits is not None:
            self._module = self._edits.apply(self._tree, self._parents)
        return self._module


class Rule:
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    # An unsafe rule's fix can change what the program computes; it runs only when asked.
    SAFE: ClassVar[bool] = True
    # An opt-in rule runs only when it is selected by its full code (not by a prefix or ALL).
    OPT_IN: ClassVar[bool] = False
    # A migration rule runs only under ``autofix migrate`` (which always runs it, unless it is
    # ignored): it moves a file that trains on one device to a strategy.
    MIGRATION: ClassVar[bool] = False
    # A rule whose result depends on files other than the one it checks (a module it imports)
    # must say so: the result cache keys a file by its own bytes only, so such a rule turns
    # the cache off while it runs. No rule does today (tests/test_cache.py checks that rules
    # open no file).
    CROSS_FILE: ClassVar[bool] = False
    # A suggestion is shown but does not fail `check` (unless --unsafe-fixes); by default the
    # findings of an unsafe rule are suggestions. An unsafe rule whose findings are real bugs
    # (only its fix is unsafe) sets this to False.
    SUGGESTION: ClassVar[bool | None] = None
    EXAMPLES: ClassVar[tuple[Example, ...]] = ()

    program: Program
    facts: Facts
    edits: BlockEdits

    @classmethod
    def is_suggestion(cls) -> bool:
        return (not cls.SAFE) if cls.SUGGESTION is None else cls.SUGGESTION

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

    def run(self, program: Program, unsafe_fixes: bool = False) -> Outcome:
        """Check ``program`` (when :meth:`applies`), and say what was found and how to fix it.
        ``unsafe_fixes``: also plan the fixes of the rule's suggestions."""
        self.unsafe_fixes = unsafe_fixes
        self.program = program
        self.facts = Facts.of(program)
        self.edits = BlockEdits()
        self._reports: dict[tuple, Report] = {}
        if self.applies():
            self.check()
        blind = _read_blind(program)
        if blind is not None:
            # Nothing is fixed on names whose meaning is only assumed: reported, with why.
            self.edits = BlockEdits()
            self._reports = {k: r if r.reason is not None or r.suggestion else replace(r, reason=blind) for k, r in self._reports.items()}
        outcome = Outcome(list(self._reports.values()), edits=self.edits, tree=program.module, parents=program.index.parents)
        return outcome.sorted_by(lambda r: _start(program, r.node))

    def applies(self) -> bool:
        """Whether the file can have findings at all: by default, when it makes a strategy."""
        return bool(self.facts.strategies)

    def check(self) -> None:  # pragma: no cover - abstract
        """Find what is wrong in ``self.program``: :meth:`report` each finding, and plan each
        fix in ``self.edits`` (only where :meth:`report` said the place may be fixed)."""
        raise NotImplementedError

    def suggest(
        self,
        node: cst.CSTNode,
        message: str,
        plan: Callable[[BlockEdits], None] | None = None,
        related: tuple[tuple[str | None, int, str], ...] = (),
        reason: str | None = None,
    ) -> bool:
        """Report ``node`` as a suggestion: correct code that could be better (a training step
        run eagerly). Its fix (``plan``) is planned to know whether there is one, but kept only
        with --unsafe-fixes: by default correct code is left byte for byte as it is."""
        key = (id(node), message)
        if plan is None:
            reason = reason or "no fix is planned for it"
        elif self.suppressed(node):
            reason = SUPPRESSED
        else:
            edits = BlockEdits()
            try:
                plan(edits)
                reason = None
            except NotFound as why:
                reason = str(why)
            if reason is None and self.unsafe_fixes:
                self.edits.extend(edits)
        if key not in self._reports:
            self._reports[key] = Report(node, message, reason, suggestion=True, related=related)
        return reason is None and self.unsafe_fixes

    def report_elsewhere(
        self, node: cst.CSTNode, message: str, reason: str, place: tuple[str, int, int, int, int, bool], related: str
    ) -> None:
        """Record a finding whose place is in another module of the project (``place``: path,
        line, column, end line, end column, suppressed there), found through ``node`` of this
        file, which the finding names as its related place with the message ``related``
        (``used by trainer.py:26``). It is not fixed: ``reason`` says why. One place found
        through several nodes (two steps using one loss function) is one finding, naming each."""
        key = ("elsewhere", message, place[:3])
        here = (None, self.program.line(node), related)
        known = self._reports.get(key)
        if known is None:
            self._reports[key] = Report(node, message, reason, elsewhere=place, related=(here,))
        elif here not in known.related:
            self._reports[key] = replace(known, related=(*known.related, here))

    def report(
        self, node: cst.CSTNode, message: str, reason: str | None = None,
        related: tuple[tuple[str | None, int, str], ...] = (), suggestion: bool = False,
    ) -> bool:
        """Record a finding at ``node``: fixable when ``reason`` is None, otherwise reported
        with why not. Returns whether the rule may fix it, which it may not where an
        ``# autofix: ignore`` comment covers the place. A place reported twice is one finding
        (the first reason that forbids a fix wins). ``related``: other places that explain it
        ((path, line, message), path None for this file; another module of the project).
        ``suggestion``: what the file says leaves it open whether this is a bug (shown, not
        failing ``check``; its fix, planned only with --unsafe-fixes, is applied only then)."""
        if reason is None and self.suppressed(node):
            reason = SUPPRESSED
        key = (id(node), message)
        known = self._reports.get(key)
        if known is not None:
            if known.reason is None and reason is not None:
                self._reports[key] = Report(node, message, reason, suggestion=known.suggestion, related=known.related or related)
            return self._reports[key].reason is None
        self._reports[key] = Report(node, message, reason, suggestion=suggestion, related=related)
        return reason is None

    def fix(
        self, node: cst.CSTNode, message: str, plan: Callable[[BlockEdits], None],
        related: tuple[tuple[str | None, int, str], ...] = (), refused: str | None = None,
    ) -> bool:
        """Report ``node`` and plan its fix with ``plan(edits)``. When ``plan`` raises
        :class:`~autofix.codegen.NotFound`, nothing it planned is kept and the finding says
        why (with the message ``refused`` instead, when given: a message that says what the
        fix does must not stand over a fix that was not made); a suppressed place is reported
        without calling it. Returns whether it was fixed. ``related``: as for :meth:`report`."""
        if self.suppressed(node):
            return self.report(node, message, related=related)
        edits = BlockEdits()
        try:
            plan(edits)
        except NotFound as why:
            return self.report(node, refused or message, str(why), related)
        self.edits.extend(edits)
        return self.report(node, message, related=related)

    def suppressed(self, node: cst.CSTNode) -> bool:
        """Whether an ``# autofix: ignore`` comment for this rule covers ``node``."""
        return self.program.suppressed(node, self.CODE)


def _read_blind(program: Program) -> str | None:
    """Why no fix is made in a file that reads ``tf`` (or ``np``) only through a star
    import, or a ``from m import tf``, of a module autofix has not read (the file alone, or a
    module outside its project) or that does not bind it as the library: what the file takes
    from there is assumed, not seen. None otherwise."""
    index = program.index
    if not index.conventional:
        return None
    from autofix.analysis.project.imports import ProjectImports

    from autofix.analysis.project.imports import _load

    imports = ProjectImports.of(program)
    named = " import " + ", ".join(sorted(index.conventional))
    paths = [
        (m, level, imports.module_path(m, level), spelled)
        for modules, spelled in ((index.star_modules, " import *"), (index.conventional_modules, named))
        for m, level in modules
    ]
    summaries = [_load(path) for _m, _level, path, _spelled in paths if path is not None]
    # Read, and binding the names as the libraries they are taken for (``import tensorflow as tf``).
    seen = all(
        any(
            summary is not None and (d := summary.definitions.get(name)) is not None and d.kind == "import"
            and d.source is not None and d.source[0].split(".")[0] == {"tf": "tensorflow", "np": "numpy"}[name]
            for summary in summaries
        )
        for name in index.conventional
    )
    if seen:
        return None
    unread = next((p for p in paths if p[2] is None), None)
    names = " and ".join(sorted(index.conventional))
    verb = "comes" if len(index.conventional) == 1 else "come"
    if unread is None:
        module, level, _path, spelled = paths[0]
        return (
            f"{names} {verb} from `from {'.' * level}{module}{spelled}`, whose module does not bind "
            f"{'it' if len(index.conventional) == 1 else 'them'} itself: what the file takes from there is not known, so nothing is changed"
        )
    module, level, _path, spelled = unread
    return (
        f"{names} {verb} from `from {'.' * level}{module}{spelled}`, which autofix "
        "did not read (run it on the repository): what the file takes from there is not known, so nothing is changed"
    )


def _start(program: Program, node: cst.CSTNode) -> tuple[int, int]:
    start = program.position(node).start
    return start.line, start.column


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
