"""The loss of a custom training step, term by term.

The loss is followed backwards from what a step differentiates, through names (the
assignments that reach the read), arithmetic, ``tf.add_n`` / ``sum`` / ``tf.cast``, loss
scaling, and the returns of what a call runs in this file (:mod:`.callees`: helpers, methods,
lambdas, factories, a ``__call__``), a helper's parameters mapped back to the call's
arguments. Each path ends at a *term*, classified by what it becomes when every replica
computes it on its share of the batch and the optimizer sums the replicas' gradients (measured,
docs/losses.md):

- ``mean``: ``tf.reduce_mean`` over everything, per replica: N times too large unless divided
  by the replica count on the way (``scaling``). Also a sum divided by one replica's share of
  the batch (``compute_average_loss(l, global_batch_size=B / replicas)``, ``tf.reduce_sum(l) /
  (B / replicas)``: ``detail`` "share"), whatever the divisor is named, or by the replica's own
  batch (``compute_average_loss(l, global_batch_size=x.shape[0])``; a count of its examples,
  ``tf.shape(x)[0]``: ``detail`` "count"). Also a Keras ``Loss`` subclass whose own
  ``__call__`` returns one (Keras's reduction and replica scaling are skipped), and one whose
  ``call`` returns a scalar mean (Keras passes a scalar through unscaled).
- ``loss``: a Keras loss object's call (``reduction`` in ``detail``; its ``call`` method, one
  loss per example, as ``none``); with the default
  reduction Keras >= 3.8 divides by the replica count itself, Keras 2 raises, Keras < 3.8
  does neither. ``tf.reduce_mean`` of such a call is the same term.
- ``regularization``: ``model.losses`` summed (``tf.add_n``, ``sum``): every replica adds all
  of it, so it counts N times unless scaled (``tf.nn.scale_regularization_loss``).
- ``global``: already a replica's share of a global value: ``compute_average_loss``,
  ``scale_regularization_loss``, a ``reduce_sum`` (sums add up over replicas), values not
  reduced at all (the gradient of a tensor is that of its sum). A sum over the batch (a
  ``reduce_sum``, per-example values, a loss object's ``"none"`` or ``"sum"`` reduction) has
  ``detail`` "sum" (or the reduction): code written for N replicas means that sum, but a
  migration from one device must divide it by the replica count (the replicas' gradients
  are summed, and a right migration averages them).
  A per-replica mean (or the summed ``model.losses``) added to a loss that still has one value
  per example is added to every example: it is a term of the batch's sum as they are
  (``broadcast``; measured, docs/losses.md). What a sum or a global average reduces is walked
  too, its terms kept apart (``LossWalk.under``): a value reached there and directly cannot be
  changed for the one alone.
- ``constant``: a number (no gradient; as a factor, a weight).
- ``unknown``: anything else: a model's output, a call into another module, a mean over
  given axes, a product of two loss values. A sum divided by something that is not the
  replica count (``tf.reduce_sum(per_example) / BATCH``) is one too, with ``detail``
  "normalized": per replica it is its share of the global mean only when what divides it is
  the global batch (a migration makes it so: :mod:`.migrated` checks it).

Divisions by the replica count (or products with its inverse) met on the way are recorded as
``scaling``; those inside ``tf.grad_pass_through`` (they scale the value, not the gradient) as
``bypassed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import libcst as cst

from autofix.analysis.core import guards
from autofix.analysis.facts.callees import Callables, Callee, tf_names
from autofix.analysis.steps.lossobjects import common_reduction, construction_reduction, keras_loss_class, keras_loss_function, keras_own, loss_objects
from autofix.analysis.program import Program
from autofix.analysis.project.callers import callers
from autofix.analysis.project.imports import ProjectImports, program_of
from autofix.analysis.project.layout import digest
from autofix.analysis.steps.custom import Steps, counts_replicas, inverse_count, replica_share
from autofix.analysis.syntax import argument_value, nodes_in, parameter_argument
from autofix.tf.index import Binding
from autofix.tf.losses import (
    AGGREGATES,
    CONSTANTS,
    DIVIDE,
    GLOBAL,
    GRAD_PASS_THROUGH,
    MEANS,
    MULTIPLY,
    PASS,
    PASS_METHODS,
    PER_EXAMPLE,
    SUMS,
)

_DEPTH = 6


@dataclass(frozen=True)
class Term:
    """Where a path backwards from a differentiated value ends."""

    node: cst.BaseExpression
    kind: str
    # Divisions by the replica count (or products with its inverse) on the way, nearest the
    # gradient first.
    scaling: tuple[cst.CSTNode, ...] = ()
    # Calls entered on the way (the innermost last).
    calls: tuple[cst.Call, ...] = ()
    # Bindings passed on the way (``loss = ...``).
    bindings: tuple[cst.CSTNode, ...] = ()
    # Divisions by the replica count inside ``tf.grad_pass_through``: not in the gradient.
    bypassed: tuple[cst.CSTNode, ...] = ()
    # ``loss``: its reduction ("default", "none", "sum", "other"); ``mean``: "axes" (over
    # given axes), "call" (in a Loss subclass's ``call``), or None.
    detail: str | None = None
    # ``loss``: the loss object's call (the term itself, or what its ``reduce_mean`` averages).
    loss_call: cst.Call | None = None
    # What divides it on the way that is not the replica count (``BATCH`` of ``sum / BATCH``).
    divisors: tuple[cst.BaseExpression, ...] = ()
    # A term of what a function of another module of the project returns (``node`` is the
    # call of it here): its place there.
    remote: RemoteTerm | None = None
    # A scalar added to every example of a per-example loss (see ``LossWalk.added``).
    broadcast: bool = False


@dataclass(frozen=True)
class _State:
    scaling: tuple[cst.CSTNode, ...] = ()
    calls: tuple[tuple[cst.Call, Callee], ...] = ()
    bindings: tuple[cst.CSTNode, ...] = ()
    bypassed: tuple[cst.CSTNode, ...] = ()
    # Divided on the way by something that is not the replica count (a sum so divided may be a
    # per-replica mean).
    divided: bool = False
    # In the ``call`` of a Keras Loss subclass: a scalar returned there is not scaled.
    in_loss_call: bool = False
    # What divided it on the way (not the replica count).
    divisors: tuple[cst.BaseExpression, ...] = ()
    # The item read from the value (``losses["total"]``): the value is a dict literal's entry.
    item: str | None = None
    # Inside what a sum or a global average reduces (its terms are ``LossWalk.under``).
    under: cst.Call | None = None
    # The items read after ``item``, outermost last (``step["VQ"]["commitment"]``: item "VQ",
    # then ("commitment",)).
    rest: tuple[str, ...] = ()

    def key(self, node: cst.CSTNode) -> tuple:
        return (id(node), tuple(id(c) for c, _ in self.calls), bool(self.scaling), self.divided, bool(self.bypassed), self.item, self.rest, id(self.under))

    def read(self) -> "_State":
        """The state once the entry ``item`` is taken: the next item read, if any."""
        return self.but(item=self.rest[0] if self.rest else None, rest=self.rest[1:])

    def but(self, **changes) -> "_State":
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(changes)
        return _State(**values)


def loss_terms_of(steps: Steps, target: cst.BaseExpression) -> list[Term]:
    """Where the paths backwards from the differentiated value ``target`` end."""
    return loss_walk(steps, target).terms


def loss_walk(steps: Steps, target: cst.BaseExpression) -> "LossWalk":
    """The walk backwards from ``target``: its ``terms``, and in ``under`` the terms of what
    the sums and global averages among them reduce (each with the reducing call)."""
    walk = LossWalk(steps)
    walk.value(target, _State())
    return walk


class LossWalk:
    """Follows differentiated values back to their terms (see the module docstring)."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.program = steps.program
        self.facts = steps.facts
        self.callables = Callables.of(steps.program)
        self.terms: list[Term] = []
        # The terms of what a sum or a global average reduces (``tf.nn.compute_average_loss(
        # per_example + penalty)``: ``penalty``), with that call: a value reached both there
        # and directly cannot be changed for the one without changing the other.
        self.under: list[tuple[Term, cst.Call]] = []
        self._seen: set[tuple] = set()
        self._attributes: set[str] | None = None

    def end(
        self, node: cst.BaseExpression, state: _State, kind: str, detail: str | None = None,
        loss_call: cst.Call | None = None, remote: RemoteTerm | None = None,
    ) -> None:
        calls = tuple(c for c, _ in state.calls)
        term = Term(node, kind, state.scaling, calls, state.bindings, state.bypassed, detail, loss_call, state.divisors, remote)
        if state.under is not None:
            self.under.append((term, state.under))
        else:
            self.terms.append(term)

    def value(self, node: cst.BaseExpression, state: _State) -> None:
        key = state.key(node)
        if key in self._seen or len(self._seen) > 5000:
            return
        self._seen.add(key)
        if state.item is not None and isinstance(node, cst.Name) and node.value == "None":
            return  # an entry read from None is never a value: that binding gives no loss
        if state.item is not None and not isinstance(node, (cst.Name, cst.Call, cst.IfExp, cst.Dict, cst.Subscript)):
            self.end(node, state, "unknown")
            return
        if isinstance(node, cst.Name):
            self.name(node, state)
        elif isinstance(node, cst.BinaryOperation):
            self.operation(node, node.left, node.operator, node.right, state)
        elif isinstance(node, cst.UnaryOperation):
            self.value(node.expression, state)
        elif isinstance(node, cst.IfExp):
            self.value(node.body, state)
            self.value(node.orelse, state)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self.value(element.value, state)
        elif isinstance(node, cst.Subscript):
            item = _string_item(node)
            if item is None and state.item is not None:
                self.end(node, state, "unknown")
            elif item is not None and state.item is not None:
                self.value(node.value, state.but(item=item, rest=(state.item, *state.rest)))
            else:
                self.value(node.value, state.but(item=item) if item is not None else state)
        elif isinstance(node, cst.Dict) and state.item is not None:
            self.entry(node, state)
        elif isinstance(node, cst.Call):
            self.call(node, state)
        elif isinstance(node, cst.Lambda):
            self.value(node.body, state)
        elif isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
            self.end(node, state, "constant")
        elif isinstance(node, cst.Attribute) and self.regularization(node):
            self.end(node, state, "regularization")
        else:
            self.end(node, state, "unknown")

    def operation(self, node: cst.CSTNode, left: cst.BaseExpression, operator: object, right: cst.BaseExpression, state: _State) -> None:
        if isinstance(operator, (cst.Add, cst.Subtract)):
            self.added(left, right, state)
        elif isinstance(operator, cst.Divide):
            own = self.replica_batch(right)
            if own is not None:
                self.end(node, state, "mean", own or None)  # type: ignore[arg-type]
                return
            if self.counts_replicas(right):
                state = state.but(scaling=(*state.scaling, node))
            else:
                state = state.but(divided=True, divisors=(*state.divisors, right))
            self.value(left, state)
        elif isinstance(operator, cst.Multiply):
            for factor, other in ((left, right), (right, left)):
                if self.inverse_count(factor):
                    self.value(other, state.but(scaling=(*state.scaling, node)))
                    return
            self.product(node, left, right, state)
        else:
            self.end(node, state, "unknown")  # type: ignore[arg-type]

    def added(self, left: cst.BaseExpression, right: cst.BaseExpression, state: _State) -> None:
        """``per_example + 0.1 * tf.reduce_mean(reg)``: a scalar (a per-replica mean, the summed
        ``model.losses``) added to a loss that still has one value per example is added to
        every example, and goes wherever they go: differentiated unreduced (the gradient of a
        tensor is that of its sum) or divided by the global batch, each replica adds it
        B_r / GB times and the replicas' shares add up to it once (measured, docs/losses.md).
        It is then a term of the batch's sum, as the per-example values are. (Under a
        ``reduce_sum`` or ``compute_average_loss`` the walk ends before it reaches the
        addition; under a ``reduce_mean`` the whole is a mean.)"""
        sides = []
        for operand in (left, right):
            start = len(self.terms)
            self.value(operand, state)
            sides.append(self.terms[start:])
            del self.terms[start:]
        for side, other in ((sides[0], sides[1]), (sides[1], sides[0])):
            rows = [t for t in other if self.per_example(t)]
            if rows and all(self.per_example(t) or t.kind == "constant" for t in other):
                detail = rows[0].detail
                side[:] = [
                    replace(t, kind="global", detail=detail, broadcast=True) if t.kind == "regularization" or t.kind == "mean" and t.detail is None else t
                    for t in side
                ]
        self.terms.extend(sides[0] + sides[1])

    def per_example(self, term: Term) -> bool:
        """Whether ``term`` is a loss with one value per example, not reduced over the batch: a
        per-example loss function's call, a loss object's with ``reduction="none"`` (or its
        ``call``), or a scalar already added to every example of one."""
        if term.broadcast:
            return True
        if term.kind != "global" or not isinstance(term.node, cst.Call):
            return False
        if term.detail == "none":
            return True
        names = tf_names(self.facts, term.node.func)
        return term.detail == "sum" and bool(names & PER_EXAMPLE or keras_loss_function(names))

    def product(self, node: cst.CSTNode, left: cst.BaseExpression, right: cst.BaseExpression, state: _State) -> None:
        """``weight * loss``: the weight's terms are not loss terms; a product of two losses is
        not a sum of terms at all."""
        sides = []
        for operand in (left, right):
            start = len(self.terms)
            self.value(operand, state)
            sides.append(self.terms[start:])
            del self.terms[start:]
        weights = [all(t.kind == "constant" or t.kind == "unknown" and not isinstance(t.node, cst.Call) for t in side) for side in sides]
        if weights[0] and not weights[1]:
            self.terms.extend(sides[1])
        elif weights[1] and not weights[0]:
            self.terms.extend(sides[0])
        elif weights[0] and weights[1]:
            self.terms.extend(sides[0] + sides[1])
        else:
            self.end(node, state, "unknown")  # type: ignore[arg-type]

    def exception(self, call: cst.Call) -> bool:
        """An exception object made (``return ValueError(...)``): no loss value comes from there."""
        return any(n.startswith("builtins.") and n.endswith(("Error", "Exception")) for n in self.program.qualified_names(call.func))

    def entry(self, node: cst.Dict, state: _State) -> None:
        """``{"total": loss, ...}`` read as ``[...]["total"]``: that entry's value."""
        found = [
            e.value for e in node.elements
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == state.item
        ]
        if len(found) != 1 or any(isinstance(e, cst.StarredDictElement) for e in node.elements):
            self.end(node, state, "unknown")
            return
        self.value(found[0], state.read())

    def call(self, call: cst.Call, state: _State) -> None:
        facts = self.facts
        if self.exception(call):
            return
        if state.item is not None:
            self.enter(call, state)  # an entry of what a function returns
            return
        names = tf_names(facts, call.func)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if isinstance(call.func, cst.Call) and GRAD_PASS_THROUGH in tf_names(facts, call.func.func):
            # ``tf.grad_pass_through(f)(x)``: the value is f(x), the gradient is x's.
            bypassed = self._scalings_in(call.func)
            for arg in positional[:1]:
                self.value(arg, state.but(bypassed=(*state.bypassed, *bypassed)))
            return
        if names & AGGREGATES and positional and self.regularization(_unwrapped(positional[0])):
            self.end(call, state, "regularization")
            return
        if names & PASS:
            for arg in positional[:1] if "tensorflow.cast" in names else positional:
                self.value(arg, state)
            return
        if names & (DIVIDE | MULTIPLY) and len(positional) == 2:
            operator = cst.Divide() if names & DIVIDE else cst.Multiply()
            self.operation(call, positional[0], operator, positional[1], state)
            return
        if names & MEANS:
            self.mean(call, state)
            return
        if names & GLOBAL:
            given = argument_value(call, "global_batch_size", 2)
            own = self.replica_batch(given) if given is not None else None
            if own is not None:
                # ``compute_average_loss(l, global_batch_size=BATCH / replicas)`` (or ``x.shape[0]``,
                # ``tf.shape(x)[0]``): the "global" batch is one replica's, so each replica
                # returns its own mean.
                self.end(call, state, "mean", own or None)
                return
            self.end(call, state, "global")
            self.reduced(call, positional, state)
            return
        if names & PER_EXAMPLE or keras_loss_function(names):
            self.end(call, state, "global", "sum")
            return
        if names & SUMS:
            if state.divided:
                self.end(call, state, "unknown", "normalized")
            else:
                self.end(call, state, "global", "sum")
            self.reduced(call, positional, state)
            return
        if names & CONSTANTS:
            self.end(call, state, "constant")
            return
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in PASS_METHODS and positional:
            self.value(positional[0], state)
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "call":
            if keras_own(facts, loss_objects(facts, func.value)):
                # ``loss_fn.call(y, p)``: Keras's own loss class, one loss per example.
                self.loss_call(call, state, "none")
                return
        constructions = loss_objects(facts, func)
        if constructions:
            self.loss_call(call, state, common_reduction(constructions))
            return
        cls = self.callables.instance_class(func)
        if cls is not None and self.is_loss_class(cls) and self.callables.method(cls, "__call__") is None:
            self.keras_loss_call(call, cls, state)
            return
        self.enter(call, state)

    def reduced(self, call: cst.Call, positional: list[cst.BaseExpression], state: _State) -> None:
        """What a sum or a global average reduces, walked for :attr:`under`."""
        if state.under is None and positional and len(self._seen) < 2500:
            self.value(positional[0], _State(under=call))

    def mean(self, call: cst.Call, state: _State) -> None:
        axis = argument_value(call, "axis", 1)
        if axis is not None and not (isinstance(axis, cst.Name) and axis.value == "None"):
            self.end(call, state, "mean", "axes")
            return
        averaged = argument_value(call, "input_tensor", 0)
        if averaged is not None and self.reduced_whole(averaged):
            # ``tf.reduce_mean(-tf.reduce_sum(y * log(p)))``: the mean of a scalar is that
            # scalar, so the term is what it averages (here a sum, which adds up over replicas).
            self.value(averaged, state)
            return
        inner = self.made_by(averaged) if averaged is not None else None
        constructions = loss_objects(self.facts, inner.func) if isinstance(inner, cst.Call) else []
        if constructions and common_reduction(constructions) == "default":
            # The mean of a default-reduction loss's scalar is that scalar.
            self.end(call, state, "loss", "default", inner)  # type: ignore[arg-type]
            return
        self.end(call, state, "mean", "call" if state.in_loss_call else None)

    def reduced_whole(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is a scalar made by a sum or mean over everything (no axis), signed
        or not."""
        while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            expr = expr.expression
        expr = self.made_by(expr)
        if not isinstance(expr, cst.Call) or not tf_names(self.facts, expr.func) & (SUMS | MEANS):
            return False
        axis = argument_value(expr, "axis", 1)
        return axis is None or isinstance(axis, cst.Name) and axis.value == "None"

    def keras_loss_call(self, call: cst.Call, cls: cst.ClassDef, state: _State) -> None:
        """An instance of a Keras ``Loss`` subclass that defines ``call``: Keras reduces what
        ``call`` returns with the object's reduction, and scales it, unless it is a scalar."""
        method = self.callables.method(cls, "call")
        start = len(self.terms)
        if method is not None and call not in (c for c, _ in state.calls) and len(state.calls) < _DEPTH:
            self.returns(method, call, Callee(method, bound=True), state.but(in_loss_call=True))
        inside = self.terms[start:]
        if inside and all(t.kind != "mean" for t in inside):
            # One value per example: the object's own reduction applies to it.
            del self.terms[start:]
            self.loss_call(call, state, construction_reduction(self.facts, self.callables, call.func))
        elif not inside:
            self.end(call, state, "unknown")

    def loss_call(self, call: cst.Call, state: _State, reduced: str) -> None:
        """A loss object's call: the default reduction is a finding's business; ``none`` and
        ``sum`` add up over the replicas; any other is not known."""
        if reduced == "default":
            self.end(call, state, "loss", reduced, call)
        else:
            self.end(call, state, "global" if reduced in ("none", "sum") else "unknown", reduced, call)

    def enter(self, call: cst.Call, state: _State) -> None:
        callees, complete = self.callables.of_call(call.func)
        entered = False
        for callee in callees:
            if call in (c for c, _ in state.calls) or len(state.calls) >= _DEPTH:
                break
            self.returns(callee.function, call, callee, state)
            entered = True
        if not entered and not callees and self.imported(call, state):
            return
        if not entered or not complete:
            self.end(call, state, "unknown")

    def imported(self, call: cst.Call, state: _State, position: int | None = None) -> bool:
        """A call of a function of another module of the project: the terms it returns (its
        element ``position`` when it returns a tuple unpacked here; see
        :func:`returned_terms`), each ending at the call here; a function there that returns
        one of its parameters as it is (``record(value, metric)``) is the argument passed
        here. The call of an instance attribute (``self.vq(z)``) every assignment of which in
        this class makes an instance of one Keras layer or model class of another module is
        what that class's ``call`` returns. False when it is none of those, or what it returns
        is not followed."""
        imports = ProjectImports.of(self.program)
        if not imports.active or state.in_loss_call:
            return False
        resolved = imports.resolve(call.func)
        definition = resolved.definition if resolved is not None else None
        if resolved is not None and resolved.path is not None and definition is not None and definition.kind == "function":
            passed = passed_through(resolved.path, definition.name)
            if passed is not None:
                arg = _argument(call, *passed)
                if arg is None:
                    return False
                if position is None:
                    self.value(arg, state)
                else:
                    self.element(arg, position, state)
                return True
            function = definition.name
            made = [(resolved.path, definition.name)]
        else:
            made = self.instance_of(call.func)
            if made is None:
                made = self.functions_passed(call.func)
            if made is None:
                return False
        if state.rest:
            return False  # an entry of an entry: not followed into the other module
        terms: list[RemoteTerm] = []
        for path, function in made:
            found = returned_terms(path, function, state.item, position, _passed_arguments(call))
            if not found:
                return False  # every class the attribute may hold, or none
            terms.extend(found)
        for remote in terms:
            scaled = state.but(scaling=(*state.scaling, call)) if remote.scaled else state
            self.end(call, scaled.but(item=None), remote.kind, remote.detail, remote=remote)
        return True

    def functions_passed(self, func: cst.BaseExpression) -> list[tuple[str, str]] | None:
        """``loss_fn(...)`` where ``loss_fn`` is a parameter of the function this code is in,
        and every call of that function in this file (directly, or by ``strategy.run(f,
        args=(...))``), through the parameters of the functions those calls are in, passes a
        function of another module of the project (``distributed_step(batch, compute_loss)``
        with ``from losses import compute_loss``): each such function's file and name. None
        when one of them passes anything else, or some call of a function on the way is not
        known (it is used otherwise than called, or it is a method)."""
        if not isinstance(func, cst.Name):
            return None
        found: set[tuple[str, str]] = set()
        if not self._passed_functions(func, found, 0) or not found:
            return None
        return sorted(found)

    def _passed_functions(self, expr: cst.BaseExpression, found: set[tuple[str, str]], depth: int) -> bool:
        if depth > _DEPTH or not isinstance(expr, cst.Name):
            return False
        imports = ProjectImports.of(self.program)
        resolved = imports.resolve(expr)
        if resolved is not None:
            definition = resolved.definition
            if resolved.path is None or definition is None or definition.kind != "function":
                return False
            found.add((resolved.path, definition.name))
            return True
        bindings = self.facts.bindings(expr)
        if not bindings or not all(isinstance(b, cst.Param) for b in bindings):
            return False
        for param in bindings:
            params = self.program.parent(param)
            function = self.program.parent(params) if params is not None else None
            if not isinstance(function, cst.FunctionDef) or function not in self.facts.functions:
                return False
            if self.facts.functions[function].is_method or param not in function.params.params:
                return False
            references = self.facts.references(function)
            if not references:
                # A top-level function only other modules call (``fit_one_epoch(net,
                # compute_loss, ...)`` in train.py): what their calls pass.
                if not self._passed_by_callers(function, param, found):
                    return False
                continue
            for ref in references:
                parent = self.program.parent(ref)
                if isinstance(parent, cst.Call) and parent.func is ref:
                    arg = parameter_argument(function, parent, param)
                    values = [arg.value] if arg is not None else [None]
                elif isinstance(parent, cst.Return) and parent.value is ref:
                    values = self._factory_call_arguments(function, ref, param) or [None]
                else:
                    values = [self.callables._run_argument(ref, function, param)]
                for value in values:
                    if value is None or not self._passed_functions(value, found, depth + 1):
                        return False
        return True

    def _factory_call_arguments(self, function: cst.FunctionDef, ref: cst.CSTNode, param: cst.Param) -> list[cst.BaseExpression | None] | None:
        """``return train_step`` in the factory that defines it (``get_train_step_fn``): what
        each call of the function the factory returns passes for ``param``, where every use of
        the factory in this file is ``name = factory(...)`` and every use of ``name`` a call of
        it (``train_step = get_train_step_fn(strategy)``, then ``train_step(x, y, loss_fn)``).
        None when a use is anything else, or nothing calls it."""
        factory = self.program.enclosing_function(ref)
        if factory is None or self.program.enclosing_function(function) is not factory or factory not in self.facts.functions:
            return None
        if self.facts.functions[factory].is_method:
            return None
        values: list[cst.BaseExpression | None] = []
        for use in self.facts.references(factory):
            call = self.program.parent(use)
            if not (isinstance(call, cst.Call) and call.func is use):
                return None
            name = self.facts.assigned_name(call)
            binding = self.program.assignment(name) if name is not None else None
            if binding is None or not binding.references:
                return None
            for access in binding.references:
                read = access.node
                made = self.program.parent(read)
                if not (isinstance(made, cst.Call) and made.func is read):
                    return None
                if any(b is not binding for b in access.referents):
                    return None
                arg = parameter_argument(function, made, param)
                values.append(arg.value if arg is not None else None)
        return values or None

    def _passed_by_callers(self, function: cst.FunctionDef, param: cst.Param, found: set[tuple[str, str]]) -> bool:
        """Every call of the top-level ``function`` (which nothing in this file uses) that the
        other modules of the project make passes, for ``param``, a function of the project: a
        top-level function of the caller's module, or one it imports. Each is added to
        ``found``; False when one passes anything else, or no module calls it."""
        path = self.program.path
        if path is None or not isinstance(self.program.parent(function), cst.Module):
            return False
        calls = callers(path, function.name.value)
        if not calls:
            return False
        for caller in calls:
            arg = parameter_argument(function, caller.call, param)  # type: ignore[arg-type]
            if arg is None or not isinstance(arg.value, cst.Name):
                return False
            passed = _function_named(caller.program, caller.path, arg.value)
            if passed is None:
                return False
            found.add(passed)
        return True

    def instance_of(self, func: cst.BaseExpression) -> list[tuple[str, str]] | None:
        """``self.vq`` called, where every assignment of ``self.vq`` in the class of this method
        is a call of a class of another module of the project that has a ``call`` method of
        its own (a Keras layer or model: calling the instance runs it): each such class's
        file and method (``VQ.call``)."""
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return None
        cls = next((a for a in self.program.ancestors(func) if isinstance(a, cst.ClassDef)), None)
        if cls is None:
            return None
        imports = ProjectImports.of(self.program)
        found: set[tuple[str, str]] = set()
        for assign in nodes_in(cls, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            for target in targets:
                if not _is_self_attribute(target, func.attr.value):
                    if any(_is_self_attribute(t, func.attr.value) for t in nodes_in(target, cst.Attribute)) and not isinstance(target, cst.Attribute):
                        return None  # unpacked into it
                    continue  # another attribute (``self.vq.trainable = ...`` does not rebind it)
                value = assign.value
                if not isinstance(value, cst.Call):
                    return None  # not an instance made here
                resolved = imports.resolve(value.func)
                if resolved is None or resolved.path is None or resolved.definition is None or resolved.definition.kind != "class":
                    return None
                found.add((resolved.path, resolved.definition.name))
        if not found or not all(_layer_call(path, name) for path, name in found):
            return None
        return [(path, f"{name}.call") for path, name in sorted(found)]

    def returns(self, function: cst.FunctionDef | cst.Lambda, call: cst.Call, callee: Callee, state: _State) -> None:
        inner = state.but(calls=(*state.calls, (call, callee)))
        if isinstance(function, cst.Lambda):
            self.value(function.body, inner)
            return
        info = self.facts.functions.get(function)
        values = [r.value for r in info.returns if r.value is not None] if info else []
        if not values:
            self.end(call, state, "unknown")
        for value in values:
            self.value(value, inner)

    def name(self, name: cst.Name, state: _State) -> None:
        bindings = self.reaching(name)
        if not bindings:
            self.end(name, state, "unknown")
        for binding in bindings:
            self.binding(binding, name, state)

    def binding(self, binding: Binding, read: cst.Name, state: _State) -> None:
        node = binding.node
        program = self.facts.program
        state = state.but(bindings=(*state.bindings, node))
        if binding.kind == "param":
            self.parameter(node, read, state)  # type: ignore[arg-type]
            return
        if binding.kind == "def" and isinstance(node, cst.FunctionDef):
            # A function given to minimize: its returns are the loss.
            for ret in self.facts.functions[node].returns if node in self.facts.functions else ():
                if ret.value is not None:
                    self.value(ret.value, state)
            return
        parent = program.parent(node)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            self.operation(parent, node, _augmented(parent.operator), parent.value, state)
            return
        if isinstance(parent, cst.AssignTarget):
            assign = program.parent(parent)
            if isinstance(assign, cst.Assign):
                self.value(assign.value, state)
                return
        if isinstance(parent, (cst.AnnAssign, cst.NamedExpr)) and parent.value is not None:
            self.value(parent.value, state)
            return
        if isinstance(parent, cst.Element):
            self.unpacked(parent, read, state)
            return
        self.end(read, state, "unknown")

    def unpacked(self, element: cst.Element, read: cst.Name, state: _State) -> None:
        """``loss, logits = helper(...)``: the element's share of the value."""
        program = self.facts.program
        holder = program.parent(element)
        target = program.parent(holder) if holder is not None else None
        assign = program.parent(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(holder, (cst.Tuple, cst.List)) or not isinstance(assign, cst.Assign):
            self.end(read, state, "unknown")
            return
        self.element(assign.value, list(holder.elements).index(element), state)

    def element(self, value: cst.BaseExpression, position: int, state: _State) -> None:
        if isinstance(value, cst.Call) and self.exception(value):
            return
        if isinstance(value, (cst.Tuple, cst.List)):
            if position < len(value.elements):
                self.value(value.elements[position].value, state)
            return
        if isinstance(value, cst.Call):
            callees, complete = self.callables.of_call(value.func)
            if callees and complete and value not in (c for c, _ in state.calls) and len(state.calls) < _DEPTH:
                for callee in callees:
                    inner = state.but(calls=(*state.calls, (value, callee)))
                    info = self.facts.functions.get(callee.function)  # type: ignore[arg-type]
                    for ret in info.returns if info else ():
                        if ret.value is not None:
                            self.element(ret.value, position, inner)
                return
            if not callees and self.imported(value, state, position):
                return
        if isinstance(value, cst.Name):
            for binding in self.reaching(value):
                assigned = self.facts.assigned_value(binding.node)
                if assigned is not None:
                    self.element(assigned, position, state)
            return
        self.end(value, state, "unknown")

    def parameter(self, param: cst.Param, read: cst.Name, state: _State) -> None:
        """A helper's parameter is the argument of the call it was entered through."""
        if state.calls:
            call, callee = state.calls[-1]
            if param in callee.function.params.params or param in callee.function.params.kwonly_params:
                arg = callee.argument(call, param)
                if arg is not None:
                    self.value(arg.value, state.but(calls=state.calls[:-1]))
                    return
        self.end(read, state, "unknown")

    # --- what values are -----------------------------------------------------------------------

    def made_by(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """``per_example`` -> what it was assigned, when exactly one assignment reaches it."""
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(expr) or []]
            if len(values) == 1 and values[0] is not None:
                return values[0]
        return expr

    def regularization(self, expr: cst.BaseExpression) -> bool:
        """``model.losses`` (a Keras model's or layer's regularization losses), not a
        ``losses`` attribute the file assigns itself."""
        expr = self.made_by(expr)
        if not (isinstance(expr, cst.Attribute) and expr.attr.value == "losses"):
            return False
        return "losses" not in self._assigned_attributes

    @property
    def _assigned_attributes(self) -> set[str]:
        if self._attributes is None:
            found: set[str] = set()
            for assign in self.facts.assigns:
                targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
                found |= {t.attr.value for t in targets if isinstance(t, cst.Attribute)}
            self._attributes = found
        return self._attributes

    def is_loss_class(self, cls: cst.ClassDef) -> bool:
        return any(keras_loss_class(n) for n in self.callables.bases(cls))

    def _scalings_in(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        return [
            operation
            for operation in nodes_in(node, cst.BinaryOperation)
            if isinstance(operation.operator, cst.Divide) and self.counts_replicas(operation.right)
        ]

    # --- names and what reaches a read -------------------------------------------------------

    def reaching(self, name: cst.Name) -> list[Binding]:
        """The bindings whose value a read of ``name`` may see: the latest one made earlier in
        a block that holds the read, and those after it (in branches and loops)."""
        access = self.program.access(name)
        if access is None:
            return []
        found: list[Binding] = []
        for binding in sorted(access.referents, key=lambda b: b.index, reverse=True):
            if binding.kind in ("import", "builtin", "class"):
                return []
            found.append(binding)
            if binding.scope is access.scope and self._dominates(binding, name):
                break
        return found

    def _dominates(self, binding: Binding, read: cst.Name) -> bool:
        if binding.kind in ("param", "def"):
            return True
        statement = self.program.statement_of(binding.node)
        if statement is None or isinstance(statement, (cst.For, cst.While)):
            return False
        block = self.program.block_of(statement)
        ancestors = set(map(id, self.program.ancestors(read)))
        while block is not None and id(block) not in ancestors:
            # The body of a ``with`` (or ``try``) always runs: what it binds is bound after it.
            owner = self.program.parent(block)
            if not isinstance(owner, (cst.With, cst.Try)) or owner.body is not block:
                return False
            block = self.program.block_of(owner)
        return block is not None

    def counts_replicas(self, expr: cst.BaseExpression) -> bool:
        return counts_replicas(self.facts, expr)

    def replica_batch(self, divisor: cst.BaseExpression) -> str | None:
        """Whether a sum divided by ``divisor`` is one replica's mean over its own examples,
        whatever the divisor is named, and its ``detail``: ``"share"``, one replica's share of
        the batch (``BATCH / replicas``); ``""``, the static size of the batch the replica is
        handed (``x.shape[0]``: a mean as ``tf.reduce_mean`` is; where the step is traced, each
        replica's tensors have their own static shape, and where it is not known the division
        fails at tracing rather than computing something else); ``"count"``, a count of the
        replica's own examples (``tf.shape(x)[0]``, ``num_fg``: see ``local_count``). None
        for any other divisor."""
        if replica_share(self.facts, divisor):
            return "share"
        if _static_batch_size(_unwrapped(divisor)):
            return ""
        # (A count of the replicas is not one of the replica's examples: see ``operation``.)
        if not self.counts_replicas(divisor) and self.local_count(divisor):
            return "count"
        return None

    def local_count(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``expr`` counts what this replica computes on (a replica's number of
        foreground anchors, of unmasked tokens, of examples): ``tf.shape(x)[0]``,
        ``tf.size(x)``, ``tf.reduce_sum(mask)``, ``tf.math.count_nonzero(x)``, or what a
        ``tf.while_loop`` accumulates from ``0`` (``_, num_fg, ... = tf.while_loop(...)``),
        through ``tf.cast``, ``tf.maximum(count, 1)``, ``count + eps`` and the local names
        they are assigned to (each assignment reaching the read so). A parameter, a global, a
        number, a shape read in Python (``x.shape[0]``, static: a batch size, see ``operation``),
        or anything else is not."""
        if depth > _DEPTH:
            return False
        expr = _unwrapped(expr)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            for count, other in ((expr.left, expr.right), (expr.right, expr.left)):
                if isinstance(other, (cst.Integer, cst.Float)):
                    return self.local_count(count, depth + 1)
            return False
        if isinstance(expr, cst.Subscript):
            inner = _unwrapped(expr.value)
            return isinstance(inner, cst.Call) and bool(tf_names(self.facts, inner.func) & _SHAPES)
        if isinstance(expr, cst.Call):
            names = tf_names(self.facts, expr.func)
            positional = [a.value for a in expr.args if a.keyword is None and not a.star]
            if names & _COUNTS:
                return bool(positional) and not isinstance(_unwrapped(positional[0]), (cst.Integer, cst.Float))
            if names & _CASTS and positional:
                return self.local_count(positional[0], depth + 1)
            if names & _BOUNDS and len(positional) == 2:
                for count, other in ((positional[0], positional[1]), (positional[1], positional[0])):
                    if isinstance(_unwrapped(other), (cst.Integer, cst.Float)):
                        return self.local_count(count, depth + 1)
            return False
        if isinstance(expr, cst.Name):
            bindings = self.reaching(expr)
            if not bindings:
                return False
            for binding in bindings:
                if binding.kind != "assign":
                    return False
                node = binding.node
                parent = self.program.parent(node)
                if isinstance(parent, cst.AssignTarget):
                    value = self.facts.assigned_value(node)
                    if value is None or not self.local_count(value, depth + 1):
                        return False
                elif isinstance(parent, cst.Element) and self._loop_accumulated(parent):
                    continue
                else:
                    return False
            return True
        return False

    def _loop_accumulated(self, element: cst.Element) -> bool:
        """``_, num_fg, ... = tf.while_loop(cond, body, [0, 0.0, ...])``: the element's loop
        variable starts at the number 0 (a count the loop accumulates over this replica's
        tensors)."""
        holder = self.program.parent(element)
        target = self.program.parent(holder) if holder is not None else None
        assign = self.program.parent(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(holder, (cst.Tuple, cst.List)) or not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Call):
            return False
        call = assign.value
        if "tensorflow.while_loop" not in tf_names(self.facts, call.func):
            return False
        loop_vars = argument_value(call, "loop_vars", 2)
        if not isinstance(loop_vars, (cst.List, cst.Tuple)):
            return False
        position = list(holder.elements).index(element)
        if position >= len(loop_vars.elements):
            return False
        start = _unwrapped(loop_vars.elements[position].value)
        if isinstance(start, cst.Name):
            values = [self.facts.assigned_value(b.node) for b in self.reaching(start)]
            start = values[0] if len(values) == 1 and values[0] is not None else start
        return isinstance(start, (cst.Integer, cst.Float)) and start.evaluated_value == 0

    def inverse_count(self, expr: cst.BaseExpression) -> bool:
        return inverse_count(self.facts, expr)


# What counts the elements of a tensor (``tf.shape(x)[0]``: the replica's batch), what bounds
# or casts a count, for ``LossWalk.local_count``.
_SHAPES = frozenset({"tensorflow.shape"})
_COUNTS = frozenset({"tensorflow.size", "tensorflow.reduce_sum", "tensorflow.math.reduce_sum", "tensorflow.math.count_nonzero", "tensorflow.count_nonzero"})
_CASTS = frozenset({"tensorflow.cast", "tensorflow.dtypes.cast", "tensorflow.stop_gradient", "keras.backend.cast", "tensorflow.keras.backend.cast"})
_BOUNDS = frozenset({"tensorflow.maximum", "tensorflow.math.maximum", "tensorflow.minimum", "tensorflow.math.minimum"})


def _string_item(node: cst.Subscript) -> str | None:
    """``x["total"]``: "total"."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    index = node.slice[0].slice.value
    if isinstance(index, cst.SimpleString):
        value = index.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``list(model.losses)`` -> ``model.losses``."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1:
        expr = expr.args[0].value
    return expr


def _augmented(operator: cst.BaseAugOp) -> object:
    return {
        cst.AddAssign: cst.Add(),
        cst.SubtractAssign: cst.Subtract(),
        cst.MultiplyAssign: cst.Multiply(),
        cst.DivideAssign: cst.Divide(),
    }.get(type(operator), operator)


def is_batch_sum(term: Term) -> bool:
    """Whether ``term`` is a sum over the batch (see ``global`` in the module docstring)."""
    return term.kind == "global" and term.detail in ("sum", "none")


# --- a loss function of another module of the project -----------------------------------------
#
# What a loss function of another module of the project returns, term by term.
#
# A step's loss is often computed by a function of a losses module (``from losses import
# compute_loss``). The walk of :mod:`.losses` asks :func:`returned_terms` what such a call
# returns: the module (resolved through :mod:`autofix.analysis.project`, which records the
# file as read, so the result cache keys the importer's answer by it) is parsed once per
# content, and each value its function returns is followed backwards as a step's loss is, in
# that module alone. A term is a :class:`RemoteTerm`: its kind as :class:`.losses.Term` says
# it, and its place in the other module (path, line and columns, whether an
# ``# autofix: ignore`` comment there covers it for a rule).
#
# Only a function defined at the module's top level (or the ``call`` of a top-level Keras layer or
# model class), reached with no call of its own on the way whose reduction is not known; a
# function that returns nothing autofix follows gives no terms (the caller's term stays
# unknown). The other module is read alone: what its function imports from a third module is
# not followed. The step reaches such a function through an imported name; through a parameter
# every call of whose function in this file (or ``strategy.run(f, args=...)``), parameter by
# parameter, passes one (``fit(ds, compute_loss)``); or through a ``self`` attribute every
# assignment of which in the class makes an instance of such a layer class (``self.vq =
# VQ(...)``; ``self.vq(z)["commitment"]``). A function of another module that returns one of
# its parameters as it is (``def record(value, metric): ...; return value``) is the argument
# its caller passes. Entries of entries (``step["VQ"]["commitment"]``) are read through dict
# literals of this file; into the other module, only one.

# Kinds a term of another module keeps; anything else is unknown to the caller.
_KINDS = ("mean", "global", "constant", "regularization")


@dataclass(frozen=True)
class RemoteTerm:
    """One term of what a function of another module returns."""

    kind: str
    detail: str | None
    # Divided by the replica count on its way to the return (there).
    scaled: bool
    path: str
    function: str
    line: int
    column: int
    end_line: int
    end_column: int
    # The other module, parsed, and the term's node in it (for its suppressions).
    program: Program = field(compare=False, repr=False)
    node: cst.CSTNode = field(compare=False, repr=False)

    def suppressed(self, code: str) -> bool:
        """Whether an ``# autofix: ignore`` comment in the other module covers the term."""
        return self.program.suppressed(self.node, code)


_TERMS: dict[tuple, tuple[RemoteTerm, ...] | None] = {}

# What a call passes: its positional count and keyword names (None: ``*args`` / ``**kwargs``).
Passed = tuple[int, frozenset[str]] | None


def _passed_arguments(call: cst.Call) -> Passed:
    positional = 0
    keywords: set[str] = set()
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            positional += 1
        else:
            keywords.add(arg.keyword.value)
    return positional, frozenset(keywords)


def _left_at_none(function: cst.FunctionDef, passed: Passed) -> guards.Known:
    """The parameters a call passing ``passed`` leaves at their default ``None``."""
    if passed is None:
        return {}
    positional, keywords = passed
    params = [*function.params.posonly_params, *function.params.params]
    known: guards.Known = {}
    for index, param in enumerate(params):
        if index < positional or param.name.value in keywords:
            continue
        if isinstance(param.default, cst.Name) and param.default.value == "None":
            known[param.name.value] = guards.NONE
    for param in function.params.kwonly_params:
        if param.name.value not in keywords and isinstance(param.default, cst.Name) and param.default.value == "None":
            known[param.name.value] = guards.NONE
    return known


class _RemoteWalk(LossWalk):
    """The walk of a function of another module, read alone: what its own parameters hold is
    known only to its caller (a weight of ``1 / replicas``, a divisor), so a term that
    depends on one is not judged here."""

    def __init__(self, steps: Steps) -> None:
        super().__init__(steps)
        self.parametric = False

    def parameter(self, param: cst.Param, read: cst.Name, state: _State) -> None:
        if not state.calls:
            self.parametric = True
        super().parameter(param, read, state)


def returned_terms(
    path: str, name: str, item: str | None = None, position: int | None = None, passed: Passed = None,
) -> tuple[RemoteTerm, ...] | None:
    """The terms of what the top-level function ``name`` of the project file ``path``
    returns (its element ``position`` when the caller unpacks a tuple, then its entry
    ``item`` when it is a dict read so), or None when it is not followed (not a function, no
    return autofix follows, or a term of unknown reduction). ``passed``: what the call passes
    (a return only under ``if weights is not None:`` is not reached by a call that leaves
    ``weights`` at its default ``None``; see :mod:`autofix.analysis.core.guards`)."""
    program = program_of(path)
    if program is None:
        return None
    key = (digest(program.source.encode("utf-8", errors="replace")), name, item, position, passed)
    if key not in _TERMS:
        _TERMS[key] = _terms(program, name, item, position, passed)
    found = _TERMS[key]
    return None if found is None else tuple(replace(t, path=path) for t in found)


def _terms(program: Program, name: str, item: str | None, position: int | None, passed: Passed = None) -> tuple[RemoteTerm, ...] | None:
    function = _top_level(program, name)
    if function is None:
        return None
    walk = _RemoteWalk(Steps.of(program))
    info = walk.facts.functions.get(function)
    known = _left_at_none(function, passed)
    values = [r.value for r in info.returns if r.value is not None and not guards.dead(program, r.value, known)] if info else []
    if not values:
        return None
    for value in values:
        if position is None:
            walk.value(value, _State(item=item))
        else:
            walk.element(value, position, _State(item=item))
    if walk.parametric:
        return None
    found = []
    for term in walk.terms:
        if term.kind not in _KINDS or term.bypassed:
            return None
        if any(not isinstance(d, (cst.Integer, cst.Float)) for d in term.divisors):
            return None  # divided by what the caller knows (a parameter, a global)
        where = program.position(term.node)
        found.append(
            RemoteTerm(
                term.kind,
                term.detail,
                bool(term.scaling),
                "",
                name,
                where.start.line,
                where.start.column + 1,
                where.end.line,
                where.end.column + 1,
                program,
                term.node,
            )
        )
    return tuple(found)


def _function_named(program: Program, path: str, name: cst.Name) -> tuple[str, str] | None:
    """The project function ``name`` (read in ``program``, the module ``path``) is: a top-level
    function defined there and bound nowhere else, or one it imports from the project, or the
    function such a function returns (:func:`_factory_made`)."""
    access = program.access(name)
    bindings = access.referents if access is not None else []
    if bindings and all(b.kind == "assign" for b in bindings):
        return _factory_made(program, path, bindings)
    return _plain_function(program, path, name)


def _plain_function(program: Program, path: str, name: cst.BaseExpression) -> tuple[str, str] | None:
    """A top-level function of ``program`` bound nowhere else, or a function it imports from
    the project (``name`` or ``module.name``)."""
    resolved = ProjectImports.of(program).resolve(name)
    if resolved is not None:
        definition = resolved.definition
        if resolved.path is None or definition is None or definition.kind != "function":
            return None
        return resolved.path, definition.name
    if not isinstance(name, cst.Name):
        return None
    access = program.access(name)
    bindings = access.referents if access is not None else []
    if len(bindings) != 1 or bindings[0].kind != "def" or not isinstance(bindings[0].node, cst.FunctionDef):
        return None
    if not isinstance(program.parent(bindings[0].node), cst.Module):
        return None
    return path, bindings[0].node.name.value


def _factory_made(program: Program, path: str, bindings: list[Binding]) -> tuple[str, str] | None:
    """``yolo_loss = get_yolo_loss(...)`` (every assignment of the name so): the function the
    project function ``get_yolo_loss`` returns, a function defined in it (``def yolo_loss``,
    every return of the factory returning it), named ``get_yolo_loss().yolo_loss``."""
    made: set[tuple[str, str]] = set()
    for binding in bindings:
        parent = program.parent(binding.node)
        assign = program.parent(parent) if isinstance(parent, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
            return None
        factory = _plain_function(program, path, assign.value.func)
        if factory is None or "." in factory[1]:
            return None
        returned = _returned_function(*factory)
        if returned is None:
            return None
        made.add((factory[0], f"{factory[1]}().{returned}"))
    return made.pop() if len(made) == 1 else None


def _returned_function(path: str, name: str) -> str | None:
    """The name of the function defined in the top-level function ``name`` of ``path`` that
    every return of it returns (a factory of a closure), or None."""
    program = program_of(path)
    factory = _top_level(program, name) if program is not None else None
    if factory is None or not isinstance(factory.body, cst.IndentedBlock):
        return None
    nested = {s.name.value for s in factory.body.body if isinstance(s, cst.FunctionDef)}
    returned = {
        r.value.value if isinstance(r.value, cst.Name) else None
        for r in nodes_in(factory.body, cst.Return)
        if program.enclosing_function(r) is factory  # type: ignore[union-attr]
    }
    if len(returned) != 1:
        return None
    (found,) = returned
    return found if found in nested else None


def _is_self_attribute(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self" and node.attr.value == name


def _top_level(program: Program, name: str) -> cst.FunctionDef | None:
    """The top-level function ``name`` of ``program``, or the method of a top-level class
    (``VQ.call``)."""
    owner, _, method = name.rpartition(".")
    body: object = program.module.body
    if owner.endswith("()"):
        factory = _top_level(program, owner[:-2])
        if factory is None or not isinstance(factory.body, cst.IndentedBlock):
            return None
        found = [s for s in factory.body.body if isinstance(s, cst.FunctionDef) and s.name.value == method]
        return found[0] if len(found) == 1 and not found[0].decorators else None
    if owner:
        cls = next((s for s in program.module.body if isinstance(s, cst.ClassDef) and s.name.value == owner), None)
        if cls is None or not isinstance(cls.body, cst.IndentedBlock):
            return None
        body = cls.body.body
    found = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == method]  # type: ignore[attr-defined]
    return found[0] if len(found) == 1 and not found[0].decorators else None


def _layer_call(path: str, name: str) -> bool:
    """Whether the top-level class ``name`` of ``path`` defines ``call`` and no ``__call__``
    of its own, and derives from a Keras layer or model (calling an instance runs ``call``)."""
    program = program_of(path)
    if program is None:
        return False
    cls = next((s for s in program.module.body if isinstance(s, cst.ClassDef) and s.name.value == name), None)
    if cls is None or _top_level(program, f"{name}.__call__") is not None or _top_level(program, f"{name}.call") is None:
        return False
    bases = set()
    for base in cls.bases:
        bases |= program.qualified_names(base.value)
    return any(b.startswith(("tensorflow.keras.", "keras.", "tf_keras.")) and b.rsplit(".", 1)[-1] in ("Layer", "Model") for b in bases)


_PASSED: dict[tuple[str, str], tuple[str, int | None] | None] = {}


def passed_through(path: str, name: str) -> tuple[str, int | None] | None:
    """The parameter that the top-level function ``name`` of ``path`` returns as it is, from
    every return, never assigning it (``def record(value, metric): ...; return value``): its
    name and position (None: keyword only). None otherwise."""
    program = program_of(path)
    if program is None:
        return None
    key = (digest(program.source.encode("utf-8", errors="replace")), name)
    if key not in _PASSED:
        _PASSED[key] = _passed(program, name)
    return _PASSED[key]


def _passed(program: Program, name: str) -> tuple[str, int | None] | None:
    function = _top_level(program, name)
    if function is None or "." in name:
        return None
    returns = nodes_in(function, cst.Return, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef))
    values = {r.value.value if isinstance(r.value, cst.Name) else None for r in returns}
    if len(values) != 1 or None in values or any(isinstance(n, (cst.Yield, cst.Await)) for n in nodes_in(function, (cst.Yield, cst.Await))):
        return None
    [returned] = values
    params = function.params
    if params.star_arg is not None and isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
        return None
    targets: list[cst.CSTNode] = [a.target for a in nodes_in(function, cst.AssignTarget)]
    targets += [a.target for a in nodes_in(function, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr))]
    targets += [w.asname.name for w in nodes_in(function, cst.WithItem) if w.asname is not None]
    targets += [n for g in nodes_in(function, (cst.Global, cst.Nonlocal)) for n in g.names]
    if any(isinstance(n, cst.Name) and n.value == returned for t in targets for n in nodes_in(t, (cst.Name, cst.NameItem))):
        return None
    if any(isinstance(n, cst.NameItem) and n.name.value == returned for t in targets for n in nodes_in(t, cst.NameItem)):
        return None
    positional = [*params.posonly_params, *params.params]
    for index, param in enumerate(positional):
        if param.name.value == returned:
            return returned, index
    if any(p.name.value == returned for p in params.kwonly_params):
        return returned, None
    return None


def _argument(call: cst.Call, name: str, position: int | None) -> cst.BaseExpression | None:
    """What ``call`` passes for the parameter ``name`` at ``position`` (None when it is not
    known: a star argument, or nothing passed)."""
    if any(a.star for a in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def _static_batch_size(expr: cst.BaseExpression) -> bool:
    """``x.shape[0]`` (``x`` a name or an attribute of one): a tensor's static batch size."""
    if not isinstance(expr, cst.Subscript):
        return False
    value = expr.value
    if not (isinstance(value, cst.Attribute) and value.attr.value == "shape" and len(expr.slice) == 1):
        return False
    index = expr.slice[0].slice
    target = value.value
    while isinstance(target, cst.Attribute):
        target = target.value
    return isinstance(target, cst.Name) and isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"
