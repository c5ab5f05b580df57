"""What the function a training step written inline in a loop body moves into (see
:mod:`.inline_steps`) takes and hands back, from what its statements read before they set it
and set (:mod:`autofix.analysis.core.inline_flow`).

A read after the step of a name it sets must get it from the function. A name read from outside
keeps its value when it comes in as a parameter, or is read where it is when it does not change
while the loop runs.
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from autofix.analysis.facts.dataflow import progress_bar_iterable
from autofix.analysis.facts.script import Facts
from autofix.analysis.core.inline_flow import Flow, Unsplittable, position_of
from autofix.analysis.migration.step_returns import Combining, Declined
from autofix.analysis.steps.losses import loss_terms_of
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.tf.index import Scope


class Analyses(Protocol):
    """What the names of a step are worked out from (an :class:`~.inline_steps.InlineSteps`)."""

    program: Program
    facts: Facts
    steps: Steps


def loop_targets(owner: Analyses, loop: cst.For | cst.While) -> tuple[list[str], set[str]]:
    """The names a ``for`` loop binds to its batch, and those it binds to a counter (the index
    of ``enumerate``, the values of ``range``, also zipped with the batches: ``for i, batch in
    zip(range(n), ds)``), through a progress bar (``tqdm(...)``)."""
    if not isinstance(loop, cst.For):
        return [], set()
    return _targets(owner, loop.iter, loop.target)


def _targets(owner: Analyses, iterable: cst.BaseExpression, target: cst.BaseExpression) -> tuple[list[str], set[str]]:
    names = owner.facts.names_of
    while isinstance(iterable, cst.Call) and (wrapped := progress_bar_iterable(owner.facts, iterable)) is not None:
        iterable = wrapped
    if isinstance(iterable, cst.Call) and "builtins.enumerate" in names(iterable.func) and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        return _names(target.elements[1].value), set(_names(target.elements[0].value))
    if (
        isinstance(iterable, cst.Call)
        and "builtins.zip" in names(iterable.func)
        and isinstance(target, (cst.Tuple, cst.List))
        and len(target.elements) == len(iterable.args)
        and all(a.keyword is None and not a.star for a in iterable.args)
        and not any(isinstance(e, cst.StarredElement) for e in target.elements)
    ):
        batch: list[str] = []
        counters: set[str] = set()
        for arg, element in zip(iterable.args, target.elements):
            named, counted = _targets(owner, arg.value, element.value)
            batch += named
            counters |= counted
        return batch, counters
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
    first = position_of(program, step[0])
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
            if not _inside(program, use, step) and position_of(program, use) < first and program.scope(use) is flow.scope:  # type: ignore[arg-type]
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
        final = flow.final.get(name, nodes)
        declined = None if all(id(n) in losses for n in final) else _not_combined(owner, loop, step, final, losses)
        if declined is not None:
            raise Unsplittable(nodes[-1], (
                f"{name}, which the step sets (line {program.line(nodes[-1])}), is read after it (line {program.line(later[0])}): "
                "strategy.run can hand back only the loss (summed over the replicas), a mean over the batch (averaged), "
                "a sum or a count over it (summed) or one row per example of it (gathered), and it is none of them ("
                + (f"{_short(program, declined.node)}, line {program.line(declined.node)}: " if declined.node is not final[-1] else "")
                + f"{declined.why}); read it in the step, or compute it again after it, then migrate"
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


def _not_combined(owner: Analyses, loop, step: list[cst.BaseStatement], final: list[cst.CSTNode], losses: set[int]) -> Declined | None:
    """Why the value a name the step sets last holds cannot be handed back combined over the
    replicas (:mod:`.step_returns`: a mean over the batch is, a sum or a count over it is),
    or None when it can."""
    program, facts = owner.program, owner.facts
    if len(final) != 1:
        return Declined(final[-1], "it is set on more than one path")
    value = facts.assigned_value(final[0])
    if value is None:
        return Declined(final[0], "it is not set by an assignment of its own")

    def inside(binding: cst.CSTNode) -> bool:
        return _inside(program, binding, step)  # type: ignore[arg-type]

    def known(expr: cst.BaseExpression) -> str | None:
        bindings = facts.reaching_bindings(expr) if isinstance(expr, cst.Name) else None
        return "loss" if bindings and all(id(b) in losses for b in bindings) else None

    # What binds the batch: the loop's target, and what the loop's body sets from it before the step.
    batch = [
        binding
        for statement in step
        for read in _read_nodes(program, statement)
        for binding in facts.reaching_bindings(read) or ()
        if not inside(binding) and id(loop) in {id(a) for a in program.ancestors(binding)}
    ]
    kind = Combining(program, None, batch, known, inside).kind(value)
    return kind if isinstance(kind, Declined) else None


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."


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
