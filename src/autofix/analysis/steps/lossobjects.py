"""Keras loss objects in this file: which construction a callable is, what it is reduced
with, who else uses it, and whether a class is a Keras ``Loss``."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.script import Facts
from autofix.analysis.syntax import attribute_path
from autofix.tf.symbols import Kind


def loss_objects(facts: Facts, func: cst.BaseExpression) -> list[cst.Call]:
    """The Keras loss constructions a call of ``func`` may run, followed by the file's value
    flow (:mod:`autofix.analysis.core.value_flow`): made right there, bound to a name (each
    binding that may reach the call), stored in ``self.<name>``, passed to a parameter (``model.compile(loss_fn=...)``
    stored by the method). Empty when any value ``func`` may have is something else or is
    not known."""
    if isinstance(func, cst.Call):
        return [func] if facts.call_kind(func) is Kind.LOSS else []
    origins = facts.values.origins(func)
    found: list[cst.Call] = []
    for origin in origins:
        node = origin.node
        if not origin.whole or not isinstance(node, cst.Call) or facts.call_kind(node) is not Kind.LOSS:
            return []
        found.append(node)
    return list(dict.fromkeys(found))


def object_uses(facts: Facts, constructions: list[cst.Call]) -> list[cst.CSTNode]:
    """Every use of the loss objects ``constructions`` make: their calls, and every read that
    hands one on where the value flow does not follow it. Followed: the names they are bound
    to, the ``self.<name>`` they are stored in, the parameters of this file's functions they
    are passed to."""
    program = facts.program
    uses: list[cst.CSTNode] = []
    seen: set[int] = set()
    todo: list[cst.CSTNode] = list(constructions)
    while todo:
        node = todo.pop()
        if id(node) in seen or len(seen) > 1000:
            continue
        seen.add(id(node))
        parent = program.parent(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            uses.append(node)
            continue
        onward = _flows_to(facts, node, parent)
        if onward is None:
            uses.append(node)
        else:
            todo.extend(onward)
    return sorted(uses, key=lambda n: program.line(n))


def _flows_to(facts: Facts, node: cst.CSTNode, parent: cst.CSTNode | None) -> list[cst.CSTNode] | None:
    """The reads of where the value ``node`` is put (a name, ``self.<name>``, a local
    function's parameter), or None when it goes anywhere else."""
    program = facts.program
    values = facts.values
    if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Name):
            return list(facts.uses(target))
        path = attribute_path(target)
        if path is not None and len(path) == 2 and path[0] == "self":
            function = values.enclosing_function(target)
            cls = values.class_of(function) if function is not None else None
            if cls is None:
                return None
            return [read for c in values.family(cls) for read in values.self_reads(c).get(path[1], ())]
        return None
    if isinstance(parent, cst.Arg) and parent.value is node and not parent.star:
        call = program.parent(parent)
        function = values.local_definition(call.func) if isinstance(call, cst.Call) else None
        if not isinstance(function, cst.FunctionDef) and isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            function = _method_called(values, call.func)
        if not isinstance(function, cst.FunctionDef):
            return None
        param = _param_of(values, function, call, parent)  # type: ignore[arg-type]
        return list(facts.uses(param)) if param is not None else None
    return None


def _method_called(values, func: cst.Attribute) -> cst.FunctionDef | None:
    """The method of this file that ``obj.method`` runs, when every value ``obj`` may have is
    made by a class here and they all run the same one."""
    found: set[cst.FunctionDef] = set()
    for origin in values.origins(func.value):
        node = origin.node
        cls = values.local_definition(node.func) if origin.whole and isinstance(node, cst.Call) else None
        if not isinstance(cls, cst.ClassDef):
            return None
        method = next(
            (s for c in [cls, *values.bases(cls)] for s in c.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value),
            None,
        )
        if method is None:
            return None
        found.add(method)
    return found.pop() if len(found) == 1 else None


def _param_of(values, function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> cst.Param | None:
    """The parameter of ``function`` that ``call`` passes ``arg`` for."""
    offset = 1 if values.functions.get(function) is not None and values.functions[function].is_method else 0
    params = list(function.params.params)
    if arg.keyword is not None:
        for param in (*params, *function.params.kwonly_params):
            if param.name.value == arg.keyword.value:
                return param
        return None
    position = [a for a in call.args if a.keyword is None].index(arg) + offset
    return params[position] if position < len(params) else None


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


def common_reduction(constructions: list[cst.Call]) -> str:
    """The reduction every one of ``constructions`` has ("other" when they differ, or none)."""
    found = {reduction(c) for c in constructions}
    return found.pop() if len(found) == 1 else "other"


def construction_reduction(facts: Facts, callables: Callables, func: cst.BaseExpression) -> str:
    values = [facts.assigned_value(b) for b in facts.bindings(func) or []] if isinstance(func, cst.Name) else [v for v, _ in callables.attribute_assignments(func)]
    found = {reduction(v) for v in values if isinstance(v, cst.Call)}
    return found.pop() if len(found) == 1 else "other"


# Loss functions spelled in capitals (``tf.keras.losses.MSE`` is ``mean_squared_error``, one
# loss per example, as on tf_keras): functions, not classes, whatever their first letter says.
KERAS_LOSS_FUNCTION_ALIASES = frozenset({"KLD", "MAE", "MAPE", "MSE", "MSLE"})


def keras_loss_class(name: str) -> bool:
    head, _, last = name.rpartition(".")
    return (
        head == "keras.losses" and last[:1].isupper() and last not in ("Reduction", *KERAS_LOSS_FUNCTION_ALIASES)
        or name == "keras.Loss"
    )


def keras_own(facts: Facts, constructions: list[cst.Call]) -> bool:
    """Whether every construction makes one of Keras's own loss classes (whose ``call``
    returns one loss per example, unreduced)."""
    return bool(constructions) and all(any(keras_loss_class(n) for n in facts.names_of(c.func)) for c in constructions)


def keras_loss_function(names: frozenset[str]) -> bool:
    """Whether one of ``names`` is a Keras loss function (``keras.losses.mse``, ``tf.keras.losses.MSE``):
    one loss per example, reduced over the last axis only."""
    return any(
        n.startswith("keras.losses.")
        and (n.rpartition(".")[2][:1].islower() and n.rpartition(".")[2] != "get" or n.rpartition(".")[2] in KERAS_LOSS_FUNCTION_ALIASES)
        for n in names
    )
