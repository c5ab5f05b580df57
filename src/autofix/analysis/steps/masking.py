"""Whether the predictions a Keras loss object is called on may carry a Keras mask.

With a mask (``Embedding(mask_zero=True)``, ``Masking``, a layer with ``compute_mask``), a loss
object with the default reduction averages over the unmasked entries only; with
``reduction="none"`` Keras multiplies by the mask and leaves the division to the caller, so
``tf.reduce_mean`` of it divides by every entry (measured: docs/losses.md). A change of
reduction keeps what the loss is only where no mask can reach it: nothing in the file makes
one, and the predictions come from a model or layer built here (not loaded, not from another
module), or from TensorFlow operations (which return plain tensors).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.callees import Callables, Callee
from autofix.analysis.facts.arrays import Arrays
from autofix.analysis.facts.script import Facts
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.tf.symbols import Kind

# Names that make or pass on a mask.
_MASK_NAMES = frozenset({"mask_zero", "Masking", "compute_mask", "supports_masking", "_keras_mask", "set_keras_mask"})
_DEPTH = 6


def mask_source(facts: Facts, loss_call: cst.Call) -> cst.CSTNode | None:
    """Where a mask may come from for the predictions of ``loss_call`` (a loss object's
    call), or None when none can."""
    made = _masks_made(facts)
    if made is not None:
        return made
    predictions = argument_value(loss_call, "y_pred", 1)
    if predictions is None:
        return loss_call
    return _unknown_origin(facts, Callables.of(facts.program), predictions, 0)


def _masks_made(facts: Facts) -> cst.CSTNode | None:
    for name in nodes_in(facts.program.module, cst.Name):
        if name.value not in _MASK_NAMES:
            continue
        parent = facts.program.parent(name)
        if isinstance(parent, cst.Arg) and parent.keyword is name:
            if isinstance(parent.value, cst.Name) and parent.value.value in ("False", "None"):
                continue
        return name
    return None


def _unknown_origin(facts: Facts, callables: Callables, expr: cst.BaseExpression, depth: int) -> cst.CSTNode | None:
    """The first place ``expr``'s value may come from that is not known to be mask-free."""
    if depth > _DEPTH:
        return expr
    if isinstance(expr, cst.Name):
        if _dataset_item(facts, expr):
            return None
        bindings = facts.bindings(expr) or []
        if len(bindings) == 1 and isinstance(bindings[0], cst.Param):
            return _passed_origin(facts, callables, bindings[0], depth)
        values = [facts.assigned_value(b) for b in bindings]
        if not values or any(v is None for v in values):
            return _element_origin(facts, callables, bindings, depth) if bindings else expr
        for value in values:
            found = _unknown_origin(facts, callables, value, depth + 1)  # type: ignore[arg-type]
            if found is not None:
                return found
        return None
    if isinstance(expr, cst.Subscript):
        return _unknown_origin(facts, callables, expr.value, depth + 1)
    if isinstance(expr, cst.Call):
        if any(n.startswith("tensorflow.") for n in facts.names_of(expr.func)):
            return None  # a TensorFlow operation returns a plain tensor
        return None if _built_here(facts, callables, expr.func, depth) else expr
    return expr


def _passed_origin(facts: Facts, callables: Callables, param: cst.Param, depth: int) -> cst.CSTNode | None:
    """A helper's parameter: what every call of the helper in this file passes for it."""
    program = facts.program
    function = program.enclosing_function(param)
    info = facts.functions.get(function) if function is not None else None
    if info is None:
        return param
    if info.is_method:
        refs = callables.self_attributes(function).get(function.name.value, ([], []))[1]
        bound = True
    else:
        refs, bound = facts.references(function), False
    if not refs:
        return param
    for ref in refs:
        call = program.parent(ref)
        if not (isinstance(call, cst.Call) and call.func is ref):
            return ref
        arg = Callee(function, bound).argument(call, param)
        if arg is None:
            return call
        found = _unknown_origin(facts, callables, arg.value, depth + 1)
        if found is not None:
            return found
    return None


def _element_origin(facts: Facts, callables: Callables, bindings: list, depth: int) -> cst.CSTNode | None:
    """``logits, _ = model(x)``: where the unpacked value comes from."""
    for binding in bindings:
        program = facts.program
        element = program.parent(binding)
        holder = program.parent(element) if isinstance(element, cst.Element) else None
        target = program.parent(holder) if holder is not None else None
        assign = program.parent(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign):
            return binding
        value = assign.value
        if isinstance(value, (cst.Tuple, cst.List)) and isinstance(holder, (cst.Tuple, cst.List)):
            position = list(holder.elements).index(element)
            if position >= len(value.elements) or isinstance(value.elements[position], cst.StarredElement):
                return binding
            value = value.elements[position].value
        found = _unknown_origin(facts, callables, value, depth + 1)
        if found is not None:
            return found
    return None


def _dataset_item(facts: Facts, name: cst.Name) -> bool:
    """A name whose every value is an item of what a ``tf.data`` dataset yields (``for step,
    (x, y) in enumerate(ds)``, also of a distributed dataset, also handed to a step as its
    parameter): what a dataset yields is a plain tensor, never one a Keras layer attached a
    mask to."""
    origins = facts.values.origins(name)
    return bool(origins) and all(
        all(kind == "item" for kind, _key in o.path) and isinstance(o.node, cst.BaseExpression) and _is_dataset(facts, o.node, 0)
        for o in origins
    )


def _is_dataset(facts: Facts, expr: cst.BaseExpression, depth: int) -> bool:
    """Input that batches itself (:meth:`Arrays.is_dataset`), also iterated through
    ``enumerate`` or ``zip``, or distributed (``strategy.distribute_datasets_from_function``)."""
    if depth > _DEPTH:
        return False
    if isinstance(expr, cst.Call):
        names = facts.names_of(expr.func)
        if names & {"builtins.enumerate", "builtins.zip"}:
            values = [a.value for a in expr.args if a.keyword is None and not a.star]
            if "builtins.enumerate" in names:
                values = values[:1]
            return bool(values) and all(_is_dataset(facts, v, depth + 1) for v in values)
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "distribute_datasets_from_function":
            return True
    return Arrays.of(facts.program).is_dataset(expr)


def _built_here(facts: Facts, callables: Callables, func: cst.BaseExpression, depth: int) -> bool:
    """Whether calling ``func`` calls a Keras model or layer built in this file: every value
    the file's value flow says it may be (through names, parameters, ``self.<name>`` set from
    a constructor's argument) is made here by a Keras constructor or a Keras class of the file,
    or is ``self`` in a method of one (the model calling itself in its ``train_step``)."""
    if isinstance(func, cst.Call):
        return _makes_keras(facts, callables, func, depth)
    values = facts.values
    origins = values.origins(func)
    if not origins:
        return False
    for origin in origins:
        node = origin.node
        if not origin.whole:
            return False
        if isinstance(node, cst.Call) and _makes_keras(facts, callables, node, depth):
            continue
        if isinstance(node, cst.Param) and values.is_self(node):
            function = values.enclosing_function(node)
            if function is not None and values.class_of(function) in facts.keras_classes:
                continue
        return False
    return True


def _makes_keras(facts: Facts, callables: Callables, call: cst.Call, depth: int) -> bool:
    kind = facts.call_kind(call)
    if kind in (Kind.MODEL, Kind.LAYER):
        # A Keras constructor, or a Keras class of this file (not a builder from elsewhere).
        local = facts.local_definition(call.func)
        return isinstance(local, cst.ClassDef) or any(n.startswith("keras.") for n in facts.names_of(call.func))
    if isinstance(kind, cst.FunctionDef) and depth < _DEPTH and kind in facts.functions:
        returns = [r.value for r in facts.functions[kind].returns if r.value is not None]
        return bool(returns) and all(
            isinstance(r, cst.Call) and _makes_keras(facts, callables, r, depth + 1)
            or isinstance(r, cst.Name) and _built_here(facts, callables, r, depth + 1)
            for r in returns
        )
    return False
