"""What migrated code must show before a migration is kept: every batch training is fed is
the global batch (made from ``num_replicas_in_sync``), every step runs on distributed
batches, and what divides a step's loss over the batch (``global_batch_size=``, ``sum /
BATCH``) is the global batch too. A rule's blind spot (a batch made in a helper it does not follow, arrays whose batch
Keras picks) is caught here, and the file is not migrated, rather than trained wrong."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.dataflow import PASSTHROUGH
from autofix.analysis.facts.script import Facts
from autofix.analysis.training.inputs import UNDISTRIBUTED, Inputs, Origin
from autofix.analysis.migration.single_device import Refusal
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports
from autofix.analysis.steps.step_losses import normalizers
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.analysis.training.batchers import batcher
from autofix.analysis.training.compiled import batch_size_of
from autofix.analysis.training.model import TrainingModel


def unscaled_batches(program: Program) -> list[Refusal]:
    """In migrated code: every place training is fed whose batch is not shown to be the global
    batch (made from ``num_replicas_in_sync``). A migration is only right when every batch is
    N x the original's; what a rule could not see (a batch made in a helper, arrays whose batch
    Keras picks) is caught here rather than trained wrong."""
    facts = Facts.of(program)
    found = []
    for site in TrainingModel.of(program).sites:
        if site.kind != "fit":
            continue
        call = site.call
        x = argument_value(call, "x", 0)
        batches = _batches_of(program, x) if x is not None else []
        given = argument_value(call, "batch_size", 2)
        if not batches and given is not None:
            batches = [given]
        if not batches or not all(_counts_replicas(facts, b) for b in batches):
            what = f"the batch fit trains on (line {program.line(call)})"
            unfollowed = _batcher_why(program, facts, x) if not batches and x is not None else None
            if unfollowed is not None:
                found.append(unfollowed)
                continue
            elsewhere = _made_in_project(program, facts, x) if not batches and x is not None else None
            found.append(Refusal(call, f"{what} {elsewhere}") if elsewhere else _unshown(program, facts, batches, call, what))
    inputs = Inputs.of(program)
    for run in Steps.of(program).runs:
        origins = [o for argument in _run_arguments(run) for o in inputs.origins(argument)]
        kinds = {o.kind for o in origins}
        if "distributed" not in kinds or kinds & UNDISTRIBUTED:
            # Named where the loop calls the step (a line of the original), not in the wrapper
            # the migration wrote.
            site = _caller(program, facts, run)
            found.append(Refusal(site, (
                f"the step called on line {program.line(site)} is not shown to be fed distributed batches (each "
                f"replica its share of the global batch){_iterated_from(program, origins)}"
            )))
    for call, _owner in facts.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "experimental_distribute_dataset" and call.args:
            dataset = call.args[0].value
            batches = _batches_of(program, dataset)
            if not batches or not all(_counts_replicas(facts, b) for b in batches):
                made = _made_at(facts, dataset)
                found.append(_unshown(program, facts, batches, made, f"the batch of the dataset made on line {program.line(made)}"))
    for normalizer in normalizers(program):
        node = normalizer.node
        if not _counts_replicas(facts, node):
            found.append(Refusal(node, (
                f"the loss differentiated on line {program.line(normalizer.gradient)} is divided over the batch by "
                f"{_short(program, node)} (line {program.line(node)}), which could not be shown to be the global batch "
                "(N x the original's): each replica's loss would be N x its share of the global mean"
            )))
    return found


def _unshown(program: Program, facts: Facts, batches: list[cst.BaseExpression], fallback: cst.CSTNode, what: str) -> Refusal:
    """A batch not shown to be global, named where it is written when that is known (a line
    of the original: the migration writes no batch of its own)."""
    unscaled = [b for b in batches if not _counts_replicas(facts, b)]
    if unscaled:
        batch = unscaled[0]
        return Refusal(batch, (
            f"{what} is {_short(program, batch)} (line {program.line(batch)}), which could not be shown to be the "
            "global batch (N x the original's)"
        ))
    return Refusal(fallback, f"{what} could not be followed to where it is set: it is not shown to be the global batch (N x the original's)")


def _batcher_why(program: Program, facts: Facts, data: cst.BaseExpression) -> Refusal | None:
    """Why the batch of a Python-side batcher fed to fit (a flow, a generator or a PyDataset of
    the file) is not shown to be the global batch, said at the line that makes it."""
    for origin in [*facts.values.origins(data), None]:
        node = data if origin is None else origin.node
        if isinstance(node, cst.Call):
            made = batcher(program, node)
            if made is not None and made.why is not None:
                return Refusal(node, (
                    f"fit (line {program.line(node)}) is fed {_short(program, node)}, whose batch is the global batch "
                    f"under the strategy (each batch it yields is split over the replicas), but {made.why}"
                ))
    return None


def _made_in_project(program: Program, facts: Facts, data: cst.BaseExpression) -> str | None:
    """Where data whose batch is not followed is made, when that is a function of another
    module of the project (said, naming it, since the batch is set there)."""
    imports = ProjectImports.of(program)
    if not imports.active:
        return None
    for origin in facts.values.origins(data):
        node = origin.node
        if not isinstance(node, cst.Call):
            continue
        resolved = imports.resolve(node.func)
        if resolved is None or resolved.path is None or resolved.definition is None:
            continue
        return (
            f"is set by {_short(program, node.func)} (line {program.line(node)}) in {resolved.where(imports.path)}, "
            "another module of the project, which autofix does not follow: it is not shown to batch with one of its "
            "parameters that nothing else in it reads, so the batch is not shown to be the global batch (N x the "
            "original's); migrate it by hand"
        )
    return None


def _iterated_from(program: Program, origins: list[Origin]) -> str:
    """What a loop feeding a step iterates, when that is not a dataset the analysis knows
    (``batches()``, a Python generator; ``datagen.flow(x)``, a Keras iterator over arrays): said,
    since only a ``tf.data`` dataset can be distributed in place."""
    iterated = [o.node for o in origins if o.kind == "unknown" and o.loop is not None and isinstance(o.node, cst.Call)]
    if not iterated:
        return ""
    return (
        f": its batches come from {_short(program, iterated[0])} (line {program.line(iterated[0])}), which is not a "
        "tf.data dataset that can be distributed"
    )


def _made_at(facts: Facts, dataset: cst.BaseExpression) -> cst.CSTNode:
    """Where the dataset ``dataset`` evaluates to is made, when that is one place."""
    origins = [o.node for o in facts.values.origins(dataset) if o.whole]
    return origins[0] if len(origins) == 1 and isinstance(origins[0], cst.BaseExpression) else dataset


def _caller(program: Program, facts: Facts, run: cst.Call) -> cst.CSTNode:
    """The one call of the function ``run`` is in (the step's wrapper), else ``run``."""
    function = program.enclosing_function(run)
    if function is None:
        return run
    calls = [program.parent(r) for r in facts.references(function)]
    calls = [c for c in calls if isinstance(c, cst.Call)]
    return calls[0] if len(calls) == 1 else run


def _short(program: Program, node: cst.CSTNode) -> str:
    """The code of ``node`` as the original wrote it, as far as the migration's own scaling
    goes (``BATCH_SIZE * strategy.num_replicas_in_sync`` shown as ``BATCH_SIZE``): the reason
    is read beside the original, not the migrated code it never sees."""
    code = " ".join(program.module.code_for_node(node.visit(_Unscaled())).split())
    return code if len(code) <= 50 else code[:47] + "..."


class _Unscaled(cst.CSTTransformer):
    """``x * <strategy>.num_replicas_in_sync`` back to ``x``."""

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation) -> cst.BaseExpression:
        right = updated_node.right
        if isinstance(updated_node.operator, cst.Multiply) and isinstance(right, cst.Attribute) and right.attr.value == "num_replicas_in_sync":
            return updated_node.left
        return updated_node


def _run_arguments(run: cst.Call) -> list[cst.BaseExpression]:
    value = argument_value(run, "args", 1)
    if isinstance(value, (cst.Tuple, cst.List)):
        return [e.value for e in value.elements]
    return [value] if value is not None else []


def _batches_of(program: Program, dataset: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
    """What ``dataset`` is batched with, where it is made: through names, parameters (every
    dataset the calls of its function pass) and what local functions return; empty when one
    of them is not known."""
    batch = batch_size_of(program, dataset)
    if batch is not None:
        return [batch]
    if isinstance(dataset, cst.Call):
        made = batcher(program, dataset)
        if made is not None:
            return [made.arg.value] if made.why is None and made.arg is not None else []
    if depth > 6:
        return []
    facts = Facts.of(program)
    # ``dataset.repeat()``, ``dataset.take(100)``: the batches of ``dataset``.
    while (
        isinstance(dataset, cst.Call)
        and isinstance(dataset.func, cst.Attribute)
        and dataset.func.attr.value in PASSTHROUGH
        and not facts.is_module_reference(dataset.func.value)
    ):
        dataset = dataset.func.value
    found: list[cst.BaseExpression] = []
    origins = facts.values.origins(dataset)
    if not origins:
        return []
    for origin in origins:
        node = origin.node
        if not origin.whole or not isinstance(node, cst.BaseExpression):
            return []
        if node is dataset and not (isinstance(node, cst.Call) and isinstance(facts.local_definition(node.func), cst.FunctionDef)):
            return []  # (a call of a function of the file is followed into what it returns)
        made = batch_size_of(program, node)
        if made is not None:
            found.append(made)
            continue
        yielded = batcher(program, node) if isinstance(node, cst.Call) else None
        if yielded is not None:
            if yielded.why is not None or yielded.arg is None:
                return []
            found.append(yielded.arg.value)
            continue
        function = facts.local_definition(node.func) if isinstance(node, cst.Call) else None
        if not isinstance(function, cst.FunctionDef):
            # A data builder of another module of the project that batches with what this
            # call passes it (read from that module's summary).
            built = ProjectImports.of(program).batch_argument(node) if isinstance(node, cst.Call) else None
            if built is None:
                return []
            found.append(built[0].value)
            continue
        returned = [o.node for o in facts.values.returned(function, node) if o.whole]
        inner = [b for value in returned if isinstance(value, cst.BaseExpression) for b in _batches_of(program, value, depth + 1)]
        if not returned or not inner:
            return []
        found.extend(inner)
    return found


def _counts_replicas(facts: Facts, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether ``expr`` is made from ``num_replicas_in_sync``: on every path its names take
    (assignments, and for a parameter what the calls of its function pass)."""
    if depth > 6:
        return False
    if any(isinstance(a, cst.Attribute) and a.attr.value == "num_replicas_in_sync" for a in nodes_in(expr, cst.Attribute)):
        return True
    for name in nodes_in(expr, cst.Name):
        if facts.program.access(name) is None:
            continue
        origins = facts.values.origins(name)
        if origins and all(o.whole and isinstance(o.node, cst.BaseExpression) and o.node is not name and _counts_replicas(facts, o.node, depth + 1) for o in origins):
            return True
    return False
