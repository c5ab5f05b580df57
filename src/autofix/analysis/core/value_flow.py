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
(:mod:`autofix.analysis.facts`, :mod:`autofix.analysis.training`): this module knows only
how values flow.

Limits, on purpose: a value that is changed in place or flows through a loop variable, a
container built at run time (``append``), ``*args`` / ``**kwargs``, or another module, ends
in an origin that carries the projections not applied (``Origin.path``): callers treat such
an origin as unknown.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.core.bindings import Bindings
from autofix.analysis.core.classes import Classes
from autofix.analysis.core.origins import ANY, Frame, FunctionInfo, Origin, Projection, literal_key
from autofix.analysis.core.parameters import Parameters
from autofix.analysis.program import Program
from autofix.analysis.core import guards
from autofix.analysis.syntax import parameter_argument

_LIMIT = 40


class Values(Bindings, Parameters, Classes, Derived):
    """Value flow within one module (``Values.of(program)``). Following a value is here; the
    names it reads, the parameters it enters and the classes whose attributes it looks into are
    sections of their own (:mod:`.bindings`, :mod:`.parameters`, :mod:`.classes`)."""

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
            assigned = self.assigned_before(expr)
            if assigned is not None:
                # ``self.model = build()`` earlier in the method: what it reads, whatever other
                # methods assign.
                return list(self._follow(assigned, path, frame, depth))
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
            for ret in self._live_returns(local, call):
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
        for ret in self._live_returns(function, call):
            if ret.value is not None:
                found.extend(self._follow(ret.value, (), frame, 0))
        return found

    def _live_returns(self, function: cst.FunctionDef, call: cst.Call | None) -> list[cst.Return]:
        """The ``return`` statements of ``function`` that ``call`` can reach: those a test of
        a parameter the call passes a constant (or leaves at a constant default) does not make
        dead (``create_strategy()`` with ``mode="gpus_one_machine"`` by default returns only
        from ``if mode == "gpus_one_machine": return tf.distribute.MirroredStrategy()``; see
        :mod:`.guards`). Every return without a call, or when nothing is known."""
        info = self.functions.get(function)
        returns = list(info.returns) if info else []
        if call is None or len(returns) < 2:
            return returns
        known = self._constants_passed(function, call)
        if not known:
            return returns
        return [r for r in returns if not guards.dead(self.program, r, known)]

    def _constants_passed(self, function: cst.FunctionDef, call: cst.Call) -> guards.Known:
        """The parameters of ``function`` that ``call`` binds to a constant
        (:func:`.guards.constants_passed`); none for a method, which may be called bound or
        not, so which argument is which is not sure."""
        info = self.functions.get(function)
        if info is None or info.is_method:
            return {}
        return guards.constants_passed(self.program, function, call)

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
