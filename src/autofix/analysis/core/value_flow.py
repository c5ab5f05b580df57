"""Where a value comes from: the one resolution of "what may this expression evaluate to"
that the strategy, model, optimizer and metric questions share.

:meth:`Values.origins` follows an expression back, within the module, to the expressions that
produce its value (its *origins*): through names (the assignments that reach the read, tuple
unpacking, ``global`` writes made by helpers), function parameters (the arguments every call
of the function in this module passes, the instantiations of a class for ``__init__``, the
``args=`` of ``strategy.run``), the ``return`` of local functions, attributes of objects of
classes defined here (``self.strategy``: what the class's methods assign to it, or its class
body), items of tuple, list and dict literals (``opts["adam"]``, ``detect_hardware()[1]``),
``a if c else b`` and ``a or b``. An origin is what cannot be followed further: a call of
something made elsewhere (``tf.distribute.MirroredStrategy()``, ``keras.Sequential(...)``,
``imported_helper()``), a literal, a name bound by an import, or a parameter of a function
that nothing in this module calls (an entry point: its value comes from outside).

What an origin *means* (a strategy of some class, a Keras object) is for the callers to say
(:mod:`.facts`, :mod:`.training`): this module knows only how values flow.

Limits, on purpose: a value that is changed in place or flows through a loop variable, a
container built at run time (``append``), ``*args`` / ``**kwargs``, or another module, ends
in an origin that carries the projections not applied (``Origin.path``): callers treat such
an origin as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument, attribute_path, parameter_argument

# A projection still to apply to a value: ("attr", name) or ("item", key).
Projection = tuple[str, object]
# The bindings of a function's parameters for one call of it (when a value is followed into
# the function from that call).
Frame = tuple[tuple[cst.Param, cst.BaseExpression | None], ...]

_LIMIT = 40
# Methods of a Keras model that Keras's training never calls itself.
_USER_CALLED = frozenset({"compile"})
_MODEL_BASES = frozenset({"keras.Model", "keras.models.Model", "keras.Sequential", "keras.models.Sequential"})
# What rebuilds a model from a saved configuration, compiling it again (Keras's
# ``deserialize_keras_object`` calls ``compile_from_config``); ``clone_model`` too, for a model
# of the file's own class.
_REBUILDS = frozenset({"load_model", "model_from_json", "model_from_config", "deserialize", "deserialize_keras_object"})
# The key of ``d[k]`` when ``k`` is not a constant: any item.
ANY = type("AnyItem", (), {"__repr__": lambda self: "ANY"})()


@dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    calls: list[cst.Call] = field(default_factory=list)
    returns: list[cst.Return] = field(default_factory=list)
    is_method: bool = False


@dataclass(frozen=True)
class Origin:
    """An expression a value may come from. ``path``: the attributes or items of it that
    the value is, which could not be looked into (empty: the value is ``node``'s own)."""

    node: cst.CSTNode
    path: tuple[Projection, ...] = ()

    @property
    def whole(self) -> bool:
        return not self.path


def literal_key(expr: cst.BaseExpression) -> object | None:
    """The constant an index or dict key expression stands for (an int or a string), or None."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.value, 0)
    if isinstance(expr, cst.SimpleString):
        try:
            return expr.evaluated_value
        except Exception:  # noqa: BLE001 - a byte string or an odd prefix: not a key we know
            return None
    return None


class Values(Derived):
    """Value flow within one module (``Values.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        index = program.index
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {
            function: FunctionInfo(function, index.function_calls[function], index.returns[function], is_method)
            for function, is_method in index.functions
        }
        self.classes = index.classes
        self.assigns = index.assigns
        self._reaching: dict[cst.Name, list[cst.CSTNode] | None] = {}
        self._enter = True
        self._calls: dict[cst.FunctionDef, tuple[list[tuple[cst.Call, int]], bool]] = {}
        self._calls_active: set[cst.FunctionDef] = set()
        self._memo: dict[tuple[int, tuple, Frame, bool], tuple[Origin, ...]] = {}
        self._active: set[tuple[int, tuple, Frame, bool]] = set()

    # --- names, bindings and definitions ----------------------------------------------------------

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
            # A name being bound: every binding of it in the scope that owns it (a ``global``
            # name assigned in a function belongs to the module).
            binding = self.program.assignment(name)
            scope = binding.scope if binding is not None else self.program.scope(name)
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
        closure = self._closure_reaching(name, nodes)
        if closure is not None:
            memo[name] = closure
            return closure
        path = {id(a): a for a in self.program.ancestors(name)}
        bindings = self.program.index.bindings
        for position in range(len(nodes) - 1, -1, -1):
            binding = bindings.get(nodes[position])
            # Bindings and reads are numbered in source order by the index.
            if binding is None or binding.index > access.index:
                continue
            loop = _loop_of_target(self.program, nodes[position])
            if loop is not None and _inside(self.program, name, loop.body):
                # A loop's target is bound again before each pass of its body.
                memo[name] = nodes[position:]
                return memo[name]
            statement = self.program.statement_of(nodes[position])
            while statement is not None:
                block = self.program.block_of(statement)
                if block is None:
                    break
                if id(block) in path:
                    # A ``for`` loop binds its target before each run of its body.
                    if not _inside(self.program, name, statement) or _loop_body_read(self.program, statement, nodes[position], name):
                        memo[name] = nodes[position:]
                        return memo[name]
                    break
                # The body of a ``with`` runs whenever the ``with`` does.
                holder = self.program.parent(block)
                statement = holder if isinstance(holder, cst.With) else None
        return nodes

    def _closure_reaching(self, name: cst.Name, nodes: list[cst.CSTNode]) -> list[cst.CSTNode] | None:
        """For a read in a function nested in the one that binds the name (a step defined in
        ``main``), the bindings that can precede a run of it: made before one of the places
        ``main`` uses the nested function (calls it, or hands it to ``strategy.run`` or
        ``tf.function``), or in a loop around one. A model rebuilt for evaluation after
        training is not the one the step trained. None when that cannot be told (the nested
        function is also used elsewhere, or the name is bound in other scopes)."""
        bindings = [self.program.index.bindings.get(n) for n in nodes]
        if any(b is None for b in bindings) or len({id(b.scope) for b in bindings}) != 1:  # type: ignore[union-attr]
            return None
        owner = bindings[0].scope.node  # type: ignore[union-attr]
        if isinstance(owner, cst.Module):
            return self._global_reaching(name, nodes, bindings)
        if not isinstance(owner, cst.FunctionDef):
            return None
        # The function nested directly in ``owner`` that the read is in.
        nested = None
        for ancestor in self.program.ancestors(name):
            if ancestor is owner:
                break
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                nested = ancestor
        if not isinstance(nested, cst.FunctionDef):
            return None
        uses = self.references(nested)
        if not uses or any(self.enclosing_function(u) is not owner for u in uses):
            return None
        reaching = []
        for node, binding in zip(nodes, bindings):
            for use in uses:
                access = self.program.access(use)
                if access is not None and (binding.index < access.index or self._loop_around(node, use, owner)):  # type: ignore[union-attr]
                    reaching.append(node)
                    break
        return reaching or None

    def _global_reaching(self, name: cst.Name, nodes: list[cst.CSTNode], bindings: list) -> list[cst.CSTNode] | None:
        """For a read, in a function defined at module level, of a name the module binds more
        than once (a notebook rebinding ``loss_fn`` cell after cell): the bindings that reach
        the module-level statements that call the function (or hand it to ``strategy.run``),
        as they would reach a read there. Every binding when the function is also used
        otherwise (passed on, called from another function): it may run after any of them.
        None when the read is not in such a function, or a binding is a ``global`` write."""
        function = None
        for ancestor in self.program.ancestors(name):
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return None
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
        if function is None or self.program.scope(function) is not self.program.scope(nodes[0]):
            return None
        if any(self.enclosing_function(node) is not None for node in nodes):
            return None  # a ``global`` write: made when its function runs, not where it is written
        module = self.program.module
        calls = []
        for use in self.references(function):
            if function not in (self.reaching_bindings(use) or ()):  # another ``def`` of the name
                continue
            parent = self.program.parent(use)
            called = isinstance(parent, cst.Call) and parent.func is use or self._run_of(parent) is not None
            if not called or self.enclosing_function(use) is not None:
                return nodes
            calls.append(use)
        if not calls:
            return None
        reaching: dict[int, cst.CSTNode] = {}
        for use in calls:
            access = self.program.access(use)
            if access is None:
                return None
            for node, binding in sorted(zip(nodes, bindings), key=lambda pair: pair[1].index, reverse=True):
                if binding.index > access.index:
                    if self._loop_around(node, use, module):
                        reaching[id(node)] = node
                    continue
                reaching[id(node)] = node
                statement = self.program.statement_of(node)
                if statement is not None and self.program.block_of(statement) is module and not isinstance(statement, (cst.For, cst.While)):
                    break  # a module-level statement before the call: what it binds is what the call sees
        return [n for n in nodes if id(n) in reaching] or None

    def _loop_around(self, a: cst.CSTNode, b: cst.CSTNode, stop: cst.CSTNode) -> bool:
        """Whether a loop inside ``stop`` contains both ``a`` and ``b``."""
        loops_a = set()
        for ancestor in self.program.ancestors(a):
            if ancestor is stop:
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                loops_a.add(id(ancestor))
        for ancestor in self.program.ancestors(b):
            if ancestor is stop:
                break
            if id(ancestor) in loops_a:
                return True
        return False

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

    def references(self, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.CSTNode]:
        """Every use of a function's or class's name in this module."""
        assignment = self.program.assignment(definition)
        return [access.node for access in assignment.references] if assignment is not None else []

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

    def names_of(self, expr: cst.BaseExpression) -> frozenset[str]:
        return self.program.qualified_names(expr)

    # --- the question ----------------------------------------------------------------------------

    def origins(self, expr: cst.BaseExpression | None, enter: bool = True) -> list[Origin]:
        """Every origin of ``expr``'s value (empty when nothing is known, e.g. a cycle).
        ``enter=False``: an item or attribute of what a local function returns
        (``model, opt = build()``) ends at that call, with the rest of the path."""
        if expr is None:
            return []
        if not enter:
            self._enter = False
            try:
                return list(self._follow(expr, (), (), 0))
            finally:
                self._enter = True
        return list(self._follow(expr, (), (), 0))

    def binding_origins(self, binding: cst.CSTNode) -> list[Origin]:
        """The origins of the value a binding (an assignment target or a parameter) gives
        its name."""
        return list(self._binding(binding, (), (), 0))

    # --- following -------------------------------------------------------------------------------

    def _follow(self, expr: cst.CSTNode, path: tuple[Projection, ...], frame: Frame, depth: int) -> tuple[Origin, ...]:
        key = (id(expr), path, frame, self._enter)
        memo = self._memo.get(key)
        if memo is not None:
            return memo
        if key in self._active or depth > _LIMIT:
            return ()
        self._active.add(key)
        try:
            result = tuple(dict.fromkeys(self._resolve(expr, path, frame, depth + 1)))
        finally:
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _resolve(self, expr: cst.CSTNode, path, frame: Frame, depth: int) -> list[Origin]:
        if isinstance(expr, cst.Name):
            return self._name(expr, path, frame, depth)
        if isinstance(expr, cst.Attribute):
            if self.is_module_reference(expr):
                return [Origin(expr, path)]
            return self._follow(expr.value, (("attr", expr.attr.value), *path), frame, depth)
        if isinstance(expr, cst.Subscript):
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                # ``OPTIMIZERS[choice]``: any of the items, when the key is not a constant.
                index = literal_key(expr.slice[0].slice.value)
                return self._follow(expr.value, (("item", ANY if index is None else index), *path), frame, depth)
            return [Origin(expr, path)]
        if isinstance(expr, cst.IfExp):
            return [*self._follow(expr.body, path, frame, depth), *self._follow(expr.orelse, path, frame, depth)]
        if isinstance(expr, cst.BooleanOperation):
            # ``strategy_override or make_strategy()``: either side may be the value.
            return [*self._follow(expr.left, path, frame, depth), *self._follow(expr.right, path, frame, depth)]
        if isinstance(expr, cst.NamedExpr):
            return list(self._follow(expr.value, path, frame, depth))
        if isinstance(expr, cst.Call):
            return self._call(expr, path, frame, depth)
        if path and path[0][0] == "item":
            items = self._items(expr, path[0][1])
            if items is not None:
                return [o for item in items for o in self._follow(item, path[1:], frame, depth)]
        return [Origin(expr, path)]

    def _items(self, container: cst.CSTNode, key: object) -> list[cst.BaseExpression] | None:
        """The items of a tuple, list or dict literal that ``container[key]`` may be (every
        item for a key that is not a constant); None when that is not known."""
        if isinstance(container, (cst.Tuple, cst.List)) and (isinstance(key, int) or key is ANY):
            elements = container.elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            if key is ANY:
                return [e.value for e in elements]
            if -len(elements) <= key < len(elements):  # type: ignore[operator]
                return [elements[key].value]  # type: ignore[index]
            return None
        if isinstance(container, cst.Dict) and key is not None:
            if any(not isinstance(e, cst.DictElement) for e in container.elements):
                return None
            if key is ANY:
                return [e.value for e in container.elements]  # type: ignore[union-attr]
            for element in container.elements:
                if isinstance(element, cst.DictElement) and literal_key(element.key) == key:
                    return [element.value]
        return None

    def _name(self, name: cst.Name, path, frame: Frame, depth: int) -> list[Origin]:
        bindings = self.reaching_bindings(name)
        if bindings is None:
            return [Origin(name, path)]  # an import, a builtin, or unknown
        found: list[Origin] = []
        for binding in bindings:
            found.extend(self._binding(binding, path, frame, depth))
        return found

    def _binding(self, binding: cst.CSTNode, path, frame: Frame, depth: int) -> list[Origin]:
        if isinstance(binding, cst.Param):
            return self._param(binding, path, frame, depth)
        if isinstance(binding, (cst.FunctionDef, cst.ClassDef)):
            if path and path[0][0] == "attr" and isinstance(binding, cst.ClassDef):
                return self._class_attribute([binding], path, depth) or [Origin(binding, path)]
            return [Origin(binding, path)]
        value = self.assigned_value(binding)
        if value is not None:
            return list(self._follow(value, path, frame, depth))
        unpacked = self._unpacked(binding)
        if unpacked is not None:
            value, indexes = unpacked
            return list(self._follow(value, (*(("item", i) for i in indexes), *path), frame, depth))
        looped = self._looped(binding)
        if looped is not None:
            return [o for value, indexes in looped for o in self._follow(value, (*(("item", i) for i in indexes), *path), frame, depth)]
        return [Origin(binding, path)]

    def _target(self, binding: cst.CSTNode) -> tuple[cst.CSTNode, list[object]] | None:
        """The whole target a name is bound in (``a, (b, c)``) and the indexes that lead from
        it to the name; None when a starred element is in the way."""
        indexes: list[object] = []
        node = binding
        while True:
            element = self.program.parent(node)
            container = self.program.parent(element) if isinstance(element, cst.Element) else None
            if not isinstance(container, (cst.Tuple, cst.List)):
                return node, indexes
            if any(isinstance(e, cst.StarredElement) for e in container.elements):
                return None
            indexes.insert(0, list(container.elements).index(element))
            node = container

    def _looped(self, binding: cst.CSTNode) -> list[tuple[cst.BaseExpression, list[object]]] | None:
        """``for model, name in models:`` binds ``model`` to ``models[any][0]``; through
        ``enumerate(xs)`` and ``zip(xs, ys)`` too. Each (iterable, projections) it may come from."""
        found = self._target(binding)
        if found is None:
            return None
        node, indexes = found
        loop = self.program.parent(node)
        if not isinstance(loop, (cst.For, cst.CompFor)) or loop.target is not node:
            return None
        return self._iterated(loop.iter, indexes)

    def _iterated(self, iterable: cst.BaseExpression, indexes: list[object]) -> list[tuple[cst.BaseExpression, list[object]]] | None:
        if isinstance(iterable, cst.Call) and iterable.args and not any(a.star or a.keyword for a in iterable.args):
            names = self.names_of(iterable.func)
            if "builtins.enumerate" in names and len(iterable.args) == 1:
                if not indexes:
                    return None
                if indexes[0] == 0:
                    return []  # the counter
                return self._iterated(iterable.args[0].value, indexes[1:])
            if "builtins.zip" in names:
                if not indexes or not isinstance(indexes[0], int) or indexes[0] >= len(iterable.args):
                    return None
                return self._iterated(iterable.args[indexes[0]].value, indexes[1:])
            if names & {"builtins.reversed", "builtins.sorted", "builtins.list", "builtins.tuple"}:
                return self._iterated(iterable.args[0].value, indexes)
        return [(iterable, [ANY, *indexes])]

    def _unpacked(self, binding: cst.CSTNode) -> tuple[cst.BaseExpression, list[object]] | None:
        """``a, (b, c) = value``: the value and the indexes that lead to ``binding``."""
        found = self._target(binding)
        if found is None or not found[1]:
            return None
        node, indexes = found
        target = self.program.parent(node)
        if isinstance(target, cst.AssignTarget):
            assign = self.program.parent(target)
            if isinstance(assign, cst.Assign):
                return assign.value, indexes
        return None

    # --- parameters --------------------------------------------------------------------------

    def _param(self, param: cst.Param, path, frame: Frame, depth: int) -> list[Origin]:
        for bound, value in frame:
            if bound is param:
                if value is None:
                    return list(self._follow(param.default, path, (), depth)) if param.default is not None else []
                return list(self._follow(value, path, (), depth))
        function = self.enclosing_function(param)
        if function is None:
            return [Origin(param, path)]
        if self.is_self(param):
            cls = self.class_of(function)
            if path and path[0][0] == "attr" and cls is not None:
                attribute = self._class_attribute([cls], path, depth)
                if attribute:
                    return attribute
            return [Origin(param, path)]
        found: list[Origin] = []
        calls, passed_on = self.calls_of(function)
        for call, offset in calls:
            arg = self._argument(function, call, param, offset)
            if arg is not None:
                found.extend(self._follow(arg, path, (), depth))
            elif param.default is not None:
                found.extend(self._follow(param.default, path, (), depth))
        if passed_on or not calls:
            # Called from elsewhere too (an entry point, a callback): its value comes from outside.
            found.append(Origin(param, path))
        return found

    def _argument(self, function: cst.FunctionDef, call: cst.Call, param: cst.Param, offset: int) -> cst.BaseExpression | None:
        if offset < 0:
            # ``strategy.run(fn, args=(x, y))``: the parameters take the items of args.
            args = argument(call, "args", 1)
            if args is None or not isinstance(args.value, (cst.Tuple, cst.List)):
                return None
            params = list(function.params.params)
            position = params.index(param) if param in params else None
            elements = args.value.elements
            if position is None or position >= len(elements) or isinstance(elements[position], cst.StarredElement):
                return None
            return elements[position].value
        if offset:
            params = list(function.params.params)
            if param not in params:
                found = argument(call, param.name.value)
                return found.value if found is not None else None
            found = argument(call, param.name.value, params.index(param) - offset)
            return found.value if found is not None else None
        found = parameter_argument(function, call, param)
        return found.value if found is not None else None

    def calls_of(self, function: cst.FunctionDef) -> tuple[list[tuple[cst.Call, int]], bool]:
        """The calls of ``function`` in this module, each with the number of leading
        parameters the call does not pass (1 for ``Class(...)`` calling ``__init__`` and for
        ``obj.method(...)``; -1 for ``strategy.run(fn, args=...)``), and whether it is also used
        in a way that lets other code call it (passed as a value, a method of a class made
        elsewhere, an entry point)."""
        found = self._calls.get(function)
        if found is None:
            if function in self._calls_active:
                return [], True
            self._calls_active.add(function)
            try:
                found = self._find_calls(function)
            finally:
                self._calls_active.discard(function)
            self._calls[function] = found
        return found

    def _find_calls(self, function: cst.FunctionDef) -> tuple[list[tuple[cst.Call, int]], bool]:
        info = self.functions.get(function)
        if info is None:
            return [], True
        calls: list[tuple[cst.Call, int]] = []
        passed_on = False
        if info.is_method:
            cls = self.class_of(function)
            if cls is None:
                return [], True
            if function.name.value == "__init__":
                for ref in self.references(cls):
                    call = self.program.parent(ref)
                    if isinstance(call, cst.Call) and call.func is ref:
                        calls.append((call, 1))
                    elif not self._is_base(ref):
                        passed_on = True
                return calls, passed_on or not calls or self._subclassed(cls)
            family = self.family(cls)
            for attribute in self._attributes_named.get(function.name.value, ()):
                if self._on_family(attribute.value, family):
                    passed_on = not self._called(attribute, 1, calls) or passed_on
            # Methods of a class deriving from one made elsewhere may be called by it (Keras
            # calls ``train_step``, ``call``...); a Keras model's ``compile`` only by its user
            # (and by Keras when it loads a saved model, which a file that loads none does not).
            external = [
                b.value for c in family for b in c.bases
                if self.local_definition(b.value) is None and "builtins.object" not in self.names_of(b.value)
            ]
            external_base = bool(external) and not (
                function.name.value in _USER_CALLED
                and all(self.names_of(b) & _MODEL_BASES for b in external)
                and not self._rebuilds(family)
            )
            return calls, passed_on or not calls or external_base
        for ref in self.references(function):
            passed_on = not self._called(ref, 0, calls) or passed_on
        return calls, passed_on

    def _rebuilds(self, family: list[cst.ClassDef]) -> bool:
        """Whether the file may rebuild a model of one of ``family`` from its configuration,
        which compiles it again with the saved one: it loads or deserializes a model (of any
        class: which one is in the saved file), or clones one that may be of the family
        (cloning another kind of model makes a Sequential or functional one)."""
        for call, _owner in self.program.index.calls:
            last = {n.rpartition(".")[2] for n in self.names_of(call.func)}
            if last & _REBUILDS:
                return True
            if "clone_model" in last:
                cloned = argument(call, "model", 0)
                for origin in self.origins(cloned.value) if cloned is not None else [Origin(call)]:
                    made = origin.node
                    local = self.local_definition(made.func) if isinstance(made, cst.Call) else None
                    if not isinstance(made, cst.Call) or local in family or local is None and not self._keras_construction(made):
                        return True
        return False

    def _keras_construction(self, call: cst.Call) -> bool:
        """``keras.Sequential(...)``, ``keras.Model(inputs, outputs)``, ``keras.applications...``:
        a model of Keras's own classes, not of this file's."""
        return any(n.startswith("keras.") for n in self.names_of(call.func))

    def _called(self, ref: cst.CSTNode, offset: int, calls: list[tuple[cst.Call, int]]) -> bool:
        """Adds the call ``ref`` (a use of a function, or of ``obj.method``) makes, with the
        parameters it skips (``offset``; -1 when it is handed to ``strategy.run``); False when
        the use is not a call (the function is passed on, to be called elsewhere)."""
        parent = self.program.parent(ref)
        if isinstance(parent, cst.Call) and parent.func is ref:
            calls.append((parent, offset))
            return True
        run = self._run_of(parent)
        if run is not None:
            calls.append((run, -1))
            return True
        return False

    def _run_of(self, parent: cst.CSTNode | None) -> cst.Call | None:
        """``strategy.run(fn, args=...)`` when ``parent`` is the Arg that passes ``fn``."""
        holder = self.program.parent(parent) if isinstance(parent, cst.Arg) else None
        if (
            isinstance(holder, cst.Call)
            and isinstance(holder.func, cst.Attribute)
            and holder.func.attr.value in ("run", "experimental_run_v2")
            and holder.args
            and holder.args[0] is parent
        ):
            return holder
        return None

    def _on_family(self, receiver: cst.BaseExpression, family: list[cst.ClassDef]) -> bool:
        """Whether ``receiver`` is an object of one of the ``family`` classes (``self`` in
        their methods, or made by calling one of them)."""
        for origin in self.origins(receiver):
            node = origin.node
            if not origin.whole:
                continue
            if isinstance(node, cst.Param) and self.is_self(node):
                function = self.enclosing_function(node)
                if function is not None and self.class_of(function) in family:
                    return True
            elif isinstance(node, cst.Call) and self.local_definition(node.func) in family:
                return True
        return False

    def attributes_named(self, name: str) -> list[cst.Attribute]:
        """Every ``<expr>.<name>`` in the file."""
        return self._attributes_named.get(name, [])

    @cached_property
    def _attributes_named(self) -> dict[str, list[cst.Attribute]]:
        found: dict[str, list[cst.Attribute]] = {}
        for node in self.program.index.attributes:
            found.setdefault(node.attr.value, []).append(node)
        return found

    def _is_base(self, ref: cst.CSTNode) -> bool:
        """A use of a class that makes no object of it: a base of another class, or the class
        named to ``super(Class, self)``."""
        arg = self.program.parent(ref)
        if not isinstance(arg, cst.Arg):
            return False
        holder = self.program.parent(arg)
        if isinstance(holder, cst.ClassDef):
            return True
        return isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) and holder.func.value == "super" and holder.args[0] is arg

    def _subclassed(self, cls: cst.ClassDef) -> bool:
        return any(cls in self.bases(other) for other in self.classes if other is not cls)

    # --- classes and their attributes --------------------------------------------------------

    def is_self(self, param: cst.Param) -> bool:
        """Whether ``param`` is the first parameter of a method (not a static method)."""
        function = self.enclosing_function(param)
        if function is None or not self.functions.get(function) or not self.functions[function].is_method:
            return False
        params = function.params.params
        if not params or params[0] is not param:
            return False
        return not any(
            isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
            for d in function.decorators
        )

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The function whose parameters or body ``node`` is in (not a lambda's)."""
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.Lambda):
                return None
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def class_of(self, function: cst.FunctionDef) -> cst.ClassDef | None:
        block = self.program.parent(function)
        cls = self.program.parent(block) if block is not None else None
        return cls if isinstance(cls, cst.ClassDef) else None

    def bases(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        """The classes of this module ``cls`` derives from, directly or not."""
        found: list[cst.ClassDef] = []
        pending = [cls]
        while pending:
            current = pending.pop()
            for base in current.bases:
                local = self.local_definition(base.value)
                if isinstance(local, cst.ClassDef) and local not in found and local is not cls:
                    found.append(local)
                    pending.append(local)
        return found

    def family(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        """``cls``, the classes of this module it derives from and those deriving from it:
        every class whose methods may run on an object ``self`` of ``cls`` is."""
        found = [cls, *self.bases(cls)]
        for other in self.classes:
            if other not in found and cls in self.bases(other):
                found.append(other)
        return found

    def attribute_values(self, cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        """``{"model": [value, ...]}``: every ``self.model = value`` in the class's own methods
        (tuple targets unpacked when the value is a tuple literal), and ``model = value`` in
        its body."""
        return self._attributes[cls][0]

    def attribute_targets(self, cls: cst.ClassDef) -> dict[str, list[cst.CSTNode]]:
        """The targets (``self.model``) that the values of :meth:`attribute_values` are
        assigned to, in the same order."""
        return self._attributes[cls][1]

    @cached_property
    def _attributes(self) -> dict[cst.ClassDef, tuple[dict, dict]]:
        found: dict[cst.ClassDef, tuple[dict, dict]] = {cls: ({}, {}) for cls in self.classes}
        for cls in self.classes:
            values, targets = found[cls]
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            for statement in body:
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        if isinstance(small, cst.Assign):
                            for target in small.targets:
                                if isinstance(target.target, cst.Name):
                                    values.setdefault(target.target.value, []).append(small.value)
                                    targets.setdefault(target.target.value, []).append(target.target)
        # The assignments in each method's own body (the index lists every assignment: no walk
        # of the tree is needed).
        parents = self.program.index.parents
        for assign in self.assigns:
            function = parents.get(assign)
            while function is not None and not isinstance(function, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                function = parents.get(function)
            if not isinstance(function, cst.FunctionDef) or not function.params.params:
                continue
            info = self.functions.get(function)
            cls = self.class_of(function) if info is not None and info.is_method else None
            if cls not in found:
                continue
            values, targets = found[cls]  # type: ignore[index]
            for attribute, target, value in self._attribute_pairs(assign, function.params.params[0].name.value):
                values.setdefault(attribute, []).append(value)
                targets.setdefault(attribute, []).append(target)
        for cls in self.classes:
            values, targets = found[cls]
            for keyword, value in self._keyword_attributes(cls):
                values.setdefault(keyword.value, []).append(value)
                targets.setdefault(keyword.value, []).append(keyword)
        return found

    def _keyword_attributes(self, cls: cst.ClassDef) -> list[tuple[cst.Name, cst.BaseExpression]]:
        """``def __init__(self, **kwargs): self.__dict__.update(kwargs)``: every keyword that
        a construction of the class passes becomes an attribute. Nothing when a construction
        passes ``**`` (what it sets is not known) or the class is made elsewhere too."""
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        star = init.params.star_kwarg if init is not None else None
        if init is None or star is None or not init.params.params or init not in self.functions or self._subclassed(cls):
            return []
        owner = init.params.params[0].name.value
        updates = [
            call
            for call in self.functions[init].calls
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "update"
            and attribute_path(call.func.value) == (owner, "__dict__")
            and len(call.args) == 1
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == star.name.value
        ]
        if not updates:
            return []
        found = []
        for ref in self.references(cls):
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                if self._is_base(ref) or _inside(self.program, ref, cls):  # ``super(Model, self)``
                    continue
                return []
            if any(arg.star for arg in call.args):
                return []
            found.extend((arg.keyword, arg.value) for arg in call.args if arg.keyword is not None)
        return found

    def self_reads(self, cls: cst.ClassDef) -> dict[str, list[cst.Attribute]]:
        """Every ``self.<name>`` read in the class's body (its methods, and functions nested in
        them; ``self`` being the method's first parameter, whatever it is called), by name;
        assignment targets left out."""
        return self._self_reads.get(cls, {})

    @cached_property
    def _self_reads(self) -> dict[cst.ClassDef, dict[str, list[cst.Attribute]]]:
        found: dict[cst.ClassDef, dict[str, list[cst.Attribute]]] = {}
        parents = self.program.index.parents
        for name, attributes in self._attributes_named.items():
            for attribute in attributes:
                receiver = attribute.value
                if not isinstance(receiver, cst.Name):
                    continue
                bound = self.bindings(receiver) or ()
                if not (len(bound) == 1 and isinstance(bound[0], cst.Param) and self.is_self(bound[0])):
                    continue
                if isinstance(parents.get(attribute), cst.AssignTarget):
                    continue
                node = parents.get(attribute)
                while node is not None and not isinstance(node, cst.ClassDef):
                    node = parents.get(node)
                if node is not None:
                    found.setdefault(node, {}).setdefault(name, []).append(attribute)
        return found

    def _attribute_pairs(self, assign, owner: str) -> list[tuple[str, cst.CSTNode, cst.BaseExpression]]:
        if isinstance(assign, cst.AnnAssign):
            pairs = [(assign.target, assign.value)] if assign.value is not None else []
        else:
            pairs = []
            for target in assign.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(assign.value, (cst.Tuple, cst.List)):
                    if len(target.target.elements) == len(assign.value.elements):
                        pairs.extend((t.value, v.value) for t, v in zip(target.target.elements, assign.value.elements))
                else:
                    pairs.append((target.target, assign.value))
        found = []
        for target, value in pairs:
            path = attribute_path(target)
            if path is not None and len(path) == 2 and path[0] == owner and value is not None:
                found.append((path[1], target, value))
        return found

    def _class_attribute(self, classes: list[cst.ClassDef], path, depth: int) -> list[Origin]:
        """The origins of ``obj.<attr>`` for an object of one of ``classes``: what their
        methods assign to ``self.<attr>``; a method of that name is itself the origin."""
        attribute = path[0][1]
        found: list[Origin] = []
        for cls in {c: None for klass in classes for c in self.family(klass)}:
            for value in self.attribute_values(cls).get(attribute, ()):
                found.extend(self._follow(value, path[1:], (), depth))
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            for statement in body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == attribute:
                    found.append(Origin(statement, path[1:]))
        return found

    # --- calls -------------------------------------------------------------------------------

    def _call(self, call: cst.Call, path, frame: Frame, depth: int) -> list[Origin]:
        local = self.local_definition(call.func)
        if isinstance(local, cst.ClassDef) and path and path[0][0] == "attr":
            found = self._class_attribute([local], path, depth)
            if found:
                return found
        if isinstance(local, cst.FunctionDef) and path and self._enter:
            # ``detect_hardware()[1]``, ``make()["optimizer"]``: into what the function returns.
            found: list[Origin] = []
            entered = self._frame(local, call)
            for ret in self.functions[local].returns if local in self.functions else ():
                if ret.value is not None:
                    found.extend(self._follow(ret.value, path, entered, depth))
            if found:
                return found
        return [Origin(call, path)]

    def origins_in_call(self, expr: cst.BaseExpression, function: cst.FunctionDef, call: cst.Call) -> list[Origin]:
        """The origins of ``expr`` (in ``function``) when ``call`` runs the function: its
        parameters are that call's arguments."""
        return list(self._follow(expr, (), self._frame(function, call), 0))

    def returned(self, function: cst.FunctionDef, call: cst.Call | None = None) -> list[Origin]:
        """The origins of what ``function`` returns (when entered from ``call``: its
        parameters bound to that call's arguments)."""
        frame = self._frame(function, call) if call is not None else ()
        found: list[Origin] = []
        info = self.functions.get(function)
        for ret in info.returns if info else ():
            if ret.value is not None:
                found.extend(self._follow(ret.value, (), frame, 0))
        return found

    def _frame(self, function: cst.FunctionDef, call: cst.Call) -> Frame:
        info = self.functions.get(function)
        offset = 1 if info is not None and info.is_method else 0
        pairs = []
        for param in (*function.params.params, *function.params.kwonly_params):
            if offset and param is function.params.params[0]:
                continue
            value = self._argument(function, call, param, offset) if offset else (
                parameter_argument(function, call, param).value if parameter_argument(function, call, param) else None
            )
            pairs.append((param, value))
        return tuple(pairs)


def _loop_of_target(program: Program, node: cst.CSTNode) -> cst.For | None:
    """The ``for`` loop whose target binds ``node`` (a name, or one unpacked from it)."""
    child, parent = node, program.parent(node)
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, parent = parent, program.parent(parent)
    return parent if isinstance(parent, cst.For) and parent.target is child else None


def _inside(program: Program, node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    return any(a is statement for a in program.ancestors(node))


def _loop_body_read(program: Program, statement: cst.CSTNode, binding: cst.CSTNode, read: cst.CSTNode) -> bool:
    """Whether ``binding`` is (in) the target of the ``for`` loop ``statement`` and ``read``
    is in its body."""
    if not isinstance(statement, cst.For):
        return False
    target = statement.target
    return (binding is target or _inside(program, binding, target)) and _inside(program, read, statement.body)
