"""An optimizer that Keras 3 would build inside the distributed step.

Keras 3 makes an optimizer's variables (its iteration count, Adam's moments, SGD's momentum)
on its first update. Once the step runs per replica with ``strategy.run`` in a ``tf.function``,
that first update is inside the function: each replica's copy of a mirrored variable takes
its initial value from the first, which TensorFlow cannot lift out of the function, so it runs
the whole step in a ``tf.cond`` on whether the variables are initialized. Measured (TF 2.21,
Keras 3.15, MirroredStrategy on 2 logical CPUs, TensorFlow's default collective all-reduce,
what a machine of GPUs runs): the step fails on its first call ("You must feed a value for
placeholder tensor ... cond"; keras-team/keras#19246 reports it on 2 GPUs); with
``optimizer.build(model.trainable_variables)`` in the scope before the loop it trains, and so
does tf_keras, whose optimizer makes its variables outside the function. ``autofix smoke``
fails such a run (``run[i].variables``).

So ``migrate`` builds the optimizer of a step on the variables the step updates, right after
the later of the optimizer's and the model's constructions (the scope then takes that
statement with them): when the optimizer is a name made by one Keras constructor, the
variables are ``model.trainable_variables`` (or ``trainable_weights``, or a sum of such) of
models built where they are made, all made in one block. Otherwise (a subclassed model built
by its first call, an optimizer held by an object) it is built in the step, right before the
update, under ``tf.init_scope()``: when the step is traced, outside the function, on the
variables the update names (measured: a subclassed model's Adam so built trains with the
default all-reduce, and the proof finds it the same training). That needs the optimizer and
the variables to be plain names or attributes (read once more, they do nothing else);
otherwise the step is not moved, and the reason is given at the update. Keras 3's plain SGD
(no momentum) makes no variables when built (its iteration count is made with it): it needs
none; nor does an optimizer the script builds itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value
from autofix.tf.symbols import Kind

BUILD_COMMENT = "# Keras 3 makes an optimizer's variables on its first update: made here, not in the distributed step."
IN_STEP_COMMENT = "# Keras 3 makes an optimizer's variables on its first update: made when the step is traced, outside it."

_VARIABLE_LISTS = frozenset({"trainable_variables", "trainable_weights"})


@dataclass(frozen=True)
class OptimizerBuild:
    """``{optimizer}.build({variables})`` to insert after ``statement`` of ``block``."""

    block: cst.CSTNode
    statement: cst.BaseStatement
    code: str


@dataclass(frozen=True)
class InStepBuild:
    """``with tf.init_scope(): {optimizer}.build({variables})`` to insert before ``statement``
    (the update's) of ``block``: where the variables are not known before the loop (a model
    built by its first call), the optimizer is built when the step is traced, outside the
    function (measured: a Keras 3 Adam so built trains with TensorFlow's default all-reduce)."""

    block: cst.CSTNode
    statement: cst.BaseStatement
    code: str


@dataclass(frozen=True)
class Unbuildable:
    call: cst.Call
    reason: str


def optimizer_builds(
    program: Program, facts: Facts, updates: list[cst.Call], built_where_made
) -> tuple[list[OptimizerBuild | InStepBuild], list[Unbuildable]]:
    """The builds the updates' optimizers need, one per optimizer (before the loop where that
    can be shown, else in the step), and the updates whose optimizer cannot be built either
    way. ``built_where_made(call)`` says whether a model construction is built where it is
    made. An ``InStepBuild``'s code names TensorFlow ``tf``: the caller respells it."""
    builds: dict[int, OptimizerBuild | InStepBuild] = {}
    refused: list[Unbuildable] = []
    for update in updates:
        func = update.func
        if not isinstance(func, cst.Attribute):
            continue
        optimizer = func.value
        made = _made_by(facts, optimizer)
        if made is not None and facts.call_kind(made) is Kind.OPTIMIZER and (_built(facts, made) or _makes_no_variables(facts, made)):
            continue  # built by the script itself (``self.opt`` too), or nothing to build
        if isinstance(optimizer, cst.Attribute) and optimizer.attr.value == "optimizer" and _compiled_built(facts):
            continue  # ``self.optimizer``, what compile() gave the model, built by the script
        key = id(made) if made is not None else id(update)
        if key in builds:
            continue
        before = _before_loop(program, facts, update, optimizer, made, built_where_made)
        if isinstance(before, OptimizerBuild):
            builds[key] = before
            continue
        variables = _variables(update)
        statement = program.statement_of(update)
        block = program.block_of(statement) if statement is not None else None
        if variables is None or not _pure(optimizer) or not _pure(variables) or block is None:
            refused.append(Unbuildable(update, _reason(program, update, before)))
            continue
        code = program.module.code_for_node
        builds[key] = InStepBuild(block, statement, f"with tf.init_scope():\n    {code(optimizer)}.build({code(variables)})\n")
    return list(builds.values()), refused


def _before_loop(program: Program, facts: Facts, update: cst.Call, optimizer, made, built_where_made) -> OptimizerBuild | str:
    """The build before the loop, right after what it needs is made; or why there is none."""
    if not isinstance(optimizer, cst.Name) or made is None or facts.call_kind(made) is not Kind.OPTIMIZER:
        return "its optimizer is not a name made by a Keras optimizer constructor of this file"
    variables = _variables(update)
    if variables is None:
        return "the variables it updates are not read from it"
    resolved = _models(facts, variables)
    if resolved is None:
        return f"the variables it updates ({program.module.code_for_node(variables)}) are not the trainable variables of models made in this file"
    models, written = resolved
    unbuilt = next((m for m in models if not built_where_made(m)), None)
    if unbuilt is not None:
        return f"the model made on line {program.line(unbuilt)} is not built where it is made (no input shape), so its variables are not known before the loop"
    statements = [program.statement_of(c) for c in (made, *models)]
    if any(s is None for s in statements) or len({id(program.block_of(s)) for s in statements}) != 1:
        return "the optimizer and the models it updates are not made in one block"
    block = program.block_of(statements[0])
    index = {id(s): i for i, s in enumerate(block.body)}  # type: ignore[union-attr]
    if any(id(s) not in index for s in statements):
        return "the optimizer and the models it updates are not made by statements of their own"
    last = max(statements, key=lambda s: index[id(s)])
    return OptimizerBuild(block, last, f"{program.module.code_for_node(optimizer)}.build({written})")


def _pure(expr: cst.BaseExpression) -> bool:
    """A name, an attribute of one, a constant subscript of one, or a sum of such: evaluated
    once more before the update, it reads the same and does nothing else."""
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return _pure(expr.value)
    if isinstance(expr, cst.Subscript):
        return _pure(expr.value) and all(
            isinstance(e.slice, cst.Index) and isinstance(e.slice.value, (cst.Integer, cst.SimpleString, cst.UnaryOperation))
            or isinstance(e.slice, cst.Slice) for e in expr.slice
        )
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _pure(expr.left) and _pure(expr.right)
    return False


def _reason(program: Program, update: cst.Call, why: str) -> str:
    return (
        f"Keras 3 would make the optimizer's variables on its first update (line {program.line(update)}), inside the distributed "
        f"step, where a machine of GPUs fails (\"You must feed a value for placeholder tensor\"), and it cannot be built before "
        f"the loop ({why}) nor in the step (the optimizer or the variables it updates are not a plain name or attribute); "
        "build it in the script (optimizer.build(model.trainable_variables)), then migrate"
    )


def _made_by(facts: Facts, expr: cst.BaseExpression) -> cst.Call | None:
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    origins = facts.values.origins(expr)
    made = [o.node for o in origins if o.whole and isinstance(o.node, cst.Call)]
    if len(made) != 1 or len(origins) != 1:
        return None
    return made[0]


def _built(facts: Facts, made: cst.Call) -> bool:
    """Whether the script builds the optimizer itself (``optimizer.build(...)``)."""
    for call, _owner in facts.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "build" and isinstance(func.value, (cst.Name, cst.Attribute)):
            if any(o.node is made for o in facts.values.origins(func.value)):
                return True
    return False


def _compiled_built(facts: Facts) -> bool:
    """Whether the script builds the optimizer compile() gave a model (``model.optimizer.build(...)``)."""
    return any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == "build"
        and isinstance(c.func.value, cst.Attribute) and c.func.value.attr.value == "optimizer"
        for c, _owner in facts.calls
    )


def _variables(update: cst.Call) -> cst.BaseExpression | None:
    method = update.func.attr.value  # type: ignore[union-attr]
    if method == "apply_gradients":
        pairs = argument_value(update, "grads_and_vars", 0)
        if isinstance(pairs, cst.Call) and isinstance(pairs.func, cst.Name) and pairs.func.value == "zip" and len(pairs.args) == 2:
            return pairs.args[1].value
        return None
    if method == "apply":
        return argument_value(update, "trainable_variables", 1)
    if method == "minimize":
        return argument_value(update, "var_list", 1)
    return None


def _models(facts: Facts, variables: cst.BaseExpression, depth: int = 0) -> tuple[list[cst.Call], str] | None:
    """The model constructions whose trainable variables ``variables`` is (``m.trainable_variables``,
    or a sum of such, or a name bound once to one), and that expression written with the
    models' names; None when it is anything else."""
    if isinstance(variables, cst.Name) and depth < 3:
        origins = facts.values.origins(variables)
        if len(origins) == 1 and origins[0].whole and isinstance(origins[0].node, cst.BaseExpression):
            return _models(facts, origins[0].node, depth + 1)
        return None
    if isinstance(variables, cst.BinaryOperation) and isinstance(variables.operator, cst.Add):
        left, right = _models(facts, variables.left, depth), _models(facts, variables.right, depth)
        return None if left is None or right is None else (left[0] + right[0], f"{left[1]} + {right[1]}")
    if isinstance(variables, cst.Attribute) and variables.attr.value in _VARIABLE_LISTS and isinstance(variables.value, cst.Name):
        made = _made_by(facts, variables.value)
        if made is not None and (facts.call_kind(made) is Kind.MODEL or isinstance(facts.call_kind(made), cst.FunctionDef)):
            # (What a local factory returns is judged by ``built_where_made``.)
            return [made], f"{variables.value.value}.{variables.attr.value}"
    return None


def _makes_no_variables(facts: Facts, made: cst.Call) -> bool:
    """Keras 3's plain SGD (no momentum, no EMA, no gradient accumulation) makes no variables
    when it is built: its iteration count and learning rate are made with it."""
    if not any(n.endswith("optimizers.SGD") for n in facts.names_of(made.func)):
        return False
    if any(a.keyword is not None and a.keyword.value in ("use_ema", "gradient_accumulation_steps") for a in made.args):
        return False
    momentum = argument_value(made, "momentum", 1)
    return momentum is None or isinstance(momentum, (cst.Integer, cst.Float)) and float(momentum.value) == 0.0
