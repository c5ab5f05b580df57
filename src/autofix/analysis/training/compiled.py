"""What a model was compiled with and fit on, and the batch size of a dataset."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.dataflow import PASSTHROUGH
from autofix.analysis.facts.keras_objects import COMPILE, TRAIN
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports
from autofix.analysis.syntax import argument_value


@dataclass
class Compiled:
    """What ``model.compile(...)`` was given."""

    call: cst.Call
    loss: cst.BaseExpression | None
    optimizer: cst.BaseExpression | None


def method_calls(facts: Facts, model: cst.Name, methods: tuple[str, ...], kind: str) -> list[cst.Call]:
    """The calls ``m.<method>(...)`` on the model bound where ``model`` is used, that the
    facts classify as ``kind`` (COMPILE or TRAIN)."""
    found = []
    for binding in facts.bindings(model) or []:
        if not isinstance(binding, cst.Name):
            continue
        for use in facts.uses(binding):
            attribute = facts.program.parent(use)
            call = facts.program.parent(attribute)
            if (
                isinstance(attribute, cst.Attribute)
                and attribute.attr.value in methods
                and isinstance(call, cst.Call)
                and facts.call_kind(call) == kind
            ):
                found.append(call)
    return found


def compile_of(facts: Facts, model: cst.Name) -> Compiled | None:
    """The ``compile`` call of the model bound at ``model``'s use, if there is exactly one."""
    found = method_calls(facts, model, ("compile",), COMPILE)
    if len(found) != 1:
        return None
    call = found[0]
    return Compiled(call, argument_value(call, "loss", 1), argument_value(call, "optimizer", 0))


def fit_datasets(facts: Facts, model: cst.Name) -> list[cst.BaseExpression]:
    """What the model's ``fit`` calls train on (their first argument)."""
    firsts = (argument_value(call, "x", 0) for call in method_calls(facts, model, ("fit", "fit_generator"), TRAIN))
    return [first for first in firsts if first is not None]


def batch_size_of(program: Program, dataset: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
    """The expression a dataset was batched with (``ds.batch(E)`` -> ``E``), following names
    and dataset method chains back to where it was made (also into a function of another
    module of the project that batches with a parameter: what the call passes there)."""
    facts = Facts.of(program)
    if depth > 8:
        return None
    if isinstance(dataset, cst.Name):
        # The bindings that reach this read: ``ds = ds.shuffle(n).batch(b)`` is what a later
        # read of ds iterates.
        bindings = facts.reaching_bindings(dataset) or []
        values = [facts.assigned_value(b) for b in bindings]
        if len(values) == 1 and values[0] is not None:
            return batch_size_of(program, values[0], depth + 1)
        return None
    if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Attribute):
        method = dataset.func.attr.value
        if method in ("batch", "padded_batch"):
            return argument_value(dataset, "batch_size", 0)
        if method in PASSTHROUGH:
            return batch_size_of(program, dataset.func.value, depth + 1)
    if isinstance(dataset, cst.Call):
        # ``data.make_dataset(64)``: a function of another module of the project that batches
        # what it returns with that parameter (its summary's ``batch_parameter``).
        passed = ProjectImports.of(program).batch_argument(dataset)
        if passed is not None:
            return passed[0].value
    return None
