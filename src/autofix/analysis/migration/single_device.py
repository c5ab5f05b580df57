"""What a single-device script trains, for ``autofix migrate``: the strategy it can be moved to,
where its training happens (``fit`` sites, custom training steps and where they are called),
and why a script cannot be migrated when it cannot.

A *custom step* is a function of this file that applies gradients (``apply_gradients``,
``minimize``, Keras 3's ``optimizer.apply``), directly or through local helpers it calls, and
that a loop calls: the unit that ``strategy.run`` runs on every replica once the script is
migrated; or a method of a model class of this file that the loop calls on its object
(:mod:`.method_steps`). Only what can be shown right is accepted; everything else is a
:class:`Refusal` with the reason (a loop whose update is written inline, a step that takes no
batch, returns what is neither its loss, what its metrics show, nor a mean or a sum over the
batch (:mod:`.step_returns`), has a loss term of unknown
reduction, places its work on devices itself...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.migration.boolean_casts import BooleanCasts, boolean_casts
from autofix.analysis.migration.eval_batches import EvalBatches, eval_batches
from autofix.analysis.migration.refusal import Refusal
from autofix.analysis.migration.host_draws import HostDraw, host_draws
from autofix.analysis.migration.few_examples import few_examples, one_device_predicts
from autofix.analysis.migration.clipping import Clipping, GlobalClip, optimizer_clip_reason
from autofix.analysis.migration.compiled_losses import CompiledLosses, PerExample, Weighed
from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.imported import ImportedTraining
from autofix.analysis.migration.inline_steps import InlineStep, InlineSteps
from autofix.analysis.migration.unbuilt_models import InStepModelBuild, Unbuilt, in_step_builds
from autofix.analysis.steps.optimizer_builds import OptimizerBuild, optimizer_builds
from autofix.analysis.core.inline_flow import position_of
from autofix.analysis.facts.keras1 import first_keras
from autofix.analysis.steps.method_steps import MethodSteps
from autofix.analysis.program import Program
from autofix.analysis.steps.raw_variables import RawVariables, raw_variables
from autofix.analysis.migration.step_inputs import ComputedInputs, computed_inputs
from autofix.analysis.migration.step_logs import LOGS, shown
from autofix.analysis.migration.step_returns import DICT, ROWS, Combining, Declined
from autofix.analysis.steps.step_losses import unknown_term
from autofix.analysis.steps.custom import Steps, words
from autofix.analysis.syntax import argument_value, attribute_path, nodes_in
from autofix.analysis.steps.tracing import host_random
from autofix.analysis.training.model import TrainingModel
from autofix.analysis.training.sites import FIT_METHODS, Site
from autofix.tf.symbols import IN_BATCH_OBJECTIVES, Kind



@dataclass(frozen=True)
class StrategyKind:
    """A strategy ``autofix migrate --strategy`` can move a script to."""

    name: str
    # The class under ``tf.distribute``.
    cls: str
    # What it distributes over, for messages.
    over: str
    # Keras 3 ``fit`` fails under it with two or more workers (measured, docs/multiworker.md):
    # only custom loops can be moved to it on Keras 3.
    keras3_fit_fails: bool = False


KINDS: dict[str, StrategyKind] = {
    "mirrored": StrategyKind("mirrored", "MirroredStrategy", "the GPUs of one machine"),
    "multiworker": StrategyKind("multiworker", "MultiWorkerMirroredStrategy", "several machines", keras3_fit_fails=True),
}

# Methods that apply gradients to variables: the update of a training step.
UPDATE_METHODS = frozenset({"apply_gradients", "minimize", "apply"})


@dataclass(eq=False)
class CustomStep:
    """A function that applies gradients, called by the training loop."""

    function: cst.FunctionDef
    # The calls that apply gradients in it (or in the local helpers it calls).
    updates: list[cst.Call]
    # Where the loop calls it.
    calls: list[cst.Call] = field(default_factory=list)
    # How many values each ``return`` gives (0: none, 1: one value, k: a tuple of k), and the
    # returned expressions of the first return.
    arity: int = 0
    returned: list[cst.BaseExpression] = field(default_factory=list)
    # Whether any call site uses what it returns.
    result_used: bool = False
    # The ``@tf.function`` decorator it has, if any (it moves to the generated wrapper: a
    # step run by strategy.run must not be a tf.function of its own).
    decorator: cst.Decorator | None = None
    # How each returned value is combined over the replicas, when a call uses them: "loss"
    # (the replicas' shares, summed), "metric" (a metric's result: the replicas' mean, as fit
    # does with train_step's logs), "logs" (a dict of metric results, each so), "mean" or
    # "sum" (a mean, or a sum or count, over the batch: :mod:`.step_returns`), "rows" (a
    # model's output, gathered) or "dict" (a dict, each value combined by its kind: ``entries``).
    combined: list[str] = field(default_factory=list)
    # A returned "dict": its keys (as written) and how each value combines.
    entries: list[tuple[str, str]] = field(default_factory=list)
    # The statements that make the tf.Variable objects it trains (put in the scope).
    variables: RawVariables | None = None
    # A method of a class of this file, called by the loop on one object made here
    # (``model.train(x)``): run per replica as ``strategy.run(model.train, ...)``.
    method: bool = False
    # Arguments the loop computes from the batch (``step(x / 255.0, y)``): the wrapper takes
    # the batch and computes them in the replica (:mod:`.step_inputs`).
    inputs: ComputedInputs | None = None
    # A method step the loop calls on a parameter of its function (``def train(gan, ds):
    # gan.step(x)``): each call of that function and the object it passes; the wrapper is
    # made in that function.
    passed: list[tuple[cst.Call, cst.BaseExpression]] = field(default_factory=list)
    # NumPy draws in it, drawn with tf.random once it runs per replica (:mod:`.host_draws`).
    host_draws: list[HostDraw] = field(default_factory=list)
    # A step a local factory returns (``return step``; ``train_step = make_step(...)``, then
    # ``train_step(x, y)``): the names it is returned by, which return the wrapper instead
    # (the calls stay as written).
    handed_out: list[cst.Name] = field(default_factory=list)
    # Keras 3 Sequential models made without their input's shape that it calls first: built
    # when it is traced, before that call (:mod:`.unbuilt_models`).
    model_builds: list[InStepModelBuild] = field(default_factory=list)

    @property
    def params(self) -> list[cst.Param]:
        """The parameters the loop passes (a method's without ``self``)."""
        params = list(self.function.params.params)
        return params[1:] if self.method else params

    @property
    def target(self) -> str:
        """What ``strategy.run`` runs: the function, or the method on the object the loop
        calls it on."""
        name = self.function.name.value
        if self.method and self.calls and isinstance(self.calls[0].func, cst.Attribute):
            return f"{self.calls[0].func.value.value}.{name}"  # type: ignore[attr-defined]
        return name


class SingleDevice(Derived):
    """The training of a file that makes no strategy (built once per program)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        self.steps_analysis = Steps.of(program)
        # Loops whose update is written inline, by id: their step, when it can be split.
        self._inline_loops: dict[int, InlineStep | None] = {}

    # --- what trains ---------------------------------------------------------------------------

    @cached_property
    def uses_strategy(self) -> bool:
        """Whether the file already uses tf.distribute (then the rules, not a migration, apply)."""
        if self.facts.strategies:
            return True
        return any(
            any(n.startswith("tensorflow.distribute.") for n in self.facts.names_of(call.func)) for call, _ in self.facts.calls
        )

    @cached_property
    def fits(self) -> list[Site]:
        """``fit`` / ``train_on_batch`` sites: what Keras distributes itself once the model is
        made in the scope."""
        return [site for site in self.training.sites if site.kind == "fit"]

    @cached_property
    def updates(self) -> list[cst.Call]:
        """Every call that applies gradients (an optimizer's ``apply_gradients``, ``minimize``,
        or Keras 3's ``apply(grads, variables)``)."""
        found = []
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value not in UPDATE_METHODS:
                continue
            if self.facts.is_module_reference(func.value):
                continue
            if func.attr.value == "apply" and not self._optimizer(func.value):
                continue  # ``dataset.apply(...)``, ``df.apply(...)``
            if self._method_steps.callables.of_call(func)[0]:
                continue  # a method of this file named so (``self.apply_gradients(g, d)``): its body updates
            found.append(call)
        return found

    def _optimizer(self, expr: cst.BaseExpression) -> bool:
        if any(self.facts.call_kind(m) is Kind.OPTIMIZER for m in self.training.makers(expr)):
            return True
        path = attribute_path(expr)
        return path is not None and bool(words(path[-1]) & {"optimizer", "optimizers", "opt", "optim"})

    @cached_property
    def train_steps(self) -> list[cst.FunctionDef]:
        """``train_step`` methods of Keras model classes of this file (``fit`` runs them)."""
        found = []
        for cls in self.facts.keras_classes:
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            found.extend(s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "train_step")
        return found

    @cached_property
    def analysed(self) -> tuple[list[CustomStep], list[Refusal]]:
        steps: dict[cst.FunctionDef, CustomStep] = {}
        refusals: list[Refusal] = []
        for update in self.updates:
            function = self.program.enclosing_function(update)
            if function is not None and function in self.train_steps:
                continue  # run by fit, per replica, once the model is made in the scope
            loop = _loop_within(self.program, update, function)
            if loop is not None and (function is None or not self.facts.functions[function].is_method):
                self._inline(loop, refusals)
                continue
            if function is None or loop is not None:
                where = f"in a loop (line {self.program.line(loop)})" if loop is not None else "at the top level of the script"
                refusals.append(Refusal(update, (
                    f"the update on line {self.program.line(update)} is written {where}, not in a step function: "
                    "put the step (forward pass, gradients, update) in a function the loop calls, then migrate"
                )))
                continue
            if self.facts.functions[function].is_method:
                step = self._method_steps.outermost(function)
                if isinstance(step, tuple):
                    # A call on a parameter that may be this step: refused once, at that call.
                    if not any(r.node is step[0] and r.reason == step[1] for r in refusals):
                        refusals.append(Refusal(*step))
                    continue
                if isinstance(step, str):
                    refusals.append(Refusal(update, step))
                    continue
            else:
                step = self._outermost(function)
            if isinstance(step, Refusal):
                refusals.append(step)
                continue
            if self._never_run(step):
                continue  # a variant the file shows and never calls: left as it is
            found = steps.get(step)
            if found is None:
                found = steps[step] = CustomStep(step, [], method=self.facts.functions[step].is_method)
            found.updates.append(update)
        for step in steps.values():
            why = self._describe(step)
            if why is not None:
                refusals.append(why)
        return [s for s in steps.values() if not any(r.node is s.function for r in refusals)], refusals

    def _never_run(self, step: cst.FunctionDef) -> bool:
        """Whether ``step``, a function of the module, is never used: no code calls it or
        hands it on (a guide showing a variant of the step it trained with), and no decorator
        but ``tf.function`` may keep it."""
        if self.facts.functions[step].is_method:
            return False
        # A use of the name that another ``def`` of it reaches first does not run this one.
        if any(step in (self.facts.reaching_bindings(use) or (step,)) for use in self.facts.references(step)):
            return False
        return all(self.facts.names_of(d.decorator) & {"tensorflow.function"} for d in step.decorators)

    @property
    def custom_steps(self) -> list[CustomStep]:
        return self.analysed[0]

    @cached_property
    def inline_steps(self) -> list[InlineStep]:
        """Steps written inline in a loop body that can be moved into a function of their own
        (:mod:`.inline_steps`): a migration does that first, then runs them as custom steps."""
        self.analysed
        return [step for step in self._inline_loops.values() if step is not None]

    def _inline(self, loop: cst.For | cst.While, refusals: list[Refusal]) -> None:
        """The step of a loop whose body applies gradients, or why it cannot be split (once
        per loop)."""
        if id(loop) in self._inline_loops:
            return
        self._inline_loops[id(loop)] = None
        updates = [u for u in self.updates if _loop_within(self.program, u, self.program.enclosing_function(u)) is loop]
        inside = [u for u in self.updates if u not in updates and any(a is loop for a in self.program.ancestors(u))]
        step = InlineSteps.of(self.program).step(loop, updates + inside)
        if isinstance(step, InlineStep):
            self._inline_loops[id(loop)] = step
        else:
            refusals.append(Refusal(step.node, step.reason))

    @property
    def refusals(self) -> list[Refusal]:
        """Why the file cannot be migrated (empty when it can)."""
        found = list(self.analysed[1])
        found.extend(self._file_refusals())
        found.extend(Refusal(*refused) for refused in self.clips[1])
        found.extend(Refusal(*refused) for refused in self.compiled_losses[1])
        found.extend(Refusal(*refused) for refused in self.imported.refusals)
        found.extend(Refusal(*refused) for refused in self.boolean_casts.refusals)
        found.extend(Refusal(*refused) for refused in few_examples(self.program, self.facts, self.training.sites))
        found.extend(Refusal(refused.call, refused.reason) for refused in self.optimizer_builds[1])
        return found

    @cached_property
    def optimizer_builds(self) -> tuple[list[OptimizerBuild], list]:
        """On Keras 3: the ``optimizer.build(...)`` each custom step's optimizer needs before
        the loop, and the updates whose optimizer cannot be built there
        (:mod:`.optimizer_builds`)."""
        from autofix.analysis.migration.model_prep import ModelPrep
        from autofix.analysis.training.multiworker import MultiWorker

        if not self.custom_steps or not MultiWorker.of(self.program).keras.keras3:
            return [], []
        updates = [u for step in self.custom_steps for u in step.updates]
        prep = ModelPrep.of(self.program)
        return optimizer_builds(self.program, self.facts, updates, prep._built_where_made)

    @cached_property
    def one_device_predicts(self) -> list[cst.Call]:
        """``predict`` calls of the trained model on fewer examples than there may be
        replicas, which the migration makes call the model itself (:mod:`.few_examples`)."""
        return one_device_predicts(self.program, self.facts, self.training.sites)

    @cached_property
    def eval_batches(self) -> EvalBatches:
        """The trained model's ``evaluate`` calls on arrays, given a batch that splits evenly
        on every replica count, else left as they are with a note (:mod:`.eval_batches`)."""
        return eval_batches(self.program, self.facts, self.training.sites)

    @cached_property
    def boolean_casts(self) -> BooleanCasts:
        """Boolean arrays handed to ``fit``, which Keras 3 cannot train on under a strategy: cast
        to float32 in the call where that trains the same, else refused (:mod:`.boolean_casts`)."""
        return boolean_casts(self.program, self.facts, self.training.sites)

    @cached_property
    def compiled_losses(self) -> tuple[list[PerExample | Weighed], list[tuple[cst.CSTNode, str]]]:
        """The loss functions handed to ``compile`` that the migration makes return one loss
        per example, the compiles of a loss summed over the batch it weighs by ``1 / N``, and
        why other compiled losses cannot be migrated (:mod:`.compiled_losses`)."""
        return CompiledLosses.of(self.program).judged(self.fits)

    @cached_property
    def clips(self) -> tuple[list[GlobalClip], list[tuple[cst.CSTNode, str]]]:
        """The gradient clips of the steps that will run per replica (custom steps and the
        ``train_step`` fit runs) that the migration makes global, and why the others cannot
        be (:mod:`.clipping`), an optimizer's own clip on Keras 3 among them."""
        clipping = Clipping.of(self.program)
        clips, refused = clipping.scan([s.function for s in self.custom_steps] + self.train_steps)
        refused = refused + [(call, optimizer_clip_reason(self.program, call, keyword)) for call, keyword in clipping.optimizer_clips]
        return clips, refused

    @property
    def trains(self) -> bool:
        """Whether the file trains: here, or through another module of its project that it
        calls (then it is refused with why, never passed over as not training)."""
        return bool(self.fits or self.updates or self.imported.refusals or self.method_fits)

    @cached_property
    def method_fits(self):
        """Training methods of other modules' classes, migrated in both files (:mod:`.method_fits`)."""
        from autofix.analysis.migration.method_fits import MethodFits

        return MethodFits.of(self.program).found

    @cached_property
    def imported(self) -> ImportedTraining:
        return ImportedTraining.of(self.program)

    def _outermost(self, function: cst.FunctionDef) -> cst.FunctionDef | Refusal:
        """The step: ``function``, or the local function that calls it (once per step, not in a
        loop), followed up until a function called in a loop."""
        seen: set[cst.FunctionDef] = set()
        while function not in seen:
            seen.add(function)
            calls = self._calls_of(function)
            if isinstance(calls, Refusal):
                return calls
            if not calls:
                return Refusal(function, f"{function.name.value}() applies gradients but nothing in this file calls it")
            if any(_loop_within(self.program, call, self.program.enclosing_function(call)) is not None for call in calls):
                return function
            callers = {self.program.enclosing_function(call) for call in calls}
            if len(callers) != 1 or None in callers:
                return function
            (caller,) = callers
            if caller is None or self.facts.functions[caller].is_method:
                return function
            function = caller
        return function

    @cached_property
    def _method_steps(self) -> MethodSteps:
        return MethodSteps(self.program)

    def _calls_of(self, function: cst.FunctionDef) -> list[cst.Call] | Refusal:
        if self.facts.functions[function].is_method:
            return self._method_steps.calls(function)[1]
        calls = []
        for ref in self.facts.references(function):
            parent = self.program.parent(ref)
            if isinstance(parent, cst.Call) and parent.func is ref:
                calls.append(parent)
                continue
            followed = self._made_by_factory(function)
            if followed is not None:
                self._via_factory.add(id(function))
                return followed
            return Refusal(ref, (
                f"{function.name.value}() is used as a value on line {self.program.line(ref)}, not only called: "
                "where it runs cannot be followed"
            ))
        return calls

    def _returned_names(self, function: cst.FunctionDef, calls: list[cst.Call]) -> list[cst.Name] | None:
        """For a step whose calls are not calls of its own name (a factory returns it): the
        names that hand it out (``return step``, ``return step, evaluate``); [] for a step
        called by name; None when it is handed out otherwise."""
        if id(function) not in self._via_factory:
            return []
        found = []
        for ref in self.facts.references(function):
            parent = self.program.parent(ref)
            if isinstance(parent, cst.Call) and parent.func is ref:
                continue
            holder = parent
            if isinstance(parent, cst.Element) and isinstance(self.program.parent(parent), (cst.Tuple, cst.List)):
                holder = self.program.parent(self.program.parent(parent))  # ``return step, evaluate``
                if not (isinstance(holder, cst.Return) and holder.value is self.program.parent(parent)):
                    return None
            elif not (isinstance(parent, cst.Return) and parent.value is ref):
                return None
            if not isinstance(ref, cst.Name):
                return None
            found.append(ref)
        return found or None

    @cached_property
    def _via_factory(self) -> set[int]:
        """The steps whose calls were found through the factory that returns them."""
        return set()

    def _made_by_factory(self, function: cst.FunctionDef) -> list[cst.Call] | None:
        """The calls of a step that a local factory returns (``train_step =
        make_step(model, optimizer)``, then ``train_step(x, y)``), when the value flow sees
        every use of it: only called, each call passing every parameter (no ``strategy.run``
        of it yet: this file trains on one device). None otherwise."""
        found, passed_on = self.facts.values.calls_of(function)
        if passed_on or not found or any(offset != 0 for _call, offset in found):
            return None
        calls = [call for call, _offset in found]
        if any(self.program.enclosing_function(call) is function for call in calls):
            return None  # (recursion)
        return calls

    def _describe(self, step: CustomStep) -> Refusal | None:
        function = step.function
        name = function.name.value
        calls = self._calls_of(function)
        if isinstance(calls, Refusal):
            return calls
        step.calls = calls
        step.handed_out = self._returned_names(function, calls)
        if step.handed_out is None:
            return Refusal(function, (
                f"{name}() is handed out by the function that makes it in a way autofix does not rewrite "
                "(only `return step` and `return step, other` are): where the distributed step would be handed out "
                "cannot be followed"
            ))
        for decorator in function.decorators:
            expr = decorator.decorator
            if self.steps_analysis._is_tf_function(expr.func if isinstance(expr, cst.Call) else expr):
                step.decorator = decorator
            else:
                return Refusal(function, f"{name}() has a decorator other than tf.function ({self.program.module.code_for_node(expr)})")
        params = function.params
        if params.star_arg is not cst.MaybeSentinel.DEFAULT and params.star_arg is not None or params.star_kwarg or params.kwonly_params or params.posonly_params:
            return Refusal(function, f"{name}() takes *args, **kwargs or keyword-only parameters, which autofix does not pass through strategy.run")
        if not step.params:
            return Refusal(function, (
                f"{name}() takes no batch: it reads its data from elsewhere, so there is nothing to split "
                "over the replicas (each would train on all of it)"
            ))
        for call in calls:
            if any(arg.star for arg in call.args):
                return Refusal(call, f"{name}() is called with *args or **kwargs on line {self.program.line(call)}")
        first = min(calls, key=lambda c: position_of(self.program, c))
        builds = in_step_builds(self.program, self.facts, self.steps_analysis.calls(function), first)
        if isinstance(builds, Unbuilt):
            return Refusal(builds.call, builds.reason)
        step.model_builds = builds
        inputs = computed_inputs(self.program, self.facts, name, calls) if not step.method else None
        if isinstance(inputs, Refusal):
            return inputs
        step.inputs = inputs
        if step.method:
            methods = self._method_steps
            problem = (
                methods.receiver_problem(function, calls)
                or methods.state_problem(function, self.steps_analysis.reached(function))
                or methods.optimizer_problem(step.updates, calls, self.training)
            )
            if problem is not None:
                return Refusal(*problem)
            step.passed = methods.passed_objects(calls)
        returns = [r for r in self.facts.functions[function].returns]
        shapes = {_arity(r) for r in returns} or {0}
        if len(shapes) != 1:
            return Refusal(function, f"{name}() returns different numbers of values on different paths")
        (step.arity,) = shapes
        if step.arity:
            value = returns[0].value
            step.returned = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]  # type: ignore[union-attr]
        step.result_used = any(not isinstance(self.program.parent(call), cst.Expr) for call in calls)
        if step.result_used:
            for ret in returns:
                values = [e.value for e in ret.value.elements] if isinstance(ret.value, cst.Tuple) else [ret.value]  # type: ignore[union-attr]
                combined = []
                entries: list[tuple[str, str]] = []
                for value in values:
                    kind = self._return_kind(value, step)
                    if isinstance(kind, tuple):
                        entries, kind = kind[1], DICT
                    if isinstance(kind, Declined) or kind in (LOGS, DICT) and len(values) != 1:
                        why = (
                            f", nor a mean or a sum over the batch: {_short(self.program, kind.node)} (line {self.program.line(kind.node)}): {kind.why}"
                            if isinstance(kind, Declined)
                            else ""
                        )
                        return Refusal(value, (
                            f"{name}() returns {_short(self.program, value)} (line {self.program.line(value)}), which is neither "
                            f"the loss it differentiates nor what its metrics show{why}: how to combine it over the replicas is not known"
                        ))
                    combined.append(kind)
                if step.combined and (combined != step.combined or entries != step.entries):
                    return Refusal(ret, f"{name}() returns different things on different paths (line {self.program.line(ret)})")
                step.combined, step.entries = combined, entries
        device = self._device_placement(function)
        if device is not None:
            return device
        drawn = host_random(self.steps_analysis, function)
        if drawn is not None:
            draws = host_draws(self.program, self.steps_analysis, function, drawn)
            if isinstance(draws, Refusal):
                return draws
            step.host_draws = draws
        unknown = unknown_term(self.program, function)
        if unknown is not None:
            return Refusal(*unknown)
        return self._raw_variables(step)

    def _raw_variables(self, step: CustomStep) -> Refusal | None:
        """A step that trains ``tf.Variable`` objects it reads from outside (not Keras
        layers): TFD001 moves Keras objects into the scope, not those; the migration puts the
        statements that make them there itself (:mod:`.raw_variables`), when it can."""
        found = raw_variables(self.program, step.function)
        if isinstance(found, tuple):
            return Refusal(*found)
        step.variables = found if found.statements else None
        return None

    def _known_kind(self, value: cst.BaseExpression, function: cst.FunctionDef) -> str | None:
        """The loss (or a term of it), a metric's result or a dict of them, a model's rows."""
        kind = "loss" if self._is_loss(value, function) else shown(self.program, function, value)
        if kind is None and self._model_rows(value, function):
            kind = ROWS
        return kind

    def _return_kind(self, value: cst.BaseExpression, step: CustomStep) -> str | Declined | tuple[str, list[tuple[str, str]]]:
        """How a returned value combines over the replicas: a kind, why it cannot, or for a
        dict (not only of metric results) ``(DICT, [(key, kind), ...])``."""
        function = step.function
        known = self._known_kind(value, function)
        if known is not None:
            return known
        combining = Combining(
            self.program, function, step.params, lambda v: self._known_kind(v, function),
            known_in=lambda helper: lambda v: self._known_kind(v, helper),
        )
        made = self._returned_dict(value, function)
        if made is None:
            return combining.kind(value)
        entries = []
        for element in made.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return Declined(element, "its keys are not all written out as strings")
            kind = combining.kind(element.value)
            if isinstance(kind, Declined):
                return kind
            if kind == LOGS:
                return Declined(element.value, "it is a dict of values inside a dict")
            entries.append((element.key.value, kind))
        if len({key for key, _ in entries}) != len(entries):
            return Declined(made, "a key is written twice")
        return DICT, entries

    def _returned_dict(self, value: cst.BaseExpression, function: cst.FunctionDef) -> cst.Dict | None:
        """The dict a step returns: written in the ``return``, or bound once in the step to a
        name read nowhere else (so nothing adds to it)."""
        if isinstance(value, cst.Dict):
            return value
        if not isinstance(value, cst.Name):
            return None
        bindings = self.facts.reaching_bindings(value) or []
        if len(bindings) != 1 or self.program.enclosing_function(bindings[0]) is not function:
            return None
        made = self.facts.assigned_value(bindings[0])
        if not isinstance(made, cst.Dict) or any(use is not value for use in self.facts.uses(bindings[0])):  # type: ignore[arg-type]
            return None
        return made

    def _model_rows(self, value: cst.BaseExpression, step: cst.FunctionDef) -> bool:
        """Whether ``value`` is what a Keras model made in this file outputs for the step's
        examples (``generated_images = generator(noise)``): one row per example, so the
        replicas' rows together are the global batch's (``strategy.gather``)."""
        if isinstance(value, cst.Name):
            bindings = self.facts.reaching_bindings(value) or []
            if len(bindings) != 1 or self.program.enclosing_function(bindings[0]) is not step:
                return False
            value = self.facts.assigned_value(bindings[0])
        if not isinstance(value, cst.Call) or isinstance(value.func, cst.Call):
            return False
        makers = self.training.makers(value.func)
        return bool(makers) and all(self.facts.call_kind(m) in (Kind.MODEL, Kind.LOAD) for m in makers)

    def _is_loss(self, value: cst.BaseExpression, step: cst.FunctionDef | None = None) -> bool:
        """Whether ``value`` is what the step differentiates, or a term of it: a name whose
        binding reaching here is passed on the way back from a differentiated value to its
        terms (``loss``, ``kl_loss`` of ``loss = reconstruction + kl_loss``), not a value the
        loss is merely computed from (predictions)."""
        if not isinstance(value, cst.Name) or step is None:
            return False
        bindings = self.facts.reaching_bindings(value) or []
        return bool(bindings) and all(id(b) in self._loss_bindings(step) for b in bindings)

    def _loss_bindings(self, step: cst.FunctionDef) -> set[int]:
        from autofix.analysis.steps.losses import loss_terms_of

        found: set[int] = set()
        for call in self.steps_analysis.calls(step):
            target = self.steps_analysis.differentiated(call)
            if target is None:
                continue
            for term in loss_terms_of(self.steps_analysis, target):
                found.update(id(b) for b in term.bindings)
            if isinstance(target, cst.Name):
                found.update(id(b) for b in self.facts.reaching_bindings(target) or ())
        return found

    def _device_placement(self, function: cst.FunctionDef) -> Refusal | None:
        """A step that places parts of its work on devices itself (``with tf.device(...)``
        towers) distributes by hand already."""
        for item in nodes_in(function, cst.WithItem):
            if self._device_block(item):
                return Refusal(item, (
                    f"the step places its work on devices itself (tf.device, line {self.program.line(item)}): it is "
                    "distributed by hand already; replace that with strategy.run yourself"
                ))
        return None

    def _file_refusals(self) -> list[Refusal]:
        found = []
        keras1 = first_keras(self.program)
        if keras1 is not None:
            node, what = keras1
            found.append(Refusal(node, (
                f"it is written for Keras 1 ({what}, line {self.program.line(node)}), whose API neither "
                "TensorFlow's Keras nor Keras 3 has: it runs on neither, migrated or not; upgrade it, then migrate"
            )))
        for train_step in self.train_steps:
            unknown = unknown_term(self.program, train_step, fit=True)
            if unknown is not None:
                found.append(Refusal(*unknown))
        sites = {id(site.call) for site in self.training.sites}
        for call, _owner in self.facts.calls:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in FIT_METHODS
                and id(call) not in sites
                and id(call) not in self.imported.handled
                and not self.facts.is_module_reference(func.value)
            ):
                found.append(Refusal(call, (
                    f"the model {func.attr.value}() trains on line {self.program.line(call)} is not one autofix "
                    "can follow to where it is made"
                )))
            elif isinstance(func, cst.Attribute) and func.attr.value == "train_on_batch" and id(call) in sites:
                found.append(Refusal(call, (
                    f"train_on_batch (line {self.program.line(call)}) trains on the batch it is handed, which "
                    "autofix cannot show to be the global batch"
                )))
        found.extend(self._updates_by_hand())
        found.extend(self._placed_by_hand())
        for call, _owner in self.facts.calls:
            names = self.facts.names_of(call.func)
            if names & IN_BATCH_OBJECTIVES:
                found.append(Refusal(call, (
                    "it trains an in-batch objective (the examples of a batch are each other's negatives): "
                    "split over replicas, each one sees fewer of them, so the objective changes"
                )))
            kind = self.facts.call_kind(call)
            if kind in (Kind.LAYER, Kind.MODEL):
                for keyword in ("stateful", "batch_size", "batch_input_shape"):
                    value = argument_value(call, keyword)
                    if value is None or keyword == "stateful" and not (isinstance(value, cst.Name) and value.value == "True"):
                        continue
                    found.append(Refusal(call, (
                        f"the model is built for a fixed batch ({keyword}=, line {self.program.line(call)}): split over "
                        "replicas each gets a part of it, which such a model does not take"
                        + (" (a stateful RNN carries its state from one batch to the next, row by row)" if keyword == "stateful" else "")
                    )))
        return found

    def _device_block(self, item: cst.WithItem) -> bool:
        """Whether a ``with`` item is ``tf.device(...)``."""
        return isinstance(item.item, cst.Call) and "tensorflow.device" in self.facts.names_of(item.item.func)

    def _placed_by_hand(self) -> list[Refusal]:
        """Training the script places on one device itself (``with tf.device("/CPU:0"):
        model.fit(...)``, a loop under ``with tf.device("/GPU:0")``): a strategy would spread
        it over every device, which is not what the block says (a notebook timing one device
        against another). Refused once per block, at the block."""
        trained: list[cst.CSTNode] = [site.call for site in self.training.sites]
        trained.extend(self.updates)
        trained.extend(call for step in self.custom_steps for call in step.calls)
        trained.extend(method.call for method in self.method_fits)
        updates = {id(update) for update in self.updates}
        found: dict[int, Refusal] = {}
        for node in trained:
            step = self.program.enclosing_function(node) if id(node) in updates else None
            for ancestor in self.program.ancestors(node):
                if ancestor is step:
                    break  # a device block in the step itself: towers (refused with the step)
                if not isinstance(ancestor, cst.With) or id(ancestor) in found:
                    continue
                for item in ancestor.items:
                    if self._device_block(item):
                        device = _short(self.program, item.item)
                        found[id(ancestor)] = Refusal(item, (
                            f"the training on line {self.program.line(node)} is placed on one device by hand "
                            f"({device}, line {self.program.line(item)}): a strategy would spread it over every "
                            "device, which is not what the block asks for; remove the tf.device block if the "
                            "training may use every device, then migrate"
                        ))
        return list(found.values())

    def _updates_by_hand(self) -> list[Refusal]:
        """Variables updated from their gradients by the script itself
        (``w.assign_sub(lr * dw)`` after ``dw = tape.gradient(loss, w)``), not by an optimizer:
        under a strategy nothing would sum the replicas' gradients, each replica would update
        with its own share."""
        found = []
        for call, _owner in self.facts.calls:
            if self.steps_analysis.differentiated(call) is None or isinstance(call.func, cst.Attribute) and call.func.attr.value == "minimize":
                continue
            update = self._assigned_from(call)
            if update is not None:
                found.append(Refusal(update, (
                    f"the variables are updated from their gradients by hand ({_short(self.program, update)}, line "
                    f"{self.program.line(update)}), not by an optimizer: under a strategy nothing would add up the "
                    "replicas' gradients, each replica would update with its own; apply them with an optimizer "
                    "(apply_gradients), then migrate"
                )))
        return found

    def _assigned_from(self, gradient: cst.Call) -> cst.Call | None:
        """A ``v.assign_sub(...)`` / ``assign_add`` / ``assign`` whose argument reads what the
        gradient call returns (through the names it is bound to, and a ``for`` loop over them)."""
        assign = self.program.parent(gradient)
        if not isinstance(assign, cst.Assign) or assign.value is not gradient:
            return None
        names = [n for target in assign.targets for n in nodes_in(target.target, cst.Name)]
        seen: set[int] = set()
        while names:
            name = names.pop()
            if id(name) in seen:
                continue
            seen.add(id(name))
            for use in self.facts.uses(name):
                for ancestor in self.program.ancestors(use):
                    if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.SimpleStatementLine)):
                        break
                    if isinstance(ancestor, cst.Call) and isinstance(ancestor.func, cst.Attribute) and ancestor.func.attr.value in _ASSIGNS:
                        if any(a is use or any(n is use for n in nodes_in(a.value, cst.Name)) for a in ancestor.args):
                            return ancestor
                    if isinstance(ancestor, cst.For) and any(n is use for n in nodes_in(ancestor.iter, cst.Name)):
                        names.extend(nodes_in(ancestor.target, cst.Name))
                        break
        return None


_ASSIGNS = ("assign_sub", "assign_add", "assign")


def _arity(ret: cst.Return) -> int:
    if ret.value is None:
        return 0
    if isinstance(ret.value, cst.Tuple):
        return len(ret.value.elements)
    return 1


def _loop_within(program: Program, node: cst.CSTNode, function: cst.FunctionDef | None) -> cst.CSTNode | None:
    """The innermost ``for`` / ``while`` around ``node`` inside ``function`` (or the module)."""
    for ancestor in program.ancestors(node):
        if ancestor is function or isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, (cst.For, cst.While)):
            return ancestor
    return None


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
