"""Where a comparing run is now (child side): the bottom of the ``--compare`` modules, which
all read it and none of which it imports.

- the replica running now, in this thread: a replica of the strategy (MirroredStrategy's
  replica threads), a virtual replica of the reference (:mod:`autofix.smoke.replicas`), a
  micro-step of it (:mod:`autofix.smoke.accumulate`), or one device drawing its batch: its
  index, its batch and the replica count, for the draws made for it
  (:mod:`autofix.smoke.noise`);
- how many of the original's batches one step of the reference holds (the virtual replicas
  or micro-steps), by which its learning-rate schedule is read per example;
- why the reference could not be computed exactly, if it could not.
"""

from __future__ import annotations

import threading
from typing import Any

from autofix.smoke.state import recorder

_local = threading.local()
_scale = 1
_step = 0
_inexact: list[str] = []
# What the reference did that a difference may come from: "clipped" (gradients clipped by their
# global norm, as one device clips the global batch's).
_done: set[str] = set()


def start(scale: int = 1) -> None:
    """Before each script: one step of the reference holds ``scale`` of the original's batches."""
    global _scale, _step
    _scale, _step = max(1, int(scale)), 0
    del _inexact[:]
    _done.clear()
    _local.info = None  # a loop drawing batches eagerly left it set in this thread


def scale() -> int:
    return _scale


def step() -> int:
    """The step running now, from 0."""
    return _step


def set_step(number: int) -> None:
    global _step
    _step = number


def enter_replica(replica_id: Any, batch: Any, count: int) -> Any:
    """``replica_id`` of ``count`` runs now, on ``batch`` examples; returns what ran before."""
    previous = getattr(_local, "info", None)
    _local.info = (replica_id, batch, count)
    return previous


def leave_replica(previous: Any) -> None:
    _local.info = previous


def replica_info() -> tuple[Any, Any, int] | None:
    """(replica id, its batch, replica count) of the replica running now, if any."""
    return getattr(_local, "info", None)


def enter_virtual(replica: Any) -> None:
    _local.virtual = replica


def virtual() -> Any:
    """The virtual replica of the reference running in this thread, if any."""
    return getattr(_local, "virtual", None)


_stepping = threading.local()


class stepping:
    """While ``fit``'s ``train_step`` runs on one device (see :func:`in_training_step`)."""

    def __enter__(self):
        _stepping.depth = getattr(_stepping, "depth", 0) + 1

    def __exit__(self, *exc):
        _stepping.depth -= 1


def in_step() -> bool:
    """In a training step of the script: its step function, fit's, a replica's."""
    return bool(recorder.function_stack) or recorder.current_fit is not None or replica_info() is not None or virtual() is not None


def in_training_step() -> bool:
    """Running a training step itself: a replica's (real or virtual), the script's step
    function, or ``fit``'s ``train_step`` on one device; not Keras building the model."""
    return replica_info() is not None or virtual() is not None or bool(recorder.function_stack) or getattr(_stepping, "depth", 0) > 0


class initializing:
    """While a variable is made (its initializer draws its value: not a step's randomness)."""

    def __enter__(self):
        _local.initializing = getattr(_local, "initializing", 0) + 1

    def __exit__(self, *exc):
        _local.initializing -= 1


def is_initializing() -> bool:
    return getattr(_local, "initializing", 0) > 0


def not_exact(reason: str) -> None:
    if reason not in _inexact:
        _inexact.append(reason)


def inexact() -> list[str]:
    return list(_inexact)


def did(what: str) -> None:
    _done.add(what)


def done() -> list[str]:
    return sorted(_done)
