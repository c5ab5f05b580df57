"""What a call runs, among the code of this file: the local functions, lambdas and methods that
a callable expression may be.

Followed: a local ``def`` (``helper(...)``), ``self.<method>`` of the enclosing class, a name or
``self`` attribute bound to a function (``loss_fn = helper``), to a lambda, to what a local
factory returns (``loss_fn = make_loss()`` with ``def make_loss(): ... return loss``, or one item
of the tuple it returns: ``train_step, test_step = make_steps(...)``), or to an
instance of a local class (its ``__call__``); ``obj.method`` on such an instance; and a
parameter that every caller (or every ``strategy.run(f, args=...)``) passes a local function
for, a method's too as the value flow (:mod:`autofix.analysis.core.value_flow`) follows them
(``model.compile(d_loss_fn=critic_loss)`` stored in ``self.d_loss_fn``). A few steps deep, through names, ``self`` attributes assigned in the class, and returns.
Anything else (an import, a function passed in from another file) is not known, and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, attribute_path, parameter_argument

RUN_METHODS = ("run", "experimental_run_v2")
_DEPTH = 5


def tf_names(facts: Facts, expr: cst.BaseExpression) -> frozenset[str]:
    """The qualified names of ``expr``, with ``tensorflow.compat.v1`` / ``v2`` read as
    ``tensorflow`` (``import tensorflow.compat.v2 as tf`` is common in research code)."""
    names = facts.names_of(expr)
    if not any(n.startswith("tensorflow.compat.") for n in names):
        return names
    return frozenset(_COMPAT.sub("tensorflow.", n) for n in names)


_COMPAT = re.compile(r"^tensorflow\.compat\.v[12]\.")




@dataclass(frozen=True)
class Callee:
    """A function a call runs. ``bound``: the call passes the function's first parameter
    itself (a method called on its instance: ``self.helper(x)``, ``criterion(y, p)``)."""

    function: cst.FunctionDef | cst.Lambda
    bound: bool = False

    def argument(self, call: cst.Call, param: cst.Param) -> cst.Arg | None:
        """The argument ``call`` passes for ``param`` (None for ``self``, or the default)."""
        params = list(self.function.params.params)
        if param not in params:
            return parameter_argument(self.function, call, param)  # type: ignore[arg-type]
        position = params.index(param) - (1 if self.bound else 0)
        if position < 0:
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param.name.value:
                return arg
        positional = [a for a in call.args if a.keyword is None and not a.star]
        return positional[position] if position < len(positional) else None


class Callables(Derived):
    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts: Facts = Facts.of(program)
        self._classes: dict[cst.ClassDef, dict[str, tuple[list, list]]] = {}
        self._memo: dict[int, tuple[list[Callee], bool]] = {}
        self._sites: dict[cst.CSTNode, list[cst.Call]] | None = None

    # --- the functions a call runs -----------------------------------------------------------

    def of_call(self, func: cst.BaseExpression) -> tuple[list[Callee], bool]:
        """The local functions a call of ``func`` runs, and whether those are all it may run
        (False when some binding of it is not known: an import, a value from elsewhere)."""
        key = id(func)
        if key not in self._memo:
            self._memo[key] = ([], False)  # a cycle proves nothing
            found: list[Callee] = []
            complete = self._expression(func, found, 0)
            self._memo[key] = (list(dict.fromkeys(found)), complete)
        return self._memo[key]

    def _expression(self, expr: cst.BaseExpression, found: list[Callee], depth: int) -> bool:
        if depth > _DEPTH:
            return False
        if isinstance(expr, cst.Lambda):
            found.append(Callee(expr))
            return True
        if isinstance(expr, cst.Name):
            # A step defined again further down (a guide that redefines ``train_step`` section
            # after section): only the definitions that reach this use.
            bindings = self.facts.reaching_bindings(expr)
            if not bindings:
                return False
            return all(self._binding(node, found, depth) for node in bindings)
        path = attribute_path(expr)
        if path is not None and len(path) == 2 and path[0] == "self":
            method = self.own_method(expr)
            if method is not None:
                found.append(Callee(method, bound=True))
                return True
            values = [v for v, _ in self.attribute_assignments(expr)]
            return bool(values) and all(self._made(v, found, depth + 1) for v in values)
        if isinstance(expr, cst.Attribute):
            cls = self.instance_class(expr.value)
            method = self.method(cls, expr.attr.value) if cls is not None else None
            if method is not None:
                found.append(Callee(method, bound=True))
                return True
        return False

    def _binding(self, node: cst.CSTNode, found: list[Callee], depth: int) -> bool:
        if isinstance(node, cst.FunctionDef):
            found.append(Callee(node))
            return True
        if isinstance(node, cst.Param):
            passed = self._passed(node, depth)
            if passed is None:
                passed = self._flowed(node, depth)
            found.extend(passed or ())
            return passed is not None
        value = self.facts.assigned_value(node)
        if value is None:
            return self._unpacked(node, found)
        return self._made(value, found, depth + 1)

    def _unpacked(self, node: cst.CSTNode, found: list[Callee]) -> bool:
        """A name bound by unpacking (``train_step, test_step = make_steps(...)``, ``a, b =
        f, g``): the functions the value flow says that item is, when every origin of it is a
        function or lambda of this file (what a factory defines and returns in a tuple)."""
        origins = self.facts.values.binding_origins(node)
        if not origins or not all(o.whole and isinstance(o.node, (cst.FunctionDef, cst.Lambda)) for o in origins):
            return False
        found.extend(Callee(o.node) for o in origins)  # type: ignore[arg-type]
        return True

    def _made(self, value: cst.BaseExpression, found: list[Callee], depth: int) -> bool:
        """What calling the value ``value`` runs: a function or lambda, an instance's
        ``__call__``, what a local factory returns."""
        if depth > _DEPTH:
            return False
        if isinstance(value, (cst.Lambda, cst.Name, cst.Attribute)):
            return self._expression(value, found, depth)
        if not isinstance(value, cst.Call):
            return False
        local = self.facts.local_definition(value.func)
        if isinstance(local, cst.ClassDef):
            method = self.method(local, "__call__")
            if method is None:
                return False
            found.append(Callee(method, bound=True))
            return True
        if isinstance(local, cst.FunctionDef) and local in self.facts.functions:
            returns = [r.value for r in self.facts.functions[local].returns if r.value is not None]
            return bool(returns) and all(self._made(r, found, depth + 1) for r in returns)
        return False

    def _passed(self, param: cst.Param, depth: int) -> list[Callee] | None:
        """The functions every call of the parameter's function passes for ``param``: its
        direct calls, the ``strategy.run(function, args=(...))`` calls that run it, and the
        functions it decorates (``@distributed``: its first parameter is the function)."""
        params = self.program.parent(param)
        function = self.program.parent(params) if params is not None else None
        if not isinstance(function, cst.FunctionDef) or function not in self.facts.functions:
            return None
        if self.facts.functions[function].is_method or param not in function.params.params:
            return None
        references = self.facts.references(function)
        if not references:
            return None
        found: list[Callee] = []
        for ref in references:
            parent = self.program.parent(ref)
            decorated = self._decorated(ref, parent)
            if decorated is not None:
                # ``@distributed`` (or ``@distributed(strategy)``, a factory returning the
                # decorator) over ``def train_step(...)``: the decorator's first parameter is the
                # decorated function.
                if param is not function.params.params[0] or not decorated:
                    return None
                for target in decorated:
                    found.append(Callee(target, bound=target in self.facts.functions and self.facts.functions[target].is_method))
                continue
            if isinstance(parent, cst.Call) and parent.func is ref:
                arg = parameter_argument(function, parent, param)
                value = arg.value if arg is not None else None
            else:
                value = self._run_argument(ref, function, param)
            if value is None or not self._expression(value, found, depth + 1):
                return None
        return found

    def _decorated(self, ref: cst.CSTNode, parent: cst.CSTNode | None) -> list[cst.FunctionDef] | None:
        """The functions a use of a function decorates: ``@ref`` over them, or ``return ref``
        in a factory every use of which is ``@factory(...)`` (an empty list when some use of the
        factory is something else); None when the use is neither."""
        if isinstance(parent, cst.Decorator) and parent.decorator is ref:
            decorated = self.program.parent(parent)
            return [decorated] if isinstance(decorated, cst.FunctionDef) else []
        if not (isinstance(parent, cst.Return) and parent.value is ref):
            return None
        factory = self.program.enclosing_function(parent)
        if factory is None or factory not in self.facts.functions:
            return None
        found: list[cst.FunctionDef] = []
        for use in self.facts.references(factory):
            call = self.program.parent(use)
            decorator = self.program.parent(call) if isinstance(call, cst.Call) and call.func is use else None
            decorated = self.program.parent(decorator) if isinstance(decorator, cst.Decorator) and decorator.decorator is call else None
            if not isinstance(decorated, cst.FunctionDef):
                return []
            found.append(decorated)
        return found

    def _flowed(self, param: cst.Param, depth: int) -> list[Callee] | None:
        """What the file's value flow says every call passes for ``param`` (a method's too:
        ``model.compile(d_loss_fn=discriminator_loss)``), when each is a function, a lambda or
        what calling a local factory or class makes; None when one is anything else or comes
        from elsewhere."""
        origins = self.facts.values.binding_origins(param)
        if not origins:
            return None
        found: list[Callee] = []
        for origin in origins:
            node = origin.node
            if not origin.whole:
                return None
            if isinstance(node, cst.FunctionDef) and node in self.facts.functions:
                found.append(Callee(node, bound=self.facts.functions[node].is_method))
            elif isinstance(node, cst.Lambda):
                found.append(Callee(node))
            elif not (isinstance(node, cst.Call) and self._made(node, found, depth + 1)):
                return None
        return found

    def _run_argument(self, ref: cst.CSTNode, function: cst.FunctionDef, param: cst.Param) -> cst.BaseExpression | None:
        """For ``strategy.run(function, args=(a, b))``: what it passes for ``param``."""
        arg = self.program.parent(ref)
        run = self.program.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(run, cst.Call) and isinstance(run.func, cst.Attribute) and run.func.attr.value in RUN_METHODS):
            return None
        if argument_value(run, "fn", 0) is not ref:
            return None
        given = argument_value(run, "args", 1)
        if not isinstance(given, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in given.elements):
            return None
        position = list(function.params.params).index(param)
        return given.elements[position].value if position < len(given.elements) else None

    def call_sites(self, function: cst.FunctionDef | cst.Lambda) -> list[cst.Call]:
        """The calls of this file that may run ``function`` (as :meth:`of_call` resolves them)."""
        if self._sites is None:
            self._sites = {}
            for call, _owner in self.facts.calls:
                for callee in self.of_call(call.func)[0]:
                    self._sites.setdefault(callee.function, []).append(call)
        return self._sites.get(function, [])

    # --- classes and their instances ---------------------------------------------------------

    def instance_class(self, expr: cst.BaseExpression, depth: int = 0) -> cst.ClassDef | None:
        """The local class ``expr`` is an instance of: every value bound to the name (or
        assigned to the ``self`` attribute) is a call of it; for a parameter of a function
        (``def train(gan, ds): gan.step(x)``), every call of the function passes an instance of
        it (:meth:`passed_arguments`)."""
        if depth > _DEPTH:
            return None
        if isinstance(expr, cst.Call):
            values: list = [expr]  # ``Trainer(...).fit(...)``
        elif isinstance(expr, cst.Name):
            bindings = self.facts.bindings(expr) or []
            if len(bindings) == 1 and isinstance(bindings[0], cst.Param):
                passed = self.passed_arguments(bindings[0])
                if isinstance(passed, str) or not passed:
                    return None
                classes = {self.instance_class(value, depth + 1) for _call, value in passed}
                return classes.pop() if len(classes) == 1 and None not in classes else None
            values = [self.facts.assigned_value(b) for b in bindings]
        else:
            values = [v for v, _ in self.attribute_assignments(expr)]
        classes = set()
        for value in values:
            local = self.facts.local_definition(value.func) if isinstance(value, cst.Call) else None
            if not isinstance(local, cst.ClassDef):
                return None
            classes.add(local)
        return classes.pop() if len(classes) == 1 else None

    def passed_arguments(self, param: cst.Param) -> list[tuple[cst.Call, cst.BaseExpression]] | str:
        """What every call of a plain function of this file passes for its parameter
        ``param``: (call, argument) for each; or why that cannot be told (a method's
        parameter, a use of the function that is not a call, a call that does not pass it),
        naming the line."""
        params = self.program.parent(param)
        function = self.program.parent(params) if params is not None else None
        if not isinstance(function, cst.FunctionDef) or function not in self.facts.functions:
            return "it is not a parameter of a function of this file"
        name = f"{function.name.value}()"
        if self.facts.functions[function].is_method:
            return f"{param.name.value} is a parameter of the method {name}, which code elsewhere may call"
        if param not in function.params.params:
            return f"{param.name.value} is not a positional parameter of {name}"
        found = []
        for ref in self.facts.references(function):
            call = self.program.parent(ref)
            run = self._run_arguments(ref, function, param)
            if run is not None:
                if isinstance(run, str):
                    return run
                found.append(run)
                continue
            if not (isinstance(call, cst.Call) and call.func is ref):
                return f"{name} is used otherwise than called (line {self.program.line(ref)})"
            arg = parameter_argument(function, call, param)
            if arg is None:
                return f"the call of {name} at line {self.program.line(call)} does not pass {param.name.value} by position or name"
            found.append((call, arg.value))
        return found

    def _run_arguments(
        self, ref: cst.CSTNode, function: cst.FunctionDef, param: cst.Param
    ) -> tuple[cst.Call, cst.BaseExpression] | str | None:
        """``strategy.run(function, args=(a, b))`` (or ``experimental_run_v2``): the call and
        the element of ``args`` passed for ``param``; why not, when ``args`` cannot be read;
        None for any other use of ``ref``."""
        arg = self.program.parent(ref)
        run = self.program.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (
            isinstance(run, cst.Call)
            and isinstance(run.func, cst.Attribute)
            and run.func.attr.value in ("run", "experimental_run_v2")
            and run.args
            and run.args[0] is arg
            and arg.keyword is None
        ):
            return None
        line = self.program.line(run)
        if any(a.keyword is not None and a.keyword.value == "kwargs" for a in run.args):
            return f"{function.name.value}() is run with kwargs= at line {line}"
        passed = next((a.value for a in run.args[1:] if a.keyword is not None and a.keyword.value == "args"), None)
        if passed is None:
            passed = run.args[1].value if len(run.args) > 1 and run.args[1].keyword is None else None
        if not isinstance(passed, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in passed.elements):
            return f"what {function.name.value}() is given by the run at line {line} is not a tuple written out"
        position = list(function.params.params).index(param)
        if position >= len(passed.elements):
            return f"the run at line {line} does not pass {param.name.value} to {function.name.value}()"
        return run, passed.elements[position].value

    def method(self, cls: cst.ClassDef, name: str, depth: int = 0) -> cst.FunctionDef | None:
        """The method ``name`` of ``cls``, or of a local base class it inherits it from."""
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                return statement
        if depth < _DEPTH:
            for base in cls.bases:
                local = self.facts.local_definition(base.value)
                if isinstance(local, cst.ClassDef):
                    found = self.method(local, name, depth + 1)
                    if found is not None:
                        return found
        return None

    def bases(self, cls: cst.ClassDef, depth: int = 0) -> set[str]:
        """The qualified names of the classes ``cls`` derives from, through local bases."""
        found: set[str] = set()
        for base in cls.bases:
            found |= self.facts.names_of(base.value)
            local = self.facts.local_definition(base.value)
            if isinstance(local, cst.ClassDef) and depth < _DEPTH:
                found |= self.bases(local, depth + 1)
        return found

    def own_method(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """``self.<method>``: that method of the class the expression is written in."""
        path = attribute_path(func)
        if path is None or len(path) != 2 or path[0] != "self":
            return None
        for ancestor in self.program.ancestors(func):
            if isinstance(ancestor, cst.ClassDef):
                return self.method(ancestor, path[1])
        return None

    # --- self.<name> in a class ----------------------------------------------------------------

    def attribute_assignments(self, attr: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
        """The values assigned to ``self.<name>`` (``attr``) in its class, with their targets."""
        return self._self_attribute(attr)[0]

    def attribute_reads(self, attr: cst.BaseExpression) -> list[cst.CSTNode]:
        """Every read of ``self.<name>`` (``attr``) in its class."""
        return self._self_attribute(attr)[1]

    def _self_attribute(self, attr: cst.BaseExpression) -> tuple[list, list]:
        path = attribute_path(attr)
        if path is None or len(path) != 2 or path[0] != "self":
            return [], []
        return self.self_attributes(attr).get(path[1], ([], []))

    def self_attributes(self, node: cst.CSTNode) -> dict[str, tuple[list, list]]:
        """For the class ``node`` is in: each ``self.<name>``'s assigned values (with their
        targets) and reads, as the file's value flow records them."""
        cls = next((a for a in self.program.ancestors(node) if isinstance(a, cst.ClassDef)), None)
        if cls is None:
            return {}
        found = self._classes.get(cls)
        if found is None:
            values = self.facts.values
            found = {}
            targets = values.attribute_targets(cls)
            for name, assigned in values.attribute_values(cls).items():
                pairs = [(v, t) for v, t in zip(assigned, targets.get(name, ())) if isinstance(t, cst.Attribute)]
                if pairs:
                    found[name] = (pairs, [])
            for name, reads in values.self_reads(cls).items():
                found.setdefault(name, ([], []))[1].extend(reads)
            self._classes[cls] = found
        return found
