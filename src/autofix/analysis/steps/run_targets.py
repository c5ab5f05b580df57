"""What ``strategy.run`` is handed, and where it is called: the value flow of its first argument
and of what its ``args`` hand that function, for the shapes that cannot be a per-replica step.

``strategy.run(fn, args=...)`` calls ``fn`` once per replica, from cross-replica context.
Measured on TF 2.21 with 2 logical CPUs (Keras 3.15 and tf_keras 2.21;
``tests/data/run_given_forms.py``, docs/losses.md):

- handed what calling the step returns (``strategy.run(train_step(x))``, with or without
  ``args=``): the step runs once, eagerly or while tracing, on one device and on the whole
  batch, then ``strategy.run`` raises ``TypeError: 'EagerTensor' object is not callable``
  (``'NoneType'`` for a step that returns nothing; ``'SymbolicTensor'`` in a ``tf.function``);
- handed the gradients themselves (``grads = tape.gradient(...)``, ``strategy.run(grads)``):
  ``TypeError: 'list' object is not callable``;
- handed ``optimizer.apply_gradients`` with ``args=(zip(grads, variables),)``: the one zip
  object goes to every replica; the first uses it up and the next gets nothing
  (``ValueError: not enough values to unpack (expected 2, got 0)``);
- called inside a Keras model's ``train_step`` / ``test_step`` / ``predict_step``, which
  ``fit`` / ``evaluate`` / ``predict`` already run on every replica: ``RuntimeError: Method
  requires being in cross-replica context, use get_replica_context().merge_call()``, raised by
  ``strategy.run`` itself (``self.distribute_strategy.run`` too).

Each is answered only where the code shows it: a step is a function of this file that takes or
applies gradients and returns no function (no lambda, no local function, no ``tf.function`` or
``functools.partial`` value, no parameter); a name handed to ``strategy.run`` is judged by
every value that reaches it; a Keras step by a class of this file whose objects are made in
the scope of a strategy with several replicas, and that no code of the file calls by its name
(a custom loop calling ``model.train_step(batch)`` runs it in cross-replica context, where
``strategy.run`` is right).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.steps.custom import Steps, tf_names
from autofix.analysis.syntax import argument_value
from autofix.tf.symbols import SINGLE_REPLICA

# The methods Keras's own loops run on every replica.
KERAS_STEP_METHODS = ("train_step", "test_step", "predict_step")
# Keras's loop that runs each of them.
KERAS_LOOPS = {"train_step": "fit", "test_step": "evaluate", "predict_step": "predict"}
# Calls whose value is a function.
_MAKES_FUNCTIONS = frozenset({"tensorflow.function", "functools.partial", "tensorflow.py_function"})


@dataclass(frozen=True)
class Handed:
    """What a ``strategy.run`` call is given instead of a per-replica function.

    ``kind``: ``"result"`` (what calling ``step`` returns: ``call`` is that call, in the
    ``strategy.run`` line itself or where the name handed to it is bound), ``"gradients"``
    (what ``tape.gradient`` returns: ``call`` is that call), or ``"zip"`` (a
    ``zip`` of gradients and variables handed to ``apply_gradients`` through ``args``:
    ``call`` is the ``zip``)."""

    kind: str
    call: cst.Call
    step: cst.FunctionDef | None = None


class RunTargets(Derived):
    def __init__(self, program) -> None:
        super().__init__(program)
        self.steps = Steps.of(program)
        self.facts = self.steps.facts
        self.callables = self.steps.callables

    # --- handed something that is not a per-replica function ------------------------------------

    def handed(self, run: cst.Call) -> Handed | None:
        """What ``run`` (a ``strategy.run`` call) is given that cannot run per replica, if the
        code shows it."""
        target = self.steps.run_target(run)
        if target is None:
            return None
        if isinstance(target, cst.Call):
            if self.steps.differentiated(target) is not None:
                return Handed("gradients", target)
            step = self.step_result(target)
            return Handed("result", target, step) if step is not None else None
        if isinstance(target, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.reaching_bindings(target) or ()]
            if not values or not all(isinstance(v, cst.Call) for v in values):
                return None
            if all(self.steps.differentiated(v) is not None for v in values):  # type: ignore[arg-type]
                return Handed("gradients", values[0])  # type: ignore[arg-type]
            if all(self.step_result(v) is not None for v in values):  # type: ignore[arg-type]
                first = values[0]
                return Handed("result", first, self.step_result(first))  # type: ignore[arg-type]
            return None
        if isinstance(target, cst.Attribute) and target.attr.value == "apply_gradients":
            zipped = self._zip_argument(run)
            return Handed("zip", zipped) if zipped is not None else None
        return None

    def step_result(self, call: cst.Call) -> cst.FunctionDef | None:
        """The training step of this file ``call`` calls, when what it returns is no function
        (so the call's value cannot be a per-replica function)."""
        step = self.steps.definition(call.func)
        if step is None or step not in self.facts.functions or not self.steps.trains(step):
            return None
        for ret in self.facts.functions[step].returns:
            if ret.value is not None and self._may_be_a_function(ret.value):
                return None
        return step

    def _may_be_a_function(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Lambda):
            return True
        if self.callables.of_call(value)[0]:
            return True  # a local function or method, or what a factory returns
        if isinstance(value, cst.Call) and tf_names(self.facts, value.func) & _MAKES_FUNCTIONS:
            return True
        if isinstance(value, cst.Call) and self.facts.names_of(value.func) & _MAKES_FUNCTIONS:
            return True
        if isinstance(value, cst.Name):
            bindings = self.facts.reaching_bindings(value) or []
            if not bindings or any(isinstance(b, (cst.Param, cst.FunctionDef, cst.ClassDef)) for b in bindings):
                return True
            return any(
                (v := self.facts.assigned_value(b)) is not None and self._may_be_a_function(v)
                for b in bindings
            )
        return False

    def _zip_argument(self, run: cst.Call) -> cst.Call | None:
        """The ``zip(...)`` call that ``strategy.run(optimizer.apply_gradients, args=(z,))``
        hands every replica (``z`` itself, or a name bound only to it)."""
        args = argument_value(run, "args", 1)
        if not isinstance(args, (cst.Tuple, cst.List)) or not args.elements:
            return None
        first = args.elements[0].value
        values = [first]
        if isinstance(first, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.reaching_bindings(first) or ()]  # type: ignore[misc]
        if values and all(isinstance(v, cst.Call) and "builtins.zip" in self.facts.names_of(v.func) for v in values):
            return values[0]  # type: ignore[return-value]
        return None

    # --- called where Keras already runs every replica --------------------------------------------

    def in_keras_step(self, run: cst.Call) -> cst.FunctionDef | None:
        """The ``train_step`` / ``test_step`` / ``predict_step`` of a Keras model class of this
        file, made in the scope of a strategy with several replicas, that runs ``run`` (in
        its body or in a local function it calls)."""
        function = self.program.enclosing_function(run)
        if function is None:
            return None
        for step in self._keras_steps:
            if function in self.steps.reached(step):
                return step
        return None

    @cached_property
    def _keras_steps(self) -> list[cst.FunctionDef]:
        found: list[cst.FunctionDef] = []
        for cls in self.facts.keras_classes:
            if not self._made_under_replicas(cls):
                continue
            for method in KERAS_STEP_METHODS:
                step = self._own_method(cls, method)
                if step is not None and step not in found and not self._called_by_name(method):
                    found.append(step)
        return found

    def _called_by_name(self, method: str) -> bool:
        """Whether code of this file calls a method named ``method`` itself (``model.train_step(batch)``
        in a custom loop, from cross-replica context): then it is not only Keras's loop that
        runs it."""
        return any(
            isinstance(call.func, cst.Attribute) and call.func.attr.value == method for call, _owner in self.facts.calls
        )

    def _made_under_replicas(self, cls: cst.ClassDef) -> bool:
        """Whether an object of ``cls`` (or of a subclass of this file) is made in the scope of
        a strategy with several replicas."""
        classes = [cls] + [c for c in self.facts.keras_classes if cls in self._bases(c)]
        for each in classes:
            for ref in self.facts.references(each):
                call = self.program.parent(ref)
                if not (isinstance(call, cst.Call) and call.func is ref) or not self.facts.under_scope(call):
                    continue
                scope = self.facts.scope_classes_at(call)
                if scope and not scope <= SINGLE_REPLICA:
                    return True
        return False

    def _bases(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        found: list[cst.ClassDef] = []
        pending = [cls]
        while pending:
            current = pending.pop()
            for base in current.bases:
                local = self.facts.local_definition(base.value)
                if isinstance(local, cst.ClassDef) and local not in found:
                    found.append(local)
                    pending.append(local)
        return found

    def _own_method(self, cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
        """The method ``name`` that ``cls`` defines or inherits from a class of this file."""
        for each in [cls, *self._bases(cls)]:
            body = each.body.body if isinstance(each.body, cst.IndentedBlock) else ()
            for statement in body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return statement
        return None
