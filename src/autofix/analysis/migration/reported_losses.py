"""What a Keras 3 ``train_step`` reports of a loss Keras has divided by the replica count.

Under a ``tf.distribute`` strategy, Keras 3 (TensorFlow backend, measured on 3.15) divides a
loss it reduces over the batch by ``num_replicas_in_sync`` inside each replica
(``keras.src.losses.loss.scale_loss_for_distribution``): ``self.compute_loss(...)`` (the loss
``compile`` was given) and a call of one of Keras's loss objects with its default reduction
return each replica's *share* of the loss. The gradients need nothing more (the replicas' shares add up to the loss), and
Keras's own ``train_step`` multiplies the share back before its loss tracker sees it. A
``train_step`` written by hand that gives such a value to a metric (``tracker.update_state(loss)``)
or returns it in its logs shows ``loss / N`` once migrated: the migration gives both the
value times the replica count (keras-team/keras#20609).

A loss object called in a step is made per example by the migration (TFD004's rewrite: its
reduction ``"none"``, the mean taken and divided by the replica count where the gradient is
taken), so what the step reports of it is the loss itself; what ``self.compute_loss`` returns
is left as Keras makes it. Only a name bound once in the step, to such a call, is followed; its uses as the one
value a metric is updated with, or as a value of the dict the step returns, are what
:func:`shares` finds.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.syntax import nodes_in

SCALED_METHODS = frozenset({"compute_loss", "_compute_loss", "compiled_loss"})


def shares(train_steps: list[cst.FunctionDef]) -> list[cst.Name]:
    """The uses of a replica's share of the loss that ``train_steps`` report as the loss."""
    found: list[cst.Name] = []
    for step in train_steps:
        scaled = _scaled_names(step)
        if not scaled:
            continue
        for call in nodes_in(step, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "update_state":
                positional = [a for a in call.args if a.keyword is None and a.star == ""]
                if len(positional) == 1 and isinstance(positional[0].value, cst.Name) and positional[0].value.value in scaled:
                    found.append(positional[0].value)
        for statement in nodes_in(step, cst.Return):
            if isinstance(statement.value, cst.Dict):
                for element in statement.value.elements:
                    if isinstance(element, cst.DictElement) and isinstance(element.value, cst.Name) and element.value.value in scaled:
                        found.append(element.value)
    return found


def _scaled_names(step: cst.FunctionDef) -> set[str]:
    """Names bound once in ``step`` (and nowhere else in it), to a call that returns a share."""
    bound: dict[str, list[cst.BaseExpression | None]] = {}
    for node in nodes_in(step, cst.CSTNode):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                for name in nodes_in(target.target, cst.Name):
                    whole = target.target if isinstance(target.target, cst.Name) else None
                    bound.setdefault(name.value, []).append(node.value if whole is not None else None)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name):
            bound.setdefault(node.target.value, []).append(None)
        elif isinstance(node, (cst.For, cst.CompFor)):
            for name in nodes_in(node.target, cst.Name):
                bound.setdefault(name.value, []).append(None)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            for name in nodes_in(node.asname.name, cst.Name):
                bound.setdefault(name.value, []).append(None)
    return {name for name, values in bound.items() if len(values) == 1 and values[0] is not None and _a_share(values[0])}


def _a_share(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in SCALED_METHODS
