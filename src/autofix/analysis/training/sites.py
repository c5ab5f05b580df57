"""Training sites: where training happens (``fit``, ``train_on_batch``, a step run by
``strategy.run`` that applies gradients), under which strategies, also for a model kept in an
attribute of a class, and which of them train under more than one replica.
Part of :class:`~autofix.analysis.training.model.TrainingModel`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis.facts.strategies import UNKNOWN_STRATEGY
from autofix.analysis.syntax import argument, argument_value, attribute_path
from autofix.tf.symbols import SINGLE_REPLICA

# Model methods that train it (evaluate and predict do not: what they use is not trained).
FIT_METHODS = frozenset({"fit", "fit_generator", "train_on_batch"})
# Attributes of a model that hand its variables to a custom step.
VARIABLE_ATTRIBUTES = frozenset({"trainable_variables", "trainable_weights", "variables", "weights"})


@dataclass(eq=False)
class Site:
    """A place where training happens: ``model.fit`` / ``train_on_batch``, or a step run by
    ``strategy.run`` that applies gradients."""

    call: cst.Call
    kind: str  # "fit" or "step"
    # The strategy classes it may run under (empty: under none).
    strategies: frozenset[str]
    # Every call that makes, loads, compiles or restores what it trains.
    members: list[cst.Call] = field(default_factory=list)
    # ``self.model`` when the model is kept in an attribute of a class, and the expression
    # holding the strategy there (``self.strategy``).
    held_in: str | None = None
    holder: str | None = None

    @property
    def distributed(self) -> bool:
        """Whether it may run under a strategy with more than one replica."""
        return bool(self.strategies - SINGLE_REPLICA)


class Sites:
    """The sites sections of :class:`~autofix.analysis.training.model.TrainingModel`."""

    # --- sites ---------------------------------------------------------------------------------

    @cached_property
    def sites(self) -> list[Site]:
        found: list[Site] = []
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            if func.attr.value in FIT_METHODS and not self.facts.is_module_reference(func.value):
                held = self._attribute_site(call, func.value)
                if held is not None:
                    found.append(held)
                    continue
                models = self._trained_where_a_strategy_exists(call, func.value, [m for m in self.makers(func.value) if self.is_model_maker(m)])
                models = self._handed_on_a_branch_with_a_strategy(call, func.value, models)
                if models:
                    site = Site(call, "fit", self._strategies_at(call) | self.made_under(models) | self._strategies_where_handed(func.value, models))
                    self._add_model_members(site, func.value, models)
                    self._add_train_step_metrics(site, models)
                    found.append(site)
            elif func.attr.value in ("run", "experimental_run_v2") and call.args:
                classes = self.facts.strategy_classes(func.value)
                if classes is None:
                    continue
                steps = self._step_functions(call.args[0].value)
                if steps and self._applies_gradients(steps):
                    site = Site(call, "step", frozenset(classes))
                    self._add_step_members(site, steps)
                    self._add_bound_object(site, call.args[0].value)
                    found.append(site)
        single = self._single_device_constructions
        for site in found:
            if single:
                site.members[:] = [m for m in site.members if not self._for_single_device(m, single)]
            self._add_restores(site)
        return found

    @cached_property
    def _single_device_constructions(self) -> list[cst.Call]:
        """Objects of a class of this file that takes an optional strategy (``def __init__(self,
        model, strategy=None)``, kept as the strategy it trains under) constructed without one
        (``Trainer(model)``), and calls of a function of the file that takes one, made without
        it (``build()``): they train on one device on purpose, whatever a file that also
        distributes does elsewhere; what is made for them takes no part in distributed training."""
        found: list[cst.Call] = []
        for cls in self.facts.classes:
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
            if init is None:
                continue
            optional = [p for p in (*init.params.params[1:], *init.params.kwonly_params) if self._optional_strategy(cls, init, p)]
            if not optional:
                continue
            calls, _passed_on = self.facts.values.calls_of(init)
            params = list(init.params.params)
            for call, offset in calls:
                if offset != 1 or any(a.star for a in call.args):
                    continue
                if any(argument(call, p.name.value, params.index(p) - 1 if p in params else None) is None for p in optional):
                    found.append(call)
        # A function of the file that takes an optional strategy (``def build(strategy=None)``),
        # called without it.
        for function, info in self.facts.functions.items():
            if info.is_method:
                continue
            params = list(function.params.params)
            optional = [
                p for p in (*params, *function.params.kwonly_params)
                if isinstance(p.default, cst.Name) and p.default.value == "None" and self._strategy_parameter(p)
            ]
            if not optional:
                continue
            calls, _passed_on = self.facts.values.calls_of(function)
            for call, offset in calls:
                if offset != 0 or any(a.star for a in call.args):
                    continue
                if any(argument(call, p.name.value, params.index(p) if p in params else None) is None for p in optional):
                    found.append(call)
        return found

    def _strategy_parameter(self, param: cst.Param) -> bool:
        strategy = self.facts.strategy_for_name(param.name)
        return strategy is not None and strategy.is_parameter

    def _optional_strategy(self, cls: cst.ClassDef, init: cst.FunctionDef, param: cst.Param) -> bool:
        """Whether ``param`` of ``__init__`` defaults to None and is the strategy the objects
        keep (``self.strategy = strategy``, an attribute the class uses as a strategy)."""
        if not (isinstance(param.default, cst.Name) and param.default.value == "None"):
            return False
        attributes = {a for c, a, _classes in self.facts.strategy_attributes() if c in self.facts.values.family(cls)}
        for statement in init.body.body if isinstance(init.body, cst.IndentedBlock) else ():
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == param.name.value:
                    for target in small.targets:
                        path = attribute_path(target.target)
                        if path is not None and len(path) == 2 and path[1] in attributes:
                            return True
        return False

    def _for_single_device(self, member: cst.Call, constructions: list[cst.Call]) -> bool:
        """Whether ``member`` is made only for objects constructed without their strategy: it
        is inside such a construction's arguments, or bound to a name read only there."""
        for node in (member, *self.program.ancestors(member)):
            if node in constructions:
                return True
            if not isinstance(node, cst.Call):
                continue
            name = self.facts.assigned_name(node)
            if name is not None:
                uses = self.facts.uses(name)
                if uses and all(any(a in constructions for a in self.program.ancestors(u)) for u in uses):
                    return True
        return False

    def _trained_where_a_strategy_exists(self, call: cst.Call, receiver: cst.BaseExpression, models: list[cst.Call]) -> list[cst.Call]:
        """The models ``fit`` may train under a strategy. A helper (``def compile_and_fit(model):
        ... model.fit()``) called on models before any strategy exists trains those on one
        device, whatever it trains when called later under a strategy: a model that reaches
        the helper only through such calls is not trained there under a strategy."""
        function = self.program.enclosing_function(call)
        if function is None or function not in self.facts.functions or self.facts.functions[function].is_method:
            return models
        if not self.contexts.created or any(self._inside(c.block, function) for c in self.contexts.created):
            return models  # no strategy is made here, or the helper makes one itself
        calls = self.facts.direct_calls(function)
        if calls is None:
            return models
        reached: set[int] = set()
        kept: set[int] = set()
        every: set[int] | None = None
        for caller in calls:
            found = {id(m) for m in self.makers_for_call(receiver, function, caller)}  # type: ignore[arg-type]
            reached |= found
            every = found if every is None else every & found
            if not self.runs_without_strategy(caller):
                kept |= found
        # A model every call trains alike (made in the helper itself) depends on no caller.
        return [m for m in models if id(m) in kept or id(m) not in reached or id(m) in (every or set())]

    def _handed_on_a_branch_with_a_strategy(self, call: cst.Call, receiver: cst.BaseExpression, models: list[cst.Call]) -> list[cst.Call]:
        """The models ``receiver.fit`` may train under a strategy, where the receiver is a name
        bound on both branches of an ``if`` (``if multi_gpu: with strategy.scope(): parallel =
        build() ... trained = parallel`` / ``else: trained = self.model``): a model handed to it
        only by a binding in a branch whose other branch enters a strategy scope, where no
        strategy exists, is trained there on one device by choice (the single-device path),
        also when the branches nest and the strategy the other branch makes reaches the call."""
        if not isinstance(receiver, cst.Name) or self.facts.under_scope(call):
            return models
        bindings = self.facts.reaching_bindings(receiver) or []
        if len(bindings) < 2:
            return models
        apart: set[int] = set()
        kept: set[int] = set()
        for binding in bindings:
            value = self.facts.assigned_value(binding)
            if value is None:
                return models
            made = {id(m) for m in self.makers(value)}
            if self._single_device_branch(binding) and not self._strategies_at(binding) and not self.facts.under_scope(binding):
                apart |= made
            else:
                kept |= made
        return [m for m in models if id(m) not in apart or id(m) in kept]

    def _inside(self, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
        return node is function.body or any(a is function for a in self.program.ancestors(node))

    def runs_without_strategy(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` runs where no strategy exists yet and in no strategy's scope (code
        before the strategy is made, or a helper called only from there)."""
        return not self._strategies_at(node) and not self.facts.under_scope(node)

    def under_scope_where_distributed(self, node: cst.CSTNode) -> bool:
        """Like ``Facts.under_scope``, but a function's calls that run where no strategy exists
        do not count: what they make trains on one device whatever scope it is in
        (``compile_and_fit(model)`` called on baselines first, then in the scope)."""
        if self.facts.under_scope(node):
            return True
        if self._under_scope_where_distributed_object(node):
            return True
        function = self.program.enclosing_function(node)
        if function is None or function not in self.facts.functions or self.facts.functions[function].is_method:
            return False
        if any(self._inside(c.block, function) for c in self.contexts.created):
            return False
        calls = self.facts.direct_calls(function)
        if calls is None:
            return False
        distributed = [c for c in calls if not self.runs_without_strategy(c)]
        return bool(distributed) and len(distributed) < len(calls) and all(self.facts.under_scope(c) for c in distributed)

    def _under_scope_where_distributed_object(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is code of a function (``__init__``) whose every call but those
        that make objects on one device on purpose (:attr:`_single_device_constructions`) is
        inside a strategy scope."""
        single = self._single_device_constructions
        function = self.program.enclosing_function(node)
        if not single or function is None or function not in self.facts.functions:
            return False
        calls, passed_on = self.facts.values.calls_of(function)
        rest = [c for c, _offset in calls if c not in single]
        return not passed_on and bool(rest) and len(rest) < len(calls) and all(self.facts.under_scope(c) for c in rest)

    def creates_optimizer(self, compile_call: cst.Call) -> bool:
        """Whether ``model.compile(...)`` makes its own optimizer (none given: RMSprop, or a
        name such as ``"adam"``). Outside the scope it is made under no strategy, which Keras 3
        refuses to mix with the model's ("Mixing different tf.distribute.Strategy objects");
        given an optimizer object, compile itself makes nothing that must be mirrored."""
        value = argument_value(compile_call, "optimizer", 0)
        if value is None:
            # A model whose compile takes its optimizers under other names makes none itself.
            return not any(a.keyword is not None and "optimizer" in a.keyword.value for a in compile_call.args)
        if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(value, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(value) or ()]
            return bool(values) and all(isinstance(v, (cst.SimpleString, cst.ConcatenatedString)) for v in values)
        return False

    # --- models kept in attributes ----------------------------------------------------------------

    def _attribute_site(self, call: cst.Call, receiver: cst.BaseExpression) -> Site | None:
        """``self.model.fit(...)`` in a method: the model is what the methods of the class
        assign to ``self.model``, and the strategy is one the class keeps in an attribute."""
        path = attribute_path(receiver)
        if path is None or len(path) != 2:
            return None
        if isinstance(receiver, cst.Attribute) and self.facts.values.assigned_before(receiver) is not None:
            return None  # the method trains the model it has just assigned: followed as any value
        method = self.program.enclosing_function(call)
        if method is None or not self.facts.functions[method].is_method or not method.params.params:
            return None
        owner, attribute = path
        if method.params.params[0].name.value != owner:
            return None
        cls = self.program.parent(self.program.parent(method))
        if not isinstance(cls, cst.ClassDef):
            return None
        assigned = self.facts.values.attribute_values(cls)
        models = [m for value in assigned.get(attribute, ()) for m in self.makers(value) if self.is_model_maker(m)]
        if not models:
            return None
        strategies: set[str] = set()
        holder = "strategy"
        for name, values in assigned.items():
            for value in values:
                classes = self.facts.strategy_classes(value)
                if classes:
                    strategies |= classes
                    holder = f"{owner}.{name}"
        site = Site(call, "fit", frozenset(strategies | self._strategies_at(call)), held_in=f"{owner}.{attribute}", holder=holder)
        for model in models:
            self._add(site, [model, *self.ingredients(model)])
        for use in self.facts.values.self_reads(cls).get(attribute, ()):
            self._add_method_call(site, use)
        return site

    def _own_method(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The method ``self.build()`` calls, when ``self`` is the calling method's own first
        parameter and its class defines ``build``."""
        path = attribute_path(func)
        if path is None or len(path) != 2:
            return None
        caller = self.program.enclosing_function(func)
        if caller is None or caller not in self.facts.functions or not self.facts.functions[caller].is_method:
            return None
        if not caller.params.params or caller.params.params[0].name.value != path[0]:
            return None
        cls = self.program.parent(self.program.parent(caller))
        if not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock):
            return None
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == path[1]:
                return statement
        return None

    @cached_property
    def participants(self) -> dict[cst.Call, Site]:
        """Every call that makes, loads, compiles or restores an object trained under a
        strategy with more than one replica, with (one of) the sites it takes part in."""
        found: dict[cst.Call, Site] = {}
        for site in self.sites:
            if site.distributed and not self._apart(site):
                for member in site.members:
                    found.setdefault(member, site)
        return found

    def _apart(self, site: Site) -> bool:
        """Whether the site's training is kept apart from the strategy on purpose: nothing of
        it is made or run inside a strategy scope, while the file does enter one for other
        objects (a baseline trained without the strategy, a model reloaded "without a
        strategy", a second script in the same file). Attributes of a class are never apart."""
        if site.held_in is not None or site.kind == "step" or not self._enters_scope:
            return False
        return not any(self.facts.under_scope(node) or self._scopes_inside(node) for node in [site.call, *site.members])

    def _scopes_inside(self, call: cst.Call) -> bool:
        """Whether ``call`` runs a local function that enters a strategy scope itself."""
        function = self.facts.call_kind(call)
        if not isinstance(function, cst.FunctionDef):
            return False
        return any(self.facts.scoped_within(inner, function) for inner in self.facts.functions[function].calls)

    @cached_property
    def _enters_scope(self) -> bool:
        return any(self.facts.scope_strategy(item.item) for item in self.program.index.with_items)

    def takes_part(self, call: cst.Call) -> bool:
        """Whether ``call`` makes, loads, compiles or restores something trained under a
        strategy with more than one replica, and is not kept outside its scope on purpose."""
        return call in self.participants and not self._other_branch_scopes(call) and not self._trained_on_another_branch(call)

    def _trained_on_another_branch(self, call: cst.Call) -> bool:
        """``if training: ... step(batch) ... else: model = tf.saved_model.load(path)``: what
        ``call`` makes, on one branch of an ``if`` that no loop repeats, reaches training only
        through steps and fits that run on its other branch (a step function reads the name
        the training branch binds too): it is never trained, and needs no scope."""
        sites = [site for site in self.sites if site.distributed and call in site.members]
        home = self.program.enclosing_function(call)
        entries = [entry for site in sites for entry in self._entries(site.call, home)]
        if not entries or None in entries:
            return False
        definitions = (cst.FunctionDef, cst.ClassDef)
        for ancestor in self.program.ancestors(call):
            if isinstance(ancestor, definitions):
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                return False  # a later pass may train what this one made
        return any(
            branch.orelse is not None and all(self.program.within(entry, other) for entry in entries)  # type: ignore[arg-type]
            for branch, _here, other in self._if_branches(call, until=definitions)
        )

    def _if_branches(
        self, node: cst.CSTNode, until: tuple[type, ...] = ()
    ) -> Iterator[tuple[cst.If, cst.CSTNode, cst.CSTNode | None]]:
        """For each ``if`` around ``node``, innermost first (up to an ancestor of a type in
        ``until``): the ``if``, the branch ``node`` is in, and its other branch (None where there
        is no ``else``)."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, until):
                return
            if isinstance(ancestor, cst.If) and previous in (ancestor.body, ancestor.orelse):
                yield ancestor, previous, ancestor.orelse if previous is ancestor.body else ancestor.body
            previous = ancestor

    def _entries(self, call: cst.Call, home: cst.FunctionDef | None, depth: int = 0) -> list[cst.CSTNode | None]:
        """Where the training of ``call`` (a fit, a step's ``strategy.run``) starts in the code
        of ``home`` (the function, or the module: None, that makes the object): the call
        itself there, or, from a plain function of the file, the calls of that function
        (followed up to three functions); None where it cannot be told (a method, a function
        passed on as a value, code outside ``home``)."""
        function = self.program.enclosing_function(call)
        if function is home:
            return [call]
        info = self.facts.functions.get(function) if function is not None else None
        if depth >= 3 or info is None or info.is_method:
            return [None]
        calls = self.facts.direct_calls(function)
        if calls is None:
            return [None]
        return [entry for c in calls for entry in self._entries(c, home, depth + 1)]

    def _other_branch_scopes(self, node: cst.CSTNode) -> bool:
        """``if replicas == 1: model = build() else: with strategy.scope(): model = build()``:
        a branch whose other branch enters a strategy scope is outside it by choice."""
        return any(other is not None and self._enters_scope_in(other) for _if, _here, other in self._if_branches(node))

    def _strategies_where_handed(self, receiver: cst.BaseExpression, models: list[cst.Call]) -> frozenset[str]:
        """The strategies that exist where the name ``fit`` is called on is bound to one of the
        models: ``if multi_gpu: strategy = ...; copy = build(); ... trained = copy`` then
        ``trained.fit()`` after the ``if`` trains ``copy`` on the path that made a strategy."""
        if not isinstance(receiver, cst.Name):
            return frozenset()
        made = {id(m) for m in models}
        classes: set[str] = set()
        for binding in self.facts.reaching_bindings(receiver) or []:
            value = self.facts.assigned_value(binding)
            if value is not None and any(id(m) in made for m in self.makers(value)):
                classes |= self._strategies_at(binding)
        return frozenset(classes)

    def _single_device_branch(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` lies in a branch that enters no strategy scope while the other branch
        of its ``if`` does: the single-device path. With the branches nested, a branch that
        enters a scope itself (``if context: if multi_gpu: with s.scope(): ...``) is not one,
        whatever the outer ``else`` does."""
        for _if, here, other in self._if_branches(node):
            if other is not None and self._enters_scope_in(other):
                return not self._enters_scope_in(here)
        return False

    def _enters_scope_in(self, node: cst.CSTNode) -> bool:
        items = [item for item in self.program.index.with_items if any(a is node for a in self.program.ancestors(item))]
        return any(self.facts.scope_strategy(item.item) for item in items)

    def distributed_site(self, call: cst.Call) -> Site | None:
        """The distributed site whose call (``fit``, or the ``strategy.run`` of a training
        step) is ``call``, if any."""
        return self._distributed_by_call.get(call)

    @cached_property
    def _distributed_by_call(self) -> dict[cst.Call, Site]:
        return {site.call: site for site in self.distributed_sites}

    @cached_property
    def distributed_sites(self) -> list[Site]:
        """The sites that may train under more than one replica, and are not kept apart."""
        return [site for site in self.sites if site.distributed and not self._apart(site)]

    def strategies_at(self, node: cst.CSTNode) -> frozenset[str]:
        """The strategy classes in effect where ``node`` runs (see :meth:`_strategies_at`)."""
        return self._strategies_at(node)

    def _strategies_at(self, node: cst.CSTNode) -> frozenset[str]:
        """The strategy classes in effect where ``node`` runs: a ``with s.scope():`` around
        it, or a strategy that exists whenever it runs."""
        classes: set[str] = set()
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                classes |= self.facts.entered_classes(ancestor)
            previous = ancestor
        for context in self.contexts.created:
            if self.contexts.executes_after(node, context):
                classes |= context.strategy_classes or {UNKNOWN_STRATEGY}
        return frozenset(classes)
