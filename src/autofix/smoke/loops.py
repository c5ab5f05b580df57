"""Hooks on tf.distribute that record and cap custom training loops (child side).

Every call of ``strategy.run`` made by the script (not by Keras) is recorded per call site:
what it was given, whether it was inside a ``tf.function``, which replicas ran the function,
whether an optimizer applied gradients in it, and the loss of each step where it can be seen.

A *step* is one call of the outermost ``tf.function`` that calls ``strategy.run`` (its return
value, when a scalar, is the step's loss), or one eager call of ``strategy.run`` (the loss is
the next eager ``strategy.reduce``). A script that asks for more than ``steps`` steps ends
there, cleanly. Which replicas ran is seen when the function is traced (or on every eager call).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.distribute import distribute_lib, mirrored_run
from tensorflow.python.eager import lift_to_graph
from tensorflow.python.eager.polymorphic_function import polymorphic_function

from autofix.smoke import accumulate, controls, feeds, multiworker, phases, replicas, reported, snapshot, updates
from autofix.smoke.state import (
    RunRec,
    StepFunction,
    StepLimitReached,
    describe_exception,
    recorder,
    user_site,
)


def install() -> None:
    base = distribute_lib.StrategyBase
    _wrap(base, "run", _run)
    _wrap(base, "reduce", _reduce)
    _wrap(base, "experimental_distribute_dataset", _distribute_dataset)
    _wrap(polymorphic_function.Function, "__call__", _function_call)
    _wrap(polymorphic_function.Function, "_initialize_uninitialized_variables", _unlifted)
    original = mirrored_run._call_for_each_replica
    mirrored_run._call_for_each_replica = functools.wraps(original)(_for_each_replica(original))
    updates.install_tape()
    replicas.install_sums()


def _wrap(cls: type, name: str, make) -> None:
    original = getattr(cls, name)
    setattr(cls, name, functools.wraps(original)(make(original)))


def _mine() -> bool:
    """True when the call comes from the script itself, not from Keras or a replica thread."""
    return recorder.keras_depth == 0 and threading.current_thread() is threading.main_thread()


def _run(original):
    def run(self, fn, args=(), kwargs=None, options=None):
        if not _mine() or recorder.current_run is not None:
            return original(self, fn, args, kwargs, options)
        in_function = tf.inside_function()
        outer = recorder.function_stack[-1] if recorder.function_stack else None
        given, name = classify(fn)
        site = updates.function_site(outer) if outer is not None else user_site()
        record = recorder.runs.get(f"{site}|{name}")
        if record is None:
            record = RunRec(site, given, name, in_function, type(self).__name__, int(self.num_replicas_in_sync))
            recorder.runs[f"{site}|{name}"] = record
        record.in_tf_function = record.in_tf_function or in_function
        record.collective_replaced = record.collective_replaced or bool(getattr(self, "_autofix_collective_replaced", False))
        eager_step = outer is None and not in_function
        if outer is not None:
            step = recorder.step_functions.get(id(outer))
            if step is None:
                step = recorder.step_functions[id(outer)] = StepFunction()
                recorder.step_function_refs.append(outer)
            if not any(r is record for r in step.runs):
                step.runs.append(record)
        elif eager_step and record.steps >= recorder.steps:
            snapshot.finish()
            raise StepLimitReached(f"strategy.run called {record.steps} times at {site}")
        phases.reached_here()
        started = snapshot.begin("run", site) if eager_step else False
        record.calls += 1
        if record.global_batch is None:
            record.global_batch = recorder.last_user_batch
            record.auto_shard, record.sharded = recorder.last_user_sharding
        recorder.current_run = record
        try:
            result = original(self, fn, args, kwargs, options)
        except BaseException as exc:
            if not isinstance(exc, StepLimitReached):
                record.error = describe_exception(exc)
                if recorder.failure is None:
                    cause = f"it was given a {given}" if given in ("model", "layer", "module") else None
                    recorder.failure = {"where": "strategy.run", "cause": cause}
            raise
        finally:
            recorder.current_run = None
        if eager_step:
            record.steps += 1
            recorder.last_eager_run = record
            _digest(record)
            if record.applies_gradients:
                snapshot.end_step()
            elif started:
                snapshot.abandon()
            recorder.publish()
        return result

    return run


def classify(fn: Any) -> tuple[str, str]:
    """What strategy.run was given: model, layer, module, tf.function, function or callable."""
    name = getattr(fn, "name", None) if not inspect.isroutine(fn) else None
    name = name or getattr(fn, "__name__", None) or type(fn).__name__
    for module_name in ("keras", "tf_keras"):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        if isinstance(fn, getattr(module, "Model", ())):
            return "model", str(name)
        layers = getattr(module, "layers", None)
        if layers is not None and isinstance(fn, getattr(layers, "Layer", ())):
            return "layer", str(name)
    if isinstance(fn, polymorphic_function.Function):
        return "tf.function", str(name)
    if isinstance(fn, tf.Module):
        return "module", str(name)
    if inspect.isroutine(fn) or isinstance(fn, functools.partial):
        return "function", str(name)
    return ("callable" if callable(fn) else "other"), str(name)


def _for_each_replica(original):
    def call_for_each_replica(distribution, fn, args, kwargs):
        record = recorder.current_run
        if record is None and not controls.active():
            return original(distribution, fn, args, kwargs)

        def per_replica(*a, **k):
            context = tf.distribute.get_replica_context()
            if record is not None:
                replica = None
                if context is not None:
                    replica = tf.get_static_value(context.replica_id_in_sync_group)
                record.saw_replica(None if replica is None else int(replica))
            with controls.replica(context, (a, k)):
                if snapshot.active() and context is not None:
                    _feed(context.replica_id_in_sync_group, (a, k))
                elif record is not None and context is not None and not record.fed:
                    _given(record, context.replica_id_in_sync_group, (a, k))
                return fn(*a, **k)

        return original(distribution, per_replica, args, kwargs)

    return call_for_each_replica


def _given(record: RunRec, replica: Any, structure: Any) -> None:
    """What a replica is given in the first call of a strategy.run step (its examples, one
    digest): replicas all given the same examples are not data-parallel."""

    def keep(replica_id, *values):
        rows = feeds.rows(list(values))
        key = str(int(replica_id))
        if rows and key not in record.fed:
            # (how many distinct examples: a batch of identical rows cannot tell replicas apart)
            record.fed[key] = [len(rows), feeds.digest(rows), len(set(rows))]
        return np.int64(0)

    flat = [v for v in tf.nest.flatten(structure, expand_composites=True) if isinstance(v, tf.Tensor)]
    if not flat:
        return
    try:
        if tf.inside_function():
            tf.numpy_function(keep, [tf.cast(replica, tf.int64), *flat], tf.int64, stateful=True)
        else:
            keep(tf.get_static_value(replica) or 0, *flat)
    except Exception:  # the check is then not made
        pass


def _feed(replica: Any, structure: Any) -> None:
    if tf.inside_function():
        feeds.record_in_graph(replica, structure)
    else:
        value = tf.get_static_value(replica)
        feeds.record(snapshot.step(), 0 if value is None else int(value), structure, call="eager-run")


def _unlifted(original):
    """A ``tf.function`` that made variables on its first call initializes them outside itself
    when it can; when it cannot (a mirrored variable made in ``strategy.run``: the initial value
    of each replica's copy is read from the first, inside the function), TensorFlow runs the
    whole function in a ``tf.cond`` on whether they are initialized. Measured (TF 2.21, Keras
    3, 2 logical CPUs): with the default collective all-reduce - what a machine of GPUs runs -
    that step fails ("You must feed a value for placeholder tensor ... cond"; keras-team/keras
    #19246 reports it on 2 GPUs); with ``ReductionToOneDevice``, which the harness gives a
    ``MirroredStrategy()`` on logical devices, it runs. Keras 3 makes an optimizer's slot
    variables (Adam's moments, SGD's momentum) on its first ``apply_gradients``, and a Sequential
    made without its input's shape its weights on its first call: in a distributed step, both
    land here. So the variables are recorded on the step's runs, whose check then fails."""

    def initialize(self, initializers):
        try:
            return original(self, initializers)
        except lift_to_graph.UnliftableError:
            step = recorder.step_functions.get(id(self))
            for record in step.runs if step is not None else ():
                if record.collective_replaced and record.num_replicas > 1:
                    for variable, _ in initializers:
                        name = str(getattr(variable, "name", "?")).split(":")[0]
                        if "/replica_" not in name and name not in record.unlifted:
                            record.unlifted.append(name)
            raise

    return initialize


def _function_call(original):
    def __call__(self, *args, **kwds):
        if not _mine() or tf.inside_function():
            return original(self, *args, **kwds)
        step = recorder.step_functions.get(id(self))
        cap = recorder.steps * max(1, accumulate.count())
        if step is not None and step.calls >= cap:
            snapshot.finish()
            raise StepLimitReached(f"{getattr(self, '__name__', 'the step function')} called {step.calls} times")
        if accumulate.deferring():
            accumulate.called((args, kwds), _leading_dimension((args, kwds)))
        started = snapshot.begin("loop", updates.function_site(self))
        recorder.function_stack.append(self)
        number = snapshot.step()
        try:
            result = _called(original, self, args, kwds)
        finally:
            recorder.function_stack.pop()
        step = recorder.step_functions.get(id(self))
        if started and not (step is not None and (step.loops or any(r.applies_gradients for r in step.runs))):
            snapshot.abandon()  # not a training step (an evaluation step, a preprocessing function)
        if step is not None:
            step.calls += 1
            loss = updates.loss_of(result)
            for record in step.runs:
                record.steps += 1
                if loss is not None:
                    record.losses.append(loss)
                _digest(record)
            updates.step_done(step, result, args, kwds)
            if snapshot.active():
                # (A step function given no examples draws its batch itself: what it was fed is
                # not seen, as an inline loop's is not.)
                if not replicas.count() and not accumulate.count() and not step.runs and feeds.rows((args, kwds)):
                    feeds.record(number, 0, (args, kwds), call=id(self))
                # A micro-step that draws its batch itself starts (and ends the step before it)
                # inside the call: it belongs to the step running when it returns.
                reported.returned(snapshot.step() if accumulate.count() else number, result)
                if not accumulate.count():
                    snapshot.end_step(ran=bool(step.loops) or any(r.applies_gradients for r in step.runs))
            recorder.publish()
        return result

    return __call__


def _called(original, function: Any, args: tuple, kwds: dict) -> Any:
    """A call of the script's outermost ``tf.function``; in the reference run, as virtual
    replicas when it is given a batch (see :mod:`autofix.smoke.replicas`)."""
    count = replicas.count()
    if not count or not snapshot.active():
        return original(function, *args, **kwds)
    try:
        parts = replicas.split(args, kwds, count)
    except replicas.NotSplittable:
        parts = None
    if parts is None:
        return original(function, *args, **kwds)
    number = snapshot.step()
    fed: list = []
    before = replicas.updates_made()
    result = replicas.run(lambda *a, **k: original(function, *a, **k), args, kwds, count, on_shards=fed.extend)
    if replicas.updates_made() != before:
        # What a training step was fed (not a function of the model given a batch to predict).
        for index, (a, k) in enumerate(fed):
            feeds.record(number, index, (a, k), call=("virtual", id(function)))
    return result


def _leading_dimension(structure: Any) -> int | None:
    try:
        for value in tf.nest.flatten(structure, expand_composites=True):
            shape = getattr(value, "shape", None)
            if shape is not None and len(shape) and shape[0] is not None:
                return int(shape[0])
    except Exception:
        return None
    return None


def _digest(record: RunRec) -> None:
    if recorder.multi_worker:
        record.weights = multiworker.digest(recorder.run_variables.get(id(record)))


def _reduce(original):
    def reduce(self, reduce_op, value, axis=None):
        result = original(self, reduce_op, value, axis)
        if _mine() and not tf.inside_function() and recorder.last_eager_run is not None:
            if recorder.last_eager_run.applies_gradients:
                # A step run eagerly (strategy.run outside a tf.function) returns nothing the
                # harness sees: what the script reduces right after it is what it reports.
                snapshot.reduced(result)
            loss = updates.loss_of(result)
            if loss is not None:
                recorder.last_eager_run.losses.append(loss)
                recorder.last_eager_run = None
                recorder.publish()
        return result

    return reduce


def _distribute_dataset(original):
    def experimental_distribute_dataset(self, dataset, options=None):
        fit = recorder.current_fit
        if fit is not None and not fit.batch_probed:
            fit.batch_probed = True
            fit.global_batch = batch_of(dataset)
            if recorder.multi_worker:
                fit.auto_shard, fit.sharded = multiworker.sharding(dataset)
        elif recorder.keras_depth == 0:
            recorder.last_user_batch = batch_of(dataset)
            if recorder.multi_worker:
                recorder.last_user_sharding = multiworker.sharding(dataset)
        made = original(self, dataset, options)
        controls.distributed(dataset, made)
        return made

    return experimental_distribute_dataset


def batch_of(dataset: Any) -> int | None:
    """The size of the first batch: from the static shape, else by reading one element."""
    if not isinstance(dataset, tf.data.Dataset):
        return None
    try:
        for spec in tf.nest.flatten(dataset.element_spec):
            shape = getattr(spec, "shape", None)
            if shape is not None and shape.rank:
                if shape[0] is not None:
                    return int(shape[0])
                break
        first = next(iter(dataset.take(1)))
        for tensor in tf.nest.flatten(first):
            shape = getattr(tensor, "shape", None)
            if shape is not None and len(shape):
                return int(shape[0])
    except Exception:  # an exhausted or failing input pipeline is the script's to report
        return None
    return None
