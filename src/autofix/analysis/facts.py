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

from autofix.analysis import Derived
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, parameter_argument
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


@dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    calls: list[cst.Call] = field(default_factory=list)
    returns: list[cst.Return] = field(default_factory=list)
    is_method: bool = False


def _run_receivers(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ("run", "experimental_run_v2")


class Facts(Derived):
    """TF facts about one module. Cheap to build; each fact is computed on first use."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self._call_kinds: dict[cst.Call, Kind | str | cst.FunctionDef | None] = {}
        index = program.index
        self.calls = index.calls
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {
            function: FunctionInfo(function, index.function_calls[function], index.returns[function], is_method)
            for function, is_method in index.functions
        }
        self.classes = index.classes
        self.assigns = index.assigns
        self._strategy_memo: dict[tuple[int, str], Strategy | None] = {}
        self._reaching: dict[cst.Name, list[cst.CSTNode] | None] = {}
        self._in_progress: set[object] = set()

    # --- assignments and definitions ---------------------------------------------------------

    def assigned_value(self, binding: cst.CSTNode) -> cst.BaseExpression | None:
        """The value bound by a simple assignment ``name = value`` (None for anything else)."""
        parent = self.program.parent(binding)
        if isinstance(parent, cst.AssignTarget):
            assign = self.program.parent(parent)
            if isinstance(assign, cst.Assign):
                return assign.value
        elif isinstance(parent, cst.AnnAssign) and parent.target is binding:
            return parent.value
        elif isinstance(parent, cst.NamedExpr) and parent.target is binding:
            return parent.value
        return None

    def bindings(self, name: cst.Name) -> list[cst.CSTNode] | None:
        """The nodes that bind a name where it is used (for a name being assigned: every
        binding of that name in its scope), or None if any of them is an import, a builtin or
        unknown. In source order."""
        access = self.program.access(name)
        if access is not None:
            referents = access.referents
        else:
            scope = self.program.scope(name)
            referents = scope.assignments(name.value) if scope is not None else []
        if not referents:
            return None
        pairs = []
        for referent in referents:
            if referent.kind in ("import", "builtin"):
                return None
            pairs.append((referent.index, referent.node))
        pairs.sort(key=lambda pair: pair[0])
        return [node for _, node in pairs]

    def reaching_bindings(self, name: cst.Name) -> list[cst.CSTNode] | None:
        """:meth:`bindings` of a name that is read, without those that a later binding
        certainly replaces first: one made by a statement of a block that the read is in (or
        in a ``with`` body there), before the read (``model = a(); model = b(); model.fit()``
        reaches ``b()`` only)."""
        nodes = self.bindings(name)
        access = self.program.access(name)
        if not nodes or len(nodes) == 1 or access is None:
            return nodes
        memo = self._reaching
        if name in memo:
            return memo[name]
        memo[name] = nodes
        path = {id(a): a for a in self.program.ancestors(name)}
        bindings = self.program.index.bindings
        for position in range(len(nodes) - 1, -1, -1):
            binding = bindings.get(nodes[position])
            # Bindings and reads are numbered in source order by the index.
            if binding is None or binding.index > access.index:
                continue
            statement = self.program.statement_of(nodes[position])
            while statement is not None:
                block = self.program.block_of(statement)
                if block is None:
                    break
                if id(block) in path:
                    if not _inside(self.program, name, statement):
                        memo[name] = nodes[position:]
                        return memo[name]
                    break
                # The body of a ``with`` runs whenever the ``with`` does.
                holder = self.program.parent(block)
                statement = holder if isinstance(holder, cst.With) else None
        return nodes

    def local_definition(self, expr: cst.BaseExpression) -> cst.FunctionDef | cst.ClassDef | None:
        """The function or class of this module that ``expr`` (a name) refers to."""
        if not isinstance(expr, cst.Name):
            return None
        nodes = self.bindings(expr)
        if not nodes or len(nodes) != 1:
            return None
        node = nodes[0]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return node
        return None

    def is_module_reference(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is an imported name or an attribute path starting at one."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        return isinstance(expr, cst.Name) and self.program.is_import(expr)

    def names_of(self, expr: cst.BaseExpression) -> frozenset[str]:
        return self.program.qualified_names(expr)

    # --- strategies --------------------------------------------------------------------------

    def is_strategy_expr(self, expr: cst.BaseExpression | None) -> bool:
        return self.strategy_classes(expr) is not None

    def strategy_classes(self, expr: cst.BaseExpression | None) -> set[str] | None:
        """The strategy classes ``expr`` may evaluate to, or None if it is not a strategy."""
        if expr is None:
            return None
        if isinstance(expr, cst.Call):
            for name in self.names_of(expr.func):
                if symbols.is_strategy_constructor(name):
                    kind = name.rpartition(".")[2]
                    devices = argument_value(expr, "devices", 0) if kind == "MirroredStrategy" else None
                    if isinstance(devices, (cst.List, cst.Tuple)) and len(devices.elements) == 1:
                        # ``MirroredStrategy(devices=["/gpu:0"])``: one replica.
                        return {symbols.ONE_DEVICE_MIRRORED}
                    return {kind}
            definition = self.local_definition(expr.func)
            if isinstance(definition, cst.FunctionDef):
                return self._function_strategy_classes(definition)
            return None
        if isinstance(expr, cst.IfExp):
            body = self.strategy_classes(expr.body)
            orelse = self.strategy_classes(expr.orelse)
            if body is not None and orelse is not None:
                return body | orelse
            return None
        if isinstance(expr, cst.Name):
            strategy = self.strategy_for_name(expr)
            return strategy.classes if strategy is not None else None
        return None

    def _function_strategy_classes(self, function: cst.FunctionDef) -> set[str] | None:
        key = ("returns", function)
        if key in self._in_progress:
            return None
        info = self.functions.get(function)
        if info is None or not info.returns:
            return None
        self._in_progress.add(key)
        try:
            classes: set[str] = set()
            for ret in info.returns:
                found = self.strategy_classes(ret.value)
                if found is None:
                    return None
                classes |= found
            return classes
        finally:
            self._in_progress.discard(key)

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
            result = self._make_strategy(name.value, nodes)
        finally:
            self._in_progress.discard(key)
        self._strategy_memo[key] = result
        return result

    def _make_strategy(self, name: str, nodes: list[cst.CSTNode]) -> Strategy | None:
        if len(nodes) == 1 and isinstance(nodes[0], cst.Param):
            param = nodes[0]
            annotation = param.annotation
            if (
                annotation is not None
                and any(symbols.is_strategy_type(n) for n in self.names_of(annotation.annotation))
            ) or self._always_passed_a_strategy(param) or self._scope_entered(nodes):
                return Strategy(name, [param], self._passed_classes(param), is_parameter=True, creations=[param])
            return None
        classes: set[str] = set()
        constructions: list[cst.Call] = []
        creations: list[cst.CSTNode] = []
        for node in nodes:
            value = self.assigned_value(node)
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            found = self.strategy_classes(value)
            if found is None and isinstance(value, cst.Call) and self.is_module_reference(value.func) and self._scope_entered(nodes):
                # ``strategy = create_strategy()`` (made in another module), then
                # ``with strategy.scope():``: what it is, is known by how it is used.
                found = {UNKNOWN_STRATEGY}
            if found is None:
                return None
            creations.append(node)
            classes |= found
            constructions.extend(self._constructions(value))
        if not creations:
            return None
        return Strategy(name, list(nodes), classes, constructions, creations=creations)

    def _scope_entered(self, nodes: list[cst.CSTNode]) -> bool:
        """Whether a name bound at ``nodes`` is used as ``with <name>.scope():``."""
        for item in self._with_items:
            value = item.item
            if (
                isinstance(value, cst.Call)
                and not value.args
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "scope"
                and isinstance(value.func.value, cst.Name)
                and set(self.bindings(value.func.value) or ()) & set(nodes)
            ):
                return True
        return False

    def _passed_classes(self, param: cst.Param) -> set[str]:
        """The strategy classes the calls of the parameter's function pass for it (unknown
        when a call passes something else, or there is no call)."""
        function = self.program.enclosing_function(param)
        classes: set[str] = set()
        references = self.references(function) if function is not None else []
        for ref in references:
            call = self.program.parent(ref)
            arg = parameter_argument(function, call, param) if isinstance(call, cst.Call) and call.func is ref else None
            found = self.strategy_classes(arg.value) if arg is not None else None
            if not found:
                return {UNKNOWN_STRATEGY}
            classes |= found
        return classes or {UNKNOWN_STRATEGY}

    def _always_passed_a_strategy(self, param: cst.Param) -> bool:
        """Whether every call of the parameter's function passes a strategy for it."""
        params = self.program.parent(param)
        function = self.program.parent(params) if isinstance(params, cst.Parameters) else None
        if not isinstance(function, cst.FunctionDef) or function not in self.functions:
            return False
        if self.functions[function].is_method or param not in function.params.params:
            return False
        position = list(function.params.params).index(param)
        references = self.references(function)
        if not references:
            return False
        for ref in references:
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                return False
            arg = next((a for a in call.args if a.keyword and a.keyword.value == param.name.value), None)
            if arg is None:
                positional = [a for a in call.args if a.keyword is None and not a.star]
                arg = positional[position] if position < len(positional) else None
            if arg is None or not self.is_strategy_expr(arg.value):
                return False
        return True

    def _constructions(self, expr: cst.BaseExpression | None) -> list[cst.Call]:
        if isinstance(expr, cst.Call):
            if any(symbols.is_strategy_constructor(n) for n in self.names_of(expr.func)):
                return [expr]
            definition = self.local_definition(expr.func)
            if isinstance(definition, cst.FunctionDef):
                info = self.functions.get(definition)
                found = []
                for ret in info.returns if info else ():
                    found.extend(self._constructions(ret.value))
                return found
        if isinstance(expr, cst.IfExp):
            return self._constructions(expr.body) + self._constructions(expr.orelse)
        return []

    @cached_property
    def strategies(self) -> list[Strategy]:
        """Every strategy variable bound by an assignment in this module (one per scope+name)."""
        found: list[Strategy] = []
        seen: set[int] = set()
        for assign in self.assigns:
            targets = (
                [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            )
            if assign.value is None or not self.is_strategy_expr(assign.value):
                continue
            for target in targets:
                if not isinstance(target, cst.Name):
                    continue
                strategy = self.strategy_for_name(target)
                if strategy is not None and id(strategy) not in seen:
                    seen.add(id(strategy))
                    found.append(strategy)
        for param in self._parameter_candidates(found):
            strategy = self.strategy_for_name(param.name)
            if strategy is not None and strategy.is_parameter and id(strategy) not in seen:
                seen.add(id(strategy))
                found.append(strategy)
        # Names known to be strategies only by use: ``with strategy.scope():``.
        for item in self._with_items:
            value = item.item
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name):
                if value.func.attr.value != "scope":
                    continue
                for node in self.bindings(value.func.value) or ():
                    name = node.name if isinstance(node, cst.Param) else node
                    strategy = self.strategy_for_name(name) if isinstance(name, cst.Name) else None
                    if strategy is not None and id(strategy) not in seen:
                        seen.add(id(strategy))
                        found.append(strategy)
        return found

    def _parameter_candidates(self, strategies: list[Strategy]) -> list[cst.Param]:
        """Parameters that may hold a strategy: annotated with a strategy type, or given a
        strategy (a name bound to one, or a strategy call) at some call of their function.
        Only these are checked, instead of every parameter of every function."""
        candidates: list[cst.Param] = []
        for info in self.functions.values():
            for param in info.node.params.params:
                annotation = param.annotation
                if annotation is not None and any(
                    symbols.is_strategy_type(n) for n in self.names_of(annotation.annotation)
                ):
                    candidates.append(param)
        if not strategies and not any(symbols.is_strategy_constructor(n) for c, _ in self.calls for n in self.names_of(c.func)):
            return candidates
        for call, _owner in self.calls:
            definition = None
            for arg in call.args:
                value = arg.value
                if not isinstance(value, (cst.Name, cst.Call)) or not self.is_strategy_expr(value):
                    continue
                if definition is None:
                    definition = self.local_definition(call.func)
                    if not isinstance(definition, cst.FunctionDef):
                        break
                params = list(definition.params.params)
                if arg.keyword is not None:
                    candidates.extend(p for p in params if p.name.value == arg.keyword.value)
                else:
                    positional = [a for a in call.args if a.keyword is None and not a.star]
                    if arg in positional and positional.index(arg) < len(params):
                        candidates.append(params[positional.index(arg)])
        return candidates

    @property
    def _with_items(self) -> list[cst.WithItem]:
        return self.program.index.with_items

    def scope_strategy(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` enters a strategy scope: ``s.scope()``, or a name bound to one."""
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
        for item in block.items:
            value = item.item
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "scope":
                classes |= self.strategy_classes(value.func.value) or set()
        return classes

    def scope_strategy_value(self, binding: cst.CSTNode) -> bool:
        value = self.assigned_value(binding)
        return value is not None and not isinstance(value, cst.Name) and self.scope_strategy(value)

    def scope_with_strategy_name(self, statement: cst.CSTNode) -> str | None:
        """For ``with <name>.scope():`` (one item, indented body), the strategy name."""
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
            and isinstance(item.func.value, cst.Name)
            and self.is_strategy_expr(item.func.value)
        ):
            return item.func.value.value
        return None

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
        caller of its function is inside one, or because it runs in replica context)."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                if any(self.scope_strategy(item.item) for item in ancestor.items):
                    return True
            elif isinstance(ancestor, cst.FunctionDef):
                return self.always_called_under_scope(ancestor)
            elif isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return False
            previous = ancestor
        return False

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
            else:
                result = bool(references) and all(self.under_scope(ref) for ref in references)
        finally:
            self._in_progress.discard(key)
        memo[function] = result
        return result

    @cached_property
    def _scope_memo(self) -> dict[cst.FunctionDef, bool]:
        return {}

    def references(self, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.CSTNode]:
        """Every use of a function's or class's name in this module."""
        assignment = self.program.assignment(definition)
        return [access.node for access in assignment.references] if assignment is not None else []

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
        for name in self.names_of(func):
            kind = symbols.keras_kind(name)
            if kind is not None:
                return kind
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

    def assigned_name(self, value: cst.BaseExpression) -> cst.Name | None:
        """``name`` in ``name = value`` (or ``name: T = value``)."""
        parent = self.program.parent(value)
        target = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
        elif isinstance(parent, cst.AnnAssign):
            target = parent.target
        return target if isinstance(target, cst.Name) else None

    def uses(self, name: cst.Name | cst.Param) -> list[cst.CSTNode]:
        """The later reads of the value bound at ``name`` (an assignment target, or a
        parameter or its name)."""
        assignment = self.program.assignment(name)
        if assignment is None:
            parent = self.program.parent(name)
            if isinstance(parent, cst.Param) and parent.name is name:
                assignment = self.program.assignment(parent)
        if assignment is None:
            return []
        node = assignment.node
        # Not the reads that a later binding certainly replaces first (see reaching_bindings).
        return [
            access.node
            for access in assignment.references
            if not isinstance(access.node, cst.Name) or node in (self.reaching_bindings(access.node) or (node,))
        ]

    def _result_is_compiled(self, call: cst.Call) -> bool:
        target = self.assigned_name(call)
        if target is None:
            return False
        for use in self.uses(target):
            attribute = self.program.parent(use)
            if not (isinstance(attribute, cst.Attribute) and attribute.value is use):
                continue
            method = self.program.parent(attribute)
            if not (isinstance(method, cst.Call) and method.func is attribute):
                continue
            if attribute.attr.value in symbols.COMPILE_METHODS and method.args:
                return True
            if attribute.attr.value in symbols.LOAD_METHODS:
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
                if isinstance(node, (cst.BaseStatement, cst.BaseSmallStatement)):
                    found.setdefault(node, []).append(call)
                if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                    break
                node = parents.get(node)
        return found

    def names(self) -> set[str]:
        """Every name bound or read in the module."""
        index = self.program.index
        return {b.name for b in index.bindings.values()} | {a.name for a in index.accesses.values()}

    # --- functions ---------------------------------------------------------------------------

    def scoped_within(self, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
        """Whether ``node`` is inside a strategy ``with`` block that is itself inside ``stop``."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                if any(self.scope_strategy(item.item) for item in ancestor.items):
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
                elif isinstance(kind, Kind) or kind == COMPILE:
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


def _inside(program: Program, node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    return any(a is statement for a in program.ancestors(node))
