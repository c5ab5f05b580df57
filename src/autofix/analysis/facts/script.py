"""What a training script does with tf.distribute and Keras, read off one parsed module.

Everything here is resolved through imports and scopes (the one-pass index of
:mod:`autofix.tf.index`), never by matching spellings: ``strategy`` is a strategy because of how it was
assigned, ``keras.Sequential`` is a model constructor whichever way Keras was imported.

Limits, on purpose: attributes (``self.strategy``, ``self.model``) are not followed, nor are
names imported from other files; methods of classes are never treated as scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived, environment
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, attribute_path
from autofix.analysis.core.value_flow import Values
from autofix.tf import symbols
from autofix.tf.symbols import Kind

# The class of a strategy known only by use (``with s.scope():``), made in another module.
UNKNOWN_STRATEGY = "Strategy"

# What a call does, beyond the Keras kinds: compile a model, train it, call a local function.
COMPILE = "compile"
TRAIN = "train"


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


def _run_receivers(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ("run", "experimental_run_v2")


class Facts(Derived):
    """TF facts about one module. Cheap to build; each fact is computed on first use."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self._call_kinds: dict[cst.Call, Kind | str | cst.FunctionDef | None] = {}
        self.values = values = Values.of(program)
        self.calls = program.index.calls
        self.functions = values.functions
        self.classes = values.classes
        self.assigns = values.assigns
        # The name-level questions are the value flow's (one resolution for every rule).
        self.assigned_value = values.assigned_value
        self.bindings = values.bindings
        self.reaching_bindings = values.reaching_bindings
        self.local_definition = values.local_definition
        self.is_module_reference = values.is_module_reference
        self.references = values.references
        self.assigned_name = values.assigned_name
        self.uses = values.uses
        self._strategy_memo: dict[tuple[int, str], Strategy | None] = {}
        self._in_progress: set[object] = set()

    def names_of(self, expr: cst.BaseExpression) -> frozenset[str]:
        return self.program.qualified_names(expr)

    # --- strategies --------------------------------------------------------------------------

    def is_strategy_expr(self, expr: cst.BaseExpression | None) -> bool:
        return self.strategy_classes(expr) is not None

    def strategy_classes(self, expr: cst.BaseExpression | None) -> set[str] | None:
        """The strategy classes ``expr`` may evaluate to, or None if it is not a strategy.

        Followed through the module's value flow (:mod:`.values`): names, parameters (what the
        calls pass), helpers' returns, attributes of this module's classes (``self.strategy``),
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
                kind = self._constructed_class(node)
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

    def _constructed_class(self, call: cst.Call) -> set[str] | None:
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
        bindings: set[int] = set()
        attributes: set[tuple[cst.ClassDef, str]] = set()
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
        return bindings, attributes

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
                for name in _target_names(target):
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
            if isinstance(argument.value, cst.Call) and self._constructed_class(argument.value) is not None
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

    @property
    def _with_items(self) -> list[cst.WithItem]:
        return self.program.index.with_items

    def entered(self, block: cst.With, node: cst.CSTNode | None = None) -> list[cst.BaseExpression]:
        """The context managers ``block`` enters for the code at ``node`` in its body (for all
        of it when None): its items, both sides of ``s.scope() if distributed else
        nullcontext()`` (the scope is entered whenever it matters), and what
        ``stack.enter_context(...)`` enters on an ``ExitStack`` it opens, from that statement on."""
        found: list[cst.BaseExpression] = []
        for item in block.items:
            pending = [item.item]
            while pending:
                expr = pending.pop()
                if isinstance(expr, cst.IfExp):
                    pending.extend((expr.body, expr.orelse))
                else:
                    found.append(expr)
            stack = item.asname.name if item.asname is not None else None
            if (
                isinstance(stack, cst.Name)
                and isinstance(item.item, cst.Call)
                and self.names_of(item.item.func) & {"contextlib.ExitStack", "contextlib.AsyncExitStack"}
                and isinstance(block.body, cst.IndentedBlock)
            ):
                top = self.program.top_statement_in(node, block.body) if node is not None else None
                for statement in block.body.body:
                    if statement is top:
                        break
                    for call in self.calls_in(statement):
                        func = call.func
                        if (
                            isinstance(func, cst.Attribute)
                            and func.attr.value == "enter_context"
                            and isinstance(func.value, cst.Name)
                            and func.value.value == stack.value
                            and call.args
                        ):
                            found.append(call.args[0].value)
        return found

    def scope_strategy(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` enters a strategy scope: ``s.scope()``, or a name bound to one."""
        if isinstance(expr, cst.IfExp):
            return self.scope_strategy(expr.body) or self.scope_strategy(expr.orelse)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value == "scope" and self.is_strategy_expr(expr.func.value):
                return True
            return False
        if isinstance(expr, cst.Name):
            nodes = self.bindings(expr)
            if nodes and all(self.scope_strategy_value(n) for n in nodes):
                return True
        return False

    def entered_classes(self, block: cst.With) -> set[str]:
        """The strategy classes whose ``s.scope()`` the items of ``block`` enter (empty when
        none, or when the classes are not known)."""
        classes: set[str] = set()
        for value in self.entered(block):
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "scope":
                classes |= self.strategy_classes(value.func.value) or set()
        return classes

    def scope_strategy_value(self, binding: cst.CSTNode) -> bool:
        value = self.assigned_value(binding)
        return value is not None and not isinstance(value, cst.Name) and self.scope_strategy(value)

    def scope_with_strategy_name(self, statement: cst.CSTNode) -> str | None:
        """For ``with <name>.scope():`` (one item, indented body), the strategy name
        (``self.strategy`` for one held in an attribute)."""
        if not isinstance(statement, cst.With) or len(statement.items) != 1:
            return None
        if not isinstance(statement.body, cst.IndentedBlock) or statement.asynchronous:
            return None
        item = statement.items[0].item
        if (
            isinstance(item, cst.Call)
            and not item.args
            and isinstance(item.func, cst.Attribute)
            and item.func.attr.value == "scope"
            and attribute_path(item.func.value) is not None
            and len(attribute_path(item.func.value) or ()) <= 2
            and self.is_strategy_expr(item.func.value)
        ):
            return ".".join(attribute_path(item.func.value) or ())
        return None

    def enters_same_strategy(self, statement: cst.With, strategy: Strategy) -> bool:
        """Whether ``with <s>.scope():`` enters ``strategy`` itself: ``s`` is its name, or
        holds the same object (``self.strategy`` set from the parameter ``strategy``)."""
        receiver = statement.items[0].item.func.value  # type: ignore[attr-defined]
        if ".".join(attribute_path(receiver) or ()) == strategy.name:
            return True
        theirs = {id(o.node) for o in self.values.origins(receiver) if o.whole}
        ours = {id(o.node) for b in strategy.creations for o in self.values.binding_origins(b) if o.whole}
        return bool(theirs) and theirs == ours

    def is_replica_function(self, function: cst.FunctionDef) -> bool:
        """Whether ``function`` is passed to ``strategy.run`` (it runs in replica context)."""
        return function in self.replica_functions

    @cached_property
    def replica_functions(self) -> set[cst.FunctionDef]:
        found = set()
        for call, _owner in self.calls:
            if not _run_receivers(call) or not call.args:
                continue
            receiver = call.func.value  # type: ignore[union-attr]
            if not self.is_strategy_expr(receiver) and not self._is_extended(receiver):
                continue
            definition = self.local_definition(call.args[0].value)
            if isinstance(definition, cst.FunctionDef):
                found.add(definition)
        return found

    def _is_extended(self, expr: cst.BaseExpression) -> bool:
        return (
            isinstance(expr, cst.Attribute)
            and expr.attr.value == "extended"
            and self.is_strategy_expr(expr.value)
        )

    def strategy_run_calls(self) -> list[cst.Call]:
        return [
            call
            for call, _owner in self.calls
            if _run_receivers(call) and self.is_strategy_expr(call.func.value)  # type: ignore[union-attr]
        ]

    # --- scopes ------------------------------------------------------------------------------

    def under_scope(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` always runs inside a strategy scope (lexically, or because every
        caller of its function is inside one, or because it runs in replica context). A call
        of a function from another module given the strategy (``get_model(strategy, ...)``)
        is taken to make what it makes in that strategy's scope: what it does is not known
        here, and it was given the strategy to use it."""
        if isinstance(node, cst.Call) and self.is_module_reference(node.func) and self._given_strategy(node):
            return True
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                if any(self.scope_strategy(expr) for expr in self.entered(ancestor, node)):
                    return True
            elif isinstance(ancestor, cst.FunctionDef):
                return self.always_called_under_scope(ancestor)
            elif isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return False
            previous = ancestor
        return False

    def scope_classes_at(self, node: cst.CSTNode) -> set[str]:
        """The classes of the strategy whose scope is entered where ``node`` runs (the innermost
        ``with s.scope():``, or the scopes every caller of its function runs in); outside every
        scope, the default strategy (``get_strategy``, one replica)."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                classes = self.entered_classes(ancestor)
                if classes:
                    return classes
            elif isinstance(ancestor, cst.FunctionDef):
                return self._called_scope_classes(ancestor)
            elif isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                break
            previous = ancestor
        return {"get_strategy"}

    def _called_scope_classes(self, function: cst.FunctionDef) -> set[str]:
        key = ("scope classes", function)
        if key in self._in_progress:
            return set()
        self._in_progress.add(key)
        try:
            if self.is_replica_function(function):
                classes: set[str] = set()
                for call in self.strategy_run_calls():
                    classes |= self.strategy_classes(call.func.value) or set()  # type: ignore[union-attr]
                return classes or {UNKNOWN_STRATEGY}
            references = self.references(function)
            if not references:
                return {"get_strategy"}
            classes = set()
            for ref in references:
                classes |= self.scope_classes_at(ref)
            return classes
        finally:
            self._in_progress.discard(key)

    def _given_strategy(self, call: cst.Call) -> bool:
        return any(
            isinstance(arg.value, (cst.Name, cst.Attribute)) and self.is_strategy_expr(arg.value)
            for arg in call.args
            if not arg.star
        )

    def always_called_under_scope(self, function: cst.FunctionDef) -> bool:
        key = ("under", function)
        memo = self._scope_memo
        if function in memo:
            return memo[function]
        if key in self._in_progress:
            return False
        self._in_progress.add(key)
        try:
            references = self.references(function)
            if self.is_replica_function(function):
                result = True
            elif self.functions[function].is_method:
                # ``Trainer(...)`` made in the scope runs ``__init__`` there; a method runs
                # where ``self.method()`` / ``obj.method()`` is called.
                calls, passed_on = self.values.calls_of(function)
                result = bool(calls) and not passed_on and all(self.under_scope(call) for call, _offset in calls)
            else:
                result = bool(references) and all(self.under_scope(ref) for ref in references)
        finally:
            self._in_progress.discard(key)
        memo[function] = result
        return result

    @cached_property
    def _scope_memo(self) -> dict[cst.FunctionDef, bool]:
        return {}

    # --- Keras objects -----------------------------------------------------------------------

    @cached_property
    def keras_classes(self) -> dict[cst.ClassDef, Kind]:
        """Classes of this module that subclass a Keras model or layer."""
        result: dict[cst.ClassDef, Kind] = {}
        changed = True
        while changed:
            changed = False
            for cls in self.classes:
                if cls in result:
                    continue
                kind = self._base_kind(cls, result)
                if kind is not None:
                    result[cls] = kind
                    changed = True
        return result

    def _base_kind(self, cls: cst.ClassDef, known: dict[cst.ClassDef, Kind]) -> Kind | None:
        kind = None
        for base in cls.bases:
            names = self.names_of(base.value)
            if any(symbols.is_model_base(n) for n in names):
                return Kind.MODEL
            if any(symbols.is_layer_base(n) for n in names):
                kind = Kind.LAYER
            local = self.local_definition(base.value)
            if isinstance(local, cst.ClassDef) and local in known:
                if known[local] is Kind.MODEL:
                    return Kind.MODEL
                kind = known[local]
        return kind

    def call_kind(self, call: cst.Call) -> Kind | str | cst.FunctionDef | None:
        """What a call does: a Keras :class:`Kind`, ``COMPILE``, ``TRAIN``, a local function
        it calls (a :class:`cst.FunctionDef`), or None."""
        memo = self._call_kinds
        if call not in memo:
            memo[call] = self._call_kind(call)
        return memo[call]

    def _call_kind(self, call: cst.Call) -> Kind | str | cst.FunctionDef | None:
        func = call.func
        names = self.names_of(func)
        for name in names:
            kind = symbols.keras_kind(name)
            if kind is not None:
                return kind
        if names and all(n.split(".", 1)[0] in symbols.NO_KERAS_OBJECTS for n in names):
            # ``np.zeros(...)``, ``tf.constant(...)``, ``os.path.join(...)``: libraries whose
            # calls make no Keras object, whatever is done with the result.
            return None
        local = self.local_definition(func)
        if isinstance(local, cst.ClassDef):
            kind = self.keras_classes.get(local)
            if kind is None and self._result_is_compiled(call):
                # A subclass of a model class from elsewhere (``tfrs.models.Model``): it is
                # compiled, so it is a Keras model.
                return Kind.MODEL
            return kind
        if isinstance(local, cst.FunctionDef):
            return local
        if self._result_is_compiled(call):
            # ``model = build_cnn()`` (imported) then ``model.compile(...)``: whatever built
            # it made a Keras model, with its variables.
            return Kind.MODEL
        if self.is_module_reference(func) and self._compiled_with(call):
            # ``model.compile(optimizer=get_optimizer("adam"))`` (imported): it made the
            # optimizer.
            return Kind.OPTIMIZER
        if isinstance(func, cst.Call):
            # ``layers.Dense(8)(x)``: calling a freshly made layer builds it.
            inner = self.call_kind(func)
            return Kind.LAYER if inner is Kind.LAYER else None
        if isinstance(func, cst.Name):
            return Kind.LAYER if self.is_layer_name(func) else None
        if not isinstance(func, cst.Attribute):
            return None
        attr = func.attr.value
        receiver = func.value
        if self.is_module_reference(receiver):
            return None
        if attr in symbols.COMPILE_METHODS and self._compiles_a_model(call):
            return COMPILE
        if attr in symbols.LOAD_METHODS:
            return Kind.LOAD
        if attr == "restore" and self._is_checkpoint(receiver):
            return Kind.LOAD
        if attr in symbols.TRAIN_METHODS or attr == "apply_gradients":
            return TRAIN
        if attr in ("run", "experimental_run_v2") and self.is_strategy_expr(receiver):
            return TRAIN
        return None

    def _result_is_compiled(self, call: cst.Call) -> bool:
        """Whether what ``call`` returns is compiled (or loaded into) as a Keras model is:
        the evidence that a call made elsewhere built a model. Not for a builtin's result
        (``str(args["model"])``), and not for a ``compile`` given models (a trainer's
        ``compile(gen_model=..., dis_model=...)``: Keras's compile never takes one)."""
        target = self.assigned_name(call)
        if target is None or any(n.startswith("builtins.") for n in self.names_of(call.func)):
            return False
        for use in self.uses(target):
            attribute = self.program.parent(use)
            if not (isinstance(attribute, cst.Attribute) and attribute.value is use):
                continue
            method = self.program.parent(attribute)
            if not (isinstance(method, cst.Call) and method.func is attribute):
                continue
            if attribute.attr.value in symbols.COMPILE_METHODS and method.args:
                if any(a.keyword is not None and "model" in _words(a.keyword.value) for a in method.args):
                    continue
                return True
            if attribute.attr.value in symbols.LOAD_METHODS:
                return True
        return False

    def _compiled_with(self, call: cst.Call) -> bool:
        """Whether what ``call`` returns is the ``optimizer`` a model is compiled with (given
        to ``compile`` directly, or through a name)."""
        target = self.assigned_name(call)
        places = [call] if target is None else [u for u in self.uses(target) if isinstance(u, cst.Name)]
        for place in places:
            arg = self.program.parent(place)
            holder = self.program.parent(arg) if isinstance(arg, cst.Arg) else None
            if not (isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and holder.func.attr.value in symbols.COMPILE_METHODS):
                continue
            positional = [a for a in holder.args if a.keyword is None and not a.star]
            if (arg.keyword is not None and arg.keyword.value == "optimizer") or (arg.keyword is None and positional[:1] == [arg]):  # type: ignore[union-attr]
                return True
        return False

    def _compiles_a_model(self, call: cst.Call) -> bool:
        keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
        if keywords & {"optimizer", "loss", "metrics", "loss_weights", "weighted_metrics",
                       "run_eagerly", "steps_per_execution", "jit_compile"}:
            return True
        receiver = call.func.value  # type: ignore[union-attr]
        return isinstance(receiver, cst.Name) and self.is_model_name(receiver)

    def _is_checkpoint(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return symbols.CHECKPOINT in self.names_of(expr.func)
        if isinstance(expr, cst.Name):
            nodes = self.bindings(expr)
            values = [self.assigned_value(n) for n in nodes or ()]
            return bool(values) and all(v is not None and self._is_checkpoint(v) for v in values)
        return False

    def _value_kinds(self, name: cst.Name) -> set:
        nodes = self.bindings(name)
        kinds = set()
        for node in nodes or ():
            value = self.assigned_value(node)
            if isinstance(value, cst.Call):
                kinds.add(self.call_kind(value))
        return kinds

    def is_layer_name(self, name: cst.Name) -> bool:
        kinds = self._value_kinds(name)
        return bool(kinds) and kinds <= {Kind.LAYER}

    def is_model_name(self, name: cst.Name) -> bool:
        kinds = self._value_kinds(name)
        return any(k in (Kind.MODEL, Kind.LOAD) or isinstance(k, cst.FunctionDef) for k in kinds)

    def calls_in(self, statement: cst.CSTNode) -> list[cst.Call]:
        """The calls made by running ``statement`` (not those inside functions, classes or
        lambdas it defines), in source order."""
        return self._calls_by_statement.get(statement, [])

    @cached_property
    def _calls_by_statement(self) -> dict[cst.CSTNode, list[cst.Call]]:
        found: dict[cst.CSTNode, list[cst.Call]] = {}
        parents = self.program.index.parents
        for call, owner in self.calls:
            node = parents.get(call)
            while node is not None and node is not owner:
                kind = type(node)
                # (Concrete types: isinstance on libcst's abstract bases is slow in this loop.)
                if kind in _STATEMENT_TYPES:
                    found.setdefault(node, []).append(call)
                if kind in _SCOPE_TYPES:
                    break
                node = parents.get(node)
        return found

    def names(self) -> set[str]:
        """Every name bound or read in the module."""
        index = self.program.index
        return {b.name for b in index.bindings.values()} | {a.name for a in index.accesses.values()}

    # --- which Keras the file can run on ------------------------------------------------------

    # Methods that TensorFlow 2.16+ (Keras 3) no longer has (measured on TF 2.21 / Keras 3.15).
    _REMOVED_METHODS = frozenset({"experimental_run_v2", "fit_generator", "evaluate_generator", "predict_generator"})

    @cached_property
    def needs_keras2(self) -> str | None:
        """What makes the file unable to run on Keras 3 (TensorFlow 2.16 and later), if
        anything: a method Keras 3 or TensorFlow no longer has (``strategy.experimental_run_v2``,
        ``model.fit_generator``), an optimizer given ``lr=`` (Keras 3 rejects the argument), or
        TensorFlow Addons (which needs Keras 2), or a notebook that installs a TensorFlow
        older than 2.16 (:mod:`.environment`). Where a file can only run on Keras 2, what fails
        only on Keras 3 is not a bug of it."""
        pinned = environment.current().keras2
        if pinned is not None:
            return pinned
        for call, _owner in self.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in self._REMOVED_METHODS:
                return f"it calls {func.attr.value}() (line {self.program.line(call)}), which TensorFlow 2.16+ no longer has"
            if any(a.keyword is not None and a.keyword.value == "lr" for a in call.args) and self.call_kind(call) is Kind.OPTIMIZER:
                return f"its optimizer takes lr= (line {self.program.line(call)}), which Keras 3 rejects"
        for binding in self.program.index.bindings.values():
            if binding.kind == "import" and binding.path is not None and binding.path.split(".")[0] == "tensorflow_addons":
                return "it imports tensorflow_addons, which needs Keras 2"
        return None

    # --- functions ---------------------------------------------------------------------------

    def scoped_within(self, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
        """Whether ``node`` is inside a strategy ``with`` block that is itself inside ``stop``."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                if any(self.scope_strategy(expr) for expr in self.entered(ancestor, node)):
                    return True
            previous = ancestor
        return False

    @cached_property
    def effects(self) -> dict[cst.FunctionDef, FunctionEffects]:
        """For each plain function: does calling it create Keras objects outside a scope of its
        own, and does it train? Both follow calls to other functions of the module."""
        result: dict[cst.FunctionDef, FunctionEffects] = {}
        callees: dict[cst.FunctionDef, list[cst.FunctionDef]] = {}
        for function, info in self.functions.items():
            effects = FunctionEffects()
            callees[function] = []
            if info.is_method:
                result[function] = effects
                continue
            for call in info.calls:
                kind = self.call_kind(call)
                if kind == TRAIN:
                    effects.trains = True
                elif self.scoped_within(call, function):
                    continue
                elif (isinstance(kind, Kind) or kind == COMPILE) and not (kind in (Kind.OPTIMIZER, COMPILE) and self.needs_keras2):
                    # (On Keras 2, where a file that needs it runs, an optimizer may be made
                    # anywhere.)
                    effects.creates = True
                elif isinstance(kind, cst.FunctionDef) and kind is not function:
                    callees[function].append(kind)
            result[function] = effects
        changed = True
        while changed:
            changed = False
            for function, called in callees.items():
                effects = result[function]
                for callee in called:
                    other = result.get(callee)
                    if other is None:
                        continue
                    if other.creates and not effects.creates:
                        effects.creates = changed = True
                    if other.trains and not effects.trains:
                        effects.trains = changed = True
        return result

    def inspection_only(self, call: cst.Call) -> bool:
        """Whether ``call`` makes an object that is only ever looked at (``m.summary()``,
        ``print(m)``), or never used: such an object is not trained, so it may stay outside."""
        target = self.assigned_name(call)
        if target is None:
            return self._inspects(call)
        return all(self._inspects(use) for use in self.uses(target))

    def _inspects(self, use: cst.CSTNode) -> bool:
        parent = self.program.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            return parent.attr.value in symbols.INSPECT_METHODS
        if isinstance(parent, cst.Arg):
            call = self.program.parent(parent)
            if isinstance(call, cst.Call):
                return bool(self.names_of(call.func) & symbols.INSPECT_FUNCTIONS)
        return False


@dataclass
class FunctionEffects:
    creates: bool = False
    trains: bool = False


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment target binds (``a``, ``a, (b, c)``)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


def _words(identifier: str) -> set[str]:
    """``gen_model`` -> {"gen", "model"}."""
    return {w for w in identifier.lower().split("_") if w}


def _subclasses(base: type) -> frozenset[type]:
    found: set[type] = set()
    pending = [base]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return frozenset(found)


_STATEMENT_TYPES = _subclasses(cst.BaseStatement) | _subclasses(cst.BaseSmallStatement)
_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
