"""Another module of the project that a migration must edit too (a fix that spans files).

A model class of another module with its own ``train_step`` whose loss is a sum of means over
each replica's batch (``tf.reduce_mean``) trains at N x on N replicas: the loss its tape
differentiates must be divided by the replica count. The migration does that *in that module*
with ``tf.distribute.get_strategy().num_replicas_in_sync`` (1 outside any strategy, so any other
file that imports the class and trains on one device is unchanged), and keeps the loss the step
reports and returns undivided. What is found here is only the plan (the nodes of the other
module's program); the edit is made by :mod:`autofix.codemods._companions`, and the engine writes
both files or neither.

A class whose tape's loss is not shown to be such a sum (a term of another kind, the loss bound
twice, two tapes) is refused at the line, naming the other module's line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports, Resolved, program_of
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.tf.losses import MEANS

REPLICAS = "num_replicas_in_sync"


@dataclass
class StepPlan:
    """The edit of another module's ``train_step``: ``assignment`` binds ``loss`` (a sum of
    per-replica means) in the tape's block, ``gradient`` differentiates it; ``tf`` is the name
    the module imports TensorFlow as. ``done``: the module already divides it (nothing to do)."""

    path: str
    program: Program
    cls: str
    loss: str
    assignment: cst.SimpleStatementLine | None
    gradient: cst.Call | None
    tf: str
    done: bool = False


class Companions(Derived):
    """For each model class of another module the migrated file trains (by the name it is
    imported as): the plan that edits it, or why it cannot be edited safely."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.imports = ProjectImports.of(program)

    def step_plan(self, resolved: Resolved) -> StepPlan | str:
        """The plan for ``resolved`` (a model class with its own ``train_step`` and means in
        its loss), or the reason it is refused."""
        key = (resolved.path, resolved.definition.name if resolved.definition else None)
        if key not in self._plans:
            self._plans[key] = self._step_plan(resolved)
        return self._plans[key]

    @cached_property
    def _plans(self) -> dict:
        return {}

    def planned(self) -> list[StepPlan]:
        """The edits of other modules the migration of this file makes (those asked for so
        far: the migration's analysis asks for each class it trains)."""
        return [plan for plan in self._plans.values() if isinstance(plan, StepPlan) and not plan.done]

    def _step_plan(self, resolved: Resolved) -> StepPlan | str:
        definition = resolved.definition
        other = program_of(resolved.path) if resolved.path else None
        if definition is None or other is None:
            return "it cannot be read"
        cls = next((s for s in other.module.body if isinstance(s, cst.ClassDef) and s.name.value == definition.name), None)
        step = _method(cls, "train_step") if cls is not None else None
        if step is None:
            return f"its train_step is inherited (line {definition.train_step}), which autofix does not edit"
        where = resolved.where(self.imports.path, other.line(step))
        if _method(cls, "call") is None and _method(cls, "build") is None:
            # Under a strategy Keras 3 builds a model before fit by calling it ("Unable to
            # automatically build the model", measured on Keras 3.15; one device does not ask):
            # a wrapper with neither cannot be, and its layers are built only when called.
            return (f"{definition.name} has a train_step ({where}) but no call() or build(): under a strategy Keras 3 "
                    "builds it before fit by calling it, which fails; build it yourself (or give it a call()), then migrate")
        tapes = [w for w in nodes_in(step.body, cst.With) if _tape(other, w) is not None]
        gradients = [c for c in nodes_in(step.body, cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "gradient"]
        if len(tapes) != 1 or len(gradients) != 1 or tapes[0] not in step.body.body:
            return f"its train_step ({where}) does not differentiate one loss with one GradientTape"
        tape, tf = _tape(other, tapes[0])
        (gradient,) = gradients
        target = argument_value(gradient, "target", 0)
        if not isinstance(gradient.func.value, cst.Name) or gradient.func.value.value != tape or not isinstance(target, cst.Name):
            return f"its train_step ({where}) differentiates what is not one name"
        loss = target.value
        bound = _assignments(step, loss)
        if len(bound) != 1 or bound[0] not in tapes[0].body.body:
            return f"the loss {loss} of its train_step ({where}) is not bound once in the tape's block"
        value = bound[0].body[0].value
        if _divides_by_replicas(step):
            return StepPlan(resolved.path, other, definition.name, loss, None, None, tf, done=True)
        why = _not_a_sum_of_means(other, step, value, (tapes[0].body.body, bound[0]))
        if why is not None:
            return f"the loss {loss} of its train_step ({resolved.where(self.imports.path, other.line(value))}) {why}"
        return StepPlan(resolved.path, other, definition.name, loss, bound[0], gradient, tf)


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next((m for m in body if isinstance(m, cst.FunctionDef) and m.name.value == name), None)


def _tape(program: Program, block: cst.With) -> tuple[str, str] | None:
    """(the tape's name, the name TensorFlow is imported as) of ``with tf.GradientTape() as
    tape:``, or None."""
    if len(block.items) != 1:
        return None
    item = block.items[0]
    call = item.item
    if not isinstance(call, cst.Call) or item.asname is None or not isinstance(item.asname.name, cst.Name):
        return None
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    if "tensorflow.GradientTape" not in program.qualified_names(func):
        return None
    return item.asname.name.value, func.value.value


def _assignments(function: cst.FunctionDef, name: str) -> list[cst.SimpleStatementLine]:
    """The statements of ``function`` that bind ``name``; a binding of any other form than
    ``name = value`` is returned as well, so that the caller sees more than one."""
    found = []
    for line in nodes_in(function.body, cst.SimpleStatementLine):
        for small in line.body:
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                targets = [small.target]
            if any(name in {n.value for n in nodes_in(t, cst.Name)} for t in targets):
                found.append(line)
    for node in nodes_in(function.body, (cst.For, cst.With, cst.NamedExpr)):
        target = getattr(node, "target", None)
        if target is not None and name in {n.value for n in nodes_in(target, cst.Name)}:
            found.append(node)
    if any(len(line.body) != 1 or not isinstance(line.body[0], cst.Assign) or len(line.body[0].targets) != 1 for line in found if isinstance(line, cst.SimpleStatementLine)):
        found.append(None)  # type: ignore[arg-type]  (not one plain assignment)
    return found


def _binding_at(bound: list, at: tuple) -> cst.SimpleStatementLine | None:
    """The plain assignment a name read in the statement ``at[1]`` of the block ``at[0]`` has
    there: its one binding in the step, or, where the block binds it several times (``kl =
    ...; kl = tf.reduce_mean(kl)``), the last of them before that statement, when every
    binding is a plain assignment among the block's own statements (no loop, branch or other
    scope can bind it another way)."""
    if any(b is None or not isinstance(b, cst.SimpleStatementLine) for b in bound) or not bound:
        return None
    if len(bound) == 1:
        return bound[0]
    block, reader = at
    if reader not in block or any(b not in block for b in bound):
        return None
    before = [b for b in bound if block.index(b) < block.index(reader)]
    return max(before, key=block.index) if before else None


def _divides_by_replicas(step: cst.FunctionDef) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value == REPLICAS for n in nodes_in(step.body, cst.Attribute))


def _not_a_sum_of_means(program: Program, step: cst.FunctionDef, value: cst.BaseExpression, at: tuple, depth: int = 0) -> str | None:
    """Why ``value`` is not a sum of means over the whole batch (terms added, each a mean or a
    name bound to one, or a number times one), or None. ``at`` is (the statements of the
    tape's block, the one ``value`` is read in): a name is read as the binding it has there."""
    if depth > 8:
        return "is followed too deep"
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        return _not_a_sum_of_means(program, step, value.left, at, depth + 1) or _not_a_sum_of_means(program, step, value.right, at, depth + 1)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        for number, term in ((value.left, value.right), (value.right, value.left)):
            if isinstance(number, (cst.Integer, cst.Float)):
                return _not_a_sum_of_means(program, step, term, at, depth + 1)
    if isinstance(value, cst.Call) and program.qualified_names(value.func) & MEANS:
        axis = argument_value(value, "axis", 1)
        if axis is None or (isinstance(axis, cst.Name) and axis.value == "None"):
            return None
        return f"has a mean over some axes only (line {program.line(value)})"
    if isinstance(value, cst.Name):
        binding = _binding_at(_assignments(step, value.value), at)
        if binding is not None:
            return _not_a_sum_of_means(program, step, binding.body[0].value, (at[0], binding), depth + 1)
        return f"has a term, {value.value}, that is not bound once in the step or in the tape's block before it is read"
    return f"has a term that is not a mean over the batch (line {program.line(value)}), which autofix cannot show divided right"
