"""What a single-device script trains, for ``autofix migrate``: the strategy it can be moved to,
where its training happens (``fit`` sites, custom training steps and where they are called),
and why a script cannot be migrated when it cannot.

A *custom step* is a function of this file that applies gradients (``apply_gradients``,
``minimize``, Keras 3's ``optimizer.apply``), directly or through local helpers it calls, and
that a loop calls: the unit that ``strategy.run`` runs on every replica once the script is
migrated. Only what can be shown right is accepted; everything else is a :class:`Refusal` with
the reason (a loop whose update is written inline, training in a trainer class's method, a
step that takes no batch, returns what is not its loss, places its work on devices itself...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts import Facts
from autofix.analysis.inputs import Inputs
from autofix.analysis.program import Block, Program
from autofix.analysis.steps import Steps, words
from autofix.analysis.syntax import argument_value, attribute_path, nodes_in
from autofix.analysis.training import FIT_METHODS, Site, TrainingModel, batch_size_of
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
# Calls whose effect the strategy must not precede (what seeds the random generators): the
# strategy is made after them, as a script's reader expects.
SEEDS = frozenset(
    {
        "tensorflow.random.set_seed",
        "keras.utils.set_random_seed",
        "numpy.random.seed",
        "random.seed",
        "tensorflow.config.experimental.enable_op_determinism",
    }
)


@dataclass(frozen=True)
class Refusal:
    """Why the script is not migrated, at the place that shows it."""

    node: cst.CSTNode
    reason: str


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


class SingleDevice(Derived):
    """The training of a file that makes no strategy (built once per program)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        self.steps_analysis = Steps.of(program)

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
            if function is None or loop is not None:
                where = f"in a loop (line {self.program.line(loop)})" if loop is not None else "at the top level of the script"
                refusals.append(Refusal(update, (
                    f"the update on line {self.program.line(update)} is written {where}, not in a step function: "
                    "put the step (forward pass, gradients, update) in a function the loop calls, then migrate"
                )))
                continue
            if self.facts.functions[function].is_method:
                refusals.append(Refusal(update, (
                    f"the update is made in the method {function.name.value}() of a class, which autofix "
                    "does not restructure: call strategy.run on that method yourself"
                )))
                continue
            step = self._outermost(function)
            if isinstance(step, Refusal):
                refusals.append(step)
                continue
            found = steps.get(step)
            if found is None:
                found = steps[step] = CustomStep(step, [])
            found.updates.append(update)
        for step in steps.values():
            why = self._describe(step)
            if why is not None:
                refusals.append(why)
        return [s for s in steps.values() if not any(r.node is s.function for r in refusals)], refusals

    @property
    def custom_steps(self) -> list[CustomStep]:
        return self.analysed[0]

    @property
    def refusals(self) -> list[Refusal]:
        """Why the file cannot be migrated (empty when it can)."""
        found = list(self.analysed[1])
        found.extend(self._file_refusals())
        found.extend(self.unbuilt[1])
        return found

    @property
    def trains(self) -> bool:
        return bool(self.fits or self.updates)

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

    def _calls_of(self, function: cst.FunctionDef) -> list[cst.Call] | Refusal:
        calls = []
        for ref in self.facts.references(function):
            parent = self.program.parent(ref)
            if isinstance(parent, cst.Call) and parent.func is ref:
                calls.append(parent)
                continue
            return Refusal(ref, (
                f"{function.name.value}() is used as a value on line {self.program.line(ref)}, not only called: "
                "where it runs cannot be followed"
            ))
        return calls

    def _describe(self, step: CustomStep) -> Refusal | None:
        function = step.function
        name = function.name.value
        calls = self._calls_of(function)
        if isinstance(calls, Refusal):
            return calls
        step.calls = calls
        for decorator in function.decorators:
            expr = decorator.decorator
            if self.steps_analysis._is_tf_function(expr.func if isinstance(expr, cst.Call) else expr):
                step.decorator = decorator
            else:
                return Refusal(function, f"{name}() has a decorator other than tf.function ({self.program.module.code_for_node(expr)})")
        params = function.params
        if params.star_arg is not cst.MaybeSentinel.DEFAULT and params.star_arg is not None or params.star_kwarg or params.kwonly_params or params.posonly_params:
            return Refusal(function, f"{name}() takes *args, **kwargs or keyword-only parameters, which autofix does not pass through strategy.run")
        if not params.params:
            return Refusal(function, (
                f"{name}() takes no batch: it reads its data from elsewhere, so there is nothing to split "
                "over the replicas (each would train on all of it)"
            ))
        for call in calls:
            if any(arg.star for arg in call.args):
                return Refusal(call, f"{name}() is called with *args or **kwargs on line {self.program.line(call)}")
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
                for value in values:
                    if not self._is_loss(value, function):
                        return Refusal(value, (
                            f"{name}() returns {_short(self.program, value)} (line {self.program.line(value)}), which is not "
                            "the loss it differentiates: how to combine it over the replicas is not known"
                        ))
        device = self._device_placement(function)
        if device is not None:
            return device
        return self._raw_variables(function)

    def _raw_variables(self, function: cst.FunctionDef) -> Refusal | None:
        """A step that trains ``tf.Variable`` objects it reads from outside (not Keras
        layers): TFD001 moves Keras objects into the scope, not those, and made outside it
        they are not mirrored."""
        for reached in self.steps_analysis.reached(function):
            for name in nodes_in(reached.body, cst.Name):
                if self.program.access(name) is None:
                    continue
                for binding in self.facts.bindings(name) or ():
                    value = self.facts.assigned_value(binding)
                    if value is None or self.program.enclosing_function(binding) is reached:
                        continue
                    for call in nodes_in(value, cst.Call):
                        if "tensorflow.Variable" in self.facts.names_of(call.func):
                            return Refusal(call, (
                                f"the step trains tf.Variable objects made outside it (line {self.program.line(call)}), "
                                "not Keras layers: make them in strategy.scope() yourself (or use Keras layers), then migrate"
                            ))
        return None

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
        from autofix.analysis.losses import loss_terms_of

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
            call = item.item
            if isinstance(call, cst.Call) and "tensorflow.device" in self.facts.names_of(call.func):
                return Refusal(item, (
                    f"the step places its work on devices itself (tf.device, line {self.program.line(item)}): it is "
                    "distributed by hand already; replace that with strategy.run yourself"
                ))
        return None

    def _file_refusals(self) -> list[Refusal]:
        found = []
        sites = {id(site.call) for site in self.training.sites}
        for call, _owner in self.facts.calls:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in FIT_METHODS
                and id(call) not in sites
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

    # --- fit on arrays with Keras's default batch ---------------------------------------------

    @cached_property
    def default_batches(self) -> list[cst.Call]:
        """``fit`` calls on in-memory arrays that leave the batch to Keras (32): the migration
        writes it out, so that it is kept as each replica's batch and the global batch is made
        from it (Keras 3 with ``steps_per_epoch`` alone splits the arrays instead: left as is)."""
        found = []
        for site in self.fits:
            call = site.call
            if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "fit":
                continue
            x = argument_value(call, "x", 0)
            if x is None or argument_value(call, "batch_size") is not None or argument_value(call, "steps_per_epoch") is not None:
                continue
            if any(a.star for a in call.args) or not self._array_like(x):
                continue
            found.append(call)
        return found

    def _array_like(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """An in-memory array: made by NumPy or a ``keras.datasets`` loader (followed through
        names, tuple items, arithmetic, subscripts and array methods)."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if any(n.startswith(("numpy.", "keras.datasets.")) or n == "keras.utils.to_categorical" for n in names):
                return True
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("astype", "reshape", "copy", "squeeze"):
                return self._array_like(expr.func.value, depth + 1)
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "load_data":
                # ``mnist = tf.keras.datasets.mnist; mnist.load_data()``
                receivers = [o.node for o in self.facts.values.origins(expr.func.value) if o.whole]
                return bool(receivers) and all(
                    any(n.startswith("keras.datasets.") for n in self.facts.names_of(r)) for r in receivers if isinstance(r, cst.BaseExpression)
                )
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self._array_like(expr.left, depth + 1) or self._array_like(expr.right, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._array_like(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            origins = self.facts.values.origins(expr)
            return bool(origins) and all(
                isinstance(o.node, cst.BaseExpression) and o.node is not expr and self._array_like(o.node, depth + 1) for o in origins
            )
        return False

    # --- models Keras 3 cannot build under a strategy -----------------------------------------

    @cached_property
    def unbuilt(self) -> tuple[list[cst.Call], list[Refusal]]:
        """Models that ``fit`` trains, made from a class of this file that has its own
        ``train_step`` but neither ``call`` nor ``build`` (a GAN or VAE wrapper around built
        models), and that nothing builds: under a strategy Keras 3 builds a model before
        ``fit`` by calling it, which such a model cannot do ("Unable to automatically build the
        model", measured on Keras 3.15; on one device it is not asked). Marking it built is
        right when every model it is given is built where it is made (a functional model, a
        Sequential that starts with its input); otherwise the file is not migrated."""
        marked: list[cst.Call] = []
        refused: list[Refusal] = []
        for site in self.fits:
            for member in site.members:
                cls = self.facts.local_definition(member.func)
                if not isinstance(cls, cst.ClassDef) or cls not in self.facts.keras_classes:
                    continue
                methods = _methods(self.facts, cls)
                if "train_step" not in methods or "call" in methods or "build" in methods or "__init__" not in methods:
                    continue  # (without an __init__ of its own it is made as keras.Model is: functional)
                if member in marked or self._built_later(member):
                    continue
                given = [m for arg in member.args for m in self.training.makers(arg.value) if self.training.is_model_maker(m)]
                unbuilt = [m for m in given if not self._built_where_made(m)] + self._own_layers(cls)
                if unbuilt or not given or self.facts.assigned_name(member) is None:
                    refused.append(Refusal(member, (
                        f"{cls.name.value} has a train_step but no call(): under a strategy Keras 3 builds it before fit "
                        "by calling it, which fails, and not every model and layer it holds is known to be built; build it "
                        "yourself (or give it a call()), then migrate"
                    )))
                    continue
                marked.append(member)
        return marked, refused

    def _own_layers(self, cls: cst.ClassDef) -> list[cst.Call]:
        """Layers the class makes for itself (``self.sampler = Sampler()`` in ``__init__``):
        built only when called, so marking the model built would not build them."""
        found = []
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for method in body:
            if not isinstance(method, cst.FunctionDef):
                continue
            for call in nodes_in(method.body, cst.Call):
                kind = self.facts.call_kind(call)
                local = self.facts.local_definition(call.func)
                if kind in (Kind.LAYER, Kind.MODEL) or isinstance(local, cst.ClassDef) and local in self.facts.keras_classes:
                    if not self._built_where_made(call):
                        found.append(call)
        return found

    def _built_later(self, construction: cst.Call) -> bool:
        """Whether the script builds the object itself (``model.build(...)``, ``model(x)``)."""
        name = self.facts.assigned_name(construction)
        if name is None:
            return False
        for use in self.facts.uses(name):
            parent = self.program.parent(use)
            if isinstance(parent, cst.Call) and parent.func is use:
                return True
            if isinstance(parent, cst.Attribute) and parent.attr.value in ("build", "built"):
                return True
        return False

    def _built_where_made(self, call: cst.Call, depth: int = 0) -> bool:
        """A functional model (``keras.Model(inputs, outputs)``), or a Sequential whose first
        layer is its input (``keras.Input``, ``InputLayer``, ``input_shape=``); or what a local
        factory returns, when that is."""
        kind = self.facts.call_kind(call)
        if isinstance(kind, cst.FunctionDef) and depth < 4:
            made = [o.node for o in self.facts.values.returned(kind, call) if o.whole]
            return bool(made) and all(isinstance(m, cst.Call) and self._built_where_made(m, depth + 1) for m in made)
        names = self.facts.names_of(call.func)
        if any(n.endswith(("keras.Model", "keras.models.Model")) for n in names):
            return len(call.args) >= 2 or argument_value(call, "inputs") is not None
        if not any(n.endswith("Sequential") for n in names):
            return False
        layers = argument_value(call, "layers", 0)
        if not isinstance(layers, (cst.List, cst.Tuple)) or not layers.elements:
            return False
        first = layers.elements[0].value
        if not isinstance(first, cst.Call):
            return False
        first_names = self.facts.names_of(first.func)
        return any(n.endswith(("Input", "InputLayer")) for n in first_names) or any(
            a.keyword is not None and a.keyword.value in ("input_shape", "input_dim", "batch_input_shape") for a in first.args
        )

    # --- where the strategy goes ---------------------------------------------------------------

    def anchors(self) -> list[cst.CSTNode]:
        """What the strategy must exist before: every call that trains (``fit``, a step's
        call) and everything those take part with (models, optimizers, compile...)."""
        found: list[cst.CSTNode] = []
        for site in self.fits:
            found.append(site.call)
            found.extend(site.members)
        for step in self.custom_steps:
            found.extend(step.calls)
            for update in step.updates:
                found.extend(self.training.makers(update.func.value))  # type: ignore[union-attr]
            for attribute in nodes_in(step.function.body, cst.Attribute):
                if attribute.attr.value in ("trainable_variables", "trainable_weights", "variables", "weights"):
                    found.extend(m for m in self.training.makers(attribute.value) if self.training.is_model_maker(m))
        return found

    def chain(self, node: cst.CSTNode) -> list[Block]:
        """The blocks ``node`` runs in, innermost first: the body of its function, then the
        block of the one place that function is called from, up to the module. Stops where a
        function is a method, or is called from several blocks (or none)."""
        found: list[Block] = []
        current = node
        for _ in range(20):
            function = self.program.enclosing_function(current)
            if function is None:
                found.append(self.program.module)
                return found
            if not isinstance(function.body, cst.IndentedBlock) or self.facts.functions[function].is_method:
                return found
            found.append(function.body)
            calls = [self.program.parent(r) for r in self.facts.references(function)]
            calls = [c for c in calls if isinstance(c, cst.Call)]
            blocks = {id(self._block_of_code(c)) for c in calls}
            if len(blocks) != 1:
                return found
            current = calls[0]
        return found

    def _block_of_code(self, node: cst.CSTNode) -> Block | None:
        function = self.program.enclosing_function(node)
        if function is None:
            return self.program.module
        return function.body if isinstance(function.body, cst.IndentedBlock) else None

    def training_block(self) -> Block | Refusal:
        """The block the strategy is made in: the innermost one every part of the training
        runs in (the module for a script, ``main()``'s body for a script that trains there)."""
        chains = [self.chain(anchor) for anchor in self.anchors()]
        chains = [c for c in chains if c]
        if not chains:
            return Refusal(self.program.module, "no training site was found where a strategy can be made")
        common = [b for b in chains[0] if all(any(b is other for other in c) for c in chains[1:])]
        if not common:
            return Refusal(self.program.module, (
                "the training is spread over functions that are not called from one place: which function "
                "should make the strategy is for you to decide"
            ))
        return common[0]

    def position(self, block: Block) -> int:
        """The index in ``block`` where the strategy is made: after the imports, device setup,
        mixed-precision policy and seeding that come before the first statement of the
        training, and before that statement."""
        from autofix.analysis.ordering import effects_of

        body = list(block.body)
        anchors = self.anchors()
        first = len(body)
        for anchor in anchors:
            node = anchor
            for ancestor_block in self.chain(anchor):
                if ancestor_block is block:
                    break
                function = self.program.enclosing_function(node)
                calls = [self.program.parent(r) for r in self.facts.references(function)] if function is not None else []
                calls = [c for c in calls if isinstance(c, cst.Call)]
                if not calls:
                    break
                node = calls[0]
            top = self.program.top_statement_in(node, block)
            if top is not None:
                first = min(first, next(i for i, s in enumerate(body) if s is top))
        position = 0
        for index in range(first):
            statement = body[index]
            if _is_docstring(statement, index) or _is_import(statement) or effects_of(self.program, statement).barrier or self._seeds(statement):
                position = index + 1
        return position

    def _seeds(self, statement: cst.CSTNode) -> bool:
        return any(self.facts.names_of(call.func) & SEEDS for call in nodes_in(statement, cst.Call))


def _methods(facts: Facts, cls: cst.ClassDef) -> set[str]:
    """The methods a class of this file defines, with those of its bases in this file."""
    found: set[str] = set()
    seen: set[int] = set()
    pending = [cls]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        body = current.body.body if isinstance(current.body, cst.IndentedBlock) else ()
        found.update(s.name.value for s in body if isinstance(s, cst.FunctionDef))
        pending.extend(b for b in (facts.local_definition(base.value) for base in current.bases) if isinstance(b, cst.ClassDef))
    return found


def unscaled_batches(program: Program) -> list[Refusal]:
    """In migrated code: every place training is fed whose batch is not shown to be the global
    batch (made from ``num_replicas_in_sync``). A migration is only right when every batch is
    N x the original's; what a rule could not see (a batch made in a helper, arrays whose batch
    Keras picks) is caught here rather than trained wrong."""
    facts = Facts.of(program)
    found = []
    for site in TrainingModel.of(program).sites:
        if site.kind != "fit":
            continue
        call = site.call
        x = argument_value(call, "x", 0)
        batches = _batches_of(program, x) if x is not None else []
        given = argument_value(call, "batch_size")
        if not batches and given is not None:
            batches = [given]
        if not batches or not all(_counts_replicas(facts, b) for b in batches):
            found.append(Refusal(call, (
                f"the batch fit trains on (line {program.line(call)}) could not be shown to be the global batch "
                f"(N x the original's)"
            )))
    inputs = Inputs.of(program)
    for run in Steps.of(program).runs:
        kinds = {o.kind for argument in _run_arguments(run) for o in inputs.origins(argument)}
        if "distributed" not in kinds or kinds & {"dataset", "array", "shard"}:
            found.append(Refusal(run, (
                f"the step run on line {program.line(run)} is not shown to be fed distributed batches (each "
                "replica its share of the global batch)"
            )))
    for call, _owner in facts.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "experimental_distribute_dataset" and call.args:
            batches = _batches_of(program, call.args[0].value)
            if not batches or not all(_counts_replicas(facts, b) for b in batches):
                found.append(Refusal(call, (
                    f"the batch of the dataset distributed on line {program.line(call)} could not be shown to be the "
                    "global batch (N x the original's)"
                )))
    return found


def _run_arguments(run: cst.Call) -> list[cst.BaseExpression]:
    value = argument_value(run, "args", 1)
    if isinstance(value, (cst.Tuple, cst.List)):
        return [e.value for e in value.elements]
    return [value] if value is not None else []


def _batches_of(program: Program, dataset: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
    """What ``dataset`` is batched with, where it is made: through names, parameters (every
    dataset the calls of its function pass) and what local functions return; empty when one
    of them is not known."""
    batch = batch_size_of(program, dataset)
    if batch is not None:
        return [batch]
    if depth > 6:
        return []
    facts = Facts.of(program)
    found: list[cst.BaseExpression] = []
    origins = facts.values.origins(dataset)
    if not origins:
        return []
    for origin in origins:
        node = origin.node
        if not origin.whole or not isinstance(node, cst.BaseExpression) or node is dataset:
            return []
        made = batch_size_of(program, node)
        if made is not None:
            found.append(made)
            continue
        function = facts.call_kind(node) if isinstance(node, cst.Call) else None
        if not isinstance(function, cst.FunctionDef):
            return []
        returned = [o.node for o in facts.values.returned(function, node) if o.whole]
        inner = [b for value in returned if isinstance(value, cst.BaseExpression) for b in _batches_of(program, value, depth + 1)]
        if not returned or not inner:
            return []
        found.extend(inner)
    return found


def _counts_replicas(facts: Facts, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether ``expr`` is made from ``num_replicas_in_sync``: on every path its names take
    (assignments, and for a parameter what the calls of its function pass)."""
    if depth > 6:
        return False
    if any(isinstance(a, cst.Attribute) and a.attr.value == "num_replicas_in_sync" for a in nodes_in(expr, cst.Attribute)):
        return True
    for name in nodes_in(expr, cst.Name):
        if facts.program.access(name) is None:
            continue
        origins = facts.values.origins(name)
        if origins and all(o.whole and isinstance(o.node, cst.BaseExpression) and o.node is not name and _counts_replicas(facts, o.node, depth + 1) for o in origins):
            return True
    return False


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


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _is_docstring(statement: cst.CSTNode, index: int) -> bool:
    return (
        index == 0
        and isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
