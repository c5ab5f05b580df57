"""What a module of the project defines at its top level, summarised once per content.

A :class:`ModuleSummary` is made from a module's text alone (its names resolved through its own
imports) and kept in memory by the digest of that text: every file that imports the module
reads the same summary, and the module is parsed once per process. For each top-level name it
holds a :class:`Definition`:

- a function: whether it returns a Keras model, and made by what (``keras.Sequential``,
  ``keras.Model`` — a functional model —, a model class of the module, ``load_model``);
  whether it compiles it; whether it trains (``fit``, an optimizer update) and what else
  keeps it from being a function that *only builds* a model — one a migration may call in
  ``strategy.scope()`` unseen (a strategy or device placement of its own, ``add_loss``, a
  layer built for a fixed batch, a compiled loss or optimizer whose behaviour over replicas
  autofix judges only where it can see it); and the imported names it calls, which the
  importer's side resolves;
- a class: whether it is a Keras model (a subclass of ``keras.Model``, directly or through
  classes of the module) and the line of its own ``train_step``, if any;
- an assignment: its value when it is an integer constant (``BATCH_SIZE = 64``);
- an import: where the name comes from (a package's ``__init__.py`` re-exporting
  ``from .model import build``).

Judgements are conservative: what is not recognised is named as a problem, not assumed away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis.core import guards
from autofix.analysis.program import Program
from autofix.analysis.project.layout import digest
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.tf.keras2_only import REMOVED_METHODS, internal_keras2_class
from autofix.tf.losses import ELEMENTWISE, MEANS, SUMS
from autofix.tf.symbols import NO_KERAS_OBJECTS, Kind, keras_kind


# Calls that train what they are called on.
TRAINING_METHODS = frozenset({"fit", "fit_generator", "train_on_batch", "apply_gradients", "minimize"})
# Keyword arguments of a layer or model that fix the batch it takes.
FIXED_BATCH = ("batch_size", "batch_input_shape")
# Keyword arguments of an optimizer that clip each replica's share on Keras 3.
CLIPS = ("clipnorm", "clipvalue", "global_clipnorm")
# Dataset methods that batch, and methods that keep the batches of what they are called on.
BATCHING = ("batch", "padded_batch")
KEEPS_BATCHES = frozenset({"prefetch", "repeat", "cache", "take", "skip", "map", "filter", "ignore_errors", "with_options"})
# What makes a ``tf.data`` dataset, the methods that give one back, and those that distribute it.
DATASET_MAKERS = ("tensorflow.data.", "tensorflow_datasets.load")
DATASET_METHODS = frozenset(
    {*BATCHING, *KEEPS_BATCHES, "shuffle", "unbatch", "rebatch", "interleave", "flat_map", "zip", "window", "shard", "apply",
     "concatenate", "enumerate", "snapshot"}
)
DISTRIBUTES = frozenset(
    {"experimental_distribute_dataset", "distribute_datasets_from_function", "experimental_distribute_datasets_from_function"}
)
# Methods of a model class that change what fit does with a batch or a loss.
TRAINING_OVERRIDES = ("train_step", "compute_loss", "test_step")


@dataclass(frozen=True)
class Definition:
    """A top-level name of a module, summarised."""

    name: str
    # "function", "class", "assignment" or "import".
    kind: str
    line: int
    # A function: what makes the Keras model it returns (None: it returns none autofix sees).
    returns_model: str | None = None
    compiles: bool = False
    # Why it trains, when it does (``calls fit (line 12)``).
    trains: str | None = None
    # Why it does more than build a model: (line, reason), trains included.
    problems: tuple[tuple[int, str], ...] = ()
    # Imported names it calls that may be the project's own code: (qualified name, line).
    calls_out: tuple[tuple[str, int], ...] = ()
    # A class: a Keras model class, and the line of its own train_step (or compute_loss...).
    keras_model: bool = False
    train_step: int | None = None
    # An assignment: its integer value.
    constant: int | None = None
    # An import: (module, level, name) it re-exports (name None: the module itself).
    source: tuple[str, int, str | None] | None = None
    # A function returning a dataset it batches with one of its parameters, read nowhere
    # else in it (``def make_dataset(batch_size): ... .batch(batch_size)``): that parameter's
    # name and position (None: keyword only). What a call passes there is the batch.
    batch_parameter: tuple[str, int | None] | None = None
    # An assignment: its value when it is a number (``LEARNING_RATE = 1e-3``).
    number: float | None = None
    # Problems that hold unless a name read from another module of the project is a number
    # written there (``Adam(config.LEARNING_RATE)``): (line, reason, qualified name). The
    # importer's side resolves them.
    constant_checks: tuple[tuple[int, str, str], ...] = ()
    # A class: its methods that train, themselves or through other methods of the class they
    # call on ``self``: (method, line of its def, why).
    training_methods: tuple[tuple[str, int, str], ...] = ()
    # A model class with its own train_step: the lines of the means over the whole batch in
    # it (``tf.reduce_mean(...)`` without an axis), which a step run on each replica must
    # divide by the replicas (what TFD004 asks of a step).
    step_means: tuple[int, ...] = ()
    # A function every return of which is a ``tf.data`` dataset (a ``tf.data`` or TFDS maker
    # and dataset methods, through names bound once in it) that it does not distribute: True;
    # returning tuples instead, the positions that are such a dataset in every one of them.
    returns_dataset: bool = False
    datasets_at: tuple[int, ...] = ()
    # A class: its methods that return such a dataset (``TFRecordDataGenerator(...).generate()``).
    dataset_methods: tuple[str, ...] = ()
    # A function returning a Keras model: each expression in its own body that makes one
    # (``VGGLoss()`` of ``loss = VGGLoss()`` in a branch of ``if name == "vgg":``, or the call
    # of a function of the module that returns one), nodes of the module as :func:`parsed`
    # reads it. A call that passes constants making every one of them dead (``get_loss("mae")``)
    # returns no model (:func:`makes_model`).
    model_makers: tuple[cst.CSTNode, ...] = field(default=(), compare=False, repr=False)

    @property
    def only_builds(self) -> bool:
        return self.kind == "function" and self.returns_model is not None and not self.problems

    def describe(self) -> str:
        """What it is, in a few words."""
        if self.kind == "function":
            if self.returns_model is None:
                what = "a function that returns no Keras model autofix can see"
            else:
                what = f"a function returning a Keras model built from {self.returns_model}"
                if self.compiles:
                    what += ", which it compiles"
            if self.trains:
                what += f"; it trains ({self.trains})"
            return what
        if self.kind == "class":
            if not self.keras_model:
                return "a class"
            if self.train_step is not None:
                return f"a keras.Model subclass with its own training (line {self.train_step})"
            return "a keras.Model subclass"
        if self.kind == "assignment":
            return f"the constant {self.constant}" if self.constant is not None else "a variable"
        return "an import"


@dataclass(eq=False)
class ModuleSummary:
    """The top-level definitions of one module's text."""

    text: str
    definitions: dict[str, Definition] = field(default_factory=dict)
    # ``from x import *``: (module, level) of each.
    star_imports: list[tuple[str, int]] = field(default_factory=list)
    # ``__all__`` when it is a literal list of strings.
    exported: tuple[str, ...] | None = None
    # Why the module could not be read (it does not parse).
    error: str | None = None
    # What in the module's own code runs only on Keras 2 (TensorFlow 2.15 or older): its line
    # and what it is (``calls experimental_run_v2()``). One program runs one Keras, so a module
    # importing this one runs Keras 2 too.
    keras2: tuple[int, str] | None = None

    @cached_property
    def public(self) -> list[str]:
        """The names ``from module import *`` binds."""
        if self.exported is not None:
            return list(self.exported)
        return [name for name in self.definitions if not name.startswith("_")]


_SUMMARIES: dict[str, ModuleSummary] = {}
# The module each content parses to (None: it does not parse), shared by the summary, the
# program of the module alone and the programs of it with a path (:mod:`.imports`): a module
# is parsed once per content, whichever asks first.
_PARSED: dict[str, cst.Module | None] = {}
# The program of the module alone (no path), once per content.
_ALONE: dict[str, Program | None] = {}


def summary_of(data: bytes) -> ModuleSummary:
    """The summary of a module whose bytes are ``data`` (made once per content)."""
    key = digest(data)
    found = _SUMMARIES.get(key)
    if found is None:
        text = _text_of(data)
        module = parsed(key, text)
        # A program of its own (not kept): what the summariser derives from it is not needed
        # once the summary is made.
        found = _SUMMARIES[key] = _summarise(text, None if module is None else Program(module, text))
    return found


def parsed(key: str, text: str) -> cst.Module | None:
    """``text`` (whose bytes have the digest ``key``) parsed, once per content."""
    if key not in _PARSED:
        try:
            _PARSED[key] = cst.parse_module(text)
        except Exception:  # a module that does not parse tells nothing
            _PARSED[key] = None
    return _PARSED[key]


def program_alone(key: str, text: str) -> Program | None:
    """The program of ``text`` (digest ``key``) read alone, without a path, once per content."""
    if key not in _ALONE:
        module = parsed(key, text)
        _ALONE[key] = None if module is None else Program(module, text)
    return _ALONE[key]


def _text_of(data: bytes) -> str:
    """``data`` decoded as Python reads it (BOM, coding declaration, else UTF-8): a fix that
    edits the module too writes back this text."""
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)  # ("utf-8-sig" drops a BOM, as autofix.sourcefile does)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return data.decode("utf-8", errors="replace")


def _summarise(text: str, program: Program | None) -> ModuleSummary:
    summary = ModuleSummary(text)
    if program is None:
        try:
            cst.parse_module(text)
        except Exception as exc:  # a module that does not parse tells nothing
            summary.error = f"it does not parse ({type(exc).__name__})"
            return summary
        summary.error = "it does not parse"
        return summary
    _Summariser(program, summary).run()
    return summary


class _Summariser:
    def __init__(self, program: Program, summary: ModuleSummary) -> None:
        self.program = program
        self.summary = summary
        body = program.module.body
        self.functions = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
        self.classes = {s.name.value: s for s in body if isinstance(s, cst.ClassDef)}
        self._model_classes: dict[str, bool] = {}
        self._scanned: dict[str, tuple[list, list, list, bool]] = {}
        # Problems that a number of another module of the project clears: the name read.
        self._deferred: dict[tuple[int, str], str] = {}
        self._bindings: dict[str, int] | None = None
        self._delegating: set[str] = set()
        # (function, name, names assumed datasets) -> whether the name is a dataset there.
        self._datasets: dict[tuple, bool] = {}
        # A function of the module -> what makes the Keras model it returns (None: none).
        self._returned_models: dict[str, str | None] = {}

    def _keras2(self) -> tuple[int, str] | None:
        """The first thing in the module that only Keras 2 runs: a method TensorFlow 2.16+ no
        longer has, an object of TensorFlow's internal Keras 2 (``tensorflow.python.keras``),
        TensorFlow Addons (which needs Keras 2)."""
        program = self.program
        for call, _owner in program.index.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in REMOVED_METHODS:
                return program.line(call), f"calls {func.attr.value}(), which TensorFlow 2.16+ no longer has"
            for name in program.index.qualified_names(func):
                made = internal_keras2_class(name)
                if made is not None:
                    return program.line(call), f"makes {made}() of tensorflow.python.keras, TensorFlow's internal Keras 2"
        for binding in program.index.bindings.values():
            if binding.kind == "import" and binding.path is not None and binding.path.split(".")[0] == "tensorflow_addons":
                return program.line(binding.node), "imports tensorflow_addons, which needs Keras 2"
        return None

    def run(self) -> None:
        program, summary = self.program, self.summary
        summary.keras2 = self._keras2()
        for statement in program.module.body:
            line = program.line(statement)
            if isinstance(statement, cst.FunctionDef):
                summary.definitions[statement.name.value] = self._function(statement)
            elif isinstance(statement, cst.ClassDef):
                name = statement.name.value
                keras = self._is_model_class(name)
                problems, calls_out, trains, compiles = self._scan(name)
                summary.definitions[name] = Definition(
                    name,
                    "class",
                    line,
                    compiles=compiles,
                    trains=trains[0] if trains else None,
                    problems=tuple(dict.fromkeys(problems)),
                    calls_out=tuple(dict.fromkeys(calls_out)),
                    keras_model=keras,
                    train_step=self._override(statement) if keras else None,
                    constant_checks=self._checks(problems),
                    training_methods=self._training_methods(statement),
                    step_means=self._step_means(statement) if keras else (),
                    dataset_methods=self._dataset_methods(statement),
                )
            elif isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._simple(small, line)

    def _simple(self, small: cst.BaseSmallStatement, line: int) -> None:
        summary = self.summary
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            value = small.value
            for target in targets:
                if not isinstance(target, cst.Name):
                    continue
                if target.value == "__all__" and isinstance(value, (cst.List, cst.Tuple)):
                    items = [e.value for e in value.elements]
                    if all(isinstance(i, cst.SimpleString) for i in items):
                        summary.exported = tuple(i.evaluated_value for i in items)  # type: ignore[union-attr]
                    continue
                constant = None
                if isinstance(value, cst.Integer):
                    constant = int(value.evaluated_value)
                number = None
                if isinstance(value, (cst.Integer, cst.Float)) and self._bound_once(target.value):
                    number = float(value.evaluated_value)
                summary.definitions[target.value] = Definition(target.value, "assignment", line, constant=constant, number=number)
        elif isinstance(small, cst.ImportFrom):
            module = self.program.module.code_for_node(small.module) if small.module is not None else ""
            level = len(small.relative)
            if isinstance(small.names, cst.ImportStar):
                summary.star_imports.append((module, level))
                return
            for alias in small.names:
                name = self.program.module.code_for_node(alias.name)
                bound = alias.asname.name.value if alias.asname is not None else name  # type: ignore[union-attr]
                summary.definitions[bound] = Definition(bound, "import", line, source=(module, level, name))
        elif isinstance(small, cst.Import):
            for alias in small.names:
                name = self.program.module.code_for_node(alias.name)
                if alias.asname is not None:
                    bound = alias.asname.name.value  # type: ignore[union-attr]
                    summary.definitions[bound] = Definition(bound, "import", line, source=(name, 0, None))

    def _bound_once(self, name: str) -> bool:
        """Whether ``name`` is bound by one assignment in the whole module (in any block or
        function: a second binding may be the value read)."""
        if self._bindings is None:
            counts: dict[str, int] = {}
            for node in nodes_in(self.program.module, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.Global, cst.NamedExpr)):
                if isinstance(node, cst.Assign):
                    targets = [n for t in node.targets for n in nodes_in(t.target, cst.Name)]
                elif isinstance(node, cst.Global):
                    targets = [n.name for n in node.names]
                else:
                    targets = list(nodes_in(node.target, cst.Name))
                for target in targets:
                    counts[target.value] = counts.get(target.value, 0) + 1
            self._bindings = counts
        return self._bindings.get(name, 0) == 1

    # --- classes -----------------------------------------------------------------------------------

    def _step_means(self, cls: cst.ClassDef) -> tuple[int, ...]:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        steps = [m for m in body if isinstance(m, cst.FunctionDef) and m.name.value == "train_step"]
        lines = []
        for step in steps:
            for call in nodes_in(step.body, cst.Call):
                if self.program.qualified_names(call.func) & MEANS:
                    axis = argument_value(call, "axis", 1)
                    if axis is None or (isinstance(axis, cst.Name) and axis.value == "None"):
                        lines.append(self.program.line(call))
        return tuple(dict.fromkeys(lines))

    def _dataset_methods(self, cls: cst.ClassDef) -> tuple[str, ...]:
        """The methods of ``cls`` every return of which is a plain ``tf.data`` dataset."""
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        return tuple(
            m.name.value for m in body
            if isinstance(m, cst.FunctionDef) and self._returned_datasets(m).get("returns_dataset", False)
        )

    def _training_methods(self, cls: cst.ClassDef) -> tuple[tuple[str, int, str], ...]:
        """The methods of ``cls`` that train (a training call on something other than a
        module, or a call of such a method of the class on ``self``)."""
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        methods = {m.name.value: m for m in body if isinstance(m, cst.FunctionDef)}
        direct: dict[str, str] = {}
        calls: dict[str, set[str]] = {}
        for name, method in methods.items():
            calls[name] = set()
            for call in nodes_in(method.body, cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute):
                    continue
                if func.attr.value in TRAINING_METHODS and not self.program.qualified_names(func) and name not in direct:
                    direct[name] = f"calls {func.attr.value}, line {self.program.line(call)}"
                if isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in methods:
                    calls[name].add(func.attr.value)
        found = dict(direct)
        changed = True
        while changed:
            changed = False
            for name in methods:
                if name in found:
                    continue
                inner = next((c for c in sorted(calls[name]) if c in found), None)
                if inner is not None:
                    found[name] = f"through self.{inner}(): {found[inner]}"
                    changed = True
        return tuple((name, self.program.line(methods[name]), found[name]) for name in methods if name in found)

    def _is_model_class(self, name: str) -> bool:
        if name in self._model_classes:
            return self._model_classes[name]
        self._model_classes[name] = False
        cls = self.classes[name]
        found = False
        for base in cls.bases:
            names = self.program.qualified_names(base.value)
            if any(keras_kind(n) is Kind.MODEL for n in names):
                found = True
            elif isinstance(base.value, cst.Name) and base.value.value in self.classes and self._is_model_class(base.value.value):
                found = True
        self._model_classes[name] = found
        return found

    def _override(self, cls: cst.ClassDef) -> int | None:
        """The line of the class's own ``train_step`` (or ``compute_loss``, ``test_step``), or
        of one inherited from a class of the module."""
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for statement in body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value in TRAINING_OVERRIDES:
                return self.program.line(statement)
        for base in cls.bases:
            if isinstance(base.value, cst.Name) and base.value.value in self.classes and base.value.value != cls.name.value:
                found = self._override(self.classes[base.value.value])
                if found is not None:
                    return found
        return None

    # --- functions ---------------------------------------------------------------------------------

    def _function(self, function: cst.FunctionDef) -> Definition:
        problems, calls_out, trains, compiles = self._scan(function.name.value)
        makers = self._model_makers(function)
        made = makers[0][0] if makers else None
        return Definition(
            function.name.value,
            "function",
            self.program.line(function),
            returns_model=made,
            model_makers=tuple(node for _, node in makers),
            compiles=compiles,
            trains=trains[0] if trains else None,
            problems=tuple(dict.fromkeys(problems)),
            calls_out=tuple(dict.fromkeys(calls_out)),
            batch_parameter=None if problems else self._batch_parameter(function),
            constant_checks=self._checks(problems),
            **self._returned_datasets(function),
        )

    def _returned_datasets(self, function: cst.FunctionDef) -> dict:
        """``returns_dataset`` / ``datasets_at`` of ``function`` (see :class:`Definition`)."""
        stop = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
        for call in nodes_in(function.body, cst.Call, stop=stop):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in DISTRIBUTES:
                return {}
        returns = [r.value for r in nodes_in(function.body, cst.Return, stop=stop)]
        if not returns or any(value is None for value in returns):
            return {}
        if all(self._a_dataset(value, function, 0) for value in returns):  # type: ignore[arg-type]
            return {"returns_dataset": True}
        sizes = {len(v.elements) if isinstance(v, cst.Tuple) else None for v in returns}  # type: ignore[union-attr]
        if len(sizes) != 1 or None in sizes:
            return {}
        (size,) = sizes
        at = tuple(
            i for i in range(size)  # type: ignore[arg-type]
            if all(self._a_dataset(v.elements[i].value, function, 0) for v in returns)  # type: ignore[union-attr]
        )
        return {"datasets_at": at} if at else {}

    def _a_dataset(self, expr: cst.BaseExpression, function: cst.FunctionDef, depth: int, assumed: frozenset[str] = frozenset()) -> bool:
        """Whether ``expr`` is a ``tf.data`` dataset by how it is made: a maker, dataset methods
        called on one, a name every assignment in ``function`` binds to one (``ds = ds.map(f)``
        rebinding it; at least one of them made by a maker, not by the name itself)."""
        if depth > 12:
            return False
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in assumed:
                return True
            key = (id(function), name, assumed)
            if key not in self._datasets:
                self._datasets[key] = False  # while it is decided
                values = [
                    a.value
                    for a in nodes_in(function.body, cst.Assign, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef))
                    if any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)
                ]
                # Every binding a dataset (the name itself assumed one), and one not made from it.
                grounded = any(_chain_root(v) is not None and _chain_root(v) != name for v in values)  # type: ignore[arg-type]
                self._datasets[key] = grounded and all(self._a_dataset(v, function, depth + 1, assumed | {name}) for v in values)
            return self._datasets[key]
        if not isinstance(expr, cst.Call):
            return False
        if any(n.startswith(DATASET_MAKERS) for n in self.program.qualified_names(expr.func)):
            return True
        func = expr.func
        if isinstance(func, cst.Name) and func.value in self.functions and func.value not in self._delegating:
            # ``return make_dataset(b)``: a function of the module that returns one.
            self._delegating.add(func.value)
            try:
                return self._returned_datasets(self.functions[func.value]).get("returns_dataset", False)
            finally:
                self._delegating.discard(func.value)
        return isinstance(func, cst.Attribute) and func.attr.value in DATASET_METHODS and self._a_dataset(func.value, function, depth + 1, assumed)

    def _checks(self, problems: list[tuple[int, str]]) -> tuple[tuple[int, str, str], ...]:
        return tuple(dict.fromkeys((line, reason, self._deferred[(line, reason)]) for line, reason in problems if (line, reason) in self._deferred))

    def _batch_parameter(self, function: cst.FunctionDef) -> tuple[str, int | None] | None:
        """The parameter every dataset ``function`` returns is batched with (``.batch(P)``,
        then only methods that keep its batches), when nothing else in it reads that
        parameter: scaling what a call passes there scales that batch and nothing else."""
        params = function.params
        positional = [*params.posonly_params, *params.params]
        returns = [r.value for r in nodes_in(function.body, cst.Return, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef))]
        if not returns or any(value is None for value in returns):
            return None
        found: set[str] = set()
        batching: list[cst.Call] = []
        for value in returns:
            made = self._batched_with(value, function, 0)  # type: ignore[arg-type]
            if made is None:
                return None
            call, batch = made
            if not isinstance(batch, cst.Name):
                return None
            found.add(batch.value)
            batching.append(call)
        if len(found) != 1 or len(batching) != 1:
            return None
        (name,) = found
        reads = [n for n in nodes_in(function.body, cst.Name) if n.value == name]
        if len(reads) != 1:
            return None  # read elsewhere too (a step count, a log): not only the batch
        for index, param in enumerate(positional):
            if param.name.value == name:
                return name, index
        if any(param.name.value == name for param in params.kwonly_params):
            return name, None
        return None

    def _batched_with(self, expr: cst.BaseExpression, function: cst.FunctionDef, depth: int) -> tuple[cst.Call, cst.BaseExpression | None] | None:
        """Where the dataset ``expr`` is batched and with what: ``X.batch(E)`` followed by
        methods that keep its batches, through names bound once in ``function``, or a call of
        another function of the module that returns a dataset it batches with a parameter
        (``return get_ds(batch_size)``: what the call passes there)."""
        if depth > 8:
            return None
        if isinstance(expr, cst.Name):
            value = self._value(expr, function)
            return None if value is expr else self._batched_with(value, function, depth + 1)
        if not isinstance(expr, cst.Call):
            return None
        if isinstance(expr.func, cst.Name) and expr.func.value in self.functions and expr.func.value != function.name.value:
            if expr.func.value in self._delegating:
                return None
            self._delegating.add(expr.func.value)
            try:
                inner = self._batch_parameter(self.functions[expr.func.value])
            finally:
                self._delegating.discard(expr.func.value)
            if inner is None or any(a.star for a in expr.args):
                return None
            name, position = inner
            keyword = [a for a in expr.args if a.keyword is not None and a.keyword.value == name]
            positional = [a for a in expr.args if a.keyword is None]
            arg = keyword[0] if keyword else (positional[position] if position is not None and position < len(positional) else None)
            return (expr, arg.value) if arg is not None else None
        if not isinstance(expr.func, cst.Attribute):
            return None
        method = expr.func.attr.value
        if method in BATCHING:
            return expr, argument_value(expr, "batch_size", 0)
        if method in KEEPS_BATCHES:
            return self._batched_with(expr.func.value, function, depth + 1)
        return None

    def _scan(self, name: str) -> tuple[list, list, list, bool]:
        """What the function (or class) ``name`` of the module does, with what the module's
        own functions and classes it calls do: (problems, calls out, why it trains,
        compiles)."""
        if name in self._scanned:
            return self._scanned[name]
        problems: list[tuple[int, str]] = []
        calls_out: list[tuple[str, int]] = []
        trains: list[str] = []
        compiles = False
        self._scanned[name] = (problems, calls_out, trains, False)  # (recursion)
        node = self.functions.get(name) or self.classes.get(name)
        if isinstance(node, cst.ClassDef) and self._is_model_class(name):
            line = self._override(node)
            if line is not None:
                problems.append((line, f"the model class {name} has its own training (line {line})"))
        for call in nodes_in(node, cst.Call) if node is not None else ():
            line = self.program.line(call)
            func = call.func
            names = self.program.qualified_names(func)
            attr = func.attr.value if isinstance(func, cst.Attribute) else None
            if any(n.startswith("tensorflow.distribute") for n in names):
                problems.append((line, f"it uses tf.distribute itself (line {line})"))
                continue
            if "tensorflow.device" in names:
                problems.append((line, f"it places work on devices itself (tf.device, line {line})"))
                continue
            kind = next((k for k in (keras_kind(n) for n in names) if k is not None), None)
            if kind in (Kind.LAYER, Kind.MODEL):
                for keyword in FIXED_BATCH:
                    if argument_value(call, keyword) is not None:
                        problems.append((line, f"a layer is built for a fixed batch ({keyword}=, line {line})"))
                stateful = argument_value(call, "stateful")
                if isinstance(stateful, cst.Name) and stateful.value == "True":
                    problems.append((line, f"a layer is stateful (line {line}): it carries its state from batch to batch"))
                continue
            if kind is not None:
                continue
            if names:
                if isinstance(func, cst.Name) and func.value in (self.functions.keys() | self.classes.keys()):
                    pass
                elif not any(n.split(".", 1)[0] in NO_KERAS_OBJECTS or n.startswith("keras") or n.startswith("builtins") for n in names):
                    calls_out.extend((n, line) for n in sorted(names))
            if isinstance(func, cst.Name) and (func.value in self.functions or func.value in self.classes) and func.value != name:
                inner = self._scan(func.value)
                problems.extend(inner[0])
                calls_out.extend(inner[1])
                trains.extend(inner[2])
                compiles = compiles or inner[3]
                continue
            if attr in TRAINING_METHODS and not names:
                trains.append(f"calls {attr}, line {line}")
                problems.append((line, f"it trains ({attr}, line {line})"))
            elif attr == "add_loss" and not names:
                problems.append((line, f"it adds a loss with add_loss (line {line}), which autofix does not judge in another module"))
            elif attr == "compile" and not names:
                compiles = True
                problems.extend(self._compile_problems(call, node))
        self._scanned[name] = (problems, calls_out, trains, compiles)
        return self._scanned[name]

    def _compile_problems(self, call: cst.Call, scope: cst.CSTNode | None) -> list[tuple[int, str]]:
        line = self.program.line(call)
        found = []
        loss = argument_value(call, "loss", 1)
        if loss is not None and not self._keras_loss(self._value(loss, scope)):
            why = self._loss_function_problem(self._value(loss, scope), scope)
            if why is not None:
                code = " ".join(self.program.module.code_for_node(loss).split())
                found.append((line, f"it compiles with the loss {code} (line {line}), {why}"))
        optimizer = argument_value(call, "optimizer", 0)
        for value in self._made(self._value(optimizer, scope), scope) if optimizer is not None else ():
            problem = self._optimizer_problem(value, line)
            if problem is not None:
                found.append((line, problem))
                break
        return found

    def _made(self, expr: cst.BaseExpression, scope: cst.CSTNode | None) -> list[cst.BaseExpression]:
        """What ``expr`` is: itself, or what a function defined in ``scope`` (or at the top of
        the module) that it calls returns (``get_opt()`` -> ``optimizers.Adam(lr)``)."""
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)):
            return [expr]
        name = expr.func.value
        inner = [f for f in nodes_in(scope, cst.FunctionDef) if f.name.value == name] if scope is not None else []
        function = inner[0] if len(inner) == 1 else self.functions.get(name)
        if function is None:
            return [expr]
        returns = [r.value for r in nodes_in(function.body, cst.Return, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef)) if r.value is not None]
        return returns or [expr]

    def _value(self, expr: cst.BaseExpression, scope: cst.CSTNode | None) -> cst.BaseExpression:
        """A name bound once in ``scope`` (the function) to a value: that value."""
        if not isinstance(expr, cst.Name) or scope is None:
            return expr
        values = [
            a.value
            for a in nodes_in(scope, cst.Assign)
            if any(isinstance(t.target, cst.Name) and t.target.value == expr.value for t in a.targets)
        ]
        return values[0] if len(values) == 1 else expr

    def _keras_loss(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            return True
        if isinstance(expr, (cst.List, cst.Tuple)):
            return all(self._keras_loss(e.value) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return all(isinstance(e, cst.DictElement) and self._keras_loss(e.value) for e in expr.elements)
        target = expr.func if isinstance(expr, cst.Call) else expr
        names = self.program.qualified_names(target)
        if not names or not all(n.startswith("keras.losses.") for n in names):
            return False
        if isinstance(expr, cst.Call):
            # A loss object reduced by Keras: not one summed over the batch.
            reduction = argument_value(expr, "reduction")
            return reduction is None
        return True

    # --- loss functions of the module -----------------------------------------------------------

    def _loss_function_problem(self, expr: cst.BaseExpression, scope: cst.CSTNode | None) -> str | None:
        """Why a loss ``compile`` is given may not be called in ``strategy.scope()`` unseen,
        or None for a function of the module (nested in the factory or at its top level) that
        returns one loss per example: what ``fit`` divides by the replicas itself (the
        judgement :mod:`autofix.analysis.migration.compiled_losses` makes in one file, made
        here on the module that compiles)."""
        function = self._loss_function(expr, scope)
        if function is None:
            return "whose reduction over the batch autofix judges only in the file it migrates"
        name = function.name.value
        params = function.params
        if params.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or params.star_kwarg is not None or len(params.params) < 2:
            return f"the loss function {name} (line {self.program.line(function)}) does not take (y_true, y_pred)"
        returns = [r for r in nodes_in(function.body, cst.Return, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef))]
        if not returns or any(r.value is None for r in returns):
            return f"the loss function {name} (line {self.program.line(function)}) returns no loss on some path"
        for ret in returns:
            value = self._value(ret.value, function)  # type: ignore[arg-type]
            kind = self._per_example(value, {p.name.value for p in params.params}, function, 0)
            line = self.program.line(ret)
            if kind in ("mean", "sum"):
                what = "a mean" if kind == "mean" else "a sum"
                return (
                    f"whose function {name} returns {what} over the whole batch (line {line}): Keras 3 does not divide "
                    "a scalar loss by the replicas (it divides one loss per example), so on N replicas fit would train "
                    "at N x the average of the original's gradients over the replicas' shares (measured: 2.000 x on 2); "
                    f"return one loss per example from {name} (a mean over all but the batch axis), then migrate"
                )
            if kind is None:
                return (
                    f"whose function {name} returns a value on line {line} that autofix cannot show to be one loss per "
                    "example (a mean over the whole batch is not divided by the replicas on Keras 3)"
                )
        return None

    def _loss_function(self, expr: cst.BaseExpression, scope: cst.CSTNode | None) -> cst.FunctionDef | None:
        if not isinstance(expr, cst.Name):
            return None
        inner = [f for f in nodes_in(scope, cst.FunctionDef) if f.name.value == expr.value] if scope is not None else []
        if len(inner) == 1:
            return inner[0]
        if inner:
            return None
        return self.functions.get(expr.value)

    def _per_example(self, expr: cst.BaseExpression, params: set[str], function: cst.FunctionDef, depth: int) -> str | None:
        """``"example"`` when ``expr`` is one loss per example (or per entry) made from the
        function's parameters: a Keras loss function's result, a mean or sum over given axes,
        an expression made entry by entry; ``"mean"`` / ``"sum"`` when it reduces over every
        axis; None when autofix cannot tell."""
        if depth > 12:
            return None
        if isinstance(expr, (cst.Integer, cst.Float)):
            return "example"
        if isinstance(expr, cst.Name):
            if expr.value in params:
                return "example"
            value = self._value(expr, function)
            return None if value is expr else self._per_example(value, params, function, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._per_example(expr.expression, params, function, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)):
            kinds = {self._per_example(side, params, function, depth + 1) for side in (expr.left, expr.right)}
            if None in kinds:
                return None
            reduced = kinds & {"mean", "sum"}
            return reduced.pop() if len(reduced) == 1 else ("example" if not reduced else None)
        if not isinstance(expr, cst.Call):
            return None
        names = self.program.qualified_names(expr.func)
        if names & (MEANS | SUMS):
            axis = argument_value(expr, "axis", 1)
            if axis is None or (isinstance(axis, cst.Name) and axis.value == "None"):
                return "mean" if names & MEANS else "sum"
            if not self._axis(axis):
                return None
            inner = argument_value(expr, "input_tensor", 0) or argument_value(expr, "x", 0)
            return "example" if inner is not None and self._per_example(inner, params, function, depth + 1) == "example" else None
        if any(n.startswith("keras.losses.") and n.rsplit(".", 1)[-1][:1].islower() for n in names):
            return "example"  # a Keras loss function: one loss per example
        if names & ELEMENTWISE:
            for arg in expr.args:
                if arg.star or (arg.keyword is not None and arg.keyword.value in ("dtype", "name")):
                    if arg.star:
                        return None
                    continue
                if self._per_example(arg.value, params, function, depth + 1) != "example":
                    return None
            return "example"
        return None

    @staticmethod
    def _axis(axis: cst.BaseExpression) -> bool:
        """An axis given as numbers other than the batch's (0)."""
        if isinstance(axis, (cst.List, cst.Tuple)):
            return bool(axis.elements) and all(_Summariser._axis(e.value) for e in axis.elements)
        if isinstance(axis, cst.UnaryOperation) and isinstance(axis.operator, cst.Minus):
            return isinstance(axis.expression, cst.Integer)
        return isinstance(axis, cst.Integer) and int(axis.evaluated_value) != 0

    def _optimizer_problem(self, expr: cst.BaseExpression, line: int) -> str | None:
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            return None
        if isinstance(expr, cst.Call) and any(keras_kind(n) is Kind.OPTIMIZER for n in self.program.qualified_names(expr.func)):
            for keyword in CLIPS:
                if argument_value(expr, keyword) is not None:
                    return f"its optimizer clips gradients ({keyword}=, compiled on line {line}), which Keras 3 does per replica rather than on their sum"
            rate = argument_value(expr, "learning_rate", 0)
            read = self._imported_attribute(rate) if rate is not None else None
            if read is not None:
                code = self.program.module.code_for_node(rate)  # type: ignore[arg-type]
                reason = (
                    f"its learning rate {code} (compiled on line {line}) is read from another module, which autofix "
                    "follows only to a number written there"
                )
                self._deferred[(line, reason)] = read
                return reason
            if rate is not None and not isinstance(rate, (cst.Float, cst.Integer, cst.Name, cst.UnaryOperation, cst.BinaryOperation)):
                return f"its learning rate (compiled on line {line}) may be a schedule counted in optimizer steps, which a migration changes"
            return None
        code = " ".join(self.program.module.code_for_node(expr).split())
        return f"it compiles with the optimizer {code} (line {line}), which autofix does not follow"

    def _imported_attribute(self, expr: cst.BaseExpression) -> str | None:
        """``config.LEARNING_RATE`` where ``config`` is an imported module: its qualified name."""
        if not isinstance(expr, cst.Attribute):
            return None
        root = expr.value
        while isinstance(root, cst.Attribute):
            root = root.value
        if not (isinstance(root, cst.Name) and self.program.is_import(root)):
            return None
        names = self.program.qualified_names(expr)
        return next(iter(names)) if len(names) == 1 else None

    def _model_makers(self, function: cst.FunctionDef) -> list[tuple[str, cst.CSTNode]]:
        """What makes each Keras model ``function`` may return (``keras.Sequential``, a model
        class of the module...), with the expression of its own body that makes it: followed
        through names bound in it and the module's own functions and classes it calls."""
        found: list[tuple[str, cst.CSTNode]] = []
        for ret in nodes_in(function.body, cst.Return, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            if ret.value is not None:
                found.extend(self._made_by(ret.value, function, {function.name.value}, 0))
        return list(dict.fromkeys(found))

    def _made_by(self, expr: cst.BaseExpression, function: cst.FunctionDef, seen: set[str], depth: int) -> list[tuple[str, cst.CSTNode]]:
        if depth > 8:
            return []
        if isinstance(expr, cst.Name):
            found = []
            for assign in nodes_in(function.body, (cst.Assign, cst.AnnAssign), stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
                if assign.value is not None and any(isinstance(t, cst.Name) and t.value == expr.value for t in targets):
                    found.extend(self._made_by(assign.value, function, seen, depth + 1))
            return found
        if not isinstance(expr, cst.Call):
            return []
        for name in sorted(self.program.qualified_names(expr.func)):
            if keras_kind(name) in (Kind.MODEL, Kind.LOAD):
                return [(name, expr)]
        if isinstance(expr.func, cst.Name):
            local = expr.func.value
            if local in self.classes and self._is_model_class(local):
                return [(f"{local} (a keras.Model subclass)", expr)]
            if local in self.functions and local not in seen:
                # What the module's own function returns, once per function (not per path to it).
                memo = self._returned_models
                if local not in memo:
                    inner = self.functions[local]
                    made = [what for ret in nodes_in(inner.body, cst.Return, stop=(cst.FunctionDef, cst.Lambda, cst.ClassDef))
                            if ret.value is not None for what, _ in self._made_by(ret.value, inner, seen | {local}, depth + 1)]
                    memo[local] = made[0] if made else None
                return [(memo[local], expr)] if memo[local] is not None else []
        return []


def makes_model(program: Program, definition: Definition, passed: guards.Known) -> bool:
    """Whether a call of the function ``definition`` (of the module ``program`` reads, as
    :func:`program_alone` gives it) that binds its parameters to the constants ``passed`` may
    return a Keras model: not when those constants make every expression that makes one dead
    (``get_loss(name="mae")`` of a ``get_loss`` whose ``VGGLoss()`` is made only under
    ``elif name == "vgg":``; :mod:`autofix.analysis.core.guards`)."""
    if definition.returns_model is None:
        return False
    if not passed or not definition.model_makers:
        return True
    return not all(guards.dead(program, node, passed) for node in definition.model_makers)


def _chain_root(expr: cst.BaseExpression) -> str | None:
    """What a chain of method calls starts from: the name (``ds`` of ``ds.map(f).batch(8)``),
    ``""`` for a call of something else (a maker), None for anything else."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        inner = expr.func.value
        if isinstance(inner, cst.Name):
            return inner.value
        if not isinstance(inner, cst.Call):
            return ""
        expr = inner
    if isinstance(expr, cst.Name):
        return expr.value
    return "" if isinstance(expr, cst.Call) else None
