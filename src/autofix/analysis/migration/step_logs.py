"""What a single-device step returns when it is not its loss: the results of its metrics, for
``autofix migrate``.

A step may return what it shows: ``metric.result()``, or a dict of them (``logs[metric.name] =
metric.result()`` for each metric, as Keras's own ``train_step`` does). Made in the scope,
a metric keeps its totals per replica, and ``result()`` read in a replica is that replica's;
the migration combines them as Keras's ``fit`` combines what ``train_step`` returns: the mean
over the replicas (``strategy.reduce(MEAN, ...)``), which is the metric over all the examples
when every replica has seen as many (an uneven last batch makes it differ a little, as it does
for ``fit``). What else a step returns is judged by :mod:`.step_returns`.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.training.model import TrainingModel
from autofix.tf.symbols import Kind

METRIC, LOGS = "metric", "logs"


def shown(program: Program, function: cst.FunctionDef, value: cst.BaseExpression) -> str | None:
    """``METRIC`` when ``value`` (returned by the step ``function``) is a metric's result,
    ``LOGS`` when it is a dict whose every value is one, else None."""
    facts = Facts.of(program)
    if _metric_result(program, value):
        return METRIC
    if isinstance(value, cst.Dict):
        return LOGS if _metric_dict(program, value) else None
    if not isinstance(value, cst.Name):
        return None
    bindings = facts.reaching_bindings(value) or []
    if len(bindings) != 1 or program.enclosing_function(bindings[0]) is not function:
        return None
    made = facts.assigned_value(bindings[0])
    if not isinstance(made, cst.Dict) or not _metric_dict(program, made):
        return None
    for use in facts.uses(bindings[0]):  # type: ignore[arg-type]
        if use is value:
            continue
        subscript = program.parent(use)
        target = program.parent(subscript)
        statement = program.parent(target) if isinstance(target, cst.AssignTarget) else None
        if not (isinstance(subscript, cst.Subscript) and isinstance(target, cst.AssignTarget) and isinstance(statement, cst.Assign)):
            return None  # read, updated or passed on elsewhere: what it holds is not known
        if len(statement.targets) != 1 or not _metric_result(program, statement.value):
            return None
    return LOGS


def _metric_dict(program: Program, value: cst.Dict) -> bool:
    return all(isinstance(e, cst.DictElement) and _metric_result(program, e.value) for e in value.elements)


def _metric_result(program: Program, value: cst.BaseExpression) -> bool:
    """``m.result()`` of a Keras metric made in this file (followed through names, loops over
    lists of them, attributes)."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "result" and not value.args):
        return False
    facts = Facts.of(program)
    makers = TrainingModel.of(program).makers(value.func.value)
    return bool(makers) and all(facts.call_kind(m) is Kind.METRIC for m in makers)

