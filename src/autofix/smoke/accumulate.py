"""The reference of ``--compare`` for a step that cannot be run as virtual replicas (child side).

A training step written inline in a loop (or a step function that draws its batch itself, or
a plain Python function) cannot be given N shards of one batch: :mod:`autofix.smoke.replicas`
says so (``NotSplittable``). Such an original then runs at its own batch, eagerly, and N of its
consecutive steps make one step of the reference: each of them is a *micro-step* on one
replica's shard (N consecutive batches of B are the global batch N x B, in order), whose
updates are held back (:func:`update`) until the N-th, which applies the mean of the N
gradients once. That is data parallelism when every gradient of a step is taken before the
step's first update; a step that takes a gradient of weights whose update it has already
held back in the same micro-step (a GAN whose generator's loss reads the discriminator it has
just updated) cannot be computed so: it is said (:func:`inexact`), and the comparison is then
inconclusive.

A micro-step starts when the script feeds a batch: a call of its step function given the
batch, a batch drawn from a ``tf.data`` iterator, ``fit``'s step. It is replica ``r`` of the
global step for what it draws (:mod:`autofix.smoke.noise`) and what it was fed
(:mod:`autofix.smoke.feeds`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

_count = 0
# id(optimizer) -> the gradients held back in this global step: [[(gradient, variable)...], ...]
_held: dict[int, list[list[tuple[Any, Any]]]] = {}
_optimizers: dict[int, Any] = {}
_micro = -1  # the micro-step running, in this global step (-1: none started yet)
_applied_in_micro: set[int] = set()  # variables whose update this micro-step held back
# A batch was drawn from a tf.data iterator since the last micro-step started: a step function
# then given it belongs to that micro-step.
_fetched = False
# Every update of the global step is applied: the step ends when the next micro-step starts (or
# the script ends), so that what the N-th micro-step does after its update (a metric updated,
# a loss returned) is part of its step, as it is of a replica's.
_complete = False


def start(count: int) -> None:
    """Before each script: ``count`` micro-steps a step (0: off)."""
    global _count, _micro, _fetched, _complete
    _count, _micro, _fetched, _complete = count, -1, False, False
    from autofix.smoke import reported

    reported.micro_steps(count)
    tf.config.run_functions_eagerly(bool(count) or tf.config.functions_run_eagerly())
    if count:
        from autofix.smoke.state import recorder

        recorder.note(f"compare: the original's steps run as {count} micro-steps a step, eagerly (the reference; its step cannot be split)")
    _held.clear()
    _taken.clear()
    _optimizers.clear()
    _applied_in_micro.clear()


def count() -> int:
    return _count


def deferring() -> bool:
    from autofix.smoke import snapshot

    return bool(_count) and snapshot.active()


def drawn(element: Any, rows: int | None) -> None:
    """The script drew ``element`` from a ``tf.data`` iterator: a micro-step starts."""
    global _fetched
    micro_started(element, rows)
    _fetched = True


def _rows(structure: Any) -> int | None:
    for value in tf.nest.flatten(structure):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) and shape[0] is not None:
            return int(shape[0])
    return None


def called(arguments: Any, rows: int | None) -> None:
    """The script's step function was called with ``arguments``: a micro-step starts, unless
    the batch it is given was just drawn from an iterator (that started it)."""
    global _fetched
    if not deferring():
        return
    if _fetched:
        _fetched = False
        return
    if rows is not None:
        micro_started(arguments, rows)


def micro_started(batch: Any, rows: int | None) -> None:
    """The script fed a batch: the next micro-step starts (replica ``_micro``)."""
    from autofix.smoke import context, feeds, snapshot

    global _micro, _complete
    if not deferring():
        return
    if _complete:
        _complete = False
        snapshot.end_step()
    # A micro-step that updated nothing was not one (a test batch drawn before the loop, an
    # evaluation between epochs): the next batch takes its place.
    if _micro < 0 or _applied_in_micro:
        _micro = (_micro + 1) % _count
    _applied_in_micro.clear()
    _taken.clear()
    context.enter_replica(_micro, rows, _count)
    feeds.record(snapshot.step(), _micro, batch, call="accumulated")


def update(optimizer: Any, pairs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]] | None:
    """An update of the original: held back (None), or, at the N-th of the step, the mean of
    the N held back to apply now."""
    key = id(optimizer)
    _optimizers[key] = optimizer
    held = _held.setdefault(key, [])
    held.append([(g, v) for g, v in pairs])
    for _, variable in pairs:
        _applied_in_micro.add(id(variable))
        inner = getattr(variable, "_value", None)
        if inner is not None:
            _applied_in_micro.add(id(inner))
    if len(held) < _count:
        from autofix.smoke import snapshot

        # The step is under way: its end is recorded once every held update is applied.
        snapshot.applied(optimizer, [v for _, v in pairs])
        return None
    from autofix.smoke import replicas

    replicas.per_example(optimizer, _count)
    variables = [v for _, v in pairs]
    mean = []
    for k, variable in enumerate(variables):
        parts = [h[k][0] for h in held if k < len(h)]
        if any(p is None for p in parts) or len(parts) != _count:
            mean.append((None, variable))
            continue
        from autofix.smoke import replicas as virtual

        mean.append((virtual.mean_gradient(parts), variable))
    del _held[key]
    return mean


def incomplete() -> int:
    """How many micro-steps of the global step under way have held their update back (0:
    none, or not deferring)."""
    if not deferring():
        return 0
    return max((len(held) for held in _held.values()), default=0)


def applied() -> None:
    """After an update was applied: when nothing is held back any more, the step is complete;
    it ends when the next micro-step starts, or when the script stops."""
    global _complete
    if deferring() and not any(_held.values()):
        _complete = True


# What this micro-step's tapes returned, by id (held, so that no other tensor takes an id).
_taken: dict[int, Any] = {}


def gradients_taken(result: Any) -> None:
    """What a micro-step's tape returned, so that a clip of it is known as one."""
    from autofix.smoke import replicas

    replicas.hold(_taken, result)


def of_gradients(values: Any) -> bool:
    from autofix.smoke import replicas

    return deferring() and replicas.held(_taken, values)


def gradient(tape: Any) -> None:
    """A tape is asked for gradients: if it read weights whose update this micro-step held
    back, the step cannot be computed as micro-steps."""
    if not deferring() or not _applied_in_micro:
        return
    try:
        watched = tape.watched_variables()
    except Exception:
        return
    for variable in watched:
        if id(variable) in _applied_in_micro:
            name = getattr(variable, "path", None) or getattr(variable, "name", "?")
            from autofix.smoke import context

            context.not_exact(f"a gradient is taken after the update of {name} in the same step (one model updated after another)")
            return


