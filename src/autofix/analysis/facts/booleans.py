"""Boolean arrays handed to ``fit``: Keras 3 cannot train on them under a MirroredStrategy.

Measured (TF 2.21, Keras 3.15, 2 logical CPUs): ``fit`` on NumPy arrays of ``dtype=bool``
under MirroredStrategy fails at its first batch (``Value for attr 'T' of bool is not in the
list of allowed values ... node AddN``), where it trains on one device (keras-io's
``addition_rnn.py`` one-hot encodes its digits so). The migration cannot show what type to give
them (the model may read them as 0/1 floats, or compare them), so it says so and leaves the
script alone.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.syntax import argument_value

_BOOL = frozenset({"bool", "numpy.bool_", "numpy.bool", "tensorflow.bool"})


def boolean_input(facts: Facts, fit: cst.Call) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
    """(the argument, where its boolean array is made) for the first of ``fit``'s ``x``, ``y``
    and ``validation_data`` arrays that may be boolean, else None."""
    arguments = [argument_value(fit, "x", 0), argument_value(fit, "y", 1)]
    validation = argument_value(fit, "validation_data", 7)
    if isinstance(validation, (cst.Tuple, cst.List)):
        arguments.extend(e.value for e in validation.elements)
    for argument in arguments:
        made = _made_boolean(facts, argument, 0) if argument is not None else None
        if made is not None:
            return argument, made
    return None


def _made_boolean(facts: Facts, expr: cst.BaseExpression, depth: int) -> cst.CSTNode | None:
    """Where ``expr`` (followed through names, slices and helpers' returns) may be made a
    boolean array: ``np.zeros(..., dtype=bool)``, ``a.astype(bool)``."""
    if depth > 8:
        return None
    if isinstance(expr, cst.Subscript):
        return _made_boolean(facts, expr.value, depth + 1)
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
