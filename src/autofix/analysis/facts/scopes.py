"""Scopes: what a ``with`` block enters, which functions ``strategy.run`` runs, and whether
code runs inside a strategy's scope (lexically, or because every caller of its function
does). Part of :class:`~autofix.analysis.facts.script.Facts`."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from autofix.analysis.facts.strategies import UNKNOWN_STRATEGY, Strategy
from autofix.analysis.project.callers import Caller, method_calls, reads_named, users
from autofix.analysis.syntax import attribute_path, words


def _run_receivers(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ("run", "experimental_run_v2")

# The methods whose callers in other modules are being looked at (see _project_method_calls).
_ASKING: set[tuple[str, str, str]] = set()


class Scopes:
    """The scopes section of :class:`~autofix.analysis.facts.script.Facts`."""

    # --- what a with block enters, what strategy.run runs -------------------------------------

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
        return self.runs_in_scope(node)

    def runs_in_scope(self, node: cst.CSTNode) -> bool:
        """:meth:`under_scope` without taking a call given the strategy for one made in its
        scope: ``Trainer(strategy)`` whose ``__init__`` (read in its own module) enters no
        scope makes what it makes where it is constructed."""
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
            if self.functions[function].is_method:
                # As always_called_under_scope: ``Trainer(...)`` runs ``__init__`` where it is
                # made, a method runs where ``obj.method()`` is called.
                calls, passed_on = self.values.calls_of(function)
                if not calls:
                    remote = self._project_method_calls(function)
                    if remote:
                        remote = tuple(c for c in remote if not self._made_without_strategy(function, c)) or remote
                        classes = set()
                        for caller in remote:
                            classes |= type(self).of(caller.program).scope_classes_at(caller.call)  # type: ignore[attr-defined]
                        return classes
                if not calls or passed_on:
                    return {"get_strategy"}
                classes = set()
                for call, _offset in calls:
                    classes |= self.scope_classes_at(call)
                return classes
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
                if not calls and function.name.value == "__init__":
                    made = self._project_constructions(function)
                    if made:
                        # Objects made without the class's optional strategy: one device by choice.
                        cls = self.values.class_of(function)
                        made = tuple(c for c in made if not self._constructed_without_strategy(cls, c.call))  # type: ignore[arg-type]
                    result = bool(made) and all(type(self).of(c.program).runs_in_scope(c.call) for c in made)  # type: ignore[attr-defined]
                elif not calls:
                    remote = self._project_method_calls(function)
                    if remote:
                        # Calls on objects made without the class's optional strategy run on
                        # one device by choice (the entry script's single-device path).
                        remote = tuple(c for c in remote if not self._made_without_strategy(function, c))
                    result = bool(remote) and all(type(self).of(c.program).under_scope(c.call) for c in remote)  # type: ignore[attr-defined]
                else:
                    # A call where the strategy is known to be None (``else: self.init_net()``
                    # after ``if self.strategy is not None: with self.strategy.scope():
                    # self.init_net()``) is the single-device path, not a call outside the scope.
                    calls = [(call, offset) for call, offset in calls if not self.strategy_none_at(call)]
                    result = bool(calls) and not passed_on and all(self.under_scope(call) for call, _offset in calls)
            else:
                # (A call where the strategy is known to be None is the one-device path.)
                references = [ref for ref in references if not self.strategy_none_at(ref)]
                result = bool(references) and all(self.under_scope(ref) for ref in references)
        finally:
            self._in_progress.discard(key)
        memo[function] = result
        return result

    def strategy_none_at(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` runs where a strategy is known to be None: inside ``if strategy
        is None:`` / ``if not strategy:`` or the ``else`` of ``if self.strategy is not None:``
        / ``if strategy:`` (a name or attribute
        whose last name is a strategy's: ``strategy``, ``mirrored_strategy``, ``strat``)."""
        from autofix.analysis.core import guards

        for key, value in guards.known_at(self.program, node).items():
            if value != guards.NONE and value is not False:
                # (A strategy is never falsy: ``else:`` of ``if strategy:`` is where it is None.)
                continue
            last = key.rpartition(".")[2]
            if words(last) & {"strategy", "strat"}:
                return True
        return self._made_on_another_branch(node)

    def _made_on_another_branch(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` lies in the ``else`` of an ``if`` (of its function) whose body makes
        a strategy ``S = ...Strategy(...)``, every other assignment of ``S`` being ``S = None``:
        on that path ``S`` holds None (``strategy = None`` at the top of the module, ``if
        args.use_tpu: strategy = TPUStrategy(...); with strategy.scope(): run_main()`` ``else:
        run_main()``)."""
        bodies: list[cst.BaseSuite] = []
        child = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(ancestor, cst.If) and child is ancestor.orelse:
                bodies.append(ancestor.body)
            child = ancestor
        if not bodies:
            return False

        def within(target: cst.CSTNode) -> bool:
            return any(any(a is body for a in self.program.ancestors(target)) for body in bodies)

        candidates = [assign for body in bodies for assign in self._branch_assignments.get(id(body), ())]
        for assign in candidates:
            if not self.is_strategy_expr(assign.value):
                continue
            target = assign.targets[0].target
            binding = self.program.assignment(target)
            if binding is None:
                continue
            others = [b for b in binding.scope.assignments(binding.name) if not within(b.node)]
            if all(b.kind == "assign" and self._bound_to_none(b.node) for b in others):
                return True
        return False

    @cached_property
    def _branch_assignments(self) -> dict[int, list[cst.Assign]]:
        """For the body of each ``if`` (by id), the assignments of one name it holds in its
        own function (not in a def nested in it): where a strategy may be made on one branch."""
        found: dict[int, list[cst.Assign]] = {}
        for assign in self.program.index.assigns:
            if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
                continue
            child: cst.CSTNode = assign
            for ancestor in self.program.ancestors(assign):
                if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                    break
                if isinstance(ancestor, cst.If) and child is ancestor.body:
                    found.setdefault(id(ancestor.body), []).append(assign)
                child = ancestor
        return found

    def _bound_to_none(self, target: cst.CSTNode) -> bool:
        assign = self.program.parent(self.program.parent(target))
        if not isinstance(assign, cst.Assign) or not isinstance(self.program.parent(target), cst.AssignTarget):
            return False
        return isinstance(assign.value, cst.Name) and assign.value.value == "None"

    def _project_method_calls(self, method: cst.FunctionDef) -> tuple[Caller, ...] | None:
        """The calls other modules of the project make of ``method`` of a top-level class of
        this file, on objects of it they make and keep (:func:`~autofix.analysis.project.callers.method_calls`):
        a trainer class whose ``train()`` only the entry script calls, inside its strategy's
        scope. None when this file is not in a project, the class is not top-level, or who
        calls it cannot be shown; the question is not asked again of a module while it is being
        answered (two modules calling each other's classes)."""
        path = self.program.path
        cls = self.values.class_of(method)
        if path is None or cls is None or not isinstance(self.program.parent(cls), cst.Module):
            return None
        if reads_named(self.program, method.name.value):
            return None  # this module reads the method too (hands it on, calls it on something)
        if any(
            self.values.local_definition(base.value) is None and "builtins.object" not in self.names_of(base.value)
            and not self._project_base_leaves(base.value, method.name.value)
            for base in cls.bases
        ):
            return None  # a class it derives from (Keras's Model) may call it
        key = (path, cls.name.value, method.name.value)
        if key in _ASKING:
            return None
        _ASKING.add(key)
        try:
            return method_calls(path, cls.name.value, method.name.value)
        finally:
            _ASKING.discard(key)

    def _project_constructions(self, init: cst.FunctionDef) -> tuple[Caller, ...] | None:
        """The constructions ``Cls(...)`` other modules of the project make of the top-level
        class whose ``__init__`` is ``init``, when every use of the class there is one (not a
        base class, not handed on) and this module never reads the class's name; None when
        that cannot be shown, or outside a project."""
        path = self.program.path
        cls = self.values.class_of(init)
        if path is None or cls is None or not isinstance(self.program.parent(cls), cst.Module):
            return None
        if any(not any(a is cls for a in self.program.ancestors(r)) for r in reads_named(self.program, cls.name.value)):
            return None  # made (or subclassed, handed on) here too; ``super(Cls, self)`` is not
        found = users(path, cls.name.value)
        if not found or not all(isinstance(u.call, cst.Call) for u in found):
            return None
        return found

    def _project_base_leaves(self, base: cst.BaseExpression, method: str) -> bool:
        """Whether ``base`` is a class of another module of the project, not a Keras model,
        whose module never spells ``.method`` (so it cannot call the method itself: a
        ``GenerateDatasets`` a trainer class derives its data from)."""
        from autofix.analysis.project.imports import ProjectImports, _load

        resolved = ProjectImports.of(self.program).resolve(base)
        definition = resolved.definition if resolved is not None else None
        if definition is None or definition.kind != "class" or definition.keras_model or resolved.path is None:  # type: ignore[union-attr]
            return False
        summary = _load(resolved.path)  # type: ignore[union-attr]
        return summary is not None and not re.search(rf"\.{re.escape(method)}\b", summary.text)

    def _made_without_strategy(self, method: cst.FunctionDef, caller: Caller) -> bool:
        """Whether the object ``caller`` calls ``method`` on is made without the strategy its
        class's ``__init__`` takes as an optional parameter (``ModelConfiguration(args=args)``
        where ``__init__(self, args, mirrored_strategy=None)``): the single-device path."""
        func = caller.call.func  # type: ignore[union-attr]
        if not isinstance(func, cst.Attribute):
            return False
        from autofix.analysis.core.value_flow import Values

        origins = Values.of(caller.program).origins(func.value)
        made = [o.node for o in origins if o.whole and isinstance(o.node, cst.Call)]
        if not made or len(made) != len(origins):
            return False
        return all(self._constructed_without_strategy(self.values.class_of(method), c) for c in made)  # type: ignore[arg-type]

    def _constructed_without_strategy(self, cls: cst.ClassDef | None, construction: cst.Call) -> bool:
        """Whether ``construction`` of ``cls`` leaves out the strategy its ``__init__`` takes as
        an optional parameter (``strategy=None``, ``mirrored_strategy=None``)."""
        init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None) if cls else None
        if init is None:
            return False
        params = [p for p in (*init.params.params, *init.params.kwonly_params)]
        optional = next(
            (i for i, p in enumerate(params) if p.default is not None and isinstance(p.default, cst.Name) and p.default.value == "None"
             and {"strategy", "strat"} & set(p.name.value.lower().split("_"))),
            None,
        )
        if optional is None:
            return False
        name = params[optional].name.value
        index = optional - 1 if params and params[0].name.value == "self" else optional
        given = [a for a in construction.args if a.keyword is not None and a.keyword.value == name]
        positional = [a for a in construction.args if a.keyword is None and not a.star]
        if any(a.star for a in construction.args) or given and not (isinstance(given[0].value, cst.Name) and given[0].value.value == "None"):
            return False
        return not (not given and len(positional) > index)

    @cached_property
    def _scope_memo(self) -> dict[cst.FunctionDef, bool]:
        return {}
