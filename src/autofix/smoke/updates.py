"""Training seen by what applies gradients (child side): ``optimizer.apply_gradients``, Keras 3's
``optimizer.apply`` and tf-keras' ``minimize`` (which calls ``apply_gradients``).

An update made inside the script's ``strategy.run`` marks that run's record. An update the
script makes outside ``strategy.run`` (every single-device loop: ``tape.gradient`` +
``apply_gradients``, ``minimize``, ``apply``) is a *custom loop* record (:class:`LoopRec`), with
or without a strategy:

- inside the script's outermost ``tf.function``: each call of that function is one step (the
  update is seen once, when the function is traced); its return value, when a scalar (or the
  first of a tuple, or ``"loss"`` of a dict), is the step's loss;
- eagerly: each call is one step, per call site and optimizer; the loss is the scalar the last
  eager ``GradientTape.gradient`` was given.

Both are capped to ``steps`` steps, as ``fit`` is. Updates made by Keras itself (``fit``,
``train_on_batch``) are ``fit``'s.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import tensorflow as tf

from autofix.smoke import accumulate, controls, multiworker, replicas, reported, snapshot
from autofix.smoke.state import LoopRec, StepFunction, StepLimitReached, place, recorder, scalar, user_site


def install_tape() -> None:
    original = tf.GradientTape.gradient

    @functools.wraps(original)
    def gradient(self, target, *args, **kwargs):
        if _script_thread() and not tf.inside_function():
            recorder.gradient_loss = scalar(target)
        accumulate.gradient(self)
        if replicas.active():
            replicas.differentiated(target)
        result = original(self, target, *args, **kwargs)
        if replicas.active():
            replicas.gradients_taken(result)
        elif accumulate.deferring():
            accumulate.gradients_taken(result)
        return result

    tf.GradientTape.gradient = gradient
    _install_clips()


def _install_clips() -> None:
    """Clipping a step's gradients: by their global norm, clipped as one device clips the global
    batch's (virtual replicas); element by element or tensor by tensor, said inexact (the
    reference clips each replica's, a right migration the mean)."""
    by_global_norm = tf.clip_by_global_norm
    if getattr(by_global_norm, "_autofix_smoke_clip", False):
        return

    @functools.wraps(by_global_norm)
    def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
        if use_norm is None and not tf.inside_function():
            if replicas.active() and replicas.of_gradients(t_list):
                return replicas.clip(t_list, clip_norm, by_global_norm)
            if accumulate.of_gradients(t_list):
                from autofix.smoke import context

                context.not_exact("gradients are clipped by their global norm in each micro-step (a right migration clips their mean)")
        return by_global_norm(t_list, clip_norm, use_norm=use_norm, name=name)

    clip_by_global_norm._autofix_smoke_clip = True
    tf.clip_by_global_norm = clip_by_global_norm
    for name in ("clip_by_norm", "clip_by_value"):
        tf_clip = getattr(tf, name)

        def each(*args, _clip=tf_clip, _name=name, **kwargs):
            if args and not tf.inside_function() and (replicas.of_gradients(args[0]) or accumulate.of_gradients(args[0])):
                from autofix.smoke import context

                context.not_exact(f"a gradient is clipped by tf.{_name} on each replica's shard (a right migration clips the mean gradient)")
            return _clip(*args, **kwargs)

        functools.update_wrapper(each, tf_clip)
        setattr(tf, name, each)


def install_optimizer(cls: type) -> None:
    for name in ("apply_gradients", "apply"):
        original = cls.__dict__.get(name) or getattr(cls, name, None)
        if original is not None and not getattr(original, "_autofix_smoke_update", False):
            wrapped = functools.wraps(original)(_apply(original, name))
            wrapped._autofix_smoke_update = True
            setattr(cls, name, wrapped)


def _script_thread() -> bool:
    """The script's own call: not Keras' (fit...), not a replica thread of a strategy."""
    return recorder.keras_depth == 0 and threading.current_thread() is threading.main_thread()


def _apply(original, method: str):
    def apply(self, *args, **kwargs):
        if recorder.applying:
            return original(self, *args, **kwargs)
        if replicas.active():
            # A virtual replica of the reference run: the update is made once, for all of them,
            # with the mean of their gradients (by the same method, from the script's thread).
            args, kwargs, pairs = _updated(args, kwargs)

            def together(mean_pairs):
                given, more = _with_pairs(method, args, kwargs, mean_pairs)
                with replicas.combining():
                    return getattr(self, method)(*given, **more)

            return replicas.update(self, together, pairs)
        if accumulate.deferring():
            # A micro-step of the reference run: held back, or the mean of the step's updates.
            args, kwargs, pairs = _updated(args, kwargs)
            _differentiated()
            if _script_thread():
                # Its step function is known from its first micro-step (what it returns then
                # is part of the step's report).
                _loop_record(self, method)
            mean = accumulate.update(self, pairs)
            if mean is None:
                return None
            args, kwargs = _with_pairs(method, args, kwargs, mean)
            try:
                return _update(self, original, method, args, kwargs)
            finally:
                accumulate.applied()
        if replicas.count() and not replicas.is_combining() and snapshot.active():
            raise replicas.NotSplittable(f"its update at {user_site(2)} is not made in a step function given its batch")
        return _update(self, original, method, args, kwargs)

    return apply


def _update(optimizer: Any, original, method: str, args: tuple, kwargs: dict) -> Any:
    """An update seen by the smoke test: recorded for its run, loop or fit, then made."""
    run = recorder.current_run
    if run is not None:
        run.applies_gradients = True
        if recorder.multi_worker or snapshot.active():
            args, kwargs, pairs = _keep_variables(run, args, kwargs)
            _recorded_update(optimizer, pairs)
        return original(optimizer, *args, **kwargs)
    if not _script_thread():
        if snapshot.active() and recorder.current_fit is not None:
            # fit's own update (its train_step), traced: what --compare reads and sets.
            args, kwargs, pairs = _updated(args, kwargs)
            _recorded_update(optimizer, pairs)
        return original(optimizer, *args, **kwargs)
    record, eager = _loop_record(optimizer, method)
    if record is None:
        return original(optimizer, *args, **kwargs)
    if eager:
        if record.steps >= recorder.steps:
            snapshot.finish()
            raise StepLimitReached(f"{record.name} called {record.steps} times at {record.site}")
        snapshot.begin("update", record.site)
        if not accumulate.count():
            snapshot.before_update(record)
        if not accumulate.deferring():
            _differentiated()
    args, kwargs, pairs = _keep_variables(record, args, kwargs)
    _recorded_update(optimizer, pairs)
    recorder.applying += 1
    try:
        result = original(optimizer, *args, **kwargs)
    finally:
        recorder.applying -= 1
    if eager:
        record.steps += 1
        if recorder.gradient_loss is not None:
            record.losses.append(recorder.gradient_loss)
            recorder.gradient_loss = None
        record.weights = multiworker.digest(recorder.run_variables.get(id(record)))
        recorder.publish()
    return result


def _differentiated() -> None:
    """With --compare: the loss an eager update of the script's own loop differentiated, for
    the step it is made in (what a loop written inline reports)."""
    if snapshot.active() and _script_thread() and not tf.inside_function():
        reported.differentiated(snapshot.step(), recorder.gradient_loss)


def _recorded_update(optimizer: Any, pairs: list[tuple[Any, Any]]) -> None:
    """With --compare: the variables this update changes, read before it, and the gradients it
    applies. While a step function is traced nothing has run yet, so the variables can also be
    set to the original's initial values; an eager update comes after its forward pass, too
    late for that."""
    if not snapshot.active():
        return
    variables = [v for _, v in pairs]
    snapshot.applied(optimizer, variables)
    if tf.inside_function():
        snapshot.transplant(variables)
    else:
        snapshot.initial(variables)
    snapshot.gradients(pairs, controls.replica_id())


def _loop_record(optimizer: Any, method: str) -> tuple[LoopRec | None, bool]:
    """The loop record an update of the script belongs to, and whether it is an eager step."""
    outer = recorder.function_stack[-1] if recorder.function_stack else None
    strategy = type(tf.distribute.get_strategy()).__name__
    if outer is not None:
        site, name = function_place(outer), getattr(outer, "__name__", "?")
        record = recorder.loops.get(f"{site}|{name}")
        if record is None:
            record = recorder.loops[f"{site}|{name}"] = LoopRec(site, name, True, strategy)
        step = recorder.step_functions.get(id(outer))
        if step is None:
            step = recorder.step_functions[id(outer)] = StepFunction()
            recorder.step_function_refs.append(outer)
        if not any(r is record for r in step.loops):
            step.loops.append(record)
        eager = False
    elif tf.inside_function():
        # Traced in a function the script did not call itself (a tf.data map, a concrete
        # function it called directly): its steps cannot be counted.
        return None, False
    else:
        site = user_site(3)
        key = f"{site}|{id(optimizer)}"
        record = recorder.loops.get(key)
        if record is None:
            record = recorder.loops[key] = LoopRec(site, f"{type(optimizer).__name__}.{method}", False, strategy)
        eager = True
    name = type(optimizer).__name__
    if name not in record.optimizers:
        record.optimizers.append(name)
    return record, eager


def function_site(function: Any) -> str:
    """``file:line name`` of a tf.function's Python function."""
    code = getattr(getattr(function, "python_function", None), "__code__", None)
    if code is None:
        return f"<tf.function {getattr(function, '__name__', '?')}>"
    return f"{place(code.co_filename, code.co_firstlineno)} {code.co_name}"


def function_place(function: Any) -> str:
    code = getattr(getattr(function, "python_function", None), "__code__", None)
    return "<tf.function>" if code is None else place(code.co_filename, code.co_firstlineno)


def step_done(step: StepFunction, result: Any, args: tuple, kwargs: dict) -> None:
    """After a call of a step function: one more step for each custom loop it holds."""
    loss = loss_of(result)
    for record in step.loops:
        record.steps += 1
        if loss is not None:
            record.losses.append(loss)
        if record.global_batch is None:
            record.global_batch = _leading_dimension((args, kwargs))
        record.weights = multiworker.digest(recorder.run_variables.get(id(record)))


def _leading_dimension(structure: Any) -> int | None:
    try:
        for value in tf.nest.flatten(structure, expand_composites=True):
            shape = getattr(value, "shape", None)
            if shape is not None and len(shape) and shape[0] is not None:
                return int(shape[0])
    except Exception:
        return None
    return None


def loss_of(result: Any) -> float | None:
    if isinstance(result, (list, tuple)) and result:
        result = result[0]
    elif isinstance(result, dict):
        result = result.get("loss", next(iter(result.values()), None) if len(result) == 1 else None)
    if isinstance(result, tf.distribute.DistributedValues):
        values = [scalar(v) for v in result.values]
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None
    return scalar(result)


def _keep_variables(record: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, list[tuple[Any, Any]]]:
    """Note the variables an update of ``record`` changes (for its weights digest and the
    first-update snapshot)."""
    args, kwargs, pairs = _updated(args, kwargs)
    _extend(recorder.run_variables.setdefault(id(record), []), [v for _, v in pairs])
    return args, kwargs, pairs


def _updated(args: tuple, kwargs: dict) -> tuple[tuple, dict, list[tuple[Any, Any]]]:
    """The arguments to pass on and the (gradient, variable) pairs of an update: ``apply(grads,
    variables)``, or ``apply_gradients(pairs)``, which gets a list instead of the one-shot
    iterator (``zip(...)``) it was given."""
    if "trainable_variables" in kwargs or (len(args) > 1 and isinstance(args[1], (list, tuple))):
        variables = kwargs.get("trainable_variables", args[1] if len(args) > 1 else None)
        grads = kwargs.get("grads", args[0] if args else None)
        try:
            return args, kwargs, list(zip(list(grads or ()), list(variables or ())))
        except TypeError:
            return args, kwargs, [(None, v) for v in variables or ()]
    pairs = args[0] if args else kwargs.get("grads_and_vars")
    if pairs is None:
        return args, kwargs, []
    pairs = list(pairs)
    try:
        found = [(g, v) for g, v in pairs]
    except (TypeError, ValueError):
        found = []
    if args:
        return (pairs, *args[1:]), kwargs, found
    return args, dict(kwargs, grads_and_vars=pairs), found


def _with_pairs(method: str, args: tuple, kwargs: dict, pairs: list[tuple[Any, Any]]) -> tuple[tuple, dict]:
    """The arguments of an update of ``method`` with these (gradient, variable) pairs."""
    if method == "apply":
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        rest = dict(kwargs)
        rest.pop("grads", None)
        rest.pop("trainable_variables", None)
        return (grads, variables), rest
    rest = dict(kwargs)
    rest.pop("grads_and_vars", None)
    return (list(pairs), *args[1:]), rest


def _extend(kept: list[Any], variables: list[Any]) -> None:
    for variable in variables:
        if not any(variable is v for v in kept):
            kept.append(variable)
