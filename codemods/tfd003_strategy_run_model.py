"""TFD003 strategy-run-model: what ``strategy.run`` cannot run as a data-parallel step, and
training steps run eagerly.

Found: ``strategy.run`` given a model with no inputs, a model whose outputs are used as a
training loss, or Keras's own training methods; ``strategy.run`` given what is not a function
(what calling the step returns, gradients, a ``zip`` of them for ``apply_gradients``) or called inside
a Keras model's ``train_step`` / ``test_step`` / ``predict_step``; a training step given
batches that are not distributed; a training step of the strategy's optimizer never run by
``strategy.run``; and a training step called eagerly in a loop (a suggestion).

What ``strategy.run`` is handed and where it is called is
:mod:`autofix.analysis.steps.run_targets`' answer (measured on TF 2.21, docs/losses.md).
``strategy.run(train_step(batch))`` (also with ``args=(batch,)``) calls the step once, outside
the replicas (on a distributed batch that fails on the PerReplica value: a ValueError on Keras 3, a
TypeError on tf_keras), and then raises "TypeError: ... object is not callable": fixed to
``strategy.run(train_step, args=(batch,))``, only where the step's arguments are its plain
positional ones, ``args=`` (if given) is the same, and none of them is undistributed data.
``strategy.run(optimizer.apply_gradients, args=(zip(grads, variables),))`` hands the one zip to
every replica: the first uses it up, the next fails. ``strategy.run`` inside a Keras model's
``train_step`` (which ``fit`` already runs per replica, in a model made in the scope of a
strategy with several replicas) raises "RuntimeError: Method requires being in cross-replica
context".

``strategy.run`` takes a per-replica step *function*. Given a model and real inputs
(``strategy.run(model, args=(x,))``) it is valid distributed inference: it returns the
per-replica outputs, and is left alone. Given a model and no inputs (``strategy.run(model)``,
``args=()``) it fails (``TypeError: missing a required argument: 'inputs'`` on Keras 3,
``ValueError: The first argument to Layer.call must always be passed`` on Keras 2); people write
it to "test" their distributed setup. The fix replaces that call with a generated,
replica-correct training step fed with real data: a ``@tf.function`` ``train_step`` that
computes the model's compiled loss per example (``reduction="none"``), averages it with
``tf.nn.compute_average_loss`` over the global batch, and applies the gradients with the
compiled optimizer; the loss object is made inside ``strategy.scope()``, and the step runs on a
batch of ``strategy.experimental_distribute_dataset(<the dataset the model is fit on>)``. A
value that was used is the per-replica loss reduced with ``strategy.reduce(SUM, ...)``.

A step that applies gradients, run by ``strategy.run`` on batches of a plain ``tf.data``
dataset, on NumPy arrays (also a pandas or xarray object's ``.values``), on one replica's shard
(``batch.values[0]``), or on data handed to a method of a class that makes its own strategy
(in a marked project where no module using the class distributes data: no caller can have
distributed it with that strategy; reported without a fix), trains every replica on the whole
batch (:mod:`autofix.analysis.training.inputs`: followed through names, loops, iterators,
parameters and returns, ``self`` attributes, and a constructor's parameters to what the class's
constructions pass). Fixed by distributing the dataset once, before the outermost loop, and
iterating that (:mod:`autofix.analysis.training.distribution` says when that is safe): as the loop's
header has it (``enumerate(ds.take(n), 1)``, ``zip(range(n), ds)``, ``tqdm(ds)``, or
``it = iter(ds)`` read by ``next(it)``; a progress bar held in a name, ``bar = tqdm(ds)``, gets
the distributed dataset inside it, the bar itself is not a dataset), and a read of the batch in the loop or after it that is
not fed to the step (a display) reads the global batch, ``strategy.gather(batch, axis=0)``.

A training step that applies gradients with an optimizer made in the scope of a strategy with
several replicas, but is called directly instead of through ``strategy.run`` (a trainer's
``train()`` method called in a loop), computes every batch on one device: reported, since
making it a per-replica step changes its loss and data too (what ``autofix migrate`` does).
A step decorated by a local decorator whose ``tf.function`` runs it with
``strategy.run(fn, args=...)`` is run by ``strategy.run`` (the decorator's first parameter is
the decorated function).

``strategy.run(step, ...)`` called eagerly in a training loop (the step takes or applies
gradients, is not itself a ``tf.function``, and the call is not inside one, directly or through
its callers) runs every step op by op. That is correct, only slow: it is a suggestion (shown,
not failing ``check``), and its fix runs only with ``--unsafe-fixes``, since tracing changes when
the step's Python code runs: when the step is safe to trace (no Python side effect,
:mod:`autofix.analysis.steps.tracing`), the call is wrapped in a ``@tf.function`` defined before the
outermost loop.

Not fixed (reported with the reason):
- ``strategy.run`` inside a Keras ``train_step`` (the step must be rewritten per replica),
  gradients or a zip of them computed outside (the whole step must run per replica), and a step's
  result handed through a name, with other ``args=`` than its call's, or on undistributed data;
- a model's outputs used as a training loss, and ``model.train_on_batch`` / ``fit`` /
  ``predict`` run by ``strategy.run`` (they fail in a replica; call them directly instead);
- a model that is not compiled, or compiled with a loss that cannot be rebuilt per example;
- a model not fit on a batched ``tf.data`` dataset named before the ``strategy.run`` line,
  and a call inside a loop (a generated step is never defined in a loop body);
- a script that does not import TensorFlow as a module (``import tensorflow as tf``);
- eager loops whose step (or the function around ``strategy.run``) has a Python side effect:
  it changes an object from outside (``stats["steps"] += 1``), prints or logs, calls code that
  is not TensorFlow or Keras, reads a Python value that changes between calls, or uses up a
  Python iterator (inside a ``tf.function`` each would happen only while tracing);
- undistributed data that is a NumPy array (Keras's Python feeders too: an
  ``ImageDataGenerator``'s ``flow``, a ``keras.utils.Sequence`` of the file), a batch drawn with
  ``tf.random`` (``tf.random.normal((64, 8))``) or a shard, that is distributed on some paths only,
  a dataset that is a parameter (other files may pass a distributed one), batches also used
  outside ``strategy.run``, a step that divides its loss by a global batch other than the
  dataset's (split over the replicas, the loss would change) or reads the dataset's batch size
  otherwise (``tf.zeros((BATCH,) + shape)`` for its labels: a replica's share is smaller), and
  a loop over another wrapper of the dataset held in a name (``batches = enumerate(ds)``,
  ``zip``, ``iter``, ``itertools``: the dataset would be distributed inside it), an iterator
  held in a ``self`` attribute (``self.train_iter = iter(ds)``) or made by a helper and passed
  in (distributed where the dataset is made, by hand). TPU strategies, one-replica
  strategies, steps that apply no gradients, and values that are not batches are left alone.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.dataflow import PASSTHROUGH
from autofix.analysis.facts.script import Facts
from autofix.analysis.training.distribution import NotDistributable, distribution
from autofix.analysis.training.inputs import UNDISTRIBUTED, Feed, Inputs
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps, words
from autofix.analysis.steps.run_targets import KERAS_LOOPS, Handed, RunTargets
from autofix.analysis.syntax import argument_value, attribute_path, names_in, nodes_in, root_name
from autofix.analysis.migration.model_prep import ModelPrep
from autofix.analysis.steps.optimizer_builds import BUILD_COMMENT, IN_STEP_COMMENT, InStepBuild, optimizer_builds
from autofix.analysis.training.multiworker import MultiWorker
from autofix.analysis.steps.tracing import python_effect
from autofix.analysis.training.compiled import batch_size_of, compile_of, fit_datasets
from autofix.analysis.training.model import TrainingModel
from autofix.codegen import (
    BlockEdits,
    NotFound,
    fresh_name,
    fresh_names,
    keras_spelling,
    module_alias,
    on_both_paths,
    per_example_loss,
    visible_at,
)
from autofix.analysis.facts.strategies import may_be_none
from autofix.rule import Example, Rule
from autofix.tf.symbols import SINGLE_REPLICA, TRAIN_METHODS, Kind

MODEL_MESSAGE = (
    "strategy.run was given a model and no inputs: it takes a per-replica step function "
    "(this call raises: the model's call needs its inputs)"
)
LOSS_MESSAGE = (
    "strategy.run(model, ...) returns the model's per-replica outputs, and they are used as a "
    "training loss outside the replicas"
)
LOSS_REASON = (
    "the gradient on line {line} is taken outside strategy.run; compute the loss and apply the "
    "gradients in a step function that strategy.run runs on every replica"
)
METHOD_MESSAGE = (
    "strategy.run runs model.{method}(): Keras's own training and prediction methods distribute "
    "themselves and fail inside a replica (\"Method requires being in cross-replica context\")"
)
METHOD_REASON = (
    "call model.{method}(...) directly, outside strategy.run; wrapping it in strategy.run or "
    "tf.function is not a fix"
)
OUTSIDE_MESSAGE = (
    "{name}() applies gradients with an optimizer made in strategy.scope() but is not run by strategy.run: "
    "it trains on one device with the whole batch, and the strategy's other replicas do nothing"
)
LOOP_MESSAGE = (
    "this training loop applies gradients with an optimizer made in strategy.scope() outside strategy.run: "
    "it trains on one device with the whole batch, and the strategy's other replicas do nothing"
)
EAGER_MESSAGE = "strategy.run is called eagerly in a training loop: every step runs op by op instead of as a graph"
FEED_MESSAGE = (
    "strategy.run is given {what}, which is not distributed: every replica gets the whole batch "
    "(no data parallelism, and the replicas' gradients of the same batch are summed)"
)
KERAS_STEP_MESSAGE = (
    "strategy.run is called in {cls}.{method}(), which {loop} already runs on every replica: inside a replica, "
    "strategy.run raises (\"RuntimeError: Method requires being in cross-replica context, use "
    "get_replica_context().merge_call()\")"
)
KERAS_STEP_REASON = (
    "{method}() already runs per replica, on the replica's share of the batch: {what} in it directly, without "
    "strategy.run or strategy.reduce"
)
RESULT_MESSAGE = (
    "strategy.run is given what {name}() returns, not a function: {name}() is called once, outside the replicas "
    "(on a distributed batch that call fails on the PerReplica value; on a plain one it trains on one device "
    "with the whole batch), then strategy.run raises \"TypeError: ... object is not callable\""
)
ZIP_MESSAGE = (
    "strategy.run hands one zip(...) of gradients to apply_gradients on every replica: the first replica uses it "
    "up and the next gets nothing (Keras 3: \"ValueError: not enough values to unpack (expected 2, got 0)\"; "
    "tf_keras: \"RuntimeError: Some replicas made a different number of replica_context().merge_call() calls\")"
)
GRADIENTS_MESSAGE = (
    "strategy.run is given gradients taken outside the replicas, not a function: it raises "
    "\"TypeError: 'list' object is not callable\""
)
ZIP_REASON = (
    "compute the gradients and apply them in one step function that strategy.run runs on every replica, on "
    "batches of strategy.experimental_distribute_dataset(...)"
)
COMMENT = "# strategy.run takes a per-replica step function, not a model: train one step on real data."


class StrategyRunModel(Rule):
    CODE = "TFD003"
    NAME = "strategy-run-model"
    DESCRIPTION = "strategy.run given what it cannot run (a model without inputs, a step's result, batches that are not distributed) or called where it cannot run (a Keras train_step), or a training step run eagerly"
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "strategy.run(model, args=())\n"
                "model.fit(train_ds, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                f"{COMMENT}\n"
                "with strategy.scope():\n"
                '    loss_object = tf.keras.losses.MeanSquaredError(reduction="none")\n'
                "\n"
                "\n"
                "@tf.function\n"
                "def train_step(inputs):\n"
                "    features, labels = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        predictions = model(features, training=True)\n"
                "        per_example_loss = loss_object(labels, predictions)\n"
                "        loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=64)\n"
                "    gradients = tape.gradient(loss, model.trainable_variables)\n"
                "    model.optimizer.apply_gradients(zip(gradients, model.trainable_variables))\n"
                "    return loss\n"
                "\n"
                "\n"
                "dist_dataset = strategy.experimental_distribute_dataset(train_ds)\n"
                "strategy.run(train_step, args=(next(iter(dist_dataset)),))\n"
                "model.fit(train_ds, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "\n"
                "\n"
                "def train_step(batch):\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = tf.nn.compute_average_loss(loss_fn(batch[1], model(batch[0])))\n"
                "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
                "\n"
                "\n"
                "@tf.function\n"
                "def distributed_step(batch):\n"
                "    return strategy.run(train_step, args=(batch,))\n"
                "\n"
                "\n"
                "for epoch in range(10):\n"
                "    for batch in train_ds:\n"
                "        distributed_step(batch)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "\n"
                "\n"
                "def train_step(batch):\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = tf.nn.compute_average_loss(loss_fn(batch[1], model(batch[0])))\n"
                "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
                "\n"
                "\n"
                "@tf.function\n"
                "def distributed_step(batch):\n"
                "    return strategy.run(train_step, args=(batch,))\n"
                "\n"
                "\n"
                "dist_train_ds = strategy.experimental_distribute_dataset(train_ds)\n"
                "for epoch in range(10):\n"
                "    for batch in dist_train_ds:\n"
                "        distributed_step(batch)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "\n"
                "\n"
                "@tf.function\n"
                "def distributed_step(inputs):\n"
                "    return strategy.run(step, args=(inputs,))\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.models.load_model(\"model.keras\")\n"
                "for batch in strategy.experimental_distribute_dataset(test_ds):\n"
                "    predictions = strategy.gather(strategy.run(model, args=(batch,)), axis=0)\n"
            ),
        ),
    )

    def applies(self) -> bool:
        """A file that makes a strategy, or runs a step with ``strategy.run`` on one it holds
        in an attribute (``self.strategy = tf.distribute.MirroredStrategy()`` in a trainer
        class) or is handed."""
        return bool(self.facts.strategies) or bool(Steps.of(self.program).runs)

    def check(self) -> None:
        steps = self.steps = Steps.of(self.program)
        facts = self.facts
        handed_over = RunTargets.of(self.program)
        # A step called in strategy.run's own line (or bound to what it is handed) is that
        # finding's, not one of a step run outside strategy.run.
        self._handed_calls: set[int] = set()
        for call in steps.runs:
            target = steps.run_target(call)
            if target is None:
                continue
            keras_step = handed_over.in_keras_step(call)
            if keras_step is not None:
                self._report_keras_step(call, keras_step)
                continue
            handed = handed_over.handed(call)
            if handed is not None:
                self._handed_calls.add(id(handed.call))
                self._report_handed(call, handed)
                continue
            method = _keras_method(facts, steps, call, target)
            if method is not None:
                self.report(call, METHOD_MESSAGE.format(method=method), METHOD_REASON.format(method=method))
            elif _keras_object(facts, target):
                if isinstance(target, cst.Attribute):
                    continue  # ``model.call`` and the like, given inputs: inference
                inputs = _given_inputs(call)
                if inputs is False:
                    self.fix(call, MODEL_MESSAGE, lambda edits, call=call, target=target: self._replace_model_run(self.program, call, target, edits))
                elif inputs and steps.feeds_gradient(call) is not None:
                    line = self.program.line(steps.feeds_gradient(call))
                    self.report(call, LOSS_MESSAGE, LOSS_REASON.format(line=line))
            else:
                eager = self._eager_training_loop(call, target)
                # Correct, only slow: a suggestion, fixed with --unsafe-fixes (tracing changes
                # when the step's Python code runs).
                if eager is call:
                    self.suggest(call, EAGER_MESSAGE, lambda edits, call=call: self._wrap_in_function(self.program, call, edits))
                elif isinstance(eager, cst.FunctionDef):
                    self.suggest(call, EAGER_MESSAGE, lambda edits, call=call, f=eager: self._decorate(call, f, edits))
        self._undistributed()
        self._steps_outside_run()

    # --- strategy.run where it cannot run, or given what is not a function ------------------------

    def _report_keras_step(self, call: cst.Call, step: cst.FunctionDef) -> None:
        cls = next((a for a in self.program.ancestors(step) if isinstance(a, cst.ClassDef)), None)
        method = step.name.value
        message = KERAS_STEP_MESSAGE.format(cls=cls.name.value if cls else "the model", method=method, loop=KERAS_LOOPS[method])
        what = "compute the loss and apply the gradients" if method == "train_step" else "compute"
        self.report(call, message, KERAS_STEP_REASON.format(method=method, what=what))

    def _report_handed(self, call: cst.Call, handed: Handed) -> None:
        if handed.kind in ("zip", "gradients"):
            self.report(call, ZIP_MESSAGE if handed.kind == "zip" else GRADIENTS_MESSAGE, ZIP_REASON)
            return
        name = handed.step.name.value if handed.step is not None else "the step"
        message = RESULT_MESSAGE.format(name=name)
        self.fix(call, message, lambda edits: self._hand_the_step(call, handed, edits))

    def _hand_the_step(self, run: cst.Call, handed: Handed, edits: BlockEdits) -> None:
        """``strategy.run(step(x, y))`` (or with ``args=(x, y)`` as well): ``strategy.run(step,
        args=(x, y))``, so that every replica runs the step on what it was given."""
        program = self.program
        step_call = handed.call
        if self.steps.run_target(run) is not step_call:
            raise NotFound(f"what {handed.step.name.value}() returns is handed to strategy.run through a name")  # type: ignore[union-attr]
        if any(a.keyword is not None or a.star for a in step_call.args):
            raise NotFound("the step is called with keyword or starred arguments")
        fn = run.args[0]
        if fn.keyword is not None and fn.keyword.value != "fn" or fn.star:
            raise NotFound("the step's call is not strategy.run's first argument")
        passed = [a.value for a in step_call.args]
        given = argument_value(run, "args", 1)
        if argument_value(run, "kwargs", 2) is not None or len(run.args) > (2 if given is not None else 1):
            raise NotFound("strategy.run is given other arguments as well")
        if given is not None:
            same = isinstance(given, (cst.Tuple, cst.List)) and len(given.elements) == len(passed) and all(
                not isinstance(e, cst.StarredElement) and e.value.deep_equals(p) for e, p in zip(given.elements, passed)
            )
            if not same:
                raise NotFound("strategy.run's args= are not what the step is called with, so which the step should run on is not known")
        inputs = Inputs.of(program)
        for value in passed:
            kinds = {o.kind for o in inputs.origins(value)}
            if kinds & UNDISTRIBUTED:
                raise NotFound(
                    f"{program.module.code_for_node(value)} is not distributed either: handed to strategy.run, every "
                    "replica would get the whole batch (distribute the dataset first)"
                )
        strategy = program.module.code_for_node(run.func)
        func = program.module.code_for_node(step_call.func)
        args = ", ".join(program.module.code_for_node(v) for v in passed)
        comma = "," if len(passed) == 1 else ""
        replacement = f"{strategy}({func}, args=({args}{comma}))" if passed else f"{strategy}({func})"
        edits.replace(run, lambda _node: cst.parse_expression(replacement))

    def _steps_outside_run(self) -> None:
        """A training step that applies gradients with an optimizer made in the scope of a
        strategy with several replicas, called outside ``strategy.run``: it computes on one
        device, on the whole batch (no data parallelism); the strategy does nothing for it."""
        steps, facts, values = self.steps, self.facts, self.facts.values
        replica_side = set(steps.functions)
        for function, info in facts.functions.items():
            if function in replica_side or self._keras_runs_it(function):
                continue
            optimizers = [
                call.func.value  # type: ignore[union-attr]
                for call in info.calls
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("apply_gradients", "minimize")
            ]
            if not optimizers or not any(self._made_under_replicas(o) for o in optimizers):
                continue
            calls, _passed_on = values.calls_of(function)
            for call, offset in calls:
                if offset < 0 or values.enclosing_function(call) in replica_side or id(call) in self._handed_calls:
                    continue
                self.report(
                    call,
                    OUTSIDE_MESSAGE.format(name=function.name.value),
                    "run it per replica with strategy.run inside a tf.function, on batches of "
                    "strategy.experimental_distribute_dataset(...), with the loss averaged over the global batch",
                )

        self._loops_outside_run()

    def _loops_outside_run(self) -> None:
        """A training loop written at the top level of the file (a script's or a notebook's
        ``for x, y in ds:`` with its tape and ``apply_gradients`` inline) that updates with an
        optimizer made in the scope of a strategy with several replicas: nothing runs it per
        replica, so it trains on one device with the whole batch, as a step called directly."""
        reported: set[int] = set()  # one finding per loop, at its first update
        for call, _owner in self.facts.calls:
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in ("apply_gradients", "minimize")):
                continue
            ancestors = list(self.program.ancestors(call))
            if any(isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) for a in ancestors):
                continue  # a function's: _steps_outside_run judges its calls
            loops = [a for a in ancestors if isinstance(a, (cst.For, cst.While))]
            if not loops or id(loops[-1]) in reported:
                continue
            if not self._made_under_replicas(func.value):
                continue
            reported.add(id(loops[-1]))
            self.report(
                call,
                LOOP_MESSAGE,
                "write the step as a function run per replica with strategy.run inside a tf.function, on batches of "
                "strategy.experimental_distribute_dataset(...), with the loss averaged over the global batch",
            )

    def _made_under_replicas(self, optimizer: cst.BaseExpression) -> bool:
        training = TrainingModel.of(self.program)
        for maker in training.makers(optimizer):
            if self.facts.call_kind(maker) is Kind.OPTIMIZER and self.facts.under_scope(maker):
                classes = self.facts.scope_classes_at(maker)
                if classes and not classes <= SINGLE_REPLICA:
                    return True
        return False

    def _keras_runs_it(self, function: cst.FunctionDef) -> bool:
        """``train_step`` / ``test_step`` of a Keras model: ``fit`` runs it per replica."""
        cls = self.facts.values.class_of(function)
        return cls is not None and function.name.value in ("train_step", "test_step") and (
            cls in self.facts.keras_classes or any(self.facts.local_definition(b.value) is None for b in cls.bases)
        )

    def _eager_training_loop(self, call: cst.Call, target: cst.BaseExpression) -> cst.CSTNode | None:
        """For ``strategy.run(step)`` outside any tf.function, with a step that trains and is
        not a tf.function itself: the call, when it is in a loop; the function holding it, when
        that function is called in a loop; otherwise None."""
        steps = self.steps
        step = steps.definition(target)
        if step is None or steps.compiled(step) or steps.in_graph(call) or not steps.trains(step):
            return None
        for ancestor in self.program.ancestors(call):
            if isinstance(ancestor, (cst.For, cst.While)):
                return call
            if isinstance(ancestor, cst.FunctionDef):
                looped = any(
                    _loop_of(self.program, ref) is not None
                    for ref in self.facts.references(ancestor)
                    if isinstance(self.program.parent(ref), cst.Call)
                )
                return ancestor if looped else None
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return None
        return None

    def _decorate(self, call: cst.Call, function: cst.FunctionDef, edits: BlockEdits) -> None:
        """``def train_step(x): return strategy.run(step, ...)`` called in a loop: make it a
        tf.function."""
        program = self.program
        tf = module_alias(program, "tensorflow")
        if tf is None:
            raise NotFound("the script does not import tensorflow as a module (import tensorflow as tf)")
        step = self.steps.definition(self.steps.run_target(call))  # type: ignore[arg-type]
        for traced in (function, step):
            why = python_effect(program, self.steps, traced) if traced is not None else "is not defined in this file"
            if why:
                raise NotFound(f"{traced.name.value if traced else 'the step'}() {why}, which would behave differently inside a tf.function")
        decorator = cst.Decorator(cst.parse_expression(f"{tf}.function"))
        edits.replace(function, lambda node: node.with_changes(decorators=[decorator, *node.decorators]))
        if step is not None:
            self._build_optimizers(step, edits)

    def _build_optimizers(self, step: cst.FunctionDef, edits: BlockEdits) -> None:
        """Traced now, the step would make a Keras 3 optimizer's variables per replica inside
        the tf.function, which fails on GPUs (:mod:`autofix.analysis.steps.optimizer_builds`):
        each optimizer it updates with is built before, right after what it needs is made, or
        the fix is refused with why."""
        program = self.program
        if not MultiWorker.of(program).keras.keras3:
            return
        updates = [
            c for c in nodes_in(step, cst.Call)
            if isinstance(c.func, cst.Attribute) and c.func.attr.value in ("apply_gradients", "minimize")
        ]
        builds, refused = optimizer_builds(program, self.facts, updates, ModelPrep.of(program)._built_where_made)
        if refused:
            raise NotFound(refused[0].reason.replace(", then migrate", ""))
        tf = module_alias(program, "tensorflow") or "tf"
        for build in builds:
            index = list(build.block.body).index(build.statement)  # type: ignore[union-attr]
            if isinstance(build, InStepBuild):
                made = cst.parse_statement(build.code.replace("tf.init_scope", f"{tf}.init_scope"))
                comment, where = IN_STEP_COMMENT, index
            else:
                made, comment, where = cst.parse_statement(f"{build.code}\n"), BUILD_COMMENT, index + 1

            def insert(body, index, made=made.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(comment))])):
                # Right after the statement it follows, or right before the update: what the
                # next statement's blank lines and comments say stays with it.
                body = list(body)
                return body[:index] + [made] + body[index:]

            edits.insert(build.block, where, insert)

    # --- strategy.run fed undistributed data ----------------------------------------------------

    def _undistributed(self) -> None:
        inputs = Inputs.of(self.program)
        by_run: dict[cst.Call, list[Feed]] = {}
        for feed in inputs.undistributed:
            by_run.setdefault(feed.run, []).append(feed)
        # Runs fed by one loop share its fix: the first plans it, the others follow it.
        planned: dict[int, str | None] = {}
        for run, feeds in by_run.items():
            message = FEED_MESSAGE.format(what=_fed(self.program, feeds))
            try:
                plan = distribution(inputs, feeds)
            except NotDistributable as why:
                self.report(run, message, str(why))
                continue
            key = id(plan.loop)
            if key in planned:
                self.report(run, message, planned[key])
                continue
            fixed = self.fix(run, message, lambda edits, plan=plan: self._distribute(plan, edits))
            planned[key] = None if fixed else f"the loop on line {self.program.line(plan.loop)} could not be fixed"

    def _distribute(self, plan, edits: BlockEdits) -> None:
        """``strategy.experimental_distribute_dataset(dataset)`` once, before the outermost loop,
        iterated instead of the dataset."""
        program = self.program
        strategy = plan.strategy
        if isinstance(strategy, cst.Name) and not visible_at(program, strategy, plan.before):
            raise NotFound(f"{strategy.value} is not the same strategy where the dataset is iterated")
        iterated = plan.iterated if plan.iterated is not None else plan.dataset
        if not visible_at(program, iterated, plan.before):
            raise NotFound(f"{program.module.code_for_node(iterated)} is not in view before the loop")
        block = program.block_of(plan.before)
        if block is None:
            raise NotFound("the loop is not a statement of a block")
        name = fresh_names(program, [f"dist_{plan.dataset.value}"])[f"dist_{plan.dataset.value}"]
        code = program.module.code_for_node(strategy)
        # Distributed before the outermost loop, which may also run where the strategy is None
        # (a trainer's single-device path): spelled so that it works there too.
        spelled = on_both_paths(program, code, plan.before)
        if spelled is None:
            raise NotFound(
                f"{code} may be None (line {program.line(may_be_none(program, code, plan.before))}), and the file does not "
                "import tensorflow by name to distribute the dataset where it is None"
            )
        code = spelled
        statement = cst.parse_statement(f"{name} = {code}.experimental_distribute_dataset({program.module.code_for_node(iterated)})\n")
        edits.replace(iterated, lambda _node: cst.Name(name))
        for again in plan.also:
            edits.replace(again, lambda _node: cst.Name(name))
        for read in plan.gathered:
            # Read outside the step: the global batch, the replicas' shares put back together.
            gather = cst.parse_expression(f"{code}.gather(batch, axis=0)")
            edits.replace(read, lambda node, gather=gather: gather.with_changes(args=[gather.args[0].with_changes(value=node), gather.args[1]]))
        index = list(block.body).index(plan.before)

        def insert(body, index):
            body = list(body)
            first = statement.with_changes(leading_lines=body[index].leading_lines)
            body[index] = body[index].with_changes(leading_lines=())
            return body[:index] + [first] + body[index:]

        edits.insert(block, index, insert)

    # --- strategy.run(model) ---------------------------------------------------------------------

    def _replace_model_run(self, program: Program, call: cst.Call, target: cst.BaseExpression, edits: BlockEdits) -> None:
        facts = Facts.of(program)
        model = root_name(target)
        if model is None:
            raise NotFound("the model is not a plain name autofix can follow")
        strategy = call.func.value  # type: ignore[union-attr]
        if not isinstance(strategy, cst.Name):
            raise NotFound("the strategy is not a plain name")
        statement, block = _placement(program, call)
        if _loop_of(program, call) is not None:
            raise NotFound(
                "the call is inside a loop, where a generated step cannot be defined; write a "
                "per-replica step function that trains on the loop's batches and pass it to strategy.run"
            )
        tf = module_alias(program, "tensorflow")
        if tf is None:
            raise NotFound("the script does not import tensorflow as a module (import tensorflow as tf)")
        compiled = compile_of(facts, model)
        if compiled is None:
            raise NotFound(f"{model.value} is not compiled once, so there is no loss or optimizer to train with")
        built = [facts.assigned_value(b) for b in facts.bindings(model) or []]
        keras = keras_spelling(program, [compiled.call, *(v for v in built if v is not None)])
        making, loss_callable = per_example_loss(program, compiled.loss, keras)
        dataset = self._dataset(program, model, call)
        batch = batch_size_of(program, dataset)
        names = fresh_names(program, ["loss_object", "train_step", "dist_dataset"])
        loss_fn = loss_callable or names["loss_object"]
        global_batch = ""
        if batch is not None and visible_at(program, batch, call):
            global_batch = f", global_batch_size={program.module.code_for_node(batch)}"
        locals_ = _step_locals([model.value, loss_fn.split(".")[0], tf, *(n.value for n in names_in(batch))])
        body = (
            f"@{tf}.function\n"
            f"def {names['train_step']}(inputs):\n"
            f"    {locals_['features']}, {locals_['labels']} = inputs\n"
            f"    with {tf}.GradientTape() as {locals_['tape']}:\n"
            f"        {locals_['predictions']} = {model.value}({locals_['features']}, training=True)\n"
            f"        {locals_['per_example_loss']} = {loss_fn}({locals_['labels']}, {locals_['predictions']})\n"
            f"        {locals_['loss']} = {tf}.nn.compute_average_loss({locals_['per_example_loss']}{global_batch})\n"
            f"    {locals_['gradients']} = {locals_['tape']}.gradient({locals_['loss']}, {model.value}.trainable_variables)\n"
            f"    {model.value}.optimizer.apply_gradients(zip({locals_['gradients']}, {model.value}.trainable_variables))\n"
            f"    return {locals_['loss']}\n"
        )
        module_level = isinstance(block, cst.Module)
        gap = [cst.EmptyLine(indent=False)] * (2 if module_level else 1)
        comment = cst.EmptyLine(comment=cst.Comment(COMMENT))
        new: list[cst.BaseStatement] = []
        if making is not None:
            make = cst.parse_statement(f"{names['loss_object']} = {making}\n")
            if facts.under_scope(call):
                new.append(make)
            else:
                new.append(cst.parse_statement(f"with {strategy.value}.scope():\n    {names['loss_object']} = {making}\n"))
        step = cst.parse_statement(body)
        new.append(step.with_changes(leading_lines=gap) if new else step)
        dist = cst.parse_statement(
            f"{names['dist_dataset']} = {strategy.value}.experimental_distribute_dataset({program.module.code_for_node(dataset)})\n"
        )
        new.append(dist.with_changes(leading_lines=gap))
        new[0] = new[0].with_changes(leading_lines=[*statement.leading_lines, comment])
        run = f"{strategy.value}.run({names['train_step']}, args=(next(iter({names['dist_dataset']})),))"
        whole = isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(s, cst.Expr) and s.value is call for s in statement.body
        )
        replacement = run if whole else f"{strategy.value}.reduce({tf}.distribute.ReduceOp.SUM, {run}, axis=None)"
        edits.replace(call, lambda _node: cst.parse_expression(replacement))
        index = list(block.body).index(statement)

        def insert(body, index, new=new):
            body = list(body)
            body[index] = body[index].with_changes(leading_lines=())
            return body[:index] + new + body[index:]

        edits.insert(block, index, insert)

    def _dataset(self, program: Program, model: cst.Name, call: cst.Call) -> cst.BaseExpression:
        for dataset in fit_datasets(Facts.of(program), model):
            # ``fit(train_ds.take(1))`` trains on (part of) ``train_ds``.
            while (
                isinstance(dataset, cst.Call)
                and isinstance(dataset.func, cst.Attribute)
                and dataset.func.attr.value in PASSTHROUGH
            ):
                dataset = dataset.func.value
            if isinstance(dataset, cst.Name) and visible_at(program, dataset, call) and batch_size_of(program, dataset) is not None:
                if program.position(dataset).start.line < program.position(call).start.line or _defined_before(program, dataset, call):
                    return dataset
        raise NotFound(
            f"no batched tf.data dataset that {model.value} is fit on is named before this line, "
            "so there is no real data to feed the step"
        )

    # --- eager strategy.run in a loop ----------------------------------------------------------

    def _wrap_in_function(self, program: Program, call: cst.Call, edits: BlockEdits) -> None:
        tf = module_alias(program, "tensorflow")
        if tf is None:
            raise NotFound("the script does not import tensorflow as a module (import tensorflow as tf)")
        target = self.steps.run_target(call)
        step = self.steps.definition(target) if target is not None else None
        if step is None or target is None:
            raise NotFound("the step function is not defined in this file, so it cannot be shown safe to trace")
        why = python_effect(program, self.steps, step)
        if why:
            raise NotFound(f"{step.name.value}() {why}, which would behave differently inside a tf.function")
        params = _simple_args(call)
        if params is None:
            raise NotFound("its arguments are not a plain tuple of names")
        _placement(program, call)  # the call must be a line of its own, else NotFound
        loop = _loop_of(program, call)
        if loop is None or program.block_of(loop) is None:
            raise NotFound("the loop is not a statement of a block")
        outer = program.block_of(loop)
        names = fresh_names(program, [f"distributed_{step.name.value}"])
        wrapper_name = names[f"distributed_{step.name.value}"]
        run_what = program.module.code_for_node(target)
        strategy = program.module.code_for_node(call.func.value)  # type: ignore[union-attr]
        args = ", ".join(params)
        wrapper = cst.parse_statement(
            f"@{tf}.function\n"
            f"def {wrapper_name}({args}):\n"
            f"    return {strategy}.run({run_what}, args=({args}{',' if len(params) == 1 else ''}))\n"
        )
        self._build_optimizers(step, edits)
        comment = cst.EmptyLine(comment=cst.Comment("# Runs the step as one graph on every replica, not op by op."))
        gap = [cst.EmptyLine(indent=False)] * (2 if isinstance(outer, cst.Module) else 1)
        edits.replace(call, lambda _node: cst.parse_expression(f"{wrapper_name}({args})"))
        index = list(outer.body).index(loop)

        def insert(body, index):
            body = list(body)
            first = wrapper.with_changes(leading_lines=[*body[index].leading_lines, comment])
            body[index] = body[index].with_changes(leading_lines=gap)
            return body[:index] + [first] + body[index:]

        edits.insert(outer, index, insert)


def _callee_text(program: Program, call: cst.CSTNode) -> str:
    return program.module.code_for_node(call.func) + "(...)" if isinstance(call, cst.Call) else program.module.code_for_node(call)


def _fed(program: Program, feeds: list[Feed]) -> str:
    """What the undistributed data is, for the message."""
    origins = [o for feed in feeds for o in feed.undistributed]
    kinds = {o.kind for o in origins}
    if "foreign" in kinds:
        handed = next(o for o in origins if o.kind == "foreign")
        method = program.enclosing_function(handed.node)
        return (
            f"data from {handed.node.name.value}, handed to {method.name.value}() while the strategy is this class's own "  # type: ignore[union-attr]
            f"(line {program.line(handed.made[0])}) and no module of the project distributes data"
        )
    if "shard" in kinds:
        shard = next(o for o in origins if o.kind == "shard")
        if isinstance(shard.node, cst.Attribute):  # ``batch.values``: every replica's, in one tuple
            return f"the replicas' shards in one tuple ({program.module.code_for_node(shard.node)})"
        return f"one replica's shard ({program.module.code_for_node(shard.node)})"
    if kinds == {"array"}:
        return "a NumPy array"
    if kinds <= {"array", "tensor"}:
        tensor = next(o for o in origins if o.kind == "tensor")
        return f"a tensor made on one device ({_callee_text(program, tensor.node)}, line {program.line(tensor.node)})"
    dataset = next(o for o in origins if o.kind == "dataset")
    facts = Facts.of(program)
    named = dataset.named or dataset.node
    if isinstance(named, cst.Name) and len(facts.bindings(named) or []) == 1:
        return f"a batch of {named.value}"
    return f"a batch of the dataset made on line {program.line(dataset.made[0])}" if dataset.made else "a batch of a dataset"


def _given_inputs(call: cst.Call) -> bool | None:
    """Whether ``strategy.run(fn, args, kwargs)`` passes ``fn`` anything: False for no
    ``args`` / ``kwargs`` or empty literals, None when they are not literals."""
    given: list[bool | None] = []
    for keyword, position in (("args", 1), ("kwargs", 2)):
        value = argument_value(call, keyword, position)
        if value is None or isinstance(value, cst.Name) and value.value == "None":
            continue
        if isinstance(value, (cst.Tuple, cst.List, cst.Dict)):
            given.append(bool(value.elements))
        else:
            given.append(None)
    if any(given):
        return True
    return None if None in given else False


def _keras_method(facts: Facts, steps: Steps, call: cst.Call, target: cst.BaseExpression) -> str | None:
    """The Keras training or prediction method (``train_on_batch``...) that ``strategy.run``
    runs, directly or in the step function it is given."""
    if isinstance(target, cst.Attribute):
        return target.attr.value if target.attr.value in TRAIN_METHODS and _model_like(facts, target.value) else None
    step = steps.definition(target)
    if step is None or steps.single_replica(call):
        return None
    for inner in steps.calls(step):
        func = inner.func
        if isinstance(func, cst.Attribute) and func.attr.value in TRAIN_METHODS and _model_like(facts, func.value):
            return func.attr.value
    return None


def _model_like(facts: Facts, expr: cst.BaseExpression) -> bool:
    """A Keras model (or layer), or an attribute named for one (``self.model``)."""
    if _keras_object(facts, expr):
        return True
    path = attribute_path(expr)
    return path is not None and len(path) > 1 and "model" in words(path[-1])


def _keras_object(facts: Facts, expr: cst.BaseExpression) -> bool:
    root = root_name(expr)
    if root is None:
        return False
    kinds = facts._value_kinds(root)
    return any(k in (Kind.MODEL, Kind.LAYER, Kind.LOAD) or isinstance(k, cst.FunctionDef) and facts.effects.get(k) and facts.effects[k].creates for k in kinds)


def _placement(program: Program, call: cst.Call) -> tuple[cst.BaseStatement, cst.Module | cst.IndentedBlock]:
    statement = program.statement_of(call)
    block = program.block_of(statement) if statement is not None else None
    if statement is None or block is None or not isinstance(statement, cst.SimpleStatementLine):
        raise NotFound("the call is not on a line of its own in a block")
    return statement, block


def _defined_before(program: Program, name: cst.Name, site: cst.CSTNode) -> bool:
    bindings = Facts.of(program).bindings(name) or []
    line = program.position(site).start.line
    return bool(bindings) and all(program.position(b).start.line < line for b in bindings)


def _step_locals(read: list[str]) -> dict[str, str]:
    """Local names of the generated step, kept clear of the names it reads."""
    taken = set(read)
    return {name: fresh_name(taken, name) for name in ("features", "labels", "tape", "predictions", "per_example_loss", "loss", "gradients")}


def _simple_args(call: cst.Call) -> list[str] | None:
    """The names in ``args=(a, b)`` (``[]`` without args), or None if anything else is passed."""
    rest = call.args[1:]
    if not rest:
        return []
    if len(rest) != 1 or rest[0].keyword is None or rest[0].keyword.value != "args":
        return None
    value = rest[0].value
    if not isinstance(value, (cst.Tuple, cst.List)):
        return None
    names = []
    for element in value.elements:
        if not isinstance(element.value, cst.Name) or isinstance(element, cst.StarredElement):
            return None
        names.append(element.value.value)
    return names


def _loop_of(program: Program, call: cst.Call) -> cst.BaseStatement | None:
    """The outermost loop around the call in its function: the wrapper goes before it, so it
    is defined (and traced) once, not on every pass of an outer loop."""
    loop = None
    for ancestor in program.ancestors(call):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            loop = ancestor
    return loop
