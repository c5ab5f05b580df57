"""A custom step called on values computed from the batch: ``train_step(x / 255.0, y)``,
``train_step(tf.cast(x, tf.float32), y)``, ``train_step(augment(x), y)``.

On a distributed dataset ``x`` is a per-replica value: ``x / 255.0`` cannot be computed on it
outside ``strategy.run``. The migration computes it per replica with the step: the generated
wrapper takes the raw batch (``distributed_train_step(x, y)``), runs a function of the
expressions on every replica (``inputs = strategy.run(train_step_inputs, args=(x, y))``, each
replica on its share) and then the step on what they computed (``strategy.run(train_step,
args=inputs)``). That is the original's computation only when each example's result depends on
that example alone: arithmetic with numbers and constants, ``tf.cast`` and other element-wise
TensorFlow functions, ``tf.image`` functions that transform each image on its own (not the
``random_`` ones), and functions of the file that compute only that. An expression that reduces
over the batch (``x - tf.reduce_mean(x)``), indexes it (``x[:8]``), reshapes it, draws random
numbers or reads a local value is refused, named at its line.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.refusal import Refusal
from autofix.analysis.program import Program
from autofix.analysis.syntax import nodes_in

# TensorFlow functions computing each entry (or each image, each label) on its own.
_ELEMENTWISE = frozenset(
    f"tensorflow.{name}"
    for name in (
        "cast", "abs", "exp", "sqrt", "square", "sign", "round", "floor", "maximum", "minimum", "clip_by_value",
        "one_hot", "identity", "math.abs", "math.exp", "math.log", "math.log1p", "math.sqrt", "math.square",
        "math.sigmoid", "math.tanh", "math.maximum", "math.minimum", "math.round", "math.floor", "nn.relu",
        "nn.sigmoid", "sigmoid", "tanh", "image.convert_image_dtype", "image.per_image_standardization",
        "image.resize", "image.flip_left_right", "image.flip_up_down", "image.rgb_to_grayscale", "image.grayscale_to_rgb",
        "image.adjust_brightness", "image.adjust_contrast", "image.central_crop", "image.resize_with_crop_or_pad",
        "image.rot90", "image.transpose",
    )
)
_REDUCTIONS = ("reduce_", "nn.moments", "math.reduce_", "linalg.norm", "norm", "math.cumsum", "cumsum")
_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)


@dataclass(frozen=True, eq=False)
class ComputedInputs:
    """What the wrapper takes (the batch's names, then the step's other arguments as
    passed) and the step's arguments as written at the call, applied inside the replica."""

    params: list[str]
    arguments: list[str]


def computed_inputs(program: Program, facts: Facts, name: str, calls: list[cst.Call]) -> ComputedInputs | Refusal | None:
    """None when every call passes the step plain names (nothing to compute per replica)."""
    plain = (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Subscript, cst.Attribute)
    if all(isinstance(arg.value, plain) for call in calls for arg in call.args):
        # Names, numbers, parts of the batch (``batch[0]``) or values of other objects: passed
        # as they are; what distributing the dataset makes of them is TFD003's.
        return None
    shapes: list[tuple[list[str], list[str]]] = []
    computed = False
    for call in calls:
        params: list[str] = []
        arguments: list[str] = []
        for arg in call.args:
            value = arg.value
            text = program.module.code_for_node(value)
            if arg.keyword is not None:
                return Refusal(call, (
                    f"{name}() is called on line {program.line(call)} with arguments computed from the batch and given by "
                    f"keyword ({arg.keyword.value}=): the migration passes the computed arguments by position only"
                ))
            arguments.append(text)
            if isinstance(value, cst.Name):
                if value.value not in params:
                    params.append(value.value)
                continue
            if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)):
                continue
            computed = True
            why = _not_per_example(program, facts, value, _batch_names(program, facts, call), set())
            if why is None and not any(n.value in _batch_names(program, facts, call) for n in _value_names(value)):
                why = "but it reads no name the loop binds to the batch"

            if why is not None:
                return Refusal(value, (
                    f"{name}() is called on line {program.line(call)} on {_short(program, value)}, computed from the batch "
                    f"before it reaches the step: run per replica with the step (each replica its share of the batch), "
                    f"{why}"
                ))
            batch = _batch_names(program, facts, call)
            for used in _value_names(value):
                if used.value in batch and used.value not in params:
                    params.append(used.value)
        shapes.append((params, arguments))
    if not computed:
        return None
    if any(shape != shapes[0] for shape in shapes):
        return Refusal(calls[1], f"{name}() is called with different arguments on different lines: one wrapper cannot compute them all")
    params, arguments = shapes[0]
    return ComputedInputs(params, arguments)


def _batch_names(program: Program, facts: Facts, call: cst.Call) -> set[str]:
    """The names the loops around ``call`` bind in their targets (the batch and its parts)."""
    found: set[str] = set()
    for ancestor in program.ancestors(call):
        if isinstance(ancestor, cst.For):
            found.update(n.value for n in nodes_in(ancestor.target, cst.Name))
        if isinstance(ancestor, cst.FunctionDef):
            break
    return found


def _value_names(expr: cst.BaseExpression) -> list[cst.Name]:
    """The names ``expr`` reads as values (not called, not the tail of an attribute, not a
    keyword), in order."""
    found: list[cst.Name] = []

    def visit(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name):
            found.append(node)
        elif isinstance(node, cst.Attribute):
            return  # a module's constant (tf.float32): checked where it is read
        elif isinstance(node, cst.Call):
            for arg in node.args:
                visit(arg.value)
        else:
            for child in node.children:
                visit(child)

    visit(expr)
    return found


def _not_per_example(program: Program, facts: Facts, expr: cst.BaseExpression, batch: set[str], seen: set[int], depth: int = 0) -> str | None:
    """Why ``expr`` is not shown to compute each example from that example alone (None: it is)."""
    code = _short(program, expr)
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return None
    if isinstance(expr, cst.Name):
        if expr.value in batch:
            return None
        bindings = facts.bindings(expr) or []
        if bindings and all(program.enclosing_function(b) is None and isinstance(facts.assigned_value(b), (cst.Integer, cst.Float)) for b in bindings):
            return None  # a number of the module
        return f"but it reads {expr.value} (line {program.line(expr)}), which is neither the batch nor a number of the module"
    if isinstance(expr, cst.Attribute):
        if facts.is_module_reference(expr):
            return None  # tf.float32
        return f"but it reads {code} (line {program.line(expr)}), which is not a constant of a module"
    if isinstance(expr, cst.UnaryOperation):
        return _not_per_example(program, facts, expr.expression, batch, seen, depth)
    if isinstance(expr, cst.BinaryOperation):
        if not isinstance(expr.operator, _OPERATORS):
            return f"but {code} (line {program.line(expr)}) is not shown to compute each example on its own"
        return _not_per_example(program, facts, expr.left, batch, seen, depth) or _not_per_example(program, facts, expr.right, batch, seen, depth)
    if isinstance(expr, cst.Subscript):
        return f"but {code} (line {program.line(expr)}) indexes the batch: each replica would index its share of it"
    if isinstance(expr, cst.Call):
        names = facts.names_of(expr.func)
        reduced = next((n for n in names if n.startswith("tensorflow.") and n[len("tensorflow."):].startswith(_REDUCTIONS)), None)
        if reduced is not None or any(".random" in n or n.startswith("numpy.random") for n in names):
            if reduced is None:
                return (
                    f"but {code} (line {program.line(expr)}) draws random numbers: each replica would draw its own, "
                    "not its share of the original's draw (draw them in the dataset, or in the step, then migrate)"
                )
            return (
                f"but {code} (line {program.line(expr)}) reduces over the batch: run per replica it would see only "
                "the replica's share of the batch, not the batch the original computed it on"
            )
        if names & _ELEMENTWISE:
            pass
        else:
            function = facts.local_definition(expr.func)
            if not isinstance(function, cst.FunctionDef):
                return f"but {code} (line {program.line(expr)}) calls {_short(program, expr.func)}, which is not shown to compute each example on its own"
            why = _pure_function(program, facts, function, seen, depth)
            if why is not None:
                return why
        for arg in expr.args:
            if arg.star:
                return f"but {code} (line {program.line(expr)}) passes * or ** arguments"
            why = _not_per_example(program, facts, arg.value, batch, seen, depth)
            if why is not None:
                return why
        return None
    return f"but {code} (line {program.line(expr)}) is not shown to compute each example on its own"


def _pure_function(program: Program, facts: Facts, function: cst.FunctionDef, seen: set[int], depth: int) -> str | None:
    """Why the file's function ``function`` is not shown to compute each example of its
    arguments on its own: its body must be assignments to names and one ``return`` of such
    expressions of its parameters."""
    name = function.name.value
    if id(function) in seen:
        return None
    if depth > 4:
        return f"but {name}() (line {program.line(function)}) calls too deep to follow"
    seen.add(id(function))
    params = function.params
    if params.star_arg is not cst.MaybeSentinel.DEFAULT and params.star_arg is not None or params.star_kwarg or function.decorators:
        return f"but {name}() (line {program.line(function)}) takes * or ** parameters or is decorated"
    local = {p.name.value for p in params.params}
    body = list(function.body.body) if isinstance(function.body, cst.IndentedBlock) else [function.body]
    returned = False
    for index, statement in enumerate(body):
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return f"but {name}() (line {program.line(function)}) does more than compute and return a value (line {program.line(statement)})"
        small = statement.body[0]
        if index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # its docstring
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            why = _not_per_example(program, facts, small.value, local, seen, depth + 1)
            if why is not None:
                return why
            local.add(small.targets[0].target.value)
            continue
        if isinstance(small, cst.Return) and small.value is not None and index == len(body) - 1:
            why = _not_per_example(program, facts, small.value, local, seen, depth + 1)
            if why is not None:
                return why
            returned = True
            continue
        return f"but {name}() (line {program.line(function)}) does more than compute and return a value (line {program.line(statement)})"
    return None if returned else f"but {name}() (line {program.line(function)}) returns nothing"


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
