"""What data a batch size applies to: arrays (which ``fit`` batches itself with its
``batch_size=``), datasets, generators and Sequences (which batch themselves), and how many
examples an array is known to hold."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.arrays import Arrays
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.facts.sizes import Sizes


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

    def is_dataset(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is input that batches itself (:mod:`autofix.analysis.facts.arrays`)."""
        return Arrays.of(self.program).is_dataset(expr)
