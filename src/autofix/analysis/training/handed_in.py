"""Keras objects a function is handed that were made before the strategy it makes.

A trainer that makes its own strategy (``self.strategy = tf.distribute.MirroredStrategy()`` in
``__init__``) and keeps a model or an optimizer its caller hands it (``self.model = model``,
also inside ``with self.strategy.scope():``) holds objects whose variables were made before
that strategy existed: outside its scope, whoever the caller is. Entering the scope to assign
them changes nothing (a scope only places the variables made while it is entered). Trained per
replica (``self.strategy.run(step, ...)`` of a step that uses them, or ``fit``), the model is
not mirrored; an optimizer made outside fails on Keras 3 ("Mixing different
tf.distribute.Strategy objects") and trains on Keras 2.

Found only where it is certain: the strategy is constructed in the function itself (whatever
it is handed predates it); the parameter has no default (a ``None`` that the function replaces would be built
in the scope); the value is assigned as it is (``self.model = model``, not ``model()``); and the
attribute is used as a model (``trainable_variables``/``trainable_weights``, ``fit``,
``compile``, ``summary``, ``save_weights``: being called says nothing, a loss is called too) or
as an optimizer (``apply_gradients``, ``minimize``) in the class,
by a step that ``strategy.run`` runs on that strategy or by ``fit``.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import attribute_path, nodes_in
from autofix.tf.symbols import SINGLE_REPLICA

# What only a model has (a loss function or a metric is called too: calling says nothing).
_MODEL_USES = frozenset({"trainable_variables", "trainable_weights", "fit", "compile", "summary", "train_on_batch", "save_weights"})
_OPTIMIZER_USES = frozenset({"apply_gradients", "minimize"})


@dataclass(frozen=True)
class HandedIn:
    """``self.<attribute> = <parameter>`` of a function that made its strategy just before."""

    assignment: cst.Assign
    parameter: cst.Param
    attribute: str
    role: str  # "model" or "optimizer"
    strategy: cst.Call  # the strategy's construction
    use: cst.CSTNode  # where it is trained (a strategy.run or fit)


def handed_in(program: Program) -> list[HandedIn]:
    facts = Facts.of(program)
    callables = Callables.of(program)
    steps = Steps.of(program)
    found: list[HandedIn] = []
    for function in nodes_in(program.module, cst.FunctionDef):
        cls = program.parent(program.parent(function))
        if not isinstance(cls, cst.ClassDef) or not function.params.params:
            continue
        params = {p.name.value: p for p in function.params.params[1:] if p.default is None and not p.star}
        if not params:
            continue
        assigns = nodes_in(function, cst.Assign, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda))
        made = next((m for m in map(lambda a: _strategy_attribute(facts, a), assigns) if m is not None), None)
        if made is None:
            continue
        for assign in assigns:
            value = assign.value
            if not (isinstance(value, cst.Name) and value.value in params and len(assign.targets) == 1):
                continue
            path = attribute_path(assign.targets[0].target)
            if path is None or len(path) != 2 or path[0] != "self":
                continue
            role, use = _role(program, steps, callables, assign.targets[0].target, made[1])
            if role is not None and use is not None:
                found.append(HandedIn(assign, params[value.value], path[1], role, made[0], use))
    return found


def _strategy_attribute(facts: Facts, assign: cst.Assign) -> tuple[cst.Call, str] | None:
    """``self.strategy = tf.distribute.MirroredStrategy()``: the construction and the
    attribute, for a strategy with several replicas."""
    value = assign.value
    if not isinstance(value, cst.Call) or len(assign.targets) != 1:
        return None
    if any(name.endswith(".get_strategy") for name in facts.names_of(value.func)):
        return None  # the strategy of the scope it is called in: made before, not here
    classes = facts.constructed_classes(value)
    if not classes or classes <= SINGLE_REPLICA:
        return None
    path = attribute_path(assign.targets[0].target)
    if path is None or len(path) != 2 or path[0] != "self":
        return None
    return value, path[1]


def _role(program: Program, steps: Steps, callables: Callables, target: cst.BaseExpression, strategy: str) -> tuple[str | None, cst.CSTNode | None]:
    """What the attribute is used as in its class ("model" / "optimizer"), and where it is
    trained under the strategy held in ``self.<strategy>``: a ``strategy.run`` of a step
    that reads it, or its ``fit``."""
    role: str | None = None
    used_in: set[cst.FunctionDef] = set()
    fit: cst.CSTNode | None = None
    for read in callables.attribute_reads(target):
        parent = program.parent(read)
        if isinstance(parent, cst.Attribute) and parent.value is read:
            if parent.attr.value in _OPTIMIZER_USES:
                role = "optimizer"
            elif parent.attr.value in _MODEL_USES:
                role = role or "model"
                if parent.attr.value == "fit":
                    fit = program.parent(parent)
        function = program.enclosing_function(read)
        if function is not None:
            used_in.add(function)
    if role is None:
        return None, None
    for run in steps.runs:
        path = attribute_path(run.func.value)  # type: ignore[union-attr]
        if path != ("self", strategy):
            continue
        target = steps.run_target(run)
        step = steps.definition(target) if target is not None else None
        if step is not None and used_in & set(steps.reached(step)):
            return role, run
    return (role, fit) if fit is not None and role == "model" else (None, None)
