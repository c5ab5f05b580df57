"""Where a batch size is used: ``ds.batch(n)`` (and ``padded_batch``, ``ragged_batch``,
``dense_to_ragged_batch``), ``fit(..., batch_size=n)`` on arrays, a Keras loader's
``batch_size=`` (its default written out when missing), and the ``batch_size=`` keyword of a
data helper imported from another file whose result is trained on (or the parameter a data
builder of another module of the project batches with, read from that module's summary)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.dataflow import LOADER_DEFAULT_BATCH, LOADERS, DataFlow, Flow
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports
from autofix.analysis.training.batchers import batcher
from autofix.analysis.syntax import argument

from .arrays import Data
from .evidence import Evidence

DEFAULTS = {
    "keras.utils.timeseries_dataset_from_array": 128,
    "keras.preprocessing.timeseries_dataset_from_array": 128,
}
_RAGGED_BATCH = frozenset({"tensorflow.data.experimental.dense_to_ragged_batch"})


@dataclass(eq=False)
class Site:
    call: cst.Call
    kind: str  # "batch", "fit", "loader", "batcher"
    arg: cst.Arg | None
    default: int | None = None
    flow: Flow | None = None
    keyword: str = "batch_size"


class Sites:
    def __init__(self, program: Program, evidence: Evidence) -> None:
        self.program = program
        self.facts = Facts.of(program)
        self.flows = DataFlow.of(program)
        self.data = Data(program)
        self.evidence = evidence

    def find(self) -> list[Site]:
        sites = []
        for call, _owner in self.facts.calls:
            func = call.func
            made = batcher(self.program, call) if self.program.migration is not None else None
            if made is not None:
                # A Python-side batcher fed to fit (``datagen.flow(x, y, batch_size=B)``, a
                # generator or a PyDataset of the file): each item it yields is the global batch.
                if made.why is None:
                    sites.append(Site(call, "batcher", made.arg, default=made.default, keyword=made.keyword, flow=self.flows.flow(call)))
                continue
            if isinstance(func, cst.Attribute) and not self.facts.is_module_reference(func.value):
                method = func.attr.value
                if method in ("batch", "padded_batch", "ragged_batch"):
                    arg = argument(call, "batch_size", 0)
                    # Data from a name bound nowhere is a fragment whose source is not known.
                    if arg is not None and not self.data.unbound_source(func.value):
                        sites.append(Site(call, "batch", arg, flow=self.flows.flow(call)))
                elif method == "fit":
                    # fit batches arrays; ``batch_size=`` has no effect on a dataset or a
                    # generator, which batch themselves.
                    x = argument(call, "x", 0)
                    arg = argument(call, "batch_size", 2)
                    if x is None or _is_none(x.value) or self.data.is_dataset(x.value) or (arg is not None and _is_none(arg.value)):
                        continue
                    if arg is not None:
                        sites.append(Site(call, "fit", arg))
                    elif self.data.is_array(x.value) and not self.data.fewer_rows(x.value, 32):
                        # (arrays of fewer examples than the batch are one batch whatever its size)
                        sites.append(Site(call, "fit", None, default=32))
                continue
            names = self.facts.names_of(func)
            if names & _RAGGED_BATCH and call.args:
                # ``ds.apply(tf.data.experimental.dense_to_ragged_batch(n))``
                holder = self.program.parent(self.program.parent(call))
                if isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and holder.func.attr.value == "apply":
                    sites.append(Site(call, "batch", argument(call, "batch_size", 0), flow=self.flows.flow(holder)))
                continue
            helper = self._imported_helper(call)
            if helper is not None:
                sites.append(helper)
                continue
            loader = next((n for n in names if n in LOADERS), None)
            if loader is not None:
                arg = argument(call, "batch_size")
                if arg is not None and _is_none(arg.value):
                    continue  # unbatched on purpose
                default = DEFAULTS.get(loader, LOADER_DEFAULT_BATCH)
                sites.append(Site(call, "loader", arg, default=default, flow=self.flows.flow(call)))
        return sites

    def _imported_helper(self, call: cst.Call) -> Site | None:
        """``make_dataset(..., batch_size=64)`` with ``make_dataset`` imported from another
        file: its result is trained on, so the keyword is that data's batch size. Not when the
        helper is also given the strategy or the number of devices (it may split the batch
        itself)."""
        func = call.func
        if self.facts.local_definition(func) is not None:
            return None
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if not (isinstance(root, cst.Name) and self.program.is_import(root)):
            return None
        if any(n.startswith(("keras.", "tensorflow.")) for n in self.facts.names_of(func)):
            return None
        arg = argument(call, "batch_size")
        if arg is None:
            # A data builder of another module of the project that batches with a parameter
            # (``make_dataset(64)``, read from its summary).
            found = ProjectImports.of(self.program).batch_argument(call)
            arg = found[0] if found is not None else None
        if arg is None or any(self.facts.is_strategy_expr(a.value) or self.evidence.counts_devices(a) for a in call.args):
            return None
        flow = self.flows.flow(call)
        return Site(call, "batch", arg, flow=flow) if flow.sinks else None


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"
