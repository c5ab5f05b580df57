"""Which values are in-memory arrays: what ``fit`` batches itself, with its ``batch_size=``
(Keras's 32 when it is not given), and which are input that batches itself: a ``tf.data``
dataset, a Keras dataset loader's result, a generator, a ``keras.utils.Sequence``.

An array is made by NumPy (``np.load``, ``np.random.rand``, a NumPy generator's draw), by a
``keras.datasets`` loader (also through a name bound to the dataset's module:
``mnist = tf.keras.datasets.mnist; mnist.load_data()``), by ``to_categorical``,
``pad_sequences`` or ``keras.utils.normalize`` (NumPy arrays by their documentation), or is a
TensorFlow tensor made in memory (``tf.constant``, ``tf.reshape``, ``tf.cast``...: Keras
batches a tensor as it batches a NumPy array). It is followed through names (every value that
reaches them), tuple unpacking, arithmetic, subscripts, the array methods that keep it an
array (``astype``, ``reshape``, ``copy``, ``squeeze``, ``numpy``), what a function of the file
returns, and the lists, tuples and dicts of arrays a model of several inputs is fed
(``fit([titles, bodies], y)``: batched together). Anything else is not known to be one.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.core.value_flow import Values
from autofix.analysis.facts.dataflow import LOADERS, PASSTHROUGH
from autofix.analysis.program import Program
from autofix.analysis.syntax import nodes_in

# Functions whose result is an in-memory array or tensor.
_ARRAY_MAKERS = (
    "numpy.",
    "keras.datasets.",
    "keras.utils.to_categorical",
    # NumPy arrays by their documentation ("Returns: NumPy array ..."): padded sequences, rows
    # normalized
    "keras.preprocessing.sequence.pad_sequences",
    "keras.utils.pad_sequences",
    "keras.utils.normalize",
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
    "tensorflow.expand_dims",
)
# Methods of an array that give an array of its examples.
_ARRAY_METHODS = frozenset({"astype", "reshape", "copy", "squeeze", "numpy"})
# NumPy random generators, and their methods that draw arrays.
_GENERATORS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"})
_DRAWS = frozenset({"normal", "uniform", "random", "integers", "randint", "rand", "randn", "standard_normal", "choice", "permutation", "binomial", "poisson"})
_DEPTH = 8


class Arrays(Derived):
    """In-memory arrays of one program (``Arrays.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.values = Values.of(program)
        # The expressions being followed: one reached again is a cycle (``x = x / 255.0`` in a
        # function that may run twice), which adds no origin of its own.
        self._active: set[int] = set()

    def is_array(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``expr`` is an in-memory array (or a list, tuple or dict of them)."""
        if depth > _DEPTH:
            return False
        if isinstance(expr, cst.Call):
            return self._made(expr, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_array(expr.left, depth + 1) or self.is_array(expr.right, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.is_array(expr.value, depth + 1)
        if isinstance(expr, (cst.List, cst.Tuple)):
            return bool(expr.elements) and all(isinstance(e, cst.Element) and self.is_array(e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return bool(expr.elements) and all(isinstance(e, cst.DictElement) and self.is_array(e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Name):
            origins = [o for o in self.values.origins(expr) if id(o.node) not in self._active]
            return bool(origins) and all(self._origin(o, expr, depth) for o in origins)
        return False

    def _origin(self, origin, expr: cst.BaseExpression, depth: int) -> bool:
        node = origin.node
        if not isinstance(node, cst.BaseExpression) or node is expr:
            return False
        if isinstance(node, cst.Call) and self._loader(node):
            return True  # ``(x_train, y_train), _ = mnist.load_data()``: every item is an array
        if any(kind != "item" for kind, _key in origin.path):
            return False  # (an item of an array, ``x[mask]``, ``x[:1000]``, is an array of its rows)
        self._active.add(id(node))
        try:
            return self.is_array(node, depth + 1)
        finally:
            self._active.discard(id(node))

    def _made(self, call: cst.Call, depth: int) -> bool:
        names = self.values.names_of(call.func)
        if any(n.startswith(_ARRAY_MAKERS) for n in names):
            return True
        func = call.func
        if isinstance(func, cst.Attribute):
            if func.attr.value in _ARRAY_METHODS:
                return self.is_array(func.value, depth + 1)
            if self._loader(call):
                return True
            if func.attr.value in _DRAWS and self._numpy_generator(func.value):
                return True  # ``rng.normal(size=...)`` of ``rng = np.random.default_rng()``
            return False
        local = self.values.local_definition(func)
        if isinstance(local, cst.FunctionDef):
            # A helper of the file's own: what every return gives (``vectorize(seqs)``
            # returning ``np.zeros(...)`` filled in place).
            origins = self.values.returned(local, call)
            return bool(origins) and all(
                o.whole and isinstance(o.node, cst.BaseExpression) and o.node is not call and self.is_array(o.node, depth + 1)
                for o in origins
            )
        return False

    def _loader(self, call: cst.Call) -> bool:
        """``keras.datasets.mnist.load_data()``, also through a name bound to the module
        (``mnist = tf.keras.datasets.mnist``)."""
        func = call.func
        if any(n.startswith("keras.datasets.") for n in self.values.names_of(func)):
            return True
        if not (isinstance(func, cst.Attribute) and func.attr.value == "load_data"):
            return False
        receivers = [o.node for o in self.values.origins(func.value) if o.whole]
        return bool(receivers) and all(
            isinstance(r, cst.BaseExpression) and any(n.startswith("keras.datasets.") for n in self.values.names_of(r)) for r in receivers
        )

    def _numpy_generator(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is only ever a NumPy random generator (``np.random.default_rng()``)."""
        origins = self.values.origins(expr)
        return bool(origins) and all(
            o.whole and isinstance(o.node, cst.Call) and self.values.names_of(o.node.func) & _GENERATORS for o in origins
        )

    # --- input that batches itself -----------------------------------------------------------------

    def is_dataset(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``expr`` is a tf.data dataset (a distributed one too), a Keras dataset
        loader's result, a generator, or a ``keras.utils.Sequence``: input that batches itself
        (followed through the names that reach it)."""
        if depth > _DEPTH:
            return False
        values = self.values
        if isinstance(expr, cst.Call):
            names = values.names_of(expr.func)
            if any(n.startswith("tensorflow.data.") or n in LOADERS for n in names):
                return True
            func = expr.func
            # (A method of a dataset, not a function of a module: ``np.concatenate`` and
            # ``np.repeat`` make arrays.)
            if (
                isinstance(func, cst.Attribute)
                and not values.is_module_reference(func.value)
                and func.attr.value in (*PASSTHROUGH, "batch", "padded_batch", "unbatch", "experimental_distribute_dataset")
            ):
                return True
            local = values.local_definition(func)
            if isinstance(local, cst.FunctionDef):
                return _is_generator(local)
            if isinstance(local, cst.ClassDef):
                return any(n.rpartition(".")[2] in ("Sequence", "PyDataset") for b in local.bases for n in values.names_of(b.value))
            return False
        if isinstance(expr, cst.Name):
            found = [values.assigned_value(b) for b in values.reaching_bindings(expr) or ()]
            return bool(found) and all(v is not None and self.is_dataset(v, depth + 1) for v in found)
        return False


def _is_generator(function: cst.FunctionDef) -> bool:
    return bool(nodes_in(function, cst.Yield, stop=(cst.FunctionDef, cst.Lambda)))
