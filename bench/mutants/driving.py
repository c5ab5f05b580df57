"""How training is driven: the step's training flag, Dropout's rate, what fit is asked to
compute, how many steps an epoch has, the order of a GAN's two updates.

Wrong by the definition: Dropout/noise masks not drawn as the original draws them (inference
mode in the step, another rate), examples weighted (class_weight, sample_weight), epochs of
another length, or a GAN's second update computed through the first model before its update.
The flag and the rate are only changed in models that hold such layers and run in training.
"""

from __future__ import annotations

import math

import libcst as cst

from mutants import uses
from mutants.core import WRONG, Edit, argument, callee, expr, keyword, number, operator, positional, string, true, with_keyword
from mutants.data import _batches_in, _trained_fit, is_dataset
from mutants.uses import attribute_model, model_layers
from mutants.vocabulary import RANDOM_LAYERS, TRAINING_LAYERS, LOSSES, names_in, walk

FAMILY = "driving"


def _acts(facts, layers) -> bool:
    """Whether the layers hold one whose training mode computes differently."""
    for call in layers:
        name = callee(call)
        if name not in TRAINING_LAYERS:
            continue
        if name == "BatchNormalization":
            return True
        arg = argument(call, "stddev" if name == "GaussianNoise" else "rate", 0)
        value = number(facts.resolve(arg.value) if arg is not None and isinstance(arg.value, cst.Name) else arg.value) if arg is not None else None
        if value is None or value > 0:
            return True
    return False


def _called_model(p, call: cst.Call) -> list[cst.Call]:
    """The layers of the model a call in a step runs."""
    facts = p.facts
    func = call.func
    if isinstance(func, cst.Name) and func.value == "self":
        cls = p.class_of(call)
        values = [n for n in p.nodes(cst.Call) if cls is not None and isinstance(n.func, cst.Name) and n.func.value == cls.name.value and id(n) in facts.trained]
        return [layer for v in values for layer in model_layers(facts, v)]
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = p.class_of(call)
        if cls is None:
            return []
        return [layer for v in attribute_model(facts, cls, func.attr.value) for layer in model_layers(facts, v)]
    if isinstance(func, cst.Name):
        value = facts.value_of(func.value, call)
        return model_layers(facts, value) if value is not None else []
    return []


@operator("training-flag-false", WRONG, FAMILY, "the step runs its model with training=False (no Dropout, BatchNormalization in inference)", "Dropout's masks / BatchNormalization's mode in the step")
def training_flag_false(p):
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and true(getattr(keyword(n, "training"), "value", None)) and _acts(p.facts, _called_model(p, n)):
                flag = keyword(n, "training")
                changed = n.with_changes(args=[a.with_changes(value=expr("False")) if a is flag else a for a in n.args])
                yield Edit(p.replace_one(n, changed), f"{p.code(n)[:60]}: training=True -> False", p.line(n))


@operator("dropout-rate-changed", WRONG, FAMILY, "an active Dropout's rate changed (GaussianNoise's stddev doubled)", "Dropout's masks")
def dropout_rate_changed(p):
    for call in p.facts.layers(RANDOM_LAYERS):
        if not p.facts.in_active_model(call):
            continue
        name = callee(call)
        parameter = "stddev" if name == "GaussianNoise" else "rate"
        arg = argument(call, parameter, 0)
        if arg is None:
            continue
        value = number(p.facts.resolve(arg.value) if isinstance(arg.value, cst.Name) else arg.value)
        if value is None or value <= 0:
            continue
        new = value * 2 if name == "GaussianNoise" else (0.7 if abs(value - 0.7) > 1e-9 else 0.3)
        changed = call.with_changes(args=[a.with_changes(value=expr(repr(round(new, 6)))) if a is arg else a for a in call.args])
        yield Edit(p.replace_one(call, changed), f"{name} {parameter} {value:g} -> {new:g}", p.line(call))


def _fits(p):
    """fit calls of models fit trains with Keras's own train_step, with the compile call and
    the model's class."""
    for call in p.nodes(cst.Call):
        if callee(call) != "fit" or not _trained_fit(p, call) or any(a.star for a in call.args):
            continue
        receiver = call.func.value
        values = [e.assigns.get(receiver.value) for e in p.facts.reaching(receiver.value, call)]
        if any(p.facts.custom_train_step(p.facts.model_class(v)) is not None for v in values if v is not None):
            continue
        yield call, values


def _classification(p, values) -> bool:
    for compile_call, value in p.facts.compiled_models():
        if not any(value is v for v in values):
            continue
        loss = keyword(compile_call, "loss") or (compile_call.args[1] if len(compile_call.args) > 1 and compile_call.args[1].keyword is None else None)
        if loss is None:
            continue
        text = string(loss.value) or ""
        resolved = p.facts.resolve(loss.value) if isinstance(loss.value, cst.Name) else loss.value
        if "crossentropy" in text or isinstance(resolved, cst.Call) and "Crossentropy" in (callee(resolved) or "") and callee(resolved) in LOSSES:
            return True
    return False


@operator("class-weight-added", WRONG, FAMILY, "fit given class_weight (class 0 weighted 2)", "the first update (the loss's weights)")
def class_weight_added(p):
    for call, values in _fits(p):
        if keyword(call, "class_weight") is not None or not _classification(p, values):
            continue
        new = with_keyword(call, "class_weight", expr("{c: 1.0 + (c == 0) for c in range(1000)}"))
        yield Edit(p.replace_one(call, new), "fit(class_weight={0: 2.0, others: 1.0})", p.line(call))


def _numpy(p) -> str | None:
    for node in p.nodes(cst.Import):
        for alias in node.names:
            if p.code(alias.name) == "numpy":
                return alias.asname.name.value if alias.asname is not None else "numpy"
    return None


@operator("sample-weight-added", WRONG, FAMILY, "fit on arrays given sample_weight (0.5 and 1.5 in turn)", "the first update (the loss's weights)")
def sample_weight_added(p):
    np_name = _numpy(p)
    if np_name is None:
        return
    for call, values in _fits(p):
        args = positional(call)
        if keyword(call, "sample_weight") is not None or len(args) < 2 or len(args) > 2 or is_dataset(p, args[0].value):
            continue
        x = p.code(args[0].value)
        if isinstance(p.facts.resolve(args[0].value), (cst.Dict, cst.List)):
            continue
        new = with_keyword(call, "sample_weight", expr(f"{np_name}.arange(len({x})) % 2 + 0.5"))
        yield Edit(p.replace_one(call, new), f"fit(sample_weight=0.5/1.5 per example of {x})", p.line(call))


@operator("steps-per-epoch-changed", WRONG, FAMILY, "fit's steps_per_epoch doubled, or set to 2 where an epoch has more", "steps past the second; where epochs end")
def steps_per_epoch_changed(p):
    for call, values in _fits(p):
        steps = keyword(call, "steps_per_epoch")
        if steps is not None:
            value = number(steps.value)
            new = expr(str(int(value) * 2)) if value is not None else expr(f"({p.code(steps.value)}) * 2")
            yield Edit(p.replace_one(call, with_keyword(call, "steps_per_epoch", new)), f"steps_per_epoch {p.code(steps.value)} -> {p.code(new)}", p.line(call))
            continue
        batches = _epoch_batches(p, call)
        if batches is not None and batches > 2:
            yield Edit(p.replace_one(call, with_keyword(call, "steps_per_epoch", expr("2"))), f"steps_per_epoch=2 (an epoch has {batches} batches)", p.line(call))


def _epoch_batches(p, call: cst.Call) -> int | None:
    args = positional(call)
    if not args:
        return None
    if is_dataset(p, args[0].value):
        return _batches_in(p, args[0].value)
    n = uses.size_of(p, args[0].value)
    batch = keyword(call, "batch_size")
    if n is None or keyword(call, "validation_split") is not None:
        return None
    if batch is None:
        size = 32  # Keras's default, when the migration did not write it
    else:
        from mutants.vocabulary import scaled_operand

        value = p.facts.resolve(batch.value) if isinstance(batch.value, cst.Name) else batch.value
        operand = scaled_operand(value)
        b = number(p.facts.resolve(operand) if isinstance(operand, cst.Name) else operand) if operand is not None else number(value)
        if b is None:
            return None
        size = int(b) * (p.replicas if operand is not None else 1)
    return math.ceil(n / size)


# --- a GAN's two updates ------------------------------------------------------------------------
def _is_tape(statement) -> bool:
    return isinstance(statement, cst.With) and any("GradientTape" in (cst.Module([]).code_for_node(item.item)) for item in statement.items)


def _applies(statement) -> bool:
    return any(isinstance(n, cst.Call) and callee(n) in ("apply_gradients", "apply") for n in walk(statement))


def _written(statements) -> set[str]:
    found = set()
    for s in statements:
        for n in walk(s):
            if isinstance(n, (cst.AssignTarget, cst.AsName)):
                found |= {m.value for m in walk(n) if isinstance(m, cst.Name)}
            if isinstance(n, (cst.AugAssign, cst.AnnAssign)) and isinstance(n.target, cst.Name):
                found.add(n.target.value)
    return found


def _reads(node) -> set[str]:
    """Names an expression or small statement reads (assignment targets left out)."""
    if isinstance(node, cst.Assign):
        return names_in(node.value)
    if isinstance(node, cst.AnnAssign):
        return names_in(node.value) if node.value is not None else set()
    return names_in(node)


def _free(statements, written: set[str] | None = None) -> set[str]:
    """Names the statements read before they write them, in order (into blocks)."""
    written = set() if written is None else written
    free: set[str] = set()
    for s in statements:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                free |= _reads(small) - written
                written |= _written([small]) if not isinstance(small, cst.AugAssign) else {small.target.value} if isinstance(small.target, cst.Name) else set()
        elif isinstance(s, cst.With):
            for item in s.items:
                free |= names_in(item.item) - written
                if item.asname is not None:
                    written |= {m.value for m in walk(item.asname) if isinstance(m, cst.Name)}
            if isinstance(s.body, cst.IndentedBlock):
                free |= _free(s.body.body, written)
        else:
            free |= names_in(s) - written
            written |= _written([s])
    return free


def _updated(statement) -> set[str]:
    """Models whose variables an apply statement updates (``d.trainable_variables``)."""
    found = set()
    for n in walk(statement):
        if isinstance(n, cst.Attribute) and n.attr.value in ("trainable_variables", "trainable_weights"):
            found.add(cst.Module([]).code_for_node(n.value))
    return found


def _runs(statements) -> set[str]:
    found = set()
    for s in statements:
        for n in walk(s):
            if isinstance(n, cst.Call):
                found.add(cst.Module([]).code_for_node(n.func))
    return found


def phases(step: cst.FunctionDef):
    """``(pre, phase1, between, phase2, post)``: a step whose body makes two updates one after
    the other, each a GradientTape block, its gradient and its apply."""
    body = list(step.body.body)
    tapes = [i for i, s in enumerate(body) if _is_tape(s)]
    applies = [i for i, s in enumerate(body) if _applies(s) and not _is_tape(s)]
    if len(tapes) != 2 or len(applies) != 2:
        return None
    t1, t2 = tapes
    a1, a2 = applies
    if not (t1 < a1 < t2 < a2):
        return None
    return body[:t1], body[t1 : a1 + 1], body[a1 + 1 : t2], body[t2 : a2 + 1], body[a2 + 1 :]


def swappable(parts) -> bool:
    pre, one, between, two, post = parts
    if _free(two) & (_written(one) | _written(between)):
        return False
    if _free(between) & _written(one):
        return False
    read_after = set().union(*(names_in(s) for s in post)) if post else set()
    return not (_written(one) & _written(two) & read_after)


@operator("gan-order-swapped", WRONG, FAMILY, "a step's two updates swapped where the second runs the model the first updates", "updates through the model the other updated (the second model's gradient)")
def gan_order_swapped(p):
    for step in p.facts.steps:
        if not isinstance(step.body, cst.IndentedBlock):
            continue
        parts = phases(step)
        if parts is None or not swappable(parts):
            continue
        pre, one, between, two, post = parts
        updated_one, updated_two = _updated(one[-1]), _updated(two[-1])
        tape_one, tape_two = _runs(one[:-1]), _runs(two[:-1])
        if not (updated_one & tape_two or updated_two & tape_one):
            continue
        body = [*pre, *two, *between, *one, *post]
        new = step.with_changes(body=step.body.with_changes(body=body))
        yield Edit(p.replace_one(step, new), f"{step.name.value}: the update of {', '.join(sorted(updated_two))} made before that of {', '.join(sorted(updated_one))}", p.line(step))
