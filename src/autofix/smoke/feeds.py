"""What each replica was fed in each step, for ``--compare`` (child side).

Every call of a replica's step function (MirroredStrategy's replicas in the migrated run, the
virtual replicas of the reference run, the one device of a single-device run) records its
inputs as one digest per example: the bytes of row ``j`` of every input whose first axis is
the replica's batch. A step may feed several calls (a GAN's two ``strategy.run``); each is
kept in order. Batches drawn eagerly from a dataset (``call="drawn"``: the steps of a loop
written inline) are kept apart and stand for a step only where no step function was called in
it: a script that draws a test batch before its training loop is fed, in its first step, what
its step function is given.

The comparison checks from them that the migration distributes its data (the replicas'
examples, together, are the global batch: none twice, none left out, as many on each) and
that it is the original's data, in the same order. A boolean input is digested as the float32
0s and 1s it holds: a migration casts the boolean arrays ``fit`` is given to float32 (Keras 3
cannot train on booleans under a strategy), which are the same examples to a model that
converts them so on one device (whether it computes the same, the steps' updates say).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np

_active = False
# step -> list of calls, each {replica: [row digests]}
_calls: dict[int, list[dict[int, list[str]]]] = {}
# A call's replicas record in turn: the open call of each step, by the (graph or eager) call it is.
_open: dict[tuple, dict[int, list[str]]] = {}
# step -> batches drawn eagerly in it (an inline loop's steps), used where no call was recorded
_drawn: dict[int, list[dict[int, list[str]]]] = {}
_lock = threading.Lock()
MAX_ROWS = 4096
_paused = False  # between two phases of training: what a step is fed is not a training step's


def start(active: bool) -> None:
    global _active, _paused
    _active, _paused = active, False
    _calls.clear()
    _open.clear()
    _drawn.clear()


def pause(paused: bool) -> None:
    """Between two phases of training (:mod:`autofix.smoke.snapshot`): nothing is recorded."""
    global _paused
    _paused = paused


def forget(step: int) -> None:
    """What ``step`` was fed by a call that turned out not to train (an evaluation step run
    between two phases)."""
    with _lock:
        _calls.pop(step, None)
        _drawn.pop(step, None)
        for key in [k for k in _open if k[0] == step]:
            del _open[key]


def rows(structure: Any) -> list[str]:
    """One digest per example of ``structure`` (arrays or eager tensors)."""
    import tensorflow as tf

    flat = [np.asarray(v) for v in tf.nest.flatten(structure) if _is_array(v)]
    flat = [a.astype(np.float32) if a.dtype == np.bool_ else a for a in flat]
    batched = [a for a in flat if a.ndim >= 1]
    if not batched:
        return []
    lead = batched[0].shape[0]
    columns = [np.ascontiguousarray(a) for a in batched if a.shape[0] == lead]
    digests = []
    for j in range(min(lead, MAX_ROWS)):
        h = hashlib.blake2b(digest_size=8)
        for column in columns:
            h.update(column[j].tobytes())
        digests.append(h.hexdigest())
    return digests


def digest(rows: list[str]) -> str:
    """One digest of a replica's examples."""
    return hashlib.blake2b("".join(rows).encode(), digest_size=8).hexdigest()


def _is_array(value: Any) -> bool:
    import tensorflow as tf

    return isinstance(value, (np.ndarray, tf.Tensor)) and getattr(value, "dtype", None) is not None


def record(step: int, replica: int, structure: Any, call: Any = None) -> None:
    """The inputs of ``replica``'s step function, as it runs ``step`` (eagerly)."""
    if not _active:
        return
    _add(step, replica, rows(structure), call)


def _add(step: int, replica: int, digests: list[str], call: Any) -> None:
    if _paused:
        return
    with _lock:
        calls = (_drawn if call == "drawn" else _calls).setdefault(step, [])
        key = (step, call)
        current = _open.get(key)
        # (A micro-step that updated nothing is taken over by the next batch: its replica's
        # examples are those of the batch that trains.)
        if current is None or (replica in current and call != "accumulated"):
            current = _open[key] = {}
            calls.append(current)
        current[replica] = digests


def record_in_graph(replica: Any, structure: Any) -> None:
    """The inputs of a replica's step function that is being traced: digested when it runs."""
    import tensorflow as tf

    from autofix.smoke import context

    if not _active:
        return
    flat = [v for v in tf.nest.flatten(structure, expand_composites=True) if isinstance(v, tf.Tensor)]
    if not flat:
        return
    graph = id(tf.compat.v1.get_default_graph())

    def keep(replica_id, *values):
        _add(context.step(), int(replica_id), rows(list(values)), graph)
        return np.int64(0)

    try:
        tf.numpy_function(keep, [tf.cast(replica, tf.int64), *flat], tf.int64, stateful=True)
    except Exception:  # compared without what this replica was fed
        pass


def recorded() -> dict[str, list[dict[str, list[str]]]]:
    with _lock:
        steps = {step: calls for step, calls in _drawn.items() if calls}
        steps.update({step: calls for step, calls in _calls.items() if calls})
        return {str(step): [{str(r): list(d) for r, d in sorted(call.items())} for call in calls] for step, calls in sorted(steps.items())}
