"""What a training step reports: the loss it returns, its metrics' results.

Wrong by the definition: a reported value that is not the original's (a metric fed the
replica's share of the loss, ``loss / N``; the replicas' shares averaged instead of summed, or
their means summed; one replica's value returned; a metric reset at every step, so that an
epoch's result is its last step's). Training itself is left as it was.

Not here: a metric made outside the strategy's scope. Under Keras 3 its variables are plain
ones that the replicas update one after the other, which reports what the original reports
(measured on the metric fixture); tf_keras raises instead. No label is certain.
"""

from __future__ import annotations

import libcst as cst

from mutants.core import WRONG, Edit, callee, dotted, expr, operator, positional, stmt
from mutants.data import _batches_in
from mutants.vocabulary import METRICS, is_replicas, walk

FAMILY = "reporting"
SEES = "the values the step reports (its return, its metrics)"


def _is_metric(p, receiver: cst.BaseExpression, where: cst.CSTNode) -> bool:
    if isinstance(receiver, cst.Name):
        value = p.facts.value_of(receiver.value, where)
        return isinstance(value, cst.Call) and callee(value) in METRICS
    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
        cls = p.class_of(where)
        if cls is None:
            return False
        for n in walk(cls):
            if isinstance(n, cst.Assign) and isinstance(n.value, cst.Call) and callee(n.value) in METRICS:
                if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == receiver.attr.value for t in n.targets):
                    return True
    return False


def metric_updates(p, step):
    """``(call, the argument holding the value)`` for the metrics a step updates with one value."""
    for n in walk(step.body):
        if not isinstance(n, cst.Call):
            continue
        if isinstance(n.func, cst.Attribute) and n.func.attr.value == "update_state":
            receiver = n.func.value
        elif isinstance(n.func, (cst.Name, cst.Attribute)):
            receiver = n.func
        else:
            continue
        args = positional(n)
        if len(args) == 1 and len(n.args) == 1 and _is_metric(p, receiver, n):
            yield n, args[0]


def _shares(step) -> dict[str, cst.BinaryOperation]:
    """``loss -> loss / N``: the names a step divides by the replica count."""
    found = {}
    for n in walk(step.body):
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Divide) and is_replicas(n.right) and isinstance(n.left, cst.Name):
            found.setdefault(n.left.value, n)
    return found


@operator("metric-fed-replica-share", WRONG, FAMILY, "a metric fed the replica's share of the loss (loss / N) instead of the loss", SEES)
def metric_fed_replica_share(p):
    for step in p.facts.steps:
        shares = _shares(step)
        for call, arg in metric_updates(p, step):
            if isinstance(arg.value, cst.Name) and arg.value.value in shares:
                division = shares[arg.value.value]
                parent = p.parent(division)
                named = None
                if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                    named = parent.targets[0].target.value
                new = expr(named) if named else division.deep_clone()
                yield Edit(p.replace_one(arg, arg.with_changes(value=new)), f"{p.code(call)[:60]} fed {p.code(new)}", p.line(call))


def _returns_share(p, function: cst.FunctionDef, index: int | None) -> bool | None:
    """Whether a replica function returns its share of the loss (True), its mean (False), or
    something else (None); ``index`` picks an element of a returned tuple."""
    returns = [n for n in walk(function.body) if isinstance(n, cst.Return) and n.value is not None]
    if len(returns) != 1:
        return None
    value = returns[0].value
    if index is not None:
        if not isinstance(value, cst.Tuple) or index >= len(value.elements):
            return None
        value = value.elements[index].value
    sources = [value]
    if isinstance(value, cst.Name):
        sources = [n.value for n in walk(function.body) if isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == value.value for t in n.targets)]
        sources += [n.value for n in walk(function.body) if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value == value.value]
        if not sources:
            return None
    text = " ".join(cst.Module([]).code_for_node(s) for s in sources)
    if "compute_average_loss" in text or "num_replicas_in_sync" in text:
        return True
    if all(isinstance(s, cst.Call) and callee(s) == "reduce_mean" for s in sources):
        return False
    return None


def reduces(p):
    """``(reduce call, its op name, whether the reduced value is a share)`` for the reductions of
    a step's per-replica losses that the outer step returns."""
    for call in p.nodes(cst.Call):
        if callee(call) != "reduce" or len(call.args) < 2 or dotted(call.args[0].value) is None:
            continue
        op = dotted(call.args[0].value).rsplit(".", 1)[-1]
        if op not in ("SUM", "MEAN"):
            continue
        outer = p.function_of(call)
        if outer is None or not _returned(p, call, outer):
            continue
        share = _share_of(p, call.args[1].value, outer)
        if share is not None:
            yield call, op, share


def _returned(p, call, outer) -> bool:
    for ancestor in p.ancestors(call):
        if isinstance(ancestor, cst.Return):
            return True
        if ancestor is outer:
            break
    statement = p.parent(call)
    if isinstance(statement, cst.Assign):
        names = {t.target.value for t in statement.targets if isinstance(t.target, cst.Name)}
        return any(isinstance(r, cst.Return) and r.value is not None and (isinstance(r.value, cst.Name) and r.value.value in names) for r in walk(outer.body))
    return False


def _share_of(p, value, outer) -> bool | None:
    """Whether a per-replica value (``strategy.run(step, ...)``, or a name unpacked from it) is
    each replica's share of the loss."""
    index = None
    if isinstance(value, cst.Name):
        for n in walk(outer.body):
            if isinstance(n, cst.Assign) and isinstance(n.value, cst.Call) and callee(n.value) == "run":
                target = n.targets[0].target
                if isinstance(target, cst.Name) and target.value == value.value:
                    value = n.value
                    break
                if isinstance(target, cst.Tuple):
                    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
                    if value.value in names:
                        index, value = names.index(value.value), n.value
                        break
    if not (isinstance(value, cst.Call) and callee(value) == "run" and value.args and isinstance(value.args[0].value, cst.Name)):
        return None
    function = p.facts.functions.get(value.args[0].value.value)
    return _returns_share(p, function, index) if function is not None else None


@operator("reduce-op-flipped", WRONG, FAMILY, "the replicas' shares averaged (ReduceOp.MEAN), or their means summed (ReduceOp.SUM)", SEES)
def reduce_op_flipped(p):
    for call, op, share in reduces(p):
        if share and op == "SUM" or not share and op == "MEAN":
            new_op = "MEAN" if op == "SUM" else "SUM"
            first = call.args[0]
            text = p.code(first.value).rsplit(".", 1)[0] + "." + new_op
            changed = call.with_changes(args=[first.with_changes(value=expr(text)), *call.args[1:]])
            yield Edit(p.replace_one(call, changed), f"ReduceOp.{op} -> {new_op} of the replicas' {'shares' if share else 'means'}", p.line(call))


@operator("loss-not-reduced", WRONG, FAMILY, "the step returns one replica's value, not the replicas' reduction", SEES)
def loss_not_reduced(p):
    for call, op, share in reduces(p):
        strategy = call.func.value if isinstance(call.func, cst.Attribute) else None
        if strategy is None:
            continue
        new = expr(f"{p.code(strategy)}.experimental_local_results({p.code(call.args[1].value)})[0]")
        yield Edit(p.replace_one(call, new), f"{p.code(call)[:60]} -> replica 0's value", p.line(call))


@operator("metric-reset-each-step", WRONG, FAMILY, "a metric reset before every step (an epoch's result is its last step's)", SEES)
def metric_reset_each_step(p):
    for loop in p.nodes(cst.For):
        calls = _step_calls(p, loop)
        if not calls:
            continue
        dataset = loop.iter.args[0].value if isinstance(loop.iter, cst.Call) and callee(loop.iter) == "enumerate" and loop.iter.args else loop.iter
        source = p.facts.resolve(dataset) if isinstance(dataset, cst.Name) else dataset
        if not (isinstance(source, cst.Call) and callee(source) == "experimental_distribute_dataset" and source.args):
            continue
        batches = _batches_in(p, source.args[0].value)
        if batches is None or batches < 2:
            continue
        statement, function = calls[0]
        for metric in _updated_metrics(p, function):
            if not _result_read(p, metric):
                continue
            new = stmt(f"{metric}.reset_state()\n")
            yield Edit(p.insert_before(statement, [new]), f"{metric}.reset_state() before every step ({batches} an epoch)", p.line(statement))


def _step_calls(p, loop: cst.For):
    """The statements of a loop's body that call a function running a replica step."""
    found = []
    if not isinstance(loop.body, cst.IndentedBlock):
        return found
    for statement in loop.body.body:
        for n in walk(statement):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in p.facts.functions:
                function = p.facts.functions[n.func.value]
                for m in walk(function.body):
                    if isinstance(m, cst.Call) and callee(m) == "run" and m.args and isinstance(m.args[0].value, cst.Name):
                        inner = p.facts.functions.get(m.args[0].value.value)
                        if inner is not None and isinstance(statement, cst.SimpleStatementLine):
                            found.append((statement, inner))
    return found


def _updated_metrics(p, function) -> list[str]:
    names = []
    for n in walk(function.body):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "update_state" and isinstance(n.func.value, cst.Name):
            if _is_metric(p, n.func.value, n) and n.func.value.value not in names:
                names.append(n.func.value.value)
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and _is_metric(p, n.func, n) and n.func.value not in names:
            names.append(n.func.value)
    return names


def _result_read(p, name: str) -> bool:
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "result" and isinstance(n.func.value, cst.Name) and n.func.value.value == name for n in p.nodes(cst.Call))
