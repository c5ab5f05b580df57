"""Boolean arrays handed to ``fit``: Keras 3 cannot train on them under a MirroredStrategy.

Measured (TF 2.21, Keras 3.15, 2 logical CPUs): ``fit`` on NumPy arrays of ``dtype=bool``
under MirroredStrategy fails at its first batch (``Value for attr 'T' of bool is not in the
list of allowed values ... node AddN``), where it trains on one device (keras-io's
``addition_rnn.py`` one-hot encodes its digits so). What one device does with them
(Keras 3.15, read and measured): a functional model (``keras.Input``, a Sequential that starts
with its input) converts each input to its input's dtype (``Functional._convert_inputs_to_tensors``),
float32 unless given another, and a Keras loss converts ``y_true`` to its own dtype
(``Loss.__call__``); ``fit`` on ``x.astype("float32")``, ``y.astype("float32")`` trains to the
same weights, losses and metrics, bit for bit (an LSTM, a Dense stack, ``accuracy``). Whether
that holds for the model fit trains is the migration's question
(:mod:`autofix.analysis.migration.boolean_casts`); here: which parts of ``fit``'s arguments are
boolean, and whether every value they may hold is a NumPy boolean array (which ``astype``
casts).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.core.origins import Origin
from autofix.analysis.facts.script import Facts
from autofix.analysis.syntax import argument_value

_BOOL = frozenset({"bool", "numpy.bool_", "numpy.bool", "tensorflow.bool"})


@dataclass(frozen=True)
class BooleanPart:
    """A part of ``fit``'s arguments that may be a boolean array."""

    # What Keras reads it as: "x" (inputs), "y" (targets) or "w" (sample weights).
    role: str
    expr: cst.BaseExpression
    # Where a boolean array it may hold is made.
    made: cst.CSTNode
    # Whether every value it may hold is a NumPy boolean array (made with ``dtype=bool`` by
    # NumPy, or by ``.astype(bool)``), followed through names, slices and helpers' returns.
    certain: bool


def boolean_parts(facts: Facts, fit: cst.Call) -> list[BooleanPart]:
    """The parts of ``fit``'s ``x``, ``y`` and ``validation_data=(x, y[, w])`` (each a list,
    tuple or dict of arrays, or one array) that may be boolean arrays."""
    given: list[tuple[str, cst.BaseExpression | None]] = [("x", argument_value(fit, "x", 0)), ("y", argument_value(fit, "y", 1))]
    validation = argument_value(fit, "validation_data", 7)
    if isinstance(validation, (cst.Tuple, cst.List)):
        given.extend((role, e.value) for role, e in zip(("x", "y", "w"), validation.elements))
    found = []
    for role, argument in given:
        if argument is None:
            continue
        if isinstance(argument, (cst.List, cst.Tuple)):
            parts = [e.value for e in argument.elements]
        elif isinstance(argument, cst.Dict):
            parts = [e.value for e in argument.elements if isinstance(e, cst.DictElement)]
        else:
            parts = [argument]
        for part in parts:
            made = _made_boolean(facts, part, 0)
            if made is not None:
                found.append(BooleanPart(role, part, made, _all_boolean(facts, part, 0)))
    return found


def is_boolean(facts: Facts, expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` may be a boolean array."""
    return _made_boolean(facts, expr, 0) is not None


def _all_boolean(facts: Facts, expr: cst.BaseExpression, depth: int) -> bool:
    """Whether every value ``expr`` may hold is a NumPy boolean array."""
    if depth > 8:
        return False
    if isinstance(expr, cst.Comparison):
        return _numpy(facts, expr.left, depth + 1)
    if isinstance(expr, cst.Subscript):
        return _all_boolean(facts, expr.value, depth + 1)
    if isinstance(expr, cst.Call):
        if _boolean_type(facts, argument_value(expr, "dtype")):
            return any(n.startswith("numpy.") for n in facts.names_of(expr.func))
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "astype" and expr.args and _boolean_type(facts, expr.args[0].value):
            return True
        local = facts.local_definition(expr.func)
        if isinstance(local, cst.FunctionDef):
            returned = facts.values.returned(local, expr)
            return bool(returned) and all(_boolean_origin(facts, o, depth) for o in returned)
        return False
    if isinstance(expr, cst.Name):
        origins = [o for o in facts.values.origins(expr) if o.node is not expr]
        return bool(origins) and all(_boolean_origin(facts, o, depth) for o in origins)
    return False


def _numpy(facts: Facts, expr: cst.BaseExpression, depth: int) -> bool:
    """Whether ``expr`` is certainly a NumPy array: made by NumPy, drawn from a NumPy generator
    (``rng.random(n)`` of ``rng = np.random.default_rng()``), or arithmetic on one."""
    if depth > 8:
        return False
    if isinstance(expr, cst.Subscript):
        return _numpy(facts, expr.value, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        return _numpy(facts, expr.left, depth + 1) or _numpy(facts, expr.right, depth + 1)
    if isinstance(expr, cst.Call):
        if any(n.startswith("numpy.") for n in facts.names_of(expr.func)):
            return True
        return isinstance(expr.func, cst.Attribute) and _numpy(facts, expr.func.value, depth + 1)
    if isinstance(expr, cst.Name):
        origins = [o for o in facts.values.origins(expr) if o.node is not expr]
        return bool(origins) and all(o.whole and isinstance(o.node, cst.BaseExpression) and _numpy(facts, o.node, depth + 1) for o in origins)
    return False


def _boolean_origin(facts: Facts, origin: Origin, depth: int) -> bool:
    """Whether an origin is a NumPy boolean array, or items of one (the value flow follows
    ``x = x[indices]`` into the array it indexes)."""
    node = origin.node
    if not isinstance(node, cst.BaseExpression):
        return False
    if origin.whole:
        return _all_boolean(facts, node, depth + 1)
    return isinstance(node, cst.Call) and all(kind == "item" for kind, _ in origin.path) and _all_boolean(facts, node, depth + 1)


def _made_boolean(facts: Facts, expr: cst.BaseExpression, depth: int) -> cst.CSTNode | None:
    """Where ``expr`` (followed through names, slices and helpers' returns) may be made a
    boolean array: ``np.zeros(..., dtype=bool)``, ``a.astype(bool)``."""
    if depth > 8:
        return None
    if isinstance(expr, cst.Subscript):
        return _made_boolean(facts, expr.value, depth + 1)
    if isinstance(expr, cst.Comparison):
        return expr  # ``rng.random(n) < 0.2``: an array of booleans
    if isinstance(expr, (cst.List, cst.Tuple)):
        for element in expr.elements:
            found = _made_boolean(facts, element.value, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(expr, cst.Call):
        if _boolean_type(facts, argument_value(expr, "dtype")):
            return expr
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "astype" and expr.args and _boolean_type(facts, expr.args[0].value):
            return expr
        local = facts.local_definition(expr.func)
        if isinstance(local, cst.FunctionDef):
            return _first(facts, [o.node for o in facts.values.returned(local, expr)], depth)
        return None
    if isinstance(expr, cst.Name):
        return _first(facts, [o.node for o in facts.values.origins(expr) if o.node is not expr], depth)
    return None


def _first(facts: Facts, nodes: list[cst.CSTNode], depth: int) -> cst.CSTNode | None:
    for node in nodes:
        if isinstance(node, cst.BaseExpression):
            found = _made_boolean(facts, node, depth + 1)
            if found is not None:
                return found
    return None


def _boolean_type(facts: Facts, expr: cst.BaseExpression | None) -> bool:
    if expr is None:
        return False
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "bool"
    if isinstance(expr, cst.Name) and expr.value == "bool":
        return True
    return bool(facts.names_of(expr) & _BOOL)
