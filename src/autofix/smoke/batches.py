"""The batches the script draws from ``tf.data`` iterators itself (child side, ``--compare``).

A training loop written inline (``for x, y in dataset:`` and the update in the loop's body)
has no step function: the batch it draws marks where its step starts. In a comparing run
such a draw starts the next step (the one before it ended, if it updated anything), is what
the step was fed, and is the batch its random draws are made for (see
:mod:`autofix.smoke.noise`); in the reference of such a loop it starts the next micro-step
(see :mod:`autofix.smoke.accumulate`). Batches drawn inside Keras (``fit``) or by a step
function given its batch are not the script's own draws.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import tensorflow as tf

from autofix.smoke.state import recorder


def install() -> None:
    from tensorflow.python.data.ops import iterator_ops

    iterator = iterator_ops.OwnedIterator
    original = iterator.__next__
    if getattr(original, "_autofix_smoke_batches", False):
        return

    @functools.wraps(original)
    def __next__(self):
        element = original(self)
        if _scripts():
            _drawn(element)
        return element

    __next__._autofix_smoke_batches = True
    iterator.__next__ = __next__


def _scripts() -> bool:
    from autofix.smoke import snapshot

    return (
        snapshot.active()
        and recorder.keras_depth == 0
        and threading.current_thread() is threading.main_thread()
        and not tf.inside_function()
        and recorder.current_run is None
        # A script that makes a strategy steps through strategy.run (or fit): its batches are
        # what the replicas are given (and its distributed iterators draw from plain ones).
        and not recorder.strategies
    )


def _drawn(element: Any) -> None:
    from autofix.smoke import accumulate, context, feeds, snapshot

    rows = _rows(element)
    if accumulate.deferring():
        accumulate.drawn(element, rows)
        return
    if recorder.function_stack:
        return  # a step function drawing its own batch: the call is the step
    snapshot.end_step()
    context.enter_replica(0, rows, 1)
    feeds.record(snapshot.step(), 0, element, call="drawn")


def _rows(structure: Any) -> int | None:
    for value in tf.nest.flatten(structure):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) and shape[0] is not None:
            return int(shape[0])
    return None
