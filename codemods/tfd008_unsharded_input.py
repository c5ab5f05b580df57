"""TFD008 unsharded-input: a dataset that every worker of a MultiWorkerMirroredStrategy reads whole.

Each worker runs its own input pipeline. TensorFlow shards a dataset given to ``fit`` or
``strategy.experimental_distribute_dataset`` across the workers by itself (auto-sharding, AUTO:
by files, else by elements). Measured with two workers (TF 2.21, ``Dataset.range(64)``):

- ``AutoShardPolicy.OFF`` and no ``shard()``: both workers read the same examples, step for
  step; nothing fails, the weights stay in sync, and the second worker adds nothing.
- ``strategy.distribute_datasets_from_function(fn)``: no auto-sharding at all; a ``fn`` that does
  not shard by its input context gives every worker the same examples too.
- DATA (and AUTO) without ``shard()``: split; OFF with ``shard(num_workers, index)``: split.

The fix, for OFF with no ``shard()`` anywhere in the dataset's pipeline: the policy becomes
``AutoShardPolicy.DATA``, which splits the examples whatever the source (and, unlike a
hand-written ``shard(num_workers, task_id)``, counts a ``chief`` task right).

A dataset's pipeline is followed back to its source (a ``tf.data`` constructor, or a split
``tfds.load`` reads whole: also unpacked, ``splits, info = tfds.load(..., with_info=True)``, and
subscripted, ``splits["train"]``; one given a ``read_config`` may be sharded by it and is not
judged).

Not findings: datasets not fed to training (evaluation, a dataset only built to show the
option), a dataset made (``from_tensor_slices`` / ``from_tensors``) from random numbers each
worker draws for itself (``np.random`` or ``tf.random`` with no seed, in a file that seeds
neither: no two workers read the same examples, and DATA would only throw part of each
worker's away; a seeded draw is the same on every worker and stays a finding), a strategy
with one worker (``TF_CONFIG`` removed before it is made), a pipeline with
a ``shard()``, a dataset or options object that is passed through code autofix does not follow
(another module, a container): nothing is claimed about it.

The TF 1 spelling ``options.experimental_distribute.auto_shard = False`` (or ``True``) is no
longer an option: on TF 2.21 the assignment itself raises ``AttributeError: Cannot set the
property auto_shard on DistributeOptions.`` (measured), so the script stops there. It is
reported in a multi-worker file. ``= True`` (auto-sharding on, TF 1's default) is fixed to
``auto_shard_policy = tf.data.experimental.AutoShardPolicy.AUTO``, the same meaning. ``=
False`` is fixed to ``AutoShardPolicy.OFF`` only when every dataset given those options is
``shard()``ed before them (the workers then read their own shards, as intended); otherwise it
is reported only: its TF 2 spelling, OFF, is exactly the bug above (every worker trains on the
same examples), and the right change, DATA or a ``shard()`` by worker, is the author's choice.

Not fixed (reported with the reason): an options object also used elsewhere, or set to OFF in
a way other than ``options.experimental_distribute.auto_shard_policy = ...OFF``; a
``distribute_datasets_from_function`` function that does not shard (add
``.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)`` before
batching). Not covered: FILE sharding of a dataset that is not read from enough files (it fails
loudly on the first batch, on every worker), ``shard()`` by hand with auto-sharding left on
(sharded twice: each worker reads a quarter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis.facts.dataflow import PASSTHROUGH
from autofix.analysis.training.multiworker import MULTI_WORKER, MultiWorker
from autofix.analysis.syntax import argument_value, attribute_path, calls_in
from autofix.codegen import NotFound, module_alias
from autofix.rule import Example, Rule
from autofix.tf.numpy_draws import SEEDS

_POLICY = "tensorflow.data.experimental.AutoShardPolicy."
# Dataset methods that keep the examples of the dataset they are called on.
# tf.data constructors whose examples are the values they are given.
_FROM_VALUES = {"tensorflow.data.Dataset.from_tensor_slices", "tensorflow.data.Dataset.from_tensors"}
# What keeps a value's numbers (a cast of a draw is that draw).
_CASTS = {"tensorflow.cast", "tensorflow.convert_to_tensor", "tensorflow.constant", "numpy.asarray", "numpy.array", "numpy.float32"}
# Functions of np.random / tf.random that are not draws.
_NOT_DRAWS = {"seed", "set_seed", "get_state", "set_state", "default_rng", "RandomState", "Generator", "SeedGenerator", "stateless_normal", "stateless_uniform"}
_KEEPS = PASSTHROUGH | {"batch", "padded_batch", "unbatch", "rebatch", "map", "interleave", "flat_map", "with_options", "bucket_by_sequence_length", "ragged_batch", "shard"}
_FIT = frozenset({"fit", "fit_generator"})

MESSAGE = (
    "every worker trains on the same examples: the dataset's auto-sharding is OFF and it is "
    "not shard()ed; use AutoShardPolicy.DATA (or shard it by worker)"
)
OLD_SPELLING = (
    "options.experimental_distribute.auto_shard is TF 1's spelling: TF 2 has no such option and "
    "the assignment raises AttributeError (Cannot set the property auto_shard on DistributeOptions.)"
)
OLD_OFF = (
    "its TF 2 spelling, auto_shard_policy = AutoShardPolicy.OFF, would make every worker train on "
    "the same examples; set AutoShardPolicy.DATA (TensorFlow splits the examples), or shard() the "
    "dataset by worker and set OFF"
)
FROM_FUNCTION = (
    "every worker trains on the same examples: distribute_datasets_from_function does not "
    "shard, and this function does not shard by its input context"
)


@dataclass
class Lineage:
    """What a dataset expression is made of, followed back to its source."""

    methods: list[str] = field(default_factory=list)
    # The arguments of its ``with_options(...)`` calls.
    options: list[cst.BaseExpression] = field(default_factory=list)
    complete: bool = True
    # Made from random numbers each worker draws for itself (unseeded): no two workers read
    # the same examples.
    drawn: bool = False


class UnshardedInput(Rule):
    CODE = "TFD008"
    NAME = "unsharded-input"
    DESCRIPTION = "Dataset read whole by every multi-worker worker (auto-sharding OFF, no shard())"
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "options = tf.data.Options()\n"
                "options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).with_options(options)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "options = tf.data.Options()\n"
                "options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).with_options(options)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "resolver = strategy.cluster_resolver\n"
                "options = tf.data.Options()\n"
                "options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(NUM_WORKERS, resolver.task_id)\n"
                "dataset = dataset.batch(64).with_options(options)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
    )

    def applies(self) -> bool:
        return bool(MultiWorker.of(self.program).strategies)

    def check(self) -> None:
        workers = MultiWorker.of(self.program)
        reported: set[int] = set()
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            method = func.attr.value
            if method in _FIT and not self.facts.is_module_reference(func.value) and workers.runs_multi_worker(call):
                self._dataset(argument_value(call, "x", 0), reported)
            elif method == "experimental_distribute_dataset" and self._multi_worker(workers, func.value):
                self._dataset(argument_value(call, "dataset", 0), reported)
            elif method in ("distribute_datasets_from_function", "experimental_distribute_datasets_from_function") and self._multi_worker(workers, func.value):
                self._from_function(call, argument_value(call, "dataset_fn", 0))

        self._old_spellings()

    def _multi_worker(self, workers: MultiWorker, expr: cst.BaseExpression) -> bool:
        classes = self.facts.strategy_classes(expr)
        return bool(workers.strategies) and bool(classes) and bool(set(classes) & MULTI_WORKER)

    # --- OFF without shard() ----------------------------------------------------------------------

    def _dataset(self, expr: cst.BaseExpression | None, reported: set[int]) -> None:
        if expr is None:
            return
        lineage = Lineage()
        self._follow(expr, lineage, 0)
        if not lineage.complete or lineage.drawn or "shard" in lineage.methods:
            return
        for options in lineage.options:
            policy = self._policy(options)
            if policy is None or id(policy[0]) in reported:
                continue
            value, _assignment = policy
            if not self.facts.names_of(value) & {_POLICY + "OFF"}:
                continue
            reported.add(id(value))
            self.fix(value, MESSAGE, lambda edits, v=value, o=options: self._plan(edits, v, o))

    def _plan(self, edits, value: cst.BaseExpression, options: cst.BaseExpression) -> None:
        if not isinstance(value, cst.Attribute):
            raise NotFound("the policy is not written as AutoShardPolicy.OFF")
        for use in self._option_uses(options):
            parent = self.program.parent(use)
            holder = self.program.parent(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and holder.func.attr.value == "with_options":
                lineage = Lineage()
                self._follow(holder, lineage, 0)
                if "shard" not in lineage.methods:
                    continue
            elif isinstance(parent, cst.Attribute) and parent.attr.value == "experimental_distribute":
                continue
            raise NotFound("the options object is also used elsewhere; set DATA where this dataset needs it")
        edits.replace(value, lambda node: node.with_changes(attr=cst.Name("DATA")))

    def _option_uses(self, options: cst.BaseExpression) -> list[cst.CSTNode]:
        if not isinstance(options, cst.Name):
            raise NotFound("the options are not held in a name")
        uses: list[cst.CSTNode] = []
        for binding in self.facts.bindings(options) or ():
            if isinstance(binding, cst.Name):
                uses.extend(self.facts.uses(binding))
        return uses

    def _policy(self, options: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
        """The value assigned to ``options.experimental_distribute.auto_shard_policy`` (one
        assignment, to the options object this name holds)."""
        if not isinstance(options, cst.Name):
            return None
        bindings = self.facts.bindings(options)
        if not bindings or len(bindings) != 1:
            return None
        found = []
        for assign in self.facts.assigns:
            if not isinstance(assign, cst.Assign):
                continue
            for target in assign.targets:
                path = attribute_path(target.target)
                if path is None or path[1:] != ("experimental_distribute", "auto_shard_policy"):
                    continue
                root = target.target.value.value  # type: ignore[attr-defined]
                if isinstance(root, cst.Name) and self.facts.bindings(root) == bindings:
                    found.append((assign.value, assign))
        return found[0] if len(found) == 1 else None

    def _follow(self, expr: cst.BaseExpression, lineage: Lineage, depth: int) -> None:
        """Walk a dataset expression back to its source, recording the methods on the way."""
        if depth > 12:
            lineage.complete = False
            return
        if isinstance(expr, cst.Name):
            bindings = self.facts.reaching_bindings(expr) or []
            values = [self.facts.assigned_value(b) for b in bindings]
            if len(bindings) == 1 and values[0] is None and self._unpacked_from_tfds(bindings[0]):
                return  # ``datasets, info = tfds.load(..., with_info=True)``: the source
            if len(values) != 1 or values[0] is None:
                lineage.complete = False
                return
            self._follow(values[0], lineage, depth + 1)
            return
        if isinstance(expr, cst.Subscript):
            # ``datasets["train"]``: one split of what TensorFlow Datasets loaded.
            self._follow(expr.value, lineage, depth + 1)
            return
        if not isinstance(expr, cst.Call):
            lineage.complete = False
            return
        func = expr.func
        if any(n.startswith("tensorflow.data.") for n in self.facts.names_of(func)):
            names = self.facts.names_of(func)
            if names & _FROM_VALUES and expr.args and self._drawn_per_worker(expr.args[0].value, 0):
                lineage.drawn = True
            return  # the source
        if self._tfds_load(expr):
            return  # the source
        if isinstance(func, cst.Attribute) and func.attr.value in _KEEPS and not self.facts.is_module_reference(func.value):
            lineage.methods.append(func.attr.value)
            if func.attr.value == "with_options" and expr.args:
                lineage.options.append(expr.args[0].value)
            self._follow(func.value, lineage, depth + 1)
            return
        function = self.facts.local_definition(func)
        if isinstance(function, cst.FunctionDef):
            returns = self.facts.functions[function].returns
            if len(returns) == 1 and returns[0].value is not None:
                self._follow(returns[0].value, lineage, depth + 1)
                return
        lineage.complete = False

    def _drawn_per_worker(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Whether ``expr`` (what ``from_tensor_slices`` is given) is random numbers every
        worker draws for itself: every part of it (a tuple's items, what a name holds, a cast
        of it) a draw of ``np.random`` or ``tf.random`` with no seed, in a file that seeds
        neither (a seeded draw is the same on every worker)."""
        if depth > 8 or self._seeded:
            return False
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = [e.value for e in expr.elements if isinstance(e, cst.Element)]
            return bool(items) and len(items) == len(expr.elements) and all(self._drawn_per_worker(i, depth + 1) for i in items)
        if isinstance(expr, cst.Dict):
            values = [e.value for e in expr.elements if isinstance(e, cst.DictElement)]
            return bool(values) and len(values) == len(expr.elements) and all(self._drawn_per_worker(v, depth + 1) for v in values)
        if isinstance(expr, cst.Name):
            origins = self.facts.values.origins(expr)
            return bool(origins) and all(o.whole and o.node is not expr and self._drawn_per_worker(o.node, depth + 1) for o in origins)
        if not isinstance(expr, cst.Call):
            return False
        names = self.facts.names_of(expr.func)
        if names & _CASTS and expr.args:
            return self._drawn_per_worker(expr.args[0].value, depth + 1)
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "astype" and not names:
            return self._drawn_per_worker(expr.func.value, depth + 1)
        draws = {n for n in names if n.startswith(("numpy.random.", "tensorflow.random."))}
        if not draws or any(n.rpartition(".")[2] in _NOT_DRAWS for n in draws):
            return False
        return argument_value(expr, "seed") is None

    @cached_property
    def _seeded(self) -> bool:
        """The file seeds NumPy's, TensorFlow's or Python's generator (or Keras's)."""
        return any(self.facts.names_of(call.func) & SEEDS for call, _owner in self.facts.calls)

    def _tfds_load(self, call: cst.Call) -> bool:
        """``tfds.load(...)`` reading every example (no ``read_config``, which can shard it by
        an input context)."""
        return bool(self.facts.names_of(call.func) & {"tensorflow_datasets.load"}) and argument_value(call, "read_config") is None

    def _unpacked_from_tfds(self, binding: cst.CSTNode) -> bool:
        """A name unpacked from ``tfds.load(...)``: ``datasets, info = tfds.load(...,
        with_info=True)``, ``(train, test), info = tfds.load(split=[...], ...)``."""
        node = self.program.parent(binding)
        if not isinstance(node, cst.Element):
            return False
        while isinstance(node, (cst.Element, cst.Tuple, cst.List)):
            node = self.program.parent(node)
        assign = self.program.parent(node) if isinstance(node, cst.AssignTarget) else None
        return isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call) and self._tfds_load(assign.value)

    # --- TF 1's auto_shard = True / False ---------------------------------------------------------

    def _old_spellings(self) -> None:
        for assign in self.facts.assigns:
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                continue
            target = assign.targets[0].target
            path = attribute_path(target)
            if path is None or len(path) < 3 or path[-2:] != ("experimental_distribute", "auto_shard"):
                continue
            options = target.value.value  # type: ignore[attr-defined]
            value = assign.value
            if isinstance(value, cst.Name) and value.value == "True":
                self.fix(target, OLD_SPELLING, lambda edits, t=target, v=value: self._renamed(edits, t, v, "AUTO"))
            elif isinstance(value, cst.Name) and value.value == "False":
                self.fix(target, OLD_SPELLING, lambda edits, t=target, v=value, o=options: self._off(edits, t, v, o))
            else:
                self.report(target, OLD_SPELLING, "set options.experimental_distribute.auto_shard_policy instead")

    def _off(self, edits, target: cst.Attribute, value: cst.BaseExpression, options: cst.BaseExpression) -> None:
        """OFF, when every dataset given these options was shard()ed before them."""
        uses = [u for u in self._option_uses(options) if u is not options]
        given = 0
        for use in uses:
            parent = self.program.parent(use)
            holder = self.program.parent(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and holder.func.attr.value == "with_options":
                lineage = Lineage()
                self._follow(holder, lineage, 0)
                if not lineage.complete or "shard" not in lineage.methods:
                    raise NotFound(OLD_OFF)
                given += 1
            elif isinstance(parent, cst.Attribute) and parent.attr.value == "experimental_distribute":
                continue
            else:
                raise NotFound(OLD_OFF)
        if not given:
            raise NotFound(OLD_OFF)
        self._renamed(edits, target, value, "OFF")

    def _renamed(self, edits, target: cst.Attribute, value: cst.BaseExpression, policy: str) -> None:
        tf = module_alias(self.program, "tensorflow")
        if tf is None:
            raise NotFound("the file does not import tensorflow as a module: set auto_shard_policy by hand")
        edits.replace(target, lambda node: node.with_changes(attr=cst.Name("auto_shard_policy")))
        edits.replace(value, lambda node: cst.parse_expression(f"{tf}.data.experimental.AutoShardPolicy.{policy}"))

    # --- distribute_datasets_from_function ------------------------------------------------------------

    def _from_function(self, call: cst.Call, fn: cst.BaseExpression | None) -> None:
        bodies = self._function_bodies(fn, 0)
        if bodies is None:
            return
        for body in bodies:
            code = self.program.module.code_for_node(body)
            if ".shard(" in code or "input_pipeline_id" in code:
                return
        self.report(call, FROM_FUNCTION, "shard the dataset in the function: .shard(input_context.num_input_pipelines, input_context.input_pipeline_id)")

    def _function_bodies(self, fn: cst.BaseExpression | None, depth: int) -> list[cst.CSTNode] | None:
        """The code ``fn`` runs (itself and the local functions it calls); None when it hands
        its input context, or anything, to code autofix cannot see into (that may shard)."""
        if fn is None or depth > 3:
            return None
        if isinstance(fn, cst.Lambda):
            body: cst.CSTNode = fn.body
            params = fn.params
        else:
            definition = self.facts.local_definition(fn)
            if not isinstance(definition, cst.FunctionDef):
                return None
            body = definition
            params = definition.params
        context = {p.name.value for p in params.params}
        found = [body]
        for inner in calls_in(body):
            names = self.facts.names_of(inner.func)
            if any(n.startswith(("tensorflow.", "builtins.", "numpy.")) for n in names):
                continue
            local = self.facts.local_definition(inner.func)
            if isinstance(local, cst.FunctionDef):
                more = self._function_bodies(inner.func, depth + 1)
                if more is None:
                    return None
                found.extend(more)
                continue
            passes_context = any(isinstance(a.value, cst.Name) and a.value.value in context for a in inner.args)
            if isinstance(inner.func, cst.Attribute) and not self.facts.is_module_reference(inner.func) and not passes_context:
                continue  # a method of a dataset (or of the context itself)
            return None
        return found
