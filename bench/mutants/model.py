"""The model and its initial state: what is trained, and from which weights.

Wrong by the definition: the initial weights are not the original's (another initializer, a
seed of the script's own changed, a load dropped or another file loaded) or the model computes
another function (a width, an activation, a layer removed). Only layers of models a step trains
are changed; initializers and seeds only where no weights are loaded over them.
"""

from __future__ import annotations

import libcst as cst

from mutants.core import WRONG, Edit, argument, callee, expr, keyword, number, operator, string, with_keyword
from mutants.vocabulary import ACTIVATION_LAYERS, KERNEL_LAYERS, LAYER_WIDTH, RANDOM_LAYERS, WEIGHTED_LAYERS

FAMILY = "model"
SEES = "the initial weights (a transplant of the original's would hide them)"

# Initializers whose draws from the same seed differ from the other's.
OTHER_INITIALIZER = {"glorot_uniform": "he_uniform", "he_uniform": "glorot_uniform", "glorot_normal": "he_normal", "he_normal": "glorot_normal"}
OTHER_ACTIVATION = {"relu": "tanh", "tanh": "relu", "sigmoid": "tanh", "softmax": "sigmoid", "elu": "relu", "selu": "relu", "swish": "relu", "gelu": "relu", "linear": "tanh", "leaky_relu": "tanh"}


@operator("initializer-changed", WRONG, FAMILY, "a trained layer's kernel initializer (glorot_uniform -> he_uniform)", SEES)
def initializer_changed(p):
    if p.facts.loads_weights():
        return
    for call in p.facts.layers(KERNEL_LAYERS):
        current = keyword(call, "kernel_initializer")
        if current is None:
            new, old = "he_uniform", "glorot_uniform"
        else:
            old = string(current.value)
            new = OTHER_INITIALIZER.get(old or "")
            if new is None:
                continue
        text = p.replace_one(call, with_keyword(call, "kernel_initializer", expr(repr(new))))
        yield Edit(text, f"{callee(call)} kernel_initializer {old} -> {new}", p.line(call))


@operator("width-changed", WRONG, FAMILY, "a trained layer's units/filters + 1", "the variables' shapes (a different model)")
def width_changed(p):
    for call in p.facts.layers(set(LAYER_WIDTH)):
        name, index = LAYER_WIDTH[callee(call)]
        arg = argument(call, name, index)
        if arg is None:
            continue
        value = number(arg.value)
        new = expr(str(int(value) + 1)) if value is not None else expr(f"({p.code(arg.value)}) + 1")
        changed = call.with_changes(args=[a.with_changes(value=new) if a is arg else a for a in call.args])
        yield Edit(p.replace_one(call, changed), f"{callee(call)} {name} {p.code(arg.value)} -> {p.code(new)}", p.line(call))


@operator("activation-changed", WRONG, FAMILY, "a trained layer's activation (relu <-> tanh; none -> tanh)", "the first update (another function of the same weights)")
def activation_changed(p):
    for call in p.facts.layers(ACTIVATION_LAYERS):
        arg = argument(call, "activation", 1) if callee(call) == "Dense" else keyword(call, "activation")
        old = "linear" if arg is None else string(arg.value)
        if old is None:
            continue
        new = OTHER_ACTIVATION.get(old)
        if new is None:
            continue
        if arg is not None and arg.keyword is None:
            changed = call.with_changes(args=[a.with_changes(value=expr(repr(new))) if a is arg else a for a in call.args])
        else:
            changed = with_keyword(call, "activation", expr(repr(new)))
        yield Edit(p.replace_one(call, changed), f"{callee(call)} activation {old} -> {new}", p.line(call))


@operator("layer-removed", WRONG, FAMILY, "a trained layer with weights (or an active Dropout) removed", "the variables (fewer) or the masks")
def layer_removed(p):
    for call in p.facts.layers(WEIGHTED_LAYERS | RANDOM_LAYERS):
        if callee(call) in RANDOM_LAYERS and not (p.facts.in_active_model(call) and _positive_rate(call)):
            continue
        parent = p.parent(call)
        # An element of Sequential([...])
        if isinstance(parent, cst.Element) and isinstance(p.parent(parent), cst.List):
            elements = p.parent(parent)
            if len(elements.elements) < 3 or parent is elements.elements[-1]:
                continue
            yield Edit(p.replace_one(parent, cst.RemoveFromParent()), f"{callee(call)} removed from the list of layers", p.line(call))
        # model.add(Layer(...)) on a line of its own
        elif isinstance(parent, cst.Arg) and isinstance(p.parent(parent), cst.Call) and callee(p.parent(parent)) == "add":
            statement = p.statement_of(call)
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                yield Edit(p.remove_statement(statement), f"model.add({callee(call)}(...)) removed", p.line(call))
        # x = Layer(...)(x): the functional graph skips it
        elif isinstance(parent, cst.Call) and parent.func is call:
            statement = p.statement_of(call)
            assign = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(assign, cst.Assign) and assign.value is parent and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                target = assign.targets[0].target.value
                inputs = [a.value for a in parent.args]
                if len(inputs) == 1 and isinstance(inputs[0], cst.Name) and inputs[0].value == target:
                    yield Edit(p.remove_statement(statement), f"{target} = {callee(call)}(...)({target}) removed", p.line(call))


def _positive_rate(call: cst.Call) -> bool:
    arg = argument(call, "stddev" if callee(call) == "GaussianNoise" else "rate", 0)
    value = number(arg.value) if arg is not None else None
    return value is None or value > 0


@operator("load-dropped", WRONG, FAMILY, "model.load_weights(...) removed (trains from fresh weights)", SEES)
def load_dropped(p):
    for call in p.nodes(cst.Call):
        if callee(call) != "load_weights" or not isinstance(call.func, cst.Attribute):
            continue
        statement = p.statement_of(call)
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr) and _trained_receiver(p, call):
            yield Edit(p.remove_statement(statement), f"{p.code(call)} removed", p.line(call))


@operator("load-other-file", WRONG, FAMILY, "load_weights reads another weights file the script has", SEES)
def load_other_file(p):
    paths = _weight_paths(p)
    for call in p.nodes(cst.Call):
        if callee(call) not in ("load_weights", "load_model") or not call.args or not _trained_receiver(p, call):
            continue
        arg = call.args[0]
        loaded = _path_value(p, arg.value)
        for other_node, other in paths:
            if other != loaded and loaded is not None and _suffix(other) == _suffix(loaded):
                changed = call.with_changes(args=[arg.with_changes(value=other_node.deep_clone()), *call.args[1:]])
                yield Edit(p.replace_one(call, changed), f"{callee(call)} reads {other!r}, not {loaded!r}", p.line(call))
                break


def _trained_receiver(p, call: cst.Call) -> bool:
    if callee(call) == "load_model":
        return True
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if not isinstance(receiver, cst.Name):
        return False
    for entry in p.facts.reaching(receiver.value, call):
        value = entry.assigns.get(receiver.value)
        if value is not None and id(value) in p.facts.trained:
            return True
    return False


def _suffix(path: str) -> str:
    return path[path.find("."):] if "." in path else ""


def _path_value(p, node):
    value = string(node)
    if value is None and isinstance(node, cst.Name):
        resolved = p.facts.resolve(node)
        value = string(resolved) if resolved is not node else None
    return value


def _weight_paths(p) -> list[tuple[cst.BaseExpression, str]]:
    """The weights files the script names (string constants, or names bound to them)."""
    found = []
    for node in p.nodes(cst.SimpleString):
        value = string(node)
        if value and value.endswith((".h5", ".keras", ".weights.h5", ".ckpt")):
            parent = p.parent(node)
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                found.append((parent.targets[0].target, value))
            else:
                found.append((node, value))
    return found


@operator("seed-changed", WRONG, FAMILY, "the seed the script sets before it builds its model (+1)", SEES)
def seed_changed(p):
    if p.facts.loads_weights():
        return
    layers = p.facts.layers()
    for call in p.nodes(cst.Call):
        name = p.code(call.func)
        if not (name.endswith("utils.set_random_seed") or name == "random.seed") or len(call.args) != 1:
            continue
        value = number(call.args[0].value)
        if value is None:
            continue
        # It must run before a trained layer is made (at module level, earlier in the file).
        if p.function_of(call) is not None or not any(p.line(layer) > p.line(call) for layer in layers):
            continue
        changed = call.with_changes(args=[call.args[0].with_changes(value=expr(str(int(value) + 1)))])
        yield Edit(p.replace_one(call, changed), f"{name}({int(value)}) -> {int(value) + 1}", p.line(call))



@operator(
    "in-step-build-dropped", WRONG, FAMILY,
    "a step's build when traced (`with tf.init_scope(): ... .build(...)`) removed: a Sequential made without its input's "
    "shape, or an optimizer, is built per replica inside the distributed tf.function",
    "the build in the function (run[i].built, run[i].variables: Keras 3 fails there as written)",
)
def in_step_build_dropped(p):
    for block in p.nodes(cst.With):
        items = block.items
        if len(items) != 1 or not isinstance(items[0].item, cst.Call) or callee(items[0].item) != "init_scope":
            continue
        if p.function_of(block) is None:
            continue
        builds = [c for c in p.nodes(cst.Call) if callee(c) == "build" and any(a is block for a in p.ancestors(c))]
        if builds:
            yield Edit(p.remove_statement(block), f"{p.code(builds[0])} removed from the step", p.line(block))

