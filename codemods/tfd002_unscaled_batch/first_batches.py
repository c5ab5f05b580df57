"""Whether the validation set of ``fit`` on arrays still runs once the batch is global.

Keras 3.15 fails (``InvalidArgumentError: Inputs to operation AddN ... must have the same
size and shape``) when the first batch of a distributed ``fit`` or evaluation does not split
evenly over the replicas; an uneven last batch is fine. Measured on logical CPUs: a
validation set of 1000 (or 800) examples at a global batch of 512 x 3 fails on 3 replicas
and passes on 4. Once ``batch_size`` is B x N, the first batch of a validation set of V
examples is min(V, B x N): the global batch, which splits, when V >= B x N, else all V, which
must be a multiple of N. The validation set of arrays (``validation_split=``,
``validation_data=(x, y)``) is batched with fit's ``batch_size`` unless
``validation_batch_size=`` is given, and is often small. Its size comes from
:mod:`autofix.analysis.facts.sizes` (``validation_split=`` as Keras splits: the last ``V - floor(V *
(1 - split))`` examples validate).

The replica counts it is held to: 1 to ``MAX_REPLICAS``, the GPUs of one machine, which is
what a MirroredStrategy spans (16 on the largest, DGX-2 and HGX-2 class machines).

A validation set whose size the file does not show, or that is one uneven batch on some
replica count up to ``MAX_REPLICAS``, gets a validation batch of its own that splits evenly on
every count, from its size read at run time: ``validation_batch_size=min(<the global batch>,
<size> // N * N)`` (N the replica count), the size ``len(x_val)`` for
``validation_data=(x_val, y_val)`` (``x_val`` an array named in the call, or cast there:
``x_val.astype("float32")``), ``len(val[0])`` for ``validation_data=val`` with ``val`` bound
only to such tuples (inputs written as a list or tuple of arrays, ``[words, counts]``: the
length of the first, at which Keras splits them all), and ``(len(x) - int(len(x) * (1 - s)))`` for ``validation_split=s`` (as
Keras 3.15 splits: ``split_at = int(math.floor(len(x) * (1.0 - s)))``, the rest validates).
The global batch when the set holds one, else the set rounded down to a multiple of N (the
rest, fewer than N examples, is an uneven last batch, which runs). What validation computes
does not change: Keras weighs each batch by its examples (measured: the same loss and metric
on 3 and on 16 replicas as on one device). Measured on 2, 3 and 4 logical CPUs with 1000
examples split by ``validation_split=0.1`` and ``0.0519`` (100 and 52 validate) at 64 x N:
Keras 3 fails on 3 replicas (``Inputs to operation AddN of type AddN must have the same size
and shape``), and with the computed validation batch runs on all three.

Not shown safe, so the batch is reported and not scaled: a validation set of arrays whose size
no expression reads again unchanged (inputs that are a dict of arrays, made by a call in the
``fit`` call, a split computed by a call, ``**options`` that may hold a
``validation_batch_size``). Not looked at: validation or evaluation data batched by itself (a
dataset, or ``validation_batch_size=``), which the fix does not change.

The training arrays, where the file shows how many examples they hold (what
``validation_split=`` leaves of them): fewer than B x N, every epoch is that one batch, which
fails where N does not divide it (a character model on the 19 windows of one line of text, at
32 per replica, fails on 2 replicas: measured). They have no batch of their own to be given, so
such a fit is reported and not scaled, on the replica counts of ``TRAINING_REPLICAS``.
"""

from __future__ import annotations

import math

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.syntax import argument_value, nodes_in

from .arrays import Data

MAX_REPLICAS = 16
# The replica counts a training set of known size is held to: the 2, 4 and 8 GPUs machines
# come with. A validation set gets a batch of its own that splits on every count up to
# MAX_REPLICAS; a training set has no such way out (its batch is what is trained), so a set that
# would be one uneven batch only on other counts (80 examples at 32 x 3, 7982 at 512 x 16) is
# not a reason to refuse the fix: said in the rule's limits.
TRAINING_REPLICAS = (2, 4, 8)


def uneven(examples: int, per_replica: int) -> list[int]:
    """The replica counts (up to MAX_REPLICAS) on which ``examples`` arrays, batched by
    ``per_replica`` x replicas, start with a batch that does not split evenly."""
    return [n for n in range(2, MAX_REPLICAS + 1) if examples < per_replica * n and examples % n]


class FirstBatches:
    """Why the first batches of a ``fit`` site on arrays could fail once it is scaled."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.facts = Facts.of(program)
        self.sizes = Sizes.of(program)
        self.data = Data(program)
        # Every reason given: each says all there is to say (no note is added to it).
        self.reasons: set[str] = set()
        # fit calls (by id) -> the code of their validation set's size, read at run time, to
        # size its own validation batch by.
        self.validation_batches: dict[int, str] = {}

    def why(self, call: cst.Call, arg: cst.Arg | None, default: int | None) -> str | None:
        """None when scaling the batch of ``fit`` (``arg``, or Keras's ``default``) leaves its
        first training and validation batches even on every replica count, or the validation
        set is not batched with it; else why not."""
        batch = default if arg is None else self.sizes.number(arg.value)
        batch = batch if isinstance(batch, int) and batch > 0 else None
        x = argument_value(call, "x", 0)
        examples = self.sizes.rows(x) if x is not None else None
        keyword, validation = self._validation(call, examples)
        training = examples if keyword != "validation_split" else (examples - validation if examples is not None and validation is not None else None)
        counts = [n for n in uneven(training, batch) if n in TRAINING_REPLICAS] if training and batch is not None else []
        if counts:
            return self._said(
                f"the training set holds {training} examples, fewer than the global batch ({batch} x replicas) on "
                f"{counts[0]} or more replicas, where each epoch is that one batch, and Keras 3 fails when it does not "
                f"split evenly over the replicas, as {training} does not over {_counts(counts)}; give fit a batch_size "
                f"that is a multiple of the replica count and at most {training} (a smaller last batch may be uneven), "
                f"or train so few examples on one device"
            )
        if keyword is not None and _given(argument_value(call, "validation_batch_size")):
            keyword = None  # validated with a batch of its own, which the fix does not change
        if keyword is not None and (validation is None or batch is None):
            return None if self._sized_by_hand(call, keyword) else self._unknown(keyword)
        if batch is None:
            return None
        counts = uneven(validation, batch) if keyword is not None and validation is not None else []
        if counts and self._sized_by_hand(call, keyword):
            return None
        if counts:
            return self._said(
                f"the validation set ({keyword}=) holds {validation} examples, fewer than the global batch "
                f"({batch} x replicas) on {counts[0]} or more replicas, where it is a single batch, and Keras 3 "
                f"fails when that batch does not split evenly over the replicas, as {validation} does not over "
                f"{_counts(counts)}; scale batch_size by hand for the replica counts you use"
            )
        return None

    def _validation(self, call: cst.Call, examples: int | None) -> tuple[str | None, int | None]:
        """(the keyword the validation set is given by, its examples), each None when not
        known (the keyword: when there is none)."""
        data = argument_value(call, "validation_data", 7)
        if _given(data):
            parts = self._arrays(data)  # type: ignore[arg-type]
            if parts is None:
                return None, None  # a dataset or generator, batched by itself
            sizes = {self.sizes.rows(p) for p in parts} - {None}
            return "validation_data", (sizes.pop() if len(sizes) == 1 else None)
        split = argument_value(call, "validation_split", 6)
        if split is None:
            return None, None
        fraction = self.sizes.number(split)
        if fraction == 0:
            return None, None
        if not isinstance(fraction, (int, float)) or examples is None:
            return "validation_split", None
        # As Keras splits them (keras.src.trainers.data_adapters.array_slicing).
        return "validation_split", examples - int(math.floor(examples * (1.0 - fraction)))

    def _sized_by_hand(self, call: cst.Call, keyword: str) -> bool:
        """Whether the fix can give the validation set a batch of its own that splits evenly
        on every replica count, from its size at run time: its inputs are one array that an
        expression can read again unchanged, ``validation_data=(x_val, ...)`` (``x_val`` may be
        cast: ``x_val.astype("float32")``, of the same length), ``validation_data=val`` with
        ``val`` bound only to such tuples (``len(val[0])``), or ``validation_split=s`` of
        training inputs ``x`` (as Keras splits them: ``len(x) - int(len(x) * (1 - s))``)."""
        if any(a.star for a in call.args):
            return False  # ``**options`` may hold a validation_batch_size of its own
        size = self._validation_size(call, keyword)
        if size is None:
            return False
        self.validation_batches[id(call)] = size
        return True

    def _validation_size(self, call: cst.Call, keyword: str) -> str | None:
        """The code of the validation set's size, read at run time, or None."""
        code = self.program.module.code_for_node
        if keyword == "validation_split":
            x = self._rereadable(_first_input(argument_value(call, "x", 0)))
            split = argument_value(call, "validation_split", 6)
            if x is None or split is None or not _plain(split):
                return None
            inputs = code(x)
            return f"(len({inputs}) - int(len({inputs}) * (1 - {code(split)})))"
        data = argument_value(call, "validation_data", 7)
        if isinstance(data, (cst.Tuple, cst.List)):
            if not data.elements or isinstance(data.elements[0], cst.StarredElement):
                return None
            inputs = self._rereadable(_first_input(data.elements[0].value))
            return f"len({code(inputs)})" if inputs is not None else None
        if isinstance(data, cst.Name):
            origins = self.facts.values.origins(data)
            if origins and all(
                o.whole and isinstance(o.node, (cst.Tuple, cst.List)) and o.node.elements
                and not isinstance(o.node.elements[0], cst.StarredElement) and self.data.is_array(o.node.elements[0].value)
                for o in origins
            ):
                return f"len({data.value}[0])"
        return None

    def _rereadable(self, inputs: cst.BaseExpression | None) -> cst.BaseExpression | None:
        """``inputs`` (or the array a ``.astype(...)`` of it casts) when it is one array an
        expression reads again unchanged (a name, an attribute, a subscript by plain values)."""
        if (
            isinstance(inputs, cst.Call)
            and isinstance(inputs.func, cst.Attribute)
            and inputs.func.attr.value == "astype"
            and self.data.is_array(inputs)
        ):
            inputs = inputs.func.value
        if not isinstance(inputs, (cst.Name, cst.Attribute, cst.Subscript)) or not _plain(inputs):
            return None
        return inputs if self.data.is_array(inputs) else None

    def _arrays(self, data: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """The arrays of ``validation_data=(x, y)`` (or of a name bound only to such a tuple);
        None when it is something else."""
        if isinstance(data, (cst.Tuple, cst.List)):
            return [e.value for e in data.elements if not isinstance(e, cst.StarredElement)]
        if isinstance(data, cst.Name):
            origins = self.facts.values.origins(data)
            if origins and all(o.whole and isinstance(o.node, (cst.Tuple, cst.List)) for o in origins):
                return [e.value for o in origins for e in o.node.elements if not isinstance(e, cst.StarredElement)]  # type: ignore[union-attr]
        return None

    def _unknown(self, keyword: str) -> str:
        return self._said(
            f"with {keyword}=, a validation set smaller than the scaled global batch is a single "
            "batch, and Keras 3 fails when that batch does not split evenly over the replicas; "
            "scale batch_size by hand once the validation set is known to hold a global batch, "
            "or validate on a tf.data.Dataset"
        )

    def _said(self, reason: str) -> str:
        self.reasons.add(reason)
        return reason


def _first_input(inputs: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The first array of inputs written as a list or tuple of arrays (``[words, counts]``, a
    model of several inputs), else ``inputs``: Keras splits every array of the inputs at the
    first one's ``floor(len * (1 - s))``, and requires them all to hold as many examples, so its
    length is the inputs'."""
    while isinstance(inputs, (cst.List, cst.Tuple)):
        if not inputs.elements or any(isinstance(e, cst.StarredElement) for e in inputs.elements):
            return None
        inputs = inputs.elements[0].value
    return inputs


def _plain(expr: cst.BaseExpression) -> bool:
    """An expression that reads the same again: no call, assignment, yield or lambda in it."""
    return not nodes_in(expr, (cst.Call, cst.NamedExpr, cst.Yield, cst.Await, cst.Lambda))


def _given(value: cst.BaseExpression | None) -> bool:
    return value is not None and not (isinstance(value, cst.Name) and value.value == "None")


def _counts(counts: list[int]) -> str:
    words = [str(n) for n in counts]
    return (", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]) + " replicas"
