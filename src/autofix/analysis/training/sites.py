"""The training program: where training happens, what takes part in it (:class:`TrainingModel`),
what a model was compiled with and fit on, and the batch size of a dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.contexts import Contexts
from autofix.analysis.facts.dataflow import PASSTHROUGH
from autofix.analysis.facts.keras_objects import COMPILE, TRAIN
from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.strategies import UNKNOWN_STRATEGY
from autofix.analysis.steps.custom import Steps
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, attribute_path, parameter_argument
from autofix.tf import symbols
from autofix.tf.symbols import SINGLE_REPLICA, Kind


@dataclass
class Compiled:
    """What ``model.compile(...)`` was given."""

    call: cst.Call
    loss: cst.BaseExpression | None
    optimizer: cst.BaseExpression | None


def method_calls(facts: Facts, model: cst.Name, methods: tuple[str, ...], kind: str) -> list[cst.Call]:
    """The calls ``m.<method>(...)`` on the model bound where ``model`` is used, that the
    facts classify as ``kind`` (COMPILE or TRAIN)."""
    found = []
    for binding in facts.bindings(model) or []:
        if not isinstance(binding, cst.Name):
            continue
        for use in facts.uses(binding):
            attribute = facts.program.parent(use)
            call = facts.program.parent(attribute)
            if (
                isinstance(attribute, cst.Attribute)
                and attribute.attr.value in methods
                and isinstance(call, cst.Call)
                and facts.call_kind(call) == kind
            ):
                found.append(call)
    return found


def compile_of(facts: Facts, model: cst.Name) -> Compiled | None:
    """The ``compile`` call of the model bound at ``model``'s use, if there is exactly one."""
    found = method_calls(facts, model, ("compile",), COMPILE)
    if len(found) != 1:
        return None
    call = found[0]
    return Compiled(call, argument_value(call, "loss", 1), argument_value(call, "optimizer", 0))


def fit_datasets(facts: Facts, model: cst.Name) -> list[cst.BaseExpression]:
    """What the model's ``fit`` calls train on (their first argument)."""
    firsts = (argument_value(call, "x", 0) for call in method_calls(facts, model, ("fit", "fit_generator"), TRAIN))
    return [first for first in firsts if first is not None]


def batch_size_of(program: Program, dataset: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
    """The expression a dataset was batched with (``ds.batch(E)`` -> ``E``), following names
    and dataset method chains back to where it was made."""
    facts = Facts.of(program)
    if depth > 8:
        return None
    if isinstance(dataset, cst.Name):
        # The bindings that reach this read: ``ds = ds.shuffle(n).batch(b)`` is what a later
        # read of ds iterates.
        bindings = facts.reaching_bindings(dataset) or []
        values = [facts.assigned_value(b) for b in bindings]
        if len(values) == 1 and values[0] is not None:
            return batch_size_of(program, values[0], depth + 1)
        return None
    if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Attribute):
        method = dataset.func.attr.value
        if method in ("batch", "padded_batch"):
            return argument_value(dataset, "batch_size", 0)
        if method in PASSTHROUGH:
            return batch_size_of(program, dataset.func.value, depth + 1)
    return None


# --- the training program ---------------------------------------------------------------------

# Model methods that train it (evaluate and predict do not: what they use is not trained).
FIT_METHODS = frozenset({"fit", "fit_generator", "train_on_batch"})
# Attributes of a model that hand its variables to a custom step.
VARIABLE_ATTRIBUTES = frozenset({"trainable_variables", "trainable_weights", "variables", "weights"})
_MODEL_KINDS = (Kind.MODEL, Kind.LOAD)


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


class TrainingModel(Derived):
    """The training program of one file: each training site, and what takes part in it.

    An object takes part in distributed training when it reaches a training site that runs
    under a strategy with more than one replica: the model trained there (with the layers it
    is built from), its ``compile`` and what compile is given (optimizer, metrics), weights
    loaded into it before training, a checkpoint restored into it, and, in a custom step, the
    optimizer applying the gradients and the metrics updated. What is only evaluated,
    predicted with, inspected, or trained before any strategy exists takes no part. Loss
    objects hold no variables and take no part either.

    Limits, on purpose: values are followed through names, tuple-less assignments, function
    parameters and local factories; models kept in attributes are followed only within one
    class (:meth:`attribute_sites`); other modules are not followed.
    """

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.contexts = Contexts.of(program)
        self._returns: dict[cst.FunctionDef, bool] = {}

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
                models = [m for m in self.makers(func.value) if self.is_model_maker(m)]
                if models:
                    site = Site(call, "fit", self._strategies_at(call) | self.made_under(models))
                    self._add_model_members(site, func.value, models)
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
        for site in found:
            self._add_restores(site)
        return found

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
        return call in self.participants and not self._other_branch_scopes(call)

    def _other_branch_scopes(self, node: cst.CSTNode) -> bool:
        """``if replicas == 1: model = build() else: with strategy.scope(): model = build()``:
        a branch whose other branch enters a strategy scope is outside it by choice."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.If) and previous in (ancestor.body, ancestor.orelse):
                other = ancestor.orelse if previous is ancestor.body else ancestor.body
                if other is not None and self._enters_scope_in(other):
                    return True
            previous = ancestor
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

    # --- what makes a value ----------------------------------------------------------------------

    def makers(self, expr: cst.BaseExpression | None) -> list[cst.Call]:
        """The calls that make the object ``expr`` evaluates to: Keras constructions and
        loads, and calls of factories (local functions or methods that make Keras objects, or
        imported ones whose result is compiled). Followed through the file's value flow
        (:meth:`Values.origins`: names, parameters, attributes of the file's classes, tuple and
        dict items, ``a if c else b``); an item of what a local factory returns
        (``model, optimizer = build()``) is made by that factory call. An empty list when
        nothing is known."""
        if expr is None:
            return []
        found: list[cst.Call] = []
        for origin in self.facts.values.origins(expr, enter=False):
            node = origin.node
            if not isinstance(node, cst.Call):
                continue
            if origin.whole:
                found.extend(self._call_makers(node))
            elif all(step[0] == "item" for step in origin.path) and isinstance(self.facts.local_definition(node.func), cst.FunctionDef):
                found.extend(self._call_makers(node))
        return list(dict.fromkeys(found))

    def _call_makers(self, call: cst.Call) -> list[cst.Call]:
        kind = self.facts.call_kind(call)
        if isinstance(kind, Kind):
            return [call]
        if isinstance(kind, cst.FunctionDef):
            effects = self.facts.effects.get(kind)
            made = (effects is not None and effects.creates) or self.returns_keras_object(kind)
            return [call] if made else []
        method = self._own_method(call.func)
        if method is not None and self.returns_keras_object(method):
            return [call]
        return []

    def returns_keras_object(self, function: cst.FunctionDef) -> bool:
        """Whether ``function`` returns a Keras object it (or a function it calls) makes."""
        memo = self._returns
        if function not in memo:
            memo[function] = False  # while it is being worked out (recursion)
            info = self.facts.functions.get(function)
            memo[function] = info is not None and any(self.makers(ret.value) for ret in info.returns)
        return memo[function]

    def _arguments_for(self, param: cst.Param) -> list[cst.BaseExpression]:
        """What the calls of the parameter's function pass for it (its default included)."""
        function = self.program.enclosing_function(param)
        if function is None or param not in function.params.params and param not in function.params.kwonly_params:
            return []
        found: list[cst.BaseExpression] = []
        for ref in self.facts.references(function):
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                continue
            arg = parameter_argument(function, call, param)
            if arg is not None:
                found.append(arg.value)
            elif param.default is not None:
                found.append(param.default)
        return found

    def is_model_maker(self, call: cst.Call) -> bool:
        kind = self.facts.call_kind(call)
        if kind in _MODEL_KINDS:
            return True
        if isinstance(kind, cst.FunctionDef):
            return True
        return kind is None and self._own_method(call.func) is not None

    def ingredients(self, call: cst.Call) -> list[cst.Call]:
        """The Keras objects a model is built from: layers (and models) whose results flow into
        the construction, followed back through names and calls."""
        found: list[cst.Call] = []
        seen: set[int] = {id(call)}
        pending: list[cst.CSTNode] = [call.func, *(a.value for a in call.args)]
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, cst.Name):
                for binding in self.facts.reaching_bindings(node) or ():
                    if isinstance(binding, cst.Param):
                        continue
                    value = self.facts.assigned_value(binding)
                    if value is not None:
                        pending.append(value)
                continue
            if isinstance(node, cst.Call):
                kind = self.facts.call_kind(node)
                if isinstance(kind, Kind) and kind in (Kind.LAYER, Kind.MODEL, Kind.LOAD):
                    found.append(node)
                elif isinstance(kind, cst.FunctionDef) and self.is_model_maker(node):
                    found.append(node)
                pending.append(node.func)
                pending.extend(a.value for a in node.args)
                continue
            if isinstance(node, cst.Attribute):
                pending.append(node.value)
            elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
                pending.extend(e.value for e in node.elements)
            elif isinstance(node, cst.Dict):
                pending.extend(e.value for e in node.elements if isinstance(e, cst.DictElement))
            elif isinstance(node, cst.BinaryOperation):
                pending.extend((node.left, node.right))
            elif isinstance(node, cst.Subscript):
                pending.append(node.value)
        return found

    # --- members ---------------------------------------------------------------------------------

    def _add(self, site: Site, calls) -> None:
        for call in calls:
            if call not in site.members:
                site.members.append(call)

    def _add_model_members(self, site: Site, receiver: cst.BaseExpression, models: list[cst.Call]) -> None:
        for model in models:
            self._add(site, [model, *self.ingredients(model)])
        for call, factory in self.method_calls_on(models):
            self._add_method_call(site, call.func.value, factory)  # type: ignore[union-attr]

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
                    for value in _elements(arg.value):
                        made = self.makers_for_call(value, function, factory) if function is not None else []
                        self._add(site, [
                            m for m in made
                            if self.facts.call_kind(m) in (Kind.OPTIMIZER, Kind.METRIC) and not _inside(self.program, m, function)
                        ])
            return
        if self.facts.call_kind(call) == COMPILE:
            self._add(site, [call])
            # ``optimizer=``, ``metrics=[...]``, and the optimizers of a model whose compile
            # takes others (``compile(encoder_optimizer=..., probe_optimizer=...)``).
            for arg in call.args:
                for value in _elements(arg.value):
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
            if _inside(self.program, site.call, function):
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
            elif method in ("update_state", "reset_state", "reset_states"):
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
        site.members[:] = [m for m in site.members if not any(_inside(self.program, m, init) for init in inits)]
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


def _inside(program: Program, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(a is container for a in program.ancestors(node))
