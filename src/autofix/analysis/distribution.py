"""Where to distribute the dataset whose batches reach ``strategy.run`` undistributed, when that
is shown safe: the one fix :mod:`.inputs`' findings can have.

The dataset is distributed once, before the outermost loop around the ``for`` loop that
iterates it, and that loop iterates the distributed one instead. Shown safe only when: every
undistributed value comes from that one loop over a batched dataset bound once in view (not a
parameter: other files may pass a distributed one; unless ``autofix migrate`` is moving a file
that distributed nothing, whose callers all pass plain datasets); the loop's batches go to ``strategy.run``
and nowhere else (a distributed batch is not a tensor), through local functions too; the
strategy running the steps is in view at the loop; the loop is not in a ``tf.function``; and no
step divides its loss by a global batch other than the dataset's (split over the replicas,
that loss would change; a division by the dataset's own batch becomes right).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.callees import words
from autofix.analysis.inputs import Feed, Inputs, is_self_attribute
from autofix.analysis.losses import loss_terms_of
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.analysis.training import batch_size_of


@dataclass(frozen=True)
class Distribution:
    """How to distribute the dataset a loop feeds to ``strategy.run``: once, before
    ``before`` (the outermost loop around the one that iterates it), with the strategy
    ``strategy`` (the receiver of the ``strategy.run`` calls, when it names the same object where
    the loop is: a plain name the caller checks is in view, or ``self.<name>`` in the same class)."""

    dataset: cst.Name
    loop: cst.For
    before: cst.BaseStatement
    strategy: cst.BaseExpression


class NotDistributable(Exception):
    """Why the dataset cannot be shown safe to distribute in place (the message says why)."""


def distribution(inputs: Inputs, feeds: list[Feed]) -> Distribution:
    """The one dataset the undistributed data of ``feeds`` (of one ``strategy.run`` call)
    comes from, and where to distribute it; raises :class:`NotDistributable`."""
    program, facts, steps = inputs.program, inputs.facts, inputs.steps
    origins = [o for feed in feeds for o in feed.origins if o.kind != "unknown"]
    if any(o.kind != "dataset" for o in origins):
        kinds = sorted({o.kind for o in origins if o.kind != "dataset"})
        raise NotDistributable(
            "some of it is distributed and some is not" if "distributed" in kinds else
            f"it is a {'NumPy array' if 'array' in kinds else 'replica shard'}, not a dataset that can be distributed in place"
        )
    loops = {id(o.loop): o for o in origins}
    if len(loops) != 1:
        raise NotDistributable("the data comes from more than one place")
    origin = next(iter(loops.values()))
    loop, dataset = origin.loop, origin.node
    if loop is None or _iterated(inputs, loop) is not dataset or not isinstance(dataset, cst.Name):
        raise NotDistributable("the batches are not those of a for loop over a dataset named in view")
    bindings = facts.bindings(dataset) or []
    reaching = facts.reaching_bindings(dataset) or []
    if len(bindings) > 1 and len(reaching) == 1 and all(program.line(b) <= program.line(reaching[0]) for b in bindings):
        # ``ds = ds.shuffle(n).batch(b)``: the name's last binding is what the loop iterates.
        bindings = reaching
    parameter = len(bindings) == 1 and isinstance(bindings[0], cst.Param)
    if parameter and program.migration is None:
        function = program.enclosing_function(bindings[0])
        raise NotDistributable(
            f"the dataset is a parameter of {function.name.value if function else 'a function'}(), which code in "
            "other files may call with a distributed dataset; distribute it where it is made"
        )
    if len(bindings) != 1 or facts.assigned_value(bindings[0]) is None and not parameter:
        raise NotDistributable(f"{dataset.value} is bound more than once")
    batches = [batch_size_of(program, made) for made in origin.made]
    if not batches or any(b is None for b in batches) or len({program.module.code_for_node(b) for b in batches}) != 1:  # type: ignore[arg-type]
        raise NotDistributable(f"{dataset.value} is not batched where it is made")
    if steps.in_graph(loop):
        raise NotDistributable("the loop runs inside a tf.function, where a dataset cannot be distributed")
    runs = {id(feed.run): feed.run for feed in feeds}
    for run in _batch_runs(inputs, loop):
        runs[id(run)] = run
    strategy = _strategy_at(inputs, list(runs.values()), loop)
    _scaled_for(inputs, list(runs.values()), dataset, batches[0])  # type: ignore[arg-type]
    before = _outermost_loop(program, loop)
    if program.line(bindings[0]) >= program.line(before) and program.enclosing_function(bindings[0]) is program.enclosing_function(before):
        raise NotDistributable(f"{dataset.value} is not made before the loop")
    return Distribution(dataset, loop, before, strategy)


def _batch_runs(inputs: Inputs, loop: cst.For) -> list[cst.Call]:
    """The ``strategy.run`` calls the loop's batches go to; raises when they also go anywhere
    else (a distributed batch is not a tensor)."""
    program, facts, steps = inputs.program, inputs.facts, inputs.steps
    target = loop.target
    if loop.iter is not _iterated(inputs, loop) and isinstance(target, (cst.Tuple, cst.List)):
        target = target.elements[1].value  # ``for i, batch in enumerate(dataset)``: not the counter
    pending = [use for name in _names(target) for use in facts.uses(name)]
    runs: list[cst.Call] = []
    seen: set[int] = set()
    while pending:
        use = pending.pop()
        if id(use) in seen:
            continue
        seen.add(id(use))
        parent = program.parent(use)
        holder = program.parent(parent) if isinstance(parent, cst.Element) else None
        arg = program.parent(holder) if isinstance(holder, (cst.Tuple, cst.List)) else parent
        call = program.parent(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and call in steps.runs and arg is not call.args[0]:
            runs.append(call)
            continue
        if isinstance(parent, cst.Arg) and isinstance(call, cst.Call):
            callees, complete = inputs.callables.of_call(call.func)
            params = []
            for callee in callees:
                found = [p for p in (*callee.function.params.params, *callee.function.params.kwonly_params) if callee.argument(call, p) is parent]
                star = callee.function.params.star_arg
                if not found and parent.keyword is None and isinstance(star, cst.Param):
                    found = [star]  # ``def step(*args)``: the tuple holds it
                params.extend(found)
            if complete and callees and len(params) == len(callees):
                pending.extend(u for param in params for u in facts.uses(param.name))
                continue
        if isinstance(parent, cst.Assign) and parent.value is use:
            names = [n for t in parent.targets for n in _names(t.target)]
            if names and all(isinstance(t.target, (cst.Tuple, cst.List)) for t in parent.targets):
                pending.extend(u for n in names for u in facts.uses(n))
                continue
        raise NotDistributable(f"the batch is also used on line {program.line(use)}, where a distributed batch would not do")
    return runs


def _strategy_at(inputs: Inputs, runs: list[cst.Call], loop: cst.For) -> cst.BaseExpression:
    program = inputs.program
    receivers = [run.func.value for run in runs]  # type: ignore[union-attr]
    codes = {program.module.code_for_node(r) for r in receivers}
    if len(codes) != 1:
        raise NotDistributable("the batches go to more than one strategy")
    receiver = receivers[0]
    if isinstance(receiver, cst.Name):
        return receiver
    if isinstance(receiver, cst.Attribute) and is_self_attribute(receiver):
        site, run = program.enclosing_function(loop), program.enclosing_function(runs[0])
        if site is not None and run is not None and _class_of(program, site) is _class_of(program, run) is not None:
            return receiver
    raise NotDistributable("the strategy that runs the step is not in view where the dataset is iterated")


def _scaled_for(inputs: Inputs, runs: list[cst.Call], dataset: cst.Name, batch: cst.BaseExpression) -> None:
    """Raises when a step divides its loss by a global batch that is not the dataset's batch:
    once the dataset is split, that loss would change."""
    program, steps = inputs.program, inputs.steps
    for run in runs:
        target = steps.run_target(run)
        root = steps.definition(target) if target is not None else None
        for _call, differentiated in steps.gradient_targets(root) if root is not None else ():
            for term in loss_terms_of(steps, differentiated):
                divisors = [s.right for s in term.scaling if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Divide)]
                if isinstance(term.node, cst.Call) and "tensorflow.nn.compute_average_loss" in inputs.facts.names_of(term.node.func):
                    divisors.append(argument_value(term.node, "global_batch_size", 2))
                for divisor in divisors:
                    if divisor is not None and "batch" in _words_of(divisor) and not _same(inputs, divisor, batch):
                        raise NotDistributable(
                            f"the step divides its loss by {program.module.code_for_node(divisor)} (line "
                            f"{program.line(divisor)}), which is not the batch {dataset.value} is made with: "
                            "split over the replicas, its loss would change"
                        )


def _same(inputs: Inputs, a: cst.BaseExpression, b: cst.BaseExpression | None) -> bool:
    if b is None:
        return False
    code = inputs.program.module.code_for_node
    if code(a) == code(b):
        return True
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return set(inputs.facts.bindings(a) or [a]) == set(inputs.facts.bindings(b) or [b])
    return False


def _words_of(expr: cst.BaseExpression) -> set[str]:
    return {w for name in nodes_in(expr, cst.Name) for w in words(name.value)}


def _iterated(inputs: Inputs, loop: cst.For) -> cst.BaseExpression:
    """What the loop iterates: its iterable, or what ``enumerate`` counts the items of
    (a distributed dataset is counted as well)."""
    iterable = loop.iter
    if isinstance(iterable, cst.Call) and "builtins.enumerate" in inputs.facts.names_of(iterable.func):
        target = loop.target
        first = iterable.args[0] if iterable.args else None
        if first is not None and first.keyword is None and not first.star and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            return first.value
    return iterable


def _outermost_loop(program, loop: cst.For) -> cst.BaseStatement:
    outer: cst.BaseStatement = loop
    for ancestor in program.ancestors(loop):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            outer = ancestor
    return outer


def _class_of(program, function: cst.FunctionDef) -> cst.ClassDef | None:
    block = program.parent(function)
    cls = program.parent(block) if block is not None else None
    return cls if isinstance(cls, cst.ClassDef) else None


def _names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []
