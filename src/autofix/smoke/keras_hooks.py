"""Hooks on Keras (3, or 2 as tf-keras) that cap and record training (child side).

``fit`` runs one epoch of at most ``steps`` steps (validation: one step) and records, per call:
the strategy and replica count, whether every model and optimizer variable is mirrored, the
losses, the first global batch and the script's own arguments. ``train_on_batch`` is recorded
the same way and ends the script after ``steps`` calls; ``evaluate`` is capped to ``steps``
steps; ``predict`` is left whole because scripts compare its output with their labels.

The hooks are installed on whichever of ``keras`` and ``tf_keras`` the script imports.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any

import tensorflow as tf

from autofix.smoke import accumulate, context, controls, feeds, multiworker, replicas, reported, snapshot, updates
from autofix.smoke.state import (
    FitRec,
    StepLimitReached,
    describe_exception,
    recorder,
    scalar,
    user_site,
)

USER_FIT_ARGS = ("epochs", "steps_per_epoch", "batch_size", "validation_steps")
MAX_NAMES = 10


def install(module: Any) -> None:
    if getattr(module, "_autofix_smoke_patched", False):
        return
    module._autofix_smoke_patched = True
    version = f"{module.__name__} {getattr(module, '__version__', '?')}"
    model = module.Model
    callback = _callback_class(module)
    _wrap(model, "fit", lambda original: _fit(original, callback, version, module.__name__))
    _wrap(model, "train_on_batch", lambda original: _train_on_batch(original, version))
    _wrap(model, "evaluate", lambda original: _evaluate(original, module.__name__))
    _wrap(model, "predict", _keras_owned)
    _wrap(model, "compile", _compile)
    optimizers = [module.optimizers.Optimizer]
    legacy = getattr(getattr(module.optimizers, "legacy", None), "Optimizer", None)
    if legacy is not None and legacy not in optimizers:
        optimizers.append(legacy)
    for cls in optimizers:
        _wrap(cls, "__init__", _optimizer_init)
        updates.install_optimizer(cls)
    if module.__name__ == "keras" and not str(getattr(module, "__version__", "3")).startswith("2."):
        _wrap(module.Sequential, "build", _sequential_build)


def _sequential_build(original):
    """Keras 3: a Sequential model built inside the script's ``strategy.run`` in a
    ``tf.function`` (made without its input's shape, first called by the distributed step).
    Measured (TF 2.21, Keras 3, MirroredStrategy on 2 logical CPUs): run as written, such a
    script fails on its first step ("You must feed a value for placeholder tensor", or an
    AddN of mismatched shapes for a masked SimpleRNN), whatever its initializers, while the
    harness's own hooks let it run; a subclassed model whose layers build there runs, and so
    does tf_keras. So it is recorded on the run, and its check fails. A build the step makes
    under ``tf.init_scope()`` (what ``migrate`` writes: eagerly, when the step is traced) is
    not one: measured, so built, a Dense Sequential and a masked SimpleRNN train with the
    default all-reduce (``fixtures/smoke/sequential_built_when_traced.py``)."""

    def build(self, *args, **kwargs):
        run = recorder.current_run
        if (
            run is not None
            and recorder.keras_depth == 0
            and tf.inside_function()
            and not tf.executing_eagerly()
            and tf.distribute.has_strategy()
            and not tf.distribute.in_cross_replica_context()
        ):
            name = f"{type(self).__name__} {getattr(self, 'name', '')}".strip()
            if name not in run.built:
                run.built.append(name)
        return original(self, *args, **kwargs)

    return build


def _wrap(cls: type, name: str, make) -> None:
    original = getattr(cls, name)
    setattr(cls, name, functools.wraps(original)(make(original)))


class _Keras:
    """Marks Keras' own calls: strategy.run and tf.function calls inside are not the script's."""

    def __enter__(self):
        recorder.keras_depth += 1

    def __exit__(self, *exc):
        recorder.keras_depth -= 1


def _keras_owned(original):
    def call(self, *args, **kwargs):
        with _Keras():
            return original(self, *args, **kwargs)

    return call


def _callback_class(module: Any) -> type:
    class Record(module.callbacks.Callback):
        def __init__(self, record: FitRec) -> None:
            super().__init__()
            self.record = record

        def on_train_batch_begin(self, batch, logs=None):
            if snapshot.active() and self.record.steps == 0:
                model = self.model
                # The optimizers are those that apply gradients in the step (the hooks on
                # apply_gradients and apply say which): a train_step of its own may leave the
                # one compile made unused, and Keras builds it only under a strategy.
                snapshot.applied(None, list(model.trainable_weights))
                snapshot.transplant(list(model.trainable_weights))

        def on_train_batch_end(self, batch, logs=None):
            self.record.steps += 1
            loss = scalar((logs or {}).get("loss"))
            if loss is not None:
                self.record.losses.append(loss)
            micro = accumulate.count()
            if snapshot.active() and (not micro or self.record.steps % micro == 0):
                reported.logged(snapshot.step(), logs)
                if not micro:
                    snapshot.end_step(ran=True)
            recorder.publish()
            if snapshot.recorded():
                # A comparing run ends once its steps are recorded: the script's own callbacks
                # at the epoch's end (images saved with Pillow, checkpoints) play no part in it.
                raise StepLimitReached("the steps compared are recorded")

    return Record


KERAS_DEFAULT_BATCH = 32


def _array_like(x) -> bool:
    """Arrays and tensors (and lists, dicts or tuples of them), not datasets or generators."""
    if x is None or hasattr(x, "element_spec"):
        return False
    if isinstance(x, dict):
        return all(_array_like(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return bool(x) and all(_array_like(v) or isinstance(v, (int, float)) for v in x)
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _fit(original, callback: type, version: str, package: str):
    signature = inspect.signature(original)

    def fit(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        given = bound.arguments
        defaults = {k: p.default for k, p in signature.parameters.items()}
        user = {k: given.get(k, defaults.get(k)) for k in USER_FIT_ARGS}
        steps = recorder.steps
        if user["steps_per_epoch"]:
            steps = min(steps, int(user["steps_per_epoch"]))
        # The reference run's micro-steps: N of the original's batches a step.
        steps *= max(1, accumulate.count())
        if user["batch_size"] is None and _array_like(given.get("x")):
            # Keras batches arrays by 32 when not told; given steps_per_epoch alone it would
            # instead split the arrays into that many batches, so capping would change the batch.
            given["batch_size"] = KERAS_DEFAULT_BATCH
        controls.fit_arguments(given, _array_like(given.get("x")))
        given.update(epochs=1, initial_epoch=0, steps_per_epoch=steps)
        validates = given.get("validation_data") is not None or given.get("validation_split")
        if validates:
            given["validation_steps"] = 1
        capped = {"epochs": 1, "steps_per_epoch": steps, "validation_steps": 1 if validates else None}
        site = user_site()
        # Another phase of training, when the one before has its steps (a student distilled
        # after its teacher's fit); a fit whose phase is recorded ends the run here, unrecorded.
        snapshot.begin("fit", site)
        record = FitRec("fit", site, _plain(user), capped, keras=version)
        recorder.fits.append(record)
        given["callbacks"] = _with_callback(given.get("callbacks"), callback(record))
        recorder.current_fit = record
        try:
            with _Keras(), _stepping(self):
                result = original(*bound.args, **bound.kwargs)
        except StepLimitReached:
            raise
        except BaseException as exc:
            record.error = describe_exception(exc)
            _finish(record, self)
            record.cause = _known_failure(package, self, exc) or record.cause
            # Without any strategy the crash is not about distribution: it speaks for itself.
            _failed("fit", record.cause if recorder.strategies else None)
            raise
        finally:
            recorder.current_fit = None
            if record.error is None:
                _finish(record, self)
            recorder.publish()
        if snapshot.recorded():
            # A comparing run needs its steps only: what the script does after the fit that
            # made them (plots, 900 predict calls) plays no part, and may take long on N
            # replicas.
            raise StepLimitReached("the steps compared are recorded")
        held = accumulate.incomplete()
        if held:
            # The reference as micro-steps, at the end of fit's epoch: its last batches make
            # fewer than N micro-steps, the last global batch one that does not split evenly
            # over the replicas, which a step of the script's own may reduce either way (the
            # mean of each replica's share, or of the global batch): not computed, said.
            snapshot.stop(
                f"fit at {site} ends its epoch within a step of {accumulate.count()} of the original's batches: its last global "
                f"batch does not split evenly over the replicas, and the script's own train_step may average it either way"
            )
            raise StepLimitReached("the steps that can be compared are recorded")
        return result

    return fit


@contextlib.contextmanager
def _stepping(model: Any):
    """While ``fit`` (or ``train_on_batch``) runs in a comparing run: the model's
    ``train_step`` run as virtual replicas (the reference), as micro-steps (the reference of
    an original that cannot be split), or recording what one device is fed."""
    if not snapshot.active():
        yield
        return
    own = model.__dict__.get("train_step")
    step = model.train_step
    count = replicas.count()
    # Keras's own train_step scales each replica's loss itself (its mean over the replica's
    # share, / N): an epoch's last batch, split unevenly, is computed as fit computes it.
    keras_step = own is None and _keras_defined(type(model), "train_step")

    def train_step(data):
        number = snapshot.step()
        if count:

            def fed(shards):
                for index, (a, _) in enumerate(shards):
                    feeds.record(number, index, a, call="virtual-fit")

            return replicas.run(step, (data,), {}, count, on_shards=fed, uneven=keras_step)
        if accumulate.deferring():
            accumulate.micro_started(data, _rows(data))
            with context.stepping():
                return step(data)
        if tf.inside_function():
            feeds.record_in_graph(tf.constant(0), data)
        else:
            feeds.record(number, 0, data, call="fit")
        with context.stepping():
            return step(data)

    strategy = getattr(model, "distribute_strategy", None)
    plain = strategy is None or type(strategy).__name__.startswith("_Default")
    if not (count or accumulate.count() or plain):
        yield
        return
    object.__setattr__(model, "train_step", train_step)
    try:
        yield
    finally:
        if own is None:
            try:
                object.__delattr__(model, "train_step")
            except AttributeError:
                pass
        else:
            object.__setattr__(model, "train_step", own)


def _rows(structure: Any) -> int | None:
    for value in tf.nest.flatten(structure):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) and shape[0] is not None:
            return int(shape[0])
    return None


def _with_callback(callbacks, extra):
    if callbacks is None:
        return [extra]
    if isinstance(callbacks, (list, tuple)):
        return [*callbacks, extra]
    if hasattr(callbacks, "append"):  # a CallbackList built by the script
        callbacks.append(extra)
        return callbacks
    return [callbacks, extra]


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if v is None or isinstance(v, (int, float, str, bool)) else repr(v)) for k, v in values.items()}


def _train_on_batch(original, version: str):
    records: dict[int, FitRec] = {}

    def train_on_batch(self, *args, **kwargs):
        record = records.get(id(self))
        if record is None:
            record = FitRec("train_on_batch", user_site(), {}, {"calls": recorder.steps}, keras=version)
            records[id(self)] = record
            recorder.fits.append(record)
        if record.steps >= recorder.steps * max(1, accumulate.count()):
            snapshot.finish()
            raise StepLimitReached(f"train_on_batch called {record.steps} times")
        snapshot.begin("train_on_batch", record.site)
        if replicas.count() and snapshot.active():
            # The script slices its batches itself: they cannot be scaled, only accumulated.
            raise replicas.NotSplittable(f"train_on_batch at {user_site()} is given batches the script cuts itself")
        try:
            with _Keras(), _stepping(self):
                result = original(self, *args, **kwargs)
        except StepLimitReached:
            raise
        except BaseException as exc:
            record.error = describe_exception(exc)
            _finish(record, self)
            _failed("train_on_batch", record.cause)
            recorder.publish()
            raise
        record.steps += 1
        loss = scalar(result)
        if loss is not None:
            record.losses.append(loss)
        if snapshot.active() and not accumulate.count():
            reported.returned(snapshot.step(), result)
            snapshot.end_step(ran=True)
        _finish(record, self)
        recorder.publish()
        return result

    return train_on_batch


def _evaluate(original, package: str):
    signature = inspect.signature(original)

    def evaluate(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        asked = bound.arguments.get("steps")
        bound.arguments["steps"] = min(int(asked), recorder.steps) if asked else recorder.steps
        try:
            with _Keras():
                return original(*bound.args, **bound.kwargs)
        except Exception as exc:
            known = _known_failure(package, self, exc)
            if known:
                _failed("evaluate", known)
            raise

    return evaluate


def _known_failure(package: str, model: Any, exc: BaseException) -> str | None:
    try:
        return multiworker.keras3_limitation(package, model.distribute_strategy, exc)
    except Exception:
        return None


def _compile(original):
    def compile(self, *args, **kwargs):
        if snapshot.active() and (kwargs.get("steps_per_execution") or 1) != 1:
            # Several steps a call group steps without changing them: compared one at a time.
            kwargs["steps_per_execution"] = 1
            recorder.note("compare: compile(steps_per_execution=...) run one step at a time")
        object.__setattr__(self, "_autofix_smoke_compiled_in_scope", tf.distribute.has_strategy())
        recorder.in_compile += 1
        try:
            return original(self, *args, **kwargs)
        except StepLimitReached:
            raise
        except BaseException:
            try:
                _failed("compile", _cause(self, _unmirrored(_model_variables(self))))
            except Exception:  # the script's exception is the one to report
                pass
            raise
        finally:
            recorder.in_compile -= 1

    return compile


def _optimizer_init(original):
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        origin = (tf.distribute.get_strategy(), recorder.in_compile > 0)
        object.__setattr__(self, "_autofix_smoke_origin", origin)

    return __init__


def _failed(where: str, cause: str | None) -> None:
    if recorder.failure is None:
        recorder.failure = {"where": where, "cause": cause}


def _finish(record: FitRec, model: Any) -> None:
    """Fill in what only the model can tell, after (or when) fit ends. Never raises: the
    script's own exception, if any, is the one to report."""
    try:
        _inspect(record, model)
    except Exception as exc:
        recorder.note(f"could not inspect the model after {record.method} ({describe_exception(exc)})")


def _inspect(record: FitRec, model: Any) -> None:
    strategy = model.distribute_strategy
    record.strategy = type(strategy).__name__
    record.replicas = int(strategy.num_replicas_in_sync)
    model_vars = _model_variables(model)
    variables = model_vars + _optimizer_variables(model)
    unmirrored = _unmirrored(variables)
    record.variables = len(variables)
    record.all_mirrored = bool(variables) and not unmirrored
    record.unmirrored = unmirrored[:MAX_NAMES]
    record.unmirrored_count = len(unmirrored)
    record.compiled_in_scope = getattr(model, "_autofix_smoke_compiled_in_scope", None)
    origin = getattr(getattr(model, "optimizer", None), "_autofix_smoke_origin", None)
    record.optimizer_in_scope = None if origin is None else origin[0] is strategy
    record.cause = _cause(model, _unmirrored(model_vars))
    if recorder.multi_worker:
        record.weights = multiworker.digest(model_vars)


def _cause(model: Any, unmirrored_model_vars: list[str]) -> str | None:
    """Why training was not (or could not be) distributed, in the script's terms."""
    strategy = model.distribute_strategy
    if type(strategy).__name__.startswith("_Default"):
        if not recorder.strategies:
            return "no MirroredStrategy was created"
        # Also when its layers were built inside and only the model wrapping them outside.
        return "the model was built outside strategy.scope()"
    if unmirrored_model_vars:
        return "the model was built outside strategy.scope()"
    origin = getattr(getattr(model, "optimizer", None), "_autofix_smoke_origin", None)
    if origin is not None and origin[0] is not strategy:
        if origin[1]:
            return "compile() was called outside strategy.scope()"
        return "the optimizer was created outside strategy.scope()"
    replicas = int(strategy.num_replicas_in_sync)
    if recorder.multi_worker and not multiworker.is_multi_worker(strategy):
        return f"{type(strategy).__name__} trains each worker on its own: use MultiWorkerMirroredStrategy"
    if replicas < recorder.replicas * recorder.workers:
        return f"the strategy has {replicas} device{'s' if replicas != 1 else ''}"
    return None


def _model_variables(model: Any) -> list[Any]:
    try:
        weights = list(model.weights)
    except Exception:  # an unbuilt subclassed model has none yet
        return []
    fixed = _preprocessing_state(model)
    return [w for w in weights if id(w) not in fixed]


def _preprocessing_state(model: Any) -> set[int]:
    """The non-trainable variables of the model's Keras preprocessing layers (Normalization's
    mean and variance, set by ``adapt()``): training never updates them, and Keras 3 trains
    with them made outside the scope (docs/keras-versions.md, "Preprocessing layers"), so
    they are not what tells whether training was distributed."""
    try:
        layers = list(model._flatten_layers(include_self=False))
    except Exception:
        return set()
    found: set[int] = set()
    for layer in layers:
        if ".layers.preprocessing." in type(layer).__module__:
            try:
                found.update(id(w) for w in layer.non_trainable_weights)
            except Exception:
                continue
    return found


def _optimizer_variables(model: Any) -> list[Any]:
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return []
    variables = getattr(optimizer, "variables", [])
    try:
        return list(variables() if callable(variables) else variables)
    except Exception:
        return []


def _unmirrored(variables: list[Any]) -> list[str]:
    return [_name(v) for v in variables if not _is_mirrored(v)]


def _is_mirrored(variable: Any) -> bool:
    # Keras 3 wraps the tf.Variable in ``_value``; mixed precision (Keras 2) in ``_variable``.
    for candidate in (variable, getattr(variable, "_value", None), getattr(variable, "_variable", None)):
        if isinstance(candidate, tf.distribute.DistributedValues):
            return True
    return False


def _name(variable: Any) -> str:
    return str(getattr(variable, "path", None) or getattr(variable, "name", "?"))


def _keras_defined(cls: type, attribute: str) -> bool:
    """Whether ``cls`` has ``attribute`` from Keras (Keras 3 or tf_keras), not from a class of
    the script's."""
    owner = next((c for c in cls.__mro__ if attribute in c.__dict__), None)
    module = getattr(owner, "__module__", "") or ""
    return owner is not None and module.split(".")[0] in ("keras", "tf_keras")
