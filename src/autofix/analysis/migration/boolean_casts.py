"""Boolean arrays handed to ``fit``, cast to float32 where the cast cannot change what is trained.

Keras 3 fails on boolean arrays under a MirroredStrategy (measured on 2 logical CPUs: ``Value
for attr 'T' of bool is not in the list of allowed values ... AddN``, whether the inputs or
only the targets are boolean; both cast, it trains). On one device it converts them itself
(Keras 3.15, read and measured, :mod:`autofix.analysis.facts.booleans`):

- inputs: a functional model (``keras.Model(inputs, outputs)``, a Sequential that starts with
  its input: ``keras.Input``, ``InputLayer``, ``input_shape=`` / ``input_dim=`` on its first
  layer, in its list or its first ``add``) converts each input to its input's dtype, float32
  unless given another; a float32 array of the same 0s and 1s becomes the same tensor. A model
  that is not built where it is made, a class of the file's own, an input of another dtype
  (an integer input, a boolean one) is not shown to convert so: refused;
- targets: a Keras loss converts ``y_true`` to its own dtype, and Keras's metrics compare or
  convert it as numbers; a loss or metric of the file's own (a function that may read the
  labels as booleans), or a model class of the file's own (its own ``train_step``), is not
  shown to: refused.

So a boolean part of ``x``, ``y`` or ``validation_data=(x, y)`` that is certainly a NumPy
boolean array (every value it may hold made with ``dtype=bool`` or ``.astype(bool)``) is
cast in the ``fit`` call itself, ``x_train.astype("float32")``: no other read of the array
changes. Measured: bit for bit the same weights, losses and metrics on one device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis.facts.booleans import BooleanPart, boolean_parts, is_boolean
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value
from autofix.analysis.training.sites import Site
from autofix.tf.input_shapes import gives_input_shape
from autofix.tf.symbols import Kind

_FLOATS = frozenset({"float16", "float32", "float64", "bfloat16"})
_KERAS_MODELS = ("keras.Sequential", "keras.models.Sequential", "keras.Model", "keras.models.Model")


@dataclass
class BooleanCasts:
    # The parts of fit's arguments cast to float32 in the call.
    casts: list[cst.BaseExpression] = field(default_factory=list)
    # (where, why) for the boolean arrays that are not.
    refusals: list[tuple[cst.CSTNode, str]] = field(default_factory=list)


def boolean_casts(program: Program, facts: Facts, sites: list[Site]) -> BooleanCasts:
    found = BooleanCasts()
    for call, site in _calls(facts, sites):
        method = call.func.attr.value  # type: ignore[attr-defined]
        parts = boolean_parts(facts, call)
        why = next((w for w in (_why_not(program, facts, site, part) for part in parts) if w is not None), None)
        if why is None:
            why = _validation_by_name(program, facts, call)
        if why is not None:
            part = next((p for p in parts if _why_not(program, facts, site, p) == why), None)
            given = (
                f" ({_short(program, part.expr)}, made on line {program.line(part.made)}: {_short(program, part.made)})"
                if part is not None
                else ""
            )
            found.refusals.append((call, (
                f"{method} (line {program.line(call)}) is given a boolean array{given}: Keras 3 fails on boolean "
                f"inputs under MirroredStrategy (its first batch is added up with AddN, which has no kernel for bool), "
                f"and {why}; give {method} float or integer arrays (.astype('float32')), then migrate"
            )))
            continue
        found.casts.extend(part.expr for part in parts)
    return found


def _calls(facts: Facts, sites: list[Site]) -> list[tuple[cst.Call, Site]]:
    """The ``fit`` calls of the sites, and the ``evaluate`` calls of the models they train (a
    model made in the scope evaluates under the strategy too: measured, it fails on boolean
    arrays as ``fit`` does), each with the site whose model it is."""
    found: list[tuple[cst.Call, Site]] = []
    trained: list[tuple[set[int], Site]] = []
    for site in sites:
        func = site.call.func
        if site.kind != "fit" or not isinstance(func, cst.Attribute) or func.attr.value != "fit":
            continue
        found.append((site.call, site))
        if isinstance(func.value, cst.Name):
            made = {id(o.node) for o in facts.values.origins(func.value)}
            if made:
                trained.append((made, site))
    for call, _owner in facts.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("evaluate", "test_on_batch") and isinstance(func.value, cst.Name):
            made = {id(o.node) for o in facts.values.origins(func.value)}
            owner = next((site for ids, site in trained if made & ids), None)
            if owner is not None:
                found.append((call, owner))
    return found


def _validation_by_name(program: Program, facts: Facts, call: cst.Call) -> str | None:
    """Why a validation set given by a name (``validation_data=val``) that may hold boolean
    arrays is not cast: a cast in the call cannot reach into it."""
    data = argument_value(call, "validation_data", 7)
    if not isinstance(data, cst.Name):
        return None
    for origin in facts.values.origins(data):
        elements = origin.node.elements if origin.whole and isinstance(origin.node, (cst.Tuple, cst.List)) else ()
        for element in elements:
            if is_boolean(facts, element.value):
                return (
                    f"its validation set is given by a name ({data.value}) holding one ({_short(program, element.value)}), "
                    "which a cast in the call cannot reach"
                )
    return None


def _why_not(program: Program, facts: Facts, site: Site, part: BooleanPart) -> str | None:
    """Why casting ``part`` to float32 in the call is not shown to train the same, or None."""
    if not part.certain:
        return "it is not shown to be only a NumPy boolean array, whose cast to float32 holds the same 0s and 1s"
    if part.role == "w":
        return "a cast of sample weights is not shown to weigh the same"
    models = [m for m in site.members if facts.call_kind(m) == Kind.MODEL]
    if len(models) != 1 or not any(n.endswith(_KERAS_MODELS) for n in facts.names_of(models[0].func)):
        return "the model it trains is not one Keras model made in this file, whose conversion of its data is known"
    if part.role == "x":
        return _float_input(program, facts, site, models[0])
    return _keras_losses(facts, site)


def _float_input(program: Program, facts: Facts, site: Site, model: cst.Call) -> str | None:
    """None when the model converts its inputs to a float dtype (a functional model whose
    inputs are float); else why not shown."""
    names = facts.names_of(model.func)
    unknown = "the model is not shown to take float inputs (to which Keras converts a boolean one on one device)"
    if any(n.endswith(("keras.Model", "keras.models.Model")) for n in names):
        if len(model.args) < 2 and argument_value(model, "inputs") is None:
            return unknown
        inputs = [c for c, _ in facts.calls if any(n.endswith(("keras.Input", "keras.layers.Input", "InputLayer")) for n in facts.names_of(c.func))]
        return None if inputs and all(_float_dtype(facts, c) for c in inputs) else unknown
    layers = argument_value(model, "layers", 0)
    if isinstance(layers, (cst.List, cst.Tuple)):
        first = layers.elements[0].value if layers.elements else None
    elif layers is None:
        # ``model = Sequential(); model.add(first); ...``: the first layer it is given.
        added = [m for m in site.members if facts.call_kind(m) == Kind.LAYER]
        first = min(added, key=lambda m: program.position(m).start.line) if added else None
    else:
        first = None
    if not isinstance(first, cst.Call):
        return unknown
    starts = gives_input_shape(facts.names_of(first.func), first)
    return None if starts and _float_dtype(facts, first) else unknown


def _float_dtype(facts: Facts, call: cst.Call) -> bool:
    """Whether ``call`` (an input or a first layer) is given no dtype (floatx) or a float one."""
    dtype = argument_value(call, "dtype")
    if dtype is None:
        return True
    if isinstance(dtype, cst.SimpleString):
        return dtype.evaluated_value in _FLOATS
    return any(n.rsplit(".", 1)[-1] in _FLOATS for n in facts.names_of(dtype))


def _keras_losses(facts: Facts, site: Site) -> str | None:
    """None when every loss and metric the model is compiled with is Keras's own (a name or
    an object of ``keras.losses`` / ``keras.metrics``); else why not shown."""
    compiles = [m for m in site.members if isinstance(m.func, cst.Attribute) and m.func.attr.value == "compile"]
    if not compiles:
        return "the model's compile is not found, so what reads the targets is not known"
    for call in compiles:
        if sum(a.keyword is None and not a.star for a in call.args) > 2 or any(a.star for a in call.args):
            return "its compile is given arguments by position or unpacked, so what reads the targets is not known"
        for keyword, index in (("loss", 1), ("metrics", None), ("weighted_metrics", None)):
            value = argument_value(call, keyword, index) if index is not None else argument_value(call, keyword)
            if value is not None and not _keras_own(facts, value, keyword):
                return (
                    f"its {keyword} ({_short(facts.program, value)}) {'is' if keyword == 'loss' else 'are'} not Keras's own, and may read the targets "
                    "as booleans"
                )
    return None


def _keras_own(facts: Facts, value: cst.BaseExpression, keyword: str) -> bool:
    if isinstance(value, cst.SimpleString):
        return True
    if isinstance(value, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _keras_own(facts, e.value, keyword) for e in value.elements)
    if isinstance(value, cst.Dict):
        return all(isinstance(e, cst.DictElement) and _keras_own(facts, e.value, keyword) for e in value.elements)
    if isinstance(value, cst.Name) and value.value == "None":
        return True
    target = value.func if isinstance(value, cst.Call) else value
    module = "keras.losses." if keyword == "loss" else "keras.metrics."
    return bool(facts.names_of(target)) and all(n.startswith(module) for n in facts.names_of(target))


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
