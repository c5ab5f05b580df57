"""Custom steps that are methods, for ``autofix migrate``: a model or trainer class of this file
whose own method applies gradients (``model.train(x)`` calling
``self.optimizer.apply_gradients(...)``, directly or through other methods of the class).

The step is the method the training loop calls on the object, ``obj.method(batch)``: it is run
per replica as a function step is (``strategy.run(obj.method, args=(batch,))`` in a generated
wrapper), which is right only when ``obj`` is one object, made in this file by a construction of
the class (so that the rules put it, and the variables it makes, in the strategy's scope), and
when running the method once per replica changes nothing that one call would not. The object
may be a parameter of a module-level function that runs the loop (``def train(gan, ds):
gan.step(x)``) when every call of the function passes one object of one Keras class of this
file and the step is given the batches of a ``for`` loop over a parameter: the wrapper is then
made in that function (:meth:`parameter_problem`). The method
neither keeps Python state on the object (``self.steps += 1`` would count N per step) nor is
reached from other methods of the class as well (then it is not only the loop's step).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports
from autofix.analysis.syntax import attribute_path, nodes_in
from autofix.tf.symbols import Kind


class MethodSteps:
    """Follows a method that applies gradients to the method the loop calls (built per
    :class:`~autofix.analysis.migration.single_device.SingleDevice`)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.facts = Facts.of(program)
        self.callables = Callables.of(program)

    def owner(self, method: cst.FunctionDef) -> cst.ClassDef | None:
        """The class ``method`` is defined in."""
        parent = self.program.parent(self.program.parent(method))
        return parent if isinstance(parent, cst.ClassDef) else None

    def calls(self, method: cst.FunctionDef) -> tuple[list[cst.Call], list[cst.Call]]:
        """The calls that run ``method``: from methods of its own class (``self.method(...)``)
        and from elsewhere (``obj.method(...)``)."""
        inside, outside = [], []
        cls = self.owner(method)
        for call in self.callables.call_sites(method):
            path = attribute_path(call.func)
            if path is not None and len(path) == 2 and path[0] == "self" and cls is not None and _within(self.program, call, cls):
                inside.append(call)
            else:
                outside.append(call)
        return inside, outside

    def outermost(self, method: cst.FunctionDef) -> cst.FunctionDef | str | tuple[cst.CSTNode, str]:
        """The method the loop calls, followed up from ``method`` through the methods of its
        class that call it (each called by exactly one other); or why it cannot be told (with
        the call that shows it, for one made on a parameter that cannot be followed)."""
        seen: set[int] = set()
        while id(method) not in seen:
            seen.add(id(method))
            inside, outside = self.calls(method)
            if outside and inside:
                return (
                    f"{method.name.value}() is called both by other methods of its class (line "
                    f"{self.program.line(inside[0])}) and from outside it (line {self.program.line(outside[0])}): "
                    "which call is the training step is not known"
                )
            if outside:
                return method
            callers = {id(f): f for f in (self.program.enclosing_function(c) for c in inside) if f is not None}
            if not inside:
                unlinked = self.unlinked_call(method) or self.given_to_another_module(method)
                if unlinked is not None:
                    return unlinked
            if len(callers) != 1:
                why = "nothing in this file calls it" if not inside else "several methods call it"
                return f"{method.name.value}() applies gradients but {why}: which call is the training step is not known"
            (caller,) = callers.values()
            if self.owner(caller) is None:
                return f"{method.name.value}() is called from a function nested in a method"
            method = caller
        return method

    def receiver_problem(self, method: cst.FunctionDef, calls: list[cst.Call]) -> tuple[cst.CSTNode, str] | None:
        """Why the object the loop calls ``method`` on cannot be run per replica as it is (at
        the node that shows it), or None: it must be one name, bound once in this file to a
        construction of the method's class (or of a subclass of it here)."""
        name = method.name.value
        for call in calls:
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if not isinstance(receiver, cst.Name):
                return call, (
                    f"the object {name}() is called on (line {self.program.line(call)}) is not a name: it cannot be "
                    "followed to where it is made"
                )
            bindings = self.facts.bindings(receiver) or []
            if len(bindings) == 1 and isinstance(bindings[0], cst.Param):
                why = self.parameter_problem(method, call, receiver, bindings[0])
                if why is not None:
                    return call, why
                continue
            values = [self.facts.assigned_value(b) for b in bindings]
            cls = self.callables.instance_class(receiver)
            if len(bindings) != 1 or not isinstance(values[0], cst.Call) or cls is None:
                return call, (
                    f"{receiver.value}, whose {name}() is the training step (line {self.program.line(call)}), is not "
                    "bound once, to an object of a class of this file: which object the step trains cannot be "
                    "followed to where it is made, so neither can what must be made in the strategy's scope"
                )
            if cls not in self.facts.keras_classes:
                return call, (
                    f"{cls.name.value} is not a Keras model or layer: what making {receiver.value} makes is not known "
                    "to autofix, so it cannot be made in the strategy's scope"
                )
        receivers = {call.func.value.value for call in calls}  # type: ignore[union-attr]
        if len(receivers) != 1:
            return calls[0], f"{name}() is called on several objects ({', '.join(sorted(receivers))}): each would need a step of its own"
        return None

    def unlinked_call(self, method: cst.FunctionDef) -> tuple[cst.Call, str] | None:
        """A call ``param.<method>(...)`` on a parameter of a function that may run ``method``
        but could not be linked to it (what a call of the function passes is not followed to an
        object of its class): the call, and what could not be followed."""
        name = method.name.value
        for call, _owner in self.facts.calls:
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == name and isinstance(func.value, cst.Name)):
                continue
            bindings = self.facts.bindings(func.value) or []
            if not (len(bindings) == 1 and isinstance(bindings[0], cst.Param)) or self.callables.of_call(func)[0]:
                continue
            passed = self.callables.passed_arguments(bindings[0])
            classes = [] if isinstance(passed, str) else [self.callables.instance_class(value) for _site, value in passed]
            if classes and None not in classes and all(self.callables.method(c, name) is not method for c in classes):  # type: ignore[arg-type]
                continue  # objects of other classes of this file: another method of that name
            return call, self._through_parameter(method, call, func.value, bindings[0])
        return None

    def given_to_another_module(self, method: cst.FunctionDef) -> tuple[cst.Call, str] | None:
        """A call that gives an object whose ``method`` this is to a function of another module
        of the project (``train(m, ds)`` with ``from wgan import train``), which may call it:
        the call, and why the step is not migrated (nothing in this file calls it, but
        something may)."""
        name = method.name.value
        imports = ProjectImports.of(self.program)
        for call, _owner in self.facts.calls:
            if self.callables.of_call(call.func)[0]:
                continue
            for arg in call.args:
                cls = self.callables.instance_class(arg.value) if isinstance(arg.value, (cst.Name, cst.Call)) else None
                if cls is None or self.callables.method(cls, name) is not method:
                    continue
                resolved = imports.resolve(call.func)
                if resolved is None or resolved.path is None:
                    continue
                code = self.program.module.code_for_node
                return call, (
                    f"{name}() applies gradients and nothing in this file calls it, but {code(arg.value)} (an object of "
                    f"{cls.name.value}) is given to {code(call.func)}() of {resolved.where(self.program.path)} on line "
                    f"{self.program.line(call)}, which may call it: a step run by a function of another module is not "
                    "migrated (it would have to run per replica there)"
                )
        return None

    def passed_objects(self, calls: list[cst.Call]) -> list[tuple[cst.Call, cst.BaseExpression]]:
        """For a step the loop calls on a parameter, each call of the function and the object
        it passes for it; empty for a step called on an object made where it is called."""
        receiver = calls[0].func.value if calls and isinstance(calls[0].func, cst.Attribute) else None
        bindings = self.facts.bindings(receiver) or [] if isinstance(receiver, cst.Name) else []
        if len(bindings) != 1 or not isinstance(bindings[0], cst.Param):
            return []
        passed = self.callables.passed_arguments(bindings[0])
        return [] if isinstance(passed, str) else passed

    def parameter_problem(self, method: cst.FunctionDef, call: cst.Call, receiver: cst.Name, param: cst.Param) -> str | None:
        """Why a step called on a parameter (``def train(gan, ds): gan.step(x)``) cannot be run
        per replica in that function, or None when it can: every call of the function passes
        an object of one Keras class of this file, each a construction of it or a name bound
        once to one (what the rules put in the strategy's scope)."""
        passed = self.callables.passed_arguments(param)
        if isinstance(passed, str) or not passed:
            return self._through_parameter(method, call, receiver, param)
        classes = {self.callables.instance_class(value) for _site, value in passed}
        if len(classes) != 1 or None in classes:
            return self._through_parameter(method, call, receiver, param)
        (cls,) = classes
        name, line = method.name.value, self.program.line(call)
        function = self.program.enclosing_function(param)
        owner = f"{function.name.value}()" if function is not None else "its function"
        head = f"{name}() is called on {receiver.value}, a parameter of {owner} (line {line})"
        if cls not in self.facts.keras_classes:
            return (
                f"{head}; {cls.name.value} is not a Keras model or layer: what making it makes is not known to autofix, "
                "so it cannot be made in the strategy's scope"
            )
        for site, value in passed:
            if isinstance(value, cst.Call):
                continue
            bindings = self.facts.bindings(value) if isinstance(value, cst.Name) else None
            if not bindings or len(bindings) != 1 or not isinstance(self.facts.assigned_value(bindings[0]), cst.Call):
                code = self.program.module.code_for_node(value)
                return (
                    f"{head}; the call of {owner} at line {self.program.line(site)} passes {code}, which is not bound once "
                    "to an object made in this file: which object the step trains cannot be followed to where it is made"
                )
        return self._batch_problem(call, function, head, owner)

    def _batch_problem(self, call: cst.Call, function: cst.FunctionDef | None, head: str, owner: str) -> str | None:
        """Why what the step is given in ``function`` is not shown to be a batch of a dataset
        the function is given (``for x, _ in ds`` / ``enumerate(ds)`` / ``ds.take(n)`` over a
        parameter): only such a dataset is distributed there, before its loop."""
        params = list(function.params.params) if function is not None else []
        for arg in call.args:
            value = arg.value
            bindings = (self.facts.bindings(value) or []) if isinstance(value, cst.Name) and not arg.keyword else []
            loops = [self._loop_binding(b) for b in bindings]
            roots = [_dataset_root(loop.iter) if loop is not None else None for loop in loops]
            given = [(self.facts.bindings(root) or []) if root is not None else [] for root in roots]
            if not bindings or any(len(found) != 1 or not any(found[0] is p for p in params) for found in given):
                code = self.program.module.code_for_node(value)
                return (
                    f"{head}; it is given {code} (line {self.program.line(call)}), which is not a batch of a for loop over a "
                    f"dataset {owner} is given as a parameter: only such a dataset can be distributed there"
                )
        return None

    def _loop_binding(self, binding: cst.CSTNode) -> cst.For | None:
        """The ``for`` loop whose target binds ``binding``, if that is what binds it."""
        for ancestor in [binding, *self.program.ancestors(binding)]:
            parent = self.program.parent(ancestor)
            if isinstance(parent, cst.For) and parent.target is ancestor:
                return parent
            if isinstance(ancestor, (cst.For, cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return None
        return None

    def _through_parameter(self, method: cst.FunctionDef, call: cst.Call, receiver: cst.Name, param: cst.Param) -> str:
        """Why a step called on a parameter (``def train(gan, ds): gan.step(x)``) is not run per
        replica: what every call of the function passes for it cannot be followed to objects of
        one class of this file (naming the call that shows it)."""
        name, line = method.name.value, self.program.line(call)
        function = self.program.enclosing_function(param)
        owner = f"{function.name.value}()" if function is not None else "its function"
        head = f"{name}() is called on {receiver.value}, a parameter of {owner} (line {line})"
        passed = self.callables.passed_arguments(param)
        if isinstance(passed, str):
            return f"{head}, which cannot be followed to the object it is: {passed}"
        if not passed:
            return f"{head}, and nothing in this file calls {owner}: which object the step trains is not known"
        classes: dict[str, int] = {}
        for site, value in passed:
            cls = self.callables.instance_class(value)
            if cls is None:
                code = self.program.module.code_for_node(value)
                return (
                    f"{head}; the call of {owner} at line {self.program.line(site)} passes {code}, which cannot be "
                    "followed to an object of a class of this file"
                )
            classes.setdefault(cls.name.value, self.program.line(site))
        if len(classes) > 1:
            shown = ", ".join(f"{cls} (line {at})" for cls, at in classes.items())
            return f"{head}; the calls of {owner} pass objects of several classes ({shown}): each would need a step of its own"
        (cls,) = classes
        sites = ", ".join(str(self.program.line(site)) for site, _value in passed)
        return (
            f"{head}; every call of {owner} passes an object of {cls} (line{'s' if len(passed) > 1 else ''} {sites}), but "
            f"this call is not linked to {cls}.{name}(): which method it runs is not known"
        )

    def optimizer_problem(self, updates: list[cst.Call], calls: list[cst.Call], training) -> tuple[cst.CSTNode, str] | None:
        """An optimizer the step applies that cannot be followed to where it is made: it must
        be made in the strategy's scope (Keras 3 refuses one made outside), and the rules can
        only move what they can find. ``self.optimizer`` of a model the file compiles is
        compile's (what it is given, or makes from a name), which goes in the scope with the
        model's ``compile``."""
        for update in updates:
            receiver = update.func.value  # type: ignore[attr-defined]
            if attribute_path(receiver) == ("self", "optimizer") and self._compiled(calls, training):
                continue
            if not any(self.facts.call_kind(m) is Kind.OPTIMIZER for m in training.makers(receiver)):
                code = self.program.module.code_for_node(receiver)
                return update, (
                    f"the optimizer the step applies ({code}, line {self.program.line(update)}) cannot be followed to "
                    "where it is made, so it cannot be made in the strategy's scope"
                )
        return None

    def _compiled(self, calls: list[cst.Call], training) -> bool:
        """Whether the object the loop calls the step on is compiled in this file (and no
        method of its class sets ``self.optimizer`` itself)."""
        receiver = calls[0].func.value  # type: ignore[attr-defined]
        cls = self.callables.instance_class(receiver)
        if cls is None or any("optimizer" in self.facts.values.attribute_values(c) for c in self.facts.values.family(cls)):
            return False
        made = [o.node for o in self.facts.values.origins(receiver) if o.whole and isinstance(o.node, cst.Call)]
        return any(call.func.attr.value == "compile" for call, _factory in training.method_calls_on(made))  # type: ignore[union-attr]

    def state_problem(self, method: cst.FunctionDef, reached: list[cst.FunctionDef]) -> tuple[cst.CSTNode, str] | None:
        """Python state the step keeps on its object (``self.x = ...``, ``self.x += ...``,
        ``del self.x``) in the methods it runs: once per replica, it would change N times per
        step."""
        for function in reached:
            for node in nodes_in(function.body, (cst.AssignTarget, cst.AugAssign, cst.Del, cst.AnnAssign)):
                target = node.target
                for attribute in _targets(target):
                    path = attribute_path(attribute)
                    if path is not None and path[0] == "self":
                        return node, (
                            f"{method.name.value}() keeps Python state on its object ({'.'.join(path)}, line "
                            f"{self.program.line(node)}): run once per replica, it would change N times per step"
                        )
        return None


def _dataset_root(expr: cst.BaseExpression) -> cst.Name | None:
    """``ds`` of ``ds``, ``enumerate(ds)``, ``ds.take(n)``, ``enumerate(ds.shuffle(n))``: the
    dataset a loop's header iterates, cut or reordered only."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "enumerate" and expr.args:
        expr = expr.args[0].value
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _HEADER_METHODS:
        expr = expr.func.value
    return expr if isinstance(expr, cst.Name) else None


# Dataset methods that cut, repeat or reorder its batches without changing them.
_HEADER_METHODS = frozenset({"take", "skip", "shuffle", "repeat", "prefetch", "cache"})


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [t for e in target.elements for t in _targets(e.value)]
    if isinstance(target, cst.Subscript):
        return [target.value]
    return [target] if isinstance(target, cst.Attribute) else []


def _within(program: Program, node: cst.CSTNode, cls: cst.ClassDef) -> bool:
    return any(a is cls for a in program.ancestors(node))
