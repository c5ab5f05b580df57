"""What a single-device step returns besides its loss and its metrics' results, and how the
replicas' values of it combine into the value the original returns at the global batch, for
``autofix migrate``.

Each replica runs the step on its equal share of the global batch (measured on 2 logical CPUs,
TensorFlow 2.21, Keras 3.15: docs/migrate.md):

- a **mean over the batch** (``tf.reduce_mean`` over everything, an accuracy computed as the
  mean of matches) is the mean of the replicas' means: ``strategy.reduce(MEAN, ...)``;
- a **sum or a count over the batch** (``tf.reduce_sum`` or ``tf.math.count_nonzero`` over
  everything of a tensor computed from the batch, ``tf.size`` of one, ``tf.shape(x)[0]``) is
  the replicas' sum: ``strategy.reduce(SUM, ...)``;

followed through names bound once in the step, ``tf.cast`` and the like, a sign, sums and
differences of values of one kind, and (a mean only) products with, quotients by, and sums with
a number. What is reduced must be computed from the batch example by example (reductions over
an example's own axes, ``x[:, 0]``, a model's output): each replica's share of it is then its
share of the global batch's. Anything else is refused with the reason at its line: a maximum or
a minimum (no ``ReduceOp`` combines them), a reduction over given axes or a value not reduced
over the batch (one per example or per feature), a sum divided by something (the batch it means
is per replica after the migration), what is not computed from the batch (every replica would
add a sum of it once more), what is computed across the batch's examples (a reduction over it
inside, ``x - tf.reduce_mean(x)``; examples picked: ``x[:5]``, ``tf.boolean_mask``: each
replica has only its share of them), and a Keras loss object's call that the step does not
differentiate (inside a replica Keras 3 divides it by the replica count, tf_keras refuses it).

An uneven last batch makes a mean differ a little from the original's, as it does for ``fit``'s
logs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.callees import Callables, tf_names
from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.step_logs import LOGS, METRIC
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports, program_of
from autofix.analysis.steps.lossobjects import loss_objects
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.tf.losses import MEANS, SUMS

MEAN, SUM = "mean", "sum"
# What a step returns that is one row per example of its batch (a model's output): the
# replicas' rows are gathered into the global batch's.
ROWS = "rows"
# A dict whose values each combine by their own kind.
DICT = "dict"
# A number: kept by a mean's arithmetic, not a value to combine.
_NUMBER = "number"

# Calls whose value is their first argument's, as far as combining it goes.
_SAME = frozenset({"tensorflow.cast", "tensorflow.identity", "tensorflow.convert_to_tensor", "tensorflow.stop_gradient"})
_COUNTS = frozenset({"tensorflow.math.count_nonzero", "tensorflow.count_nonzero"})
_SIZES = frozenset({"tensorflow.size"})
_SHAPES = frozenset({"tensorflow.shape"})
_RESHAPES = frozenset({"tensorflow.reshape"})


def _minus_one(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer) and node.expression.evaluated_value == 1
    )
_EXTREMES = frozenset(
    {
        "tensorflow.reduce_max",
        "tensorflow.math.reduce_max",
        "tensorflow.reduce_min",
        "tensorflow.math.reduce_min",
        "tensorflow.reduce_prod",
        "tensorflow.math.reduce_prod",
        "keras.ops.max",
        "keras.ops.min",
    }
)
# Calls that pick some of a tensor's rows.
_PICKS = frozenset(
    {
        "tensorflow.gather",
        "tensorflow.gather_nd",
        "tensorflow.boolean_mask",
        "tensorflow.unique",
        "tensorflow.slice",
        "tensorflow.strided_slice",
        "tensorflow.math.top_k",
    }
)
_DEPTH = 12
# Where the calls ``_call`` knows come from: anything else may be a function of the file or
# of the project, followed by ``_returned``.
_LIBRARIES = frozenset({"tensorflow", "keras", "tf_keras", "numpy", "builtins"})


def _has_zero(axis: cst.BaseExpression) -> bool:
    """Whether an ``axis=`` argument names the first axis (0), or cannot be read."""
    items = [e.value for e in axis.elements] if isinstance(axis, (cst.List, cst.Tuple)) else [axis]
    for item in items:
        if isinstance(item, cst.UnaryOperation) and isinstance(item.operator, cst.Minus) and isinstance(item.expression, cst.Integer):
            continue  # counted from the last axis: one of an example's own (what a per-example value is reduced over)
        if not isinstance(item, cst.Integer) or item.evaluated_value == 0:
            return True
    return False


@dataclass(frozen=True)
class Declined:
    """Why a returned value cannot be combined over the replicas, at the node that shows it."""

    node: cst.CSTNode
    why: str


class Combining:
    """How the values a step returns combine over the replicas (see the module docstring).

    ``batch`` binds the step's batch (its parameters the loop passes); ``known`` gives the kind the caller already knows for an expression (the differentiated
    loss or a term of it, a metric's result, a model's rows), or None."""

    def __init__(
        self,
        program: Program,
        step: cst.FunctionDef | None,
        batch: list[cst.CSTNode],
        known: Callable[[cst.BaseExpression], str | None],
        inside: Callable[[cst.CSTNode], bool] | None = None,
        known_in: Callable[[cst.FunctionDef], Callable[[cst.BaseExpression], str | None]] | None = None,
    ) -> None:
        self.program = program
        self.facts = Facts.of(program)
        self.step = step
        # What binds the batch: the parameters the loop passes it in (a method's without
        # ``self``), or the targets of the loop around a step written inline.
        self.batch = batch
        self.known = known
        # Whether a binding is the step's own (a step written inline: one of its statements).
        self.inside = inside or (lambda binding: program.enclosing_function(binding) is step)
        # The ``known`` of another function of the file: what a helper the step calls returns
        # (``d_loss, d_acc = self.train_d(x, y)``) is read there (None: not followed).
        self.known_in = known_in

    def kind(self, value: cst.BaseExpression) -> str | Declined:
        """``MEAN``, ``SUM``, a kind ``known`` gave, or why it is neither."""
        found = self._kind(value, 0)
        if found == _NUMBER:
            return Declined(value, "a number the step does not compute from its batch (every replica returns it)")
        return found

    def _kind(self, value: cst.BaseExpression, depth: int) -> str | Declined:
        if depth > _DEPTH:
            return Declined(value, "it is computed through too many steps to follow")
        if isinstance(value, cst.Dict):
            return Declined(value, "it is a dict that is filled or read after it is made, or held in another value: what it holds when returned is not known")
        known = self.known(value)
        if known == LOGS:
            return Declined(value, "it is a dict of values")
        if known is not None:
            return known
        if isinstance(value, (cst.Integer, cst.Float)):
            return _NUMBER
        if isinstance(value, cst.Name):
            unpacked = self._unpacked(value)
            if unpacked is not None:
                call, position = unpacked
                return self._returned(call, position, depth)
            made = self._made_in_step(value)
            if isinstance(made, Declined):
                return made
            return self._kind(made, depth + 1)
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
            return self._kind(value.expression, depth + 1)
        if isinstance(value, cst.BinaryOperation):
            return self._operation(value, depth)
        if isinstance(value, cst.Subscript):
            return self._batch_count(value)
        if isinstance(value, cst.Call):
            return self._call(value, depth)
        return Declined(value, "it is not reduced over the batch (a value per example, or one the step does not reduce)")

    def _unpacked(self, name: cst.Name) -> tuple[cst.Call, int] | None:
        """``(call, i)`` when the one binding of ``name`` in the step is the ``i``-th target of
        a tuple unpacked from a call (``d_loss, d_acc = self.train_d(img, label)``)."""
        bindings = self.facts.reaching_bindings(name) or []
        if len(bindings) != 1 or not self.inside(bindings[0]):
            return None
        element = self.program.parent(bindings[0])
        targets = self.program.parent(element) if isinstance(element, cst.Element) else None
        target = self.program.parent(targets) if isinstance(targets, (cst.Tuple, cst.List)) else None
        assign = self.program.parent(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
            return None
        if any(isinstance(e, cst.StarredElement) for e in targets.elements):  # type: ignore[union-attr]
            return None
        return assign.value, list(targets.elements).index(element)  # type: ignore[union-attr]

    def _returned(self, call: cst.Call, position: int | None, depth: int) -> str | Declined:
        """The kind of what a call of a function of this file returns (its element
        ``position`` when the step unpacks a tuple): followed into that function, the
        parameters the call passes the batch in (or values computed from it) standing for the
        batch there. A function of another module of the project is named, not followed."""
        shown = self.program.module.code_for_node(call.func)
        callees, complete = Callables.of(self.program).of_call(call.func)
        functions = [c for c in callees if isinstance(c.function, cst.FunctionDef)]
        if self.known_in is None or not complete or len(functions) != 1 or len(callees) != 1:
            return self._elsewhere(call, position)
        callee = functions[0]
        function: cst.FunctionDef = callee.function  # type: ignore[assignment]
        info = self.facts.functions.get(function)
        returns = [r.value for r in info.returns] if info is not None else []
        if not returns or any(r is None for r in returns):
            return Declined(call, f"{shown}() (line {self.program.line(function)}) returns nothing on some path")
        elements = []
        for value in returns:
            if position is None:
                elements.append(value)
                continue
            if not isinstance(value, cst.Tuple) or any(isinstance(e, cst.StarredElement) for e in value.elements) or position >= len(value.elements):
                return Declined(value, f"{shown}() does not return a tuple of which the step's line {self.program.line(call)} unpacks element {position + 1}")
            elements.append(value.elements[position].value)
        batch: list[cst.CSTNode] = []
        params = list(function.params.params)
        for param in params:
            argument = callee.argument(call, param)
            if argument is not None and self._from_batch(argument.value):
                batch.append(param)
        inner = Combining(self.program, function, batch, self.known_in(function), known_in=self.known_in)
        kinds = set()
        for element in elements:
            kind = inner._kind(element, depth + 1)
            if isinstance(kind, Declined):
                return kind
            kinds.add(kind)
        if len(kinds) != 1:
            return Declined(call, f"{shown}() returns values of different kinds on different paths (line {self.program.line(function)})")
        return kinds.pop()

    def _elsewhere(self, call: cst.Call, position: int | None) -> Declined:
        """Why what a call returns is not followed: a function of another module of the
        project is named with its file and line (and a module-level state it keeps, which
        every replica would share)."""
        imports = ProjectImports.of(self.program)
        resolved = imports.resolve(call.func)
        shown = self.program.module.code_for_node(call.func)
        what = f"element {position + 1} of what {shown}() returns" if position is not None else f"what {shown}() returns"
        if resolved is None or resolved.path is None or resolved.name is None:
            return Declined(call, f"{what} is not known: it is not one function of this file autofix can follow")
        where = resolved.where(imports.path)
        state = _module_state(resolved.path, resolved.name)
        if state is not None:
            names, line = state
            return Declined(call, (
                f"{what}: {resolved.name}() ({where}) keeps state in the module global {', '.join(names)} "
                f"({resolved.where(imports.path, line)}): run on every replica at once, the replicas would share that one "
                "object instead of each having its own; compute the value in the step (a mean over its batch), then migrate"
            ))
        return Declined(call, f"{what}: {resolved.name}() is defined in {where}, and autofix does not follow what it returns into another module")

    def _made_in_step(self, name: cst.Name) -> cst.BaseExpression | Declined:
        bindings = self.facts.reaching_bindings(name) or []
        if len(bindings) != 1 or not self.inside(bindings[0]):
            return Declined(name, f"{name.value} is not bound once in the step: what it holds there is not known")
        made = self.facts.assigned_value(bindings[0])
        if made is None:
            return Declined(name, f"{name.value} is not bound by an assignment of its own: what it holds is not known")
        return made

    def _operation(self, node: cst.BinaryOperation, depth: int) -> str | Declined:
        left, right = self._kind(node.left, depth + 1), self._kind(node.right, depth + 1)
        for side in (left, right):
            if isinstance(side, Declined):
                return side
        # A metric's result is averaged over the replicas as a mean over the batch is.
        left, right = (MEAN if side == METRIC else side for side in (left, right))
        kinds = {left, right}
        if kinds & {ROWS, LOGS}:
            return Declined(node, "it is computed from a value per example or a dict of values")
        if isinstance(node.operator, (cst.Add, cst.Subtract)):
            if len(kinds) == 1:
                return left
            if kinds == {MEAN, _NUMBER}:
                return MEAN
        elif isinstance(node.operator, (cst.Multiply, cst.Divide)):
            if kinds == {_NUMBER}:
                return _NUMBER
            if kinds == {MEAN, _NUMBER} and not (isinstance(node.operator, cst.Divide) and left == _NUMBER):
                return MEAN
            if SUM in kinds:
                return Declined(node, (
                    "it is a sum over the batch multiplied or divided (a mean when it is divided by the batch, "
                    "which is each replica's after the migration)"
                ))
        return Declined(node, "it combines values that are not all means, or not all sums, over the batch")

    def _call(self, call: cst.Call, depth: int) -> str | Declined:
        names = tf_names(self.facts, call.func)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if names & _SAME and positional:
            return self._kind(positional[0], depth + 1)
        if names & _EXTREMES:
            return Declined(call, "it is a maximum, minimum or product over the batch, which strategy.reduce cannot combine (only sums and means)")
        if names & (MEANS | SUMS | _COUNTS):
            axis = argument_value(call, "axis", 1)
            if axis is not None and not (isinstance(axis, cst.Name) and axis.value == "None"):
                return Declined(call, "it is reduced over given axes: a value per example or per feature, not one over the batch")
            reduced = argument_value(call, "input_tensor", 0) or argument_value(call, "input", 0) or argument_value(call, "x", 0)
            if reduced is None:
                return Declined(call, "what it reduces is not known")
            inner = self._kind(reduced, depth + 1)
            if isinstance(inner, str) and inner not in (ROWS, _NUMBER) and not names & _COUNTS:
                return inner  # a scalar already (a mean, a sum, the loss...): its mean or sum is itself
            if not self._from_batch(reduced):
                return Declined(call, (
                    "it reduces what the step does not compute from its batch"
                    + (": every replica would add it once more" if not names & MEANS else "")
                ))
            return self._mixes_rows(reduced) or (MEAN if names & MEANS else SUM)
        if names & _RESHAPES and positional and self._from_batch(positional[0]):
            if self._reshaped_rows(call, positional):
                return ROWS
            return Declined(call, (
                "it is the batch reshaped otherwise than to one row per example (tf.reshape(batch, [-1, ...])): "
                "the replicas' rows gathered would not be the global batch's"
            ))
        if names & _SIZES and positional:
            if not self._from_batch(positional[0]):
                return Declined(call, "it counts what the step does not compute from its batch")
            return self._mixes_rows(positional[0]) or SUM
        if not any(n.split(".", 1)[0] in _LIBRARIES for n in names):
            callees, _complete = Callables.of(self.program).of_call(call.func)
            if callees or ProjectImports.of(self.program).resolve(call.func) is not None:
                return self._returned(call, None, depth)
        if loss_objects(self.facts, call.func):
            return Declined(call, (
                "it is a Keras loss object's value that the step does not differentiate: inside a replica Keras 3 divides it "
                "by the replica count and tf_keras refuses it; compute it with reduction=\"none\" and tf.reduce_mean, then migrate"
            ))
        python = self._python_number(call)
        if python is not None:
            return Declined(call, (
                f"{python} makes it a Python number inside the step: run per replica in a tf.function it has no value "
                "there (a symbolic tensor), and the replicas' numbers could not be combined; return the tensor and "
                "convert it where the loop reads it, then migrate"
            ))
        return Declined(call, "it is not a mean, a sum or a count over the batch")

    def _python_number(self, call: cst.Call) -> str | None:
        """``float(x)``, ``int(x)`` (the builtins, not rebound), ``x.numpy()``, ``x.item()``:
        how the call turns a tensor into a Python value; None for any other call."""
        func = call.func
        builtin = self.program.qualified_names(func) & {"builtins.float", "builtins.int"}
        if builtin and len(call.args) == 1:
            return f"{min(builtin).removeprefix('builtins.')}()"
        if isinstance(func, cst.Attribute) and func.attr.value in ("numpy", "item") and not call.args:
            return f".{func.attr.value}()"
        return None

    def _reshaped_rows(self, call: cst.Call, positional: list[cst.BaseExpression]) -> bool:
        """``tf.reshape(x, [-1, d, ...])`` of the batch itself, the other sizes not computed
        from it: rows of the batch's examples in order. A replica's rows are its examples'
        (where its reshape runs, its examples' values are a whole number of rows), so the
        replicas' rows, gathered in order, are the global batch's rows: row-major order does
        not change across the cut between replicas' examples."""
        if not positional or not isinstance(positional[0], cst.Name):
            return False
        bindings = self.facts.reaching_bindings(positional[0]) or []
        if not bindings or any(id(b) not in {id(p) for p in self.batch} for b in bindings):
            return False
        shape = argument_value(call, "shape", 1)
        if not isinstance(shape, (cst.List, cst.Tuple)) or len(shape.elements) < 2:
            return False
        first, *rest = [e.value for e in shape.elements if isinstance(e, cst.Element)]
        if len(rest) + 1 != len(shape.elements) or not _minus_one(first):
            return False
        return not any(_minus_one(e) or self._from_batch(e) for e in rest)

    def _batch_count(self, subscript: cst.Subscript) -> str | Declined:
        """``tf.shape(x)[0]`` of a tensor computed from the batch: how many examples it holds."""
        value = subscript.value
        elements = subscript.slice
        if (
            isinstance(value, cst.Call)
            and tf_names(self.facts, value.func) & _SHAPES
            and value.args
            and len(elements) == 1
            and isinstance(elements[0].slice, cst.Index)
            and isinstance(elements[0].slice.value, cst.Integer)
            and elements[0].slice.value.evaluated_value == 0
            and self._from_batch(value.args[0].value)
        ):
            return self._mixes_rows(value.args[0].value) or SUM
        return Declined(subscript, "it is an item of a value, not reduced over the batch")

    def _mixes_rows(self, expr: cst.BaseExpression) -> Declined | None:
        """Where ``expr`` (followed through names bound in the step) is computed from values
        across its examples, not example by example: a reduction over everything or over the
        batch axis (``axis=0``), the batch's rows picked (``x[:5]``, ``tf.gather``,
        ``tf.boolean_mask``). Each replica has only its share of them: its mean over a masked
        share, or of values centred on its own mean, is not its share of the global one."""
        seen: set[int] = set()
        todo = [expr]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for call in nodes_in(node, cst.Call):
                names = tf_names(self.facts, call.func)
                if names & _PICKS:
                    return Declined(call, "it is computed from some of the batch's examples, picked (each replica picks from its share)")
                if names & (MEANS | SUMS | _COUNTS | _EXTREMES):
                    axis = argument_value(call, "axis", 1)
                    if axis is None or isinstance(axis, cst.Name) and axis.value == "None" or _has_zero(axis):
                        return Declined(call, "it is computed from a reduction over the batch (each replica reduces its share only)")
            for subscript in nodes_in(node, cst.Subscript):
                first = subscript.slice[0].slice if subscript.slice else None
                whole = isinstance(first, cst.Slice) and first.lower is None and first.upper is None and first.step is None
                if not whole and not (isinstance(first, cst.Index) and isinstance(first.value, (cst.Ellipsis, cst.SimpleString))):
                    return Declined(subscript, "it is computed from some of the batch's examples, picked (each replica picks from its share)")
            for name in nodes_in(node, cst.Name):
                for binding in self.facts.reaching_bindings(name) or []:
                    if self.inside(binding):
                        made = self.facts.assigned_value(binding)
                        if made is not None:
                            todo.append(made)
        return None

    def _from_batch(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is computed from the step's parameters (the batch), through names
        bound in the step."""
        params = {id(p) for p in self.batch}
        seen: set[int] = set()
        todo = [expr]
        while todo:
            node = todo.pop()
            for name in [node] if isinstance(node, cst.Name) else nodes_in(node, cst.Name):
                for binding in self.facts.reaching_bindings(name) or []:
                    if id(binding) in seen:
                        continue
                    seen.add(id(binding))
                    if id(binding) in params:
                        return True
                    if not self.inside(binding):
                        continue
                    made = self.facts.assigned_value(binding)
                    if made is not None:
                        todo.append(made)
        return False


def _module_state(path: str, name: str) -> tuple[list[str], int] | None:
    """The module globals the top-level function ``name`` of the project file ``path``
    declares ``global`` (and the line of that statement), or None."""
    program = program_of(path)
    if program is None:
        return None
    function = next((s for s in program.module.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)
    if function is None:
        return None
    for node in nodes_in(function, cst.Global):
        return [n.name.value for n in node.names], program.line(node)
    return None
