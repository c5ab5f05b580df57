"""Planning the batch-size fixes of TFD002.

A *site* is where a batch size is used: ``ds.batch(n)``, ``fit(..., batch_size=n)``, a Keras
loader's ``batch_size=``. Following the value back gives its *entries*: where it is written
(a literal at the site, a constant, the argument or default a helper is called with). Each
entry is scaled where it is written, by the strategy that exists where training happens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis import ordering
from autofix.analysis.contexts import Context, Contexts, index_of
from autofix.analysis.dataflow import LOADER_DEFAULT_BATCH, LOADERS, PASSTHROUGH, DataFlow, Flow
from autofix.analysis.facts import UNKNOWN_STRATEGY, Facts
from autofix.analysis.steps import Steps
from autofix.analysis.syntax import argument, nodes_in, parameter_argument
from autofix.analysis.training import TrainingModel
from autofix.codegen import add_keyword, fresh_name, scaled
from autofix.rule import SUPPRESSED, Rule

from .evidence import Evidence

DEFAULTS = {
    "keras.utils.timeseries_dataset_from_array": 128,
    "keras.preprocessing.timeseries_dataset_from_array": 128,
}
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
TPU = "TPUStrategy"
_RAGGED_BATCH = frozenset({"tensorflow.data.experimental.dense_to_ragged_batch"})
# Array makers whose first argument is the shape (or the number of rows).
_SHAPE_FIRST = frozenset(
    {
        "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full",
        "numpy.random.rand", "numpy.random.randn", "numpy.random.random",
        "tensorflow.zeros", "tensorflow.ones", "tensorflow.fill",
        "tensorflow.random.normal", "tensorflow.random.uniform",
    }
)
KERAS_NOTE = "; note that Keras 3 fails when the first batch does not split evenly over the replicas"


@dataclass(eq=False)
class Site:
    call: cst.Call
    kind: str  # "batch", "fit", "loader"
    arg: cst.Arg | None
    default: int | None = None
    flow: Flow | None = None


@dataclass(eq=False)
class Entry:
    """Where a batch size is written: ``value`` (None: a default, to be written out as
    ``keyword=default`` in ``call``)."""

    at: cst.CSTNode
    value: cst.BaseExpression | None
    call: cst.Call | None = None
    keyword: str = "batch_size"
    default: int | None = None


@dataclass
class Plan:
    """What fixing one site takes; applied only if every part of it is possible."""

    scale: list[cst.BaseExpression] = field(default_factory=list)
    keywords: list[tuple[cst.Call, str, int]] = field(default_factory=list)
    constants: list[cst.Name] = field(default_factory=list)
    # A per-replica constant used where the file's own global batch belongs: (use, global name).
    globals: list[tuple[cst.Name, str]] = field(default_factory=list)
    # Blocks where the strategy must move up, to before the statement at this index.
    move_up: dict[int, int] = field(default_factory=dict)


class BatchPlanner:
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.program = rule.program
        self.facts: Facts = rule.facts
        self.contexts = Contexts.of(rule.program)
        self.flows = DataFlow.of(rule.program)
        self.training = TrainingModel.of(rule.program)
        self.evidence = Evidence(rule.program)
        self.edits = rule.edits
        self.extra: list[Context] = []
        self._names: set[str] | None = None
        self._renamed: dict[int, str] = {}
        # Blocks (by id) -> (context, list of statements to insert after the strategy)
        self._inserts: dict[int, tuple[Context, list[str]]] = {}
        self._moves: dict[int, tuple[Context, int]] = {}
        # Blocks (by id) -> index of the statement the inserted lines must follow.
        self._insert_after: dict[int, int] = {}
        self._move_to: dict[int, int] = {}

    # --- sites -------------------------------------------------------------------------------

    def plan(self) -> None:
        created = {self.contexts.function_of(c.block) for c in self.contexts.created}
        for function in self.facts.functions:
            if function in created or self.contexts.skip_function(function):
                continue
            context = self.contexts.function_context(function)
            if context is not None:
                self.extra.append(context)
        sites = self._sites()
        entry_uses: set[int] = set()
        resolved = []
        for site in sites:
            context, why = self._training_context(site)
            if context is None and why is None:
                continue
            if self.rule.suppressed(site.arg.value if site.arg is not None else site.call):
                why = SUPPRESSED
            entries: list[Entry] = []
            if why is None:
                why = self._entries(site, context, entries)
            resolved.append((site, context, entries, why))
            entry_uses.update(id(e.value) for e in entries if e.value is not None)
        self._entry_uses = entry_uses
        plans = []
        for site, context, entries, why in resolved:
            plan = Plan()
            if why is None:
                for entry in entries:
                    why = self._plan_entry(entry, context, plan)
                    if why:
                        break
            plans.append((site, context, plan, why))
        self._check_moves(plans)
        for site, context, plan, why in plans:
            node = site.arg.value if site.arg is not None else site.call
            if why:
                # A reason that asks the reader to scale by hand warns about uneven batches;
                # the suppression and the validation reason say all there is to say.
                note = "" if why == SUPPRESSED or why == _small_validation(site.call) else KERAS_NOTE
                self.rule.report(node, _message(site), why + note)
                continue
            if self.rule.report(node, _message(site)):
                self._commit(plan, context)
        self._apply_blocks()

    def _sites(self) -> list[Site]:
        sites = []
        for call, _owner in self.facts.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and not self.facts.is_module_reference(func.value):
                method = func.attr.value
                if method in ("batch", "padded_batch", "ragged_batch"):
                    arg = argument(call, "batch_size", 0)
                    # Data from a name bound nowhere is a fragment whose source is not known.
                    if arg is not None and not self._unbound_source(func.value):
                        sites.append(Site(call, "batch", arg, flow=self.flows.flow(call)))
                elif method == "fit":
                    # fit batches arrays; ``batch_size=`` has no effect on a dataset or a
                    # generator, which batch themselves.
                    x = argument(call, "x", 0)
                    arg = argument(call, "batch_size")
                    if x is None or _is_none(x.value) or self._is_dataset(x.value) or (arg is not None and _is_none(arg.value)):
                        continue
                    if arg is not None:
                        sites.append(Site(call, "fit", arg))
                    elif self._is_array(x.value) and not self._fewer_rows(x.value, 32):
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
        if arg is None or any(self.facts.is_strategy_expr(a.value) or self.evidence.counts_devices(a) for a in call.args):
            return None
        flow = self.flows.flow(call)
        return Site(call, "batch", arg, flow=flow) if flow.sinks else None

    def _training_context(self, site: Site) -> tuple[Context | None, str | None]:
        """The context training happens in, or (None, reason) when it is reported only, or
        (None, None) when this site is not about training under a strategy at all."""
        # ``autofix migrate`` (Program.migration): the file trained on one device, so its batch
        # is the per-replica batch whatever names, flags or comments say; only a batch made
        # from the replica count is global.
        per_replica = self.program.migration is not None
        if self.evidence.batches_are_global and not per_replica:
            return None, None
        if site.arg is not None and self.evidence.already_global(site.arg.value, by_name=not per_replica):
            return None, None
        if site.flow is not None:
            sinks = [s.call for s in site.flow.sinks if s.kind in ("train", "step")]
        else:
            sinks = [site.call]
        trained = [t for t in (self.training.distributed_site(call) for call in sinks) if t is not None]
        if not trained:
            return None, None  # evaluation, prediction, or training under no multi-replica strategy
        if any(_fixed_batch(member) for t in trained for member in t.members):
            return None, None  # the model is built for one batch size: the data's is global
        classes = set().union(*(t.strategies for t in trained))
        if (TPU in classes or UNKNOWN_STRATEGY in classes) and not self._has_derived_global(site):
            # On TPUs batch sizes are global by convention (a strategy made elsewhere may be
            # one), unless the file itself multiplies this one into its global batch.
            return None, None
        located = [found for found in (self._located(t.call) or self._runs_after(t.call) for t in trained) if found is not None]
        if not located:
            return None, None
        context = located[0]
        if any(c.strategy is not context.strategy for c in located) or self._shares_block(context):
            # Which strategy's replicas divide the batch is not known. (One strategy, chosen
            # among kinds or made twice, is scaled by its own num_replicas_in_sync.)
            return None, None
        if site.kind == "fit":
            why = _small_validation(site.call)
            if why:
                return context, why
        return context, None

    def _shares_block(self, context: Context) -> bool:
        """Whether another strategy is made in the same block (``mirrored`` and ``one_device``)."""
        return any(c.block is context.block and c.strategy is not context.strategy for c in self.contexts.created)

    def _runs_after(self, node: cst.CSTNode) -> Context | None:
        """The one strategy context that exists whenever ``node`` runs (a training step
        called only inside the scope, say), if there is exactly one."""
        found = [c for c in self.contexts.created if self.contexts.executes_after(node, c)]
        return found[0] if len(found) == 1 else None

    def _located(self, node: cst.CSTNode) -> Context | None:
        found = self.contexts.at(node, self.extra)
        if found is None:
            return None
        context, index = found
        if context.index is not None and index <= context.index:
            return None
        return context

    # --- entries: where the value is written -------------------------------------------------

    def _entries(self, site: Site, context: Context, entries: list[Entry]) -> str | None:
        if site.arg is None:
            entries.append(Entry(site.call, None, site.call, "batch_size", site.default))
            return None
        return self._trace(site.call, site.arg.value, entries, site.flow, set())

    def _trace(self, at: cst.CSTNode, value: cst.BaseExpression, entries: list[Entry], flow: Flow | None, seen: set) -> str | None:
        if isinstance(value, cst.Name):
            bindings = self.facts.bindings(value)
            if bindings and len(bindings) == 1 and isinstance(bindings[0], cst.Param):
                return self._trace_parameter(bindings[0], entries, flow, seen)
        entries.append(Entry(at, value))
        return None

    def _trace_parameter(self, param: cst.Param, entries: list[Entry], flow: Flow | None, seen: set) -> str | None:
        if id(param) in seen:
            return "the batch size goes round in a cycle of calls"
        seen.add(id(param))
        function = self.program.enclosing_function(param)
        if function is None or self.facts.functions[function].is_method:
            return "the batch size is a method parameter"
        calls = [self.program.parent(r) for r in self.facts.references(function)]
        calls = [c for c in calls if isinstance(c, cst.Call)]
        if flow is not None and any(self.facts.local_definition(c.func) is function for c in flow.through):
            # The data is returned by the helper: only the calls whose result is trained on
            # get a scaled batch; the others keep the default.
            calls = [c for c in calls if self.flows.flow(c).trains]
        calls = [c for c in calls if self._located(c) is not None]
        if not calls:
            return f"{function.name.value}() is not called where the strategy exists"
        for call in calls:
            arg = parameter_argument(function, call, param)
            if arg is not None:
                why = self._trace(call, arg.value, entries, None, seen)
                if why:
                    return why
                continue
            default = param.default
            if isinstance(default, cst.Integer):
                entries.append(Entry(call, None, call, param.name.value, int(default.value, 0)))
            elif default is not None and self.evidence.already_global(default):
                continue
            else:
                return f"{function.name.value}() is called without {param.name.value} and its default is not a number"
        return None

    # --- plans -------------------------------------------------------------------------------

    def _plan_entry(self, entry: Entry, context: Context, plan: Plan) -> str | None:
        if entry.value is not None and self.evidence.already_global(entry.value):
            return None
        if entry.value is None:
            why = self._visible(entry.at, context, plan)
            if why:
                return why
            plan.keywords.append((entry.call, entry.keyword, entry.default))  # type: ignore[arg-type]
            return None
        value = entry.value
        if isinstance(value, cst.Name):
            bindings = self.facts.bindings(value)
            if bindings and len(bindings) == 1 and self.facts.assigned_value(bindings[0]) is not None:
                binding = bindings[0]
                assert isinstance(binding, cst.Name)
                derived = self._derived_global(binding)
                if derived is not None:
                    # ``GLOBAL = BATCH * strategy.num_replicas_in_sync`` exists: BATCH is the
                    # per-replica size by intent, and the batch must be GLOBAL.
                    target, line = derived
                    if target is None:
                        # ``global_batch_size=BATCH * strategy.num_replicas_in_sync`` inline:
                        # the batch is scaled where it is made, BATCH stays per replica.
                        why = self._visible(entry.at, context, plan)
                        if why:
                            return why
                        plan.scale.append(value)
                        return None
                    scope = self.program.scope(entry.at)
                    seen = set(scope[target.value]) if scope is not None and target.value in scope else set()
                    if seen != {self.program.assignment(target)} or line >= self.program.line(entry.at):
                        return (
                            f"{binding.value} is the per-replica batch ({target.value} = {binding.value} x replicas "
                            f"on line {line}); batch with {target.value}"
                        )
                    plan.globals.append((value, target.value))
                    return None
                others = [u for u in self.facts.uses(binding) if id(u) not in self._entry_uses]
                if self.program.migration is not None:
                    # Migrating: what a replica computes with the batch (a GAN's noise) means
                    # the per-replica batch, as on the one device it was written for, and so
                    # does the batch of data that is not trained on (evaluated on one device).
                    others = [u for u in others if not self._per_replica_read(u)]
                if others:
                    return self._plan_constant(binding, others, context, plan)
        elif not isinstance(value, (cst.Integer, cst.BinaryOperation, cst.UnaryOperation)):
            others = self._same_expression_elsewhere(value)
            if others:
                line = self.program.line(others[0])
                code = self.program.module.code_for_node(value)
                return f"{code} is also used on line {line}; define the global batch once ({code} * strategy.num_replicas_in_sync) and use it everywhere"
        why = self._visible(entry.at, context, plan)
        if why:
            return why
        plan.scale.append(value)
        return None

    def _per_replica_read(self, use: cst.CSTNode) -> bool:
        """Migrating: a read of the batch that keeps its single-device (per-replica) meaning."""
        if self.facts.values.enclosing_function(use) in Steps.of(self.program).functions:
            return True
        arg = self.program.parent(use)
        call = self.program.parent(arg) if isinstance(arg, cst.Arg) else None
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("batch", "padded_batch")
            and not self.flows.flow(call).trains
        )

    def _has_derived_global(self, site: Site) -> bool:
        value = site.arg.value if site.arg is not None else None
        if not isinstance(value, cst.Name):
            return False
        bindings = self.facts.bindings(value)
        return bool(bindings) and len(bindings) == 1 and isinstance(bindings[0], cst.Name) and self._derived_global(bindings[0]) is not None

    def _derived_global(self, binding: cst.Name) -> tuple[cst.Name | None, int] | None:
        """``GLOBAL = BATCH * strategy.num_replicas_in_sync`` for the constant bound at
        ``binding``: the name the file gives the global batch (None when the product is used
        where it is made, as ``global_batch_size=BATCH * n``), and the line that defines it."""
        found = None
        for use in self.facts.uses(binding):
            product = self.program.parent(use)
            if not (isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply)):
                continue
            other = product.right if product.left is use else product.left
            if not self.evidence.already_global(other):
                continue
            target = self.facts.assigned_name(product)
            if target is not None:
                return target, self.program.line(target)
            found = found or (None, self.program.line(product))
        return found

    def _plan_constant(self, binding: cst.Name, others: list[cst.CSTNode], context: Context, plan: Plan) -> str | None:
        """``BATCH = 64`` used for more than the batch: ``BATCH_PER_REPLICA = 64``, and
        ``BATCH = BATCH_PER_REPLICA * strategy.num_replicas_in_sync`` once the strategy exists."""
        definition = self.program.statement_of(binding)
        home = self.program.block_of(definition) if definition is not None else None
        if not isinstance(definition, cst.SimpleStatementLine) or home is None:
            return f"{binding.value} is not set by a plain assignment"
        block = context.block
        if home is not block and not isinstance(home, cst.Module):
            return f"{binding.value} is set in another function than the one that creates the strategy"
        if context.index is None:
            return f"{binding.value} is set outside the function that uses the strategy"
        after = context.index
        if home is block:
            after = max(after, index_of(block.body, definition))  # type: ignore[type-var]
        if isinstance(home, cst.Module) and not isinstance(block, cst.Module):
            # The global batch becomes a local of the function that creates the strategy, so
            # every use must be in that function (the renamed global is gone elsewhere).
            owner = self.contexts.function_of(block)
            outside = [u for u in self.facts.uses(binding) if owner not in self.program.ancestors(u)]
            if outside:
                return f"{binding.value} is also used outside {owner.name.value}(), which creates the strategy (line {self.program.line(outside[0])})"
        anchor = Context(block, context.strategy, after)
        early = [u for u in self.facts.uses(binding) if not self.contexts.executes_after(u, anchor)]
        if early:
            first = early[0]
            top = self.program.top_statement_in(first, block)
            index = index_of(block.body, top) if top is not None else None
            if index is None or (home is block and index <= index_of(block.body, definition)):
                return f"{binding.value} is used before the strategy is created (line {self.program.line(first)})"
            plan.move_up[id(block)] = min(plan.move_up.get(id(block), index), index)
            self._moves.setdefault(id(block), (context, index))
        plan.constants.append(binding)
        return None

    def _visible(self, node: cst.CSTNode, context: Context, plan: Plan) -> str | None:
        """None when the strategy can be named at ``node`` (possibly once it has moved up)."""
        found = self.contexts.at(node, self.extra)
        if found is not None:
            where, index = found
            if where.strategy is context.strategy:
                if where.index is None or index > where.index:
                    return None
                plan.move_up[id(where.block)] = min(plan.move_up.get(id(where.block), index), index)
                self._moves.setdefault(id(where.block), (where, index))
                return None
        function = self.program.enclosing_function(node)
        if function is not None:
            return (
                f"the batch size is fixed inside {function.name.value}(), where {context.strategy.name} "
                "is not visible; pass it in as a parameter"
            )
        return f"the batch is made where {context.strategy.name} does not exist"

    def _check_moves(self, plans) -> None:
        """Move the strategy up in each block only as far as the furthest site needs and the
        ordering rules allow; sites needing more are reported."""
        wanted: dict[int, int] = {}
        for _site, _context, plan, why in plans:
            if why:
                continue
            for block_id, index in plan.move_up.items():
                wanted[block_id] = min(wanted.get(block_id, index), index)
        allowed: dict[int, str | None] = {}
        for block_id, index in wanted.items():
            context, _ = self._moves[block_id]
            body = list(context.block.body)
            allowed[block_id] = ordering.why_not_move_up(self.program, body, context.index, index)  # type: ignore[arg-type]
        for position, (site, context, plan, why) in enumerate(plans):
            if why:
                continue
            for block_id in plan.move_up:
                if allowed.get(block_id):
                    plans[position] = (site, context, plan, f"it is batched before the strategy is created, and the strategy cannot move above it: {allowed[block_id]}")
                    break
        self._move_to = {b: i for b, i in wanted.items() if not allowed.get(b)}

    # --- edits -------------------------------------------------------------------------------

    def _commit(self, plan: Plan, context: Context) -> None:
        name = context.strategy.name
        for value in plan.scale:
            self.edits.replace(value, lambda node, name=name: scaled(node, name))
        for call, keyword, default in plan.keywords:
            self.edits.replace(call, lambda node, k=keyword, d=default, name=name: add_keyword(node, k, d, name))
        for use, global_name in plan.globals:
            self.edits.replace(use, lambda node, g=global_name: node.with_changes(value=g))
        for binding in plan.constants:
            if id(binding) in self._renamed:
                continue
            new = self._fresh(binding.value)
            self._renamed[id(binding)] = new
            self.edits.replace(binding, lambda node, new=new: node.with_changes(value=new))
            _, lines = self._inserts.setdefault(id(context.block), (context, []))
            lines.append(f"{binding.value} = {new} * {name}.num_replicas_in_sync\n")
            definition = self.program.statement_of(binding)
            anchor = context.index
            if self.program.block_of(definition) is context.block:
                anchor = max(anchor, index_of(context.block.body, definition))
            self._insert_after[id(context.block)] = max(self._insert_after.get(id(context.block), -1), anchor)

    def _apply_blocks(self) -> None:
        blocks = {**{b: c for b, (c, _) in self._inserts.items()}, **{b: self._moves[b][0] for b in self._move_to}}
        for block_id, context in blocks.items():
            dest = self._move_to.get(block_id)
            _, lines = self._inserts.get(block_id, (context, []))
            anchor = self._insert_after.get(block_id, context.index)
            self.edits.add(context.block, _move_and_insert(context.index, dest, anchor, lines))

    def _fresh(self, name: str) -> str:
        if self._names is None:
            self._names = self.facts.names()
        return fresh_name(self._names, f"{name}_PER_REPLICA" if name.isupper() else f"{name}_per_replica")

    # --- what values are ---------------------------------------------------------------------

    def _is_array(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if any(n.startswith(_ARRAY_MAKERS) for n in names):
                return True
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("astype", "reshape", "numpy"):
                return self._is_array(expr.func.value, depth + 1)
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self._is_array(expr.left, depth + 1) or self._is_array(expr.right, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._is_array(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            bindings = self.facts.bindings(expr)
            if not bindings:
                return False
            return all(self._binding_is_array(b, depth + 1) for b in bindings)
        return False

    def _unbound_source(self, expr: cst.BaseExpression) -> bool:
        """Whether a dataset method chain starts at a name that nothing binds."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        if not isinstance(expr, cst.Name) or self.program.access(expr) is None:
            return False
        return self.facts.bindings(expr) == [] or not self.program.access(expr).referents

    def _fewer_rows(self, expr: cst.BaseExpression, batch: int) -> bool:
        """Whether the array ``expr`` is known to hold at most ``batch`` examples
        (``np.random.rand(1, 10)``, ``np.zeros((16, 4))``)."""
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.reaching_bindings(expr) or ()]
            return bool(values) and all(v is not None and self._fewer_rows(v, batch) for v in values)
        if not isinstance(expr, cst.Call) or not expr.args or not self.facts.names_of(expr.func) & _SHAPE_FIRST:
            return False
        first = expr.args[0].value
        if isinstance(first, (cst.Tuple, cst.List)) and first.elements:
            first = first.elements[0].value
        return isinstance(first, cst.Integer) and int(first.value, 0) <= batch

    def _is_dataset(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``expr`` is a tf.data dataset, a Keras dataset loader's result, a generator,
        or a ``keras.utils.Sequence``: input that batches itself."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if any(n.startswith("tensorflow.data.") or n in LOADERS for n in names):
                return True
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in (*PASSTHROUGH, "batch", "padded_batch", "unbatch", "experimental_distribute_dataset"):
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
            return bool(values) and all(v is not None and self._is_dataset(v, depth + 1) for v in values)
        return False

    def _binding_is_array(self, binding: cst.CSTNode, depth: int) -> bool:
        value = self.facts.assigned_value(binding)
        if value is not None:
            return self._is_array(value, depth)
        # ``(x_train, y_train), _ = keras.datasets.mnist.load_data()``
        node = binding
        for _ in range(4):
            node = self.program.parent(node)
            if isinstance(node, cst.AssignTarget):
                assign = self.program.parent(node)
                if isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call):
                    return any(n.startswith("keras.datasets.") for n in self.facts.names_of(assign.value.func))
                return False
        return False

    def _same_expression_elsewhere(self, value: cst.BaseExpression) -> list[cst.CSTNode]:
        """Other places using the very same attribute (``args.batch_size``) in this scope."""
        if not isinstance(value, cst.Attribute):
            return []
        chain: list[str] = []
        root: cst.BaseExpression = value
        while isinstance(root, cst.Attribute):
            chain.append(root.attr.value)
            root = root.value
        if not isinstance(root, cst.Name):
            return []
        found = []
        for access in self.program.index.accesses.values():
            if access.name != root.value:
                continue
            node: cst.CSTNode = access.node
            for attr in reversed(chain):
                parent = self.program.parent(node)
                if not (isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == attr):
                    break
                node = parent
            else:
                if node is not value and id(node) not in self._entry_uses:
                    found.append(node)
        return found


def _small_validation(call: cst.Call) -> str | None:
    """Arrays split off for validation (``validation_split=``, ``validation_data=(x, y)``) are
    of a size not known here; if the set is smaller than the global batch, it is one batch,
    and on Keras 3.15 that batch must split evenly over the replicas, which no batch size
    chosen here can promise."""
    for arg in call.args:
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        if name == "validation_split" or (name == "validation_data" and isinstance(arg.value, (cst.Tuple, cst.List))):
            return (
                f"with {name}=, a validation set smaller than the scaled global batch is a single "
                "batch, and Keras 3 fails when that batch does not split evenly over the replicas; "
                "scale batch_size by hand once the validation set is known to hold a global batch, "
                "or validate on a tf.data.Dataset"
            )
    return None


def _message(site: Site) -> str:
    if site.arg is None:
        what = f"the default batch size ({site.default})"
    else:
        what = "batch size"
    return (
        f"{what} is not scaled by strategy.num_replicas_in_sync: it is the global batch, split "
        "across the replicas, so each replica gets only a fraction of it"
    )


def _move_and_insert(creation: int, dest: int | None, anchor: int, lines: list[str]):
    """Move the strategy statement (``creation``) up to ``dest``, then insert ``lines`` after
    the later of it and ``anchor`` (the statement defining what they use)."""
    inserted = [cst.parse_statement(line) for line in lines]

    def edit(body):
        order = list(range(len(body)))
        if dest is not None and dest < creation:
            order = order[:dest] + [creation] + order[dest:creation] + order[creation + 1 :]
        new = [body[i] for i in order]
        if inserted:
            position = max(order.index(creation), order.index(anchor)) + 1
            new[position:position] = inserted
        return new

    return edit


def _is_generator(function: cst.FunctionDef) -> bool:
    return bool(nodes_in(function, cst.Yield, stop=(cst.FunctionDef, cst.Lambda)))


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _fixed_batch(call: cst.Call) -> bool:
    """``keras.Input(..., batch_size=32)`` (or ``batch_shape=``, ``batch_input_shape=``)."""
    return any(a.keyword is not None and a.keyword.value in ("batch_size", "batch_shape", "batch_input_shape") for a in call.args)
