"""Strategies: which values are tf.distribute strategies (made here, passed in, or known by
how the code uses them), of which classes, and which attributes of the file's classes hold
one. Part of :class:`~autofix.analysis.facts.script.Facts`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis.facts.devices import visible_gpus
from autofix.analysis.syntax import argument_value, target_names
from autofix.tf import symbols

# The class of a strategy known only by use (``with s.scope():``), made in another module.
UNKNOWN_STRATEGY = "Strategy"


@dataclass(eq=False)
class Strategy:
    """A name bound to a tf.distribute strategy (in one scope)."""

    name: str
    # The assignments that bind it (several when chosen by if/else), or the parameter.
    bindings: list[cst.CSTNode]
    # Class names that may be constructed ("MirroredStrategy", ...); empty when only known
    # through a helper or an annotation.
    classes: set[str] = field(default_factory=set)
    # Constructor calls (to tell one strategy object from two).
    constructions: list[cst.Call] = field(default_factory=list)
    is_parameter: bool = False
    # The bindings that make a strategy (``strategy = None`` placeholders left out).
    creations: list[cst.CSTNode] = field(default_factory=list)
    # Held in an attribute of the objects of a class (``self.strategy``, seen from one method):
    # it exists from the method's start unless the method sets it.
    attribute: bool = False


# What ``Strategy.run`` takes: ``run(fn, args=(), kwargs=None, options=None)``.
_RUN_PARAMETERS = frozenset({"fn", "args", "kwargs", "options"})


class Strategies:
    """The strategies section of :class:`~autofix.analysis.facts.script.Facts`."""

    # --- strategies --------------------------------------------------------------------------

    def is_strategy_expr(self, expr: cst.BaseExpression | None) -> bool:
        return self.strategy_classes(expr) is not None

    def strategy_classes(self, expr: cst.BaseExpression | None) -> set[str] | None:
        """The strategy classes ``expr`` may evaluate to, or None if it is not a strategy.

        Followed through the module's value flow (:mod:`autofix.analysis.core.value_flow`):
        names, parameters (what the calls pass), helpers' returns, attributes of this module's classes (``self.strategy``),
        tuple and dict items. A value made elsewhere (an imported helper's result, a parameter of
        a function nothing here calls, an attribute of an object made elsewhere) is a strategy
        of unknown class when the code uses it as one (``.scope()``, ``.run(step, ...)``,
        ``.num_replicas_in_sync``, ``.experimental_distribute_dataset(...)``)."""
        if expr is None:
            return None
        if isinstance(expr, cst.Name):
            strategy = self.strategy_for_name(expr)
            return strategy.classes if strategy is not None else None
        key = ("classes", id(expr))
        if key in self._in_progress:
            return None
        self._in_progress.add(key)
        try:
            found = self._origin_classes(self.values.origins(expr), self._used_as_strategy(expr))
        finally:
            self._in_progress.discard(key)
        return found[0] if found is not None else None

    def _origin_classes(self, origins, used: bool) -> tuple[set[str], list[cst.Call]] | None:
        """The strategy classes the origins of a value make, and the constructor calls among
        them; None unless every origin is a strategy (``None`` placeholders aside)."""
        classes: set[str] = set()
        constructions: list[cst.Call] = []
        for origin in origins:
            node = origin.node
            if not origin.whole:
                if not used:
                    return None
                classes.add(UNKNOWN_STRATEGY)
                continue
            if isinstance(node, cst.Name) and node.value == "None":
                continue
            if isinstance(node, cst.Call):
                kind = self.constructed_classes(node)
                if kind is not None:
                    classes |= kind
                    constructions.append(node)
                    continue
                local = self.local_definition(node.func)
                if isinstance(local, cst.FunctionDef):
                    inner = self._returned_classes(local, node, used)
                    if inner is None:
                        return None
                    classes |= inner[0]
                    constructions.extend(inner[1])
                    continue
                names = self.names_of(node.func)
                library = bool(names) and all(symbols.is_library_non_strategy(n) for n in names)
                if used and local is None and not library and self.is_module_reference(node.func):
                    # ``create_strategy()`` from another module, known by how it is used (a
                    # TensorFlow API outside tf.distribute with a ``scope()`` is not one).
                    classes.add(UNKNOWN_STRATEGY)
                    continue
                return None
            if isinstance(node, cst.Param):
                annotation = node.annotation
                if annotation is not None and any(symbols.is_strategy_type(n) for n in self.names_of(annotation.annotation)):
                    classes.add(UNKNOWN_STRATEGY)
                    continue
                if used:
                    classes.add(UNKNOWN_STRATEGY)
                    continue
                return None
            return None
        if not classes:
            return None
        return classes, constructions

    def constructed_classes(self, call: cst.Call) -> set[str] | None:
        """The strategy classes ``call`` constructs when it calls a strategy's constructor
        (``MirroredStrategy(devices=["/gpu:0"])`` is one replica's; ``get_strategy()`` the
        strategy of the scope it runs in), else None."""
        for name in self.names_of(call.func):
            if symbols.is_strategy_constructor(name):
                kind = name.rpartition(".")[2]
                if kind == "get_strategy":
                    # The strategy whose scope is entered where it is called (the default
                    # strategy, with one replica, outside every scope).
                    return self.scope_classes_at(call)
                devices = argument_value(call, "devices", 0) if kind == "MirroredStrategy" else None
                if isinstance(devices, (cst.List, cst.Tuple)) and len(devices.elements) == 1:
                    # ``MirroredStrategy(devices=["/gpu:0"])``: one replica.
                    return {symbols.ONE_DEVICE_MIRRORED}
                if kind == "MirroredStrategy" and devices is None and self.program.migration is None and not self.program.migrated:
                    # ``os.environ["CUDA_VISIBLE_DEVICES"] = "0"`` before TensorFlow runs: the
                    # process sees one GPU (or none): one replica. (Not while migrating, nor in
                    # the check of what a migration wrote: its strategy is for several
                    # replicas, whatever GPUs the single-device script made visible.)
                    visible = visible_gpus(self.program)
                    if visible is not None and visible[0] == 1:
                        return {symbols.ONE_DEVICE_MIRRORED}
                return {kind}
        return None

    def _returned_classes(self, function: cst.FunctionDef, call: cst.Call, used: bool) -> tuple[set[str], list[cst.Call]] | None:
        key = ("returns", function)
        if key in self._in_progress:
            return None
        self._in_progress.add(key)
        try:
            origins = self.values.returned(function, call)
            return self._origin_classes(origins, used) if origins else None
        finally:
            self._in_progress.discard(key)

    # What is done only with a strategy: a read of these attributes or a call of these methods
    # on a value is evidence that it is one.
    _STRATEGY_MEMBERS = frozenset(
        {
            "scope",
            "num_replicas_in_sync",
            "experimental_distribute_dataset",
            "distribute_datasets_from_function",
            "experimental_distribute_datasets_from_function",
            "experimental_distribute_values_from_function",
            "experimental_run_v2",
        }
    )

    @cached_property
    def _strategy_evidence(self) -> tuple[set[int], set[tuple[cst.ClassDef, str]]]:
        """The bindings, and the (class, attribute) pairs, whose values the module uses as a
        strategy."""
        return self._all_strategy_evidence[:2]

    @cached_property
    def _object_strategy_evidence(self) -> set[tuple[int, str]]:
        """The (binding of a name, attribute) pairs whose ``name.attribute`` the module uses as
        a strategy: ``config = ModelConfiguration(args)`` then ``with config.strategy.scope():``."""
        return self._all_strategy_evidence[2]

    @cached_property
    def _all_strategy_evidence(self) -> tuple[set[int], set[tuple[cst.ClassDef, str]], set[tuple[int, str]]]:
        bindings: set[int] = set()
        attributes: set[tuple[cst.ClassDef, str]] = set()
        objects: set[tuple[int, str]] = set()
        members = [a for m in (*self._STRATEGY_MEMBERS, "run") for a in self.values.attributes_named(m)]
        for node in members:
            if not self._strategy_member(node):
                continue
            receiver = node.value
            if isinstance(receiver, cst.Name):
                for binding in self.bindings(receiver) or ():
                    bindings.add(id(binding))
            elif isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name):
                for binding in self.bindings(receiver.value) or ():
                    if isinstance(binding, cst.Param) and self.values.is_self(binding):
                        function = self.program.enclosing_function(binding)
                        cls = self.values.class_of(function) if function is not None else None
                        if cls is not None:
                            attributes.add((cls, receiver.attr.value))
                    else:
                        objects.add((id(binding), receiver.attr.value))
        return bindings, attributes, objects

    def _strategy_member(self, node: cst.Attribute) -> bool:
        member = node.attr.value
        if member in self._STRATEGY_MEMBERS:
            return True
        if member != "run":
            return False
        # ``strategy.run(step, args=...)``, not ``session.run(train_op)``.
        call = self.program.parent(node)
        if not (isinstance(call, cst.Call) and call.func is node and call.args):
            return False
        if any(a.keyword is not None and a.keyword.value not in _RUN_PARAMETERS or a.star for a in call.args) or len(call.args) > 4:
            # ``runner.run(train, gpus_per_node=2)`` (Spark's MirroredStrategyRunner): a
            # strategy's run takes only these.
            return False
        if any(a.keyword is not None and a.keyword.value in ("args", "kwargs") for a in call.args):
            return True
        first = call.args[0].value
        return isinstance(first, cst.Lambda) or isinstance(self.local_definition(first), cst.FunctionDef)

    def _used_as_strategy(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` (a name, or ``self.<attribute>``) is used as a strategy somewhere."""
        bindings, attributes = self._strategy_evidence
        if isinstance(expr, cst.Name):
            return any(id(b) in bindings for b in self.bindings(expr) or ())
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            for binding in self.bindings(expr.value) or ():
                if isinstance(binding, cst.Param) and self.values.is_self(binding):
                    function = self.program.enclosing_function(binding)
                    cls = self.values.class_of(function) if function is not None else None
                    if cls is not None and any((c, expr.attr.value) in attributes for c in self.values.family(cls)):
                        return True
                elif (id(binding), expr.attr.value) in self._object_strategy_evidence:
                    return True
        return False

    def strategy_for_name(self, name: cst.Name) -> Strategy | None:
        """The strategy a name refers to, if every binding of it makes a strategy."""
        nodes = self.bindings(name)
        if not nodes:
            return None
        key = (id(nodes[0]), name.value)
        if key in self._strategy_memo:
            return self._strategy_memo[key]
        if key in self._in_progress:
            return None
        self._in_progress.add(key)
        try:
            bindings, _attributes = self._strategy_evidence
            used = any(id(n) in bindings for n in nodes)
            result = self._make_strategy(name.value, nodes, used)
        finally:
            self._in_progress.discard(key)
        self._strategy_memo[key] = result
        return result

    def _make_strategy(self, name: str, nodes: list[cst.CSTNode], used: bool) -> Strategy | None:
        if len(nodes) == 1 and isinstance(nodes[0], cst.Param):
            param = nodes[0]
            found = self._origin_classes(self.values.binding_origins(param), used or self._always_passed_a_strategy(param))
            if found is None:
                return None
            return Strategy(name, [param], found[0], found[1], is_parameter=True, creations=[param])
        classes: set[str] = set()
        constructions: list[cst.Call] = []
        creations: list[cst.CSTNode] = []
        for node in nodes:
            origins = self.values.binding_origins(node)
            if origins and all(isinstance(o.node, cst.Name) and o.node.value == "None" and o.whole for o in origins):
                continue  # ``strategy = None``: a placeholder
            found = self._origin_classes(origins, used)
            if found is None:
                return None
            creations.append(node)
            classes |= found[0]
            constructions.extend(found[1])
        if not creations:
            return None
        return Strategy(name, list(nodes), classes, constructions, creations=creations)

    def _always_passed_a_strategy(self, param: cst.Param) -> bool:
        """Whether every call of the parameter's function in this module passes a strategy for
        it (then its value is one, even where it is not used as one)."""
        function = self.program.enclosing_function(param)
        if function is None:
            return False
        calls, passed_on = self.values.calls_of(function)
        return bool(calls) and not passed_on

    @cached_property
    def strategies(self) -> list[Strategy]:
        """Every strategy variable of this module (one per scope and name): assigned, a
        parameter, or known by its use (``with s.scope():``)."""
        found: list[Strategy] = []
        seen: set[int] = set()

        def add(strategy: Strategy | None) -> None:
            if strategy is not None and id(strategy) not in seen:
                seen.add(id(strategy))
                found.append(strategy)

        bindings, _attributes = self._strategy_evidence
        for assign in self.assigns:
            if assign.value is None:
                continue
            maybe = self._may_make_strategy(assign.value)
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            for target in targets:
                for name in target_names(target):
                    # (``strategy, auto = detect_hardware()`` from another module: known by use.)
                    if maybe or id(name) in bindings:
                        add(self.strategy_for_name(name))
        for info in self.functions.values():
            params = info.node.params
            for param in (*params.params, *params.kwonly_params):
                if id(param) in bindings or self._annotated_strategy(param):
                    strategy = self.strategy_for_name(param.name)
                    if strategy is not None and strategy.is_parameter:
                        add(strategy)
        # Parameters given a strategy: by a strategy found so far (passed on, transitively), or a
        # strategy made in the call itself.
        pending = list(found)
        given: list[cst.Arg] = [
            argument for call, _owner in self.calls for argument in call.args
            if isinstance(argument.value, cst.Call) and self.constructed_classes(argument.value) is not None
        ]
        while pending or given:
            if pending:
                strategy = pending.pop()
                for binding in strategy.bindings:
                    target = binding.name if isinstance(binding, cst.Param) else binding
                    if not isinstance(target, cst.Name):
                        continue
                    for use in self.uses(target):
                        arg = self.program.parent(use)
                        if isinstance(arg, cst.Arg) and arg.value is use:
                            given.append(arg)
                continue
            arg = given.pop()
            for param in self._parameters_given(arg):
                strategy = self.strategy_for_name(param.name)
                if strategy is not None and strategy.is_parameter and id(strategy) not in seen:
                    add(strategy)
                    pending.append(strategy)
        # Names known to be strategies only by use: ``with strategy.scope():``.
        for item in self._with_items:
            value = item.item
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name):
                if value.func.attr.value != "scope":
                    continue
                for node in self.bindings(value.func.value) or ():
                    name = node.name if isinstance(node, cst.Param) else node
                    if isinstance(name, cst.Name):
                        add(self.strategy_for_name(name))
        return found

    def _may_make_strategy(self, value: cst.BaseExpression) -> bool:
        """A cheap look before the value flow: the value calls a strategy constructor or a
        function or class of this module, or reads a name or an attribute."""
        if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.IfExp, cst.BooleanOperation)):
            return True
        if not isinstance(value, cst.Call):
            return False
        return any(symbols.is_strategy_constructor(n) for n in self.names_of(value.func)) or self.local_definition(value.func) is not None or not self.names_of(value.func)

    def _annotated_strategy(self, param: cst.Param) -> bool:
        annotation = param.annotation
        return annotation is not None and any(symbols.is_strategy_type(n) for n in self.names_of(annotation.annotation))

    def _parameters_given(self, arg: cst.Arg) -> list[cst.Param]:
        """The parameter of a local function (or class's ``__init__``) that ``arg`` of a call
        binds."""
        call = self.program.parent(arg)
        if not isinstance(call, cst.Call):
            return []
        definition = self.local_definition(call.func)
        if isinstance(definition, cst.ClassDef):
            body = definition.body.body if isinstance(definition.body, cst.IndentedBlock) else ()
            definition = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if not isinstance(definition, cst.FunctionDef):
            return []
        offset = 1 if self.functions.get(definition) and self.functions[definition].is_method else 0
        params = list(definition.params.params)[offset:]
        if arg.keyword is not None:
            return [p for p in [*params, *definition.params.kwonly_params] if p.name.value == arg.keyword.value]
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if arg in positional and positional.index(arg) < len(params):
            return [params[positional.index(arg)]]
        return []

    def strategy_attributes(self) -> list[tuple[cst.ClassDef, str, set[str]]]:
        """``self.<attribute>`` strategies: each class, attribute and the strategy classes
        its values may be."""
        return self._strategy_attributes

    @cached_property
    def _strategy_attributes(self) -> list[tuple[cst.ClassDef, str, set[str]]]:
        found = []
        _bindings, used = self._strategy_evidence
        for cls in self.classes:
            for attribute, values in self.values.attribute_values(cls).items():
                evidence = any((c, attribute) in used for c in self.values.family(cls))
                if not evidence and not any(self._may_make_strategy(v) for v in values):
                    continue
                classes: set[str] = set()
                for value in values:
                    origins = self.values.origins(value)
                    made = self._origin_classes(origins, evidence)
                    if made is None:
                        classes = set()
                        break
                    classes |= made[0]
                if classes:
                    found.append((cls, attribute, classes))
        return found


# --- a strategy that may be None ---------------------------------------------------------------


def may_be_none(program, code: str, at: cst.CSTNode | None = None, placeholders: bool = True) -> cst.CSTNode | None:
    """Where the file shows that the strategy spelled ``code`` (``strategy``, ``self.strategy``)
    may be None, or None: the file compares it with None, binds None to it, or binds it from a
    parameter whose default is None (a trainer whose single-device path passes no strategy and
    runs the same code). Code a fix writes with it (``<code>.scope()``,
    ``<code>.num_replicas_in_sync``, ``<code>.run``) would then fail on that path: a fix must
    use what works on both (``tf.distribute.get_strategy()``, the replica context) or be
    refused. A guard that rebinds it (``if strategy is None: strategy = ...``) is not such a
    sign, and ``strategy or tf.distribute.get_strategy()`` is never None. A plain name is
    looked for in the function around ``at`` only (where given): another function's
    ``strategy=None`` is another variable. ``placeholders=False``: a plain name bound to None
    (``strategy = None`` before a helper or a branch sets it) is left to the caller, which knows
    the order of its bindings (TFD001's contexts)."""
    module = program.module
    attribute = code.startswith("self.")
    nodes = _walk(module)
    if at is not None and not attribute:
        # The function that binds the name (a read of a global or a closure's name looks
        # outwards, as Python does).
        function = program.enclosing_function(at)
        while function is not None and not _binds(program, function, code):
            function = program.enclosing_function(function)
        nodes = _walk_own(function) if function is not None else _walk_own(module)
    for node in nodes:
        if isinstance(node, cst.Comparison) and module.code_for_node(node.left) == code:
            if any(_is_none(c.comparator) for c in node.comparisons) and not _rebinding_guard(program, node, code):
                return node
        if isinstance(node, cst.Assign) and any(module.code_for_node(t.target) == code for t in node.targets):
            value = node.value
            if _is_none(value) and (attribute or placeholders):
                return node
            if attribute and isinstance(value, cst.Name) and _none_default(program, node, value.value):
                return node
        if not attribute and isinstance(node, cst.Param) and node.name.value == code and _is_none(node.default):
            function = program.enclosing_function(node)
            if function is None or not _guarded(program, function, code):
                return node
    return None


def _is_none(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _walk_own(node: cst.CSTNode):
    """``node`` and what is in it, but not in the functions, classes and lambdas it defines
    (``node`` itself may be a function: its parameters are its own)."""
    yield node
    for child in node.children:
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            yield from _walk_own(child)


def _binds(program, function: cst.FunctionDef, name: str) -> bool:
    """Whether ``name`` is a local of ``function``: a parameter, or assigned in its own code
    without a ``global`` / ``nonlocal`` declaration."""
    params = function.params
    if any(p.name.value == name for p in (*params.params, *params.kwonly_params, *params.posonly_params)):
        return True
    bound = False
    for node in _walk_own(function.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names):
            return False
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == name:
            bound = True
    return bound


def _rebinding_guard(program, comparison: cst.Comparison, code: str) -> bool:
    """``if <code> is None: <code> = ...`` (or ``raise``): after it, the value is not None."""
    parent = program.parent(comparison)
    if not (isinstance(parent, cst.If) and parent.test is comparison and isinstance(parent.body, cst.IndentedBlock)):
        return False
    if not all(isinstance(c.operator, (cst.Is, cst.Equal)) for c in comparison.comparisons):
        return False
    module = program.module
    for statement in parent.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Raise):
                    return True
                if isinstance(small, cst.Assign) and any(module.code_for_node(t.target) == code for t in small.targets):
                    return not _is_none(small.value)
    return False


def _guarded(program, function: cst.FunctionDef, code: str) -> bool:
    """Whether ``function`` rebinds ``code`` when it is None (``if strategy is None: ...``)."""
    for node in _walk(function.body):
        if isinstance(node, cst.Comparison) and program.module.code_for_node(node.left) == code:
            if any(_is_none(c.comparator) for c in node.comparisons) and _rebinding_guard(program, node, code):
                return True
    return False


def _none_default(program, statement: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is a parameter of the function around ``statement`` whose default is
    None (and that the function does not rebind when it is None)."""
    function = program.enclosing_function(statement)
    if function is None:
        return False
    params = function.params
    for param in (*params.params, *params.kwonly_params):
        if param.name.value == name:
            return _is_none(param.default) and not _guarded(program, function, name)
    return False
