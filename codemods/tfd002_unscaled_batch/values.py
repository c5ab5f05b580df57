"""How one entry of a batch size is changed, and what else that changes.

An entry is where a training batch size is written (see :mod:`.planner`). Which fix is made
depends on what else reads the same value (its web and the kind of each read, :mod:`.uses`):

- **the file's own global batch** exists (``GLOBAL = BATCH * strategy.num_replicas_in_sync``,
  or ``BATCH * n`` written where it is used): the entry becomes ``GLOBAL`` (or is scaled
  where it is written). BATCH is per replica by the file's own intent, so its other reads
  keep it; a value computed from it (``steps = N // BATCH``) is refused, as which batch it
  means is for the author to say;
- **nothing else must follow** (the other reads only show the value, check it in an
  ``assert``, batch data that is only evaluated, or batch data trained without the strategy):
  the entry is scaled where it is written, and every other read keeps the per-replica value;
- **something computed from it must follow** (steps per epoch, an evaluation batch under the
  same strategy): the global batch is defined once the strategy exists, and those reads use
  it. A name that may be seen from another module (public, at module level: ``from train
  import BATCH_SIZE``) keeps its name and value, and the global batch gets a new one
  (``GLOBAL_BATCH_SIZE``), as does a name an ``assert`` reads (it keeps checking the
  per-replica value); any other name keeps the per-replica value under a new name
  (``BATCH_SIZE_PER_REPLICA``) and becomes the global batch. Reads that cannot follow (in
  another function, before the strategy exists) must be ones that may keep the per-replica
  value, or the fix is refused.

Upstream, what the value comes from (``BATCH = args.batch_size``) keeps its value: its other
reads may not be ones that should follow, or the fix is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis.facts.contexts import Context, index_of

from .uses import CHECKED, DERIVED, DISPLAY, EVALUATION, KEPT, PER_REPLICA, REPLICA, TRAINING, Web

# Where a read is, for a global batch defined after the strategy statement.
_AFTER, _OUTSIDE, _EARLY = "after", "outside", "early"


@dataclass(eq=False)
class Entry:
    """Where a batch size is written: ``value`` (None: a default, to be written out as
    ``keyword=default`` in ``call``)."""

    at: cst.CSTNode
    value: cst.BaseExpression | None
    call: cst.Call | None = None
    keyword: str = "batch_size"
    default: int | None = None


@dataclass(eq=False)
class Redefinition:
    """The global batch defined in ``context.block`` right after statement ``anchor`` (-1:
    at the start of the block)."""

    web: Web
    context: Context
    anchor: int
    # True: the name becomes the global batch, its per-replica value gets a new name; False:
    # the name keeps its value and the global batch gets a new name, used at ``rewrites``.
    rename: bool
    rewrites: list[cst.CSTNode] = field(default_factory=list)


@dataclass
class Plan:
    """What fixing one site takes; applied only if every part of it is possible."""

    scale: list[cst.BaseExpression] = field(default_factory=list)
    keywords: list[tuple[cst.Call, str, int]] = field(default_factory=list)
    # A per-replica constant used where the file's own global batch belongs: (use, global name).
    globals: list[tuple[cst.BaseExpression, str]] = field(default_factory=list)
    # Values redefined as the global batch once the strategy exists.
    redefinitions: list[Redefinition] = field(default_factory=list)
    # Blocks where the strategy must move up, to before the statement at this index.
    move_up: dict[int, int] = field(default_factory=dict)
    # Numbers made parameters of the helper they are written in (:mod:`.helpers`).
    lifted: list = field(default_factory=list)


class EntryPlanner:
    """Plans entries for a :class:`.planner.BatchPlanner` (``planner``), whose program,
    analyses, webs, destinations and entry values it reads."""

    def __init__(self, planner) -> None:
        self.planner = planner
        self.program = planner.program
        self.facts = planner.facts
        self.contexts = planner.contexts
        self.webs = planner.webs
        # Each web is redefined at most once, in one way.
        self.redefined: dict[int, Redefinition] = {}

    def kinds(self, web: Web) -> dict[int, str]:
        return {id(r): self.webs.kind(r, web, self.planner.destinations) for r in web.reads}

    # --- one entry -----------------------------------------------------------------------------

    def plan(self, entry: Entry, context: Context | None, plan: Plan) -> str | None:
        value = entry.value
        assert value is not None
        web = self.webs.of(value)
        if web is None:
            factor = self.webs.factor(value)
            source = self.webs.of(factor) if factor is not None else None
            if source is not None and any(self._must_follow(k) for k in self.kinds(source).values()):
                # ``.batch(BATCH * 2)`` where BATCH is redefined as the global batch (or has
                # one of its own): the expression follows it, as the other reads do.
                return self.plan(Entry(entry.at, factor), context, plan)
            return self._scale_expression(entry, context, plan)
        read = value if not isinstance(value, cst.NamedExpr) else None
        kinds = self.kinds(web)
        others = [r for r in web.reads if r is not read]
        products = [(r, self.webs.product(r)) for r in others if kinds[id(r)] == PER_REPLICA]
        if products:
            return self._own_global(entry, web, read, kinds, products, context, plan)
        replica = [r for r in others if kinds[id(r)] == REPLICA]
        if replica:
            function = self.webs.on_replicas(replica[0])
            return (
                f"{web.label} is also read on line {self._line(replica[0])} by {function.name.value}(), "  # type: ignore[union-attr]
                "which runs on every replica, where it may mean the per-replica or the global batch"
            )
        follow = [r for r in others if kinds[id(r)] in (DERIVED, EVALUATION)]
        if not web.is_name:
            # A path (``args.batch_size``) is scaled where it is used, or not at all: a value
            # given on the command line is as often the global batch (a paper's batch size)
            # as the per-replica one, so a fix that defines a global batch for every use of
            # it would be a guess.
            return self._scale_expression(entry, context, plan)
        if not follow:
            why = self._upstream(web.values, web)
            return why or self._scale_here(entry, context, plan)
        kept = [r for r in others if kinds[id(r)] == KEPT]
        derived = [r for r in others if kinds[id(r)] == DERIVED]
        if kept and derived:
            return (
                f"{web.label} is also the batch size on line {self._line(kept[0])} of data that is not trained "
                f"under the strategy, and is used on line {self._line(derived[0])}: which of its uses mean the "
                "global batch is not known"
            )
        if context is None:
            return f"{web.label} is also used on line {self._line(follow[0])}, and the strategy is not visible where it is set"
        return self._upstream(web.values, web) or self._redefine(web, read, kinds, context, plan)

    @staticmethod
    def _must_follow(kind: str) -> bool:
        return kind in (DERIVED, EVALUATION, PER_REPLICA)

    # --- the file's own global batch -----------------------------------------------------------

    def _own_global(self, entry, web: Web, read, kinds, products, context, plan) -> str | None:
        """The file multiplies this value by the replica count: it is per replica by the
        file's own intent. The batch becomes the file's global name (or is scaled where it
        is made), and so does a value computed from it where that name can be read; its other
        reads (logs, evaluation, code on every replica) keep it."""
        named = [(r, p) for r, p in products if p[0] is not None]
        _, (target, product) = (named or products)[0]
        described = (
            f"{target.value} = {web.label} x replicas on line {self._line(target)}"
            if target is not None
            else f"{web.label} x replicas on line {self._line(product)}"
        )
        derived = [r for r in web.reads if r is not read and kinds[id(r)] == DERIVED]
        unnamed = [r for r in derived if target is None or not self._reads_name(r, target)]
        if unnamed:
            line = self._line(unnamed[0])
            return (
                f"{web.label} is the per-replica batch ({described}), and is also used on line {line}, "
                f"where it may mean either batch: batch with {target.value if target is not None else 'the global batch'}, "
                "and use that there too if it means the global batch"
            )
        if target is None:
            # ``global_batch_size=BATCH * n`` where it is used: the batch is scaled where it
            # is made, BATCH stays per replica.
            return self._scale_here(entry, context, plan)
        if read is None or not self._reads_name(read, target):
            return f"{web.label} is the per-replica batch ({described}); batch with {target.value}"
        for node in [read, *derived]:
            plan.globals.append((node, target.value))
        return None

    def _reads_name(self, node: cst.CSTNode, target: cst.Name) -> bool:
        """Whether ``target``'s one binding is what its name means at ``node``, and is made
        before ``node`` runs."""
        scope = self.program.scope(node)
        binding = self.program.assignment(target)
        if scope is None or binding is None or {*scope[target.value]} != {binding}:
            return False
        statement = self.program.statement_of(target)
        block = self.program.block_of(statement) if statement is not None else None
        if block is None:
            return False
        # Only the block and the index of a context are read here.
        made = Context(block, None, index_of(block.body, statement))  # type: ignore[arg-type]
        return self.contexts.executes_after(node, made)

    # --- scaled where it is written ------------------------------------------------------------

    def _scale_expression(self, entry, context, plan) -> str | None:
        """A literal or an expression (``args.batch_size``, ``BATCH * 2``): scaled where it
        is written, so what it reads must keep the per-replica value everywhere else."""
        for operand in self.webs.operands(entry.value):
            web = self.webs.of(operand)
            if web is None:
                continue
            read = self._following_read(web, operand)
            if read is not None:
                code = self.program.module.code_for_node(operand)
                return (
                    f"{code} is also used on line {self._line(read)}; define the global batch once "
                    f"({code} * strategy.num_replicas_in_sync) and use it everywhere"
                )
            why = self._upstream(web.values, web)
            if why:
                return why
        return self._scale_here(entry, context, plan)

    def _scale_here(self, entry, context, plan) -> str | None:
        if context is None:
            return "the strategy is not visible where the batch is made"
        why = self.planner.visible(entry.at, context, plan)
        if why:
            return why
        plan.scale.append(entry.value)
        return None

    def _upstream(self, values: list[cst.BaseExpression], web: Web, depth: int = 0) -> str | None:
        """What ``web`` is set from keeps its value: none of its other reads may be one that
        should follow the global batch."""
        if depth > 4:
            return None
        for value in values:
            for operand in self.webs.operands(value):
                source = self.webs.of(operand)
                if source is None or source is web:
                    continue
                read = self._following_read(source, operand)
                if read is not None:
                    code = self.program.module.code_for_node(operand)
                    return (
                        f"{web.label} is set from {code} (line {self._line(operand)}), which is also used on line "
                        f"{self._line(read)}; define the global batch once ({code} * strategy.num_replicas_in_sync) "
                        "and use it everywhere"
                    )
                why = self._upstream(source.values, source, depth + 1)
                if why:
                    return why
        return None

    def _following_read(self, web: Web, operand: cst.CSTNode) -> cst.CSTNode | None:
        """A read of ``web`` other than ``operand`` that should follow the global batch (one
        derived from it, or read on every replica), or None."""
        kinds = self.kinds(web)
        return next((r for r in web.reads if r is not operand and kinds[id(r)] in (DERIVED, REPLICA)), None)

    # --- redefined once the strategy exists ----------------------------------------------------

    def _redefine(self, web: Web, read, kinds, context: Context, plan) -> str | None:
        label = web.label
        others = [r for r in web.reads if r is not read]
        follows = [r for r in others if kinds[id(r)] in (DERIVED, EVALUATION, DISPLAY, TRAINING)]
        statements, why = self._settable(web, next(r for r in others if kinds[id(r)] in (DERIVED, EVALUATION)))
        if why:
            return why
        block = context.block
        strategy_line = self._strategy_line(context)
        home = self.program.block_of(statements[0]) if statements else None
        if home is not None and home is not block and not isinstance(home, cst.Module):
            return f"{label} is set on line {self._line(statements[0])}, in another block than the strategy{strategy_line}"
        last = max(index_of(block.body, s) for s in statements) if home is block else None  # type: ignore[type-var]
        anchor = max(context.index if context.index is not None else -1, last if last is not None else -1)
        if anchor < 0 and block.body and _is_docstring(block.body[0]):
            anchor = 0
        after = Context(block, context.strategy, anchor if anchor >= 0 else None)
        places = {id(r): self._place(r, after, last, context) for r in [*others, *([read] if read is not None else [])]}
        public = isinstance(home, cst.Module) and not label.startswith("_")
        imported = any(isinstance(node, cst.ImportAlias) for node in web.sets)
        # Part of another training batch (``.batch(BATCH * 2)``): that site scales its own
        # expression, so the value it reads must not change under it.
        nested = {id(r) for r in others if kinds[id(r)] == TRAINING and id(r) not in self.planner.entry_values}
        follows = [r for r in follows if id(r) not in nested]
        rename = (
            not public
            and not imported
            and not nested
            and not any(kinds[id(r)] in (KEPT, CHECKED) for r in others)
            and all(not isinstance(places[id(r)], str) or places[id(r)] == _AFTER for r in follows)
        )
        must = [r for r in others if (rename and r in follows) or kinds[id(r)] == DERIVED]
        if read is not None:
            must.append(read)
        moves = []
        for r in must:
            place = places[id(r)]
            if place == _OUTSIDE:
                return self._outside(label, r, context)
            if place == _EARLY:
                return self._early(label, r, context, last)
            if place != _AFTER:
                moves.append(place)
        earlier = self.redefined.get(id(web))
        if earlier is not None and (earlier.context.block is not block or earlier.rename != rename):
            return f"{label} also batches training data under the strategy of another block"
        for index in moves:
            plan.move_up[id(block)] = min(plan.move_up.get(id(block), index), index)
            self.planner.note_move(context, index)
        rewrites = [] if rename else [r for r in [*must, *follows] if places[id(r)] == _AFTER or r in must]
        redefinition = Redefinition(web, context, anchor, rename, list({id(r): r for r in rewrites}.values()))
        self.redefined.setdefault(id(web), redefinition)
        plan.redefinitions.append(redefinition)
        return None

    def _early(self, label: str, read: cst.CSTNode, context: Context, last: int | None) -> str:
        """Why ``read`` cannot come after the global batch."""
        block = context.block
        earliest = self._earliest(read, block, set())
        function = self.program.enclosing_function(read)
        if earliest is None and function is not None:
            return (
                f"{label} is used on line {self._line(read)} in {function.name.value}(), which may run before "
                f"the strategy is created{self._strategy_line(context)}"
            )
        if last is not None and (earliest is None or earliest <= last):
            return f"{label} is used on line {self._line(read)}, before it is last set (line {self._line(block.body[last])})"
        return f"{label} is used on line {self._line(read)}, before the strategy is created{self._strategy_line(context)}"

    def _settable(self, web: Web, used: cst.CSTNode) -> tuple[list[cst.BaseStatement], str | None]:
        """The statements that set the web's name, when every one is a plain (or tuple, or
        augmented) assignment of one block; else why the global batch cannot be defined once
        after them (``used``: a read that needs it)."""
        statements = []
        for node in web.sets:
            form = self._form(node)
            if form is not None:
                return [], (
                    f"{web.label} is set by {form} (line {self._line(node)}) and also used on line "
                    f"{self._line(used)}: the global batch cannot be defined once after it"
                )
            statements.append(self.program.statement_of(node))
        homes = {id(self.program.block_of(s)) for s in statements}
        if len(homes) > 1 or None in [self.program.block_of(s) for s in statements]:
            lines = ", ".join(str(self._line(s)) for s in statements)
            return [], f"{web.label} is set in more than one block (lines {lines}) and also used on line {self._line(used)}"
        return statements, None

    def _form(self, node: cst.CSTNode) -> str | None:
        """None for a name set by a simple statement of assignment; else how it is set."""
        if isinstance(node, cst.Param):
            return "a parameter"
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return "a definition"
        if isinstance(node, cst.ImportAlias):
            return None  # the global batch is defined after the import, under a new name
        holder: cst.CSTNode | None = self.program.parent(node)
        while isinstance(holder, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
            holder = self.program.parent(holder)
        if isinstance(holder, cst.AssignTarget) or (
            isinstance(holder, (cst.AugAssign, cst.AnnAssign)) and holder.target is not None
        ):
            statement = self.program.statement_of(node)
            return None if isinstance(statement, cst.SimpleStatementLine) else "a statement it cannot be renamed in"
        if isinstance(holder, cst.NamedExpr):
            return "':='"
        if isinstance(holder, (cst.For, cst.CompFor)):
            return "a for loop"
        if isinstance(holder, (cst.AsName, cst.WithItem)):
            return "a with or except clause"
        return "a statement it cannot be renamed in"

    def _place(self, read: cst.CSTNode, after: Context, last: int | None, context: Context) -> object:
        """_AFTER when ``read`` runs once the global batch is defined in ``after.block``, an
        index of that block when it would once the strategy moves up to it, _OUTSIDE when the
        block does not hold it, _EARLY when no move helps."""
        block = after.block
        if not any(a is block for a in self.program.ancestors(read)):
            return _OUTSIDE
        if self.contexts.executes_after(read, after):
            return _AFTER
        earliest = self._earliest(read, block, set())
        if earliest is None or context.index is None or (last is not None and earliest <= last):
            return _EARLY
        return earliest

    def _earliest(self, node: cst.CSTNode, block, seen: set) -> int | None:
        """The index of the first statement of ``block`` during which ``node`` may run
        (through the calls of the functions it is in); None when not known."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if ancestor is block:
                return index_of(block.body, previous)
            if isinstance(ancestor, cst.FunctionDef) and previous is ancestor.body:
                references = self.facts.references(ancestor)
                if not references or ancestor in seen:
                    return None
                seen.add(ancestor)
                found = [self._earliest(r, block, seen) for r in references]
                return None if any(i is None for i in found) else min(found)  # type: ignore[type-var]
            if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return None
            previous = ancestor
        return None

    def _outside(self, label: str, read: cst.CSTNode, context: Context) -> str:
        function = self.program.enclosing_function(read)
        owner = self.contexts.function_of(context.block)
        where = f" in {function.name.value}()" if function is not None and function is not owner else ""
        if owner is not None:
            return (
                f"{label} is also used on line {self._line(read)}{where}, outside {owner.name.value}(), "
                f"which creates the strategy{self._strategy_line(context)}"
            )
        return f"{label} is also used on line {self._line(read)}{where}, outside the block that creates the strategy{self._strategy_line(context)}"

    def _strategy_line(self, context: Context) -> str:
        if context.index is None:
            return ""
        return f" (line {self._line(context.block.body[context.index])})"

    def _line(self, node: cst.CSTNode) -> int:
        return self.program.line(node)


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
