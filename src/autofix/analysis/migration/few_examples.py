"""A trained model asked to predict or evaluate on fewer examples than there may be replicas.

Once migrated, the model is made in the strategy's scope, and Keras 3 splits what its
``predict`` and ``evaluate`` are given over the replicas as it splits what ``fit`` trains on.
Measured (TF 2.21, Keras 3.15, 2 logical CPUs, a model made in the scope): ``predict`` on one
example hands the other replica an empty batch, which an ``LSTM`` (alone, returning sequences,
after an ``Embedding``, in a ``Bidirectional``: ``Shape must be rank 1 but is rank 2 ...
BiasAdd``) and a ``Conv1D`` fail on (``Dense``, ``Conv2D`` with pooling, ``BatchNormalization``,
``Dropout``, ``GRU`` and ``SimpleRNN`` run); ``evaluate`` on one example fails whatever the
layers (its first batch does not split evenly: ``AddN``). Calling the model itself (``model(x, training=False)``) runs on one
device and works on any number of examples. keras-io's addition RNN predicts one example at a
time (``model.predict(x_val[np.array([ind])])``) between its epochs: migrated, it would train
its first epoch and then fail.

So an ``evaluate`` of a model that ``fit`` trains, or a ``predict`` of one that has such a
layer, given an expression that holds one example (an index by a list or array of one element, ``x[i:i + 1]``, ``x[None]``,
``np.expand_dims(x, 0)``) or a number of examples the file shows to be fewer than 16, is a
reason not to migrate, with the advice to call the model itself there.

Except where the migration can call the model itself: a ``predict`` given only its examples
(and ``verbose=``, which only shows a progress bar) of a ``Sequential`` model (one output)
becomes ``model(x, training=False).numpy()``. Measured (TF 2.21, Keras 3, 2 logical CPUs, an
addition-RNN-shaped ``Sequential``: LSTM, RepeatVector, LSTM returning sequences, Dense
softmax, boolean inputs): the model made in the scope, ``predict`` on one row fails
(``ValueError``), and the call gives the NumPy array, of the same shape, dtype and values
(within 0) as ``predict`` of the same weights on one device. ``predict_on_batch`` is no way
out: it hands each replica the whole batch and returns its rows once per replica.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value
from autofix.analysis.training.sites import Site

# As many replicas as one machine's GPUs (the bound TFD002's first batches are held to).
MAX_REPLICAS = 16
_METHODS = ("predict", "predict_on_batch", "evaluate", "test_on_batch")
# Layers measured to fail on an empty batch (predict on fewer examples than replicas).
_EMPTY_BATCH_FAILS = (".LSTM", ".Conv1D", ".Convolution1D")


def few_examples(program: Program, facts: Facts, sites: list[Site]) -> list[tuple[cst.CSTNode, str]]:
    """(where, why) for each predict or evaluate call of a trained model on fewer examples than
    there may be replicas that the migration cannot make call the model itself."""
    return [(call, why) for call, why, direct in _judged(program, facts, sites) if not direct]


def one_device_predicts(program: Program, facts: Facts, sites: list[Site]) -> list[cst.Call]:
    """The ``predict`` calls on fewer examples than there may be replicas that become calls
    of the model itself (``model(x, training=False).numpy()``, see :func:`called_directly`)."""
    return [call for call, _why, direct in _judged(program, facts, sites) if direct]


def called_directly(call: cst.Call) -> cst.BaseExpression:
    """``model.predict(x)`` -> ``model(x, training=False).numpy()``: run on one device, the
    same array."""
    func = call.func
    assert isinstance(func, cst.Attribute)
    x = argument_value(call, "x", 0)
    assert x is not None
    model = cst.Call(func.value, [
        cst.Arg(x, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
        cst.Arg(cst.Name("False"), keyword=cst.Name("training"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))),
    ])
    return call.with_changes(func=cst.Attribute(model, cst.Name("numpy")), args=[])


def _judged(program: Program, facts: Facts, sites: list[Site]) -> list[tuple[cst.Call, str, bool]]:
    """(call, why, whether the migration calls the model itself there instead) for each
    predict or evaluate call of a trained model on fewer examples than there may be replicas."""
    trained: list[tuple[set[int], Site]] = []
    for site in sites:
        func = site.call.func
        if site.kind == "fit" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            made = {id(o.node) for o in facts.values.origins(func.value)}
            if made:
                trained.append((made, site))
    if not trained:
        return []
    sizes = Sizes.of(program)
    found = []
    for call, _owner in facts.calls:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _METHODS and isinstance(func.value, cst.Name)):
            continue
        made = {id(o.node) for o in facts.values.origins(func.value)}
        models = [site for ids, site in trained if made & ids]
        if not models:
            continue
        evaluates = func.attr.value in ("evaluate", "test_on_batch")
        failing = [m for site in models for m in site.members if any(n.endswith(_EMPTY_BATCH_FAILS) for n in facts.names_of(m.func))]
        if not evaluates and not failing:
            continue  # (its layers run on an empty batch)
        x = argument_value(call, "x", 0)
        rows = _rows(facts, sizes, x, 0) if x is not None else None
        if rows is None or rows >= MAX_REPLICAS:
            continue
        what = "one example" if rows == 1 else f"{rows} examples"
        direct = func.attr.value == "predict" and _only_examples(call) and all(_sequential(facts, site) for site in models)
        found.append((call, (
            f"{func.attr.value}() on line {program.line(call)} is given {what} "
            f"({_short(program, x)}): migrated, the model splits it over the replicas, and "  # type: ignore[arg-type]
            + (
                "Keras 3 fails when the first batch does not split evenly over them"
                if evaluates
                else f"on more replicas than examples Keras 3 hands a replica an empty batch, which its "
                f"{_short(program, failing[0].func)} (line {program.line(failing[0])}) fails on"
            )
            + "; call the model itself there (model(x, training=False), which runs on one device), then migrate"
        ), direct))
    return found


def _only_examples(call: cst.Call) -> bool:
    """Whether ``predict`` is given its examples and at most ``verbose=``: nothing the call of
    the model would drop (a batch, steps, callbacks)."""
    for i, arg in enumerate(call.args):
        if arg.star:
            return False
        if arg.keyword is None and i == 0 or arg.keyword is not None and arg.keyword.value in ("x", "verbose"):
            continue
        return False
    return argument_value(call, "x", 0) is not None


def _sequential(facts: Facts, site: Site) -> bool:
    """Whether the model ``site`` trains is made by ``Sequential(...)`` wherever it comes from
    (one output: calling it gives one tensor, as predict one array)."""
    func = site.call.func
    if not isinstance(func, cst.Attribute):
        return False
    origins = facts.values.origins(func.value)
    return bool(origins) and all(
        isinstance(o.node, cst.Call) and any(n.endswith(".Sequential") for n in facts.names_of(o.node.func)) for o in origins
    )


def _rows(facts: Facts, sizes: Sizes, expr: cst.BaseExpression, depth: int) -> int | None:
    """How many examples ``expr`` holds, where the file shows it."""
    if depth > 6:
        return None
    if _one(facts, expr):
        return 1
    known = sizes.rows(expr)
    if isinstance(known, int):
        return known
    if isinstance(expr, cst.Name):
        bindings = facts.reaching_bindings(expr)
        if not bindings:
            return None
        counts = set()
        for binding in bindings:
            value = _bound_value(facts.program, binding)
            counts.add(_rows(facts, sizes, value, depth + 1) if value is not None else None)
        return counts.pop() if len(counts) == 1 else None
    return None


def _bound_value(program: Program, binding: cst.CSTNode) -> cst.BaseExpression | None:
    """What an assignment binds to a name: ``name = v``, or the matching item of
    ``a, name = u, v``."""
    parent = program.parent(binding)
    if isinstance(parent, cst.AssignTarget):
        assign = program.parent(parent)
        return assign.value if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
    if isinstance(parent, cst.Element) and isinstance(program.parent(parent), (cst.Tuple, cst.List)):
        target = program.parent(parent)
        holder = program.parent(target)
        assign = program.parent(holder) if isinstance(holder, cst.AssignTarget) else None
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.value, (cst.Tuple, cst.List)):
            names = list(target.elements)  # type: ignore[union-attr]
            values = list(assign.value.elements)
            if len(names) == len(values) and not any(isinstance(e, cst.StarredElement) for e in names + values):
                return values[names.index(parent)].value
    return None


def _one(facts: Facts, expr: cst.BaseExpression) -> bool:
    """An expression of one example: ``x[[i]]``, ``x[np.array([i])]``, ``x[i:i + 1]``,
    ``x[None]`` / ``x[np.newaxis]``, ``np.expand_dims(x, 0)``."""
    if isinstance(expr, cst.Call):
        if any(n == "numpy.expand_dims" for n in facts.names_of(expr.func)):
            axis = argument_value(expr, "axis", 1)
            return isinstance(axis, cst.Integer) and axis.value == "0"
        return False
    if not isinstance(expr, cst.Subscript) or not expr.slice:
        return False
    first = expr.slice[0].slice
    if isinstance(first, cst.Index):
        index = first.value
        if isinstance(index, cst.Name) and index.value == "None" or "numpy.newaxis" in facts.names_of(index):
            return True
        if len(expr.slice) != 1:
            return False
        if isinstance(index, cst.Call) and any(n in ("numpy.array", "numpy.asarray") for n in facts.names_of(index.func)) and index.args:
            index = index.args[0].value
        return isinstance(index, (cst.List, cst.Tuple)) and len(index.elements) == 1 and not isinstance(index.elements[0], cst.StarredElement)
    if isinstance(first, cst.Slice) and first.step is None and first.lower is not None and first.upper is not None:
        upper = first.upper
        return (
            isinstance(upper, cst.BinaryOperation)
            and isinstance(upper.operator, cst.Add)
            and isinstance(upper.right, cst.Integer)
            and upper.right.value == "1"
            and cst.Module([]).code_for_node(upper.left) == cst.Module([]).code_for_node(first.lower)
        )
    return False


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
