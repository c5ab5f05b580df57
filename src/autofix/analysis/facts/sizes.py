"""How many examples an array holds (its first dimension), where the file shows it.

Sizes start where they are documented or written: the ``keras.datasets`` loaders
(:mod:`.loaders`: fixed sizes, a ``test_split=`` applied as Keras applies it; none once
``maxlen=`` filters), the arrays NumPy and TensorFlow make from a shape (``np.zeros((1000, 8))``, ``rng.random(...)``),
``len(x)`` and ``x.shape[0]``. They are followed, through the value flow of
:mod:`autofix.analysis.core.value_flow` (names, tuple unpacking, what local functions return with their arguments bound), along what
keeps the first dimension: ``astype``, ``reshape`` with a known first dimension, arithmetic
with a number (``x / 255.0``), in-place arithmetic on a NumPy array (``x -= mean``),
``np.expand_dims`` past the first axis, ``x[..., None]``, ``to_categorical``, ``one_hot``,
``pad_sequences``; and along slices of the first dimension, by constants (``x[:1000]``) or
by a loop counter read in the slice itself (``x[i * n:(i + 1) * n]`` for ``i`` in
``range(k)``: ``n`` examples whenever every window lies inside the array).

Numbers (:meth:`Sizes.number`) are integer constants, names bound only to them, sizes, and
arithmetic on them; ``len()`` of a string, of a tuple, or of a list that the file fills with
``append`` statements in ``for`` loops over ``range`` of known length (``for i in
range(len(text) - window): seqs.append(...)``), every change to it seen and done before the
read (such a list's length is read only through ``len()``: a list given to ``fit`` may be
several inputs rather than examples).

Limits, on purpose: anything else is unknown (None): a size that depends on what a run reads
(files, flags), filtering (``x[y == 1]``), concatenation, an array a call made elsewhere
returns, a value with several possible sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts import loaders
from autofix.analysis.syntax import argument, argument_value
from autofix.analysis.core.origins import ANY, Origin
from autofix.analysis.core.value_flow import Values

# Calls whose result has their first argument's examples.
_SAME_ROWS = frozenset(
    {
        "numpy.asarray", "numpy.array", "numpy.ascontiguousarray", "numpy.copy",
        "numpy.float32", "numpy.float64", "numpy.int32", "numpy.int64",
        "numpy.abs", "numpy.sqrt", "numpy.exp", "numpy.log", "numpy.log1p", "numpy.clip", "numpy.round",
        "tensorflow.cast", "tensorflow.convert_to_tensor", "tensorflow.constant", "tensorflow.one_hot",
        "keras.utils.to_categorical", "keras.utils.np_utils.to_categorical",
        "keras.utils.pad_sequences", "keras.preprocessing.sequence.pad_sequences",
    }
)
# Calls whose result keeps the first dimension only when they do not act on axis 0.
_AXIS_CALLS = {"numpy.expand_dims": 1, "tensorflow.expand_dims": 1}
# Array makers whose first argument is the shape (or the number of rows).
_SHAPE_FIRST = frozenset(
    {
        "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full",
        "numpy.random.rand", "numpy.random.randn", "numpy.random.random", "numpy.random.random_sample",
        "numpy.random.standard_normal",
        "tensorflow.zeros", "tensorflow.ones", "tensorflow.fill",
        "tensorflow.random.normal", "tensorflow.random.uniform",
    }
)
# Array makers taking ``size=`` (and its position).
_SIZE_AT = {"numpy.random.normal": 2, "numpy.random.uniform": 2, "numpy.random.randint": 2, "numpy.random.binomial": 2}
# Methods of a NumPy random generator (``np.random.default_rng()``, ``RandomState()``) and where
# their size is.
_GENERATOR_SIZE = {"random": 0, "standard_normal": 0, "normal": 2, "uniform": 2, "integers": 2, "randint": 2, "rand": None, "randn": None}
_GENERATORS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"})
# Methods of an array whose result has its examples.
_SAME_ROWS_METHODS = frozenset({"astype", "copy", "numpy"})

_LIMIT = 24
# Calls that read a list without changing it.
_READING_CALLS = frozenset(
    {"builtins.len", "builtins.enumerate", "builtins.zip", "builtins.sorted", "builtins.list", "builtins.tuple", "numpy.array", "numpy.asarray"}
)


@dataclass(frozen=True)
class _Known:
    rows: int
    # A NumPy array: arithmetic in place keeps its shape whatever the other operand is.
    ndarray: bool


@dataclass(frozen=True)
class _Linear:
    """An integer ``const + sum(coeff * counter)``, each counter a loop variable within
    [low, high]."""

    const: int
    terms: tuple[tuple[int, int, int, int], ...] = ()  # (counter id, coeff, low, high)

    def plus(self, other: "_Linear", sign: int = 1) -> "_Linear":
        terms = {t[0]: list(t) for t in self.terms}
        for key, coeff, low, high in other.terms:
            if key in terms:
                terms[key][1] += sign * coeff
            else:
                terms[key] = [key, sign * coeff, low, high]
        kept = tuple(tuple(t) for t in terms.values() if t[1])  # type: ignore[misc]
        return _Linear(self.const + sign * other.const, kept)  # type: ignore[arg-type]

    def times(self, factor: int) -> "_Linear":
        return _Linear(self.const * factor, tuple((k, c * factor, lo, hi) for k, c, lo, hi in self.terms if c * factor))

    @property
    def low(self) -> int:
        return self.const + sum(min(c * lo, c * hi) for _, c, lo, hi in self.terms)

    @property
    def high(self) -> int:
        return self.const + sum(max(c * lo, c * hi) for _, c, lo, hi in self.terms)


_Where = tuple  # (function, call): an origin inside ``function``, entered from ``call``


class Sizes(Derived):
    """Sizes of arrays in one program (``Sizes.of(program)``)."""

    def __init__(self, program) -> None:
        super().__init__(program)
        self.values = Values.of(program)
        self._memo: dict[tuple[int, int], _Known | None] = {}
        self._active: set[tuple[int, int]] = set()

    def rows(self, expr: cst.BaseExpression) -> int | None:
        """The number of examples ``expr`` holds, when the file shows it."""
        found = self._rows(expr, None, 0)
        return found.rows if found is not None else None

    def number(self, expr: cst.BaseExpression) -> int | float | None:
        """The constant number ``expr`` is, when the file shows it."""
        found = self._number(expr, None, 0, counters=False)
        if isinstance(found, _Linear):
            return found.const if not found.terms else None
        return found

    # --- sizes ---------------------------------------------------------------------------------

    def _rows(self, expr: cst.CSTNode, where: _Where | None, depth: int) -> _Known | None:
        key = (id(expr), id(where[1]) if where else 0)
        if key in self._memo:
            return self._memo[key]
        if key in self._active or depth > _LIMIT:
            return None
        self._active.add(key)
        try:
            found = self._agree([self._origin(o, where, depth + 1) for o in self._origins(expr, where)])
        finally:
            self._active.discard(key)
        self._memo[key] = found
        return found

    def _origins(self, expr: cst.CSTNode, where: _Where | None) -> list[Origin]:
        if where is not None and any(a is where[0] for a in self.program.ancestors(expr)):
            return self.values.origins_in_call(expr, where[0], where[1])  # type: ignore[arg-type]
        return self.values.origins(expr)  # type: ignore[arg-type]

    @staticmethod
    def _agree(found: list[_Known | None]) -> _Known | None:
        if not found or any(f is None for f in found) or len({f.rows for f in found}) != 1:  # type: ignore[union-attr]
            return None
        return _Known(found[0].rows, all(f.ndarray for f in found))  # type: ignore[union-attr]

    def _origin(self, origin: Origin, where: _Where | None, depth: int) -> _Known | None:
        node = origin.node
        if not origin.whole:
            return self._loaded(node, origin.path, where, depth) if isinstance(node, cst.Call) else None
        if isinstance(node, cst.Call):
            return self._call(node, where, depth)
        if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.MatrixMultiply):
            return self._arithmetic(node.left, node.right, node.operator, where, depth)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            return self._arithmetic(node.left, node.comparisons[0].comparator, node.comparisons[0].operator, where, depth)
        if isinstance(node, cst.UnaryOperation):
            return self._rows(node.expression, where, depth)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, where, depth)
        if isinstance(node, cst.Name):
            return self._augmented(node, where, depth)
        return None

    def _loaded(self, call: cst.Call, path, where: _Where | None, depth: int) -> _Known | None:
        """``(x_train, y_train), (x_test, y_test) = keras.datasets.<name>.load_data(...)``."""
        if len(path) != 2 or any(kind != "item" or key not in (0, 1) for kind, key in path):
            return None
        name = self._dataset(call.func)
        if name is None or any(a.star for a in call.args):
            return None
        sizes = loaders.sizes(name, call, lambda e: self._number(e, where, depth, counters=False))
        if sizes is None:
            return None
        train, test = sizes
        # imdb's sequences are a list; the others NumPy arrays.
        return _Known((train, test)[path[0][1]], ndarray=name != "imdb" or path[1][1] == 1)

    def _dataset(self, func: cst.BaseExpression) -> str | None:
        """``mnist`` for ``keras.datasets.mnist.load_data`` (also through a name bound to the
        module: ``mnist = tf.keras.datasets.mnist``)."""
        names = set(self.program.qualified_names(func))
        if isinstance(func, cst.Attribute) and func.attr.value == "load_data" and not names:
            origins = self.values.origins(func.value)
            if len(origins) == 1 and origins[0].whole and isinstance(origins[0].node, cst.BaseExpression):
                names = {f"{n}.load_data" for n in self.program.qualified_names(origins[0].node)}
        return loaders.dataset(names)

    def _call(self, call: cst.Call, where: _Where | None, depth: int) -> _Known | None:
        function = self.values.local_definition(call.func)
        if isinstance(function, cst.FunctionDef):
            inner = (function, call)
            returned = [o for r in self.values.functions[function].returns if r.value is not None for o in self._origins(r.value, inner)] if function in self.values.functions else []
            return self._agree([self._origin(o, inner, depth + 1) for o in returned])
        func = call.func
        names = self.program.qualified_names(func)
        if isinstance(func, cst.Attribute) and not self.values.is_module_reference(func.value):
            method = func.attr.value
            if method in _SAME_ROWS_METHODS:
                found = self._rows(func.value, where, depth)
                return _Known(found.rows, found.ndarray or method in ("astype", "numpy")) if found is not None else None
            if method == "reshape":
                return self._reshaped(func.value, call.args, where, depth)
            if method in _GENERATOR_SIZE and self._is_generator(func.value, where):
                position = _GENERATOR_SIZE[method]
                if position is None:
                    return self._shape_rows(call.args[0].value if call.args else None, where, depth)
                return self._shape_rows(argument_value(call, "size", position), where, depth)
            return None
        if names & _SAME_ROWS and call.args and not call.args[0].star and call.args[0].keyword is None:
            found = self._rows(call.args[0].value, where, depth)
            return _Known(found.rows, any(n.startswith("numpy.") for n in names)) if found is not None else None
        if "numpy.where" in names and len(call.args) == 3 and not any(a.star or a.keyword for a in call.args):
            # Element-wise: the condition and both choices broadcast together.
            return self._elementwise([a.value for a in call.args], where, depth)
        for name in names & _AXIS_CALLS.keys():
            axis = argument_value(call, "axis", _AXIS_CALLS[name])
            value = self._number(axis, where, depth, counters=False) if axis is not None else None
            if call.args and isinstance(value, int) and (value >= 1 or value == -1):
                found = self._rows(call.args[0].value, where, depth)
                return _Known(found.rows, name.startswith("numpy.")) if found is not None else None
            return None
        if "numpy.reshape" in names and len(call.args) >= 2:
            return self._reshaped(call.args[0].value, call.args[1:], where, depth)
        if names & _SHAPE_FIRST and call.args:
            arg = argument(call, "shape", 0)
            return self._shape_rows(arg.value if arg is not None else None, where, depth, ndarray=any(n.startswith("numpy.") for n in names))
        for name in names & _SIZE_AT.keys():
            return self._shape_rows(argument_value(call, "size", _SIZE_AT[name]), where, depth)
        return None

    def _is_generator(self, receiver: cst.BaseExpression, where: _Where | None) -> bool:
        origins = self._origins(receiver, where)
        return bool(origins) and all(
            o.whole and isinstance(o.node, cst.Call) and self.program.qualified_names(o.node.func) & _GENERATORS for o in origins
        )

    def _shape_rows(self, shape: cst.BaseExpression | None, where: _Where | None, depth: int, ndarray: bool = True) -> _Known | None:
        """The first dimension of a shape (``(1000, 8)``, ``[n, 4]``, ``1000``)."""
        if shape is None:
            return None
        if isinstance(shape, (cst.Tuple, cst.List)):
            if not shape.elements or isinstance(shape.elements[0], cst.StarredElement):
                return None
            shape = shape.elements[0].value
        value = self._number(shape, where, depth, counters=False)
        return _Known(value, ndarray) if isinstance(value, int) and value >= 0 else None

    def _reshaped(self, array: cst.BaseExpression, args, where: _Where | None, depth: int) -> _Known | None:
        """``x.reshape(60000, 28, 28, 1)``, ``x.reshape((n, 28, 28, 1))``: the first dimension
        given (not -1, which is whatever the others leave)."""
        if not args or args[0].star or (args[0].keyword is not None and args[0].keyword.value not in ("shape", "newshape")):
            return None
        first = args[0].value
        found = self._shape_rows(first, where, depth)
        if found is None:
            return None
        original = self._rows(array, where, depth)
        # (A reshape that changes the number of examples is as written; keep what kind of
        # array it was.)
        return _Known(found.rows, original.ndarray if original is not None else False)

    def _arithmetic(self, left, right, operator, where: _Where | None, depth: int) -> _Known | None:
        """An array and a number (``x / 255.0``, ``x > .5``), or two arrays of one size. (A
        list times a number repeats it: only a NumPy array is multiplied element-wise here.)"""
        found = self._elementwise([left, right], where, depth)
        if found is None:
            return None
        numbers = [s for s in (left, right) if isinstance(self._number(s, where, depth, counters=False), (int, float))]
        if numbers and not found.ndarray and isinstance(operator, (cst.Multiply, cst.Add)):
            return None
        return found

    def _elementwise(self, operands, where: _Where | None, depth: int) -> _Known | None:
        """Operands broadcast together: numbers, and arrays all of one known size."""
        sides = [self._rows(o, where, depth) for o in operands if not isinstance(self._number(o, where, depth, counters=False), (int, float))]
        return self._agree(sides) if sides else None

    def _augmented(self, name: cst.Name, where: _Where | None, depth: int) -> _Known | None:
        """``x -= mean``: a NumPy array keeps its shape in place; anything else keeps its size
        only with a number (``x /= 255``) and an operator that does not repeat or extend a list."""
        statement = self.program.parent(name)
        if not isinstance(statement, cst.AugAssign) or statement.target is not name:
            return None
        before = self._agree([self._origin(o, where, depth + 1) for o in self._origins(name, where)])
        if before is None:
            return None
        if before.ndarray:
            return before
        if isinstance(statement.operator, (cst.AddAssign, cst.MultiplyAssign)):
            return None
        number = self._number(statement.value, where, depth, counters=False)
        return before if isinstance(number, (int, float)) else None

    def _subscript(self, node: cst.Subscript, where: _Where | None, depth: int) -> _Known | None:
        """A slice of the first dimension, or every example (``x[..., None]``, ``x[:, 0]``)."""
        elements = node.slice
        first = elements[0].slice
        rest = elements[1:]
        if isinstance(first, cst.Index):
            ellipsis = isinstance(first.value, cst.Ellipsis)
            if not ellipsis or not all(isinstance(e.slice, cst.Index) and self._new_axis(e.slice.value) for e in rest):
                return None
            return self._rows(node.value, where, depth)
        # What indexes the other axes must leave the first where it is (arrays as indexes,
        # split by a slice, would move their own axes to the front).
        if not all(isinstance(e.slice, cst.Slice) or self._basic_index(e.slice.value) for e in rest):
            return None
        found = self._rows(node.value, where, depth)
        if found is None:
            return None
        if first.step is not None and self._number(first.step, where, depth, counters=False) != 1:
            return None
        start = self._number(first.lower, where, depth, counters=True) if first.lower is not None else _Linear(0)
        stop = self._number(first.upper, where, depth, counters=True) if first.upper is not None else _Linear(found.rows)
        start, stop = _linear(start), _linear(stop)
        if start is None or stop is None:
            return None
        if not start.terms and not stop.terms:
            return _Known(len(range(found.rows)[start.const : stop.const]), found.ndarray)
        width = stop.plus(start, -1)
        if width.terms or width.const < 0 or start.low < 0 or stop.high > found.rows:
            return None
        return _Known(width.const, found.ndarray)

    def _basic_index(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, (cst.Integer, cst.Ellipsis)) or self._new_axis(value)

    def _new_axis(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Name) and value.value == "None":
            return True
        return "numpy.newaxis" in self.program.qualified_names(value) or "tensorflow.newaxis" in self.program.qualified_names(value)

    # --- numbers -------------------------------------------------------------------------------

    def _number(self, expr: cst.BaseExpression | None, where: _Where | None, depth: int, counters: bool):
        """An int or float constant, a :class:`_Linear` in loop counters (``counters``: the
        counters read in ``expr`` itself), or None."""
        if expr is None or depth > _LIMIT:
            return None
        if isinstance(expr, cst.Integer):
            return int(expr.value, 0)
        if isinstance(expr, cst.Float):
            return float(expr.value)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            value = self._number(expr.expression, where, depth + 1, counters)
            if isinstance(expr.operator, cst.Plus) or value is None:
                return value
            return value.times(-1) if isinstance(value, _Linear) else -value
        if isinstance(expr, cst.BinaryOperation):
            return self._binary(expr, where, depth + 1, counters)
        if isinstance(expr, cst.Call):
            names = self.program.qualified_names(expr.func)
            if "builtins.len" in names and len(expr.args) == 1 and not expr.args[0].star:
                found = self._rows(expr.args[0].value, where, depth + 1)
                return found.rows if found is not None else self._length(expr.args[0].value, where, depth + 1)
            if names & {"builtins.int", "math.floor"} and len(expr.args) == 1 and not expr.args[0].star:
                value = self._number(expr.args[0].value, where, depth + 1, False)
                if not isinstance(value, (int, float)):
                    return None
                return math.floor(value) if "math.floor" in names else int(value)
            return None
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
            # ``x.shape[0]``
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                index = expr.slice[0].slice.value
                if isinstance(index, cst.Integer) and int(index.value, 0) == 0:
                    found = self._rows(expr.value.value, where, depth + 1)
                    return found.rows if found is not None else None
            return None
        if isinstance(expr, cst.Name):
            origins = self._origins(expr, where)
            if counters and len(origins) == 1:
                counter = self._counter(expr, origins[0], where, depth)
                if counter is not None:
                    return counter
            values = [self._number(o.node, where, depth + 1, False) if o.whole and isinstance(o.node, cst.BaseExpression) and o.node is not expr else None for o in origins]
            if values and all(isinstance(v, (int, float)) for v in values) and len(set(values)) == 1:
                return values[0]
            return None
        return None

    # --- lengths of Python values ---------------------------------------------------------------

    def _length(self, expr: cst.BaseExpression, where: _Where | None, depth: int) -> int | None:
        """``len(expr)`` of a string, a tuple, or a list the file fills where it shows how
        many times: read only through ``len()`` (a list given to ``fit`` may be several
        inputs, not examples)."""
        origins = self._origins(expr, where)
        found = {self._python_length(o.node, expr, where, depth) if o.whole else None for o in origins}
        return found.pop() if len(found) == 1 and None not in found else None

    def _python_length(self, node: cst.CSTNode, read: cst.BaseExpression, where: _Where | None, depth: int) -> int | None:
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            value = node.evaluated_value
            return len(value) if isinstance(value, (str, bytes)) else None
        if isinstance(node, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in node.elements):
            return len(node.elements)
        if isinstance(node, cst.List) and not any(isinstance(e, cst.StarredElement) for e in node.elements):
            appended = self._appended(node, read, where, depth)
            return None if appended is None else len(node.elements) + appended
        return None

    def _appended(self, made: cst.List, read: cst.BaseExpression, where: _Where | None, depth: int) -> int | None:
        """How many items the list ``made`` (``name = [...]``) has gained when ``read`` reads
        it: ``name.append(...)`` statements, each in ``for`` loops over ``range(...)`` of known
        length (no ``break``, no ``else``) and ``with`` blocks between it and the assignment's
        block, every loop ended before ``read``; any other use that may change the list (an
        argument of a call other than ``len``/``enumerate``/``zip``/``sorted``/``numpy.array``,
        ``extend``, ``+=``, an item assigned) makes it unknown."""
        name = self.values.assigned_name(made)
        element = self.program.parent(made)
        if name is None and isinstance(element, cst.Element):
            # ``inputs, targets = [], []``
            written = self.program.parent(element)
            if isinstance(written, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in written.elements):
                name = self.values.unpacked_name(written, written.elements.index(element))
        statement = self.program.statement_of(made)
        block = self.program.parent(statement) if statement is not None else None
        if name is None or block is None or self.program.within(read, statement):
            return None
        read_line = self.program.position(read).start.line
        added = 0
        for use in self.values.uses(name):
            if self.program.within(read, use) or use is read:
                continue
            parent = self.program.parent(use)
            if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value == "append":
                count = self._appends(parent, block, read_line, where, depth)
                if count is None:
                    return None
                added += count
            elif not self._reads_only(use, parent):
                return None
        return added

    def _appends(self, attribute: cst.Attribute, block: cst.CSTNode, read_line: int, where: _Where | None, depth: int) -> int | None:
        """How many times ``name.append(x)`` (``attribute`` is ``name.append``), a statement of
        its own, runs before the line ``read_line``."""
        call = self.program.parent(attribute)
        if not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].star or call.args[0].keyword is not None:
            return None
        expr = self.program.parent(call)
        if not isinstance(expr, cst.Expr):
            return None
        times = 1
        node: cst.CSTNode | None = self.program.parent(self.program.parent(expr))  # the statement line's block
        while node is not None and node is not block:
            if isinstance(node, cst.For):
                count = self._range_length(node, where, depth)
                if count is None or node.orelse is not None or any(True for _ in _breaks(node.body)):
                    return None
                if self.program.position(node).end.line >= read_line:
                    return None
                times *= count
            elif not isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.With)):
                return None
            node = self.program.parent(node)
        if node is None or self.program.position(expr).start.line >= read_line:
            return None
        return times

    def _range_length(self, loop: cst.For, where: _Where | None, depth: int) -> int | None:
        """How many times ``for ... in range(...)`` runs."""
        iterable = loop.iter
        if not isinstance(iterable, cst.Call):
            return None
        found = self._range(iterable, where, depth)
        return len(found) if found is not None else None

    def _range(self, call: cst.Call, where: _Where | None, depth: int) -> range | None:
        """The ``range`` a ``range(...)`` call with integer bounds the file shows makes."""
        if "builtins.range" not in self.program.qualified_names(call.func):
            return None
        args = call.args
        if not 1 <= len(args) <= 3 or any(a.star or a.keyword for a in args):
            return None
        bounds = [self._number(a.value, where, depth + 1, False) for a in args]
        if not all(isinstance(b, int) for b in bounds) or len(bounds) == 3 and bounds[2] == 0:
            return None
        return range(*bounds)  # type: ignore[arg-type]

    def _reads_only(self, use: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
        """Whether ``use`` (a read of a list) only reads it: the argument of ``len``,
        ``enumerate``, ``zip``, ``sorted``, ``list``/``tuple``, ``numpy.array``/``asarray``; the
        iterable of a ``for`` or a comprehension; an item read."""
        if isinstance(parent, cst.Arg) and parent.value is use and not parent.star:
            call = self.program.parent(parent)
            return isinstance(call, cst.Call) and bool(self.program.qualified_names(call.func) & _READING_CALLS)
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is use:
            return True
        if isinstance(parent, cst.Subscript) and parent.value is use:
            holder = self.program.parent(parent)
            return not (
                isinstance(holder, (cst.AssignTarget, cst.Del)) or isinstance(holder, cst.AugAssign) and holder.target is parent
            )
        return False

    def _binary(self, expr: cst.BinaryOperation, where: _Where | None, depth: int, counters: bool):
        left = self._number(expr.left, where, depth, counters)
        right = self._number(expr.right, where, depth, counters)
        if left is None or right is None:
            return None
        operator = expr.operator
        if isinstance(left, _Linear) or isinstance(right, _Linear):
            # Only what keeps it linear, in integers.
            if isinstance(left, float) or isinstance(right, float):
                return None
            if isinstance(operator, (cst.Add, cst.Subtract)):
                return _linear(left).plus(_linear(right), 1 if isinstance(operator, cst.Add) else -1)  # type: ignore[union-attr]
            if isinstance(operator, cst.Multiply):
                if isinstance(left, int):
                    return right.times(left)  # type: ignore[union-attr]
                if isinstance(right, int):
                    return left.times(right)
            return None
        try:
            if isinstance(operator, cst.Add):
                return left + right
            if isinstance(operator, cst.Subtract):
                return left - right
            if isinstance(operator, cst.Multiply):
                return left * right
            if isinstance(operator, cst.Divide):
                return left / right
            if isinstance(operator, cst.FloorDivide):
                return left // right
            if isinstance(operator, cst.Modulo):
                return left % right
        except (ZeroDivisionError, OverflowError):
            return None
        return None

    def _counter(self, read: cst.Name, origin: Origin, where: _Where | None, depth: int) -> _Linear | None:
        """``i`` of ``for i in range(k)``: a counter within the range, one per binding (two
        reads of it in one expression see one value)."""
        node = origin.node
        if origin.path != (("item", ANY),) or not isinstance(node, cst.Call) or "builtins.range" not in self.program.qualified_names(node.func):
            return None
        bindings = self.values.reaching_bindings(read)
        if not bindings or len(bindings) != 1:
            return None
        counted = self._range(node, where, depth)
        if counted is None or counted.step <= 0 or counted.stop <= counted.start:
            return None
        return _Linear(0, ((id(bindings[0]), 1, counted.start, counted.stop - 1),))


def _linear(value) -> _Linear | None:
    if isinstance(value, _Linear):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return _Linear(value)
    return None


def _breaks(body: cst.CSTNode):
    """The ``break`` statements that leave the loop whose body is ``body`` (not those of
    loops inside it)."""
    stack = [body]
    while stack:
        node = stack.pop()
        for child in node.children:
            if isinstance(child, cst.Break):
                yield child
            elif not isinstance(child, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                stack.append(child)
