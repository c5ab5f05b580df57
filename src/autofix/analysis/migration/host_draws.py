"""Random numbers a custom step draws with NumPy (a GAN's noise,
``np.random.normal(-1., 1., size=[batch_size, noise_dim]).astype(np.float32)``), drawn with
``tf.random`` once the step is migrated.

Run by ``strategy.run`` in a ``tf.function``, a NumPy draw is made once, while tracing: every
step would get the same numbers (a constant of the graph); run eagerly on every replica, the
replicas would draw in turn from NumPy's one generator. A right migration draws on each replica
what the original's step draws on one device for its own batch, from the same distribution:
``tf.random.normal(shape, mean=loc, stddev=scale)`` for ``normal``, ``tf.random.uniform(shape,
minval=low, maxval=high)`` for ``uniform``, the same shape as written (a shape made from the
batch the script was written with stays each replica's batch). The numbers differ from NumPy's;
the proof holds both draws equal (``smoke/noise.py``: a NumPy draw in a step is drawn as
``tf.random`` draws it for the global batch) or says it could not.

Only what keeps its meaning is rewritten: a draw written in the step itself (not in a helper
that code outside the step may call too), whose shape is written out (a list, a tuple or a
number), made a float32 array where it is drawn (``.astype(np.float32)``: ``tf.random`` draws
float32; NumPy's float64 draw is refused), and whose value is only handed to calls that are not
NumPy's (a model, a ``tf`` op): a tensor is not an array everywhere. Anything else is a
:class:`Refusal` naming the draw and what keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.migration.refusal import Refusal
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import nodes_in
from autofix.tf.numpy_draws import NUMPY_DRAWS

_FLOAT32 = ("numpy.float32",)


@dataclass(frozen=True)
class HostDraw:
    """A NumPy draw of a step and the ``tf.random`` draw that replaces it."""

    # What is replaced: the ``.astype(np.float32)`` call around the draw.
    node: cst.Call
    # The tf.random function (``normal``, ``uniform``), the shape's code, and the keyword
    # arguments' code (``mean=-1.``).
    draw: str
    shape: str
    keywords: tuple[tuple[str, str], ...]

    def code(self, tf: str) -> str:
        keywords = "".join(f", {name}={value}" for name, value in self.keywords)
        return f"{tf}.random.{self.draw}({self.shape}{keywords})"


def host_draws(program: Program, steps: Steps, function: cst.FunctionDef, drawn: cst.Call) -> list[HostDraw] | Refusal:
    """Every NumPy draw of ``function`` rewritten as a ``tf.random`` draw, or why one cannot
    be (``drawn``: the first host draw :func:`~autofix.analysis.steps.tracing.host_random`
    found, in the step or a helper it calls)."""
    facts = steps.facts
    own = [call for call in nodes_in(function.body, cst.Call) if _host(facts.names_of(call.func))]
    if not any(call is drawn for call in own):
        helper = program.enclosing_function(drawn)
        where = f"{helper.name.value}()" if helper is not None else "a function"
        return _refused(program, drawn, f"it is drawn in {where}, which the step calls and code outside the step may call too")
    found: list[HostDraw] = []
    for call in own:
        made = _rewritten(program, facts, function, call)
        if isinstance(made, Refusal):
            return made
        found.append(made)
    return found


def _host(names: frozenset[str]) -> bool:
    return any(name.startswith(("numpy.random.", "random.")) for name in names)


def _refused(program: Program, call: cst.Call, why: str) -> Refusal:
    return Refusal(call, (
        f"the step draws random numbers in Python ({program.module.code_for_node(call.func)}, line {program.line(call)}): "
        "in a traced step they would be drawn once, a constant; run on every replica, each would draw in turn "
        f"from the one generator, not its share of the original's draw; and {why}, so it is not drawn with "
        "tf.random in its place: draw them with tf.random from the batch's shape, then migrate"
    ))


def _rewritten(program: Program, facts, function: cst.FunctionDef, call: cst.Call) -> HostDraw | Refusal:
    names = facts.names_of(call.func)
    numpy = sorted(n.removeprefix("numpy.random.") for n in names if n.startswith("numpy.random."))
    if not numpy or numpy[0] not in NUMPY_DRAWS:
        shown = program.module.code_for_node(call.func)
        return _refused(program, call, f"{shown} has no tf.random draw of the same distribution that autofix writes")
    draw, parameters, separate = NUMPY_DRAWS[numpy[0]]
    if any(arg.star for arg in call.args):
        return _refused(program, call, "its arguments are unpacked (*args)")
    code = program.module.code_for_node
    keywords: list[tuple[str, str]] = []
    if separate:
        if any(arg.keyword is not None for arg in call.args) or not call.args:
            return _refused(program, call, "its shape is not written out")
        shape = "[" + ", ".join(code(arg.value) for arg in call.args) + "]"
    else:
        order = [p for p, _ in parameters] + ["size"]
        given: dict[str, cst.BaseExpression] = {}
        for index, arg in enumerate(call.args):
            key = arg.keyword.value if arg.keyword is not None else (order[index] if index < len(order) else None)
            if key not in order:
                return _refused(program, call, "it is given an argument tf.random has no counterpart of")
            given[key] = arg.value
        size = given.get("size")
        if isinstance(size, (cst.List, cst.Tuple)) and size.elements and not any(isinstance(e, cst.StarredElement) for e in size.elements):
            shape = "[" + ", ".join(code(e.value) for e in size.elements) + "]"
        elif isinstance(size, cst.Integer):
            shape = f"[{code(size)}]"
        else:
            return _refused(program, call, "its size is not written out as a shape (a list, a tuple or a number)")
        for numpy_name, tf_name in parameters:
            if numpy_name in given:
                keywords.append((tf_name, code(given[numpy_name])))
    outer = _as_float32(program, facts, call)
    if outer is None:
        return _refused(program, call, "its float64 array is not made float32 where it is drawn (.astype(np.float32)), as tf.random would draw it")
    used = _used_as_array(program, facts, function, outer)
    if used is not None:
        return _refused(program, call, used)
    return HostDraw(outer, draw, shape, tuple(keywords))


def _as_float32(program: Program, facts, call: cst.Call) -> cst.Call | None:
    """``<draw>.astype(np.float32)`` (or ``"float32"``): the call around the draw."""
    attribute = program.parent(call)
    if not isinstance(attribute, cst.Attribute) or attribute.value is not call or attribute.attr.value != "astype":
        return None
    outer = program.parent(attribute)
    if not isinstance(outer, cst.Call) or outer.func is not attribute or len(outer.args) != 1 or outer.args[0].keyword is not None:
        return None
    dtype = outer.args[0].value
    if isinstance(dtype, cst.SimpleString) and dtype.evaluated_value == "float32":
        return outer
    if any(name in _FLOAT32 for name in facts.names_of(dtype)):
        return outer
    return None


def _used_as_array(program: Program, facts, function: cst.FunctionDef, drawn: cst.Call) -> str | None:
    """Why a tensor would not do where the draw's value goes, or None: it is handed to a call
    that is not NumPy's, directly or through one name assigned once in the step."""
    parent = program.parent(drawn)
    if isinstance(parent, cst.Arg):
        return _numpy_call(program, facts, parent)
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return "its value is not assigned to a name or handed to a call"
    name = parent.targets[0].target.value
    for read in nodes_in(function.body, cst.Name):
        if read.value != name or read is parent.targets[0].target:
            continue
        context = program.parent(read)
        if isinstance(context, cst.AssignTarget):
            continue
        if not isinstance(context, cst.Arg):
            return f"{name} is used on line {program.line(read)} otherwise than handed to a call, where an array and a tensor may differ"
        why = _numpy_call(program, facts, context)
        if why is not None:
            return why
    return None


def _numpy_call(program: Program, facts, arg: cst.Arg) -> str | None:
    call = program.parent(arg)
    if isinstance(call, cst.Call) and any(n.startswith("numpy.") for n in facts.names_of(call.func)):
        return f"its value is handed to NumPy's {program.module.code_for_node(call.func)} (line {program.line(call)})"
    return None
