"""What Keras 3 needs to build, under a strategy, a model class of the file that has its own
``train_step`` and no ``call()`` (a distiller, a GAN or VAE wrapper around models it is given).

Before ``fit`` runs under a strategy, Keras 3 builds the model in the strategy's scope
(``_maybe_symbolic_build`` in keras/src/backend/tensorflow/trainer.py, then
``Trainer._symbolic_build`` in keras/src/trainers/trainer.py): when a layer of it is not built,
**or its compiled metrics or its compiled loss are not**, it calls the model on a symbolic batch
(``compute_output_spec(self, x)``) and builds the metrics and the loss with what the call
returns; then it builds the optimizer on ``self.trainable_variables``. On one device it asks
none of this (the step builds them as it runs). Measured on Keras 3.15.1, 2 logical CPUs, a
distiller holding a teacher and a student built where they are made:

| the class, fit on 2 replicas | |
| --- | --- |
| no ``call()``, marked built, compiled without metrics or loss | runs |
| no ``call()``, marked built, compiled with ``metrics=[...]`` (keras-io's distiller), or ``metrics=[]`` | ``RuntimeError: Unable to automatically build the model`` |
| a ``call()`` returning the student's prediction | runs |
| marked built, its compiled metrics built by hand first | runs |

So marking such a model built is enough only when it is compiled with no metrics and no loss;
otherwise it needs a ``call()``, and the one that builds what the original builds is the call
that returns what its ``train_step`` hands those metrics (the student's prediction of the batch's
inputs). And the optimizer Keras 3 then builds on every trainable variable of the model (the
teacher's too: slots the original, which builds it on the variables its step applies it to,
never makes; the updates are the same) is built first on the variables ``train_step`` applies
it to, where that is one model the class holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.syntax import argument, argument_value, nodes_in

# ``compile``'s parameters that Keras 3 builds by calling the model (its compiled loss and
# metrics), by position after ``optimizer`` (Keras 3's ``Trainer.compile``).
_BUILT_BY_CALLING = {"loss": 1, "loss_weights": 2, "metrics": 3, "weighted_metrics": 4}
# Where a train_step hands its compiled metrics or loss the prediction: (method of self, or of
# self.compiled_metrics; position of y_true; position of y_pred).
_FED = {
    ("compiled_metrics", "update_state"): (0, 1),
    (None, "compute_metrics"): (1, 2),
    (None, "compiled_loss"): (0, 1),
    (None, "compute_loss"): (1, 2),
}
_VARIABLES = ("trainable_variables", "trainable_weights")


@dataclass(frozen=True)
class Fed:
    """What a ``train_step`` hands its compiled metrics or loss: ``self.<model>(x)``, ``x`` the
    inputs of its batch."""

    model: str


def method(facts: Facts, cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The method ``name`` of a class of this file, or of the first of its bases in this file
    that defines it (in the order Python looks them up, for single bases)."""
    seen: set[int] = set()
    pending = [cls]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        for statement in _body(current):
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                return statement
        pending.extend(b for b in (facts.local_definition(base.value) for base in current.bases) if isinstance(b, cst.ClassDef))
    return None


def compiled_with(facts: Facts, cls: cst.ClassDef, construction: cst.Call) -> str | None:
    """What the model is compiled with that Keras 3 builds by calling it (``"metrics"``,
    ``"loss"``, ...), or None: read where Keras's own ``compile`` is called, in the class's
    ``compile()`` (``super().compile(...)``) or on the constructed object (``gan.compile(...)``).
    Arguments passed on unread (``**kwargs``) count as such."""
    own = method(facts, cls, "compile")
    if own is not None:
        calls = [c for c in nodes_in(own.body, cst.Call) if keras_compile(c)]
        return next((found for found in (_builds_by_calling(c, 1 if not _super_call(c) else 0) for c in calls) if found), None)
    name = facts.assigned_name(construction)
    if name is None:
        return "compile"
    for use in facts.uses(name):
        parent = facts.program.parent(use)
        if isinstance(parent, cst.Attribute) and parent.attr.value == "compile":
            call = facts.program.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                found = _builds_by_calling(call, 0)
                if found:
                    return found
    return None


def fed_prediction(facts: Facts, cls: cst.ClassDef) -> Fed | str:
    """What ``train_step`` hands its compiled metrics and loss, as a model the class holds
    called on the inputs of the step's batch (``x, y = data``; ``self.student(x, training=True)``,
    directly or through a name bound once in the step), or why it is not shown to be one."""
    step = method(facts, cls, "train_step")
    if step is None:
        return "its train_step is not found"
    params = [p for p in step.params.params]
    if len(params) < 2:
        return "its train_step takes no batch"
    data = params[1].name.value
    inputs, targets = _unpacked(step, data)
    fed: set[str] = set()
    for call, y_true, y_pred in _feeding(step):
        if inputs is None:
            return f"its train_step does not unpack its batch once as x, y = {data} (line {facts.program.line(step)})"
        if not (isinstance(y_true, cst.Name) and y_true.value == targets):
            return f"its train_step does not hand its compiled metrics or loss the targets of its batch (line {facts.program.line(call)})"
        model = _model_called_on(step, y_pred, inputs)
        if model is None:
            return (
                f"what its train_step hands its compiled metrics or loss (line {facts.program.line(call)}) is not shown to be "
                "a model it holds called on the inputs of its batch"
            )
        fed.add(model)
    if not fed:
        return "its train_step hands its compiled metrics and loss nothing autofix can read"
    if len(fed) > 1:
        return f"its train_step hands its compiled metrics and loss the predictions of several models ({', '.join(sorted(fed))})"
    (model,) = fed
    if not _held_once(facts, cls, model):
        return f"self.{model} is not set once, in its __init__, to a model it is given"
    return Fed(model)


def optimizer_model(facts: Facts, cls: cst.ClassDef) -> str | None:
    """The model the class holds whose trainable variables ``train_step`` applies
    ``self.optimizer`` to (``self.optimizer.apply_gradients(zip(grads, self.student.trainable_variables))``,
    the variables directly or through a name bound once in the step), when every such call
    applies it to that one model's; None otherwise (Keras then builds it on all of them)."""
    step = method(facts, cls, "train_step")
    if step is None:
        return None
    found: set[str | None] = set()
    for call in nodes_in(step.body, cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("apply_gradients", "apply", "minimize")):
            continue
        if not _is_self_attribute(func.value, "optimizer"):
            continue
        if func.attr.value != "apply_gradients":
            return None
        pairs = argument_value(call, "grads_and_vars", 0)
        variables = None
        if isinstance(pairs, cst.Call) and isinstance(pairs.func, cst.Name) and pairs.func.value == "zip" and len(pairs.args) == 2:
            variables = _variables_model(step, pairs.args[1].value)
        found.add(variables)
    if len(found) != 1 or None in found:
        return None
    (model,) = found
    return model if model is not None and _held_once(facts, cls, model) else None


# --- reading the class --------------------------------------------------------------------------


def _body(cls: cst.ClassDef) -> tuple[cst.BaseStatement, ...]:
    return tuple(cls.body.body) if isinstance(cls.body, cst.IndentedBlock) else ()


def _super_call(call: cst.Call) -> bool:
    """``super().compile(...)`` / ``super(Cls, self).compile(...)``."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Call)
        and isinstance(func.value.func, cst.Name)
        and func.value.func.value == "super"
    )


def keras_compile(call: cst.Call) -> bool:
    """Keras's ``compile`` called from a class's own: ``super().compile(...)``, or
    ``Base.compile(self, ...)``."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "compile"):
        return False
    if _super_call(call):
        return True
    first = argument_value(call, "self", 0)
    return isinstance(first, cst.Name) and first.value == "self" and not (isinstance(func.value, cst.Name) and func.value.value == "self")


def _builds_by_calling(call: cst.Call, shift: int) -> str | None:
    """The first of ``compile``'s arguments Keras 3 builds by calling the model, given and not
    None (``shift``: 1 for ``Base.compile(self, ...)``)."""
    if any(a.star for a in call.args):
        return "**" if any(a.star == "**" for a in call.args) else "*"
    for keyword, position in _BUILT_BY_CALLING.items():
        arg = argument(call, keyword, position + shift)
        if arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            return keyword
    return None


def _unpacked(step: cst.FunctionDef, data: str) -> tuple[str | None, str | None]:
    """``(x, y)`` for ``x, y = data`` (or ``x, y, sample_weight = data``), the one statement
    of the step that unpacks its batch; ``(None, None)`` otherwise."""
    found = []
    for assign in nodes_in(step.body, cst.Assign):
        if isinstance(assign.value, cst.Name) and assign.value.value == data:
            found.append(assign)
    if len(found) != 1 or len(found[0].targets) != 1:
        return None, None
    target = found[0].targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) not in (2, 3):
        return None, None
    names = [e.value for e in target.elements]
    if not all(isinstance(n, cst.Name) for n in names) or any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None, None
    if any(_bound(step, n.value) != 1 for n in names[:2]):  # type: ignore[union-attr]
        return None, None
    return names[0].value, names[1].value  # type: ignore[union-attr]


def _feeding(step: cst.FunctionDef):
    """Each call of the step that hands its compiled metrics or loss a prediction, with the
    targets and the prediction it hands them (``self.compiled_metrics.update_state(y, p)``,
    ``self.compute_metrics(x, y, p)``, ``self.compute_loss(x, y, p)``, ``self.compiled_loss(y, p)``,
    and ``metric.update_state(y, p)`` in ``for metric in self.metrics:``)."""
    loops = {}
    for loop in nodes_in(step.body, cst.For):
        if isinstance(loop.target, cst.Name) and _is_self_attribute(loop.iter, "metrics"):
            loops[loop.target.value] = loop
    for call in nodes_in(step.body, cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        key = None
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            key = (None, func.attr.value)
        elif isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name) and func.value.value.value == "self":
            key = (func.value.attr.value, func.attr.value)
        elif isinstance(func.value, cst.Name) and func.value.value in loops and func.attr.value == "update_state":
            positional = [a for a in call.args if a.keyword is None]
            if len(positional) >= 2 or argument(call, "y_pred") is not None:
                key = ("compiled_metrics", "update_state")
            else:
                continue  # (a Mean fed the loss: ``metric.update_state(loss)``)
        if key not in _FED:
            continue
        true_at, pred_at = _FED[key]  # type: ignore[index]
        yield call, argument_value(call, "y", true_at) or argument_value(call, "y_true", true_at), argument_value(call, "y_pred", pred_at)


def _model_called_on(step: cst.FunctionDef, expr: cst.BaseExpression | None, inputs: str) -> str | None:
    """``student`` for ``self.student(x, training=...)`` (``x`` the batch's inputs), the
    expression or the one value a name is bound to in the step."""
    if isinstance(expr, cst.Name):
        values = [a.value for a in nodes_in(step.body, cst.Assign) if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value == expr.value]
        if len(values) != 1 or _bound(step, expr.value) != 1:
            return None
        expr = values[0]
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return None
    if not (isinstance(expr.func.value, cst.Name) and expr.func.value.value == "self"):
        return None
    positional = [a for a in expr.args if a.keyword is None and not a.star]
    others = [a for a in expr.args if a.keyword is not None and a.keyword.value != "training" or a.star]
    if len(positional) != 1 or others or not (isinstance(positional[0].value, cst.Name) and positional[0].value.value == inputs):
        return None
    return expr.func.attr.value


def _variables_model(step: cst.FunctionDef, expr: cst.BaseExpression) -> str | None:
    """``student`` for ``self.student.trainable_variables`` (or a name bound once to it)."""
    if isinstance(expr, cst.Name):
        values = [a.value for a in nodes_in(step.body, cst.Assign) if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value == expr.value]
        if len(values) != 1 or _bound(step, expr.value) != 1:
            return None
        expr = values[0]
    if not (isinstance(expr, cst.Attribute) and expr.attr.value in _VARIABLES and isinstance(expr.value, cst.Attribute)):
        return None
    holder = expr.value
    if not (isinstance(holder.value, cst.Name) and holder.value.value == "self"):
        return None
    return holder.attr.value


def _bound(step: cst.FunctionDef, name: str) -> int:
    """How many places of the step bind ``name`` (assignments, loop and ``with`` targets)."""
    count = 0
    for node in nodes_in(step.body, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)):
        target = node.target if not isinstance(node, cst.AsName) else node.name
        count += sum(1 for n in nodes_in(target, cst.Name) if n.value == name) if not isinstance(target, cst.Name) else int(target.value == name)
    return count


def _is_self_attribute(expr: cst.BaseExpression, attribute: str) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == attribute and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _held_once(facts: Facts, cls: cst.ClassDef, model: str) -> bool:
    """``self.<model>`` is set once in the class (and its bases of this file), in ``__init__``,
    to one of its parameters."""
    init = method(facts, cls, "__init__")
    if init is None:
        return False
    assignments = []
    pending = [cls]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for target in nodes_in(current.body, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
            node = target.target
            if _is_self_attribute(node, model):
                assignments.append(target)
        pending.extend(b for b in (facts.local_definition(base.value) for base in current.bases) if isinstance(b, cst.ClassDef))
    if len(assignments) != 1 or not isinstance(assignments[0], cst.AssignTarget):
        return False
    assign = facts.program.parent(assignments[0])
    if not isinstance(assign, cst.Assign) or not any(assign is s for s in nodes_in(init.body, cst.Assign)):
        return False
    params = {p.name.value for p in init.params.params[1:]} | {p.name.value for p in init.params.kwonly_params}
    return isinstance(assign.value, cst.Name) and assign.value.value in params
