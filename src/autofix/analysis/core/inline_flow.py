"""What a run of statements of one scope reads before it sets it, and sets: the walk that
:mod:`autofix.analysis.migration.inline_names` works out a step's parameters and results
from, and what makes a loop body impossible to split (a ``break`` of the loop, a ``return``,
a ``try``, a ``def``...).

Moved into a function, every name the statements set becomes the function's own: a read of one
before the statements set it would fail (or see something else). What a name holds is followed
by where it is certainly set (the statements' top level and their ``with`` blocks) and where it
may be (under a condition, in a loop).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.program import Program
from autofix.tf.index import Scope


@dataclass(frozen=True)
class NotSplit:
    """Why a loop body cannot be split, at the place that shows it."""

    node: cst.CSTNode
    reason: str


class Unsplittable(Exception):
    def __init__(self, node: cst.CSTNode, reason: str) -> None:
        super().__init__(reason)
        self.refusal = NotSplit(node, reason)


_FORBIDDEN = {
    cst.Return: "a return",
    cst.Global: "a global statement",
    cst.Nonlocal: "a nonlocal statement",
    cst.Import: "an import",
    cst.ImportFrom: "an import",
    cst.Del: "a del statement",
}


class Flow:
    """What a run of statements of one scope reads before it sets it (``outside``), sets
    (``written``, every binding), and certainly sets by its end (``certain``); statements in
    ``skip`` are passed over (``before`` records what was certainly set when each was met)."""

    def __init__(self, program: Program, scope: Scope, skip: set[int]) -> None:
        self.program = program
        self.scope = scope
        self.skip = skip
        self.outside: dict[str, cst.Name] = {}
        self.written: dict[str, list[cst.Name]] = {}
        # The bindings of each name that may be the one it holds at the end.
        self.final: dict[str, list[cst.Name]] = {}
        self.used: set[str] = set()
        self.certain: set[str] = set()
        self.before: dict[int, set[str]] = {}
        self._loops = 0
        self._depth = 0

    def run(self, statements: list[cst.BaseStatement]) -> None:
        bound: set[str] = set()
        self._block(statements, bound)
        self.certain = bound

    # --- statements ------------------------------------------------------------------------------

    def _block(self, statements, bound: set[str]) -> None:
        for statement in statements:
            if id(statement) in self.skip:
                self.before[id(statement)] = set(bound)
            elif isinstance(statement, cst.BaseSmallStatement):
                self._small(statement, bound)
            else:
                self._statement(statement, bound)

    def _nested(self, statements, bound: set[str], loop: bool = False) -> None:
        self._depth += 1
        self._loops += loop
        self._block(statements, set(bound))
        self._loops -= loop
        self._depth -= 1

    def _statement(self, statement: cst.BaseStatement, bound: set[str]) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self._small(small, bound)
        elif isinstance(statement, cst.With) and statement.asynchronous is None:
            for item in statement.items:
                self._reads(item.item, bound)
                if item.asname is not None:
                    self._target(item.asname.name, bound)
            # The body of a with runs whenever the with does.
            self._block(_suite(statement.body), bound)
        elif isinstance(statement, cst.If):
            self._reads(statement.test, bound)
            self._nested(_suite(statement.body), bound)
            if isinstance(statement.orelse, cst.If):
                self._depth += 1
                self._statement(statement.orelse, set(bound))
                self._depth -= 1
            elif statement.orelse is not None:
                self._nested(_suite(statement.orelse.body), bound)
        elif isinstance(statement, cst.For) and statement.asynchronous is None:
            self._reads(statement.iter, bound)
            inner = set(bound)
            self._depth += 1
            self._target(statement.target, inner)
            self._depth -= 1
            self._nested(_suite(statement.body), inner, loop=True)
            if statement.orelse is not None:
                self._nested(_suite(statement.orelse.body), bound)
        elif isinstance(statement, cst.While):
            self._reads(statement.test, bound)
            self._nested(_suite(statement.body), bound, loop=True)
            if statement.orelse is not None:
                self._nested(_suite(statement.orelse.body), bound)
        else:
            raise Unsplittable(statement, (
                f"the step holds {_kind(statement)} (line {self.program.line(statement)}), which autofix does not move into a function"
            ))

    def _small(self, small: cst.BaseSmallStatement, bound: set[str]) -> None:
        line = self.program.line(small)
        if isinstance(small, cst.Expr):
            self._reads(small.value, bound)
        elif isinstance(small, cst.Assign):
            self._reads(small.value, bound)
            for target in small.targets:
                self._target(target.target, bound)
        elif isinstance(small, cst.AugAssign):
            if isinstance(small.target, cst.Name):
                self._reads(small.target, bound, loaded=True)
            else:
                self._reads(small.target, bound)
            self._reads(small.value, bound)
            self._target(small.target, bound)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._reads(small.value, bound)
            self._target(small.target, bound)
        elif isinstance(small, (cst.Assert, cst.Raise, cst.Pass)):
            self._reads(small, bound)
        elif isinstance(small, (cst.Break, cst.Continue)) and self._loops:
            pass
        elif isinstance(small, (cst.Break, cst.Continue)):
            word = "break" if isinstance(small, cst.Break) else "continue"
            raise Unsplittable(small, (
                f"the step holds a {word} (line {line}) of the loop: moved into a function, it would have no loop to leave"
            ))
        else:
            what = _FORBIDDEN.get(type(small), "a statement autofix does not move")
            raise Unsplittable(small, f"the step holds {what} (line {line}), which would mean something else inside a function")

    # --- names -----------------------------------------------------------------------------------

    def _target(self, target: cst.BaseExpression, bound: set[str]) -> None:
        if isinstance(target, cst.Name):
            binding = self.program.index.bindings.get(target)
            if binding is not None and binding.scope is not self.scope:
                raise Unsplittable(target, (
                    f"the step sets {target.value} (line {self.program.line(target)}), a global or outer name of the function "
                    "it is in: moved into a function of its own, it would set a name of its own instead"
                ))
            if binding is not None:
                self.written.setdefault(target.value, []).append(target)
                if self._depth == 0:
                    self.final[target.value] = [target]
                else:
                    self.final.setdefault(target.value, []).append(target)
                bound.add(target.value)
                self.used.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value, bound)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value, bound)
        else:
            self._reads(target, bound)

    def _reads(self, node: cst.CSTNode, bound: set[str], loaded: bool = False) -> None:
        for name in _loads(node, self.program) if not loaded else [node]:
            if isinstance(name, (cst.NamedExpr, cst.Yield, cst.Await)):
                what = {cst.NamedExpr: "an assignment expression", cst.Yield: "a yield", cst.Await: "an await"}[type(name)]
                raise Unsplittable(name, f"the step holds {what} (line {self.program.line(name)}), which autofix does not move into a function")
            if not self._ours(name):  # type: ignore[arg-type]
                continue
            self.used.add(name.value)  # type: ignore[union-attr]
            if name.value not in bound:  # type: ignore[union-attr]
                self.outside.setdefault(name.value, name)  # type: ignore[union-attr, arg-type]

    def _ours(self, name: cst.Name) -> bool:
        """Whether a read is of a name of the loop's own scope (not of a comprehension's or a
        lambda's, not an import or a builtin)."""
        access = self.program.access(name)
        if access is None:
            return False
        if any(b.scope is self.scope for b in access.referents):
            return True
        if not access.referents or all(b.kind == "builtin" for b in access.referents):
            # Bound in this scope, but only further down: read on a later pass of the loop.
            return bool(self.scope.assignments(name.value)) and access.scope is self.scope
        return False


def _loads(node: cst.CSTNode, program: Program) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Visitor(cst.CSTVisitor):
        def on_visit(self, child: cst.CSTNode) -> bool:
            if isinstance(child, (cst.NamedExpr, cst.Yield, cst.Await)):
                found.append(child)
            elif isinstance(child, cst.Name) and program.access(child) is not None:
                found.append(child)
            return True

    node.visit(Visitor())
    return found


def _suite(suite: cst.BaseSuite) -> list:
    return list(suite.body)


def _kind(statement: cst.BaseStatement) -> str:
    if isinstance(statement, (cst.Try, cst.TryStar)):
        return "a try statement"
    if isinstance(statement, cst.FunctionDef):
        return "a function definition"
    if isinstance(statement, cst.ClassDef):
        return "a class definition"
    if isinstance(statement, (cst.For, cst.With)):
        return "an async statement"
    return "a statement"


def position_of(program: Program, node: cst.CSTNode) -> tuple[int, int]:
    where = program.position(node).start
    return (where.line, where.column)
