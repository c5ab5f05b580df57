"""The batch the trained model's ``evaluate`` on arrays is given once the model is made in the
strategy's scope.

Keras 3.15 fails (``InvalidArgumentError: Inputs to operation AddN ... must have the same size
and shape``) when the first batch of a distributed evaluation does not split evenly over the
replicas. A model made in the scope evaluates under the strategy, so ``model.evaluate(x, y)``
on arrays with Keras's default batch (32) fails on 3, 5, 6 or 7 replicas, as does an
explicit ``batch_size=B`` that is not a multiple of the replica count, or a global batch
larger than the arrays when their size is not one. Measured (TF 2.21, Keras 3.15, 3 logical
CPUs, a Dense model made in the scope): ``evaluate`` on 1000, 101, 100, 50 and 20 examples
fails with the default batch, with ``batch_size=32``, and (50 and 20 examples) with
``batch_size=96``; with ``batch_size=min(32 * 3, len(x) // 3 * 3)`` it runs on all of them,
an uneven last batch included (50 examples: 48, then 2, one replica given none), and gives the
loss and metric of the same weights on one device at Keras's default batch (within 2.4e-7;
Keras weighs each batch by its examples). ``predict`` on the same arrays runs with the default
batch and gives the same rows bit for bit, so its batch is left as it is (an empty share, on
fewer examples than replicas, is :mod:`.few_examples`'s).

So each ``evaluate`` of a model that ``fit`` trains in this file, given arrays (``x`` one
array an expression reads again unchanged: a name, an attribute, a subscript by plain values,
a ``.astype(...)`` of one, one scaled by a number, ``x_test / 255.0``, or a list or dict of such inputs,
sized by the first), is given a batch that splits evenly on every replica count:
``batch_size=min(B * N, len(x) // N * N)``, N the replica count and B the batch it had (32
when it had none): the original's batch on each replica, or all the arrays rounded down to a
multiple of N when they are fewer (the rest is an uneven last batch, which runs). What it
computes does not change. Not shown safe, so that call is left as it is by the migration (the
training is migrated), with a note at the call saying on which replica counts it fails and what
to write by hand: arrays whose size no expression reads again unchanged (computed in the call, a name
bound to a list or dict of inputs), ``steps=`` (a larger batch would evaluate more examples), ``*args`` or
``**options`` (which may hold a batch of their own), a model of the file's own class with its own
``test_step`` (its logs may be the last batch's, or a mean of batch means: another batch,
another result).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.analysis.training.sites import Site


@dataclass
class EvalBatch:
    call: cst.Call
    # The model evaluated (its name: it knows its strategy where the strategy's name is not seen).
    model: str
    # The code of the arrays' size read at run time (``len(x_test)``).
    size: str
    # The batch argument's value (``None`` written out: Keras's default), or None when not given.
    batch: cst.BaseExpression | None


@dataclass
class EvalBatches:
    found: list[EvalBatch] = field(default_factory=list)
    # (where, why) for the evaluate calls that cannot be given such a batch.
    # Calls left as they are, with the note that says why (the training is migrated all the same).
    left: list[tuple[cst.CSTNode, str]] = field(default_factory=list)


def eval_batches(program: Program, facts: Facts, sites: list[Site]) -> EvalBatches:
    from autofix.analysis.migration.model_prep import ModelPrep

    result = EvalBatches()
    trained: list[set[int]] = []
    for site in sites:
        func = site.call.func
        if site.kind == "fit" and isinstance(func, cst.Attribute) and func.attr.value == "fit" and isinstance(func.value, cst.Name):
            made = {id(o.node) for o in facts.values.origins(func.value)}
            if made:
                trained.append(made)
    if not trained:
        return result
    prep = ModelPrep.of(program)
    sizes = Sizes.of(program)

    def array(expr: cst.BaseExpression) -> bool:
        """NumPy arrays or a ``keras.datasets`` loader's, or arrays of a size the file shows."""
        if isinstance(expr, (cst.List, cst.Tuple, cst.Dict)):
            # A model of several inputs: ``evaluate([titles, bodies], y)`` or by their names,
            # batched together.
            kind = cst.DictElement if isinstance(expr, cst.Dict) else cst.Element
            return bool(expr.elements) and all(isinstance(e, kind) and array(e.value) for e in expr.elements)
        return prep._array_like(expr) or sizes.rows(expr) is not None

    for call, _owner in facts.calls:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "evaluate" and isinstance(func.value, cst.Name)):
            continue
        made = {id(o.node) for o in facts.values.origins(func.value)}
        if not any(made & ids for ids in trained):
            continue
        x = argument_value(call, "x", 0)
        if x is None or not array(x):
            continue  # a dataset or generator batches itself
        own = _own_test_step(facts, facts.values.origins(func.value))
        batch = argument_value(call, "batch_size", 2)
        line = program.line(call)
        why = None
        if any(a.star for a in call.args):
            why = "it is given *args or **options, which may hold a batch_size of their own"
        elif argument_value(call, "steps", 5) is not None:
            why = "it is given steps=, which a larger batch would make cover more examples"
        elif own is not None:
            why = (
                f"its model's class ({own.name.value}, line {program.line(own)}) has a test_step of its own, whose logs "
                "are not shown to be the same at another batch"
            )
        inputs = _rereadable(x, facts, array)
        if why is None and inputs is None:
            why = f"its inputs ({_short(program, x)}) are not one array whose size an expression reads again unchanged"
        if why is not None:
            result.left.append((call, (
                f"evaluate() on line {line} evaluates a model made in the strategy's scope on arrays, and {why}: "
                "it is left as it is, and Keras 3 fails there on a replica count its first batch does not split "
                "evenly over (32 splits over 2, 4 or 8 replicas, not over 3); give it batch_size=min(<batch> * "
                "<replicas>, <examples> // <replicas> * <replicas>) by hand, or evaluate a tf.data.Dataset"
            )))
            continue
        code = program.module.code_for_node(inputs)  # type: ignore[arg-type]
        result.found.append(EvalBatch(call, func.value.value, f"len({code})", batch))
    return result


def _own_test_step(facts: Facts, origins) -> cst.ClassDef | None:
    """The file's own model class the model is made of, when it (or a class of the file it
    derives from) defines ``test_step``."""
    for origin in origins:
        node = origin.node
        if not (origin.whole and isinstance(node, cst.Call)):
            continue
        cls = facts.local_definition(node.func)
        seen = 0
        while isinstance(cls, cst.ClassDef) and seen < 8:
            seen += 1
            if any(isinstance(s, cst.FunctionDef) and s.name.value == "test_step" for s in cls.body.body):
                return cls
            bases = [b.value for b in cls.bases]
            cls = facts.local_definition(bases[0]) if bases else None
    return None


def _rereadable(inputs: cst.BaseExpression, facts: Facts, array) -> cst.BaseExpression | None:
    """``inputs`` (or the array a ``.astype(...)`` of it casts) when it is one array an
    expression reads again unchanged (a name, an attribute, a subscript by plain values)."""
    if isinstance(inputs, (cst.List, cst.Tuple, cst.Dict)) and inputs.elements and isinstance(inputs.elements[0], (cst.Element, cst.DictElement)):
        # Several inputs, one array each: as many examples as the first.
        return _rereadable(inputs.elements[0].value, facts, array)
    if isinstance(inputs, cst.Call) and isinstance(inputs.func, cst.Attribute) and inputs.func.attr.value == "astype":
        inputs = inputs.func.value
    if isinstance(inputs, cst.BinaryOperation) and not isinstance(inputs.operator, cst.MatrixMultiply):
        # ``x_test / 255.0``: as many examples as the array a number scales.
        if isinstance(inputs.right, (cst.Integer, cst.Float)):
            inputs = inputs.left
        elif isinstance(inputs.left, (cst.Integer, cst.Float)):
            inputs = inputs.right
        else:
            return None
    if not isinstance(inputs, (cst.Name, cst.Attribute, cst.Subscript)):
        return None
    if nodes_in(inputs, (cst.Call, cst.NamedExpr, cst.Yield, cst.Await, cst.Lambda)):
        return None
    if isinstance(inputs, cst.Name):
        # Bound to one array, not to a list or dict of them (whose len is not the examples).
        origins = facts.values.origins(inputs)
        if not origins or any(o.whole and isinstance(o.node, (cst.List, cst.Tuple, cst.Dict)) for o in origins):
            return None
    return inputs if array(inputs) else None


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
