"""The names of a training step written inline in a loop body (see :mod:`.inline_steps`): what
its statements read before they set it, what they set, and from that what the function they
are moved into takes and hands back.

Moved into a function, every name the statements set becomes the function's own: a read of
one before the step sets it would fail (or see something else), and a read after the step
must get it from the function. A name read from outside keeps its value when it comes in as a
parameter, or is read where it is when it does not change while the loop runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import libcst as cst

from autofix.analysis.facts import Facts
from autofix.analysis.losses import loss_terms_of
from autofix.analysis.program import Program
from autofix.analysis.steps import Steps
from autofix.tf.index import Scope


class Analyses(Protocol):
    """What the names of a step are worked out from (an :class:`~.inline_steps.InlineSteps`)."""

    program: Program
    facts: Facts
    steps: Steps


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


# --- parameters and what is handed back -------------------------------------------------------------


def loop_targets(owner: Analyses, loop: cst.For | cst.While) -> tuple[list[str], set[str]]:
    """The names a ``for`` loop binds to its batch, and those it binds to a counter (the index
    of ``enumerate``, the values of ``range``)."""
    if not isinstance(loop, cst.For):
        return [], set()
    names = owner.facts.names_of
    iterable, target = loop.iter, loop.target
    if isinstance(iterable, cst.Call) and "builtins.enumerate" in names(iterable.func) and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        return _names(target.elements[1].value), set(_names(target.elements[0].value))
    if _counts(owner, iterable):
        return [], set(_names(target))
    return _names(target), set()


def _counts(owner: Analyses, iterable: cst.BaseExpression) -> bool:
    """``range(...)``, also as what a progress bar wraps (``tqdm(range(n))``)."""
    while isinstance(iterable, cst.Call):
        if "builtins.range" in owner.facts.names_of(iterable.func):
            return True
        if not iterable.args:
            return False
        iterable = iterable.args[0].value
    return False


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


def split_names(
    owner: Analyses, loop, body: list[cst.BaseStatement], start: int, end: int, flow: Flow, moved: list[cst.SimpleStatementLine]
) -> tuple[list[str], list[str]]:
    """What the step's function takes and hands back; raises :class:`Unsplittable`."""
    program = owner.program
    step = body[start:end]
    batch, counters = loop_targets(owner, loop)
    params: list[str] = []
    for name, node in flow.outside.items():
        line = program.line(node)
        if name in counters:
            raise Unsplittable(node, (
                f"{name}, the loop's counter, is read in the step (line {line}): passed in, it would have the traced "
                "step traced again for every value; count in a tf.Variable the loop increments, or keep what reads it "
                "out of the training step, then migrate"
            ))
        if name in batch:
            params.append(name)
            continue
        where = _bound_around(program, flow.scope, name, loop, body, start, end)
        if "before" in where:
            params.append(name)  # made in the body before the step: a batch the loop reads
        elif name in flow.written:
            raise Unsplittable(node, (
                f"{name} is carried from one step to the next (read on line {line} before the step sets it): "
                "moved into a function, the step would not see the value of the pass before"
            ))
        elif "after" in where:
            raise Unsplittable(node, (
                f"{name} is read in the step (line {line}) and set after it in the loop (line {where['after']}): "
                "it changes from one step to the next"
            ))
        elif "outer" in where:
            params.append(name)  # set once per pass of an outer loop: passed in
    order = {name: i for i, name in enumerate(batch)}
    params.sort(key=lambda n: (order.get(n, len(order)), 0))
    return params, _returns(owner, loop, step, flow, moved)


def _bound_around(program: Program, scope: Scope, name: str, loop, body, start: int, end: int) -> dict[str, int]:
    """Where else in the loops ``name`` is set: in the body ``before`` the step, ``after`` it,
    or in an ``outer`` loop (each with a line)."""
    found: dict[str, int] = {}
    outer = _outermost(program, loop)
    for binding in scope.assignments(name):
        node = binding.node
        chain = list(program.ancestors(node))
        if loop.body in chain:
            top = next(s for s in body if s is node or s in chain)
            index = body.index(top)
            key = "before" if index < start else "after" if index >= end else None
            if key is not None:
                found.setdefault(key, program.line(node))
        elif (outer is node or outer in chain) and not (isinstance(loop, cst.For) and any(c is loop.target for c in chain) or node is loop.target):
            found.setdefault("outer", program.line(node))
    return found


def _outermost(program: Program, loop: cst.CSTNode) -> cst.CSTNode:
    outer = loop
    for ancestor in program.ancestors(loop):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            outer = ancestor
    return outer


def _inside(program: Program, node: cst.CSTNode, statements: list[cst.CSTNode]) -> bool:
    ids = {id(s) for s in statements}
    return id(node) in ids or any(id(a) in ids for a in program.ancestors(node))


def _returns(owner: Analyses, loop, step: list[cst.BaseStatement], flow: Flow, moved: list[cst.SimpleStatementLine]) -> list[str]:
    program, facts = owner.program, owner.facts
    first = _at(program, step[0])
    outer = _outermost(program, loop)
    shown = {n for p in moved for n in _read_names(program, p)}
    reads_in_loop: dict[str, list[cst.Name]] = {}
    for name in _read_nodes(program, outer):
        reads_in_loop.setdefault(name.value, []).append(name)
    returns = []
    losses: set[int] | None = None
    for name, nodes in flow.written.items():
        later: list[cst.CSTNode] = []
        for node in nodes:
            for use in facts.uses(node):
                if _inside(program, use, step):  # type: ignore[arg-type]
                    continue
                function = _function_of(program, use, flow.scope)
                if function is not None:
                    raise Unsplittable(use, (
                        f"{name}, which the step sets (line {program.line(node)}), is also read by {function} (line "
                        f"{program.line(use)}): moved into a function, the step would no longer set the one it reads"
                    ))
                later.append(use)
        for use in reads_in_loop.get(name, ()):
            if not _inside(program, use, step) and _at(program, use) < first and program.scope(use) is flow.scope:  # type: ignore[arg-type]
                later.append(use)  # read again on the next pass
        if name in shown:
            later.extend(p for p in moved if name in _read_names(program, p))
        if not later:
            continue
        if name not in flow.certain:
            raise Unsplittable(nodes[0], (
                f"{name} is set only on some paths of the step (line {program.line(nodes[0])}) and read after it "
                f"(line {program.line(later[0])})"
            ))
        if losses is None:
            losses = _loss_bindings(owner, step)
        if not all(id(n) in losses for n in flow.final.get(name, nodes)):
            raise Unsplittable(nodes[-1], (
                f"{name}, which the step sets (line {program.line(nodes[-1])}), is read after it (line {program.line(later[0])}): "
                "strategy.run can hand back only the loss (summed over the replicas), and it is not the loss the step "
                "differentiates; read it in the step, or compute it again after it, then migrate"
            ))
        returns.append(name)
    if returns:
        guarded = _try_around(program, loop, flow.scope.node)
        if guarded is not None:
            raise Unsplittable(loop, (
                f"the loop is inside a try statement (line {program.line(guarded)}): if the step failed half-way, what "
                f"it hands back ({', '.join(returns)}) would keep its value of the step before, where the loop's own "
                "statements had set part of it"
            ))
    return returns


def _try_around(program: Program, loop: cst.CSTNode, owner: cst.CSTNode) -> cst.CSTNode | None:
    """The ``try`` statement of the loop's own function (or module) that holds it, if any."""
    for ancestor in program.ancestors(loop):
        if ancestor is owner:
            return None
        if isinstance(ancestor, (cst.Try, cst.TryStar)):
            return ancestor
    return None


def _function_of(program: Program, node: cst.CSTNode, scope: Scope) -> str | None:
    """The function or lambda (other than the loop's own scope) that the read ``node`` is in."""
    for ancestor in program.ancestors(node):
        if ancestor is scope.node:
            return None
        if isinstance(ancestor, cst.FunctionDef):
            return f"{ancestor.name.value}()"
        if isinstance(ancestor, cst.Lambda):
            return "a lambda"
        if isinstance(ancestor, cst.ClassDef):
            return f"the class {ancestor.name.value}"
    return None


def _read_nodes(program: Program, root: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Visitor(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if program.access(node) is not None:
                found.append(node)

    root.visit(Visitor())
    return found


def _read_names(program: Program, root: cst.CSTNode) -> set[str]:
    return {n.value for n in _read_nodes(program, root)}


def _loss_bindings(owner: Analyses, step: list[cst.BaseStatement]) -> set[int]:
    """The bindings the step's differentiated values are computed through (``loss``, the
    terms of ``loss = reconstruction + kl``), not the values a loss is computed from."""
    steps, facts = owner.steps, owner.facts
    found: set[int] = set()
    for statement in step:
        for call in [c for c in _calls(statement)]:
            target = steps.differentiated(call)
            if target is None:
                continue
            for term in loss_terms_of(steps, target):
                found.update(id(b) for b in term.bindings)
            if isinstance(target, cst.Name):
                found.update(id(b) for b in facts.reaching_bindings(target) or ())
    return found


def _calls(root: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    root.visit(Visitor())
    return found


def _at(program: Program, node: cst.CSTNode) -> tuple[int, int]:
    where = program.position(node).start
    return (where.line, where.column)
