"""Held-out right kinds: rewrites the main set does not make, kept out of the default run.

A persistent GradientTape, a prefetch after the batch, the pairs given to apply_gradients as
a list, hyper-parameters and widths passed by keyword, the replica count held in a name.
"""

from __future__ import annotations

import libcst as cst

from mutants.core import RIGHT, Edit, callee, expr, operator, stmt, with_keyword
from mutants.data import trained_datasets
from mutants.vocabulary import LAYER_WIDTH, is_replicas, walk
from mutants.optimizer import PARAMETERS, optimizers

FAMILY = "right"


@operator("tape-persistent", RIGHT, FAMILY, "GradientTape(persistent=True): the same gradients", "nothing (the same gradients)")
def tape_persistent(p):
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and callee(n) == "GradientTape" and not n.args:
                yield Edit(p.replace_one(n, with_keyword(n, "persistent", expr("True"))), "GradientTape(persistent=True)", p.line(n))


@operator("prefetch-added", RIGHT, FAMILY, "a prefetch added to the trained dataset: the same batches in the same order", "nothing (the same batches)")
def prefetch_added(p):
    for dataset, how in trained_datasets(p):
        yield Edit(p.replace_one(dataset, expr(f"{p.code(dataset)}.prefetch(2)")), f"{p.code(dataset)[:50]}.prefetch(2)", p.line(dataset))


@operator("zip-listed", RIGHT, FAMILY, "apply_gradients(list(zip(...))): the same pairs", "nothing (the same update)")
def zip_listed(p):
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and callee(n) == "apply_gradients" and n.args and isinstance(n.args[0].value, cst.Call) and callee(n.args[0].value) == "zip":
                new = n.with_changes(args=[n.args[0].with_changes(value=expr(f"list({p.code(n.args[0].value)})")), *n.args[1:]])
                yield Edit(p.replace_one(n, new), "apply_gradients(list(zip(...)))", p.line(n))


@operator("keyword-arguments", RIGHT, FAMILY, "an optimizer's learning rate and a layer's width passed by keyword", "nothing (the same values)")
def keyword_arguments(p):
    for call, name in optimizers(p):
        args = [a for a in call.args if a.keyword is None]
        if args and not args[0].star:
            new = call.with_changes(args=[a.with_changes(keyword=cst.Name(PARAMETERS[name][0]), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))) if a is args[0] else a for a in call.args])
            yield Edit(p.replace_one(call, new), f"{name}({PARAMETERS[name][0]}=...)", p.line(call))
    for call in p.facts.layers(set(LAYER_WIDTH))[:3]:
        parameter, index = LAYER_WIDTH[callee(call)]
        args = [a for a in call.args if a.keyword is None]
        if index == 0 and args and not args[0].star and len(args) == 1:
            new = call.with_changes(args=[a.with_changes(keyword=cst.Name(parameter), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))) if a is args[0] else a for a in call.args])
            yield Edit(p.replace_one(call, new), f"{callee(call)}({parameter}=...)", p.line(call))


@operator("replicas-named", RIGHT, FAMILY, "strategy.num_replicas_in_sync held in a name and read from it", "nothing (the same number)")
def replicas_named(p):
    for strategy in sorted(p.facts.strategies):
        entry = next((e for e in p.facts.entries[p.module] if strategy in e.assigns and isinstance(e.assigns[strategy], cst.Call)), None)
        if entry is None or "NUM_REPLICAS" in {n.value for n in p.nodes(cst.Name)}:
            continue
        statement = p.statement_of(entry.node)
        uses = [n for n in p.nodes(cst.Attribute) if is_replicas(n) and p.code(n.value) == strategy and p.line(n) > p.line(statement)]
        if not uses or not isinstance(statement, cst.SimpleStatementLine):
            continue
        changes: dict = {n: cst.Name("NUM_REPLICAS") for n in uses}
        changes[statement] = cst.FlattenSentinel([statement, stmt(f"NUM_REPLICAS = {strategy}.num_replicas_in_sync\n")])
        yield Edit(p.replace(changes), f"NUM_REPLICAS = {strategy}.num_replicas_in_sync, read in its {len(uses)} place(s)", p.line(statement))

