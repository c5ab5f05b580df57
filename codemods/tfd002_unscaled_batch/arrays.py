"""What data a batch size applies to: arrays (which ``fit`` batches itself with its
``batch_size=``), datasets, generators and Sequences (which batch themselves), and how many
examples an array is known to hold."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.dataflow import LOADERS, PASSTHROUGH
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.syntax import nodes_in

_ARRAY_MAKERS = (
    "numpy.",
    "tensorflow.zeros",
    "tensorflow.ones",
    "tensorflow.constant",
    "tensorflow.random.",
    "tensorflow.convert_to_tensor",
    "tensorflow.range",
    "tensorflow.one_hot",
    "tensorflow.cast",
    "tensorflow.reshape",
    "tensorflow.concat",
    "tensorflow.stack",
    "keras.utils.to_categorical",
)

# NumPy random generators, and their methods that draw arrays.
_GENERATORS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"})
_DRAWS = frozenset({"normal", "uniform", "random", "integers", "randint", "rand", "randn", "standard_normal", "choice", "permutation", "binomial", "poisson"})


class Data:
    """Questions about the values handed to ``fit`` and to dataset methods."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.facts = Facts.of(program)

    def is_array(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if any(n.startswith(_ARRAY_MAKERS) for n in names):
                return True
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("astype", "reshape", "numpy"):
                return self.is_array(expr.func.value, depth + 1)
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _DRAWS and self._numpy_generator(expr.func.value):
                return True  # ``rng.normal(size=...)`` of ``rng = np.random.default_rng()``
            local = self.facts.local_definition(expr.func)
            if isinstance(local, cst.FunctionDef):
                # A helper of the file's own: what every return gives (``vectorize(seqs)``
                # returning ``np.zeros(...)`` filled in place).
                origins = self.facts.values.returned(local, expr)
                return bool(origins) and all(
                    o.whole and isinstance(o.node, cst.BaseExpression) and o.node is not expr and self.is_array(o.node, depth + 1)
                    for o in origins
                )
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self.is_array(expr.left, depth + 1) or self.is_array(expr.right, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.is_array(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            bindings = self.facts.bindings(expr)
            if not bindings:
                return False
            return all(self._binding_is_array(b, depth + 1) for b in bindings)
        return False

    def _numpy_generator(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is only ever a NumPy random generator (``np.random.default_rng()``,
        ``np.random.RandomState()``)."""
        origins = self.facts.values.origins(expr)
        return bool(origins) and all(
            o.whole and isinstance(o.node, cst.Call) and self.facts.names_of(o.node.func) & _GENERATORS for o in origins
        )

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

    def _binding_is_array(self, binding: cst.CSTNode, depth: int) -> bool:
        value = self.facts.assigned_value(binding)
        if value is not None:
            return self.is_array(value, depth)
        # ``(x_train, y_train), _ = keras.datasets.mnist.load_data()``, ``x, y = a / 255, b``
        origins = self.facts.values.binding_origins(binding)
        return bool(origins) and all(self._origin_is_array(o, depth) for o in origins)

    def _origin_is_array(self, origin, depth: int) -> bool:
        node = origin.node
        if isinstance(node, cst.Call) and any(n.startswith("keras.datasets.") for n in self.facts.names_of(node.func)):
            return True
        return origin.whole and isinstance(node, cst.BaseExpression) and self.is_array(node, depth)


def _is_generator(function: cst.FunctionDef) -> bool:
    return bool(nodes_in(function, cst.Yield, stop=(cst.FunctionDef, cst.Lambda)))
