"""A training step that would build a Keras 3 ``Sequential`` per replica.

A ``Sequential`` made without its input's shape (no ``keras.Input`` first, no
``input_shape=``) is built by its first call. When that call is the distributed step's, the
model is built per replica inside the ``tf.function``. Measured (TF 2.21, Keras 3.15,
MirroredStrategy on 2 logical CPUs), run as written: a Dense fails on the first step ("You
must feed a value for placeholder tensor"), a masked SimpleRNN with an AddN of mismatched
shapes; built in the scope before the loop, both train. (A subclassed model whose layers build
there trains, and so does tf_keras; ``autofix smoke`` fails such a run: ``run[i].built``. The
optimizer's variables made there fail the same way: :mod:`.optimizer_builds`.)

So ``migrate`` builds such a model in the step, right before its call, when the step is
traced and outside it (``with tf.init_scope(): if not model.built: model.build(x.shape)``, x
what the call is given: measured on Keras 3, a Dense Sequential and a masked SimpleRNN so built
train with TensorFlow's default all-reduce, eagerly and in a ``tf.function``, their variables
mirrored, the optimizer's too; the first replica builds it, the others find it built; tf_keras
builds it the same way). Where what the call is given is not a name or attribute whose shape
can be read again (``model(tf.reshape(x, s))``), or the call is not a statement's, the step is
not moved, and the reason is given at the call. Nothing is done where something before the
step's first call may build it (its ``build``, ``fit``, ``predict``, ``evaluate``,
``train_on_batch``, ``load_weights``, or a call of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.core.inline_flow import position_of
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.tf.input_shapes import gives_input_shape

# Methods whose call builds a model.
_BUILDING = frozenset({"build", "fit", "predict", "evaluate", "train_on_batch", "test_on_batch", "predict_on_batch", "load_weights"})


@dataclass(frozen=True)
class Unbuilt:
    call: cst.Call
    reason: str


@dataclass(frozen=True)
class InStepModelBuild:
    """``with tf.init_scope(): if not {model}.built: {model}.build({input}.shape)`` to insert
    before ``statement`` of ``block`` (the statement of the model's first call in that
    function). Its code names TensorFlow ``tf``: the caller respells it."""

    block: cst.CSTNode
    statement: cst.BaseStatement
    code: str


def in_step_builds(program: Program, facts: Facts, calls: list[cst.Call], first: cst.CSTNode) -> list[InStepModelBuild] | Unbuilt:
    """The builds that make, when the step is traced, every Sequential made without its
    input's shape that ``calls`` (what the step runs, its helpers' calls among them) call and
    that nothing written before ``first`` (the loop, or the step's first call) may build: one
    before its first call in each function that calls it; or the first call that cannot be so
    built, with why."""
    builds: dict[tuple[int, int], InStepModelBuild] = {}
    code = program.module.code_for_node
    for call, made in _unbuilt_calls(program, facts, calls, first):
        given = _input_of(call)
        statement = program.statement_of(call)
        block = program.block_of(statement) if statement is not None else None
        nested = _nested(program, call, statement)
        if given is None or not _pure(given) or block is None or nested is not None:
            what = (
                "is not a statement of its own" if block is None
                else f"is in a {nested}, whose names the statement before it does not see" if nested is not None
                else f"is given {code(given)}, whose shape autofix cannot read again to build it before" if given is not None
                else "is given no input whose shape autofix can read to build it before"
            )
            return Unbuilt(call, (
                f"the step calls {code(call.func)} (line {program.line(call)}), a Sequential model made without its "
                f"input's shape (line {program.line(made)}) that nothing builds before the loop: its first call, inside the step that runs on every "
                f"replica, would create its variables there, which fails under MirroredStrategy, and the call {what}: "
                "give it its input shape (keras.Input as its first "
                "layer) or build it before the loop, then migrate"
            ))
        key = (id(made), id(program.enclosing_function(call)))
        if key in builds and position_of(program, builds[key].statement) <= position_of(program, statement):
            continue
        model = code(call.func)
        builds[key] = InStepModelBuild(block, statement, (
            f"with tf.init_scope():\n    if not {model}.built:\n        {model}.build({code(given)}.shape)\n"
        ))
    return list(builds.values())


def _unbuilt_calls(program: Program, facts: Facts, calls: list[cst.Call], first: cst.CSTNode) -> list[tuple[cst.Call, cst.Call]]:
    """Each of ``calls`` that calls an unbuilt Sequential, with its construction, in order."""
    inside = {id(c) for c in calls}
    found = []
    for call in calls:
        if not isinstance(call.func, cst.Name):
            continue
        for origin in facts.values.origins(call.func):
            made = origin.node
            if not (origin.whole and isinstance(made, cst.Call) and _sequential(facts, made)):
                continue
            if _shaped(facts, made) or _built_before(program, facts, made, inside, first):
                continue
            found.append((call, made))
            break
    return found


def _input_of(call: cst.Call) -> cst.BaseExpression | None:
    """What the model is given: its first positional argument, or ``inputs=``."""
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None and index == 0 or arg.keyword is not None and arg.keyword.value == "inputs":
            return arg.value
    return None


_NESTED = {cst.Lambda: "lambda", cst.ListComp: "comprehension", cst.SetComp: "comprehension", cst.DictComp: "comprehension", cst.GeneratorExp: "generator expression"}


def _nested(program: Program, call: cst.Call, statement: cst.CSTNode | None) -> str | None:
    """The lambda or comprehension between ``call`` and its statement, if any: a name it binds
    is not bound where the build would be written."""
    for ancestor in program.ancestors(call):
        if ancestor is statement:
            return None
        for kind, what in _NESTED.items():
            if isinstance(ancestor, kind):
                return what
    return None


def _pure(expr: cst.BaseExpression) -> bool:
    """A name or an attribute of one: read again, it is the same value and does nothing."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name)


def _built_before(program: Program, facts: Facts, made: cst.Call, inside: set[int], first: cst.CSTNode) -> bool:
    """Whether the model ``made`` may be built before ``first``: a building method or a call
    of it written above (in a function too: whether that runs first is not decided, so
    nothing is claimed); True when the name it is bound to is not followed."""
    target = program.parent(made)
    if not (isinstance(target, cst.Assign) and len(target.targets) == 1 and isinstance(target.targets[0].target, cst.Name)):
        return True
    name = target.targets[0].target.value
    start = position_of(program, first)
    for call, _owner in facts.calls:
        if id(call) in inside or position_of(program, call) > start:
            continue
        func = call.func
        if isinstance(func, cst.Name) and func.value == name and any(o.node is made for o in facts.values.origins(func)):
            return True
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in _BUILDING
            and isinstance(func.value, cst.Name)
            and any(o.node is made for o in facts.values.origins(func.value))
        ):
            return True
    return False




def _sequential(facts: Facts, call: cst.Call) -> bool:
    return bool({n.removeprefix("tensorflow.") for n in facts.names_of(call.func)} & {"keras.Sequential", "keras.models.Sequential"})


def _shaped(facts: Facts, made: cst.Call) -> bool:
    """Whether the Sequential ``made`` is given its input's shape: its first layer, in its
    list or its first ``add``, is an ``Input``/``InputLayer`` or has ``input_shape=`` (or a
    like keyword); True when that cannot be read (nothing is claimed then)."""
    layers = made.args[0].value if made.args and made.args[0].keyword is None else None
    for arg in made.args:
        if arg.keyword is not None and arg.keyword.value == "layers":
            layers = arg.value
    if layers is not None:
        if not isinstance(layers, (cst.List, cst.Tuple)):
            return True
        if layers.elements:
            first = layers.elements[0]
            return not isinstance(first, cst.Element) or _gives_shape(facts, first.value)
    program = facts.program
    target = program.parent(made)
    if not (isinstance(target, cst.Assign) and len(target.targets) == 1 and isinstance(target.targets[0].target, cst.Name)):
        return True
    name = target.targets[0].target.value
    adds = [
        c for c, _owner in facts.calls
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "add" and isinstance(c.func.value, cst.Name)
        and c.func.value.value == name and any(o.node is made for o in facts.values.origins(c.func.value))
    ]
    if not adds:
        return True
    first = min(adds, key=lambda c: position_of(program, c))
    return not first.args or _gives_shape(facts, first.args[0].value)


def _gives_shape(facts: Facts, layer: cst.BaseExpression) -> bool:
    if not isinstance(layer, cst.Call):
        return True  # a layer made elsewhere: not read
    return gives_input_shape(facts.names_of(layer.func), layer)
