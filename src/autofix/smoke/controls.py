"""What ``--compare`` holds equal between the original and the migrated runs (child side).

For a job that records its steps, before the script starts and for as long as it runs:

- every seed is set to the same value (``random``, NumPy, TensorFlow, and Keras' own with
  ``keras.utils.set_random_seed``, also when the script imports Keras later): Keras 3 draws
  its initializers' seeds from Python's ``random`` in the order layers are made, so the same
  model starts from the same weights in both runs;
- the data keeps its order: the script's ``Dataset.shuffle`` returns the dataset as it is,
  and ``fit`` gets ``shuffle=False``;
- with ``batch_scale`` k (the reference run of the original, at k times its batch, its steps
  run as k virtual replicas: see :mod:`autofix.smoke.replicas`): the batch the script asks
  ``Dataset.batch`` / ``padded_batch`` for, the ``batch_size`` of ``fit`` on arrays (32
  when not given) and of a Keras ``ImageDataGenerator.flow`` (32 too, its shuffling turned off
  as ``Dataset.shuffle``'s is), are multiplied by k; batching done by Keras itself (inside ``fit``) is not;
- randomness in a step (Dropout and the other noise layers included) is drawn statelessly,
  the same for the same examples in every run (:mod:`autofix.smoke.noise`);
- with ``floatx`` (``float64``), Keras makes its variables and computes in that type
  (``keras.config.set_floatx`` and the dtype policy), set back to float32 after the script;
  float32 data (arrays given to ``fit``, the batches of the script's datasets), a step's random
  draws and its ``tf.ones`` / ``tf.zeros`` of no given type are given in that type too, so that
  the script's own arithmetic on data and outputs runs. float32's rounding, which Adam's first
  update magnifies, then no longer hides what the comparison looks for.

Only the script's own calls are changed (not those made inside Keras' ``fit``). What was done
is noted in the report.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import random
import sys
import threading
from typing import Any

import numpy as np

import tensorflow as tf

from autofix.smoke import context, noise, script_loops
from autofix.smoke.noise import SEED
from autofix.smoke.state import _is_user_file, recorder, user_site

_active = False
_scale = 1
_micro = 0  # the script's batches a step (a reference of micro-steps), 0: off
_floatx: str | None = None
_seen: dict[str, int] = {}
# What the script's own data pipeline does that holding it equal hides, for the verdict: the
# places that shuffle (turned off in every run), and the batches that drop a partial last batch.
_shuffled: list[str] = []
_dropping: list[str] = []
# The seeds the script sets itself, in order: ("np.random.seed", "7"), ...
_seeds: list[tuple[str, str]] = []
_seeding = False  # the harness is seeding (not the script)
# How long each fit the script calls was asked to train (capped in every run, so compared here),
# and on what: its arrays' rows, its dataset's batches, whether it shuffles them, the share it
# keeps apart for validation.
_fits: list[dict[str, Any]] = []
# The datasets the script itself starts to iterate (plain or distributed), in order, and the one
# being iterated when the first update was made: how many batches an epoch of it holds. Every run is
# capped to the steps compared, so an epoch cut short (``take``) or made longer (``repeat``)
# shows only here.
_iterated: list[dict[str, Any]] = []
_trained: list[dict[str, Any]] = []
# The script's own for loops around its first update (:mod:`autofix.smoke.script_loops`), and
# whether that update was made by fit: recorded once a run.
_looped: list[dict[str, Any]] = []
# Tensors made in a step with float32 as their default type (``labels = tf.ones((n, 1))``).
FILLED = ("ones", "zeros")


def install() -> None:
    dataset = tf.data.Dataset
    for name in ("batch", "padded_batch"):
        _wrap(dataset, name, _batch)
    _wrap(dataset, "shuffle", _shuffle)
    _wrap(dataset, "__iter__", _iterate)
    from tensorflow.python.distribute import input_lib

    for distributed in ("DistributedDataset", "DistributedDatasetsFromFunction"):
        if hasattr(input_lib, distributed):
            _wrap(getattr(input_lib, distributed), "__iter__", _iterate)
    _wrap_seed(random, "seed", "random.seed")
    _wrap_seed(np.random, "seed", "np.random.seed")
    _wrap_seed(tf.random, "set_seed", "tf.random.set_seed")
    for name in FILLED:
        _wrap_filled(tf, name)
    noise.install()


def install_keras(module: Any) -> None:
    noise.install_keras(module)
    generator = _image_data_generator(module)
    if generator is not None:
        _wrap(generator, "flow", _flow)
    _wrap_seed(getattr(module, "utils", None), "set_random_seed", f"{module.__name__}.utils.set_random_seed")
    if _active:
        _seed_keras(module)
        if _floatx:
            _set_floatx(module, _floatx)


def start(active: bool, scale: int = 1, floatx: str | None = None, micro: int = 0) -> None:
    """Before each script: hold things equal (``active``), the batch scaled by ``scale``,
    Keras's float type ``floatx``, ``micro`` of the script's batches a step (a reference run as
    micro-steps; 0: off); after the script, ``start(False)``: float32 again."""
    global _active, _scale, _floatx, _micro
    _micro = int(micro) if active else 0
    if _floatx:
        for module in _kerases():
            _set_floatx(module, "float32")
    _active, _scale, _floatx = active, max(1, int(scale)), (floatx if active else None)
    _seen.clear()
    del _shuffled[:], _dropping[:], _seeds[:], _fits[:], _iterated[:], _trained[:], _looped[:]
    noise.forget_notes()
    noise.start(active, _floatx)
    if not active:
        return
    global _seeding
    _seeding = True
    try:
        random.seed(SEED)
        np.random.seed(SEED)
        tf.random.set_seed(SEED)
        for module in _kerases():
            _seed_keras(module)
            if _floatx:
                _set_floatx(module, _floatx)
    finally:
        _seeding = False


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


def seeds() -> list[list[str]]:
    """The seeds the script set itself (``random.seed``, ``np.random.seed``,
    ``tf.random.set_seed``, Keras's ``set_random_seed``), in order."""
    return [list(s) for s in _seeds]


def _wrap_seed(owner: Any, name: str, label: str) -> None:
    if owner is not None:
        _wrap(owner, name, lambda original: _seed(original, label))


def _seed(original, label: str):
    def seed(*args, **kwargs):
        global _seeding
        if _active and not _seeding and threading.current_thread() is threading.main_thread() and user_site(2) != "<unknown>":
            value = args[0] if args else next(iter(kwargs.values()), None)
            _seeds.append((label, repr(value)))
            _seeding = True  # (Keras's set_random_seed seeds the others: said once)
            try:
                return original(*args, **kwargs)
            finally:
                _seeding = False
        return original(*args, **kwargs)

    return seed


def _plain_number(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return repr(value)


def _micro_steps() -> int:
    """How many of the script's batches make one step of this run (the reference of a step
    that cannot be split runs N of its own batches a step: see :mod:`autofix.smoke.accumulate`)."""
    return max(1, _micro)


def _rows_of(x: Any) -> int | None:
    """The rows of fit's arrays (the first array's leading dimension)."""
    for leaf in tf.nest.flatten(x):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) and shape[0] is not None:
            return int(shape[0])
    return None


def _digest_of(arrays: Any) -> str | None:
    """One digest of fit's validation arrays (their rows, as what a step is fed is digested),
    with their count; None when they are not arrays."""
    from autofix.smoke import feeds

    try:
        rows = feeds.rows(arrays)
        count = _rows_of(arrays)
    except Exception:
        return None
    return f"{count}:{feeds.digest(rows)}" if rows else None


def _plain_value(value: Any) -> Any:
    """A flag or number as JSON holds it (a string or a float: ``shuffle="batch"``, a split)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)


def fits() -> list[dict[str, Any]]:
    """The epochs (and steps an epoch) each ``fit`` of the script was asked for, in order."""
    return [dict(f) for f in _fits]


def pipeline() -> dict[str, Any]:
    """Where the script's datasets were shuffled (each place once), where a batch dropped
    a partial last batch (``drop_remainder=True`` on a dataset whose size is not a multiple of
    the batch, or of unknown size), and the dataset the script's own loop was iterating when
    its first update was made (``trained``: its site and batches an epoch, None when unknown),
    and the script's for loops around that update (``loops``: ``{"fit", "loops"}``, None when no
    update was made)."""
    return {
        "shuffled": list(_shuffled),
        "dropping": list(_dropping),
        "trained": dict(_trained[0]) if _trained else None,
        "loops": dict(_looped[0]) if _looped else None,
    }


def batches_of(dataset: Any) -> int | None:
    """How many batches an epoch of ``dataset`` holds, when tf.data knows (None when it is
    infinite or unknown, or not a tf.data dataset)."""
    if not isinstance(dataset, tf.data.Dataset):
        return None
    try:
        count = int(dataset.cardinality())
    except Exception:
        return None
    return count if count >= 0 else None


def _limited(dataset: Any) -> bool:
    """Whether an epoch of ``dataset`` is cut to a number of batches (a ``take`` in its chain):
    its steps are then the script's choice, not its data's size."""
    current, depth = dataset, 0
    while current is not None and depth < 100:
        if type(current).__name__ == "_TakeDataset":
            return True
        current, depth = getattr(current, "_input_dataset", None), depth + 1
    return False


def distributed(dataset: Any, made: Any) -> None:
    """``strategy.experimental_distribute_dataset(dataset)`` made ``made``: an epoch of it
    holds as many (global) batches as ``dataset``."""
    try:
        made._autofix_smoke_batches = batches_of(dataset)
        made._autofix_smoke_limited = _limited(dataset)
    except Exception:
        pass


def _iterate(original):
    def __iter__(self):
        # The script's own iteration (not one tf.distribute or Keras starts for it).
        if _script_call() and not tf.inside_function() and _is_user_file(sys._getframe(1).f_code.co_filename):
            if isinstance(self, tf.data.Dataset):
                batches, limited = batches_of(self), _limited(self)
            else:
                batches, limited = getattr(self, "_autofix_smoke_batches", None), getattr(self, "_autofix_smoke_limited", False)
            _iterated.append({"site": user_site(2), "batches": batches, "limited": limited})
        return original(self)

    return __iter__


def training_began() -> None:
    """The first update of the script's own loop is made: the dataset it iterates is the one
    begun last (a preview or a probe of another dataset before training is not; fit's data is
    recorded with fit)."""
    if _active and not _trained and recorder.current_fit is None and _iterated:
        _trained.append(dict(_iterated[-1], micro=_micro_steps()))
    if _active and not _looped:
        try:
            # MirroredStrategy runs each replica's step in a thread of its own; the script's
            # loops are on the main thread's stack, which waits for them.
            main = threading.main_thread()
            frame = sys._getframe(1) if threading.current_thread() is main else sys._current_frames().get(main.ident)
            found = script_loops.around(frame)
        except Exception:  # reading the script's loops must never stop its run
            found = None
        if found is not None:
            _looped.append({"fit": recorder.current_fit is not None, "loops": found})


def held() -> list[str]:
    """What was changed in this script so far to hold the runs equal (``Dataset.shuffle``,
    the batch...)."""
    return list(_seen)


def fit_arguments(given: dict[str, Any], array_input: bool) -> None:
    """``fit``'s own shuffling off, and its batch on arrays scaled; how many epochs (and steps
    an epoch) it was asked for noted (every run is capped to the steps compared)."""
    if not _active:
        return
    _fits.append(
        {
            "epochs": _plain_number(given.get("epochs", 1)),
            "initial_epoch": _plain_number(given.get("initial_epoch", 0)),
            "steps_per_epoch": _plain_number(given.get("steps_per_epoch")),
        }
    )
    unscaled = _unscaled_batcher(given.get("x"))
    if unscaled is not None:
        _fits[-1]["unscaled"] = unscaled
    x = given.get("x")
    if array_input:
        _fits[-1]["examples"] = _rows_of(x)
        _fits[-1]["shuffle"] = _plain_value(given.get("shuffle", True))
        _fits[-1]["validation_split"] = _plain_value(given.get("validation_split") or 0.0)
    else:
        _fits[-1]["batches"] = batches_of(x)
        _fits[-1]["limited"] = _limited(x)
        _fits[-1]["micro"] = _micro_steps()
    callbacks = given.get("callbacks")
    if isinstance(callbacks, (list, tuple)):
        # BackupAndRestore changes nothing a run computes (a migration to several workers adds it)
        _fits[-1]["callbacks"] = sorted(type(c).__name__ for c in callbacks if type(c).__name__ != "BackupAndRestore")
    elif callbacks is None:
        _fits[-1]["callbacks"] = []
    validation = given.get("validation_data")
    if isinstance(validation, (tuple, list)):
        _fits[-1]["validation"] = _digest_of(validation)
    given["shuffle"] = False
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
    global _seeding
    was, _seeding = _seeding, True
    try:
        _seed_keras_now(module)
    finally:
        _seeding = was


def _seed_keras_now(module: Any) -> None:
    try:
        module.utils.set_random_seed(SEED)
    except Exception as exc:
        recorder.note(f"could not seed {module.__name__} ({type(exc).__name__})")


def _script_call() -> bool:
    return _active and recorder.keras_depth == 0 and threading.current_thread() is threading.main_thread()


def _wrap(cls: Any, name: str, make) -> None:
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
                recorder.batches.append(int(asked) * _scale)
                if _scale > 1:
                    batch_size = int(asked) * _scale
                    _saw(f"Dataset.{original.__name__}")
            _note_drop(self, batch_size, args, kwargs)
            if _floatx and any(spec.dtype == tf.float32 for spec in tf.nest.flatten(self.element_spec) if hasattr(spec, "dtype")):
                _saw("float32 data", f"given as {_floatx}")
                return original(self, batch_size, *args, **kwargs).map(_widened_element)
        return original(self, batch_size, *args, **kwargs)

    return batch


def _image_data_generator(keras_module: Any) -> Any:
    """The ``ImageDataGenerator`` class of the Keras the script imported (Keras 3's legacy one,
    tf_keras's), when it has one."""
    root = getattr(keras_module, "__name__", "").split(".")[0]
    name = {"keras": "keras.src.legacy.preprocessing.image", "tf_keras": "tf_keras.src.preprocessing.image"}.get(root)
    if name is None:
        return None
    try:
        return getattr(__import__(name, fromlist=["ImageDataGenerator"]), "ImageDataGenerator", None)
    except Exception:
        return None


def _flow(original):
    """``datagen.flow(x, y, batch_size=B)``: a batcher fed to fit, scaled as ``Dataset.batch``
    is (B 32 when not given), its shuffling turned off as ``Dataset.shuffle``'s is."""

    def flow(self, x, y=None, batch_size=32, shuffle=True, *args, **kwargs):
        if _script_call():
            recorder.batches.append(int(batch_size) * _scale)
            if _scale > 1:
                batch_size = int(batch_size) * _scale
                _saw("ImageDataGenerator.flow")
            if shuffle:
                _saw("ImageDataGenerator.flow(shuffle=True)", "turned off")
                site = user_site(2)
                if site not in _shuffled:
                    _shuffled.append(site)
                shuffle = False
        made = original(self, x, y, batch_size, shuffle, *args, **kwargs)
        try:
            made._autofix_smoke_scaled = True  # its batch is the one this run asked for
        except AttributeError:
            pass
        return made

    return flow


def _note_drop(dataset: Any, batch_size: Any, args: tuple, kwargs: dict) -> None:
    drop = kwargs.get("drop_remainder", args[0] if args else False)
    if not bool(tf.get_static_value(drop)):
        return
    size = tf.get_static_value(batch_size)
    try:
        count = int(dataset.cardinality())
    except Exception:
        count = -2
    if size is None or count < 0 or count % int(size):
        _dropping.append(user_site(3))


def _shuffle(original):
    def shuffle(self, *args, **kwargs):
        if _script_call():
            _saw("Dataset.shuffle", "turned off")
            site = user_site(2)
            if site not in _shuffled:
                _shuffled.append(site)
            return self
        return original(self, *args, **kwargs)

    return shuffle


@contextlib.contextmanager
def replica(strategy_context: Any, inputs: Any):
    """While a replica of a strategy runs a step: which one, of how many, on how large a batch
    (the leading dimension of its first input)."""
    if not _active or strategy_context is None:
        yield
        return
    count = strategy_context.num_replicas_in_sync
    # Python numbers wherever the trace knows them: a tensor of this graph, read by a nested
    # tf.function's draw, is captured by that function's trace, which a later trace of the step
    # (a partial last batch) reuses from a graph where it no longer exists ("out of scope").
    replica = strategy_context.replica_id_in_sync_group
    known = tf.get_static_value(replica)
    replica = replica if known is None else int(known)
    batch = None
    for value in tf.nest.flatten(inputs, expand_composites=True):
        if isinstance(value, tf.Tensor) and value.shape.rank:
            lead = value.shape[0]
            batch = int(lead) if lead is not None else tf.shape(value)[0]
            break
    previous = context.enter_replica(replica, batch, count)
    try:
        yield
    finally:
        context.leave_replica(previous)


def replica_id() -> int:
    """The replica running now (0 outside a strategy's replicas)."""
    info = context.replica_info()
    value = None if info is None or info[0] is None else tf.get_static_value(tf.convert_to_tensor(info[0]))
    return 0 if value is None else int(value)


def _wrap_filled(module: Any, name: str) -> None:
    """``tf.ones`` / ``tf.zeros`` in a step of a float64 run: float64 when no type is given."""
    original = getattr(module, name, None)
    if original is None or getattr(original, "_autofix_smoke_control", False):
        return

    def filled(shape, dtype=None, *args, **kwargs):
        if dtype is None and _floatx and _active and context.in_step():
            _saw(f"tf.{name}", f"made as {_floatx}")
            dtype = _floatx
        return original(shape, tf.float32 if dtype is None else dtype, *args, **kwargs)

    wrapped = functools.wraps(original)(filled)
    wrapped._autofix_smoke_control = True
    setattr(module, name, wrapped)


def _unscaled_batcher(x: Any) -> str | None:
    """What ``fit`` is fed when it is a Python-side batcher whose batch this harness cannot ask
    k x of (a generator, a ``PyDataset`` / ``Sequence`` of the script's own; an
    ``ImageDataGenerator.flow`` is scaled where it is made), else None."""
    if inspect.isgenerator(x):
        return "a Python generator"
    if getattr(x, "_autofix_smoke_scaled", False):
        return None
    names = {c.__name__ for c in type(x).__mro__}
    if names & {"PyDataset", "Sequence"}:
        return f"{type(x).__name__} (a keras.utils.PyDataset)"
    return None


def _saw(what: str, how: str | None = None) -> None:
    """Note once per script what was changed."""
    if what in _seen:
        return
    _seen[what] = 1
    if how is None:
        how = f"batch scaled {_scale}x"
    recorder.note(f"compare: {what} {how}")
