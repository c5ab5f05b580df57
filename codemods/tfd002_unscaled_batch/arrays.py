"""What data a batch size applies to: arrays (which ``fit`` batches itself with its
``batch_size=``), datasets, generators and Sequences (which batch themselves), and how many
examples an array is known to hold."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.arrays import Arrays
from autofix.analysis.facts.dataflow import LOADERS, PASSTHROUGH
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.syntax import nodes_in


class Data:
    """Questions about the values handed to ``fit`` and to dataset methods."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.facts = Facts.of(program)

    def is_array(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is an in-memory array ``fit`` batches itself (:mod:`autofix.analysis.facts.arrays`)."""
        return Arrays.of(self.program).is_array(expr)

    def unbound_source(self, expr: cst.BaseExpression) -> bool:
        """Whether a dataset method chain starts at a name that nothing binds."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        if not isinstance(expr, cst.Name) or self.program.access(expr) is None:
            return False
        return self.facts.bindings(expr) == [] or not self.program.access(expr).referents

    def fewer_rows(self, expr: cst.BaseExpression, batch: int) -> bool:
        """Whether the array ``expr`` is known to hold at most ``batch`` examples
        (``np.random.rand(1, 10)``, ``np.zeros((16, 4))``)."""
        rows = Sizes.of(self.program).rows(expr)
        return rows is not None and rows <= batch

    def is_dataset(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``expr`` is a tf.data dataset, a Keras dataset loader's result, a generator,
        or a ``keras.utils.Sequence``: input that batches itself."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if any(n.startswith("tensorflow.data.") or n in LOADERS for n in names):
                return True
            func = expr.func
            # (A method of a dataset, not a function of a module: ``np.concatenate`` and
            # ``np.repeat`` make arrays.)
            if (
                isinstance(func, cst.Attribute)
                and not self.facts.is_module_reference(func.value)
                and func.attr.value in (*PASSTHROUGH, "batch", "padded_batch", "unbatch", "experimental_distribute_dataset")
            ):
                return True
            local = self.facts.local_definition(func)
            if isinstance(local, cst.FunctionDef):
                return _is_generator(local)
            if isinstance(local, cst.ClassDef):
                return any(
                    n.rpartition(".")[2] in ("Sequence", "PyDataset") for b in local.bases for n in self.facts.names_of(b.value)
                )
            return False
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.reaching_bindings(expr) or ()]
            return bool(values) and all(v is not None and self.is_dataset(v, depth + 1) for v in values)
        return False


def _is_generator(function: cst.FunctionDef) -> bool:
    return bool(nodes_in(function, cst.Yield, stop=(cst.FunctionDef, cst.Lambda)))
