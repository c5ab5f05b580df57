"""What ``--compare`` holds equal between the original and the migrated run (child side).

For a job that records its first update, before the script starts and for as long as it runs:

- every seed is set to the same value (``random``, NumPy, TensorFlow, and Keras' own with
  ``keras.utils.set_random_seed``, also when the script imports Keras later): Keras 3 draws
  its initializers' seeds from Python's ``random`` in the order layers are made, so the same
  model starts from the same weights in both runs;
- the data keeps its order: the script's ``Dataset.shuffle`` returns the dataset as it is,
  and ``fit`` gets ``shuffle=False``;
- with ``batch_scale`` k (the original run at k times its batch, to compare with k replicas):
  the batch the script asks ``Dataset.batch`` / ``padded_batch`` for, and the ``batch_size``
  of ``fit`` on arrays (32 when not given), are multiplied by k; batching done by Keras itself
  (inside ``fit``) is not;
- dropout and noise layers (``Dropout``, ``SpatialDropout*``, ``GaussianDropout``,
  ``GaussianNoise``, ``AlphaDropout``) run as in inference: one device and N replicas draw
  their masks differently, and the comparison is of everything else;
- random numbers drawn in a training step (``tf.random.normal`` / ``uniform`` /
  ``truncated_normal``, the same in ``keras.random``: a GAN's noise) are drawn as one device
  would draw them for the global batch (see :func:`_random`): a replica takes its examples'
  rows, of every block of the global batch for a draw a whole number of batches long (the
  labels of ``concat([generated, real])``); in the original at k times its
  batch, a draw with as many rows as a batch the script asked for (``[BATCH_SIZE, latent]``)
  gets k times the rows, as the script written for that batch would draw;
- ``BatchNormalization`` on N replicas normalizes over the global batch
  (``synchronized=True``), as one device does; MirroredStrategy otherwise normalizes each
  replica's share on its own;
- with ``floatx`` (``float64``), Keras makes its variables and computes in that type
  (``keras.config.set_floatx`` and the dtype policy), set back to float32 after the script;
  float32 data (arrays given to ``fit``, the batches of the script's datasets), a step's random
  draws and its ``tf.ones`` / ``tf.zeros`` of no given type are given in that type too, so that
  the script's own arithmetic on data and outputs runs. float32's rounding, which
  BatchNormalization's statistics and Adam's first update magnify, then no longer hides what
  the comparison looks for.

Only the script's own calls are changed (not those made inside Keras' ``fit``). What was done
is noted in the report.
"""

from __future__ import annotations

import contextlib
import functools
import random
import sys
import threading
from typing import Any

import numpy as np
import tensorflow as tf

from autofix.smoke.state import recorder

SEED = 1234
NOISE_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianDropout", "GaussianNoise", "AlphaDropout")

_active = False
_scale = 1
_floatx: str | None = None
_seen: dict[str, int] = {}
# The batch sizes the script asked for, before scaling (for draws as long as a batch).
_asked: set[int] = set()
# Random draws in a training step: tf.random.* and keras.random.* (Keras draws for its own
# layers otherwise, which the noise layers above cover).
RANDOM = ("normal", "uniform", "truncated_normal")
STATELESS = {"normal": "stateless_normal", "uniform": "stateless_uniform", "truncated_normal": "stateless_truncated_normal"}
# Tensors made in a step with float32 as their default type (``labels = tf.ones((n, 1))``).
FILLED = ("ones", "zeros")
# Random draws made so far in each graph being traced (or eagerly), per replica.
_occurrences: dict[tuple[int, int | None], int] = {}
_replica = threading.local()


def install() -> None:
    dataset = tf.data.Dataset
    for name in ("batch", "padded_batch"):
        _wrap(dataset, name, _batch)
    _wrap(dataset, "shuffle", _shuffle)
    for name in RANDOM:
        _wrap_function(tf.random, name, "tf.random")
    for name in FILLED:
        _wrap_filled(tf, name)


def install_keras(module: Any) -> None:
    for name in NOISE_LAYERS:
        cls = getattr(module.layers, name, None)
        if cls is not None:
            _wrap(cls, "call", _inference)
    normalization = getattr(module.layers, "BatchNormalization", None)
    if normalization is not None:
        _wrap(normalization, "call", _synchronized)
    random_module = getattr(module, "random", None)
    if random_module is not None:
        for name in RANDOM:
            _wrap_function(random_module, name, f"{module.__name__}.random")
    if _active:
        _seed_keras(module)
        if _floatx:
            _set_floatx(module, _floatx)


def start(active: bool, scale: int = 1, floatx: str | None = None) -> None:
    """Before each script: hold things equal (``active``), the batch scaled by ``scale``,
    Keras's float type ``floatx`` (after the script, ``start(False)``: float32 again)."""
    global _active, _scale, _floatx
    if _floatx:
        for module in _kerases():
            _set_floatx(module, "float32")
    _active, _scale, _floatx = active, max(1, int(scale)), (floatx if active else None)
    _seen.clear()
    _occurrences.clear()
    _asked.clear()
    if not active:
        return
    random.seed(SEED)
    np.random.seed(SEED)
    tf.random.set_seed(SEED)
    for module in _kerases():
        _seed_keras(module)
        if _floatx:
            _set_floatx(module, _floatx)


def _kerases() -> list[Any]:
    return [sys.modules[name] for name in ("keras", "tf_keras") if name in sys.modules]


def _set_floatx(module: Any, floatx: str) -> None:
    setter = getattr(getattr(module, "config", None), "set_floatx", None) or getattr(getattr(module, "backend", None), "set_floatx", None)
    if setter is None:
        recorder.note(f"could not set {module.__name__}'s float type to {floatx}")
        return
    setter(floatx)
    # Keras 3 keeps the policy made from floatx at its first use: made again from this one.
    policy = getattr(getattr(module, "config", None), "set_dtype_policy", None) or getattr(getattr(module, "mixed_precision", None), "set_global_policy", None)
    if policy is not None:
        policy(floatx)
    if floatx != "float32":
        _saw(f"{module.__name__}'s float type", f"set to {floatx}")


def active() -> bool:
    return _active


def held() -> list[str]:
    """What was changed in this script so far to hold the runs equal (``Dataset.shuffle``,
    ``Dropout``, ``BatchNormalization``, ``tf.random.normal``...)."""
    return list(_seen)


def fit_arguments(given: dict[str, Any], array_input: bool) -> None:
    """``fit``'s own shuffling off, and its batch on arrays scaled."""
    if not _active:
        return
    given["shuffle"] = False
    if array_input and given.get("batch_size"):
        _asked.add(int(given["batch_size"]))
    if array_input and _scale > 1 and given.get("batch_size"):
        given["batch_size"] = int(given["batch_size"]) * _scale
        _saw("fit(batch_size=...)")
    if _floatx and array_input:
        for name in ("x", "y", "validation_data"):
            if given.get(name) is not None:
                given[name] = _widened(given[name])


def _widened(value: Any) -> Any:
    """NumPy float32 arrays (in lists, tuples, dicts) as ``_floatx``: what a step gets from a
    float64 run's data is float64, as its model's outputs are, so that the script's own
    arithmetic on both (``generated - real``) runs."""
    if isinstance(value, np.ndarray) and value.dtype == np.float32:
        _saw("float32 data", f"given as {_floatx}")
        return value.astype(_floatx)
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(v) for v in value)
    if isinstance(value, dict):
        return {k: _widened(v) for k, v in value.items()}
    return value


def _widened_element(*element: Any) -> Any:
    def widen(value: Any) -> Any:
        if isinstance(value, tf.Tensor) and value.dtype == tf.float32:
            return tf.cast(value, _floatx)
        return value

    return tf.nest.map_structure(widen, element if len(element) != 1 else element[0])


def _seed_keras(module: Any) -> None:
    try:
        module.utils.set_random_seed(SEED)
    except Exception as exc:
        recorder.note(f"could not seed {module.__name__} ({type(exc).__name__})")


def _script_call() -> bool:
    return _active and recorder.keras_depth == 0 and threading.current_thread() is threading.main_thread()


def _wrap(cls: type, name: str, make) -> None:
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_autofix_smoke_control", False):
        return
    wrapped = functools.wraps(original)(make(original))
    wrapped._autofix_smoke_control = True
    setattr(cls, name, wrapped)


def _batch(original):
    def batch(self, batch_size, *args, **kwargs):
        if _script_call():
            asked = tf.get_static_value(batch_size)
            if asked is not None:
                _asked.add(int(asked))
                recorder.batches.append(int(asked) * _scale)
                if _scale > 1:
                    batch_size = int(asked) * _scale
                    _saw(f"Dataset.{original.__name__}")
            if _floatx and any(spec.dtype == tf.float32 for spec in tf.nest.flatten(self.element_spec) if hasattr(spec, "dtype")):
                _saw("float32 data", f"given as {_floatx}")
                return original(self, batch_size, *args, **kwargs).map(_widened_element)
        return original(self, batch_size, *args, **kwargs)

    return batch


def _shuffle(original):
    def shuffle(self, *args, **kwargs):
        if _script_call():
            _saw("Dataset.shuffle", "turned off")
            return self
        return original(self, *args, **kwargs)

    return shuffle


def _inference(original):
    def call(self, inputs, *args, **kwargs):
        if _active and not args:
            kwargs["training"] = False
            _saw(type(self).__name__, "run as in inference")
        return original(self, inputs, *args, **kwargs)

    return call


@contextlib.contextmanager
def replica(context: Any, inputs: Any):
    """While a replica of a strategy runs a step: which one, of how many, on how large a batch
    (the leading dimension of its first input)."""
    if not _active or context is None:
        yield
        return
    count = context.num_replicas_in_sync
    batch = None
    for value in tf.nest.flatten(inputs, expand_composites=True):
        if isinstance(value, tf.Tensor) and value.shape.rank:
            batch = tf.shape(value)[0]
            break
    _replica.info = (context.replica_id_in_sync_group, batch, count)
    try:
        yield
    finally:
        _replica.info = None


def replica_id() -> int:
    """The replica running now (0 outside a strategy's replicas)."""
    info = getattr(_replica, "info", None)
    value = None if info is None else tf.get_static_value(info[0])
    return 0 if value is None else int(value)


def _wrap_function(module: Any, name: str, shown: str) -> None:
    original = getattr(module, name, None)
    if original is None or getattr(original, "_autofix_smoke_control", False):
        return
    wrapped = functools.wraps(original)(_random(original, name, shown))
    wrapped._autofix_smoke_control = True
    setattr(module, name, wrapped)


def _wrap_filled(module: Any, name: str) -> None:
    """``tf.ones`` / ``tf.zeros`` in a step of a float64 run: float64 when no type is given."""
    original = getattr(module, name, None)
    if original is None or getattr(original, "_autofix_smoke_control", False):
        return

    def filled(shape, dtype=None, *args, **kwargs):
        if dtype is None and _floatx and _active and _in_step():
            _saw(f"tf.{name}", f"made as {_floatx}")
            dtype = _floatx
        return original(shape, tf.float32 if dtype is None else dtype, *args, **kwargs)

    wrapped = functools.wraps(original)(filled)
    wrapped._autofix_smoke_control = True
    setattr(module, name, wrapped)


def _in_step() -> bool:
    """In a training step of the script (its step function, fit's, a replica's)."""
    return bool(recorder.function_stack) or recorder.current_fit is not None or getattr(_replica, "info", None) is not None


def _random(original, name: str, shown: str):
    """In a step, a random draw is made as one device would make it for the global batch: a
    stateless draw seeded by the order of its call site; a replica of N whose draw is as long as
    its batch takes its rows of the draw for N times that batch, the rows one device would give
    its examples (of each block of the global batch, for a draw k batches long). Draws of
    another length are the same on every replica, as on one device."""

    def draw(shape, *args, **kwargs):
        if not (_active and _in_step()):
            return original(shape, *args, **kwargs)
        # The k-th draw of a trace (of each replica) gets seed k: a step is traced more than
        # once (first to make its variables), and one device and each replica draw in the same
        # order. Call sites cannot tell the draws apart: autograph runs a converted copy.
        info = getattr(_replica, "info", None)
        replica_id = None if info is None else tf.get_static_value(info[0])
        key = (id(tf.compat.v1.get_default_graph()), None if replica_id is None else int(replica_id))
        number = _occurrences[key] = _occurrences.get(key, 0) + 1
        _saw(f"{shown}.{name}", "drawn as one device draws it for the global batch")
        return _stateless(name, shape, (SEED, number), *args, **kwargs)

    return draw


def _stateless(name: str, shape, seeds, *args, **kwargs):
    # The script's own seed (an int, or a Keras SeedGenerator) gives way to the harness's.
    params = dict(zip(("minval", "maxval", "dtype") if name == "uniform" else ("mean", "stddev", "dtype"), args))
    params.update((k, v) for k, v in kwargs.items() if k in ("minval", "maxval", "mean", "stddev", "dtype"))
    if params.get("dtype") is None:
        params["dtype"] = _floatx or tf.float32
    stateless = getattr(tf.random, STATELESS[name])
    shape = tf.convert_to_tensor(shape, dtype=tf.int32)
    info = getattr(_replica, "info", None)
    if info is None and _scale > 1 and shape.shape.rank == 1 and shape.shape[0]:
        known = tf.get_static_value(shape)
        lead = None if known is None else known[0]
        if lead is not None and int(lead) in _asked:
            # The original at N x its batch, drawing as many rows as the batch it was written
            # for (``tf.random.normal([BATCH_SIZE, latent])``): written for N x that batch, it
            # would draw N x the rows.
            _saw("a draw as long as the batch", "drawn for the scaled batch")
            return stateless(tf.concat([[int(lead) * _scale], shape[1:]], 0), seed=seeds, **params)
    if info is None or info[1] is None or info[2] == 1 or shape.shape.rank != 1 or shape.shape[0] == 0:
        return stateless(shape, seed=seeds, **params)
    replica_id, batch, count = info
    lead = shape[0]
    batch = tf.cast(batch, tf.int32)

    def rows():
        # One device draws k x the global batch's rows for a draw k times as long as the batch
        # (k = 2: the labels of ``concat([generated, real])``), laid out as k blocks of the
        # global batch, one row per example in each: this replica takes its examples' rows of
        # every block.
        blocks = lead // batch
        whole = stateless(tf.concat([[lead * count], shape[1:]], 0), seed=seeds, **params)
        whole = tf.reshape(whole, tf.concat([[blocks, count, batch], shape[1:]], 0))
        return tf.gather(whole, tf.cast(replica_id, tf.int32), axis=1)

    aligned = tf.logical_and(tf.greater(batch, 0), tf.logical_and(tf.greater_equal(lead, batch), tf.equal(lead % tf.maximum(batch, 1), 0)))
    return tf.reshape(tf.cond(aligned, rows, lambda: stateless(shape, seed=seeds, **params)), shape)


def _synchronized(original):
    """On N replicas, batch statistics over the global batch (``synchronized=True``), as one
    device computes them: MirroredStrategy otherwise normalizes each replica's share alone."""

    def call(self, *args, **kwargs):
        info = getattr(_replica, "info", None)
        if not _active or info is None or info[2] == 1 or getattr(self, "synchronized", True):
            return original(self, *args, **kwargs)
        self.synchronized = True
        _saw(type(self).__name__, "normalized over the global batch (synchronized=True)")
        try:
            return original(self, *args, **kwargs)
        finally:
            self.synchronized = False

    return call


def _saw(what: str, how: str | None = None) -> None:
    """Note once per script what was changed."""
    if what in _seen:
        return
    _seen[what] = 1
    if how is None:
        how = f"batch scaled {_scale}x"
    recorder.note(f"compare: {what} {how}")
