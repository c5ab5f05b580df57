"""Writing the planned batch-size fixes: scaled values and keywords, names replaced by a
global batch, global batches defined once after the strategy (the strategy moved up first
where a plan needs it), each value renamed or defined once however many sites share it."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.contexts import Context
from autofix.analysis.facts.script import Facts
from autofix.analysis.syntax import argument_value
from autofix.codegen import BlockEdits, add_argument, add_keyword, fresh_name, on_both_paths, scaled

from .helpers import with_parameter
from .uses import DEFINITION, Webs
from .values import Plan, Redefinition


class FixWriter:
    def __init__(self, facts: Facts, webs: Webs, edits: BlockEdits) -> None:
        self.facts = facts
        self.webs = webs
        self.edits = edits
        self._names: set[str] | None = None
        # Webs (by id) -> the name the global batch (or the per-replica value) was given.
        self._defined: dict[int, str] = {}
        self._replaced: set[int] = set()
        # Blocks (by id) -> (context, [(anchor index, statement to insert after it)]).
        self._inserts: dict[int, tuple[Context, list[tuple[int, str]]]] = {}
        # Blocks (by id) -> (context, index): where plans want the strategy moved up to, and
        # (once the ordering rules are checked) where it moves.
        self.moves: dict[int, tuple[Context, int]] = {}
        self.move_to: dict[int, int] = {}
        # Functions (by id) -> (the function, the numbers that become its parameters).
        self._parameters: dict[int, tuple[cst.FunctionDef, list]] = {}

    def commit(self, plan: Plan, context: Context | None) -> None:
        name = _spelled(self.facts.program, context) if context is not None else ""
        for value in plan.scale:
            self.edits.replace(value, lambda node, name=name: scaled(node, name))
        for call, keyword, default in plan.keywords:
            self.edits.replace(call, lambda node, k=keyword, d=default, name=name: add_keyword(node, k, d, name))
        for use, global_name in plan.globals:
            self._replace_name(use, global_name)
        for redefinition in plan.redefinitions:
            self._redefine(redefinition)
        for lifted in plan.lifted:
            if id(lifted.literal) not in self._replaced:
                self._replaced.add(id(lifted.literal))
                self.edits.replace(lifted.literal, lambda n, name=lifted.name: cst.Name(name, lpar=n.lpar, rpar=n.rpar))
                self._parameters.setdefault(id(lifted.function), (lifted.function, []))[1].append(lifted)

    def validation_batch(self, call: cst.Call, size: str, context: Context) -> None:
        """``fit``'s validation set batched by ``min(<its global batch>, <its size> // N * N)``
        (its size read at run time, ``len(x_val)``): a first batch that splits evenly over N
        replicas (see :mod:`.first_batches`)."""
        replicas = f"{_spelled(self.facts.program, context)}.num_replicas_in_sync"

        def edit(node: cst.Call) -> cst.Call:
            batch = argument_value(node, "batch_size", 2)
            if batch is None:
                return node
            code = cst.Module([]).code_for_node(batch)
            return add_argument(node, "validation_batch_size", cst.parse_expression(f"min({code}, {size} // {replicas} * {replicas})"))

        self.edits.replace(call, edit)

    def _redefine(self, redefinition: Redefinition) -> None:
        web, context = redefinition.web, redefinition.context
        strategy = _spelled(self.facts.program, context)
        new = self._defined.get(id(web))
        if new is None:
            if redefinition.rename:
                new = self._fresh(f"{web.label}_PER_REPLICA" if web.label.isupper() else f"{web.label}_per_replica")
                # The per-replica value keeps its definition under the new name.
                for node in [*web.sets, *(r for r in web.reads if self.webs.kind(r, web, {}) == DEFINITION)]:
                    self._replace_name(node, new)
                line = f"{web.label} = {new} * {strategy}.num_replicas_in_sync\n"
            else:
                new = self._fresh(_global_name(web.label))
                line = f"{new} = {web.label} * {strategy}.num_replicas_in_sync\n"
            self._defined[id(web)] = new
            _, lines = self._inserts.setdefault(id(context.block), (context, []))
            lines.append((redefinition.anchor, line))
        for read in redefinition.rewrites:
            self._replace_name(read, new)

    def _replace_name(self, node: cst.CSTNode, new: str) -> None:
        """``node`` (a name, or a path such as ``args.batch``) becomes the name ``new``."""
        if id(node) not in self._replaced:
            self._replaced.add(id(node))
            if isinstance(node, cst.Name):
                self.edits.replace(node, lambda n, new=new: n.with_changes(value=new))
            else:
                self.edits.replace(node, lambda n, new=new: cst.Name(new, lpar=n.lpar, rpar=n.rpar))

    def apply(self) -> None:
        for function, lifted in self._parameters.values():
            def edit(node, lifted=lifted):
                for each in lifted:
                    node = with_parameter(node, each.name, each.literal)
                return node

            self.edits.replace(function, edit)
        blocks = {**{b: c for b, (c, _) in self._inserts.items()}, **{b: self.moves[b][0] for b in self.move_to}}
        for block_id, context in blocks.items():
            _, lines = self._inserts.get(block_id, (context, []))
            self.edits.add(context.block, _move_and_insert(context.index, self.move_to.get(block_id), lines))

    def _fresh(self, name: str) -> str:
        if self._names is None:
            self._names = self.facts.names()
        return fresh_name(self._names, name)


def _move_and_insert(creation: int | None, dest: int | None, lines: list[tuple[int, str]]):
    """Move the strategy statement (``creation``) up to ``dest``, then insert each line after
    the later of it and its anchor (the last statement it needs; -1: none)."""
    inserted = [(anchor, cst.parse_statement(line)) for anchor, line in lines]

    def edit(body):
        order = list(range(len(body)))
        if dest is not None and creation is not None and dest < creation:
            order = order[:dest] + [creation] + order[dest:creation] + order[creation + 1 :]
        new = [body[i] for i in order]
        # From the last insertion point to the first, so that earlier positions hold.
        placed = []
        for anchor, statement in inserted:
            after = [order.index(i) for i in (creation, anchor) if i is not None and i >= 0]
            placed.append((max(after) + 1 if after else 0, statement))
        for position, statement in sorted(placed, key=lambda p: p[0], reverse=True):
            new[position:position] = [statement]
        return new

    return edit


def _global_name(label: str) -> str:
    """The name of the global batch made from ``label``: ``GLOBAL_BATCH``, or, for a name that
    says global already (a file migrated from one device, where its batch was both),
    ``GLOBAL_BATCH_SIZE_ALL_REPLICAS``."""
    if label.lower().startswith("global"):
        return f"{label}_ALL_REPLICAS" if label.isupper() else f"{label}_all_replicas"
    return f"GLOBAL_{label}" if label.isupper() else f"global_{label}"


def _spelled(program, context: Context) -> str:
    """The strategy as the fix writes it: ``(strategy or tf.distribute.get_strategy())`` where
    it may be None (a function's optional strategy parameter), whose replica count is 1 there."""
    name = context.strategy.name
    return on_both_paths(program, name, context.block, placeholders=False) or name
