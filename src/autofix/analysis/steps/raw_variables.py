"""``tf.Variable`` objects a single-device step trains, for ``autofix migrate``.

A step may train variables made by hand at the top of the script (``weights = {"h1":
tf.Variable(...)}``) rather than Keras layers. Made in ``strategy.scope()`` they become mirrored
variables, one copy per replica kept in sync, and the optimizer applies the summed gradients to
each: that is the migration. The statements that make them are put in the scope where they are,
which is safe only when each is one assignment of one name, bound once, made directly in the
block the strategy is made in (not under an ``if`` or in a loop), and the variables are then
only read and trained: a container filled later (``weights["h3"] = tf.Variable(...)``) or a
variable the step assigns itself (``counter.assign_add(1)``: a mirrored variable refuses an
update in a replica without an aggregation) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import nodes_in

VARIABLE = "tensorflow.Variable"
# Methods that change a container in place: a variable added to it later is not made in the scope.
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "__setitem__"})
# Methods that change a variable's value other than through the optimizer.
_ASSIGNS = frozenset({"assign", "assign_add", "assign_sub", "scatter_add", "scatter_sub", "scatter_update", "scatter_nd_update", "scatter_nd_add"})


@dataclass(frozen=True)
class RawVariables:
    """The statements that make the variables a step trains (each one assignment)."""

    statements: tuple[cst.SimpleStatementLine, ...]
    # The tf.Variable calls (or local factory calls making them) in those statements.
    calls: tuple[cst.Call, ...]


def raw_variables(program: Program, function: cst.FunctionDef) -> RawVariables | tuple[cst.CSTNode, str]:
    """What makes the ``tf.Variable`` objects ``function`` (a step) and the local functions it
    calls read from outside, or why they cannot be put in the strategy's scope (at the node
    that shows it)."""
    facts = Facts.of(program)
    steps = Steps.of(program)
    reached = steps.reached(function)
    statements: dict[int, cst.SimpleStatementLine] = {}
    calls: list[cst.Call] = []
    names: dict[int, cst.Name] = {}
    for inner in reached:
        for name in nodes_in(inner.body, cst.Name):
            if program.access(name) is None:
                continue
            for binding in facts.bindings(name) or ():
                value = facts.assigned_value(binding)
                if value is None or program.enclosing_function(binding) is inner:
                    continue
                made = _variables_made(facts, value)
                if not made:
                    continue
                why = _movable(program, facts, binding, made[0])
                if why is not None:
                    return why[0], f"{why[1]}; make them in strategy.scope() yourself (or use Keras layers), then migrate"
                statement = program.statement_of(binding)
                statements[id(statement)] = statement  # type: ignore[assignment]
                names[id(binding)] = binding  # type: ignore[assignment]
                calls.extend(c for c in made if c not in calls)
    for binding in names.values():
        why = _changed_later(program, facts, binding, reached)
        if why is not None:
            return why
    ordered = sorted(statements.values(), key=program.line)
    return RawVariables(tuple(ordered), tuple(calls))


def _variables_made(facts: Facts, value: cst.BaseExpression, depth: int = 0) -> list[cst.Call]:
    """The calls in ``value`` that make ``tf.Variable`` objects: the constructor, or a local
    function whose body makes them (followed a few calls deep)."""
    found = []
    for call in nodes_in(value, cst.Call):
        if VARIABLE in facts.names_of(call.func):
            found.append(call)
            continue
        kind = facts.call_kind(call)
        if isinstance(kind, cst.FunctionDef) and depth < 4 and _variables_made(facts, kind.body, depth + 1):
            found.append(call)
    return found


def _movable(program: Program, facts: Facts, binding: cst.CSTNode, made: cst.Call) -> tuple[cst.CSTNode, str] | None:
    """Why the statement binding ``binding`` cannot go into ``with strategy.scope():`` where it
    is, or None."""
    statement = program.statement_of(binding)
    where = f"line {program.line(made)}"
    if not (isinstance(binding, cst.Name) and isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return made, f"the step trains tf.Variable objects made on {where} by a statement that is not one assignment of one name"
    assign = statement.body[0]
    if not (isinstance(assign, (cst.Assign, cst.AnnAssign)) and (isinstance(assign, cst.AnnAssign) or len(assign.targets) == 1)):
        return made, f"the step trains tf.Variable objects made on {where} by a statement that is not one assignment of one name"
    if len(facts.bindings(binding) or ()) != 1:
        return made, f"the step trains tf.Variable objects held in {binding.value}, which is bound more than once ({where})"
    holder = program.parent(statement)
    owner = program.parent(holder) if isinstance(holder, cst.IndentedBlock) else None
    if not (isinstance(holder, cst.Module) or isinstance(owner, cst.FunctionDef)):
        return made, (
            f"the step trains tf.Variable objects made on {where} inside a compound statement, where a with "
            "block cannot be added around them alone"
        )
    return None


def _changed_later(program: Program, facts: Facts, binding: cst.Name, reached: list[cst.FunctionDef]) -> tuple[cst.CSTNode, str] | None:
    """A container the variables are held in that is filled or changed later, or a variable
    the step assigns itself."""
    for use in facts.uses(binding):
        parent = program.parent(use)
        target = parent
        while isinstance(target, (cst.Subscript, cst.Attribute)) and target.value is use:
            owner = program.parent(target)
            if isinstance(owner, (cst.AssignTarget, cst.AugAssign, cst.Del)) or isinstance(owner, cst.AnnAssign) and owner.target is target:
                return use, (
                    f"{binding.value}, which holds the tf.Variable objects the step trains, is changed on line "
                    f"{program.line(use)}: what it holds then is not made in the scope"
                )
            if isinstance(target, cst.Attribute):
                call = owner
                method = target.attr.value
                if isinstance(call, cst.Call) and call.func is target:
                    if method in _MUTATORS:
                        return use, (
                            f"{binding.value}, which holds the tf.Variable objects the step trains, is changed on line "
                            f"{program.line(use)} ({method}): what it holds then is not made in the scope"
                        )
                    if method in _ASSIGNS and any(program.enclosing_function(use) is f for f in reached):
                        return use, _assigned(program, binding, use)
                break
            use, target = target, owner
    for inner in reached:
        for call in nodes_in(inner.body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _ASSIGNS:
                root = func.value
                while isinstance(root, (cst.Subscript, cst.Attribute)):
                    root = root.value
                if isinstance(root, cst.Name) and binding in (facts.bindings(root) or ()):
                    return call, _assigned(program, binding, call)
    return None


def _assigned(program: Program, binding: cst.Name, node: cst.CSTNode) -> str:
    return (
        f"the step assigns the tf.Variable {binding.value} itself (line {program.line(node)}): made in the scope, a "
        "mirrored variable takes an update made on every replica only with an aggregation, which is not known here"
    )
