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

A validation set given as ``validation_data=(x_val, y_val)``, ``x_val`` an array named in the
call, whose size the file does not show or that is one uneven batch on some replica count up
to ``MAX_REPLICAS``, gets a validation batch of its own that splits evenly on every count:
``validation_batch_size=min(<the global batch>, len(x_val) // N * N)`` (N the replica count):
the global batch when the set holds one, else the set rounded down to a multiple of N (the
rest, fewer than N examples, is an uneven last batch, which runs). What validation computes
does not change: Keras weighs each batch by its examples (measured: the same loss and metric
on 3 and on 16 replicas as on one device).

Not shown safe, so the batch is reported and not scaled: any other validation set of arrays
(``validation_split=``, ``validation_data=`` a name or made by a call) whose size the file does
not show or that is one uneven batch on some replica count up to ``MAX_REPLICAS``. Not looked at: the training arrays
(smaller than B x N they would be one batch too, but a training set is rarely that small, and
its size is seldom known), and validation or evaluation data batched by itself (a dataset, or
``validation_batch_size=``), which the fix does not change.
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
        # fit calls (by id) -> the validation inputs to size their own validation batch by.
        self.validation_batches: dict[int, cst.BaseExpression] = {}

    def why(self, call: cst.Call, arg: cst.Arg | None, default: int | None) -> str | None:
        """None when scaling the batch of ``fit`` (``arg``, or Keras's ``default``) leaves its
        first training and validation batches even on every replica count, or the validation
        set is not batched with it; else why not."""
        batch = default if arg is None else self.sizes.number(arg.value)
        batch = batch if isinstance(batch, int) and batch > 0 else None
        x = argument_value(call, "x", 0)
        examples = self.sizes.rows(x) if x is not None else None
        keyword, validation = self._validation(call, examples)
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
        on every replica count: its inputs are one array, written in the call's
        ``validation_data=(x_val, ...)`` as an expression that reads it again unchanged."""
        data = argument_value(call, "validation_data", 7)
        if keyword != "validation_data" or not isinstance(data, (cst.Tuple, cst.List)) or not data.elements:
            return False
        if any(a.star for a in call.args):
            return False  # ``**options`` may hold a validation_batch_size of its own
        inputs = data.elements[0].value
        if isinstance(data.elements[0], cst.StarredElement) or not isinstance(inputs, (cst.Name, cst.Attribute, cst.Subscript)):
            return False
        if nodes_in(inputs, (cst.Call, cst.NamedExpr, cst.Yield, cst.Await, cst.Lambda)):
            return False
        if not self.data.is_array(inputs):
            return False
        self.validation_batches[id(call)] = inputs
        return True

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


def _given(value: cst.BaseExpression | None) -> bool:
    return value is not None and not (isinstance(value, cst.Name) and value.value == "None")


def _counts(counts: list[int]) -> str:
    words = [str(n) for n in counts]
    return (", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]) + " replicas"
