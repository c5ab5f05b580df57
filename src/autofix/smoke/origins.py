"""Where each variable's initial value comes from, for ``--compare`` (child side).

A comparison starts both runs from the same weights only where that cannot hide a difference:
a variable is set to the original's initial value (see :func:`autofix.smoke.snapshot.transplant`)
only when both runs drew it from the same Keras initializer (same class and configuration):
then the two values differ only by the order the seeds were drawn in. Never when either run
loaded it or set it itself (``load_weights``, ``keras.models.load_model``,
``tf.train.Checkpoint.restore`` / ``read``, ``set_weights``): a migration that no longer loads
its pretrained weights, or loads other ones, then starts from other weights, and the
comparison says so.

Origins: ``{"kind": "initializer", "what": "GlorotUniform", "config": {...}}``, ``{"kind":
"loaded", "what": "load_weights at train.py:12"}``, ``{"kind": "value"}`` (made from a value:
a ``tf.Variable(tf.random.normal(...))``, whose origin cannot be told).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from autofix.smoke import context
from autofix.smoke.state import recorder, user_site

_active = False
# id(variable) -> (weak reference, origin)
_origins: dict[int, tuple[Any, dict[str, Any]]] = {}
_loads: list[str] = []


def start(active: bool) -> None:
    global _active
    _active = active
    _origins.clear()
    del _loads[:]


def install_keras(module: Any) -> None:
    if module.__name__ == "keras":
        try:
            from keras.src.backend.common import variables
        except ImportError:
            variables = None
        variable = getattr(variables, "Variable", None)
        if variable is not None:
            _wrap(variable, "__init__", _keras3_variable)
        for owner, name in ((module.models, "load_model"), (getattr(module, "saving", None), "load_model")):
            if owner is not None and hasattr(owner, name):
                setattr(owner, name, _loading_model(getattr(owner, name), name))
    else:
        layer = module.layers.Layer
        _wrap(layer, "add_weight", _tf_keras_weight)
        for owner in (module.models, getattr(module, "saving", None)):
            if owner is not None and hasattr(owner, "load_model"):
                owner.load_model = _loading_model(owner.load_model, "load_model")
    _wrap(module.Model, "load_weights", _loading("load_weights"))
    _wrap(module.layers.Layer, "set_weights", _loading("set_weights"))


def install() -> None:
    import tensorflow as tf

    checkpoint = tf.train.Checkpoint
    for name in ("restore", "read"):
        _wrap(checkpoint, name, _restoring(name))


def _wrap(cls: type, name: str, make) -> None:
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_autofix_smoke_origin", False):
        return
    wrapped = functools.wraps(original)(make(original))
    wrapped._autofix_smoke_origin = True
    setattr(cls, name, wrapped)


def _set(variable: Any, origin: dict[str, Any]) -> None:
    try:
        ref = weakref.ref(variable)
    except TypeError:
        ref = lambda: variable  # noqa: E731
    _origins[id(variable)] = (ref, origin)
    inner = getattr(variable, "_value", None)
    if inner is not None and inner is not variable:
        try:
            _origins[id(inner)] = (weakref.ref(inner), origin)
        except TypeError:
            pass


def of(variable: Any) -> dict[str, Any]:
    for candidate in (variable, getattr(variable, "_value", None)):
        if candidate is None:
            continue
        held = _origins.get(id(candidate))
        if held is not None and held[0]() is candidate:
            return held[1]
    return {"kind": "value"}


def loads() -> list[str]:
    """Where the script loaded or set weights (``load_weights at train.py:12``)."""
    return list(_loads)


def _initializer(initializer: Any) -> dict[str, Any] | None:
    if initializer is None or not callable(initializer) or isinstance(initializer, type):
        return None
    get_config = getattr(initializer, "get_config", None)
    config: dict[str, Any] = {}
    if get_config is not None:
        try:
            config = {k: v for k, v in get_config().items() if isinstance(v, (int, float, str, bool, type(None)))}
        except Exception:
            config = {}
    name = type(initializer).__name__ if not isinstance(initializer, functools.partial) else "partial"
    if name == "function":
        name = getattr(initializer, "__name__", "function")
    return {"kind": "initializer", "what": name, "config": config}


def _keras3_variable(original):
    def __init__(self, initializer=None, *args, **kwargs):
        with context.initializing():
            original(self, initializer, *args, **kwargs)
        if _active:
            origin = _initializer(initializer) if callable(initializer) else None
            _set(self, origin or {"kind": "value"})

    return __init__


def _tf_keras_weight(original):
    def add_weight(self, *args, **kwargs):
        with context.initializing():
            variable = original(self, *args, **kwargs)
        if _active and variable is not None:
            initializer = kwargs.get("initializer", args[3] if len(args) > 3 else None)
            try:
                from tf_keras import initializers

                initializer = initializers.get(initializer)
            except Exception:
                pass
            _set(variable, _initializer(initializer) or {"kind": "value"})
        return variable

    return add_weight


def _mark(variables: Any, what: str) -> None:
    site = user_site(3)
    label = f"{what} at {site}"
    if label not in _loads:
        _loads.append(label)
    for variable in variables or ():
        _set(variable, {"kind": "loaded", "what": label})


def _loading(what: str):
    def make(original):
        def load(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            if _active and recorder.keras_depth == 0:
                try:
                    _mark(list(self.weights), what)
                except Exception:
                    pass
            return result

        return load

    return make


def _loading_model(original, what: str):
    if getattr(original, "_autofix_smoke_origin", False):
        return original

    @functools.wraps(original)
    def load_model(*args, **kwargs):
        model = original(*args, **kwargs)
        if _active:
            try:
                _mark(list(model.weights), what)
            except Exception:
                pass
        return model

    load_model._autofix_smoke_origin = True
    return load_model


def _restoring(what: str):
    def make(original):
        def restore(self, *args, **kwargs):
            status = original(self, *args, **kwargs)
            if _active:
                try:
                    _mark(_checkpointed_variables(self), f"Checkpoint.{what}")
                except Exception:
                    pass
            return status

        return restore

    return make


def _checkpointed_variables(checkpoint: Any) -> list[Any]:
    """The variables of the Keras models and layers a checkpoint holds."""
    found: list[Any] = []
    for value in vars(checkpoint).values():
        weights = getattr(value, "weights", None)
        if weights is not None and not callable(weights):
            try:
                found.extend(list(weights))
            except Exception:
                continue
    return found


def may_transplant(variable: Any, original: dict[str, Any]) -> str | None:
    """None when ``variable`` may be set to the original's initial value; else why not."""
    mine = of(variable)
    if mine.get("kind") == "loaded" or original.get("kind") == "loaded":
        who = " and ".join(
            f"the {side} {origin['what']}" for side, origin in (("original:", original), ("migration:", mine)) if origin.get("kind") == "loaded"
        )
        return f"loaded ({who})"
    if mine.get("kind") != "initializer" or original.get("kind") != "initializer":
        return "not made by a Keras initializer in both runs: its value cannot be told to be a random draw"
    if (mine.get("what"), mine.get("config")) != (original.get("what"), original.get("config")):
        return f"initialized by {_shown(mine)} in the migration, by {_shown(original)} in the original"
    return None


def _shown(origin: dict[str, Any]) -> str:
    config = origin.get("config") or {}
    details = ", ".join(f"{k}={v}" for k, v in sorted(config.items()) if v is not None)
    return f"{origin.get('what')}({details})"
