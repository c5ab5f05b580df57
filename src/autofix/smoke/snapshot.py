"""The steps a comparing run records, for ``--compare`` (child side).

For each of the first K training steps (``--steps``), taken when the step ends: the trainable
variables the optimizers update (their value before training, and after each step), the
gradient each update applied in the step (summed over the replicas, as the optimizer sums
them; in the reference run, the mean the virtual replicas' update applied), the optimizers'
own variables (slots, moments, the iteration count) and their learning rate; what the step
was fed, per replica (:mod:`autofix.smoke.feeds`); what the script sees of it (the loss its
step returns, ``fit``'s logs, every metric's result: :mod:`autofix.smoke.reported`); and the
noise layers it called and the draws that could not be held equal
(:mod:`autofix.smoke.noise`).

*A phase* is a run of K steps that trains (a ``fit``, a custom loop, ``train_on_batch``): a
script that trains a teacher and then distils a student has two. Once a phase's K steps are
recorded, nothing is recorded until the next training call of the script starts another
(:func:`begin`); the run ends once the script has no training call ahead
(:mod:`autofix.smoke.phases`), or at a training call whose phase was already recorded (a
``fit`` called again in a loop of epochs). Steps are numbered through the phases.

*A step ends* at the end of a ``fit`` batch, when a call of the script's step function
returns (its ``tf.function`` that calls ``strategy.run`` or applies gradients), or, in an
eager loop, before the next update of the call site that updated first (or at the end of the
run): a GAN step that updates two models is one step.

*Before training* is read where nothing has updated the variables yet: while a step function
(the script's, or ``fit``'s) is traced, outside the graph (a variable the trace itself makes
has no value yet: it is read by the step when it runs, before its update); before an eager
update; at the start of ``fit``'s first batch. Where the original's initial weights are given
(``initial``), variables made from the same Keras initializer that still hold other values
are set to the original's (:mod:`autofix.smoke.origins` says which may be: never weights the
script loads); the transplant is recorded and said.

The arrays go to an ``.npz`` file, rewritten at every step (``i<k>``: variable k before,
``w<k>_<s>``: after step s, ``g<k>_<s>``: its gradient in step s, ``n<k>``: its name,
``o<j>_<s>``: optimizer variable j after step s); the index goes into the records
(``recorder.trace``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autofix.smoke import context, controls, feeds, noise, origins, phases, reported
from autofix.smoke.state import StepLimitReached, recorder

_path: str | None = None
_initial_from: str | None = None
_steps = 1
_step = 0  # steps ended so far
_open = False  # an update was seen since the last step ended
_variables: list[Any] = []
_initial: dict[int, np.ndarray] = {}
_optimizers: list[Any] = []
_transplanted: dict[str, str] = {}
_matched: set[int] = set()
_pending: set[tuple[int, Any]] = set()
_gradients: dict[tuple[int, int, int], np.ndarray] = {}
_arrays: dict[str, np.ndarray] = {}
_learning_rates: dict[int, list[float | None]] = {}
_schedules: dict[int, Any] = {}
_clock: Any = None
_loaded: list[tuple[str, np.ndarray, dict]] | None = None
# The phases of training (each K steps): what started each, and its steps.
_phases: list[dict[str, Any]] = []
_phase_base = 0  # steps ended before the phase running now
_between = False  # the last phase's steps are recorded: nothing is recorded until the next begins
_stopped: str | None = None  # why the script stopped between phases (a crash after them)
_reduced_step = 0  # the last step an eager strategy.reduce reported


def start(path: str | None, initial_from: str | None = None, steps: int = 1) -> None:
    """Before each script: record its first ``steps`` steps into ``path`` (None: nothing)."""
    global _path, _initial_from, _steps, _step, _open, _clock, _loaded, _phase_base, _between, _stopped
    _path, _initial_from, _steps, _step, _open, _clock, _loaded = path, initial_from, max(1, steps), 0, False, None, None
    _phase_base, _between, _stopped, _reduced_step = 0, False, None, 0
    del _phases[:]
    for kept in (_variables, _optimizers):
        del kept[:]
    for kept in (_initial, _transplanted, _gradients, _arrays, _learning_rates, _schedules):
        kept.clear()
    _matched.clear()
    _pending.clear()
    feeds.start(path is not None)
    reported.start(path is not None)
    origins.start(path is not None)


def active() -> bool:
    """Still recording: a comparing run in a phase whose steps are not all recorded yet."""
    return _path is not None and not _between and _step - _phase_base < _steps


def recorded() -> bool:
    """Every step this comparing run compares has been recorded: the phase running has its
    steps, and the script has no training call ahead (the run may end)."""
    return _path is not None and (_between or _step - _phase_base >= _steps) and not phases.ahead()


def between() -> bool:
    """A phase's steps are recorded and the next phase has not begun (a crash now ends the run
    after what it recorded)."""
    return _path is not None and _between


def begin(kind: str, site: str) -> bool:
    """A training call (``kind`` at ``site``) is made: between phases, it starts the next one
    (True: a phase was started, which :func:`abandon` takes back if the call did not train);
    a site whose phase was already recorded ends the run."""
    global _between, _phase_base, _clock, _stopped
    if _path is None:
        return False
    phases.reached_here()
    if not _phases:
        _phases.append({"kind": kind, "site": site, "steps": 0})
        reported.phase_began()
        return True
    if not _between:
        return False
    if any(p["site"] == site for p in _phases):
        _stopped = f"called {kind} at {site} again: only its first call is compared"
        _save(_step)
        raise StepLimitReached(f"{kind} at {site} again: its phase is recorded")
    _phases.append({"kind": kind, "site": site, "steps": 0})
    _between, _phase_base, _clock = False, _step, None
    feeds.pause(False)
    reported.phase_began()
    return True


def abandon() -> None:
    """The call :func:`begin` started a phase for did not train (an evaluation step): no phase."""
    global _between
    if not _phases or _phases[-1]["steps"]:
        return
    _phases.pop()
    if _phases:
        _between = True
        feeds.forget(_step)
        feeds.pause(True)


def reduced(value: Any) -> None:
    """What an eager ``strategy.reduce`` made of the eager ``strategy.run`` step that has just
    ended (the step returns nothing the harness sees: this is what the script reports of it).
    Only the first reduce after the step counts; the step's record is then saved again."""
    global _reduced_step
    if _path is None or _step == 0 or _reduced_step == _step or _step - _phase_base > _steps:
        return
    _reduced_step = _step
    reported.returned(_step - 1, value)
    _save(_step)


def stop(reason: str) -> None:
    """The script stopped between phases (it crashed after its training): the run ends there."""
    global _stopped
    _stopped = reason
    if _step:
        _save(_step)


def step() -> int:
    """The step running now, from 0."""
    return context.step()


def applied(optimizer: Any, variables: list[Any] | None = None) -> None:
    """An optimizer updates ``variables`` in this step."""
    global _open
    if not active():
        return
    phases.reached_here()
    controls.training_began()
    _open = True
    if optimizer is not None and not any(optimizer is o for o in _optimizers):
        _optimizers.append(optimizer)
        _learning_rates[len(_optimizers) - 1] = [None] * _step + [_learning_rate(optimizer)]
        _schedules[len(_optimizers) - 1] = _schedule_probe(optimizer)
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
        index = _index(variable)
        if index not in _initial:
            value = _value(variable)
            if value is not None and (value.size or not _shape(variable) or 0 in _shape(variable)):
                _initial[index] = value
            else:
                _read_when_run(index, variable)


def _index(variable: Any) -> int:
    return next(i for i, v in enumerate(_variables) if v is variable)


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
    """The gradients an update applies in this step, per replica (an optimizer sums them over
    the replicas): read when the step runs, or now when it runs eagerly."""
    import tensorflow as tf

    if not active():
        return
    graph = id(tf.compat.v1.get_default_graph()) if tf.inside_function() else None
    for gradient, variable in pairs:
        if gradient is None or not any(variable is v for v in _variables):
            continue
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        index = _index(variable)
        if graph is None:
            key = (_step, replica, index)
            if key not in _gradients:
                _gradients[key] = np.array(gradient, copy=True)
            continue
        if (graph, replica, index) in _pending:
            continue

        def keep(value, replica=replica, index=index):
            key = (_step, replica, index)
            if key not in _gradients:
                _gradients[key] = np.array(value, copy=True)
            return np.int64(0)

        try:
            tf.numpy_function(keep, [gradient], tf.int64, stateful=True)
            _pending.add((graph, replica, index))
        except Exception:  # compared without its gradient
            pass


def transplant(variables: list[Any]) -> None:
    """Set ``variables`` (not yet updated by anything) to the original's initial values where
    seeds did not already give them and :mod:`autofix.smoke.origins` allows it (made by the same
    Keras initializer in both runs, loaded in neither): matched by name (else by the order the
    variables are first updated in), with the same shape. Called where the script's step has
    not read them yet: while its step function is traced, at the start of ``fit``."""
    if not active():
        return
    originals = _originals() if _initial_from is not None else None
    initial(variables)
    if originals is None:
        return
    names = [name for name, _, _ in originals]
    unique = len(set(names)) == len(names)
    for variable in variables:
        k = _index(variable)
        if k in _matched:
            continue
        _matched.add(k)
        name = _name(variable)
        j = names.index(name) if unique and name in names else (k if k < len(originals) else None)
        if j is None or tuple(originals[j][1].shape) != _shape(variable):
            continue
        if k in _initial and np.array_equal(_initial[k], originals[j][1]):
            continue
        if k not in _initial:
            continue
        refusal = origins.may_transplant(variable, originals[j][2])
        if refusal is not None:
            _transplanted[name] = f"not set: {refusal}"
            continue
        try:
            _assign(variable, originals[j][1])
        except Exception as exc:  # the script's variables are the script's: compared as they are
            _transplanted[name] = f"not set: {type(exc).__name__} setting it"
            continue
        _initial[k] = np.array(originals[j][1], copy=True)
        _transplanted[name] = "set to the original's initial value (both drawn by the same initializer, in another order)"


def _originals() -> list[tuple[str, np.ndarray, dict]] | None:
    global _loaded
    if _loaded is None:
        import json

        try:
            with np.load(_initial_from) as data:
                meta = json.loads(str(data["meta"])) if "meta" in data.files else {}
                _loaded = [
                    (str(data[f"n{k}"]), data[f"i{k}"], meta.get(str(k), {}))
                    for k in range(len(data.files))
                    if f"i{k}" in data.files and f"n{k}" in data.files
                ]
        except (OSError, ValueError, KeyError):
            _loaded = []
    return _loaded or None


def before_update(record: Any) -> None:
    """Before an eager update of ``record`` (a call site): the next update of the site that
    updated first means the step before it has ended."""
    global _clock
    if not active():
        return
    if _clock is None:
        _clock = record
    elif record is _clock and _open:
        end_step()


def end_step(ran: bool = False) -> None:
    """The step that ran has ended: record it (``ran``: a training step certainly ran, as a
    traced step function's call or a ``fit`` batch, whose updates were seen only when traced)."""
    global _step, _open
    global _between
    if not active() or not (_open or ran):
        return
    _step += 1
    _open = False
    if not _phases:
        _phases.append({"kind": "training", "site": "?", "steps": 0})
    _phases[-1]["steps"] += 1
    context.set_step(_step)
    _take(_step)
    noise.set_step(_step)
    if _step - _phase_base >= _steps:
        _between = True
        feeds.pause(True)


def finish() -> None:
    """At the end of the script (or of its last recorded step)."""
    if active() and _open:
        end_step()


def _take(step: int) -> None:
    for k, variable in enumerate(_variables):
        value = _value(variable)
        if value is None:
            continue
        _arrays[f"w{k}_{step}"] = value
        _arrays[f"n{k}"] = np.array(_name(variable))
        if k in _initial:
            _arrays[f"i{k}"] = _initial[k]
        parts = [g for (s, _, i), g in sorted(_gradients.items(), key=lambda item: item[0]) if i == k and s == step - 1]
        if parts and all(p.shape == value.shape for p in parts):
            _arrays[f"g{k}_{step}"] = np.sum(np.stack([p.astype(np.float64) for p in parts]), axis=0)
    seen: list[Any] = []
    for o, optimizer in enumerate(_optimizers):
        _learning_rates[o].append(_learning_rate(optimizer))
        for variable in _optimizer_variables(optimizer):
            if any(variable is v for v in seen):
                continue
            seen.append(variable)
            value = _value(variable)
            if value is not None:
                _arrays[f"o{len(seen) - 1}_{step}"] = value
    reported.step_ended(step)
    _save(step)


def _save(step: int) -> None:
    import json

    meta = {str(k): origins.of(v) for k, v in enumerate(_variables)}
    arrays = dict(_arrays, meta=np.array(json.dumps(meta)))
    try:
        np.savez(_path, **arrays)
    except OSError as exc:
        recorder.note(f"could not save the steps ({exc})")
        return
    index: list[dict[str, Any]] = []
    for k, variable in enumerate(_variables):
        entry = {"key": k, "kind": "weight", "name": _name(variable), "shape": list(_shape(variable)), "initial": k in _initial}
        entry["origin"] = meta[str(k)]
        entry["gradients"] = [s for s in range(1, step + 1) if f"g{k}_{s}" in _arrays]
        index.append(entry)
    seen: list[Any] = []
    for optimizer in _optimizers:
        for variable in _optimizer_variables(optimizer):
            if any(variable is v for v in seen):
                continue
            seen.append(variable)
            index.append({"key": len(seen) - 1, "kind": "optimizer", "name": f"{type(optimizer).__name__}/{_name(variable)}", "shape": list(_shape(variable))})
    recorder.trace = {
        "file": _path,
        "steps": step,
        "asked": _steps,
        "variables": index,
        "optimizers": [
            {"name": type(o).__name__, "config": _optimizer_config(o), "learning_rates": _learning_rates[n], "schedule": _schedules[n]}
            for n, o in enumerate(_optimizers)
        ],
        "transplanted": dict(_transplanted),
        "held": controls.held(),
        "pipeline": dict(controls.pipeline(), seeds=controls.seeds(), fits=controls.fits()),
        "feeds": feeds.recorded(),
        "reported": reported.recorded(),
        "noise_layers": noise.layers_seen(),
        "unheld": noise.unheld(),
        "loaded": origins.loads(),
        "inexact": context.inexact(),
        "done": context.done(),
        "phases": [dict(p) for p in _phases],
        "ahead": phases.ahead(),
        "stopped": _stopped,
    }
    recorder.publish()


# Where a learning-rate schedule is read, in steps of the run that reads it (the reference run
# reads its original's at N times these: one of its steps holds N of the original's batches).
PROBE = (0, 1, 2, 3, 5, 8, 10, 16, 20, 32, 50, 64, 100, 128, 200, 256, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 1000000)


def _schedule_probe(optimizer: Any) -> list[list[float]] | None:
    """The optimizer's learning-rate schedule read at the :data:`PROBE` steps (scaled by the
    virtual replicas of a reference run), when it has one."""
    schedule = _schedule_of(optimizer)
    if schedule is None:
        return None
    import tensorflow as tf

    scale = context.scale()
    inner = getattr(schedule, "_autofix_smoke_per_example", schedule)
    values = []
    with tf.init_scope():
        for step_number in PROBE:
            try:
                values.append([step_number, float(np.asarray(inner(step_number * scale)))])
            except Exception:
                return None
    return values


def _schedule_of(optimizer: Any) -> Any:
    for name in ("_learning_rate", "learning_rate"):
        value = getattr(optimizer, name, None)
        if value is not None and callable(value) and not hasattr(value, "numpy") and hasattr(value, "get_config"):
            return value
    hyper = getattr(optimizer, "_hyper", None)
    if isinstance(hyper, dict):
        value = hyper.get("learning_rate")
        if callable(value) and hasattr(value, "get_config"):
            return value
    return None


def _learning_rate(optimizer: Any) -> float | None:
    """The rate of the optimizer's next update."""
    import tensorflow as tf

    try:
        with tf.init_scope():
            getter = getattr(optimizer, "_get_current_learning_rate", None)
            if getter is not None:
                return float(np.asarray(getter()))
            value = getattr(optimizer, "learning_rate", None)
            if callable(value) and not hasattr(value, "numpy"):
                value = value(optimizer.iterations)
            return float(np.asarray(value))
    except Exception:
        return None


def _optimizer_config(optimizer: Any) -> dict[str, Any]:
    try:
        config = optimizer.get_config()
    except Exception:
        return {}
    kept = {}
    for key, value in config.items():
        if key in ("name",):
            continue
        if isinstance(value, (int, float, str, bool)) or value is None:
            kept[key] = value
        elif isinstance(value, dict):
            kept[key] = {"class_name": value.get("class_name"), "config": {k: v for k, v in (value.get("config") or {}).items() if isinstance(v, (int, float, str, bool, list))}}
    return kept


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
