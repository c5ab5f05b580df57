"""Members: every call that makes, loads, compiles or restores what a training site trains
(its model and the layers it is built from, compile and what it is given, a custom step's
optimizer and metrics, checkpoints restored into it).
Part of :class:`~autofix.analysis.training.model.TrainingModel`."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from autofix.analysis.facts.keras_objects import BUILD, COMPILE
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.training.sites import VARIABLE_ATTRIBUTES, Site
from autofix.tf import symbols
from autofix.tf.symbols import Kind


class Members:
    """The members section of :class:`~autofix.analysis.training.model.TrainingModel`."""

    # --- members ---------------------------------------------------------------------------------

    def _add(self, site: Site, calls) -> None:
        for call in calls:
            if call not in site.members:
                site.members.append(call)
                if self.facts.call_kind(call) is Kind.OPTIMIZER:
                    # ``optimizer.build(model.trainable_variables)`` makes its variables.
                    self._add(site, [b for b in self._optimizer_builds if any(o.whole and o.node is call for o in self.facts.values.origins(b.func.value))])

    @cached_property
    def _optimizer_builds(self) -> list[cst.Call]:
        """``optimizer.build(...)`` calls of the file (see ``KerasObjects.call_kind``)."""
        return [call for call, _owner in self.facts.calls if self.facts.call_kind(call) == BUILD]

    def _add_model_members(self, site: Site, receiver: cst.BaseExpression, models: list[cst.Call]) -> None:
        for model in models:
            self._add(site, [model, *self.ingredients(model)])
        for call, factory in self.method_calls_on(models):
            self._add_method_call(site, call.func.value, factory)  # type: ignore[union-attr]
        made = {id(m) for m in models}
        for build in self._optimizer_builds:
            owner = build.func.value  # type: ignore[union-attr]
            if isinstance(owner, cst.Attribute) and owner.attr.value == "optimizer":
                # ``model.optimizer.build(...)``: the optimizer compile gave the model.
                if any(o.whole and id(o.node) in made for o in self.facts.values.origins(owner.value)):
                    self._add(site, [build])

    def method_calls_on(self, models: list[cst.Call]) -> list[tuple[cst.Call, cst.Call | None]]:
        """The ``compile``, ``load_weights`` and ``add`` calls made anywhere in the file on the
        objects ``models`` make, on whatever name, attribute or parameter holds them (a helper
        given the model, ``self.model`` in another method); and those made inside the local
        factories among ``models``, each with the factory call it was reached through."""
        direct = {id(m) for m in models}
        inner = self._made_inside(models)
        found: list[tuple[cst.Call, cst.Call | None]] = []
        for call in self._model_method_calls:
            receiver = call.func.value  # type: ignore[union-attr]
            origins = [id(o.node) for o in self.facts.values.origins(receiver) if o.whole]
            if any(o in direct for o in origins):
                found.append((call, None))
            else:
                factory = next((inner[o] for o in origins if o in inner), None)
                if factory is not None:
                    found.append((call, factory))
        return found

    def made_under(self, models: list[cst.Call]) -> frozenset[str]:
        """The strategies in whose scope the models are made (there, or inside the factories
        that make them): a model trains under the strategy it was made under."""
        inner = self._made_inside(models)
        nodes = [*models, *(n for n in self._nodes_by_id(inner))]
        classes: set[str] = set()
        for node in nodes:
            if self.facts.under_scope(node):
                classes |= self.facts.scope_classes_at(node) - {"get_strategy"}
        return frozenset(classes)

    def _nodes_by_id(self, found: dict[int, cst.Call]) -> list[cst.Call]:
        wanted = set(found)
        return [call for call, _owner in self.facts.calls if id(call) in wanted]

    def _made_inside(self, models: list[cst.Call]) -> dict[int, cst.Call]:
        """What the local factories among ``models`` return (the calls inside them that make
        the object), each with the factory call."""
        found: dict[int, cst.Call] = {}
        pending = [(m, m) for m in models]
        seen: set[int] = set()
        while pending:
            call, factory = pending.pop()
            if id(call) in seen:
                continue
            seen.add(id(call))
            kind = self.facts.call_kind(call)
            function = kind if isinstance(kind, cst.FunctionDef) else self._own_method(call.func)
            if function is None:
                continue
            for origin in self.facts.values.returned(function, call):
                if origin.whole and isinstance(origin.node, cst.Call):
                    found.setdefault(id(origin.node), factory)
                    pending.append((origin.node, factory))
        return found

    @cached_property
    def _model_method_calls(self) -> list[cst.Call]:
        methods = symbols.COMPILE_METHODS | symbols.LOAD_METHODS | {"add"}
        return [
            call
            for call, _owner in self.facts.calls
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in methods and not self.facts.is_module_reference(call.func.value)
        ]

    def _model_names(self, receiver: cst.BaseExpression) -> list[cst.Name | cst.Param]:
        """The assignment targets (or parameters) that hold the model used as ``receiver``."""
        found: list[cst.Name | cst.Param] = []
        pending = [receiver]
        seen: set[int] = set()
        while pending:
            expr = pending.pop()
            if not isinstance(expr, cst.Name) or id(expr) in seen:
                continue
            seen.add(id(expr))
            for binding in self.facts.reaching_bindings(expr) or ():
                if isinstance(binding, (cst.Name, cst.Param)) and binding not in found:
                    found.append(binding)
                if isinstance(binding, cst.Param):
                    # ``def train(model): model.fit(...)``: and the names the callers pass.
                    pending.extend(self._arguments_for(binding))
        return found

    def _uses(self, binding: cst.Name | cst.Param) -> list[cst.CSTNode]:
        """The reads of the value bound at ``binding`` (not those a later binding replaces)."""
        return self.facts.uses(binding)

    def _listed(self, value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
        """The items a ``compile`` argument lists: a list or tuple written there, or held by a
        name every binding of which is one (``metrics = [mse, psnr]`` ... ``metrics=metrics``);
        else the value itself."""
        if isinstance(value, cst.Name):
            origins = self.facts.values.origins(value, enter=False)
            lists = [o.node for o in origins if o.whole and isinstance(o.node, (cst.List, cst.Tuple))]
            if lists and len(lists) == len(origins):
                return [e.value for listed in lists for e in listed.elements]
        return _elements(value)

    def _add_method_call(self, site: Site, use: cst.CSTNode, factory: cst.Call | None = None) -> None:
        """A ``compile`` / ``load_weights`` / ``add`` call on the model. Reached inside a local
        factory (``factory``, the call that made the model there), only what the factory's
        caller passes in takes part on its own (``build_model(optimizer)``): the rest is made
        where the factory call runs, which is judged as one."""
        attribute = self.program.parent(use)
        call = self.program.parent(attribute)
        if not (isinstance(attribute, cst.Attribute) and attribute.value is use and isinstance(call, cst.Call) and call.func is attribute):
            return
        method = attribute.attr.value
        if self._exclusive(call, site.call):
            return  # ``model.load_weights(...)`` in the branch that predicts instead
        if factory is not None:
            if self.facts.call_kind(call) == COMPILE:
                function = self.program.enclosing_function(call)
                for arg in call.args:
                    for value in self._listed(arg.value):
                        made = self.makers_for_call(value, function, factory) if function is not None else []
                        self._add(site, [
                            m for m in made
                            if self.facts.call_kind(m) in (Kind.OPTIMIZER, Kind.METRIC) and not self.program.within(m, function)
                        ])
            return
        if self.facts.call_kind(call) == COMPILE:
            self._add(site, [call])
            # ``optimizer=``, ``metrics=[...]``, and the optimizers of a model whose compile
            # takes others (``compile(encoder_optimizer=..., probe_optimizer=...)``).
            for arg in call.args:
                for value in self._listed(arg.value):
                    self._add(site, [m for m in self.makers(value) if self.facts.call_kind(m) in (Kind.OPTIMIZER, Kind.METRIC)])
            self._add_helper_calls(site, call)
        elif self.facts.call_kind(call) is Kind.LOAD:
            self._add(site, [call])
            self._add_helper_calls(site, call)
        elif method == "add":
            for arg in call.args:
                self._add(site, [m for m in self.makers(arg.value) if self.facts.call_kind(m) in (Kind.LAYER, Kind.MODEL)])

    def makers_for_call(self, expr: cst.BaseExpression, function: cst.FunctionDef, call: cst.Call) -> list[cst.Call]:
        """:meth:`makers` of ``expr`` in ``function`` when ``call`` runs it (its parameters are
        that call's arguments)."""
        found: list[cst.Call] = []
        for origin in self.facts.values.origins_in_call(expr, function, call):
            if origin.whole and isinstance(origin.node, cst.Call):
                found.extend(self._call_makers(origin.node))
        return found

    def _add_helper_calls(self, site: Site, call: cst.Call) -> None:
        """``def unfreeze(model): model.compile(Adam(1e-5))`` called on the trained model: the
        call of the helper takes part, as what it makes is made where it is called."""
        function = self.program.enclosing_function(call)
        seen: set[cst.FunctionDef] = set()
        while function is not None and function not in seen and not self.facts.functions[function].is_method:
            seen.add(function)
            if self.program.within(site.call, function):
                return
            references = self.facts.references(function)
            calls = [self.program.parent(r) for r in references]
            callers = [c for c, r in zip(calls, references) if isinstance(c, cst.Call) and c.func is r]
            if not callers:
                return
            self._add(site, callers)
            enclosing = {self.program.enclosing_function(c) for c in callers}
            function = enclosing.pop() if len(enclosing) == 1 else None

    def _exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether ``a`` and ``b`` are in different branches of one ``if`` (one runs only when
        the other does not)."""
        ancestors_b = {id(n): n for n in self.program.ancestors(b)}
        previous: cst.CSTNode = a
        for ancestor in self.program.ancestors(a):
            if id(ancestor) in ancestors_b:
                if isinstance(ancestor, cst.If):
                    side_a, side_b = _branch_of(ancestor, previous), _side(self.program, b, ancestor)
                    return side_a is not None and side_b is not None and side_a != side_b
                return False
            previous = ancestor
        return False

    def _step_functions(self, expr: cst.BaseExpression) -> list[cst.FunctionDef]:
        """The function run by ``strategy.run`` and the local functions it calls."""
        steps = Steps.of(self.program)
        first = steps.definition(expr)
        return steps.reached(first) if first is not None else []

    def _step_calls(self, steps: list[cst.FunctionDef]):
        for function in steps:
            yield from self.facts.functions[function].calls

    def _applies_gradients(self, steps: list[cst.FunctionDef]) -> bool:
        return any(self._updates(call) for call in self._step_calls(steps))

    def _updates(self, call: cst.Call) -> bool:
        """``optimizer.apply_gradients(...)``, ``minimize``, or Keras 3's ``optimizer.apply(grads,
        variables)`` on an optimizer made in this file."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in ("apply_gradients", "minimize"):
            return True
        return func.attr.value == "apply" and any(self.facts.call_kind(m) is Kind.OPTIMIZER for m in self.makers(func.value))

    def _add_train_step_metrics(self, site: Site, models: list[cst.Call]) -> None:
        """The metrics a model's own ``train_step`` (which ``fit`` runs on every replica)
        updates that are made outside the model, by the script (``acc_metric =
        keras.metrics.SparseCategoricalAccuracy()`` at the top of the module, read in the
        step): they take part in the distributed training as the model does."""
        steps = Steps.of(self.program)
        for model in models:
            if not isinstance(model.func, cst.Name):
                continue
            cls = next((s for s in self.program.module.body if isinstance(s, cst.ClassDef) and s.name.value == model.func.value), None)
            if cls is None or not isinstance(cls.body, cst.IndentedBlock):
                continue
            train_step = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "train_step"), None)
            if train_step is None:
                continue
            for call in self._step_calls(steps.reached(train_step)):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("update_state", "reset_state", "reset_states") and isinstance(func.value, cst.Name):
                    made = [m for m in self.makers(func.value) if self.facts.call_kind(m) is Kind.METRIC]
                    self._add(site, [m for m in made if self.program.enclosing_function(m) is None])

    def _add_step_members(self, site: Site, steps: list[cst.FunctionDef]) -> None:
        facts = self.facts
        for call in self._step_calls(steps):
            func = call.func
            if not isinstance(func, cst.Attribute):
                if isinstance(func, cst.Name):
                    models = [m for m in self.makers(func) if self.is_model_maker(m)]
                    for model in models:
                        self._add(site, [model, *self.ingredients(model)])
                    if models:
                        for name in self._model_names(func):
                            for use in self._uses(name):
                                self._add_method_call(site, use)
                continue
            method = func.attr.value
            receiver = func.value
            if method in ("apply_gradients", "minimize") or method == "apply" and self._updates(call):
                # ``model.optimizer.apply_gradients``: the optimizer compile gave the model; but
                # ``self.optimizer`` of a trainer is an optimizer the trainer made.
                optimizers = [m for m in self.makers(receiver) if facts.call_kind(m) is Kind.OPTIMIZER]
                if optimizers or not (isinstance(receiver, cst.Attribute) and receiver.attr.value == "optimizer"):
                    self._add(site, optimizers)
                else:
                    self._add_model(site, receiver.value)
            elif method in ("update_state", "reset_state", "reset_states") and self.program.migration:
                # A metric the step only updates is no member of code that is already written:
                # made outside the scope, it is updated from every replica and reads the
                # single-device result on Keras 3.15 and tf_keras 2.21, in a ``tf.function`` or
                # eagerly (measured: docs/keras-versions.md); one given to ``compile`` is a
                # member through it. A migration still makes it in the scope, as the tutorials do.
                self._add(site, [m for m in self.makers(receiver) if facts.call_kind(m) is Kind.METRIC])
        inside = set(steps)
        for name in VARIABLE_ATTRIBUTES:
            for attribute in self.facts.values.attributes_named(name):
                if self.program.enclosing_function(attribute) in inside:
                    self._add_model(site, attribute.value)

    def _add_bound_object(self, site: Site, target: cst.BaseExpression) -> None:
        """``strategy.run(model.train, ...)``: a method of a Keras model of this file, run on
        one object. The object is trained, so its construction takes part; and what its class's
        ``__init__`` makes (``self.gen = Sequential(...)``) is made by that construction, in
        whatever scope it runs in: the construction stands for it."""
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)):
            return
        origins = self.facts.values.origins(target.value)
        made = [o.node for o in origins if o.whole and isinstance(o.node, cst.Call)]
        classes = {self.facts.local_definition(m.func) for m in made}
        if not made or len(made) != len(origins) or len(classes) != 1:
            return
        (cls,) = classes
        if not isinstance(cls, cst.ClassDef) or cls not in self.facts.keras_classes:
            return
        family = self.facts.values.family(cls)
        inits = [s for c in family for s in c.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"]
        site.members[:] = [m for m in site.members if not any(self.program.within(m, init) for init in inits)]
        self._add_model_members(site, target.value, made)

    def _add_model(self, site: Site, receiver: cst.BaseExpression) -> None:
        models = [m for m in self.makers(receiver) if self.is_model_maker(m)]
        if models:
            self._add_model_members(site, receiver, models)

    def _add_restores(self, site: Site) -> None:
        """``tf.train.Checkpoint(model=model, ...).restore(path)``: restoring into what is
        trained takes part in training."""
        for call in self._restores:
            if self._exclusive(call, site.call):
                continue
            for checkpoint in self._checkpoints(call.func.value):
                held = [m for arg in checkpoint.args for m in self.makers(arg.value)]
                if any(m in site.members for m in held):
                    self._add(site, [call])

    @cached_property
    def _restores(self) -> list[cst.Call]:
        """``<checkpoint>.restore(...)`` calls."""
        found = []
        for attribute in self.facts.values.attributes_named("restore"):
            call = self.program.parent(attribute)
            if isinstance(call, cst.Call) and call.func is attribute and self.facts.call_kind(call) is Kind.LOAD:
                found.append(call)
        return found

    def _checkpoints(self, expr: cst.BaseExpression) -> list[cst.Call]:
        if isinstance(expr, cst.Call):
            return [expr]
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(expr) or ()]
            return [v for v in values if isinstance(v, cst.Call)]
        return []



def _elements(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if value is None:
        return []
    if isinstance(value, (cst.List, cst.Tuple)):
        return [e.value for e in value.elements]
    return [value]


def _branch_of(statement: cst.If, child: cst.CSTNode) -> str | None:
    if child is statement.body:
        return "body"
    if child is statement.orelse:
        return "orelse"
    return None


def _side(program: Program, node: cst.CSTNode, statement: cst.If) -> str | None:
    previous = node
    for ancestor in program.ancestors(node):
        if ancestor is statement:
            return _branch_of(statement, previous)
        previous = ancestor
    return None
