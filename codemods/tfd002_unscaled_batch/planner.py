"""Planning the batch-size fixes of TFD002.

A *site* is where a batch size is used (:mod:`.sites`). Following the value back gives its *entries*: where it is written
(a literal at the site, a constant, the argument or default a helper is called with). How each
entry is changed, and what that means for every other read of the same value, is decided in
:mod:`.values`; here the sites are found, judged (is this training data under a strategy with
several replicas, and is the batch not already global), and the plans checked and handed to
:mod:`.edits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis.facts import ordering
from autofix.analysis.facts.contexts import Context, Contexts
from autofix.analysis.facts.dataflow import DataFlow, Flow
from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.strategies import UNKNOWN_STRATEGY
from autofix.analysis.steps.step_losses import normalizers
from autofix.analysis.syntax import argument_value, parameter_argument
from autofix.analysis.training.comparisons import Comparisons
from autofix.analysis.training.model import TrainingModel
from autofix.analysis.training.multiworker import MULTI_WORKER, MultiWorker
from autofix.rule import SUPPRESSED, Rule
from autofix.tf import symbols

from .edits import FixWriter
from .evidence import Evidence
from .first_batches import FirstBatches
from .helpers import Helpers
from .sites import Site, Sites
from .uses import EVALUATION, KEPT, TRAINING, Webs
from .values import Entry, EntryPlanner, Plan

TPU = "TPUStrategy"
LOCAL_DEVICES = (
    "the batch counts only this worker's devices (a device list is this machine's): under "
    "MultiWorkerMirroredStrategy the global batch is split over every worker's replicas, so each "
    "replica gets 1 / (number of workers) of what this sizes it for; make it "
    "<per-replica batch> * strategy.num_replicas_in_sync (or multiply by the number of workers)"
)
KERAS_NOTE = "; note that Keras 3 fails when the first batch does not split evenly over the replicas"
UNSAID = (
    "nothing in the file says whether this batch is meant per replica or as the global batch: "
    "scaling it would change what the file trains if it is the global batch its author chose. "
    "If it is each replica's batch, scale it (--unsafe-fixes does), or say so (a name such as "
    "BATCH_SIZE_PER_REPLICA, or a comment '# per replica'); if it is global, say so ('# global batch')"
)


@dataclass(eq=False)
class Finding:
    """A site whose batch is a per-replica training batch under a multi-replica strategy.
    ``context``: where that strategy exists (None: not where a fix could name it); ``why``:
    why it is reported without a fix, when that is known before planning."""

    site: Site
    context: Context | None
    why: str | None = None
    # The file's own code says the batch is per replica (so names saying global do not count).
    per_replica: bool = False
    # Something in the file says the batch is meant per replica: its code, a name or a
    # comment (``PER_GPU_BATCH``, ``# per replica``), or migrating it. Without that, the batch
    # may be the global batch the author chose: it is reported, and scaled only with
    # --unsafe-fixes.
    meant_per_replica: bool = True


class BatchPlanner:
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.program = rule.program
        self.facts: Facts = rule.facts
        self.contexts = Contexts.of(rule.program)
        self.flows = DataFlow.of(rule.program)
        self.training = TrainingModel.of(rule.program)
        self.evidence = Evidence(rule.program)
        self.webs = Webs(rule.program, self._counts_replicas)
        self.extra: list[Context] = []
        # Where the data each batch-size read sizes goes (TRAINING, EVALUATION, KEPT).
        self.destinations: dict[int, str] = {}
        # The values (by id) written where a finding's batch enters: each is planned by its site.
        self.entry_values: set[int] = set()
        self._feeds: dict[int, list[cst.CSTNode]] = {}
        self.writer = FixWriter(self.facts, self.webs, rule.edits)
        self.first_batches = FirstBatches(rule.program)
        self.helpers = Helpers(self)
        self.sites: list[Site] = []

    # --- sites -------------------------------------------------------------------------------

    def plan(self) -> None:
        created = {self.contexts.function_of(c.block) for c in self.contexts.created}
        for function in self.facts.functions:
            if function in created or self.contexts.skip_function(function):
                continue
            context = self.contexts.function_context(function)
            if context is not None:
                self.extra.append(context)
        sites = Sites(self.program, self.evidence).find()
        self.sites = sites
        findings: dict[int, Finding] = {}
        for site in sites:
            finding = self._finding(site)
            if finding is not None:
                if self.rule.suppressed(site.arg.value if site.arg is not None else site.call):
                    finding.why = SUPPRESSED
                findings[id(site)] = finding
        self.destinations = self._destinations(sites, findings)
        resolved = []
        for site in sites:
            finding = findings.get(id(site))
            if finding is None:
                continue
            entries: list[Entry] = []
            why = finding.why or self._entries(site, finding.context, entries)
            resolved.append((site, finding, entries, why))
            for entry in entries if why is None else ():
                if entry.value is not None:
                    factor = self.webs.factor(entry.value)
                    self.entry_values.update(id(v) for v in (entry.value, factor) if v is not None)
        entries_planner = EntryPlanner(self)
        plans = []
        unsaid: set[int] = set()
        for site, finding, entries, why in resolved:
            plan = Plan()
            for entry in entries if why is None else ():
                why = self._plan_entry(entry, finding, plan, entries_planner)
                if why:
                    break
            plans.append((site, finding.context, plan, why))
            if not finding.meant_per_replica and not self.program.migrated:
                # (What a migration wrote from single-device code is checked as the per-replica
                # batch it is: its findings say why the migration stopped.)
                unsaid.add(id(site))
        # What is not fixed by default moves nothing.
        moving = [p for p in plans if id(p[0]) not in unsaid or self.rule.unsafe_fixes]
        self._check_moves(moving)
        checked = {id(p[0]): p for p in moving}
        for site, context, plan, why in [checked.get(id(p[0]), p) for p in plans]:
            node = site.arg.value if site.arg is not None else site.call
            if id(site) in unsaid and why is None and not self.rule.unsafe_fixes:
                # Whether the author meant this batch per replica is not said: scaling it
                # would change the global batch, and so what correct code trains.
                why = UNSAID
            if why:
                # A reason that asks the reader to scale by hand warns about uneven batches;
                # the suppression and the first batches' reasons say all there is to say.
                note = "" if why in (SUPPRESSED, LOCAL_DEVICES, UNSAID) or why in self.first_batches.reasons else KERAS_NOTE
                self.rule.report(node, _message(site), why + note, self.evidence.constants_in(node), suggestion=id(site) in unsaid)
                continue
            if self.rule.report(node, _message(site), related=self.evidence.constants_in(node), suggestion=id(site) in unsaid):
                self._commit(site, plan, context)
        self.writer.apply()

    def _commit(self, site: Site, plan: Plan, context: Context | None) -> None:
        self.writer.commit(plan, context)
        size = self.first_batches.validation_batches.get(id(site.call))
        if size is not None and context is not None:
            self.writer.validation_batch(site.call, size, context)

    def _finding(self, site: Site) -> Finding | None:
        """The finding at ``site``, or None when it is not about training under a strategy
        with several replicas, or its batch is already global."""
        # The file's own code saying the batch is per replica (it multiplies it by the
        # replica count elsewhere) outranks what names, words and TPUs suggest.
        # So does ``autofix migrate`` (Program.migration): the file trained on one device, so
        # its batch is the per-replica batch whatever names, flags or comments say; only a
        # batch made from the replica count is global.
        per_replica = self.program.migration is not None or self._per_replica_by_code(site)
        if site.kind == "fit" and site.arg is None and self.program.migration is None:
            # Keras's default batch (32) under a strategy is a global batch nothing the user
            # wrote asks to scale: in code that already distributes, whoever left it out took
            # Keras's global batch. (Migrating from one device, the file trained on 32 per
            # step: its replicas keep that batch each.)
            return None
        if self.evidence.in_batch_objective:
            return None
        if not per_replica and self.evidence.text_says_global:
            return None
        # A batch that counts only this machine's devices is global under MirroredStrategy
        # and one worker's share under MultiWorkerMirroredStrategy (decided below).
        local_only = False
        if site.arg is not None and self.evidence.already_global(site.arg.value, by_name=not per_replica):
            if not self.evidence.counts_local_devices_only(site.arg.value, by_name=not per_replica):
                return None
            local_only = True
        if self._path_set_global(site):
            return None
        if site.flow is not None:
            sinks = [s.call for s in site.flow.sinks if s.kind in ("train", "step")]
        else:
            sinks = [site.call]
        if not MultiWorker.of(self.program).keras.keras2:
            # Keras 3's train_on_batch hands the whole batch to every replica (measured,
            # docs/losses.md): no replica gets a fraction of it, and the update is the one
            # device's of that batch; only tf_keras splits it over the replicas as fit does.
            sinks = [c for c in sinks if not _train_on_batch(c)]
        trained = [t for t in (self.training.distributed_site(call) for call in sinks) if t is not None]
        if not trained:
            return None  # evaluation, prediction, or training under no multi-replica strategy
        if not per_replica and self.program.migration is None and self._divided_by_itself(site):
            return None  # the step divides its loss by this very batch, as the global batch
        if any(_fixed_batch(member) for t in trained for member in t.members):
            return None  # the model is built for one batch size: the data's is global
        if any(symbols.makes_parallel_model(self.facts.names_of(member.func)) for t in trained for member in t.members):
            return None  # Keras 2's multi_gpu_model slices the batch it is fed over its GPUs: it is global
        compared = None if per_replica else self._compared(site, [t.call for t in trained])
        if compared is True:
            return None  # the batch a single-device twin is given too: the batch compared
        if not per_replica and site.kind == "fit" and site.arg is not None and self.evidence.steps_written_out(site.call, site.arg.value):
            return None  # the file counts an epoch in steps of this whole batch
        classes = set().union(*(t.strategies for t in trained))
        if (TPU in classes or UNKNOWN_STRATEGY in classes) and not per_replica:
            # On TPUs batch sizes are global by convention (a strategy made elsewhere may be
            # one), unless the file itself multiplies this one into its global batch.
            return None
        if local_only:
            # N workers each feed a batch sized for one machine: the global batch is a worker's.
            # Scaling it needs the number of workers, which the file does not give.
            multi = MultiWorker.of(self.program)
            if classes and classes <= MULTI_WORKER and multi.strategies:
                return Finding(site, None, LOCAL_DEVICES)
            return None
        located = [found for found in (self._located(t.call) or self._runs_after(t.call) for t in trained) if found is not None]
        if located:
            context = located[0]
            if any(c.strategy is not context.strategy for c in located) or self._shares_block(context):
                # Which strategy's replicas divide the batch is not known. (One strategy, chosen
                # among kinds or made twice, is scaled by its own num_replicas_in_sync.)
                located = []
        if located and self.program.migration is not None and located[0] not in self.contexts.created:
            # Migrating, a step's wrapper sees the strategy made where the batch is: the global
            # batch is defined there, where the step and the loop can read it too.
            here = self._located(site.call)
            if here is not None and here in self.contexts.created and here.strategy is located[0].strategy:
                located = [here]
                context = here
        if not located:
            # Only the file's own global batch can be put in without naming a strategy.
            return Finding(site, None, per_replica=True) if per_replica else None
        why = self.first_batches.why(site.call, site.arg, site.default) if site.kind == "fit" else None
        if why is None and self.program.migration is None and site.flow is not None and any(s.kind == "step" for s in site.flow.sinks):
            why = self._constant_divisor()
        if why is None and isinstance(compared, str):
            why = compared
        meant = (
            per_replica
            or (site.arg is not None and self.evidence.said_per_replica(site.arg.value, self.webs.operands))
            or (site.arg is not None and self.evidence.chosen_at_run_time(site.arg.value) and self.evidence.run_time_said_per_replica(site.arg.value))
            or self.evidence.rate_follows_replicas
        )
        return Finding(site, context, why, per_replica, meant)

    def _compared(self, site: Site, fits: list[cst.Call]) -> bool | str | None:
        """What a single-device twin of the trained model (:mod:`~autofix.analysis.training.comparisons`)
        says of the batch: True when the twin is fit at the same batch (the same number or
        name, or the same dataset), so that the file compares one device with several at one
        global batch; a reason to leave the batch alone when the twin is built beside it but
        never fit here (what it is compared at is not shown); None otherwise."""
        comparisons = Comparisons.of(self.program)
        refused: str | None = None
        for fit in fits:
            for twin in comparisons.twins(fit):
                if not twin.fits and refused is None:
                    refused = (
                        f"the file builds the same model without the strategy ({self._named(twin.maker)}, "
                        f"line {self.program.line(twin.maker)}) "
                        "to compare one device with several: whether this batch is the one both are meant to get "
                        "(a global batch) or each replica's is for the author to say"
                    )
                if any(self._fed_alike(site, fit, plain, comparisons) for plain in twin.fits):
                    return True
        return refused

    def _named(self, maker: cst.Call) -> str:
        """What holds the model ``maker`` makes (``model_normal``), or what it calls."""
        parent = self.program.parent(maker)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            return parent.targets[0].target.value
        return self.program.module.code_for_node(maker.func)

    def _fed_alike(self, site: Site, fit: cst.Call, plain: cst.Call, comparisons: Comparisons) -> bool:
        """Whether the single-device ``plain`` fit gets the batch the site gives ``fit``."""
        if site.kind == "fit":
            if site.arg is None:
                return False
            batch = comparisons.fit_batch(plain)
            return batch is not None and comparisons.same_batch(site.arg.value, batch)
        if site.arg is None:
            return False
        ours, theirs = argument_value(fit, "x", 0), argument_value(plain, "x", 0)
        if ours is not None and theirs is not None and comparisons.same_batch(ours, theirs):
            return True  # the very dataset
        return any(
            other.arg is not None
            and other.flow is not None
            and any(sink.call is plain for sink in other.flow.sinks)
            and comparisons.same_batch(site.arg.value, other.arg.value)
            for other in self.sites
            if other is not site
        )

    def _divided_by_itself(self, site: Site) -> bool:
        """Whether the batch is fed to a custom step whose loss is divided, as by the global
        batch, by this same batch (``compute_average_loss(l, global_batch_size=GLOBAL)`` with
        ``GLOBAL = BATCH`` and ``ds.batch(BATCH)``): the code says it is the global batch,
        split over the replicas on purpose (each replica's sum over its share, divided by it,
        adds up to the global mean)."""
        if site.arg is None or site.flow is None or not any(s.kind == "step" for s in site.flow.sinks):
            return False
        found = normalizers(self.program)
        comparisons = Comparisons.of(self.program)
        return bool(found) and all(comparisons.same_batch(site.arg.value, n.node) for n in found)

    def _constant_divisor(self) -> str | None:
        """Why a batch fed to a custom step cannot be scaled when the step divides its loss
        by a constant global batch (``compute_average_loss(..., global_batch_size=128)``): the
        batch would grow with the replicas and the divisor would not, so the summed gradient
        would grow with them."""
        for normalizer in normalizers(self.program):
            node = normalizer.node
            if self.evidence.already_global(node, by_name=False):
                continue  # made from the replica count: it follows the batch
            values = [node]
            if isinstance(node, cst.Name):
                bindings = self.facts.bindings(node) or []
                values = [self.facts.assigned_value(b) for b in bindings] if bindings else [None]
            if values and all(v is not None and _constant(v) for v in values):
                code = self.program.module.code_for_node(node)
                return (
                    f"the step divides its loss by a constant global batch ({code}, line {self.program.line(node)}): "
                    "scaled with the replicas, the batch would no longer be what the loss is divided by; "
                    "make both follow one global batch"
                )
        return None

    def _per_replica_by_code(self, site: Site) -> bool:
        """Whether a value the site's batch comes from is multiplied by the replica count
        somewhere in the file (``GLOBAL = BATCH * strategy.num_replicas_in_sync``)."""
        for read in self.feeds(site):
            web = self.webs.of(read)  # type: ignore[arg-type]
            if web is None or any(self.evidence.already_global(v, by_name=False) for v in web.values):
                continue  # (a global batch multiplied again says nothing about this one)
            if any(self.webs.product(r) is not None for r in web.reads):
                return True
        return False

    def _path_set_global(self, site: Site) -> bool:
        """Whether an attribute or key the batch is read from is set, before the read, to a
        value made from the replica or device count (``CFG["batch"] *= n_gpus``,
        ``Config.batch = 16 * strategy.num_replicas_in_sync``): it holds the global batch."""
        for read in self.feeds(site):
            web = self.webs.of(read)  # type: ignore[arg-type]
            if web is None or web.is_name:
                continue
            line = self.program.line(read)
            for node, value in zip(web.sets, web.values):
                if self.program.line(node) < line and self._counts_replicas(value):
                    return True
        return False

    def _counts_replicas(self, expr: cst.BaseExpression) -> bool:
        return self.evidence.counts_replicas(expr) or self.evidence.already_global(expr, by_name=False)

    # --- where each batch size's data goes -------------------------------------------------------

    def feeds(self, site: Site) -> list[cst.CSTNode]:
        """The reads (names and paths) that give the site its batch size, followed through
        the parameters of local helpers to every call's argument and the default."""
        if id(site) not in self._feeds:
            self._feeds[id(site)] = self._sources(site.arg.value, set()) if site.arg is not None else []
        return self._feeds[id(site)]

    def _sources(self, expr: cst.BaseExpression, seen: set[int]) -> list[cst.CSTNode]:
        found: list[cst.CSTNode] = []
        for operand in self.webs.operands(expr):
            bindings = self.facts.bindings(operand) if isinstance(operand, cst.Name) else None
            if not (bindings and len(bindings) == 1 and isinstance(bindings[0], cst.Param)):
                found.append(operand)
                continue
            param = bindings[0]
            function = self.program.enclosing_function(param)
            if id(param) in seen or function is None:
                continue
            seen.add(id(param))
            for value in self.evidence.arguments(param):
                found += self._sources(value, seen)
        return found

    def _destinations(self, sites: list[Site], findings: dict[int, Finding]) -> dict[int, str]:
        """For each read that is a batch size, where its data goes: training under the
        strategy (a finding), evaluation or prediction only, or elsewhere (KEPT: trained
        without the strategy, not known, or a finding that will not be fixed)."""
        rank = {EVALUATION: 0, TRAINING: 1, KEPT: 2}
        found: dict[int, str] = {}
        for site in sites:
            finding = findings.get(id(site))
            if finding is not None:
                kind = TRAINING if finding.why is None else KEPT
            else:
                sinks = {s.kind for s in site.flow.sinks} if site.flow is not None else {"train"}
                kind = EVALUATION if sinks and sinks <= {"evaluate", "predict"} else KEPT
            for read in self.feeds(site):
                if id(read) not in found or rank[kind] > rank[found[id(read)]]:
                    found[id(read)] = kind
        return found

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
            entries.append(Entry(site.call, None, site.call, site.keyword, site.default))
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

    def _plan_entry(self, entry: Entry, finding: Finding, plan: Plan, values: EntryPlanner) -> str | None:
        context = finding.context
        if entry.value is not None and self.evidence.already_global(entry.value, by_name=not finding.per_replica):
            return None
        if entry.value is None:
            if context is None:
                return "the strategy is not visible where the batch is made"
            why = self.visible(entry.at, context, plan)
            if why:
                return why
            plan.keywords.append((entry.call, entry.keyword, entry.default))  # type: ignore[arg-type]
            return None
        if isinstance(entry.value, cst.Integer) and context is not None and self._hidden(entry.at, context):
            # A number in a helper that cannot see the strategy: the helper is given it.
            return self.helpers.plan(entry.value, finding.site.call, finding.site.flow, context, plan)
        return values.plan(entry, context, plan)

    def _hidden(self, node: cst.CSTNode, context: Context) -> bool:
        """Whether ``node`` is in a function where ``context``'s strategy cannot be named."""
        if self.program.enclosing_function(node) is None:
            return False
        found = self.contexts.at(node, self.extra)
        return found is None or found[0].strategy is not context.strategy

    def visible(self, node: cst.CSTNode, context: Context, plan: Plan) -> str | None:
        """None when the strategy can be named at ``node`` (possibly once it has moved up)."""
        found = self.contexts.at(node, self.extra)
        if found is not None:
            where, index = found
            if where.strategy is context.strategy:
                if where.index is None or index > where.index:
                    return None
                plan.move_up[id(where.block)] = min(plan.move_up.get(id(where.block), index), index)
                self.writer.moves.setdefault(id(where.block), (where, index))
                return None
        function = self.program.enclosing_function(node)
        if function is not None:
            return (
                f"the batch size is fixed inside {function.name.value}(), where {context.strategy.name} "
                "is not visible; pass it in as a parameter"
            )
        return f"the batch is made where {context.strategy.name} does not exist"

    def note_move(self, context: Context, index: int) -> None:
        self.writer.moves.setdefault(id(context.block), (context, index))

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
            context, _ = self.writer.moves[block_id]
            body = list(context.block.body)
            allowed[block_id] = ordering.why_not_move_up(self.program, body, context.index, index)  # type: ignore[arg-type]
        for position, (site, context, plan, why) in enumerate(plans):
            if why:
                continue
            for block_id in plan.move_up:
                if allowed.get(block_id):
                    plans[position] = (site, context, plan, f"it is batched before the strategy is created, and the strategy cannot move above it: {allowed[block_id]}")
                    break
        self.writer.move_to = {b: i for b, i in wanted.items() if not allowed.get(b)}

    # --- edits -------------------------------------------------------------------------------

def _message(site: Site) -> str:
    if site.arg is None:
        what = f"the default batch size ({site.default})"
    else:
        what = "batch size"
    return (
        f"{what} is not scaled by strategy.num_replicas_in_sync: it is the global batch, split "
        "across the replicas, so each replica gets only a fraction of it"
    )


def _constant(expr: cst.BaseExpression) -> bool:
    """A number written out (``128``, ``64 * 2``)."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return _constant(expr.left) and _constant(expr.right)
    return False


def _train_on_batch(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "train_on_batch"


def _fixed_batch(call: cst.Call) -> bool:
    """``keras.Input(..., batch_size=32)`` (or ``batch_shape=``, ``batch_input_shape=``)."""
    return any(a.keyword is not None and a.keyword.value in ("batch_size", "batch_shape", "batch_input_shape") for a in call.args)
