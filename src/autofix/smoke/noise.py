"""Randomness held equal in the runs of a comparison (child side).

In a training step (``fit``'s, the script's step function, a replica's), every random draw
that Keras or TensorFlow makes is made statelessly, as one device would make it for the
global batch, the same in every run:

- the draws: ``tf.random.normal`` / ``uniform`` / ``truncated_normal``, and Keras's own
  ``normal``, ``uniform``, ``truncated_normal`` and ``dropout`` (Keras 3's backend, tf-keras's
  ``RandomGenerator``), so ``Dropout``, ``SpatialDropout*``, ``GaussianNoise``,
  ``GaussianDropout``, ``AlphaDropout``, RNN cells' dropout, augmentation layers that draw a
  value per example, and a custom layer drawing with ``keras.random`` and its own
  ``SeedGenerator`` are all active, with masks that do not depend on the device count;
- the seed of a draw is ``(SEED + k, step)``: its order ``k`` among the draws of the step (of
  the replica), and the step's number (:func:`set_step`), so every step draws anew. A traced
  step counts from the start of its graph, a virtual replica of the reference from the start
  of its call of the step (:func:`_key`): the same ``k`` for the same draw, whatever the
  script drew outside its steps before;
- NumPy's draws of those distributions (``np.random.normal``, ``uniform``, ``randn``, ``rand``,
  ``standard_normal``, ``random``), made eagerly in a step with a shape: drawn as the
  ``tf.random`` draw of the same order, parameters and shape (in float32, handed back as
  float64), which is what the migration writes in their place (``analysis/migration/host_draws.py``);
  a NumPy draw in a traced step, or without a shape, is not held;
- a draw whose first axis is the replica's batch, or a whole number of batches (the labels of
  ``concat([generated, real])``), takes on replica ``r`` of ``N`` its rows of the draw one
  device makes for the global batch: every example gets the mask one device gives it, on any
  number of replicas. Other draws are the same on every replica, as on one device.

Recorded for the comparison: every call of a noise layer in a step (its class, rate or
stddev, and the ``training`` it ran with: a step that runs Dropout as in inference, or with
another rate, is seen even where its masks would not show it), and each draw in a step that
is *not* held (``tf.random.shuffle``, ``categorical``, a ``tf.random.Generator``, Keras's
``shuffle``, ``randint``, ``categorical``, ``gamma``, ``binomial``, ``beta``, NumPy's global
generator's other draws): named, such a pair cannot be proven. The NumPy seed Keras 3's legacy backend draws
for a tf.random draw (``tf.keras.backend.random_normal``) is not drawn in a step: it would only
seed a draw that is held (:func:`_seeds_a_held_draw`).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np
import tensorflow as tf

from autofix.smoke import context
from autofix.smoke.state import recorder
from autofix.tf.numpy_draws import NUMPY_DRAWS

SEED = 1234
RANDOM = ("normal", "uniform", "truncated_normal")
STATELESS = {"normal": "stateless_normal", "uniform": "stateless_uniform", "truncated_normal": "stateless_truncated_normal"}
NOISE_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianDropout", "GaussianNoise", "AlphaDropout")
# Draws in a step that cannot be held equal.
UNHELD_TF = ("shuffle", "categorical", "poisson", "gamma")
UNHELD_KERAS = ("shuffle", "categorical", "randint", "gamma", "binomial", "beta")
UNHELD_NUMPY = ("randint", "choice", "shuffle", "permutation", "binomial")
# NumPy's draws of a distribution tf.random draws too (NUMPY_DRAWS, the table the migration
# rewrites them by) are held when drawn eagerly in a step with a shape: each is drawn as the
# tf.random draw of its order in the step is, in float32 then as NumPy's float64, so a step's
# ``.astype(np.float32)`` gets back the very numbers the migrated tf.random draw makes.

_active = False
_floatx: str | None = None
_step = 0
_step_variable: Any = None
# Draws made so far in each graph being traced (or, eagerly, in each step), per replica.
_occurrences: dict[tuple, int] = {}
# The noise layers' calls in steps, (class, config, training) (replica 0's), and the draws not held.
_layers: list[list[Any]] = []
_unheld: list[str] = []


def install() -> None:
    for name in RANDOM:
        _wrap_module(tf.random, name, _held(name, f"tf.random.{name}"))
    for name in UNHELD_TF:
        _wrap_module(tf.random, name, _not_held(f"tf.random.{name}"))
    generator = tf.random.Generator
    for name in ("normal", "uniform", "truncated_normal", "binomial", "uniform_full_int"):
        if hasattr(generator, name):
            _wrap_module(generator, name, _not_held(f"tf.random.Generator.{name}"))
    for name, how in NUMPY_DRAWS.items():
        _wrap_module(np.random, name, _held_numpy(how, f"np.random.{name}"))
    for name in UNHELD_NUMPY:
        _wrap_module(np.random, name, _not_held(f"np.random.{name}"))


def install_keras(module: Any) -> None:
    if module.__name__ == "keras":
        try:
            from keras.src import backend
        except ImportError:
            backend = None
        random_module = getattr(backend, "random", None)
        if random_module is not None:
            for name in RANDOM:
                _wrap_module(random_module, name, _held(name, f"keras.random.{name}"))
            _wrap_module(random_module, "dropout", _keras_dropout)
            for name in UNHELD_KERAS:
                _wrap_module(random_module, name, _not_held(f"keras.random.{name}"))
    else:
        generator = _tf_keras_generator(module)
        if generator is not None:
            _wrap_method(generator, "random_normal", _generator_draw("normal"))
            _wrap_method(generator, "random_uniform", _generator_draw("uniform"))
            _wrap_method(generator, "truncated_normal", _generator_draw("truncated_normal"))
            _wrap_method(generator, "dropout", _generator_dropout)
    layers = getattr(module, "layers", None)
    for name in NOISE_LAYERS:
        cls = getattr(layers, name, None)
        if cls is not None and "call" in cls.__dict__:
            _wrap_method(cls, "call", _recorded_layer)


def _tf_keras_generator(module: Any) -> Any:
    try:
        from tf_keras.src import backend
    except ImportError:
        return None
    return getattr(backend, "RandomGenerator", None)


def start(active: bool, floatx: str | None = None) -> None:
    """Before each script: hold draws equal (``active``), in ``floatx``."""
    global _active, _floatx, _step, _step_variable
    _active, _floatx, _step = active, (floatx if active else None), 0
    _occurrences.clear()
    del _layers[:]
    del _unheld[:]
    _step_variable = None
    if active:
        with tf.init_scope():
            _step_variable = tf.Variable(0, dtype=tf.int64, trainable=False, name="autofix_smoke_step")


def set_step(step: int) -> None:
    """The number of the step about to run (0 for the first)."""
    global _step
    _step = step
    if _step_variable is not None:
        with tf.init_scope():
            _step_variable.assign(step)


def layers_seen() -> list[list[Any]]:
    """Each distinct call of a noise layer in a step: [class, config, training]."""
    return [list(call) for call in _layers]


def unheld() -> list[str]:
    return list(_unheld)


def _wrap_module(owner: Any, name: str, make) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "_autofix_smoke_noise", False):
        return
    wrapped = functools.wraps(original)(make(original))
    wrapped._autofix_smoke_noise = True
    setattr(owner, name, wrapped)


def _wrap_method(cls: type, name: str, make) -> None:
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "_autofix_smoke_noise", False):
        return
    wrapped = functools.wraps(original)(make(original))
    wrapped._autofix_smoke_noise = True
    setattr(cls, name, wrapped)


def in_step() -> bool:
    return context.in_step()


def holding(caller: Any = None) -> bool:
    """Whether a draw is held: made in a step, not for a variable's initial value. ``caller``:
    the frame of the code that will make the draw (default: the one calling the draw's wrapper)."""
    return _active and context.in_step() and not context.is_initializing() and not _from_initializer(caller)


def _from_initializer(caller: Any = None) -> bool:
    """The draw is a Keras initializer's (a variable's value, made or read before it is): not
    a step's randomness. Keras 3 makes a variable of a layer built symbolically (its output
    shapes) later, drawing its value then, possibly inside a step."""
    # the draw's wrapper and the 5 frames above it
    frame = sys._getframe(2) if caller is None else caller
    for _ in range(6 if caller is None else 5):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if "/initializers/" in name or name.endswith("/variables.py"):
            return True
        frame = frame.f_back
    return False


def replica_info() -> tuple[Any, Any, int] | None:
    return context.replica_info()


def _key() -> tuple:
    info = replica_info()
    replica = None if info is None else tf.get_static_value(tf.convert_to_tensor(info[0]))
    replica = None if replica is None else int(replica)
    if tf.inside_function():
        return (id(tf.compat.v1.get_default_graph()), replica, None)
    virtual = context.virtual()
    if virtual is not None:
        # A virtual replica counts its draws from the start of its call of the step, as a traced
        # step counts them from the start of its graph (each replica of the migration, and the
        # original's step): not after the draws the script's own thread made before the call
        # (noise for a preview of a test batch drawn before training), nor after those of an
        # earlier call in the same step (a tf.function given a batch to predict).
        return (("virtual", getattr(virtual, "call", None)), replica, None)
    return (None, replica, _step)


def _seed() -> Any:
    """The next draw's stateless seed: (SEED + its order in the step, the step's number)."""
    key = _key()
    number = _occurrences[key] = _occurrences.get(key, 0) + 1
    if tf.inside_function() and _step_variable is not None:
        step = tf.cast(_step_variable.read_value(), tf.int64)
    else:
        step = tf.constant(_step, tf.int64)
    return tf.stack([tf.constant(SEED + number, tf.int64), step])


def _held(name: str, shown: str):
    def make(original):
        def draw(shape, *args, **kwargs):
            if not holding():
                return original(shape, *args, **kwargs)
            params = _params(name, args, kwargs)
            _noted(f"{shown} in a step", "drawn as one device draws it for the global batch")
            return aligned(name, shape, params)

        return draw

    return make


def _params(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    names = ("minval", "maxval", "dtype") if name == "uniform" else ("mean", "stddev", "dtype")
    params = dict(zip(names, args))
    params.update((k, v) for k, v in kwargs.items() if k in ("minval", "maxval", "mean", "stddev", "dtype"))
    if params.get("dtype") is None:
        params["dtype"] = _floatx or tf.float32
    return params


def aligned(name: str, shape: Any, params: dict[str, Any]) -> Any:
    """A stateless draw of ``shape``: on a replica of several, whose draw's first axis is its
    batch (or k times it), its examples' rows of the draw one device makes for the global
    batch (of each of the k blocks)."""
    stateless = getattr(tf.random, STATELESS[name])
    seed = _seed()
    shape = tf.convert_to_tensor(shape, dtype=tf.int32)
    info = replica_info()
    if info is None or info[1] is None or info[2] == 1 or shape.shape.rank != 1 or shape.shape[0] == 0:
        return stateless(shape, seed=seed, **params)
    replica_id, batch, count = info
    lead = shape[0]
    batch = tf.cast(batch, tf.int32)

    def rows():
        blocks = lead // batch
        whole = stateless(tf.concat([[lead * count], shape[1:]], 0), seed=seed, **params)
        whole = tf.reshape(whole, tf.concat([[blocks, count, batch], shape[1:]], 0))
        return tf.gather(whole, tf.cast(replica_id, tf.int32), axis=1)

    fits = tf.logical_and(tf.greater(batch, 0), tf.logical_and(tf.greater_equal(lead, batch), tf.equal(lead % tf.maximum(batch, 1), 0)))
    return tf.reshape(tf.cond(fits, rows, lambda: stateless(shape, seed=seed, **params)), shape)


def held_dropout(inputs: Any, rate: Any, noise_shape: Any = None) -> Any:
    """Dropout with a mask drawn by :func:`aligned` (kept where a uniform draw is at least
    ``rate``, scaled by ``1 / (1 - rate)``, as Keras and TensorFlow do)."""
    x = tf.convert_to_tensor(inputs)
    rate_value = tf.get_static_value(tf.convert_to_tensor(rate))
    if rate_value is not None and float(rate_value) == 0.0:
        return x
    if rate_value is not None and float(rate_value) >= 1.0:
        return tf.zeros_like(x)
    dynamic = tf.shape(x)
    if noise_shape is None:
        shape = dynamic
    else:
        shape = tf.stack([dynamic[i] if d is None else tf.cast(d, tf.int32) for i, d in enumerate(noise_shape)])
    uniform = aligned("uniform", shape, {"dtype": x.dtype if x.dtype.is_floating else tf.float32})
    keep = uniform >= tf.cast(rate, uniform.dtype)
    scale = tf.cast(1.0, x.dtype) / (tf.cast(1.0, x.dtype) - tf.cast(rate, x.dtype))
    return tf.where(keep, x * scale, tf.zeros_like(x))


def _keras_dropout(original):
    def dropout(inputs, rate, noise_shape=None, seed=None):
        if not holding():
            return original(inputs, rate, noise_shape=noise_shape, seed=seed)
        _noted("Keras dropout in a step", "masks drawn as one device draws them for the global batch")
        return held_dropout(inputs, rate, noise_shape)

    return dropout


def _generator_draw(name: str):
    def make(original):
        def draw(self, shape, *args, **kwargs):
            if not holding():
                return original(self, shape, *args, **kwargs)
            kwargs.pop("nonce", None)
            params = _params(name, args[:3], kwargs)
            _noted(f"tf_keras {name} draw in a step", "drawn as one device draws it for the global batch")
            return aligned(name, shape, params)

        return draw

    return make


def _generator_dropout(original):
    def dropout(self, inputs, rate, noise_shape=None):
        if not holding():
            return original(self, inputs, rate, noise_shape=noise_shape)
        _noted("tf_keras dropout in a step", "masks drawn as one device draws them for the global batch")
        return held_dropout(inputs, rate, noise_shape)

    return dropout


# Keras 3's legacy backend (``tf.keras.backend.random_normal`` and its kin) draws the seed of a
# tf.random draw from NumPy's global generator, ``np.random.randint``, and uses it only as that
# draw's ``seed=`` (keras/src/legacy/backend.py): (its function, the tf.random draw it seeds).
SEEDING = {"random_normal": "normal", "random_uniform": "uniform", "truncated_normal": "truncated_normal", "random_bernoulli": "uniform"}


def _seeds_a_held_draw(shown: str) -> str | None:
    """The Keras legacy function whose ``np.random.randint`` this is, when it only seeds a draw
    that is held (made statelessly, its ``seed=`` unread): the seed is then not drawn at all."""
    if shown != "np.random.randint":
        return None
    frame = sys._getframe(2)  # the caller of the wrapped np.random.randint
    code = frame.f_code
    if code.co_name not in SEEDING or not code.co_filename.replace("\\", "/").endswith("/keras/src/legacy/backend.py"):
        return None
    # held as the draw it seeds will be: that draw is made by this same frame
    return code.co_name if _only_seeds(code) and holding(frame) else None


_checked: dict[Any, bool] = {}


def _only_seeds(code: Any) -> bool:
    """Whether the Keras function reads its NumPy seed only as the ``seed=`` of its tf.random
    draw, as Keras 3.15's do: its source says ``seed`` in its signature, ``if seed is None:``,
    ``seed = np.random.randint(...)`` and ``seed=seed`` of ``tf.random.<draw>(`` only."""
    if code not in _checked:
        import inspect
        import re

        try:
            source = inspect.getsource(code)
        except (OSError, TypeError):
            source = ""
        body = source.split('"""DEPRECATED."""', 1)[-1]
        _checked[code] = (
            source.count("seed=None") == 1
            and len(re.findall(r"\bseed\b", body)) == 4
            and body.count("if seed is None:") == 1
            and body.count("seed = np.random.randint(") == 1
            and body.count("seed=seed") == 1
            and f"tf.random.{SEEDING[code.co_name]}(" in body
        )
    return _checked[code]


def _not_held(shown: str):
    def make(original):
        def draw(*args, **kwargs):
            seeding = _seeds_a_held_draw(shown)
            if seeding is not None:
                # Not drawn: the value would only seed a draw made statelessly, and NumPy's global
                # generator stays where it is, however many times each run traces its step.
                _noted(f"the seed Keras's legacy {seeding} draws with np.random.randint in a step", "is not drawn (the draw it seeds is held)")
                return 0
            # In the step itself: the data pipeline's own draws show in what the replicas are fed.
            if _active and context.in_training_step() and shown not in _unheld:
                _unheld.append(shown)
            return original(*args, **kwargs)

        return draw

    return make


def _held_numpy(how: tuple[str, tuple[tuple[str, str], ...], bool], shown: str):
    draw, names, separate = how
    unheld = _not_held(shown)

    def make(original):
        fallback = unheld(original)

        def drawn(*args, **kwargs):
            if not holding(sys._getframe(1)) or tf.inside_function():
                return fallback(*args, **kwargs)
            shape: Any = None
            params: dict[str, Any] = {}
            if separate:
                shape = list(args) if args and not kwargs else None
            elif len(args) <= len(names) + 1:
                given = dict(zip([n for n, _ in names] + ["size"], args))
                given.update(kwargs)
                shape = given.pop("size", None)
                params = {tf_name: given.pop(numpy_name) for numpy_name, tf_name in names if numpy_name in given}
                if given:
                    shape = None
            if isinstance(shape, (int, np.integer)):
                shape = [shape]
            if not isinstance(shape, (list, tuple)) or not shape or not all(isinstance(d, (int, np.integer)) for d in shape):
                return fallback(*args, **kwargs)
            params["dtype"] = _floatx or tf.float32
            _noted(f"{shown} in a step", "drawn as one device draws the same tf.random draw for the global batch")
            return np.asarray(aligned(draw, [int(d) for d in shape], params).numpy(), dtype=np.float64)

        return drawn

    return make


def _recorded_layer(original):
    def call(self, inputs, *args, **kwargs):
        # A model built symbolically (Keras traces it to know its outputs) runs no step.
        if _active and context.in_training_step() and "KerasTensor" not in type(inputs).__name__:
            _record_layer(self, args, kwargs)
        return original(self, inputs, *args, **kwargs)

    return call


def _record_layer(layer: Any, args: tuple, kwargs: dict) -> None:
    info = replica_info()
    replica = None if info is None else tf.get_static_value(tf.convert_to_tensor(info[0]))
    if replica not in (None, 0):
        return
    training = kwargs.get("training", args[0] if args else None)
    if isinstance(training, (tf.Tensor, tf.Variable)):
        value = tf.get_static_value(training)
        training = "dynamic" if value is None else bool(value)
    elif training is not None:
        training = bool(training)
    config = {k: _plain(getattr(layer, k)) for k in ("rate", "stddev", "noise_shape") if getattr(layer, k, None) is not None}
    # A traced step records its calls once, an eager one at every step: what is compared is
    # which calls were made, not how often.
    record = [type(layer).__name__, config, training]
    if record not in _layers:
        _layers.append(record)


def _plain(value: Any) -> Any:
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)


_seen: dict[str, int] = {}


def _noted(what: str, how: str) -> None:
    if what in _seen:
        return
    _seen[what] = 1
    recorder.note(f"compare: {what} {how}")


def forget_notes() -> None:
    _seen.clear()
