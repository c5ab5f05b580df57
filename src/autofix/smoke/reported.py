"""What the script sees of each step, for ``--compare`` (child side): the value its step
function returns (the loss it prints or logs), ``fit``'s logs, and the result of every Keras
metric it updated. A migration that trains right but reports the replica's share of the loss
(a metric fed ``loss / N``, ``ReduceOp.MEAN`` of shares) shows here.

Values are kept small: a scalar as it is, an array of up to :data:`SMALL` numbers as a list,
a larger one by its shape, mean and norm (a GAN step's generated images).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import numpy as np

from autofix.smoke.state import recorder

SMALL = 64

_active = False
# step -> what each call of the step function returned in it (several: the micro-steps of an
# accumulated reference, averaged)
_returns: dict[int, list[Any]] = {}
_logs: dict[int, dict[str, float]] = {}
# step -> the loss each eager update of the script's own loop differentiated in it (a step
# written inline returns nothing: what its loop reports is that loss; micro-steps: one each)
_losses: dict[int, list[float | None]] = {}
_metrics: dict[int, list[dict[str, Any]]] = {}
# Keras metrics in the order they were first updated (weak: a script may make many).
_updated: list[weakref.ref] = []
# What each metric read when the phase of training running now began, and the metrics that
# phase's training has changed since: only those are recorded after its steps. A metric of a
# model trained in an earlier phase reads what happened before this phase (and is alive or not
# as the garbage collector has run); one an ``evaluate`` changed between the phases reads that
# evaluation, which is capped to the steps compared at each run's own batch (the migration
# evaluates N x the original's examples): neither is this phase's training.
_at_phase_start: list[tuple[weakref.ref, Any]] = []
_changed: list[weakref.ref] = []


def start(active: bool) -> None:
    global _active
    _active = active
    _returns.clear()
    _losses.clear()
    _logs.clear()
    _metrics.clear()
    del _updated[:]
    del _at_phase_start[:]
    del _changed[:]


def install_keras(module: Any) -> None:
    metric = getattr(getattr(module, "metrics", None), "Metric", None)
    if metric is None:
        return
    # Subclasses override update_state: the base class's and ``__call__`` are wrapped here, a
    # subclass's own when one of its metrics is made.
    for name in ("__call__", "update_state"):
        method = getattr(metric, name, None)
        if method is None or getattr(method, "_autofix_smoke_reported", False):
            continue
        setattr(metric, name, _noting(method))
    _wrap_subclasses_on_init(metric)


def _wrap_subclasses_on_init(metric: type) -> None:
    """A metric class of the script's that overrides ``update_state``: wrapped when made."""
    init = metric.__init__
    if getattr(init, "_autofix_smoke_reported", False):
        return

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        cls = type(self)
        own = cls.__dict__.get("update_state")
        if own is not None and not getattr(own, "_autofix_smoke_reported", False):
            setattr(cls, "update_state", _noting(own))
        # tf_keras binds each metric's update_state to the object when it is made (Metric.__new__),
        # from the class that defines it (Reduce for a Mean): that one is wrapped on the object.
        bound = self.__dict__.get("update_state")
        if bound is not None and not getattr(bound, "_autofix_smoke_reported", False):
            object.__setattr__(self, "update_state", _noting_bound(self, bound))

    __init__._autofix_smoke_reported = True
    metric.__init__ = __init__


def _noting(method):
    @functools.wraps(method)
    def noted(self, *args, **kwargs):
        if _active and not any(ref() is self for ref in _updated):
            _updated.append(weakref.ref(self))
        return method(self, *args, **kwargs)

    noted._autofix_smoke_reported = True
    return noted


def _noting_bound(metric: Any, bound):
    ref = weakref.ref(metric)

    @functools.wraps(bound)
    def noted(*args, **kwargs):
        if _active and not any(r() is ref() for r in _updated):
            _updated.append(ref)
        return bound(*args, **kwargs)

    noted._autofix_smoke_reported = True
    return noted


def returned(step: int, value: Any) -> None:
    """What the script's step function returned in ``step`` (from 0)."""
    if _active:
        _returns.setdefault(step, []).append(_plain(value))


def differentiated(step: int, value: float | None) -> None:
    """An eager update of the script's own loop in ``step`` (from 0), made with the gradient of
    ``value`` (None: not a scalar)."""
    if _active:
        _losses.setdefault(step, []).append(value)


def logged(step: int, logs: dict[str, Any] | None) -> None:
    """``fit``'s logs at the end of batch ``step`` (from 0)."""
    if not _active or not logs:
        return
    kept = {}
    for key, value in logs.items():
        plain = _plain(value)
        if plain is not None:
            kept[str(key)] = plain
    _logs[step] = kept


def phase_began() -> None:
    """A phase of training begins: what every metric reads now is what it read before it."""
    if not _active:
        return
    del _changed[:]
    _at_phase_start[:] = [(ref, _result(metric)) for ref in _updated if (metric := ref()) is not None]


def step_ended(step: int) -> None:
    """After step ``step`` (from 1): the result of every metric the phase's training changed."""
    if not _active:
        return
    results = []
    for ref in _updated:
        metric = ref()
        if metric is None:
            continue
        value = _result(metric)
        if not any(r() is metric for r in _changed):
            before = next((v for r, v in _at_phase_start if r() is metric), _UNSEEN)
            if before is not _UNSEEN and before == value:
                continue
            _changed.append(ref)
        results.append({"name": str(getattr(metric, "name", "?")), "class": type(metric).__name__, "value": value})
    _metrics[step] = results


_UNSEEN = object()


def _result(metric: Any) -> Any:
    import tensorflow as tf

    # Read as Keras reads it, not as the script: a metric of the replicas (its variables
    # synchronized on read) is read through strategy.reduce, which must not be taken for the
    # script's own reduce of an eager step's return.
    recorder.keras_depth += 1
    try:
        with tf.init_scope():
            return _plain(metric.result())
    except Exception:
        return None
    finally:
        recorder.keras_depth -= 1


def recorded() -> dict[str, Any]:
    return {
        "returns": {str(k): _averaged(v) for k, v in sorted(_returns.items())},
        "losses": {str(k): _one_loss(v) for k, v in sorted(_losses.items())},
        "logs": {str(k): v for k, v in sorted(_logs.items())},
        "metrics": {str(k): v for k, v in sorted(_metrics.items())},
    }


_micro_steps = 0


def micro_steps(count: int) -> None:
    """How many micro-steps each step of this run is made of (0: none; set by
    ``accumulate.start``, which imports this module, not the other way round)."""
    global _micro_steps
    _micro_steps = count


def _one_loss(values: list[float | None]) -> float | None:
    """The loss a step's loop reports: the one its update differentiated (the micro-steps' of
    a reference, averaged, as the replicas' are); None when a step makes several updates (which
    loss it reports is not known) or its loss is not a scalar."""
    if len(values) != max(1, _micro_steps) or any(not isinstance(v, float) for v in values):
        return None
    return sum(values) / len(values)


def _averaged(values: list[Any]) -> Any:
    """One value per step: the calls' values averaged where they are numbers of one shape."""
    if len(values) == 1:
        return values[0]
    first = values[0]
    if isinstance(first, float) and all(isinstance(v, float) for v in values):
        return sum(values) / len(values)
    if isinstance(first, list) and all(isinstance(v, list) and len(v) == len(first) for v in values):
        return [_averaged([v[i] for v in values]) for i in range(len(first))]
    if isinstance(first, dict) and all(isinstance(v, dict) and v.keys() == first.keys() for v in values):
        return {k: _averaged([v[k] for v in values]) for k in first}
    return first


def _plain(value: Any) -> Any:
    """Numbers as JSON: a scalar, a small list, or ``{"shape", "mean", "norm"}``; structures
    as lists and dicts; anything else None."""
    import tensorflow as tf

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, tf.distribute.DistributedValues):
        return [_plain(v) for v in value.values]
    if isinstance(value, bool) or value is None:
        return None
    try:
        array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    except Exception:
        return None
    if array.dtype.kind not in "fiu":
        return None
    array = array.astype(np.float64)
    if array.ndim == 0:
        return float(array)
    if array.size <= SMALL:
        return array.tolist()
    return {"shape": list(array.shape), "mean": float(array.mean()), "norm": float(np.linalg.norm(array.ravel()))}


def note_unread(what: str) -> None:
    recorder.note(f"compare: {what}")
