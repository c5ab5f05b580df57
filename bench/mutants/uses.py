"""What a training step uses, read from the facts: the optimizers it applies, the loss objects
it calls, what it differentiates, the global batches and where they are used as batches, the
models a call runs, and the number of examples of an array or dataset expression."""

from __future__ import annotations

import libcst as cst

from mutants.core import Program, callee, dotted, keyword, number, positional
from mutants.facts import Facts, _self_attributes
from mutants.vocabulary import DATASET_SIZES, LAYERS, LOSSES, OPTIMIZERS, names_in, scaled_operand, walk


def used_optimizers(p: Program) -> list[cst.Call]:
    """Optimizer constructions that a training step uses."""
    found: list[cst.Call] = []

    def add(node: cst.BaseExpression | None) -> None:
        if node is None:
            return
        node = p.facts.resolve(node)
        if isinstance(node, cst.Call) and callee(node) in OPTIMIZERS and node not in found:
            found.append(node)

    for call, value in p.facts.compiled_models():
        step = p.facts.custom_train_step(p.facts.model_class(value))
        reads = _self_attributes(step) if step is not None else None
        for arg in call.args:
            if arg.keyword is None or "optimizer" not in arg.keyword.value:
                continue
            if reads is None and arg.keyword.value == "optimizer" or reads is not None and arg.keyword.value in reads:
                add(arg.value)
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("apply_gradients", "minimize", "apply") and isinstance(n.func.value, cst.Name):
                add(n.func.value)
    return found

def used_losses(p: Program) -> list[cst.Call]:
    """Loss-object constructions a training step computes its loss with."""
    found: list[cst.Call] = []

    def add(node: cst.BaseExpression | None) -> None:
        if node is None:
            return
        node = p.facts.resolve(node)
        if isinstance(node, cst.Call) and callee(node) in LOSSES and node not in found:
            found.append(node)

    for call, value in p.facts.compiled_models():
        step = p.facts.custom_train_step(p.facts.model_class(value))
        reads = _self_attributes(step) if step is not None else None
        for arg in call.args:
            if arg.keyword is None or "loss" not in arg.keyword.value or arg.keyword.value == "loss_weights":
                continue
            if reads is None or arg.keyword.value in reads or arg.keyword.value == "loss" and reads & {"compute_loss", "loss", "compiled_loss"}:
                add(arg.value)
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name):
                add(n.func)
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) and n.func.value.value == "self":
                # p.facts.loss_fn(...) set in __init__
                cls = p.class_of(step)
                if cls is not None:
                    for m in walk(cls):
                        if isinstance(m, cst.Assign) and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == n.func.attr.value for t in m.targets):
                            add(m.value)
    return found

def global_batches(p: Program) -> list[tuple[cst.BinaryOperation, cst.BaseExpression]]:
    """``(B * N, B)`` for every product of a per-replica value and the replica count."""
    found = []
    for node in p.nodes(cst.BinaryOperation):
        operand = scaled_operand(node)
        if operand is not None:
            found.append((node, operand))
    return found

def batch_uses(p: Program, product: cst.BinaryOperation) -> list[cst.CSTNode]:
    """Where a global batch is used as a batch: the argument of ``.batch()`` /
    ``padded_batch()`` or fit's ``batch_size=``, directly or through one name."""
    uses = []
    parent = p.parent(product)
    if _is_batch_argument(p.facts.p, parent):
        uses.append(parent)
    statement_value = p.parent(parent) if isinstance(parent, cst.Arg) else parent
    if isinstance(parent, cst.Assign) or isinstance(statement_value, cst.Assign):
        assign = parent if isinstance(parent, cst.Assign) else statement_value
        targets = [t.target.value for t in assign.targets if isinstance(t.target, cst.Name)]
        for name in p.nodes(cst.Name):
            if name.value in targets and _is_batch_argument(p.facts.p, p.parent(name)):
                if any(e.assigns.get(name.value) is assign.value for e in p.facts.reaching(name.value, name)):
                    uses.append(p.parent(name))
    return uses

def size_of(p: Program, node: cst.BaseExpression, depth: int = 0) -> int | None:
    """The number of examples of an array or dataset expression, when it can be read:
    NumPy draws of a written size, keras.datasets' training sets, slices of them."""
    if depth > 8:
        return None
    node = p.facts.resolve(node) if isinstance(node, cst.Name) else node
    if isinstance(node, cst.Tuple) and node.elements:
        sizes = {size_of(p, e.value, depth + 1) for e in node.elements}
        return sizes.pop() if len(sizes) == 1 else None
    if isinstance(node, cst.Call):
        name = callee(node)
        if name in ("random", "normal", "uniform", "integers", "rand", "randn", "randint", "standard_normal", "zeros", "ones"):
            shape = keyword(node, "size") or keyword(node, "shape")
            args = positional(node)
            if shape is None and name in ("rand", "randn"):
                return int(number(args[0].value)) if args and number(args[0].value) is not None else None
            if shape is None and name in ("random", "zeros", "ones", "standard_normal") and args:
                shape = args[0]
            if shape is not None:
                value = shape.value
                if isinstance(value, cst.Tuple) and value.elements:
                    value = value.elements[0].value
                n = number(value)
                return int(n) if n is not None else None
            return None
        if name in ("astype", "reshape") and isinstance(node.func, cst.Attribute):
            return size_of(p, node.func.value, depth + 1)
        if name == "from_tensor_slices" and node.args:
            return size_of(p, node.args[0].value, depth + 1)
        if name in ("map", "cache", "prefetch") and isinstance(node.func, cst.Attribute):
            return size_of(p, node.func.value, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.Multiply, cst.Subtract, cst.Add)):
        left = size_of(p, node.left, depth + 1)
        return left if left is not None else None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
        whole = size_of(p, node.value, depth + 1)
        s = node.slice[0].slice
        if whole is None or s.step is not None:
            return None
        lower = 0 if s.lower is None else number(s.lower)
        upper = whole if s.upper is None else number(s.upper)
        if lower is None or upper is None:
            return None
        lower = lower + whole if lower < 0 else lower
        upper = upper + whole if upper < 0 else upper
        return max(0, int(min(upper, whole) - lower))
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        # x[..., tf.newaxis] keeps the first dimension
        inner = node.slice[0].slice.value
        if isinstance(inner, cst.Ellipsis) or dotted(inner) in ("tf.newaxis", "np.newaxis", "None"):
            return size_of(p, node.value, depth + 1)
    if isinstance(node, cst.Name):
        return _loaded_size(p, node)
    return None

def _loaded_size(p: Program, name: cst.Name) -> int | None:
    """``x_train`` of ``(x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()``."""
    for entry in p.facts.reaching(name.value, name):
        node = entry.node
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and callee(node.value) == "load_data":
            dataset = dotted(node.value.func) or ""
            parts = dataset.split(".")
            size = DATASET_SIZES.get(parts[-2]) if len(parts) >= 2 else None
            target = node.targets[0].target
            if size is not None and isinstance(target, (cst.Tuple, cst.List)) and target.elements:
                first = target.elements[0].value
                if isinstance(first, (cst.Tuple, cst.List)) and any(isinstance(e.value, cst.Name) and e.value.value == name.value for e in first.elements):
                    return size
    return None




def _is_batch_argument(program: Program, node: cst.CSTNode | None) -> bool:
    if not isinstance(node, cst.Arg):
        return False
    call = program.parent(node)
    if not isinstance(call, cst.Call):
        return False
    name = callee(call)
    if name in ("batch", "padded_batch") and isinstance(call.func, cst.Attribute):
        return node.keyword is None and call.args and call.args[0] is node or node.keyword is not None and node.keyword.value == "batch_size"
    if name == "fit":
        return node.keyword is not None and node.keyword.value == "batch_size"
    return False


def differentiated(program: Program, step: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The expressions a step's loss is made of: the first argument of each ``.gradient()``
    (and ``minimize``'s loss), and the values assigned in the step to the names those read,
    followed back through the step."""
    found: list[cst.BaseExpression] = []
    wanted: set[str] = set()
    for n in walk(step.body):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("gradient", "minimize") and n.args:
            found.append(n.args[0].value)
            wanted |= names_in(n.args[0].value)
    assignments: list[tuple[set[str], cst.BaseExpression]] = []
    for n in walk(step.body):
        if isinstance(n, cst.Assign):
            targets = set()
            for t in n.targets:
                targets |= {m.value for m in walk(t.target) if isinstance(m, cst.Name)}
            assignments.append((targets, n.value))
        elif isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name):
            assignments.append(({n.target.value}, n.value))
    changed = True
    while changed:
        changed = False
        for targets, value in assignments:
            if targets & wanted and value not in found:
                found.append(value)
                wanted |= names_in(value)
                changed = True
    return found


def inside_any(program: Program, node: cst.CSTNode, roots: list[cst.CSTNode]) -> bool:
    ids = {id(r) for r in roots}
    return id(node) in ids or any(id(a) in ids for a in program.ancestors(node))


def model_layers(facts: Facts, node: cst.CSTNode, depth: int = 0, seen: set[int] | None = None) -> list[cst.Call]:
    """The layer constructions a model expression is built from: in it, in the values of the
    names it reads, in the functions it calls and the classes it makes."""
    seen = set() if seen is None else seen
    found: list[cst.Call] = []
    if depth > 12 or id(node) in seen:
        return found
    seen.add(id(node))
    for n in walk(node):
        if isinstance(n, cst.Call) and callee(n) in LAYERS:
            found.append(n)
        if not isinstance(n, cst.Name) or n.value in ("self", "True", "False", "None"):
            continue
        parent = facts.p.parent(n)
        if n.value in facts.functions and isinstance(parent, cst.Call) and parent.func is n:
            found += model_layers(facts, facts.functions[n.value].body, depth + 1, seen)
        elif n.value in facts.classes:
            for part in facts._class_layers(facts.classes[n.value]):
                found += model_layers(facts, part, depth + 1, seen)
            if isinstance(parent, cst.Call):
                for arg in parent.args:
                    found += model_layers(facts, arg.value, depth + 1, seen)
        else:
            value = facts.value_of(n.value, n)
            if value is not None:
                found += model_layers(facts, value, depth + 1, seen)
    return found


def attribute_model(facts: Facts, cls: cst.ClassDef, attribute: str) -> list[cst.CSTNode]:
    """What ``p.facts.<attribute>`` holds in a class: the value ``__init__`` assigns it, or, when
    that is a parameter, the arguments given at the class's trained instantiations."""
    init = next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"), None)
    if init is None:
        return []
    params = [p.name.value for p in init.params.params][1:]
    found: list[cst.CSTNode] = []
    for n in walk(init.body):
        if not isinstance(n, cst.Assign):
            continue
        if not any(isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name) and t.target.value.value == "self" and t.target.attr.value == attribute for t in n.targets):
            continue
        if isinstance(n.value, cst.Name) and n.value.value in params:
            index = params.index(n.value.value)
            for call in facts.p.nodes(cst.Call):
                if isinstance(call.func, cst.Name) and call.func.value == cls.name.value and id(call) in facts.trained:
                    arg = keyword(call, n.value.value)
                    args = positional(call)
                    if arg is None and index < len(args):
                        arg = args[index]
                    if arg is not None:
                        found.append(arg.value)
        else:
            found.append(n.value)
    return found
