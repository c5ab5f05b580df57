"""Where a value computed in a training step goes, for a fix that changes it.

A fix that changes what a value is (a loss divided by the replica count, a regularization term
scaled) may only be made when every use of that value is accounted for. Followed forwards:
arithmetic, ``tf.cast`` and the like, names it is assigned to (``loss += ...`` too), containers,
the parameters of local helpers it is passed to, and returns (a helper's to its call sites, a
step's to the ``strategy.run`` calls that run it, a ``tf.function``'s to its callers). It is
accounted for where it is differentiated (the change is the point), where the per-replica
values are combined with ``strategy.reduce(SUM, ...)`` (the sum of the replicas' shares is the
global value) unless that sum is then divided by a count of replicas, devices or workers (an
average made by hand: ``loss /= n_gpus``), and
where it is thrown away. Anything else is a use the change would change: a
metric, a print or a summary, a comparison, ``.numpy()``, ``ReduceOp.MEAN`` (which must become
SUM with the fix), a call into code that is not in view.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.callees import Callables, tf_names
from autofix.analysis.steps.custom import REPLICA_WORDS, Steps, named_for
from autofix.analysis.syntax import argument_value
from autofix.tf.losses import PASS_METHODS

_LIMIT = 2000
# TensorFlow calls that show, keep or hand a value to Python: a use. Any other TensorFlow
# operation computes a new value from it, which the change changes too.
_SINKS = ("tensorflow.summary.", "tensorflow.print", "tensorflow.debugging.", "tensorflow.py_function",
          "tensorflow.numpy_function", "tensorflow.io.", "tensorflow.Variable", "tensorflow.distribute.")


@dataclass(frozen=True)
class Use:
    """A use of a changed value that the change would change."""

    node: cst.CSTNode
    # "mean" for strategy.reduce(MEAN, ...), "divided" for a division of what
    # strategy.reduce(SUM, ...) returns (an average by hand), "returned" for a return to callers
    # not in view, "use" for anything else.
    kind: str = "use"


def unaccounted_use(steps: Steps, node: cst.BaseExpression) -> Use | None:
    """The first use of the value computed at ``node`` that is not accounted for (see the module
    docstring), or None when every use is."""
    return _Flow(steps).first(node)


def unaccounted_uses(steps: Steps, node: cst.BaseExpression) -> list[Use]:
    """Every use of the value computed at ``node`` that is not accounted for, in the order
    they are met."""
    flow = _Flow(steps, every=True)
    flow.first(node)
    return flow.found


def summed(steps: Steps, node: cst.BaseExpression) -> bool:
    """Whether the value computed at ``node`` reaches a ``strategy.reduce(SUM, ...)`` (which
    adds up the replicas' values: right only for shares of a global value)."""
    flow = _Flow(steps, every=True)
    flow.first(node)
    return flow.summed


class _Flow:
    def __init__(self, steps: Steps, every: bool = False, summed_only: bool = False) -> None:
        self.steps = steps
        # Following what a strategy.reduce(SUM, ...) of the value returns: only a division of
        # it is a use (see _divided_sum).
        self.summed_only = summed_only
        self.program = steps.program
        self.facts = steps.facts
        self.callables = Callables.of(steps.program)
        # Follow every use (not only up to the first unaccounted one), noting a SUM reduce.
        self.every = every
        self.summed = False
        # Following every use: the unaccounted ones met.
        self.found: list[Use] = []

    def first(self, start: cst.BaseExpression) -> Use | None:
        seen: set[tuple] = set()
        pending: list[tuple] = [(start, ())]
        while pending:
            node, stack, *rest = pending.pop()
            # Where the value is in a tuple or dict that holds it (None: it is the whole value).
            select = rest[0] if rest else None
            key = (id(node), tuple(id(c) for c in stack), select)
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > _LIMIT:
                return Use(node)
            if select is not None:
                held = self.held(node, select, stack, pending)
                if held is not False:
                    if held is not None:
                        if not self.every:
                            return held
                        self.found.append(held)
                    continue
            found = self.step(node, stack, pending)
            if found is not None and not self.every:
                return found
            if found is not None:
                self.found.append(found)
        return None

    def held(self, node: cst.CSTNode, select: tuple, stack: tuple, pending: list) -> Use | None | bool:
        """A container that holds the value at ``select`` (a returned tuple's position, a
        string key of a dict): followed where it keeps that place (assigned, returned), and
        to that item where it is unpacked or subscripted; False where it is used otherwise
        (then followed as the value itself, as a container's every use is)."""
        program = self.program
        parent = program.parent(node)
        if isinstance(parent, cst.Return) or isinstance(parent, cst.Assign) and all(isinstance(t.target, cst.Name) for t in parent.targets):
            if isinstance(parent, cst.Return):
                before = len(pending)
                found = self.returned(parent, stack, pending)
                pending[before:] = [(n, s, select) for n, s, *_ in pending[before:]]
                return found
            for target in parent.targets:
                pending.extend((use, stack, select) for use in self.facts.uses(target.target))  # type: ignore[arg-type]
            return None
        if select[0] == "index" and isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements):
                if select[1] < len(target.elements):
                    pending.extend((use, stack) for use in self.facts.uses(target.elements[select[1]].value))  # type: ignore[arg-type]
                    return None
        if select[0] == "key" and isinstance(parent, cst.Subscript) and parent.value is node and len(parent.slice) == 1:
            index = parent.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                if index.value.evaluated_value == select[1]:
                    pending.append((parent, stack))
                return None
        return False

    def step(self, node: cst.CSTNode, stack: tuple[cst.Call, ...], pending: list) -> Use | None:
        program = self.program
        parent = program.parent(node)
        if self.summed_only and (
            isinstance(parent, cst.BinaryOperation) and parent.left is node and isinstance(parent.operator, (cst.Divide, cst.FloorDivide))
            and self._replica_count(parent.right)
            or isinstance(parent, cst.AugAssign) and parent.target is node and isinstance(parent.operator, (cst.DivideAssign, cst.FloorDivideAssign))
            and self._replica_count(parent.value)
        ):
            return Use(parent, "divided")
        holder = program.parent(parent) if isinstance(parent, (cst.Element, cst.DictElement)) else None
        if isinstance(parent, cst.Element) and parent.value is node and isinstance(holder, cst.Tuple) and isinstance(program.parent(holder), cst.Return):
            pending.append((holder, stack, ("index", list(holder.elements).index(parent))))
        elif isinstance(parent, cst.DictElement) and parent.value is node and isinstance(parent.key, cst.SimpleString):
            pending.append((holder, stack, ("key", parent.key.evaluated_value)))
        elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Tuple, cst.List, cst.Dict)):
            pending.append((parent, stack))
        elif isinstance(parent, (cst.Element, cst.DictElement)) and parent.value is node:
            pending.append((parent, stack))
        elif isinstance(parent, cst.IfExp) and parent.test is not node:
            pending.append((parent, stack))
        elif isinstance(parent, cst.Lambda) and parent.body is node:
            return self.returned(parent, stack, pending)
        elif isinstance(parent, cst.Arg):
            return self.argument(parent, node, stack, pending)
        elif isinstance(parent, cst.AssignTarget):
            pass  # a read of a name being assigned: not a use of the value
        elif isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
            return self.assigned(parent, node, stack, pending)
        elif isinstance(parent, cst.Return):
            return self.returned(parent, stack, pending)
        elif isinstance(parent, cst.Expr):
            pass  # thrown away
        else:
            return Use(parent if parent is not None else node)
        return None

    def argument(self, arg: cst.Arg, node: cst.CSTNode, stack: tuple, pending: list) -> Use | None:
        call = self.program.parent(arg)
        if not isinstance(call, cst.Call):
            return Use(arg)
        if self.steps.differentiated(call) is node:
            return None  # the gradient: what the change is for
        names = tf_names(self.facts, call.func)
        func = call.func
        computed = any(n.startswith("tensorflow.") and not n.startswith(_SINKS) for n in names) or names & {"builtins.sum", "builtins.float"}
        if computed or isinstance(func, cst.Attribute) and func.attr.value in PASS_METHODS:
            pending.append((call, stack))
            return None
        if isinstance(func, cst.Attribute) and func.attr.value == "reduce" and self.steps.is_strategy(func.value):
            op = argument_value(call, "reduce_op", 0)
            code = self.program.module.code_for_node(op).upper() if op is not None else ""
            if op is node or "SUM" not in code:
                return Use(call, "mean" if "MEAN" in code else "use")
            self.summed = True
            return None if self.summed_only else self._divided_sum(call)
        callees, complete = self.callables.of_call(func)
        if not callees or not complete:
            return Use(call)
        for callee in callees:
            params = callee.function.params
            param = next((p for p in (*params.params, *params.kwonly_params) if callee.argument(call, p) is arg), None)
            if param is None or isinstance(callee.function, cst.Lambda):
                return Use(call)
            for use in self.facts.uses(param.name):
                pending.append((use, (*stack, call)))
        return None

    def assigned(self, parent: cst.CSTNode, node: cst.CSTNode, stack: tuple, pending: list) -> Use | None:
        if isinstance(parent, cst.Assign):
            targets = [t.target for t in parent.targets]
        elif isinstance(parent, cst.NamedExpr):
            targets = [parent.target]
            pending.append((parent, stack))
        else:
            targets = [parent.target]  # type: ignore[attr-defined]
        for target in targets:
            names = _target_names(target)
            if not names:
                return Use(parent)  # stored in an attribute or a container
            for name in names:
                for use in self.facts.uses(name):
                    pending.append((use, stack))
        return None

    def returned(self, ret: cst.Return | cst.Lambda, stack: tuple, pending: list) -> Use | None:
        """A return of ``function``: to the call it was entered through, or to every call that
        may run it (a step's: the ``strategy.run`` calls that run it)."""
        function = ret if isinstance(ret, cst.Lambda) else self.program.enclosing_function(ret)
        if function is None:
            return Use(ret)
        holder = self.program.parent(function)
        if isinstance(holder, cst.Arg) and self.steps.differentiated(self.program.parent(holder)) is function:  # type: ignore[arg-type]
            return None  # ``optimizer.minimize(lambda: loss, ...)``
        if stack:
            top = stack[-1]
            if any(c.function is function for c in self.callables.of_call(top.func)[0]):
                pending.append((top, stack[:-1]))
                return None
        # A function a local decorator wraps (``@distributed`` over the step): calling its name
        # runs the wrapper, which hands back what it makes of the return (a ``strategy.reduce``
        # of it); the return itself goes where the wrapper runs the function, as a step's goes
        # to the ``strategy.run`` calls that run it.
        direct = [] if self._wrapped(function) else self.callables.call_sites(function)  # type: ignore[arg-type]
        sites = direct + list(self.steps.roots.get(function, ()))  # type: ignore[arg-type]
        if not sites:
            return Use(ret, "returned")
        for site in sites:
            pending.append((site, ()))
        return None

    def _replica_count(self, divisor: cst.BaseExpression) -> bool:
        """Whether ``divisor`` names a count of replicas, devices or workers (``n_workers *
        n_gpu``, ``strategy.num_replicas_in_sync``), or is made from one."""
        return named_for(self.facts, divisor, lambda found: bool(found & REPLICA_WORDS))

    def _divided_sum(self, reduce: cst.Call) -> Use | None:
        """Where the sum over the replicas ``reduce`` makes is then divided by a count of
        replicas, devices or workers (``loss /= n_workers * n_gpu``, ``total /
        strategy.num_replicas_in_sync``): an average made by hand of the replicas' values, which
        their shares would make N times too small. Its other uses (a sum over steps divided by
        the steps, a print) see the global value the shares add up to."""
        flow = _Flow(self.steps, every=True, summed_only=True)
        flow.first(reduce)
        return next((u for u in flow.found if u.kind == "divided"), None)

    def _wrapped(self, function: cst.FunctionDef | cst.Lambda) -> bool:
        """Whether a decorator of ``function`` is a function of this file (or what calling one
        returns: ``@distributed(strategy)``), which replaces it with a wrapper."""
        if not isinstance(function, cst.FunctionDef):
            return False
        for decorator in function.decorators:
            expr = decorator.decorator
            expr = expr.func if isinstance(expr, cst.Call) else expr
            if isinstance(self.facts.local_definition(expr), cst.FunctionDef):
                return True
        return False


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        found = []
        for element in target.elements:
            inner = _target_names(element.value)
            if not inner:
                return []
            found.extend(inner)
        return found
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []
