"""What ``strategy.run`` feeds a training step: distributed batches, or data every replica gets
whole.

``strategy.run(step, args=(batch,))`` gives each replica its own share only when ``batch`` comes
from the strategy (``experimental_distribute_dataset``, ``distribute_datasets_from_function``,
``experimental_distribute_values_from_function``). A batch of a plain ``tf.data`` dataset, a
NumPy array, or one replica's shard (``batch.values[0]``) goes whole to every replica (measured:
each of 2 replicas sees all 8 examples): no data parallelism, and the replicas' gradients of the
same batch are summed.

Each argument is followed backwards to where its value is made: through names (every binding
that may reach the read: a value rebuilt on one branch counts, except a plain dataset that an
``if strategy is not None:`` without an ``else`` distributes, where the strategy tested is
always given: it reaches past the ``if`` only with no strategy), ``for`` loops and
``enumerate`` / ``zip`` / ``iter`` / ``next`` and progress bars (``tqdm(ds)``), tuple
unpacking, subscripts, the parameters of local functions (to what their callers pass) and their
returns, and ``self`` attributes (an iterator or dataset kept in one, ``self.train_iter =
iter(ds)``, is iterated where it is read), and a class's ``__init__`` parameters to what the
class's constructions in this file pass (none in view: unknown). An origin is
``distributed``, ``dataset`` (a ``tf.data`` / Keras / TFDS dataset, with the expression
iterated), ``array`` (NumPy, a Keras ``load_data``, the ``.values`` / ``.to_numpy()`` of a
pandas or xarray object, or the batches of Keras's Python feeders:
``ImageDataGenerator(...).flow*(...)``, a ``keras.utils.Sequence`` of the file), ``shard``, or unknown (scalars, step
counters, tensors made by TensorFlow, values from other modules, what a local generator
yields: never a finding), except a dataset a function of another module of the project returns
(its summary's ``returns_dataset`` / ``datasets_at``: ``train_ds = data.make_dataset(64)``,
``train_ds, test_ds = data.make_datasets()``), or a method of a class of one
(``TFRecordDataGenerator(...).generate()``: ``dataset_methods``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.dataflow import LOADERS, PASSTHROUGH, progress_bar_iterable
from autofix.analysis.project.callers import users_spell
from autofix.analysis.project.imports import ProjectImports
from autofix.analysis.project.layout import marked_project
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import argument, argument_value, attribute_path, nodes_in, words
from autofix.tf.symbols import Kind

DISTRIBUTE_METHODS = frozenset(
    {
        "experimental_distribute_dataset",
        "distribute_datasets_from_function",
        "experimental_distribute_datasets_from_function",
        "experimental_distribute_values_from_function",
    }
)
# What the strategy hands back per replica (not a batch to distribute).
_PER_REPLICA_METHODS = frozenset({"run", "experimental_run_v2", "experimental_local_results", "gather"})
_DATASET_METHODS = PASSTHROUGH | {"batch", "padded_batch", "unbatch", "rebatch", "interleave", "flat_map", "zip", "window", "prefetch"}
_ARRAY_METHODS = frozenset({"astype", "reshape", "copy", "squeeze", "transpose"})
_DATASET_MAKERS = ("tensorflow.data.", "tensorflow_datasets.load")
# Keras's Python data feeders: what iterating them (or ``next``) gives is a NumPy batch, made on
# the host, which ``strategy.run`` hands whole to every replica.
_IMAGE_GENERATORS = frozenset({"keras.preprocessing.image.ImageDataGenerator"})
_FEEDER_METHODS = frozenset({"flow", "flow_from_directory", "flow_from_dataframe"})
_SEQUENCES = frozenset({"keras.utils.Sequence", "keras.utils.PyDataset"})
_DEPTH = 12
# TensorFlow's random draws, with the keyword of their shape: a tensor of rank one or more drawn
# by one is sample data, a whole batch on one device like a NumPy array (``tf.random.uniform(
# shape=[100])`` handed to strategy.run gives every replica all of it). A scalar, or a draw whose
# shape is not written out, is not judged (a noise scale, a seed); nor are constants (``tf.ones``,
# ``tf.zeros``: a mask, an initial state, the same on every replica by design).
_TENSOR_FACTORIES = {
    "tensorflow.random.uniform": "shape",
    "tensorflow.random.normal": "shape",
    "tensorflow.random.truncated_normal": "shape",
    "tensorflow.random.stateless_uniform": "shape",
    "tensorflow.random.stateless_normal": "shape",
}
# TPU strategies take their own kind of input: not judged here.
_TPU = ("TPUStrategy", "TPUStrategyV2")


# What a step's argument can be that is not distributed: a batch of a plain dataset, a NumPy
# array, a batch tensor made on one device, one replica's shard, or data callers out of view
# hand to a class that makes its strategy itself (none of them holds that strategy).
UNDISTRIBUTED = frozenset({"dataset", "array", "tensor", "shard", "foreign"})


def _batch_tensor(call: cst.Call, names: set[str]) -> bool:
    """``tf.random.uniform(shape=[100], ...)``: a random draw given a shape of rank one or more,
    written out (see ``_TENSOR_FACTORIES``)."""
    keyword = next((_TENSOR_FACTORIES[n] for n in names if n in _TENSOR_FACTORIES), None)
    if keyword is None:
        return False
    shape = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    if shape is None and call.args and call.args[0].keyword is None and not call.args[0].star:
        shape = call.args[0].value
    return isinstance(shape, (cst.List, cst.Tuple)) and len(shape.elements) >= 1


@dataclass(frozen=True)
class Origin:
    kind: str  # "distributed", "dataset", "array", "tensor", "shard", "unknown"
    node: cst.CSTNode
    # For a batch of a dataset: the ``for`` loop that iterates the dataset, when it is one.
    loop: cst.For | None = None
    # For a dataset: the expressions that make it (more than one for a parameter), and the
    # name it is first bound to.
    made: tuple[cst.BaseExpression, ...] = ()
    named: cst.Name | None = None


@dataclass
class Feed:
    """A ``strategy.run`` call of a training step given undistributed data."""

    run: cst.Call
    argument: cst.BaseExpression
    origins: list[Origin] = field(default_factory=list)

    @property
    def undistributed(self) -> list[Origin]:
        return [o for o in self.origins if o.kind in UNDISTRIBUTED]


class Inputs(Derived):
    def __init__(self, program) -> None:
        super().__init__(program)
        self.steps = Steps.of(program)
        self.facts = self.steps.facts
        self.callables = Callables.of(program)
        # The calls whose returns are being followed, innermost last.
        self._through: list[cst.Call] = []

    @cached_property
    def undistributed(self) -> list[Feed]:
        """Every ``strategy.run`` of a step that applies gradients, under a strategy with
        several replicas (not a TPU one), given an argument that is undistributed on some
        path."""
        found = []
        for run in self.steps.runs:
            if not self._judged(run):
                continue
            for argument in _arguments(run):
                origins = [self._foreign(run, o) for o in self.origins(argument)]
                feed = Feed(run, argument, origins)
                if feed.undistributed:
                    found.append(feed)
        return found

    def _foreign(self, run: cst.Call, origin: Origin) -> Origin:
        """``origin`` as a ``foreign`` one when it is a parameter of a method no code of the
        file's project calls (a project marked as one, whose modules are all in view), of the
        class whose own strategy runs the step: ``self.strategy =
        tf.distribute.MirroredStrategy()`` in the class, ``self.strategy.run(step, args=(x,))``
        on what ``train(self, dataset)`` iterates. Its callers cannot have distributed it with
        that strategy, which only the object holds (nothing in view reads ``obj.strategy``
        from outside the class): every replica gets it whole. Otherwise ``origin``."""
        param = origin.node
        if origin.kind != "unknown" or not isinstance(param, cst.Param) or param.star:
            return origin
        receiver = run.func.value if isinstance(run.func, cst.Attribute) else None
        path = attribute_path(receiver) if receiver is not None else None
        if path is None or len(path) != 2 or path[0] != "self":
            return origin
        program = self.program
        method = program.enclosing_function(param)
        cls = program.parent(program.parent(method)) if method is not None else None
        if not isinstance(cls, cst.ClassDef) or param is method.params.params[0]:  # type: ignore[union-attr]
            return origin
        if next((a for a in program.ancestors(run) if isinstance(a, cst.ClassDef)), None) is not cls:
            return origin
        if self.callables.call_sites(method):  # type: ignore[arg-type]
            return origin
        assigned = self.callables.attribute_assignments(receiver)
        made = [value for value, _target in assigned]
        if not made or not all(
            isinstance(value, cst.Call) and self.facts.strategy_classes(value) for value in made
        ):
            return origin
        attr = path[1]
        for node in nodes_in(program.module, cst.Attribute):
            if node.attr.value == attr and not (isinstance(node.value, cst.Name) and node.value.value == "self"):
                return origin  # ``trainer.strategy`` read from outside: it may distribute there
        # Who calls the method is known only where the project's modules are in view (a
        # marked project: a file alone, or a folder of loose scripts, may be driven by code
        # autofix has not read). Another module of the project that uses the class and
        # distributes data may do it with this object's strategy
        # (``trainer.strategy.experimental_distribute_dataset(ds)``).
        if program.path is None or not marked_project(program.path) or program.parent(cls) is not program.module:
            return origin
        if users_spell(program.path, cls.name.value, DISTRIBUTE_METHODS) is not False:
            return origin
        return Origin("foreign", param, made=tuple(made))

    def _judged(self, run: cst.Call, fed: bool = True) -> bool:
        steps = self.steps
        if steps.single_replica(run):
            return False
        classes = self.facts.strategy_classes(run.func.value) or set()  # type: ignore[union-attr]
        if any(c.startswith(_TPU) for c in classes):
            return False
        target = steps.run_target(run)
        step = steps.definition(target) if target is not None else None
        if step is None:
            return False
        # Inference (no gradients applied) is not judged: every replica may predict on all.
        if any(self._updates(c) for c in steps.calls(step)):
            return True
        # A run that computes, per replica, what a training run is then given
        # (``inputs = strategy.run(step_inputs, args=(x, y))``, ``strategy.run(step,
        # args=inputs)``): its batches are the training's.
        return fed and self._feeds_training(run)

    def _feeds_training(self, run: cst.Call) -> bool:
        for other in self.steps.runs:
            if other is run or not self._judged(other, fed=False):
                continue
            if any(o.node is run for argument in _arguments(other) for o in self.origins(argument)):
                return True
        return False

    def _updates(self, call: cst.Call) -> bool:
        """Whether ``call`` applies gradients: ``apply_gradients``, ``minimize``, or Keras 3's
        ``optimizer.apply(grads, variables)``."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in ("apply_gradients", "minimize"):
            return True
        if func.attr.value != "apply" or self.facts.is_module_reference(func.value):
            return False
        if isinstance(func.value, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(func.value) or ()]
            if values and all(isinstance(v, cst.Call) and self.facts.call_kind(v) is Kind.OPTIMIZER for v in values):
                return True
        path = attribute_path(func.value)
        return path is not None and bool(words(path[-1]) & {"optimizer", "opt", "optim"})

    # --- where a value comes from -----------------------------------------------------------------

    def origins(self, expr: cst.BaseExpression) -> list[Origin]:
        found: list[Origin] = []
        self._value(expr, found, set(), 0)
        return found

    def _value(self, expr: cst.BaseExpression, found: list[Origin], seen: set, depth: int) -> None:
        if depth > _DEPTH or id(expr) in seen:
            return
        seen = seen | {id(expr)}
        if isinstance(expr, cst.Name):
            self._name(expr, found, seen, depth)
        elif isinstance(expr, cst.Subscript):
            if isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "values":
                inner = self.origins(expr.value.value)
                if inner and all(o.kind == "distributed" for o in inner):
                    found.append(Origin("shard", expr))
                    return
            self._value(expr.value, found, seen, depth + 1)
        elif isinstance(expr, cst.BinaryOperation):
            self._value(expr.left, found, seen, depth + 1)
            self._value(expr.right, found, seen, depth + 1)
        elif isinstance(expr, (cst.Tuple, cst.List)):
            for element in expr.elements:
                self._value(element.value, found, seen, depth + 1)
        elif isinstance(expr, cst.Attribute) and is_self_attribute(expr):
            for value, _ in self.callables.attribute_assignments(expr):
                self._value(value, found, seen, depth + 1)
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "values":
            # ``frame.values``, ``data_array.sel(...).values``: the NumPy array of a pandas or
            # xarray object, whole on the host; of a distributed value, its replicas' shards
            # as one tuple. Handed to every replica either way.
            inner = self.origins(expr.value)
            kind = "shard" if any(o.kind == "distributed" for o in inner) else "array"
            found.append(Origin(kind, expr))
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "to_numpy" and not expr.args:
            found.append(Origin("array", expr))  # pandas / xarray: a NumPy array on the host
        elif isinstance(expr, cst.Call):
            self._call(expr, found, seen, depth)
        else:
            found.append(Origin("unknown", expr))

    @cached_property
    def _numpy_behavior(self) -> bool:
        """Whether the file turns on TensorFlow's NumPy behaviour (tensors then have ``astype``)."""
        return "experimental_enable_numpy_behavior" in self.program.source

    def _call(self, call: cst.Call, found: list[Origin], seen: set, depth: int) -> None:
        facts = self.facts
        names = facts.names_of(call.func)
        func = call.func
        if names & {"builtins.next"} and call.args:
            self._elements(call.args[0].value, found, seen, depth + 1, None)
            return
        if any(n.startswith("numpy.") for n in names) or any(n.startswith("keras.datasets.") for n in names) or self._keras_feeder(call):
            found.append(Origin("array", call))
            return
        if _batch_tensor(call, names):
            found.append(Origin("tensor", call))
            return
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in DISTRIBUTE_METHODS or method in _PER_REPLICA_METHODS and self.steps.is_strategy(func.value):
                found.append(Origin("distributed", call))
                return
            if method == "get_next":
                self._elements(func.value, found, seen, depth + 1, None)
                return
            if method in _ARRAY_METHODS:
                inner: list[Origin] = []
                self._value(func.value, inner, seen, depth + 1)
                if method == "astype" and inner and all(o.kind == "unknown" for o in inner) and not self._numpy_behavior:
                    # ``samples["rewards"].astype(np.float32)``: only NumPy arrays and pandas
                    # objects have ``astype`` (a tensor, a distributed value have none, unless
                    # the file turns on TensorFlow's NumPy behaviour): data on the host.
                    found.append(Origin("array", call))
                    return
                found.extend(inner)
                return
        callees, complete = self.callables.of_call(func)
        if callees and complete:
            for callee in callees:
                info = facts.functions.get(callee.function)  # type: ignore[arg-type]
                for ret in info.returns if info else ():
                    if ret.value is not None:
                        self._value(ret.value, found, seen, depth + 1)
            return
        found.append(Origin("unknown", call))

    def _name(self, name: cst.Name, found: list[Origin], seen: set, depth: int) -> None:
        facts = self.facts
        bindings = facts.reaching_bindings(name)
        if not bindings:
            found.append(Origin("unknown", name))
            return
        for binding in bindings:
            if isinstance(binding, cst.Param):
                self._parameter(binding, found, seen, depth)
                continue
            value = facts.assigned_value(binding)
            if value is not None:
                self._value(value, found, seen, depth + 1)
                continue
            self._bound(binding, found, seen, depth)

    def _bound(self, binding: cst.CSTNode, found: list[Origin], seen: set, depth: int) -> None:
        """A name bound by a ``for`` loop or by unpacking."""
        program = self.program
        path: list[int] = []
        node: cst.CSTNode = binding
        parent = program.parent(node)
        while isinstance(parent, cst.Element):
            holder = program.parent(parent)
            path.insert(0, list(holder.elements).index(parent))  # type: ignore[union-attr]
            node, parent = holder, program.parent(holder)  # type: ignore[assignment]
        if isinstance(parent, cst.For) and parent.target is node:
            self._elements(parent.iter, found, seen, depth + 1, parent, path)
        elif isinstance(parent, cst.AssignTarget):
            assign = program.parent(parent)
            if isinstance(assign, cst.Assign):
                self._value(assign.value, found, seen, depth + 1)  # a part of the value
            else:
                found.append(Origin("unknown", binding))
        else:
            found.append(Origin("unknown", binding))

    def _elements(self, expr: cst.BaseExpression, found: list[Origin], seen: set, depth: int, loop: cst.For | None, path: list[int] | None = None) -> None:
        """What iterating ``expr`` gives (``path``: the tuple positions the target unpacks)."""
        if depth > _DEPTH:
            return
        facts = self.facts
        path = path or []
        if isinstance(expr, cst.Call):
            names = facts.names_of(expr.func)
            positional = [a.value for a in expr.args if a.keyword is None and not a.star]
            if names & {"builtins.iter"} and positional:
                self._elements(positional[0], found, seen, depth + 1, loop, path)
                return
            if names & {"builtins.enumerate"} and positional:
                if path and path[0] == 0:
                    found.append(Origin("unknown", expr))  # the counter
                else:
                    self._elements(positional[0], found, seen, depth + 1, loop, path[1:])
                return
            if names & {"builtins.zip"} and positional:
                chosen = positional[path[0]:path[0] + 1] if path and path[0] < len(positional) else positional
                for inner in chosen:
                    self._elements(inner, found, seen, depth + 1, loop, path[1:])
                return
            if names & {"builtins.range"}:
                found.append(Origin("unknown", expr))
                return
            wrapped = progress_bar_iterable(facts, expr)
            if wrapped is not None:
                self._elements(wrapped, found, seen, depth + 1, loop, path)
                return
        if isinstance(expr, cst.Name):
            bindings = self._past_a_strategy_test(facts.reaching_bindings(expr) or [])
            values = [facts.assigned_value(b) for b in bindings]
            inner: list[Origin] = []
            if bindings and all(v is not None for v in values):
                for value in values:
                    self._elements(value, inner, seen, depth + 1, loop, path)  # type: ignore[arg-type]
            elif len(bindings) == 1 and isinstance(bindings[0], cst.Param):
                # A dataset handed in: what the callers hand in.
                self._parameter(bindings[0], inner, seen, depth, iterated=True, path=path)
            elif bindings and (unpacked := self.unpacked(bindings)):
                # ``train_ds, test_ds = make_datasets()``: what the value flow says it is.
                for value in unpacked:
                    self._elements(value, inner, seen, depth + 1, loop, path)
            elif bindings and (items := self._imported_item(bindings)):
                # The same, ``make_datasets`` of another module of the project: its summary.
                inner.extend(Origin("dataset", item, loop, (item,)) for item in items)
            else:
                found.append(Origin("unknown", expr))
                return
            if inner and all(o.kind == "dataset" for o in inner):
                # The loop iterates this name: the place a fix would distribute it.
                named = {o.named.value for o in inner if o.named is not None}
                first = inner[0].named if len(named) == 1 and all(o.named for o in inner) else expr
                found.append(Origin("dataset", expr, loop, tuple(m for o in inner for m in o.made), first))
            else:
                found.extend(inner)
            return
        if isinstance(expr, cst.Attribute) and is_self_attribute(expr):
            # ``self.train_iter = iter(ds)`` in one method, ``next(self.train_iter)`` in
            # another: what every value assigned to the attribute in its class gives.
            assigned = self.callables.attribute_assignments(expr)
            if not assigned:
                found.append(Origin("unknown", expr))
            for value, _target in assigned:
                self._elements(value, found, seen, depth + 1, loop, path)
            return
        if isinstance(expr, cst.Call) and self._kind(expr) is None:
            callees, complete = self.callables.of_call(expr.func)
            if callees and complete:
                infos = [facts.functions.get(callee.function) for callee in callees]  # type: ignore[arg-type]
                returned = [ret.value for info in infos if info for ret in info.returns if ret.value is not None]
                self._through.append(expr)  # what the callee's parameters hold: this call's arguments
                try:
                    for value in returned:
                        self._elements(value, found, seen, depth + 1, loop, path)
                finally:
                    self._through.pop()
                if not returned:
                    found.append(Origin("unknown", expr, loop))  # a generator: what it yields
                return
        kind = self._kind(expr)
        found.append(Origin(kind or "unknown", expr, loop, (expr,) if kind == "dataset" else ()))

    def _past_a_strategy_test(self, bindings: list[cst.CSTNode]) -> list[cst.CSTNode]:
        """``if strategy is not None: dataset = strategy.experimental_distribute_dataset(dataset)``
        (or ``if strategy:``), the ``if`` without an ``else``: the bindings made before it reach
        past it only when there is no strategy, where nothing is distributed and no replica
        runs; they are left out. (The other bindings are kept.)"""
        program = self.program
        guarded = []
        for binding in bindings:
            value = self.facts.assigned_value(binding)
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in DISTRIBUTE_METHODS):
                continue
            strategy = value.func.value
            statement = program.statement_of(binding)
            block = program.parent(statement) if statement is not None else None
            test = program.parent(block) if isinstance(block, cst.IndentedBlock) else None
            if isinstance(test, cst.If) and test.orelse is None and _tests_present(test.test, strategy) and self._always_given(strategy):
                guarded.append(test)
        if not guarded:
            return bindings
        return [b for b in bindings if not any(self._before(b, test) for test in guarded)]

    def _always_given(self, strategy: cst.BaseExpression) -> bool:
        """Whether the strategy tested is there whenever a replica could run: a name that is not
        a parameter, or a parameter the call whose return is followed passes a value for (not
        ``None``), or else every call of its function in view; a function called nowhere in
        view says nothing."""
        if not isinstance(strategy, cst.Name):
            return False
        bindings = self.facts.reaching_bindings(strategy) or []
        params = [b for b in bindings if isinstance(b, cst.Param)]
        if not params:
            return bool(bindings)
        if len(bindings) != 1:
            return False
        function = self.program.enclosing_function(params[0])
        sites = self.callables.call_sites(function) if function is not None else []
        # Reached through the return of one call of the function: that call's argument.
        followed = next((site for site in reversed(self._through) if site in sites), None)
        sites = [followed] if followed is not None else sites
        if not sites:
            return False
        for site in sites:
            callee = next((c for c in self.callables.of_call(site.func)[0] if c.function is function), None)
            arg = callee.argument(site, params[0]) if callee is not None else None
            if arg is None or isinstance(arg.value, cst.Name) and arg.value.value == "None":
                return False
        return True

    def _before(self, node: cst.CSTNode, statement: cst.If) -> bool:
        """Whether ``node`` is in a statement of the block holding ``statement``, before it."""
        block = self.program.parent(statement)
        body = list(getattr(block, "body", ()))
        if statement not in body:
            return False
        index = body.index(statement)
        return any(a in body[:index] for a in [node, *self.program.ancestors(node)])

    def unpacked(self, bindings: list[cst.CSTNode]) -> list[cst.BaseExpression]:
        """What names bound by unpacking (``a, b = make()``) are made by, where the value flow
        follows each to whole expressions (items of what a local function returns); else empty."""
        made: list[cst.BaseExpression] = []
        for binding in bindings:
            if not isinstance(binding, cst.Name) or not isinstance(self.program.parent(binding), cst.Element):
                return []
            origins = self.facts.values.binding_origins(binding)
            if not origins or not all(o.whole and isinstance(o.node, cst.BaseExpression) for o in origins):
                return []
            made.extend(o.node for o in origins)  # type: ignore[misc]
        return made

    def _kind(self, expr: cst.BaseExpression, depth: int = 0) -> str | None:
        """What iterating the value ``expr`` gives, when it is evident from how it is made
        (through a name the chain starts from: ``ds = ds.shuffle(n).batch(b)``)."""
        facts = self.facts
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and depth < _DEPTH:
            method = expr.func.attr.value
            if method in DISTRIBUTE_METHODS and self.steps.is_strategy(expr.func.value):
                return "distributed"
            if method not in _DATASET_METHODS:
                break
            expr, depth = expr.func.value, depth + 1
        if isinstance(expr, cst.Name) and depth < _DEPTH:
            values = [facts.assigned_value(b) for b in facts.reaching_bindings(expr) or ()]
            kinds = {self._kind(v, depth + 1) if v is not None else None for v in values}
            return kinds.pop() if len(kinds) == 1 and values else None
        if isinstance(expr, cst.Call):
            names = facts.names_of(expr.func)
            if any(n.startswith(_DATASET_MAKERS) for n in names) or names & LOADERS:
                return "dataset"
            if any(n.startswith("numpy.") for n in names) or self._keras_feeder(expr):
                return "array"
            imported = self._imported_definition(expr)
            if imported is not None and imported.returns_dataset or self._imported_dataset_method(expr):
                return "dataset"
        return None

    def _imported_dataset_method(self, call: cst.Call) -> bool:
        """``TFRecordDataGenerator(...).generate(...)`` (the object also through a name bound
        only to such constructions): a method that the summary of a class of another module of
        the project says returns a plain ``tf.data`` dataset."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        receiver = func.value
        if isinstance(receiver, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.reaching_bindings(receiver) or ()]
        else:
            values = [receiver]
        if not values or not all(isinstance(v, cst.Call) for v in values):
            return False
        imports = ProjectImports.of(self.program)
        if not imports.active:
            return False
        for value in values:
            resolved = imports.resolve(value.func)  # type: ignore[union-attr]
            definition = resolved.definition if resolved is not None else None
            if definition is None or definition.kind != "class" or func.attr.value not in definition.dataset_methods:
                return False
        return True

    def _imported_definition(self, call: cst.Call):
        """The summary of the function of another module of the project that ``call`` calls."""
        imports = ProjectImports.of(self.program)
        if not imports.active:
            return None
        resolved = imports.resolve(call.func)
        return resolved.definition if resolved is not None and resolved.definition is not None and resolved.definition.kind == "function" else None

    def _imported_item(self, bindings: list[cst.CSTNode]) -> list[cst.Call]:
        """``train_ds, test_ds = data.make_datasets()`` with ``make_datasets`` a function of
        another module of the project returning datasets at those positions: the calls, when
        every binding is such an item (else empty)."""
        made: list[cst.Call] = []
        for binding in bindings:
            element = self.program.parent(binding)
            holder = self.program.parent(element) if isinstance(element, cst.Element) else None
            target = self.program.parent(holder) if isinstance(holder, cst.Tuple) else None
            assign = self.program.parent(target) if isinstance(target, cst.AssignTarget) else None
            if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call) and target.target is holder):
                return []
            definition = self._imported_definition(assign.value)
            position = list(holder.elements).index(element)  # type: ignore[union-attr]
            if definition is None or any(isinstance(e, cst.StarredElement) for e in holder.elements) or position not in definition.datasets_at:  # type: ignore[union-attr]
                return []
            made.append(assign.value)
        return made

    def _keras_feeder(self, call: cst.Call) -> bool:
        """``ImageDataGenerator(...).flow(x, y)`` (``flow_from_directory``,
        ``flow_from_dataframe``; the generator through a name), or an object of a class of this
        file that subclasses ``keras.utils.Sequence`` / ``PyDataset``: Keras's Python feeders,
        whose batches are NumPy arrays made on the host."""
        facts = self.facts
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _FEEDER_METHODS:
            receiver = func.value
            values = [facts.assigned_value(b) for b in facts.reaching_bindings(receiver) or ()] if isinstance(receiver, cst.Name) else [receiver]
            return bool(values) and all(isinstance(v, cst.Call) and facts.names_of(v.func) & _IMAGE_GENERATORS for v in values)
        definition = facts.local_definition(func)
        if isinstance(definition, cst.ClassDef):
            return any(facts.names_of(base.value) & _SEQUENCES for base in definition.bases)
        return False

    def _parameter(self, param: cst.Param, found: list[Origin], seen: set, depth: int, iterated: bool = False, path: list[int] | None = None) -> None:
        """A parameter: what every call of its function in this file passes for it (or, when
        ``iterated``, what iterating that gives)."""
        program = self.program
        function = program.enclosing_function(param)
        if function is None:
            found.append(Origin("unknown", param))
            return
        sites = self.callables.call_sites(function)
        if not sites:
            constructed = self._constructed(function, param)
            if constructed is None:
                found.append(Origin("unknown", param))
            for arg in constructed or ():
                if arg is None:
                    found.append(Origin("unknown", param))
                elif iterated:
                    self._elements(arg, found, seen, depth + 1, None, path)
                else:
                    self._value(arg, found, seen, depth + 1)
            return
        star = function.params.star_arg
        for site in sites:
            callee = next(c for c in self.callables.of_call(site.func)[0] if c.function is function)
            if param is star:
                # ``def step(*args): strategy.run(fn, args=args)``: the positional arguments left.
                named = len(function.params.params) - (1 if callee.bound else 0)
                rest = [a.value for a in site.args if a.keyword is None and not a.star][named:]
                found.append(Origin("unknown", site)) if any(a.star for a in site.args) else None
                for value in rest:
                    self._value(value, found, seen, depth + 1)
                continue
            arg = callee.argument(site, param)
            if arg is None:
                found.append(Origin("unknown", site))
            elif iterated:
                self._elements(arg.value, found, seen, depth + 1, None, path)
            else:
                self._value(arg.value, found, seen, depth + 1)

    def _constructed(self, function: cst.FunctionDef, param: cst.Param) -> list[cst.BaseExpression | None] | None:
        """For a parameter of a class's ``__init__``: what each construction of the class in
        this file (``Trainer(strategy, train_ds)``) passes for it (None where it passes nothing
        or a star); None when it is not such a parameter, or the class is constructed nowhere
        in view."""
        cls = self.program.parent(self.program.parent(function)) if function.name.value == "__init__" else None
        if not isinstance(cls, cst.ClassDef) or param.star or param not in function.params.params:
            return None
        position = list(function.params.params).index(param) - 1  # after ``self``
        if position < 0:
            return None
        found: list[cst.BaseExpression | None] = []
        for ref in self.facts.references(cls):
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                continue
            if any(a.star for a in call.args):
                found.append(None)
                continue
            arg = argument(call, param.name.value, position)
            found.append(arg.value if arg is not None else None)
        return found or None


def _arguments(run: cst.Call) -> list[cst.BaseExpression]:
    """What ``strategy.run(fn, args=(...), kwargs={...})`` hands the step."""
    found: list[cst.BaseExpression] = []
    args = argument_value(run, "args", 1)
    if isinstance(args, (cst.Tuple, cst.List)):
        found.extend(e.value for e in args.elements if not isinstance(e, cst.StarredElement))
    elif args is not None:
        found.append(args)
    kwargs = argument_value(run, "kwargs", 2)
    if isinstance(kwargs, cst.Dict):
        found.extend(e.value for e in kwargs.elements if isinstance(e, cst.DictElement))
    return found


def is_self_attribute(expr: cst.Attribute) -> bool:
    return isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _tests_present(test: cst.BaseExpression, strategy: cst.BaseExpression) -> bool:
    """``strategy is not None`` or ``strategy`` (alone, or a term of an ``and``)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tests_present(test.left, strategy) or _tests_present(test.right, strategy)
    same = lambda e: isinstance(e, cst.Name) and isinstance(strategy, cst.Name) and e.value == strategy.value  # noqa: E731
    if same(test):
        return True
    if isinstance(test, cst.Comparison) and same(test.left) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        return isinstance(target.operator, cst.IsNot) and isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
    return False
