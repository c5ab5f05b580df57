"""Parameters: what the calls of a function pass it (a class's instantiations for
``__init__``, ``obj.method(...)`` for methods, ``strategy.run(fn, args=...)``; the calls of a
function handed to a local function that only calls it, or returned by a local factory whose
results are only called: ``train_step, test_step = make_steps(...)``), and whether other code
may call it too. Part of :class:`~autofix.analysis.core.value_flow.Values`."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from autofix.analysis.core.origins import Frame, Origin
from autofix.analysis.syntax import argument, parameter_argument

# Methods of a Keras model that Keras's training never calls itself.
_USER_CALLED = frozenset({"compile"})
_MODEL_BASES = frozenset({"keras.Model", "keras.models.Model", "keras.Sequential", "keras.models.Sequential"})
# What rebuilds a model from a saved configuration, compiling it again (Keras's
# ``deserialize_keras_object`` calls ``compile_from_config``); ``clone_model`` too, for a model
# of the file's own class.
_REBUILDS = frozenset({"load_model", "model_from_json", "model_from_config", "deserialize", "deserialize_keras_object"})


class Parameters:
    """The parameters section of :class:`~autofix.analysis.core.value_flow.Values`."""

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
        decorated = self.decorated_by(function)
        if decorated:
            # ``@distributed`` over ``def step(...)`` (a class too: ``__init__`` takes it): its
            # first parameter is the decorated function; any other is not given.
            first = self._first_parameter(function)
            if param is first:
                found.extend(Origin(node, path) for node in decorated)
            elif param.default is not None:
                found.extend(self._follow(param.default, path, (), depth))
        if passed_on or not (calls or decorated):
            # Called from elsewhere too (an entry point, a callback): its value comes from outside.
            found.append(Origin(param, path))
        return found

    def decorated_by(self, function: cst.FunctionDef) -> list[cst.CSTNode]:
        """What ``function`` decorates (``@function``, or ``@Class`` for its ``__init__``):
        the functions and classes below each such decorator."""
        owner: cst.CSTNode = function
        info = self.functions.get(function)
        if info is not None and info.is_method:
            cls = self.class_of(function)
            if cls is None or function.name.value != "__init__":
                return []
            owner = cls
        found: list[cst.CSTNode] = []
        for ref in self.references(owner):
            decorator = self.program.parent(ref)
            if isinstance(decorator, cst.Decorator) and decorator.decorator is ref:
                found.append(self.program.parent(decorator))
        return found

    def _first_parameter(self, function: cst.FunctionDef) -> cst.Param | None:
        info = self.functions.get(function)
        params = list(function.params.params)[1 if info is not None and info.is_method else 0:]
        return params[0] if params else None

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
                    elif not self._is_base(ref) and not self._decorates(ref):
                        passed_on = True
                return calls, passed_on or not (calls or self.decorated_by(function)) or self._subclassed(cls)
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
            passed_on = not (self._called(ref, 0, calls) or self._decorates(ref) or self._handed_then_called(ref, calls)) or passed_on
        return calls, passed_on

    def _handed_then_called(self, ref: cst.CSTNode, calls: list[tuple[cst.Call, int]], depth: int = 0) -> bool:
        """A function handed to a local function that only calls it (``make_distributed(strategy,
        train_step)`` whose parameter goes to ``strategy.run``), or returned by a local factory
        whose results are only called: adds those calls; False when any use is not seen."""
        if depth > 3:
            return False
        return self._passed_then_called(ref, calls, depth) or self._returned_then_called(ref, calls, depth)

    def _reads_only_called(self, name: cst.Name, calls: list[tuple[cst.Call, int]], depth: int) -> bool:
        uses = self.uses(name)
        return bool(uses) and all(self._called(use, 0, calls) or self._handed_then_called(use, calls, depth + 1) for use in uses)

    def _passed_then_called(self, ref: cst.CSTNode, calls: list[tuple[cst.Call, int]], depth: int) -> bool:
        arg = self.program.parent(ref)
        holder = self.program.parent(arg) if isinstance(arg, cst.Arg) and arg.value is ref and not arg.star else None
        if not isinstance(holder, cst.Call) or holder.func is ref:
            return False
        callee = self.local_definition(holder.func)
        info = self.functions.get(callee) if isinstance(callee, cst.FunctionDef) else None
        if info is None or info.is_method:
            return False
        for param in (*callee.params.params, *callee.params.kwonly_params):
            if parameter_argument(callee, holder, param) is arg:
                return self._reads_only_called(param.name, calls, depth)
        return False

    def _returned_then_called(self, ref: cst.CSTNode, calls: list[tuple[cst.Call, int]], depth: int) -> bool:
        """A function a local factory returns (``return step``, ``return train_step,
        test_step``), where every call of the factory binds what it returns to names
        (``step = make_step(...)``, ``train_step, test_step = make_steps(...)``) that are only
        called or handed to ``strategy.run``: adds those calls; False when any use is not seen."""
        parent = self.program.parent(ref)
        index: int | None = None
        if isinstance(parent, cst.Element):
            container = self.program.parent(parent)
            if not isinstance(container, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in container.elements):
                return False
            index = list(container.elements).index(parent)
            ref, parent = container, self.program.parent(container)
        if not (isinstance(parent, cst.Return) and parent.value is ref):
            return False
        factory = self.enclosing_function(parent)
        info = self.functions.get(factory) if factory is not None else None
        if factory is None or info is None or info.is_method:
            return False
        factory_refs = self.references(factory)
        if not factory_refs:
            return False
        for factory_ref in factory_refs:
            call = self.program.parent(factory_ref)
            if not (isinstance(call, cst.Call) and call.func is factory_ref):
                return False
            name = self._bound_name(call, index)
            if name is None or not self._reads_only_called(name, calls, depth):
                return False
        return True

    def _bound_name(self, call: cst.Call, index: int | None) -> cst.Name | None:
        """The name ``call``'s value (``index`` None) or its ``index``-th item is assigned to
        (``name = call``, ``a, b = call``)."""
        assign = self.program.parent(call)
        if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
            return None
        target = assign.targets[0].target
        if index is None:
            return target if isinstance(target, cst.Name) else None
        if isinstance(target, (cst.Tuple, cst.List)) and any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        return self.unpacked_name(call, index)

    def _decorates(self, ref: cst.CSTNode) -> bool:
        """``@ref`` over a function or class (:meth:`decorated_by` says what it is given)."""
        decorator = self.program.parent(ref)
        return isinstance(decorator, cst.Decorator) and decorator.decorator is ref

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
