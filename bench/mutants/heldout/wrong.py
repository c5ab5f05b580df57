"""Held-out wrong kinds: mutation ideas the main set does not use, kept out of the default run
(``--heldout``) so that the proof can be measured on mutants it was not tuned on.

Bias terms dropped, another loss function, one more epoch, the last variable left untrained,
the strategy replaced by one device, per-example losses summed, the step's noise scaled,
gradients scaled by hand after the tape.
"""

from __future__ import annotations

import libcst as cst

from mutants import uses
from mutants.core import WRONG, Edit, callee, expr, keyword, number, operator, positional, stmt, string, with_keyword
from mutants.data import _trained_fit
from mutants.uses import differentiated
from mutants.vocabulary import KERNEL_LAYERS, LOSSES, walk

PER_EXAMPLE_FUNCTIONS = {"square", "abs", "sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy", "mean_squared_error", "sigmoid_cross_entropy_with_logits", "softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits"}

OTHER_LOSS_STRING = {"mse": "mae", "mae": "mse", "mean_squared_error": "mean_absolute_error", "mean_absolute_error": "mean_squared_error", "categorical_crossentropy": "categorical_hinge", "binary_crossentropy": "hinge"}
OTHER_LOSS_CLASS = {"MeanSquaredError": "MeanAbsoluteError", "MeanAbsoluteError": "MeanSquaredError", "Huber": "MeanSquaredError"}


@operator("use-bias-dropped", WRONG, "model", "use_bias=False on a trained layer (its bias gone)", "the variables (fewer)")
def use_bias_dropped(p):
    for call in p.facts.layers(KERNEL_LAYERS):
        current = keyword(call, "use_bias")
        if current is not None and isinstance(current.value, cst.Name) and current.value.value == "False":
            continue
        yield Edit(p.replace_one(call, with_keyword(call, "use_bias", expr("False"))), f"{callee(call)}(..., use_bias=False)", p.line(call))


@operator("loss-function-changed", WRONG, "loss", "another loss function (mse <-> mae, crossentropy -> hinge)", "the first update")
def loss_function_changed(p):
    for call in uses.used_losses(p):
        other = OTHER_LOSS_CLASS.get(callee(call) or "")
        if other and isinstance(call.func, cst.Attribute):
            new = call.with_changes(func=call.func.with_changes(attr=cst.Name(other)))
            yield Edit(p.replace_one(call, new), f"{callee(call)} -> {other}", p.line(call))
    for compile_call, _ in p.facts.compiled_models():
        loss = keyword(compile_call, "loss")
        value = string(loss.value) if loss is not None else None
        if value in OTHER_LOSS_STRING:
            yield Edit(p.replace_one(loss, loss.with_changes(value=expr(repr(OTHER_LOSS_STRING[value])))), f"compile loss {value!r} -> {OTHER_LOSS_STRING[value]!r}", p.line(loss))


@operator("epochs-changed", WRONG, "driving", "fit trains one epoch more", "updates after the last of the original")
def epochs_changed(p):
    for call in p.nodes(cst.Call):
        if callee(call) != "fit" or not _trained_fit(p, call):
            continue
        epochs = keyword(call, "epochs")
        if epochs is None:
            yield Edit(p.replace_one(call, with_keyword(call, "epochs", expr("2"))), "fit(epochs=2), not 1", p.line(call))
            continue
        value = number(epochs.value)
        new = expr(str(int(value) + 1)) if value is not None else expr(f"{p.code(epochs.value)} + 1")
        yield Edit(p.replace_one(call, with_keyword(call, "epochs", new)), f"epochs {p.code(epochs.value)} -> {p.code(new)}", p.line(call))


@operator("variable-frozen", WRONG, "optimizer", "the step's last trainable variable left out of apply_gradients", "the first update (a variable not updated)")
def variable_frozen(p):
    for step in p.facts.steps:
        for n in walk(step.body):
            if not (isinstance(n, cst.Call) and callee(n) == "apply_gradients" and len(n.args) == 1):
                continue
            pairs = n.args[0].value
            if not (isinstance(pairs, cst.Call) and callee(pairs) == "zip" and len(pairs.args) == 2 and all(isinstance(a.value, (cst.Name, cst.Attribute)) for a in pairs.args)):
                continue
            grads, variables = (p.code(a.value) for a in pairs.args)
            new = n.with_changes(args=[n.args[0].with_changes(value=expr(f"zip({grads}[:-1], {variables}[:-1])"))])
            yield Edit(p.replace_one(n, new), f"apply_gradients without the last of {variables}", p.line(n))


@operator("strategy-replaced", WRONG, "driving", "MirroredStrategy() replaced by the default (one-device) strategy", "the replicas (one, not N)")
def strategy_replaced(p):
    for call in p.nodes(cst.Call):
        if callee(call) == "MirroredStrategy" and not call.args and isinstance(call.func, cst.Attribute):
            prefix = p.code(call.func.value)
            yield Edit(p.replace_one(call, expr(f"{prefix}.get_strategy()")), f"{p.code(call)} -> {prefix}.get_strategy()", p.line(call))


@operator("loss-summed", WRONG, "loss", "the per-example losses summed, not averaged (reduce_mean -> reduce_sum)", "the first update (B x the gradient)")
def loss_summed(p):
    for step in p.facts.steps:
        for root in differentiated(p, step):
            for n in walk(root):
                if isinstance(n, cst.Call) and callee(n) == "reduce_mean" and isinstance(n.func, cst.Attribute) and len(n.args) == 1 and _per_example(p, n.args[0].value):
                    new = n.with_changes(func=n.func.with_changes(attr=cst.Name("reduce_sum")))
                    yield Edit(p.replace_one(n, new), f"{p.code(n)[:60]} -> reduce_sum", p.line(n))


@operator("noise-scaled", WRONG, "driving", "the noise a step draws doubled (stddev=2.0)", "the step's draws")
def noise_scaled(p):
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and callee(n) == "normal" and p.code(n.func).endswith("random.normal") and keyword(n, "stddev") is None and len(positional(n)) <= 2:
                yield Edit(p.replace_one(n, with_keyword(n, "stddev", expr("2.0"))), f"{p.code(n)[:60]}: stddev 1 -> 2", p.line(n))


@operator("gradients-scaled", WRONG, "optimizer", "the gradients halved by hand after the tape", "the first update")
def gradients_scaled(p):
    for step in p.facts.steps:
        for n in walk(step.body):
            if not (isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1 and isinstance(n.body[0], cst.Assign)):
                continue
            assign = n.body[0]
            if isinstance(assign.value, cst.Call) and callee(assign.value) == "gradient" and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                name = assign.targets[0].target.value
                halved = stmt(f"{name} = [g * 0.5 for g in {name}]\n")
                yield Edit(p.insert_after(n, [halved]), f"{name} halved after {p.code(assign.value)[:40]}", p.line(n))



def _per_example(p, node) -> bool:
    """A tensor of one value per example (or element): a loss object made with
    reduction="none" called on a batch, its ``call()``, or an elementwise function."""
    if not isinstance(node, cst.Call):
        return False
    if callee(node) in PER_EXAMPLE_FUNCTIONS or callee(node) == "call":
        return True
    made = p.facts.resolve(node.func) if isinstance(node.func, cst.Name) else None
    if isinstance(made, cst.Call) and callee(made) in LOSSES:
        reduction = keyword(made, "reduction")
        return reduction is not None and (string(reduction.value) or "").lower() == "none"
    return False
