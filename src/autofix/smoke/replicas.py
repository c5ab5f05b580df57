"""Virtual replicas: how the reference of ``--compare`` runs the original's step (child side).

The original is a single-device script. What its migration must compute on N replicas is what
data parallelism makes of it: each replica runs the original's step on its own shard of the
global batch, and the optimizer applies the mean of their gradients (what MirroredStrategy
computes for a loss averaged over the global batch, and DDP or Horovod for any loss). The
reference run runs the original at N x its batch, eagerly, and every call of its training step
(Keras's ``train_step`` inside ``fit``, or a ``tf.function`` of the script that is given the
batch) as N *virtual replicas* on this one device (:func:`run`):

- each replica gets its shard: the arguments whose first axis is the global batch, split
  along it into N equal parts, in order, as ``experimental_distribute_dataset`` splits a batch;
  the other arguments whole;
- the replicas run one after another on threads, each suspended at every optimizer update
  until all have reached it (:func:`update`); the update is then made once, with the mean of
  their gradients, and they go on. A GAN that updates its discriminator before it computes its
  generator's loss therefore sees the updated discriminator in every replica, as on N devices;
- what a replica writes besides the optimizer's update (a metric's totals, BatchNormalization's
  moving statistics) is that replica's own, as MirroredStrategy keeps a copy per replica: the
  variable's value is swapped in and out as replicas take turns (:class:`_Copies`), and between
  steps it holds what the script reads from a strategy: replica 0's copy, the mean of the
  copies of a variable averaged across replicas, their sum for one summed on read (a metric's);
- gradients clipped by their global norm in the step (``tf.clip_by_global_norm`` of what the
  replica's tape gave) are clipped as one device clips the global batch's gradient: each
  replica waits there too (:func:`clip`), and each is scaled by the factor that clips the mean
  of the replicas' gradients (the migration's ``use_norm=`` of the all-reduced norm), so that
  the mean update is the clipped mean. A gradient clipped element by element or tensor by
  tensor (``clip_by_value``, ``clip_by_norm``) cannot be clipped so: said (inexact);
- what the step returns is what ``fit`` logs or ``strategy.gather`` gives: the mean over the
  replicas of a value per replica, the replicas' rows, in order, of a value per example; and
  what the original returns at the global batch for a sum or a count over the examples (a
  ``tf.reduce_sum`` or ``tf.math.count_nonzero`` over everything of a tensor whose first axis
  is the replica's shard, ``tf.size`` of one, ``tf.shape(x)[0]``, through ``tf.cast`` and
  ``tf.identity``; not the value its tape differentiates): the replicas' sum
  (:func:`install_sums`).

The replicas take turns (never two at once), so what they do is deterministic and TensorFlow
and Keras see one thread at a time. A step that cannot run so is said, not guessed:
:class:`NotSplittable` (an update made outside such a step: an inline loop; a batch that does
not split evenly), :class:`Diverged` (the replicas did not reach the same updates).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from autofix.smoke import context

_local = threading.local()
# The Keras thread-local settings a replica thread inherits (a float64 run's dtype policy...),
# not the scopes that are entered and left around calls.
_SCOPES = ("scope", "stack", "ctx")


class NotSplittable(BaseException):
    """The original's step cannot be run as virtual replicas (a BaseException: the script's own
    ``except Exception`` must not swallow it)."""


class Diverged(BaseException):
    """The virtual replicas of one step did not make the same updates."""


class _Abort(BaseException):
    """Ends a replica thread that waits, when another replica failed."""


def active() -> bool:
    return getattr(_local, "replica", None) is not None


class combining:
    """While the replicas' update is made (once, for all of them, in the script's thread)."""

    def __enter__(self):
        _local.combining = getattr(_local, "combining", 0) + 1

    def __exit__(self, *exc):
        _local.combining -= 1


def is_combining() -> bool:
    return bool(getattr(_local, "combining", 0))


def replica_index() -> int | None:
    replica = getattr(_local, "replica", None)
    return None if replica is None else replica.index


class _Replica:
    def __init__(self, index: int, count: int, fn: Callable[..., Any], args: tuple, kwargs: dict, batch: int, inherited: dict, call: int = 0) -> None:
        self.index, self.count, self.batch = index, count, batch
        # which call of a step this replica runs (one number for all the replicas of a call)
        self.call = call
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.inherited = inherited
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.request: tuple | None = None
        self.reply: Any = None
        # the tensors the replica's tapes returned as gradients, by id (held: no other takes an id)
        self.gradients: dict[int, Any] = {}
        # the tensors that sum or count over its examples, by id (held), and the shapes of its
        # examples' tensors (``tf.shape(x)``, whose first item counts them)
        self.sums: dict[int, Any] = {}
        self.shapes: dict[int, Any] = {}
        self._turn = threading.Semaphore(0)
        self._yielded = threading.Semaphore(0)
        self.thread = threading.Thread(target=self._main, name=f"autofix-replica-{index}", daemon=True)

    def _main(self) -> None:
        self._turn.acquire()
        _local.replica = self
        context.enter_virtual(self)
        context.enter_replica(self.index, self.batch, self.count)
        _inherit(self.inherited)
        try:
            if isinstance(self.reply, BaseException):
                raise self.reply
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:  # handed to the scheduler, which raises it in the script's thread
            self.error = exc
        finally:
            self.done = True
            _local.replica = None
            context.enter_virtual(None)
            context.leave_replica(None)
            self._yielded.release()

    def pause(self, request: tuple) -> Any:
        """In the replica's thread: wait here until the scheduler answers ``request``."""
        self.request = request
        self._yielded.release()
        self._turn.acquire()
        reply, self.reply, self.request = self.reply, None, None
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def resume(self, reply: Any = None) -> None:
        """In the scheduler's thread: let the replica run until it pauses or ends."""
        self.reply = reply
        self._turn.release()
        self._yielded.acquire()


def _inherited() -> dict:
    """The Keras settings of the calling thread (kept per thread by Keras 3)."""
    try:
        from keras.src.backend.common import global_state
    except ImportError:
        return {}
    return {
        name: dict(vars(tracker))
        for name, tracker in (("state", global_state.GLOBAL_STATE_TRACKER), ("settings", getattr(global_state, "GLOBAL_SETTINGS_TRACKER", None)))
        if tracker is not None
    }


def _inherit(inherited: dict) -> None:
    if not inherited:
        return
    from keras.src.backend.common import global_state

    for name, values in inherited.items():
        tracker = global_state.GLOBAL_STATE_TRACKER if name == "state" else global_state.GLOBAL_SETTINGS_TRACKER
        for key, value in values.items():
            if not any(key.endswith(word) for word in _SCOPES):
                setattr(tracker, key, value)


def shares(total: int, count: int) -> list[int]:
    """How many of a batch of ``total`` examples each of ``count`` replicas gets, as
    ``experimental_distribute_dataset`` (and so ``fit``) splits it: equal shares when it
    splits evenly; else ``ceil(total / count)`` each, in order, the rest to the last
    (measured on 3 logical CPUs, TF 2.21: 32 -> 11, 11, 10; 7 -> 3, 3, 1; 2 -> 1, 1, 0)."""
    from autofix.smoke.verdict import distributed_shares

    return distributed_shares(total, count)


def split(args: tuple, kwargs: dict, count: int, uneven: bool = False) -> tuple[list[tuple[tuple, dict]], int] | None:
    """Each replica's arguments (the values whose first axis is the global batch, split along
    it in order; the others whole) and the global batch; None when no argument is a batch.
    A batch that does not split evenly (an epoch's last) is split as tf.distribute splits it
    when ``uneven`` (a step whose loss Keras itself scales per replica: ``fit``'s own
    ``train_step``), else :class:`NotSplittable`: what a step of the script's own makes of
    unequal shares (its mean of each share, or of the global batch) is its choice, which the
    reference cannot know."""
    flat = tf.nest.flatten((args, kwargs))
    batched = [v for v in flat if _rows(v) is not None]
    if not batched:
        return None
    total = _rows(batched[0])
    if total is None or total == 0:
        return None
    if total % count and not uneven:
        raise NotSplittable(f"its batch of {total} does not split evenly over {count} replicas")
    sizes = shares(total, count)
    if 0 in sizes:
        raise NotSplittable(f"its batch of {total} leaves one of {count} replicas no example")
    starts = [sum(sizes[:r]) for r in range(count)]

    def shard(r: int):
        return tf.nest.map_structure(lambda v: v[starts[r] : starts[r] + sizes[r]] if _rows(v) == total else v, (args, kwargs))

    return [shard(r) for r in range(count)], total


def _rows(value: Any) -> int | None:
    if isinstance(value, tf.RaggedTensor):
        rows = value.nrows()
        return None if rows is None else int(rows)
    if isinstance(value, (tf.Tensor, np.ndarray)) and len(getattr(value, "shape", ())) >= 1:
        lead = value.shape[0]
        return None if lead is None else int(lead)
    return None


def run(fn: Callable[..., Any], args: tuple, kwargs: dict, count: int, on_shards: Callable[[list], None] | None = None, uneven: bool = False) -> Any:
    """Run ``fn(*args, **kwargs)`` (a step given the global batch) as ``count`` virtual
    replicas; its result combined as ``fit`` and ``strategy.gather`` combine replicas'.
    Raises :class:`NotSplittable` when no argument is a batch (``uneven``: see :func:`split`)."""
    parts = split(args, kwargs, count, uneven)
    if parts is None:
        raise NotSplittable("its step is not given the batch")
    shards, total = parts
    if on_shards is not None:
        on_shards(shards)
    inherited = _inherited()
    global _calls
    _calls += 1
    sizes = shares(total, count)
    replicas = [_Replica(r, count, fn, a, k, sizes[r], inherited, _calls) for r, (a, k) in enumerate(shards)]
    for replica in replicas:
        replica.thread.start()
    copies = _Copies.current()
    replies: list[Any] = [None] * count
    try:
        while True:
            for replica in replicas:
                if replica.done:
                    continue
                copies.enter(replica.index)
                replica.resume(replies[replica.index])
                copies.leave(replica.index)
                if replica.error is not None:
                    raise replica.error
            waiting = [r for r in replicas if not r.done]
            if not waiting:
                break
            if len(waiting) != count:
                ended = next(r for r in replicas if r.done)
                raise Diverged(
                    f"replica {ended.index} ended its step while replica {waiting[0].index} waits to update its weights "
                    "(its batch took another path through the step)"
                )
            replies = _answer([r.request for r in replicas])
    except BaseException:
        for replica in replicas:
            if not replica.done:
                replica.resume(_Abort())
        raise
    finally:
        copies.settle()
        for replica in replicas:
            replica.thread.join(timeout=5)
    return combine([r.result for r in replicas], sizes, [r.sums for r in replicas])


def update(optimizer: Any, apply: Callable[[list[tuple[Any, Any]]], Any], pairs: list[tuple[Any, Any]]) -> Any:
    """In a replica's thread: the replica's gradients for ``optimizer``; returns once every
    replica has given its own and ``apply`` was called once with their mean."""
    replica = _local.replica
    return replica.pause(("update", optimizer, apply, pairs))


def gradients_taken(result: Any) -> None:
    """In a replica's thread: what its tape returned, so that a clip of it is known as one."""
    replica = getattr(_local, "replica", None)
    if replica is not None:
        hold(replica.gradients, result)


def of_gradients(values: Any) -> bool:
    """In a replica's thread: whether ``values`` are gradients its tapes returned."""
    replica = getattr(_local, "replica", None)
    return replica is not None and held(replica.gradients, values)


def hold(taken: dict[int, Any], result: Any) -> None:
    """Keep the tensors a tape returned in ``taken``, by id (held: no other tensor takes an id)."""
    taken.update((id(g), g) for g in tf.nest.flatten(result) if g is not None)


def held(taken: dict[int, Any], values: Any) -> bool:
    """Whether ``values`` (a tensor, or a list of them) are tensors kept in ``taken``."""
    flat = [v for v in (values if isinstance(values, (list, tuple)) else [values]) if v is not None]
    return bool(flat) and all(id(v) in taken for v in flat)


_SUMS = ("reduce_sum", "count_nonzero")


def install_sums() -> None:
    """Note, in a replica's thread, the tensors that sum or count over its examples (see the
    module docstring): ``tf.reduce_sum``, ``tf.math.count_nonzero``, ``tf.size``, the first
    item of ``tf.shape``, and ``tf.cast`` / ``tf.identity`` of one of them."""
    if getattr(tf.size, "_autofix_smoke_sums", False):
        return
    for owner, name, kind in (
        (tf, "reduce_sum", "sum"),
        (tf.math, "reduce_sum", "sum"),
        (tf.math, "count_nonzero", "sum"),
        (tf, "size", "size"),
        (tf, "shape", "shape"),
        (tf, "cast", "same"),
        (tf, "identity", "same"),
    ):
        original = getattr(owner, name)

        def noted(*args, _original=original, _kind=kind, **kwargs):
            result = _original(*args, **kwargs)
            replica = getattr(_local, "replica", None)
            if replica is not None and args and not tf.inside_function():
                _note(replica, _kind, args[0], result, kwargs.get("axis", args[1] if len(args) > 1 and _kind == "sum" else None))
            return result

        functools.update_wrapper(noted, original)
        noted._autofix_smoke_sums = True
        setattr(owner, name, noted)
    item = tf.Tensor.__getitem__

    def getitem(self, key, _item=item):
        result = _item(self, key)
        replica = getattr(_local, "replica", None)
        if replica is not None and id(self) in replica.shapes and isinstance(key, int) and key == 0 and not tf.inside_function():
            replica.sums[id(result)] = result
        return result

    functools.update_wrapper(getitem, item)
    tf.Tensor.__getitem__ = getitem


def _note(replica: _Replica, kind: str, source: Any, result: Any, axis: Any) -> None:
    if kind == "same":
        if id(source) in replica.sums:
            replica.sums[id(result)] = result
        return
    shape = getattr(source, "shape", None)
    of_examples = shape is not None and shape.rank and shape[0] == replica.batch
    if not of_examples:
        return
    if kind == "shape":
        replica.shapes[id(result)] = result
    elif kind == "size" or axis is None:
        replica.sums[id(result)] = result


def differentiated(target: Any) -> None:
    """In a replica's thread: what its tape differentiates is its share of the loss, combined
    as the loss is, not as a sum."""
    replica = getattr(_local, "replica", None)
    if replica is not None:
        for value in tf.nest.flatten(target):
            replica.sums.pop(id(value), None)


def clip(values: list[Any], clip_norm: Any, original: Callable[..., Any]) -> Any:
    """In a replica's thread: ``tf.clip_by_global_norm(values, clip_norm)`` as one device clips
    the global batch's gradient; returns once every replica has reached it."""
    return _local.replica.pause(("clip", list(values), clip_norm, original))


def _clipped(requests: list[tuple]) -> list[Any]:
    """Every replica clips its gradients by their global norm: each is scaled by what clips the
    mean of them (its norm, the norm of the mean), so that their mean is the mean, clipped."""
    lengths = {len(r[1]) for r in requests}
    if len(lengths) != 1:
        raise Diverged("the replicas clipped different numbers of gradients")
    means = [mean_gradient([r[1][k] for r in requests]) for k in range(lengths.pop())]
    norm = tf.linalg.global_norm([tf.convert_to_tensor(m) for m in means if m is not None])
    context.did("clipped")
    return [r[3](r[1], r[2], use_norm=norm) for r in requests]


_updates = 0
_calls = 0  # calls run as virtual replicas so far


def updates_made() -> int:
    """How many updates the replicas have made (each once, for all of them), so far."""
    return _updates


def _answer(requests: list[tuple]) -> list[Any]:
    """Every replica waits at an update (make it once, with the mean of their gradients) or at
    a clip of its gradients by their global norm."""
    kinds = {r[0] for r in requests}
    first = requests[0]
    if kinds == {"clip"}:
        return _clipped(requests)
    if kinds != {"update"} or any(r[1] is not first[1] for r in requests):
        raise Diverged("the replicas updated different optimizers at the same point of the step")
    variables = [v for _, v in first[3]]
    for request in requests[1:]:
        if len(request[3]) != len(variables) or any(v is not w for (_, v), w in zip(request[3], variables)):
            raise Diverged(f"the replicas updated different variables with {type(first[1]).__name__}")
    global _updates
    _updates += 1
    mean = [mean_gradient([r[3][k][0] for r in requests]) for k in range(len(variables))]
    per_example(first[1], len(requests))
    result = first[2](list(zip(mean, variables)))
    return [result] * len(requests)


def per_example(optimizer: Any, count: int) -> None:
    """The optimizer's learning-rate schedule read at ``count`` times its step: a step of the
    reference holds ``count`` of the original's batches, and a schedule is compared at the same
    number of examples seen (Keras's optimizers, 3 and 2; said when it cannot be)."""
    from autofix.smoke.state import recorder

    schedule = getattr(optimizer, "_learning_rate", None)
    if schedule is None or getattr(schedule, "_autofix_smoke_per_example", None) is not None or not callable(schedule) or hasattr(schedule, "numpy"):
        return
    base = None
    for module_name in ("keras", "tf_keras"):
        module = __import__("sys").modules.get(module_name)
        candidate = getattr(getattr(getattr(module, "optimizers", None), "schedules", None), "LearningRateSchedule", None)
        if candidate is not None and isinstance(schedule, candidate):
            base = candidate
    if base is None:
        recorder.note(f"compare: the learning-rate schedule of {type(optimizer).__name__} could not be read per example")
        return

    class PerExample(base):  # type: ignore[misc, valid-type]
        _autofix_smoke_per_example = schedule

        def __call__(self, step):
            return schedule(step * count)

        def get_config(self):
            return schedule.get_config()

    optimizer._learning_rate = PerExample()


def mean_gradient(gradients: list[Any]) -> Any:
    present = [g for g in gradients if g is not None]
    if not present:
        return None
    if len(present) != len(gradients):
        raise Diverged("some replicas had no gradient for a variable the others had one for")
    if all(isinstance(g, tf.IndexedSlices) for g in present):
        # An embedding's gradient: rows, as MirroredStrategy gathers them (the optimizer's
        # update of rows, which is not that of the dense sum where rows repeat).
        count = tf.cast(len(present), present[0].values.dtype)
        return tf.IndexedSlices(
            tf.concat([g.values / count for g in present], axis=0),
            tf.concat([g.indices for g in present], axis=0),
            present[0].dense_shape,
        )
    dense = [tf.convert_to_tensor(g) for g in present]
    return tf.add_n(dense) / tf.cast(len(dense), dense[0].dtype)


def combine(results: list[Any], batch: int | list[int], sums: list[dict[int, Any]] | None = None) -> Any:
    """The replicas' results as one: per example (first axis ``batch``, each replica's share,
    or a list of them): their rows in order;
    a sum or a count over the examples (held in every replica's ``sums``): their sum; a value
    per replica: the mean over the replicas (as ``fit`` logs them); anything else: replica 0's."""
    first = results[0]
    sizes = batch if isinstance(batch, list) else [batch] * len(results)
    try:
        tf.nest.assert_same_structure(first, results[-1])
    except (ValueError, TypeError):
        return first

    def one(*values):
        head = values[0]
        if sums is not None and all(id(v) in held for v, held in zip(values, sums)):
            return tf.add_n([tf.convert_to_tensor(v) for v in values])
        if isinstance(head, (tf.Tensor, np.ndarray, np.floating, float)) and not isinstance(head, bool):
            tensors = [tf.convert_to_tensor(v) for v in values]
            if not all(t.dtype.is_floating or t.dtype.is_integer for t in tensors):
                return head
            if all(t.shape.rank and t.shape[0] == size for t, size in zip(tensors, sizes)):
                return tf.concat(tensors, axis=0)
            if tensors[0].dtype.is_floating and all(t.shape == tensors[0].shape for t in tensors):
                mean = tf.add_n(tensors) / tf.cast(len(tensors), tensors[0].dtype)
                return mean if isinstance(head, tf.Tensor) else mean.numpy()
        return head

    return tf.nest.map_structure(one, *results)


class _Copies:
    """Each replica's own copy of the variables replicas write (not the optimizer's: its
    update is made once, for all), kept for the whole run as MirroredStrategy keeps them."""

    _instance: _Copies | None = None

    def __init__(self) -> None:
        # id(variable) -> (variable, [copy per replica], aggregation)
        self.held: dict[int, tuple[Any, list[Any], Any]] = {}
        self.count = 0
        self.inside: int | None = None

    @classmethod
    def current(cls) -> _Copies:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    @classmethod
    def reset(cls) -> None:
        cls._instance = None

    def enter(self, replica: int) -> None:
        self.inside = replica
        for variable, values, _ in self.held.values():
            if values[replica] is not None:
                _write(variable, values[replica])

    def leave(self, replica: int) -> None:
        for variable, values, _ in self.held.values():
            values[replica] = _read(variable)
        self.inside = None

    def written(self, variable: Any, count: int) -> None:
        """A replica is about to write ``variable``: from now on each replica has its copy,
        all of them what the variable holds now (for a variable summed on read, replica 0
        holds it and the others nothing, so that their sum is what it holds)."""
        key = id(variable)
        if key in self.held:
            return
        value = _read(variable)
        aggregation = getattr(variable, "aggregation", None)
        summed = aggregation == tf.VariableAggregation.SUM
        values = [value if (r == 0 or not summed) else np.zeros_like(value) for r in range(count)]
        self.held[key] = (variable, values, aggregation)

    def settle(self) -> None:
        """Between steps: what the script reads from each variable replicas wrote."""
        for variable, values, aggregation in self.held.values():
            if any(v is None for v in values):
                continue
            if aggregation == tf.VariableAggregation.SUM:
                value = np.sum(np.stack(values), axis=0).astype(values[0].dtype)
            elif aggregation == tf.VariableAggregation.MEAN:
                value = np.mean(np.stack(values), axis=0).astype(values[0].dtype)
            else:
                value = values[0]
            _write(variable, value)

    def rewritten(self, variable: Any, count: int) -> None:
        """The script wrote ``variable`` between steps (a metric reset): every copy is what it
        wrote (a variable summed on read: replica 0's, the others nothing), as a strategy's
        write in cross-replica context makes them."""
        held = self.held.get(id(variable))
        if held is None:
            return
        value = _read(variable)
        summed = held[2] == tf.VariableAggregation.SUM
        held[1][:] = [value if (r == 0 or not summed) else np.zeros_like(value) for r in range(count)]


_writing = threading.local()


def _read(variable: Any) -> Any:
    with tf.init_scope():
        return np.array(variable.read_value() if hasattr(variable, "read_value") else variable.numpy(), copy=True)


def _write(variable: Any, value: Any) -> None:
    _writing.on = True
    try:
        with tf.init_scope():
            variable.assign(value)
    finally:
        _writing.on = False


_installed = False
_count = 0


def start(count: int) -> None:
    """Before each script: ``count`` virtual replicas for the reference run (0: none)."""
    global _count
    _count = count
    _Copies.reset()
    tf.config.run_functions_eagerly(bool(count))
    if count:
        _install()
        from autofix.smoke.state import recorder

        recorder.note(f"compare: the original's steps run as {count} replicas on one device, eagerly (the reference)")


def count() -> int:
    return _count


def _install() -> None:
    """Watch variable writes: a replica's write makes the variable the replicas' own."""
    global _installed
    if _installed:
        return
    _installed = True
    from tensorflow.python.ops import resource_variable_ops

    for cls in (resource_variable_ops.ResourceVariable, resource_variable_ops.BaseResourceVariable):
        for name in ("assign", "assign_add", "assign_sub"):
            original = cls.__dict__.get(name)
            if original is None or getattr(original, "_autofix_smoke_copies", False):
                continue
            wrapped = _watching(original)
            wrapped._autofix_smoke_copies = True
            setattr(cls, name, wrapped)


def _watching(original):
    def write(self, *args, **kwargs):
        if not _count or getattr(_writing, "on", False):
            return original(self, *args, **kwargs)
        _writing.on = True  # one write, whichever class's method it goes through
        try:
            if active():
                _Copies.current().written(self, _count)
                return original(self, *args, **kwargs)
            result = original(self, *args, **kwargs)
            if not tf.inside_function():
                _Copies.current().rewritten(self, _count)
            return result
        finally:
            _writing.on = False

    return write
