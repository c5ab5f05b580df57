"""The first update, for ``--compare`` (child side): the trainable variables an optimizer
updates, before training and after the first step, and the optimizers' own variables after it.

*After the first step* is the state just before anything trains a second step: before the
second call of a step function, the second eager update of one call site, the second eager
``strategy.run``; after the first batch of ``fit``; or at the end of the run. So a GAN step
that updates two models counts as one step, and two step functions called in turn (one per
model) both make their first step before the state is taken.

*Before training* is read where nothing has updated the variables yet: while a step function
(the script's, or ``fit``'s) is traced, outside the graph (a variable the trace itself makes
has no value yet: it is read by the step when it runs, before its update); before an eager
update; at the start of ``fit``'s first batch. With ``initial`` (the original's snapshot),
variables that do not already hold the original's initial values are set to them where the
step has not read them yet (while it is traced, at the start of ``fit``): matched by name, else
in the order they are first updated, with the same shape. An eager loop has already run its
forward pass when it applies, so there only the seeds make the start equal.

The gradients of the first step are kept too, summed over the replicas as the optimizer sums
them: a per-replica loss that is not averaged over the global batch shows there directly.

The arrays go to an ``.npz`` file (``w<k>``: variable k after, ``i<k>``: before, ``g<k>``: its
gradient, ``n<k>``: its name, ``o<k>``: optimizer variable k after); the index (names, shapes)
goes into the records.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from autofix.smoke import controls
from autofix.smoke.state import recorder

_path: str | None = None
_initial_from: str | None = None
_variables: list[Any] = []
_initial: dict[int, np.ndarray] = {}
_optimizers: list[Any] = []
_taken = False
_transplanted: set[str] = set()
_matched: set[int] = set()
_pending: set[tuple[int, Any]] = set()
_gradients: dict[tuple[int, int], np.ndarray] = {}
_loaded: list[tuple[str, np.ndarray]] | None = None


def start(path: str | None, initial_from: str | None = None) -> None:
    """Before each script: record its first update into ``path`` (None: record nothing)."""
    global _path, _initial_from, _taken, _loaded
    _path, _initial_from, _taken, _loaded = path, initial_from, False, None
    _variables.clear()
    _initial.clear()
    _optimizers.clear()
    _transplanted.clear()
    _matched.clear()
    _pending.clear()
    _gradients.clear()


def active() -> bool:
    return _path is not None and not _taken


def recorded() -> bool:
    """Whether this script's first update has been recorded (comparing runs only)."""
    return _path is not None and _taken


def applied(optimizer: Any, variables: list[Any] | None = None) -> None:
    """An optimizer updates ``variables`` in the first step."""
    if not active():
        return
    if optimizer is not None and not any(optimizer is o for o in _optimizers):
        _optimizers.append(optimizer)
    for variable in variables or ():
        if not any(variable is v for v in _variables):
            _variables.append(variable)


def initial(variables: list[Any]) -> None:
    """Read the values of ``variables`` not read yet: they have not been updated. Also while a
    step function is traced (the values are read outside the graph, as they are now)."""
    if not active():
        return
    for variable in variables:
        if not any(variable is v for v in _variables):
            _variables.append(variable)
        index = next(i for i, v in enumerate(_variables) if v is variable)
        if index not in _initial:
            value = _value(variable)
            if value is not None and (value.size or not _shape(variable) or 0 in _shape(variable)):
                _initial[index] = value
            else:
                _read_when_run(index, variable)


def _read_when_run(index: int, variable: Any) -> None:
    """A variable made while its step is traced holds no value until the step runs: read it in
    the step, before the update that follows (the step's reads and writes of a variable run in
    the order they were traced)."""
    import tensorflow as tf

    # A step is traced more than once (first to make its variables): each trace reads.
    graph = id(tf.compat.v1.get_default_graph())
    if not tf.inside_function() or (graph, index) in _pending:
        return

    def keep(value):
        if index not in _initial:
            _initial[index] = np.array(value, copy=True)
        return np.int64(0)

    try:
        tf.numpy_function(keep, [tf.convert_to_tensor(variable)], tf.int64, stateful=True)
        _pending.add((graph, index))
    except Exception:  # the comparison says the initial weights were not seen
        pass


def gradients(pairs: list[tuple[Any, Any]], replica: int) -> None:
    """The gradients the first step applies, per replica (an optimizer sums them over the
    replicas): read when the step runs, or now when it runs eagerly."""
    import tensorflow as tf

    if not active():
        return
    graph = id(tf.compat.v1.get_default_graph()) if tf.inside_function() else None
    for gradient, variable in pairs:
        if gradient is None or isinstance(gradient, tf.IndexedSlices) or not any(variable is v for v in _variables):
            continue
        index = next(i for i, v in enumerate(_variables) if v is variable)
        key = (replica, index)
        if graph is None:
            if key not in _gradients:
                _gradients[key] = np.array(gradient, copy=True)
            continue
        if (graph, key) in _pending:
            continue

        def keep(value, key=key):
            if key not in _gradients:
                _gradients[key] = np.array(value, copy=True)
            return np.int64(0)

        try:
            tf.numpy_function(keep, [gradient], tf.int64, stateful=True)
            _pending.add((graph, key))
        except Exception:  # compared without its gradient
            pass


def transplant(variables: list[Any]) -> None:
    """Set ``variables`` (not yet updated by anything) to the original's initial values where
    seeds did not already give them: each matched by name (else by the order the variables are
    first updated in), with the same shape. Called where the script's step has not read them yet:
    while its step function is traced, at the start of ``fit``."""
    if not active():
        return
    originals = _originals() if _initial_from is not None else None
    if originals is None:
        initial(variables)
        return
    names = [name for name, _ in originals]
    unique = len(set(names)) == len(names)
    initial(variables)
    for variable in variables:
        k = next(i for i, v in enumerate(_variables) if v is variable)
        if k in _matched:
            continue
        _matched.add(k)
        name = _name(variable)
        j = names.index(name) if unique and name in names else (k if k < len(originals) else None)
        if j is None or tuple(originals[j][1].shape) != _shape(variable):
            _transplanted.add(f"no: {name} has no variable of its shape in the original")
            continue
        if k in _initial and np.array_equal(_initial[k], originals[j][1]):
            _transplanted.add("not needed: the same initial weights")
            continue
        try:
            _assign(variable, originals[j][1])
        except Exception as exc:  # the script's variables are the script's: compared as they are
            _transplanted.add(f"no: {type(exc).__name__} setting {name}")
            continue
        _initial[k] = _value(variable)
        _transplanted.add("yes: set to the original's initial weights")


def _originals() -> list[tuple[str, np.ndarray]] | None:
    global _loaded
    if _loaded is None:
        try:
            with np.load(_initial_from) as data:
                _loaded = [(str(data[f"n{k}"]), data[f"i{k}"]) for k in range(len(data.files)) if f"i{k}" in data and f"n{k}" in data]
        except (OSError, ValueError, KeyError):
            _loaded = []
    return _loaded or None


def match(names: list[str], other_names: list[str], shapes: list[tuple], other_shapes: list[tuple]) -> list[tuple[int, int]] | None:
    """Pairs (index, other index) of the same variables: by name when the names are unique and
    the same on both sides, else in order; None when the counts or the shapes differ."""
    if len(names) != len(other_names):
        return None
    if len(set(names)) == len(names) and set(names) == set(other_names):
        where = {name: j for j, name in enumerate(other_names)}
        pairs = [(k, where[name]) for k, name in enumerate(names)]
    else:
        pairs = list(zip(range(len(names)), range(len(other_names))))
    if any(tuple(shapes[k]) != tuple(other_shapes[j]) for k, j in pairs):
        return None
    return pairs


def before_step(record: Any) -> None:
    """Before a step of ``record``: its second one means the first step is over."""
    if active() and getattr(record, "steps", 0) >= 1:
        take()


def finish() -> None:
    """At the end of the script (or of its last recorded step)."""
    if active() and _variables:
        take()


def take() -> None:
    global _taken
    if not active():
        return
    _taken = True
    arrays: dict[str, np.ndarray] = {}
    index: list[dict[str, Any]] = []
    for k, variable in enumerate(_variables):
        value = _value(variable)
        if value is None:
            continue
        arrays[f"w{k}"] = value
        arrays[f"n{k}"] = np.array(_name(variable))
        if k in _initial:
            arrays[f"i{k}"] = _initial[k]
        parts = [g for (replica, i), g in sorted(_gradients.items(), key=lambda item: item[0]) if i == k]
        if parts and all(p.shape == value.shape for p in parts):
            arrays[f"g{k}"] = np.sum(np.stack([p.astype(np.float64) for p in parts]), axis=0)
        entry = {"key": f"w{k}", "kind": "weight", "name": _name(variable), "shape": list(value.shape), "initial": k in _initial}
        index.append(dict(entry, gradient=f"g{k}" in arrays, replicas=len(parts)))
    seen: list[Any] = []
    for optimizer in _optimizers:
        for variable in _optimizer_variables(optimizer):
            if any(variable is v for v in seen):
                continue
            seen.append(variable)
            value = _value(variable)
            if value is None:
                continue
            key = f"o{len(seen) - 1}"
            arrays[key] = value
            index.append({"key": key, "kind": "optimizer", "name": f"{type(optimizer).__name__}/{_name(variable)}", "shape": list(value.shape)})
    try:
        np.savez(_path, **arrays)
    except OSError as exc:
        recorder.note(f"could not save the first update ({exc})")
        return
    recorder.first_update = {
        "file": _path,
        "variables": index,
        "optimizers": [type(o).__name__ for o in _optimizers],
        "transplanted": _transplant_summary(),
        "held": controls.held(),
    }


def _transplant_summary() -> str | None:
    """The worst of what happened to the variables: not done, done, not needed."""
    for start in ("no:", "yes:", "not needed:"):
        found = sorted(t for t in _transplanted if t.startswith(start))
        if found:
            return found[0]
    return None


def _tf_variables(variable: Any) -> list[Any]:
    """The TensorFlow variables behind a Keras 3 variable (``_value``) or a tf.Variable: one per
    replica for a mirrored one."""
    import tensorflow as tf

    inner = getattr(variable, "_value", variable)
    if isinstance(inner, tf.distribute.DistributedValues):
        return list(inner.values)
    return [inner]


def _value(variable: Any) -> np.ndarray | None:
    """The value now (the first replica's), read outside any graph being traced."""
    import tensorflow as tf

    try:
        with tf.init_scope():
            return np.array(_tf_variables(variable)[0].numpy(), copy=True)
    except Exception:
        return None


def _assign(variable: Any, value: np.ndarray) -> None:
    import tensorflow as tf

    with tf.init_scope():
        for component in _tf_variables(variable):
            component.assign(value.astype(component.dtype.as_numpy_dtype))


def _shape(variable: Any) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in variable.shape)
    except (TypeError, ValueError):
        return ()


def _name(variable: Any) -> str:
    return str(getattr(variable, "path", None) or getattr(variable, "name", "?"))


def _optimizer_variables(optimizer: Any) -> list[Any]:
    variables = getattr(optimizer, "variables", [])
    try:
        return list(variables() if callable(variables) else variables)
    except Exception:
        return []
