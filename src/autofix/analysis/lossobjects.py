"""Keras loss objects in this file: which construction a callable is, what it is reduced
with, who else uses it, and whether a class is a Keras ``Loss``."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.callees import Callables
from autofix.analysis.facts import Facts
from autofix.tf.symbols import Kind


def loss_object(facts: Facts, callables: Callables, func: cst.BaseExpression) -> cst.Call | None:
    """The Keras loss construction ``func`` is: made right there, bound to a name, or assigned
    to ``self.<name>`` once in the step's class."""
    if isinstance(func, cst.Call):
        return func if facts.call_kind(func) is Kind.LOSS else None
    values: list[cst.BaseExpression | None]
    if isinstance(func, cst.Name):
        values = [facts.assigned_value(b) for b in facts.bindings(func) or []]
    else:
        values = [v for v, _ in callables.attribute_assignments(func)]
    if len(values) == 1 and isinstance(values[0], cst.Call) and facts.call_kind(values[0]) is Kind.LOSS:
        return values[0]
    return None


def object_uses(facts: Facts, callables: Callables, func: cst.BaseExpression) -> list[cst.CSTNode]:
    """Every read of the loss object ``func`` names."""
    if isinstance(func, cst.Name):
        return [use for binding in facts.bindings(func) or [] if isinstance(binding, cst.Name) for use in facts.uses(binding)]
    return callables.attribute_reads(func)


def reduction(construction: cst.Call) -> str:
    """"default" (``sum_over_batch_size``, ``auto``, ``mean``, or none given), "none", "sum",
    or "other"."""
    for arg in construction.args:
        if arg.keyword is not None and arg.keyword.value == "reduction":
            value = arg.value
            if isinstance(value, cst.SimpleString):
                text = str(value.evaluated_value)
            elif isinstance(value, cst.Attribute):
                text = value.attr.value
            elif isinstance(value, cst.Name) and value.value == "None":
                text = "none"
            else:
                return "other"
            text = text.lower()
            if text == "none":
                return "none"
            if text == "sum":
                return "sum"
            if text in ("auto", "sum_over_batch_size", "mean"):
                return "default"
            return "other"
    return "default"


def construction_reduction(facts: Facts, callables: Callables, func: cst.BaseExpression) -> str:
    values = [facts.assigned_value(b) for b in facts.bindings(func) or []] if isinstance(func, cst.Name) else [v for v, _ in callables.attribute_assignments(func)]
    found = {reduction(v) for v in values if isinstance(v, cst.Call)}
    return found.pop() if len(found) == 1 else "other"


def keras_loss_class(name: str) -> bool:
    head, _, last = name.rpartition(".")
    return head == "keras.losses" and last[:1].isupper() and last != "Reduction" or name == "keras.Loss"


def keras_loss_function(names: frozenset[str]) -> bool:
    return any(n.startswith("keras.losses.") and n.rpartition(".")[2][:1].islower() and n.rpartition(".")[2] != "get" for n in names)
