"""TFD010 migrate-to-strategy: training on one device, moved to a tf.distribute strategy by
``autofix migrate``.

Runs only under ``autofix migrate`` (``--strategy mirrored``, the default, or
``multiworker``), on a file that makes no strategy and trains. It does the one thing no other
rule does: it creates the strategy, once, in the function that trains (the module for a
script, the body of ``if __name__ == "__main__":`` for one that trains only when it is run), after the imports, device setup, mixed-precision policy and seeding that come before
the training, and before the first object the training makes. A custom training step (a
function that applies gradients, called by the loop) is run per replica: its calls go to a
generated ``distributed_<step>`` that runs it with ``strategy.run`` and combines what it
returns (its loss with ``strategy.reduce(SUM, ...)``, what its metrics show with ``MEAN``, as
``fit`` does with ``train_step``'s logs, a mean over the batch with ``MEAN``, a sum or a count
over it with ``SUM``, a model's rows with ``strategy.gather``, each value of a returned dict by
its own kind: :mod:`autofix.analysis.migration.step_returns`), a ``tf.function`` when the step was one
or has no Python side effect that tracing would run once (the step itself is not: a
tf.function inside ``strategy.run`` cannot aggregate gradients). A step the loop calls on values
it computes from the batch (``train_step(tf.cast(x, tf.float32) / 255.0, y)``) gets a wrapper
that takes the batch and computes them on every replica, from its share, before running the step
(``inputs = strategy.run(train_step_inputs, args=(x, y))``, then ``strategy.run(train_step,
args=inputs)``), where each example's value is computed from that example alone
(:mod:`autofix.analysis.migration.step_inputs`). A step written inline in a loop
body is first moved into a function of its own that the loop calls with the batch (see
:mod:`autofix.analysis.migration.inline_steps`; ``_tfd010_inline.py`` writes it), and the next pass
migrates that function as any custom step. A method of a Keras model of
this file that the loop calls on the one object it makes (``model.train(x)``) is such a step
too: the wrapper runs ``strategy.run(model.train, ...)``, and the object's construction (with
what its ``__init__`` makes) goes into the scope. So is a method the loop calls on a parameter of a
module-level function (``def train(gan, ds): for x, _ in ds: gan.step(x)``) when every call of
the function passes one object of one Keras class of this file: the wrapper is made first in
that function (``strategy.run(gan.step, ...)``, the object being the parameter there), the
dataset parameter is distributed there, and the passed objects' constructions go into the scope
where the entry trains. ``tf.Variable`` objects a step trains, made by
hand in the training block, are made in the scope where they are (they become mirrored).
A step (or a model's ``train_step``) that clips its gradients with ``tf.clip_by_global_norm``
clips by the norm of the all-reduced gradient (``use_norm=``): each replica has only its share
(:mod:`autofix.analysis.migration.clipping`). A loss function handed to ``compile`` that averages
over the whole batch returns one loss per example instead, and a loss object summing over it is
weighed by ``1 / num_replicas_in_sync``, where that is shown to be the same
(:mod:`autofix.analysis.migration.compiled_losses`: Keras 3 divides neither by the replicas). Counts of
optimizer steps written as numbers (a schedule's boundaries, decay and warm-up steps,
``save_freq=<int>``) are left as they are, each with a finding that says they now mean N x the
examples (:mod:`autofix.analysis.migration.step_counts`). Boolean arrays handed to ``fit`` or the trained
model's ``evaluate`` (Keras 3 cannot take them under a strategy) are cast to float32 in the call, where one device's
Keras converts them so itself: inputs of a functional model with float inputs, targets read
only by Keras's own losses and metrics (:mod:`autofix.analysis.migration.boolean_casts`). The trained model's
``evaluate`` on arrays is given ``batch_size=min(B * N, len(x) // N * N)`` (B its batch, 32 when
not given): Keras 3 fails when the first batch does not split evenly over the replicas, and the
result does not depend on the batch (:mod:`autofix.analysis.migration.eval_batches`); one given
``steps=``, ``*args`` or ``**options``, inputs whose size no expression reads again, or a model
with its own ``test_step`` is left as it is, with a note at the call. A model class of the file
with its own ``train_step`` and no ``call()``, around models built where they are made, is marked
built (Keras 3 builds a model under a strategy by calling it); one compiled with metrics or a
loss, which Keras 3 builds by calling it even so, gets the ``call()`` returning what its
``train_step`` hands them, and its optimizer built on the variables the step applies it to
(:mod:`autofix.analysis.migration.wrapper_build`). The other rules then do the rest in the same pass, until nothing changes: the model, optimizer, metrics and ``compile`` into
``strategy.scope()`` (TFD001), the single-device batch kept as the per-replica batch and
training fed the global batch (TFD002), the dataset distributed (TFD003), the loss averaged over
the global batch (TFD004). The migration is written only when the result parses, a second pass
changes nothing, ``check`` finds nothing left in it, every batch fed to training is shown to be
the global batch and every step is fed distributed batches; otherwise the file is left alone and
each problem is named.

Not fixed (not migrated; reported with the reason):
- a step written inline in the loop body that cannot be split safely (the reasons are those of
  :mod:`autofix.analysis.migration.inline_steps`);
- a method step called on an object that is not one name bound once to a Keras model or layer
  of this file, also called by the class itself, keeping Python state on its object
  (``self.steps += 1``: N times per step), or applying an optimizer that cannot be followed to
  where it is made;
- a method step called on a function's parameter (``def train(gan, ds): gan.step(x)``) where
  a call of the function passes what cannot be followed to one object of one Keras class of
  this file, the step is given what is not a batch of a ``for`` loop over a parameter of the
  function (batches sampled by hand), or the strategy is made inside a function (which the
  loop's function does not see); a method step whose object the file hands to a function of
  another module of the project (refused at that call, naming the module);
- a step whose loss has a term of unknown reduction (a ``tf.compat.v1`` loss, a loss function
  from another module);
- ``tf.Variable`` objects a step trains that are made where a scope cannot be added around
  them alone (under an ``if``, in a ``with``, bound more than once), put in a container that is
  filled later, or assigned by the step itself (a mirrored variable needs an aggregation then);
- a step called on values computed from the batch that are not shown to be computed example
  by example (a reduction over the batch, ``x - tf.reduce_mean(x)``; an index, a reshape, a
  random draw, a call of a function that does more than compute and return, a local value),
  given by keyword, or computed differently at different calls;
- a step that takes no batch (it reads its data from globals), returns what is neither its
  loss, its metrics' results, a model's rows, nor a mean or a sum over the batch (a maximum, a
  reduction over given axes, a value per example, a sum divided by something, a loss object's
  value it does not differentiate), takes ``*args`` / keyword-only parameters, is used as a value,
  places its work on devices itself (``tf.device`` towers: distributed by hand already), or
  draws random numbers in Python (NumPy's noise: a constant once traced);
- a model built for a fixed batch (``stateful=True``, ``batch_size=``), an in-batch objective;
- a model class with its own ``train_step`` and no ``call()`` holding a model or layer not built
  where it is made, or compiled with metrics or a loss where what its ``train_step`` hands them
  is not one model it holds called on the inputs of its batch;
- boolean arrays handed to ``fit`` whose cast is not shown to train the same (a model not built
  where it is made, or of the file's own class, an input of another dtype, a loss or metric of
  the file's own, an array that may be something else than a NumPy boolean array, a validation
  set given by a name);
- the trained model's ``evaluate`` on fewer examples than there may be replicas, or its
  ``predict`` on as few when it has an LSTM or Conv1D layer (Keras 3 splits them over the
  replicas and fails: :mod:`autofix.analysis.migration.few_examples`), unless that ``predict``
  is a ``Sequential``'s given only its examples: it becomes ``model(x, training=False).numpy()``;
- a loss compiled for ``fit`` that reduces over the batch itself where the rewrite cannot be
  shown the same (the function is used elsewhere, examples are weighed, its mean is not of
  entries of ``y_true`` and ``y_pred``, or of their sums or means over each example's own axes;
  a sum among other losses or weighed already);
- gradients clipped per tensor or per entry in a step (``tf.clip_by_norm``, ``tf.clip_by_value``),
  and, where the file may run on Keras 3, an optimizer given ``clipnorm=``, ``global_clipnorm=``
  or ``clipvalue=`` (Keras 3 clips each replica's share before adding them up: measured);
- training that goes through another module of the project where the migration cannot be
  shown safe (:mod:`autofix.analysis.migration.imported`): a model made by a function there that
  does more than build it (trains, makes a strategy, compiles with a loss or optimizer it cannot
  judge there, calls yet another module), a model class there with its own ``train_step``, a
  function or class there that trains, a model made by a module it cannot find; reported at the
  line, naming the other file and line. (A model made by another module's function that only
  builds it is migrated: the call goes into the scope, as a construction of the file does. A
  method of another module's plain class that fits arrays on a model the class builds and
  compiles in other methods is migrated in both files: those calls into the scope, the global
  batch passed to a ``batch_size`` parameter the method hands to its ``fit``, with the
  validation batch a fit of the file gets: :mod:`autofix.analysis.migration.method_fits`.)
- ``fit`` on Keras 3 under ``--strategy multiworker`` (it fails with several workers);
- anything the other rules cannot fix in the migrated code.
"""

from __future__ import annotations

import libcst as cst

from autofix.codemods._tfd010_inline import extract
from autofix.analysis.migration.compiled_losses import Weighed
from autofix.analysis.migration.eval_batches import EvalBatch
from autofix.analysis.migration.few_examples import called_directly
from autofix.analysis.migration.single_device import KINDS, ROWS, CustomStep, Refusal, SingleDevice
from autofix.analysis.migration.model_prep import ModelPrep
from autofix.analysis.steps.optimizer_builds import BUILD_COMMENT as OPTIMIZER_BUILD_COMMENT, IN_STEP_COMMENT as OPTIMIZER_IN_STEP_COMMENT, InStepBuild
from autofix.analysis.migration.step_logs import LOGS
from autofix.analysis.migration.step_returns import DICT, SUM
from autofix.analysis.migration.placement import Placement
from autofix.analysis.migration.reported_losses import shares as reported_shares
from autofix.analysis.migration.step_counts import NOTE_MESSAGE as COUNT_MESSAGE, StepCounts, note as step_count_note
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import is_wall
from autofix.analysis.steps.tracing import python_effect
from autofix.analysis.training.multiworker import MultiWorker
from autofix.codegen import BlockEdits, add_argument, NotFound, ScopeSpan, fresh_name, module_alias, visible_at, wrap_spans
from autofix.results import NOT_MIGRATED
from autofix.rule import Example, Rule

MESSAGE = "trains on one device: moved to tf.distribute.{cls}"
# A module whose only training is a model's own train_step, fitted by another module of the
# project: migrated with that module, not on its own (not a decline).
ELSEWHERE_MESSAGE = "trains on one device where another module trains it"
EVALUATE_MESSAGE = "evaluate left as it is by the migration: its first batch may not split evenly over the replicas"
# What Keras batches arrays by when fit or evaluate is not told.
KERAS_DEFAULT_BATCH = 32
BUILT_COMMENT = "# Built: its models are; under a strategy Keras 3 would build it by calling it, and it has no call()."
# A call() given to such a model compiled with metrics or a loss, which Keras 3 builds with what it returns.
CALL_COMMENT = "# What train_step hands its compiled metrics: under a strategy Keras 3 builds them before fit by calling the model."
MODEL_IN_STEP_COMMENT = "# Keras 3 builds a Sequential made without its input's shape on its first call: built when the step is traced, outside it."
OPTIMIZER_COMMENT = "# Built on the variables train_step applies it to: under a strategy Keras 3 would build it on every variable of the model."


class MigrateToStrategy(Rule):
    CODE = "TFD010"
    NAME = "migrate-to-strategy"
    DESCRIPTION = "Training on one device, moved to a tf.distribute strategy (autofix migrate only)"
    MIGRATION = True
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "BATCH_SIZE = 64\n"
                "(x, y), _ = tf.keras.datasets.mnist.load_data()\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x / 255.0, y)).batch(BATCH_SIZE)\n"
                "model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])\n"
                'model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "\n"
                "BATCH_SIZE = 64\n"
                "(x, y), _ = tf.keras.datasets.mnist.load_data()\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x / 255.0, y)).batch(BATCH_SIZE * strategy.num_replicas_in_sync)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "model = tf.keras.models.load_model(\"model.keras\")\n"
                "print(model.evaluate(test_dataset))\n"
            ),
        ),
    )

    def applies(self) -> bool:
        return self.program.migration is not None and not SingleDevice.of(self.program).uses_strategy

    def check(self) -> None:
        single = SingleDevice.of(self.program)
        if not single.trains:
            return
        kind = KINDS[self.program.migration]  # type: ignore[index]
        message = MESSAGE.format(cls=kind.cls)
        refusals = single.refusals + ModelPrep.of(self.program).unbuilt[1]
        if kind.keras3_fit_fails and single.fits and MultiWorker.of(self.program).keras.keras3:
            refusals.append(Refusal(single.fits[0].call, (
                f"Keras 3 fit cannot train under {kind.cls} with several workers (keras-team/keras#20585): "
                "write a custom training loop, or use tf_keras (TF_USE_LEGACY_KERAS=1), then migrate"
            )))
        if refusals:
            for refusal in refusals:
                self.report(refusal.node, NOT_MIGRATED, refusal.reason)
            return
        anchor = _anchor(single)
        elsewhere = Placement.of(self.program).trained_elsewhere()
        if elsewhere is not None:
            self.report(anchor, ELSEWHERE_MESSAGE, elsewhere)
            return
        if self.fix(anchor, message, lambda edits: self._plan(single, kind.cls, edits), refused=NOT_MIGRATED):
            # What the migration leaves as it is but changes the meaning of: counts of steps.
            for count in StepCounts.of(self.program).found:
                self.report(count.node, COUNT_MESSAGE, step_count_note(self.program, count))
            # And an evaluate whose batch cannot be made to split evenly over the replicas.
            for node, note in single.eval_batches.left:
                self.report(node, EVALUATE_MESSAGE, note)

    def _plan(self, single: SingleDevice, cls: str, edits: BlockEdits) -> None:
        program = self.program
        if single.inline_steps:
            # First the steps written inline go into functions of their own: the next pass
            # migrates the file as one whose loops call a step.
            inserts = _Inserts()
            extract(program, single.inline_steps, set(self.facts.names()), edits, inserts)
            inserts.plan(edits)
            return
        place = Placement.of(program)
        prep = ModelPrep.of(program)
        block = place.training_block()
        if isinstance(block, Refusal):
            raise NotFound(block.reason)
        taken = set(self.facts.names())
        position = place.position(block)
        tf = module_alias(program, "tensorflow")
        imports: list[cst.BaseStatement] = []
        if tf is not None and isinstance(block, cst.Module) and not _imported_before(program, tf, position):
            # Imported only further down (a later notebook cell): imported here too.
            imports.append(cst.parse_statement(f"import tensorflow as {tf}\n" if tf != "tensorflow" else "import tensorflow\n"))
        if tf is None:
            if "tf" in taken:
                raise NotFound("the script does not import tensorflow, and the name tf is taken")
            tf = "tf"
            imports.append(cst.parse_statement("import tensorflow as tf\n"))
        strategy = fresh_name(taken, "strategy")
        made = cst.parse_statement(f"{strategy} = {tf}.distribute.{cls}()\n")
        inserts = _Inserts()
        after_strategy: list[cst.BaseStatement] = [made]
        if imports and isinstance(block, cst.Module):
            after_strategy = [*imports, made]
        elif imports:
            # Before the function that makes the strategy: after the imports that precede it.
            module = program.module
            top = program.top_statement_in(block, module)
            end = next(i for i, s in enumerate(module.body) if s is top)
            last = max((i for i, s in enumerate(module.body[:end]) if _imports(s)), default=-1)
            inserts.add(module, last + 1, imports)
        for step in single.custom_steps:
            self._plan_step(step, block, strategy, tf, taken, edits, inserts, after_strategy)
        for method in single.method_fits:
            self._plan_method_fit(method, block, position, strategy, edits, inserts)
        self._scope_variables(single, block, position, strategy, inserts)
        for construction in prep.unbuilt[0]:
            if id(construction) not in prep.called:
                self._mark_built(construction, inserts)
        for cls, model in prep.calls.values():
            self._give_call(cls, model, inserts)
        for statement, model in prep.optimizers.values():
            self._build_optimizer(statement, model, inserts)
        for step in single.custom_steps:
            for model_build in step.model_builds:
                home = model_build.block
                index = next(i for i, s in enumerate(home.body) if s is model_build.statement)  # type: ignore[union-attr]
                code = model_build.code.replace("tf.init_scope", f"{tf}.init_scope")
                comment = cst.EmptyLine(comment=cst.Comment(MODEL_IN_STEP_COMMENT))
                inserts.add(home, index, [cst.parse_statement(code).with_changes(leading_lines=[comment])])
        together: dict[tuple[int, int], list] = {}
        for build in single.optimizer_builds[0]:
            together.setdefault((id(build.block), id(build.statement)), []).append(build)
        for builds in together.values():
            # After the statement that makes the last of what they need (in the step: before
            # the update); one comment for them.
            home, statement = builds[0].block, builds[0].statement
            index = next(i for i, s in enumerate(home.body) if s is statement)  # type: ignore[union-attr]
            in_step = isinstance(builds[0], InStepBuild)
            comment = cst.EmptyLine(comment=cst.Comment(OPTIMIZER_IN_STEP_COMMENT if in_step else OPTIMIZER_BUILD_COMMENT))
            made = [cst.parse_statement(b.code.replace("tf.init_scope", f"{tf}.init_scope") if in_step else f"{b.code}\n") for b in builds]
            inserts.add(home, index if in_step else index + 1, [made[0].with_changes(leading_lines=[comment]), *made[1:]])
        for call in prep.default_batches:
            edits.replace(call, _with_default_batch)
        for part in single.boolean_casts.casts:
            edits.replace(part, _as_float32)
        for evaluation in single.eval_batches.found:
            self._even_batch(evaluation, block, strategy, edits)
        for predict in single.one_device_predicts:
            edits.replace(predict, called_directly)
        for clip in single.clips[0]:
            edits.replace(clip.call, lambda node, clip=clip: _clipped_globally(node, clip.gradients.value, tf))
        for loss in single.compiled_losses[0]:
            if isinstance(loss, Weighed):
                replicas = f"{strategy}.num_replicas_in_sync" if _runs_in(program, loss.compile, block) else f"{tf}.distribute.get_strategy().num_replicas_in_sync"
                edits.replace(loss.compile, lambda node, replicas=replicas: _with_keyword(node, "loss_weights", f"1 / {replicas}"))
            else:
                edits.replace(loss.mean, lambda node, loss=loss: _per_example(program, node, loss, tf))
        if MultiWorker.of(program).keras.keras3:
            # Keras 3 hands a train_step each replica's share of a loss it reduces: what the
            # step reports as the loss is the share times the replica count.
            replicas = f"{tf}.distribute.get_strategy().num_replicas_in_sync"
            for name in reported_shares(single.train_steps):
                edits.replace(name, lambda node, replicas=replicas: cst.BinaryOperation(node, cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")), cst.parse_expression(replicas)))
        inserts.add(block, position, after_strategy)
        inserts.plan(edits)

    def _plan_method_fit(self, method, block, position: int, strategy: str, edits: BlockEdits, inserts: "_Inserts") -> None:
        """``m.create_model()`` (what makes the model another module's method fits) into the
        scope, and the global batch passed to the training method (see
        :mod:`autofix.analysis.migration.method_fits`; the other module is edited by the engine)."""
        program = self.program
        body = list(block.body)
        indexes = []
        for builder in method.builders:
            statement = program.statement_of(builder)
            index = next((i for i, s in enumerate(body) if s is statement), None)
            if index is None or index < position:
                raise NotFound(
                    f"the model {program.module.code_for_node(method.call.func)}() trains is made on line "
                    f"{program.line(builder)}, which is not a statement of the block the strategy is made in"
                )
            indexes.append(index)
        for first, last in _runs(sorted(set(indexes))):
            inserts.scope(block, first, last, strategy)
        if not _runs_in(program, method.call, block):
            raise NotFound(f"{program.module.code_for_node(method.call.func)}() is called where the strategy is not in view")
        replicas = f"{strategy}.num_replicas_in_sync"
        scaled = f"{method.batch} * {replicas}"
        added = []
        if method.existing is not None:
            edits.replace(method.existing.value, lambda _node: cst.parse_expression(scaled))
        else:
            added.append((method.keyword, scaled))
        if method.validation is not None:
            # As a fit of the file validating on arrays: a first batch that splits evenly.
            added.append((method.validation_keyword, f"min({scaled}, {method.validation} // {replicas} * {replicas})"))
        if added:
            def edit(node):
                for keyword, code in added:
                    node = add_argument(node, keyword, cst.parse_expression(code))
                return node

            edits.replace(method.call, edit)

    def _even_batch(self, evaluation: EvalBatch, block, strategy: str, edits: BlockEdits) -> None:
        """``model.evaluate(x, y)`` -> ``model.evaluate(x, y, batch_size=min(32 * N, len(x) // N *
        N))``, N the replica count (the strategy's, or the model's own where the strategy's name
        is not seen), an explicit batch kept per replica the same way: a first batch that
        splits evenly over the replicas (see :mod:`autofix.analysis.migration.eval_batches`)."""
        owner = strategy if _runs_in(self.program, evaluation.call, block) else f"{evaluation.model}.distribute_strategy"
        replicas = f"{owner}.num_replicas_in_sync"

        def even(batch: str) -> cst.BaseExpression:
            return cst.parse_expression(f"min({batch} * {replicas}, {evaluation.size} // {replicas} * {replicas})")

        if evaluation.batch is None:
            edits.replace(evaluation.call, lambda node: add_argument(node, "batch_size", even(str(KERAS_DEFAULT_BATCH))))
            return
        if isinstance(evaluation.batch, cst.Name) and evaluation.batch.value == "None":
            edits.replace(evaluation.batch, lambda node: even(str(KERAS_DEFAULT_BATCH)))
            return
        code = self.program.module.code_for_node(evaluation.batch)
        if not isinstance(evaluation.batch, (cst.Name, cst.Attribute, cst.Integer, cst.Subscript, cst.Call)):
            code = f"({code})"
        edits.replace(evaluation.batch, lambda node: even(code))

    def _scope_variables(self, single: SingleDevice, block, position: int, strategy: str, inserts: "_Inserts") -> None:
        """The statements that make the ``tf.Variable`` objects a step trains go into the
        scope where they are (consecutive ones in one block): made there, they are mirrored."""
        body = list(block.body)
        indexes: set[int] = set()
        for step in single.custom_steps:
            for statement in step.variables.statements if step.variables is not None else ():
                index = next((i for i, s in enumerate(body) if s is statement), None)
                if index is None or index < position:
                    raise NotFound(
                        f"the tf.Variable objects the step trains are made on line {self.program.line(statement)}, "
                        "outside the block where the strategy is made, or before it"
                    )
                indexes.add(index)
        for first, last in _runs(sorted(indexes)):
            inserts.scope(block, first, last, strategy)

    def _mark_built(self, construction: cst.Call, inserts: "_Inserts") -> None:
        """``gan = GAN(generator, discriminator)`` -> and ``gan.built = True`` after it (see
        :attr:`ModelPrep.unbuilt`): the statement joins the model's scope block."""
        program = self.program
        statement = program.statement_of(construction)
        home = program.block_of(statement) if statement is not None else None
        name = self.facts.assigned_name(construction)
        if home is None or name is None:
            raise NotFound("the model is not made by a statement of its own")
        comment = cst.EmptyLine(comment=cst.Comment(BUILT_COMMENT))
        marked = [cst.parse_statement(f"{name.value}.built = True\n").with_changes(leading_lines=[comment])]
        # Its layers that hold no variables, which Keras 3 would otherwise build by calling it.
        marked.extend(cst.parse_statement(f"{name.value}.{attribute}.built = True\n") for attribute in ModelPrep.of(self.program).weightless.get(id(construction), ()))
        index = next(i for i, s in enumerate(home.body) if s is statement)
        inserts.add(home, index + 1, marked)

    def _give_call(self, cls: cst.ClassDef, model: str, inserts: "_Inserts") -> None:
        """``class Distiller(keras.Model)`` compiled with metrics -> and a ``call()`` returning
        the prediction its train_step hands them, after its ``__init__`` (see
        :mod:`autofix.analysis.migration.wrapper_build`)."""
        body = list(cls.body.body) if isinstance(cls.body, cst.IndentedBlock) else []
        index = next((i + 1 for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if index is None or not isinstance(cls.body, cst.IndentedBlock):
            raise NotFound(f"{cls.name.value} defines no __init__ of its own to put its call() after")
        definition = cst.parse_statement(
            "def call(self, inputs, training=False):\n"
            f"    {CALL_COMMENT}\n"
            f"    return self.{model}(inputs, training=training)\n"
        )
        inserts.add(cls.body, index, [definition])

    def _build_optimizer(self, statement: cst.SimpleStatementLine, model: str, inserts: "_Inserts") -> None:
        """``super().compile(optimizer=optimizer, ...)`` in a model's own ``compile()`` -> and
        ``self.optimizer.build(self.student.trainable_variables)`` after it (see
        :mod:`autofix.analysis.migration.wrapper_build`)."""
        comment = cst.EmptyLine(comment=cst.Comment(OPTIMIZER_COMMENT))
        built = cst.parse_statement(f"self.optimizer.build(self.{model}.trainable_variables)\n").with_changes(leading_lines=[comment])
        home = self.program.block_of(statement)
        if home is None:
            raise NotFound("the model's compile() calls Keras's where no statement can follow it")
        index = next(i for i, s in enumerate(home.body) if s is statement)
        inserts.add(home, index + 1, [built])

    def _plan_step(
        self, step: CustomStep, block, strategy: str, tf: str, taken: set[str], edits: BlockEdits, inserts: "_Inserts", after_strategy: list
    ) -> None:
        program = self.program
        function = step.function
        name = function.name.value
        wrapper = fresh_name(taken, f"distributed_{name}")
        signature, params, body = self._wrapper_body(step, strategy, tf, taken, wrapper)
        if step.decorator is not None:
            decorator = f"@{program.module.code_for_node(step.decorator.decorator)}\n"
        elif python_effect(program, Steps.of(program), function, tuple(d.node for d in step.host_draws)) is None:
            # An eager step with nothing in it that tracing would run once: run as a graph, as
            # strategy.run is meant to be (an eager one is correct, only slow).
            decorator = f"@{tf}.function\n"
        else:
            decorator = ""
        definition = cst.parse_statement(f"{decorator}def {wrapper}({signature}):\n{body}")
        for draw in step.host_draws:
            edits.replace(draw.node, lambda _node, draw=draw: cst.parse_expression(draw.code(tf)))
        if step.handed_out:
            # A factory returns the step: it returns the wrapper instead, which its callers
            # call as they called the step.
            if step.inputs is not None:
                raise NotFound(f"{name}() is made by a factory and called on arguments the loop computes")
            for ref in step.handed_out:
                edits.replace(ref, lambda _node, wrapper=wrapper: cst.Name(wrapper))
        for call in [] if step.handed_out else step.calls:
            if step.inputs is not None:
                edits.replace(call, lambda node, wrapper=wrapper, params=params: node.with_changes(
                    func=cst.Name(wrapper), args=_plain_args(params)
                ))
                continue
            edits.replace(call.func, lambda _node, wrapper=wrapper: cst.Name(wrapper))
        if step.decorator is not None:
            edits.replace(function, lambda node: node.with_changes(decorators=[d for d in node.decorators if not _is_same(d, step.decorator)]))
        if step.passed:
            self._wrapper_in_caller(step, definition, block, inserts)
            return
        # After the step; a method's wrapper after its class, where the object is in view.
        defined = _class_of(program, function) if step.method else function
        home = program.block_of(defined) if defined is not None else None
        if home is not None and (home is block or isinstance(home, cst.Module) and isinstance(block, cst.Module) or _inside(program, defined, block)):
            if step.method:
                _receiver_in_view(program, step, defined)
            index = next(i for i, s in enumerate(home.body) if s is defined)  # type: ignore[union-attr]
            inserts.add(home, index + 1, [definition])
            return
        if step.method:
            _receiver_in_view(program, step, block.body[0] if block.body else block)
        for call in step.calls:
            if not _runs_in(program, call, block):
                raise NotFound(
                    f"{name}() is called on line {program.line(call)}, where the strategy made in the training "
                    "function is not in view"
                )
        after_strategy.append(definition)


    def _wrapper_body(self, step: CustomStep, strategy: str, tf: str, taken: set[str], wrapper: str) -> tuple[str, list[str], str]:
        """The generated wrapper's signature, parameters and body: it runs the step with
        ``strategy.run`` (first computing its inputs on every replica from the batch, when the
        loop computes them) and combines what the step returns over the replicas."""
        program = self.program
        function = step.function
        name = function.name.value
        params = [p.name.value for p in step.params]
        signature = program.module.code_for_node(function.params.with_changes(params=step.params))
        args = ", ".join(params) + ("," if len(params) == 1 else "")
        run = f"{strategy}.run({step.target}, args=({args}))"
        prelude = ""
        if step.inputs is not None:
            # The loop computes the step's arguments from the batch: the wrapper takes the
            # batch, each replica computes them from its share, then runs the step on them.
            params = list(step.inputs.params)
            signature = ", ".join(params)
            args = ", ".join(params) + ("," if len(params) == 1 else "")
            computed = ", ".join(step.inputs.arguments)
            if len(step.inputs.arguments) == 1:
                computed = f"({computed},)"
            inputs_function = fresh_name(taken | set(params), f"{name}_inputs")
            inputs = fresh_name(set(params) | {strategy, tf, name, inputs_function}, "inputs")
            prelude = (
                f"    def {inputs_function}({signature}):\n        return {computed}\n\n"
                f"    {inputs} = {strategy}.run({inputs_function}, args=({args}))\n"
            )
            run = f"{strategy}.run({step.target}, args={inputs})"
        # Losses are each replica's share of the global loss (summed); what metrics show is
        # each replica's result (averaged, as fit averages train_step's logs); a mean over the
        # batch is averaged, a sum or count over it summed; a model's rows for the replica's
        # examples are gathered into the global batch's.
        def op_of(kind: str) -> str:
            return f"{tf}.distribute.ReduceOp.{'SUM' if kind in ('loss', SUM) else 'MEAN'}"

        ops = [op_of(kind) for kind in step.combined]

        def combined(kind: str, op: str, value: str) -> str:
            if kind == ROWS:
                return f"{strategy}.gather({value}, axis=0)"
            return f"{strategy}.reduce({op}, {value}, axis=None)"

        # Locals of the wrapper: only the names it reads must stay clear.
        local = set(params) | {strategy, tf, name, wrapper, step.target.split(".")[0]}
        if not step.result_used or step.arity == 0:
            body = f"    {run}\n"
        elif step.combined == [LOGS]:
            logs, key, value = (fresh_name(local, base) for base in (_base(step.returned[0], 0, "logs"), "key", "value"))
            body = (
                f"    {logs} = {run}\n"
                f"    return {{{key}: {strategy}.reduce({ops[0]}, {value}, axis=None) for {key}, {value} in {logs}.items()}}\n"
            )
        elif step.combined == [DICT]:
            logs = fresh_name(local, _base(step.returned[0], 0, "logs"))
            items = ", ".join(f"{key}: {combined(kind, op_of(kind), f'{logs}[{key}]')}" for key, kind in step.entries)
            body = f"    {logs} = {run}\n    return {{{items}}}\n"
        elif step.arity == 1:
            body = f"    return {combined(step.combined[0], ops[0], run)}\n"
        else:
            names = [fresh_name(local, _base(value, i)) for i, value in enumerate(step.returned)]
            reduced = ", ".join(combined(kind, op, n) for kind, op, n in zip(step.combined, ops, names))
            body = f"    {', '.join(names)} = {run}\n    return {reduced}\n"
        return signature, params, prelude + body

    def _wrapper_in_caller(self, step: CustomStep, definition: cst.BaseStatement, block, inserts: "_Inserts") -> None:
        """A method step the loop calls on a parameter (``def train(gan, ds): gan.step(x)``):
        its wrapper is made first in that function, where the object is the parameter; the
        strategy it reads is the module's, made before every call of the function."""
        program = self.program
        functions = {id(f): f for f in (program.enclosing_function(call) for call in step.calls)}
        if len(functions) != 1 or None in functions.values():
            raise NotFound(f"{step.function.name.value}() is called through a parameter from more than one function")
        (function,) = functions.values()
        if program.enclosing_function(function) is not None or not isinstance(function.body, cst.IndentedBlock):
            raise NotFound(f"{function.name.value}(), which calls {step.function.name.value}() through a parameter, is not a function of the module")
        if not isinstance(block, cst.Module) and program.enclosing_function(block) is not None:
            raise NotFound(
                f"the strategy is made in a function, where {function.name.value}(), which runs the step, does not see it"
            )
        for site, _value in step.passed:
            if not _runs_in(program, site, block):
                raise NotFound(
                    f"{function.name.value}() is called on line {program.line(site)}, where the strategy is not made"
                )
        body = function.body.body
        start = 1 if body and _is_docstring_statement(body[0]) else 0
        inserts.add(function.body, start, [definition])


def _is_docstring_statement(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _plain_args(names: list[str]) -> list[cst.Arg]:
    """``x, y``: the batch's names, passed on as they are."""
    args = [cst.Arg(cst.Name(n)) for n in names]
    return [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + args[-1:]


def _anchor(single: SingleDevice) -> cst.CSTNode:
    """Where the finding is: the first training site."""
    sites = [s.call for s in single.fits] + [c for step in single.custom_steps for c in step.calls] + [m.call for m in single.method_fits]
    if not sites:
        sites = list(single.updates)
    return min(sites, key=lambda n: single.program.position(n).start.line)


def _with_default_batch(call: cst.Call) -> cst.Call:
    """``fit(x, y, ...)`` on arrays -> ``fit(x, y, ..., batch_size=32)``: Keras's default,
    written out so that it can be kept as each replica's batch."""
    return add_argument(call, "batch_size", cst.Integer(str(KERAS_DEFAULT_BATCH)))


def _as_float32(array: cst.BaseExpression) -> cst.BaseExpression:
    """``x_train`` -> ``x_train.astype("float32")``: a boolean array fit is given, cast as one
    device's Keras converts it (see :mod:`autofix.analysis.migration.boolean_casts`)."""
    value = array
    if not isinstance(array, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not array.lpar:
        value = array.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(value, cst.Name("astype")), [cst.Arg(cst.SimpleString('"float32"'))])


def _clipped_globally(call: cst.Call, gradients: str, tf: str) -> cst.Call:
    """``tf.clip_by_global_norm(grads, C)`` -> the same, clipping by the norm of the
    all-reduced gradient (see :mod:`autofix.analysis.migration.clipping`)."""
    norm = f"{tf}.linalg.global_norm({tf}.distribute.get_replica_context().all_reduce({tf}.distribute.ReduceOp.SUM, {gradients}))"
    return _with_keyword(call, "use_norm", norm)


def _with_keyword(call: cst.Call, keyword: str, code: str) -> cst.Call:
    """``call`` with ``keyword=<code>`` added after its arguments."""
    arg = cst.Arg(keyword=cst.Name(keyword), value=cst.parse_expression(code), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
    ))
    args = list(call.args)
    last = args[-1]
    if last.comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    else:
        arg = arg.with_changes(comma=last.comma)
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, arg])


def _per_example(program, mean: cst.Call, loss, tf: str) -> cst.Call:
    """``tf.reduce_mean(E)`` -> ``tf.reduce_mean(tf.reshape(E, [tf.shape(y_pred)[0], -1]),
    axis=1)``: the mean of each example's entries, whose mean is the mean it was (see
    :mod:`autofix.analysis.migration.compiled_losses`)."""
    averaged = program.module.code_for_node(loss.averaged)
    rows = cst.parse_expression(f"{tf}.reshape({averaged}, [{tf}.shape({loss.predictions})[0], -1])")
    return mean.with_changes(args=[
        cst.Arg(rows, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
        cst.Arg(cst.Integer("1"), keyword=cst.Name("axis"), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        )),
    ])


def _imported_before(program, alias: str, index: int) -> bool:
    """Whether ``import tensorflow as <alias>`` is a statement of the module before ``index``."""
    for statement in program.module.body[:index]:
        if _imports(statement) and any(
            isinstance(s, cst.Import) and any(a.asname is not None and a.asname.name.value == alias or program.module.code_for_node(a.name) == alias for a in s.names)
            for s in statement.body
        ):
            return True
    return False


def _imports(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


class _Inserts:
    """Statements to insert, by block and by index in the original body: one edit per block
    puts them all in (an index is the statement they go before; past the end, at the end)."""

    def __init__(self) -> None:
        self.blocks: dict[int, tuple[object, list[tuple[int, list[cst.BaseStatement]]]]] = {}
        # Spans of statements (first, last: original indexes) to put in a scope, by block.
        self.scoped: dict[int, list[tuple[int, int, str]]] = {}

    def add(self, block, index: int, statements: list[cst.BaseStatement]) -> None:
        self.blocks.setdefault(id(block), (block, []))[1].append((index, statements))

    def scope(self, block, first: int, last: int, strategy: str) -> None:
        self.blocks.setdefault(id(block), (block, []))
        self.scoped.setdefault(id(block), []).append((first, last, strategy))

    def plan(self, edits: BlockEdits) -> None:
        for block, wanted in self.blocks.values():
            gap = [cst.EmptyLine(indent=False)] * (2 if isinstance(block, cst.Module) else 1)
            spans = self.scoped.get(id(block), [])
            if any(first < index <= last for first, last, _ in spans for index, _ in wanted):
                raise NotFound("a statement would be inserted between statements that go into the scope together")

            def edit(body, wanted=wanted, gap=gap, spans=spans):
                body = list(body)
                # From the end, so that each original index still points at its statement; a
                # span is wrapped before what is inserted in front of it.
                operations = [(index, 0, statements) for index, statements in wanted] + [(first, 1, (last, strategy)) for first, last, strategy in spans]
                for index, kind, payload in sorted(operations, key=lambda o: (o[0], o[1]), reverse=True):
                    if kind == 1:
                        last, strategy = payload  # type: ignore[misc]
                        body = list(wrap_spans([ScopeSpan(index, last)], strategy)(body))
                        continue
                    statements = payload
                    # A function set apart from what comes before it, unless it starts its block
                    # (or a notebook cell).
                    starts = index == 0 or is_wall(body[index - 1])
                    new = [
                        s.with_changes(leading_lines=[] if k == 0 and starts else gap) if isinstance(s, cst.FunctionDef) else s
                        for k, s in enumerate(statements)
                    ]
                    if 0 < index < len(body) and _imports(body[index - 1]) and not _imports(body[index]) and _blank_first(body[index]):
                        # After the imports, set apart from them as the code that follows is.
                        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine(indent=False), *new[0].leading_lines])
                    if index < len(body) and isinstance(new[-1], cst.FunctionDef) and not isinstance(body[index], cst.FunctionDef):
                        body[index] = body[index].with_changes(leading_lines=[*gap, *_comments(body[index].leading_lines)])
                    elif index < len(body) and isinstance(new[-1], cst.FunctionDef) and not any(line.comment is None for line in body[index].leading_lines):
                        # A definition that followed a class's last line (its blank lines are the class's).
                        body[index] = body[index].with_changes(leading_lines=[*gap, *body[index].leading_lines])
                    body[index:index] = new
                return body

            edits.add(block, edit)  # type: ignore[arg-type]


def _runs(indexes: list[int]) -> list[tuple[int, int]]:
    """Sorted indexes as runs of consecutive ones: [1, 2, 4] -> [(1, 2), (4, 4)]."""
    runs: list[tuple[int, int]] = []
    for index in indexes:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


def _blank_first(statement: cst.BaseStatement) -> bool:
    lines = statement.leading_lines
    return bool(lines) and lines[0].comment is None


def _comments(lines):
    return [line for line in lines if line.comment is not None]


def _is_same(a: cst.Decorator, b: cst.Decorator) -> bool:
    return a.deep_equals(b)


def _base(value: cst.BaseExpression, index: int, other: str = "") -> str:
    return value.value if isinstance(value, cst.Name) else other or f"loss_{index + 1}"


def _class_of(program, method: cst.FunctionDef) -> cst.ClassDef | None:
    owner = program.parent(program.parent(method))
    return owner if isinstance(owner, cst.ClassDef) else None


def _receiver_in_view(program, step: CustomStep, site: cst.CSTNode) -> None:
    """The object a method step is called on must mean the same where its wrapper is made."""
    receiver = step.calls[0].func.value  # type: ignore[attr-defined]
    if not visible_at(program, receiver, site):
        raise NotFound(
            f"{receiver.value}, whose {step.function.name.value}() trains, is not in view where the strategy is made"
        )


def _inside(program, node: cst.CSTNode, block) -> bool:
    return any(a is block for a in program.ancestors(node))


def _runs_in(program, node: cst.CSTNode, block) -> bool:
    """Whether ``node`` is code of the function whose body is ``block`` (or the module's)."""
    function = program.enclosing_function(node)
    if isinstance(block, cst.Module):
        return True
    if _inside(program, node, block):
        return True  # (in the block itself: the body of ``if __name__ == "__main__":``)
    while function is not None:
        if function.body is block:
            return True
        function = program.enclosing_function(function)
    return False
