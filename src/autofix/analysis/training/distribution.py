"""Where to distribute the dataset whose batches reach ``strategy.run`` undistributed, when that
is shown safe: the one fix :mod:`.inputs`' findings can have.

The dataset is distributed once, before the outermost loop around the ``for`` loop that
iterates it (or around the ``iter(ds)`` that makes its iterator), inside the loops that make
the dataset anew (``for epoch ...: ds = make(); for batch in ds:``), and the loop iterates the
distributed one instead, its header otherwise as it was: counted by ``enumerate``, zipped with a
``range`` (``zip(range(n), ds)``), shown by a progress bar (``tqdm(ds)``), cut by
``ds.take(n)`` (kept on the dataset: a distributed dataset has no ``take``); ``it = iter(ds)``
read only by ``next(it)`` iterates it the same way, also where it is made again once it runs
out (``except StopIteration: it = iter(ds)``) (measured on TF 2.21: ``iter``, ``next``
until ``StopIteration``, ``zip``, ``enumerate`` and ``tqdm`` work on a distributed dataset,
``tqdm`` without a total; ``len`` and ``take`` do not). Shown safe only when: every
undistributed value comes from that one loop over a batched dataset bound once in view (not a
parameter: other files may pass a distributed one; unless ``autofix migrate`` is moving a file
that distributed nothing, whose callers all pass plain datasets); the loop's batches go to ``strategy.run``
and nowhere else (a distributed batch is not a tensor), through local functions, names and
unpacking (``x, y = batch``) and parts taken by a constant index (``batch["image"]``, of a
dataset of tuples or dicts) too, except plain reads in the loop's body or after it whose value
does not reach a step, which read the global batch instead (``strategy.gather``); the
strategy running the steps is in view at the loop; the loop is not in a ``tf.function``; and no
step divides its loss by a global batch other than the dataset's (split over the replicas,
that loss would change; a division by the dataset's own batch becomes right), nor reads that
batch otherwise (``tf.zeros((BATCH,) + shape)`` for its labels: each replica's share is smaller).
A progress bar held in a name (``bar = tqdm(ds)``, ``for batch in bar``) is not a dataset
(measured: ``experimental_distribute_dataset`` of an object that is not one raises
"AttributeError: ... has no attribute '_variant_tensor'"): the dataset inside it is distributed; any other wrapper held in a name
(``enumerate``, ``zip``, ``iter``, ``itertools``) is refused with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.dataflow import PROGRESS_BARS, progress_bar_iterable
from autofix.analysis.training.inputs import Feed, Inputs, is_self_attribute
from autofix.analysis.steps.losses import loss_terms_of
from autofix.analysis.syntax import argument_value, nodes_in, words
from autofix.analysis.training.compiled import batch_size_of


@dataclass(frozen=True)
class Distribution:
    """How to distribute the dataset a loop feeds to ``strategy.run``: once, before
    ``before`` (the outermost loop around the one that iterates it, or around the statement
    that makes its iterator: ``loop``), with the strategy
    ``strategy`` (the receiver of the ``strategy.run`` calls, when it names the same object where
    the loop is: a plain name the caller checks is in view, or ``self.<name>`` in the same class)."""

    dataset: cst.Name
    loop: cst.For | cst.BaseStatement
    before: cst.BaseStatement
    strategy: cst.BaseExpression
    # What the loop iterates, when more than the dataset's name (``dataset.take(n)``): it is
    # what is distributed.
    iterated: cst.BaseExpression | None = None
    # Reads of a batch (or of a part of it, ``batch[0]``) in the loop or after it that are not
    # fed to a step: they read the global batch (``strategy.gather(batch, axis=0)``).
    gathered: tuple[cst.BaseExpression, ...] = ()
    # Where an iterator of the dataset is made again (``it = iter(dataset)`` once it runs out):
    # the same distributed dataset is iterated there.
    also: tuple[cst.BaseExpression, ...] = ()


class NotDistributable(Exception):
    """Why the dataset cannot be shown safe to distribute in place (the message says why)."""


def distribution(inputs: Inputs, feeds: list[Feed]) -> Distribution:
    """The one dataset the undistributed data of ``feeds`` (of one ``strategy.run`` call)
    comes from, and where to distribute it; raises :class:`NotDistributable`."""
    program, facts, steps = inputs.program, inputs.facts, inputs.steps
    origins = [o for feed in feeds for o in feed.origins if o.kind != "unknown"]
    if any(o.kind != "dataset" for o in origins):
        kinds = sorted({o.kind for o in origins if o.kind != "dataset"})
        arrays = [o.node for o in origins if o.kind in ("array", "tensor")]
        # Where the array comes from: the call that binds what the step's caller passes (a
        # sampler drawing each batch), else where the array is made.
        drawn = _drawn_by(inputs, feeds) if arrays else None
        made = (
            f" ({drawn})" if drawn is not None and "distributed" not in kinds else
            f" ({_short(program.module.code_for_node(arrays[0]))}, line {program.line(arrays[0])})"
            if arrays and "distributed" not in kinds else ""
        )
        foreign = next((o for o in origins if o.kind == "foreign"), None)
        if foreign is not None and "distributed" not in kinds:
            strategy = program.module.code_for_node(feeds[0].run.func.value)  # type: ignore[union-attr]
            name = foreign.node.name.value  # type: ignore[union-attr]
            raise NotDistributable(
                f"{name} is handed in by its callers, in whatever form they give it: a tf.data.Dataset is "
                f"distributed with {strategy}.experimental_distribute_dataset({name}) where it is iterated, NumPy data "
                "must become a dataset first"
            )
        raise NotDistributable(
            "some of it is distributed and some is not" if "distributed" in kinds else
            f"it is a {'NumPy array' if 'array' in kinds else 'tensor made on one device' if 'tensor' in kinds else 'replica shard'}{made}, "
            "not a dataset that can be distributed in place"
        )
    # ``it = iter(dataset)`` read by ``next(it)`` (made again where it runs out): one place.
    iterators = [_iterators(inputs, o.node) if o.loop is None else None for o in origins]
    places = {id(o.node): o for o in origins}
    if all(iterators) and len({tuple(id(c) for c in i[0]) for i in iterators if i}) == 1:
        places = {id(origins[0].node): origins[0]}
    if len(places) != 1 or len({id(o.loop) for o in origins}) != 1:
        raise NotDistributable("the data comes from more than one place")
    origin = next(iter(places.values()))
    loop, dataset = origin.loop, origin.node
    iterated = dataset
    target = _batch_target(inputs, loop, dataset) if loop is not None else None
    made_iterators, nexts = iterators[0] if iterators[0] else ([], [])
    site: cst.For | cst.BaseStatement | None = loop
    if made_iterators:
        # ``it = iter(dataset)``: what is distributed is what ``iter`` is given (where it is
        # made first; where it is made again, the same distributed dataset).
        dataset = iterated = made_iterators[0].args[0].value
        site = program.statement_of(made_iterators[0])
    if (target is not None or nexts) and not isinstance(dataset, cst.Name):
        # ``dataset.take(n)`` in the loop's header: the named dataset, cut or shuffled there.
        dataset = _chain_root(dataset)  # type: ignore[assignment]
    if site is None or target is None and not nexts or not isinstance(dataset, cst.Name):
        raise NotDistributable("the batches are not those of a for loop or an iterator over a dataset named in view")
    wrapped = _wrapped(inputs, dataset) if not nexts else None
    if wrapped is not None:
        # ``bar = tqdm(dataset)``, iterated by ``for batch in bar``: the bar is not a dataset
        # (a distributed bar fails); the dataset inside it is distributed, where the bar is made.
        iterated, site = wrapped
        dataset = iterated if isinstance(iterated, cst.Name) else _chain_root(iterated)  # type: ignore[assignment]
        if not isinstance(dataset, cst.Name):
            raise NotDistributable("the progress bar does not iterate a dataset named in view")
    bindings = facts.bindings(dataset) or []
    reaching = facts.reaching_bindings(dataset) or []
    if len(bindings) > 1 and len(reaching) == 1 and all(program.line(b) <= program.line(reaching[0]) for b in bindings):
        # ``ds = ds.shuffle(n).batch(b)``: the name's last binding is what the loop iterates.
        bindings = reaching
    parameter = len(bindings) == 1 and isinstance(bindings[0], cst.Param)
    if parameter and program.migration is None:
        function = program.enclosing_function(bindings[0])
        raise NotDistributable(
            f"the dataset is a parameter of {function.name.value if function else 'a function'}(), which code in "
            "other files may call with a distributed dataset; distribute it where it is made"
        )
    # ``train_ds, test_ds = make_datasets()``: one binding, made where the value flow says.
    unpacked = inputs.unpacked(bindings) if len(bindings) == 1 and facts.assigned_value(bindings[0]) is None else []
    if len(bindings) != 1 or facts.assigned_value(bindings[0]) is None and not parameter and not unpacked:
        raise NotDistributable(f"{dataset.value} is bound more than once")
    made = origin.made if iterated is dataset else tuple(unpacked) or tuple(facts.assigned_value(b) for b in bindings)
    batches = [batch_size_of(program, m) if m is not None else None for m in made]
    if not batches or any(b is None for b in batches) or len({program.module.code_for_node(b) for b in batches}) != 1:  # type: ignore[arg-type]
        raise NotDistributable(f"{dataset.value} is not batched where it is made")
    if steps.in_graph(site) or any(steps.in_graph(n) for n in [*made_iterators, *nexts]):
        raise NotDistributable("the loop runs inside a tf.function, where a dataset cannot be distributed")
    runs = {id(feed.run): feed.run for feed in feeds}
    structures = [_item_structure(inputs, m) if m is not None else None for m in made]
    structure = structures[0] if structures and all(x == structures[0] for x in structures) else None
    parts = isinstance(structure, (tuple, dict))
    if nexts:
        batch_runs, gathered = _next_runs(inputs, nexts, structure)
    else:
        batch_runs, gathered = _batch_runs(inputs, loop, target, structure)  # type: ignore[arg-type]
    for run in batch_runs:
        runs[id(run)] = run
    strategy = _strategy_at(inputs, list(runs.values()), site)
    _scaled_for(inputs, list(runs.values()), dataset, batches[0])  # type: ignore[arg-type]
    _sized_by(inputs, list(runs.values()), dataset, batches[0])  # type: ignore[arg-type]
    # Not above the loop that makes the dataset anew (``for epoch ...: ds = make()``).
    before = _outermost_loop(program, site, bindings[0])
    if iterated is not dataset:
        for name in nodes_in(iterated, cst.Name):
            if program.access(name) is not None and any(program.within(b, before) for b in facts.bindings(name) or ()):
                raise NotDistributable(f"{name.value}, which the loop's header reads, is set again in the loop")
    if program.line(bindings[0]) >= program.line(before) and program.enclosing_function(bindings[0]) is program.enclosing_function(before):
        raise NotDistributable(f"{dataset.value} is not made before the loop")
    also = tuple(c.args[0].value for c in made_iterators[1:])
    for again in made_iterators[1:]:
        if program.line(again) < program.line(before) or program.enclosing_function(again) is not program.enclosing_function(before):
            raise NotDistributable(f"the iterator made again on line {program.line(again)} is not made after the first")
    return Distribution(dataset, site, before, strategy, iterated, tuple(gathered), also)


def _batch_target(inputs: Inputs, loop: cst.For, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """What the loop binds each item of ``node`` (a part of its header) to, when the header
    only counts it, zips it with other iterables or shows its progress: ``for batch in ds``,
    ``for i, batch in enumerate(ds)``, ``for i, batch in zip(range(n), ds)``, ``for batch in
    tqdm(ds)`` (``batch`` each time); else None."""
    program, facts = inputs.program, inputs.facts
    expr, target = loop.iter, loop.target
    while expr is not node:
        if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
            return None
        wrapped = progress_bar_iterable(facts, expr)
        if wrapped is not None:
            expr = wrapped
            continue
        names = facts.names_of(expr.func)
        positional = [a.value for a in expr.args if a.keyword is None]
        parts = list(target.elements) if isinstance(target, (cst.Tuple, cst.List)) else []
        if any(isinstance(p, cst.StarredElement) for p in parts):
            return None
        if "builtins.enumerate" in names and positional and len(parts) == 2:
            expr, target = positional[0], parts[1].value  # not the counter
            continue
        if "builtins.zip" in names and positional and len(positional) == len(expr.args) == len(parts):
            index = next((i for i, p in enumerate(positional) if p is node or program.within(node, p)), None)
            if index is None:
                return None
            expr, target = positional[index], parts[index].value
            continue
        return None
    return target


def _iterators(inputs: Inputs, node: cst.CSTNode) -> tuple[list[cst.Call], list[cst.Call]] | None:
    """For ``node`` read by ``next(it)`` where ``it = iter(dataset)`` (every binding of ``it``
    is: made again once it runs out, of the same dataset), read only by ``next(it)``, or for
    ``node`` in ``iter(node)`` named so or read at once (``next(iter(node))``): the ``iter``
    calls in source order and the ``next`` calls; else None. Raises when the iterator is read
    otherwise, or made otherwise or of another dataset."""
    program, facts = inputs.program, inputs.facts
    if isinstance(node, cst.Name) and _next_of(inputs, node) is not None:
        names = [b for b in facts.bindings(node) or () if isinstance(b, cst.Name)]
        iterated = node.value
    else:
        made = _iter_of(inputs, program.parent(program.parent(node)))
        if made is None or made.args[0].value is not node:
            return None
        direct = _next_of(inputs, made)
        if direct is not None:
            return [made], [direct]
        name = facts.assigned_name(made)
        if name is None:
            holder = program.parent(made)
            if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Attribute):
                # ``self.train_iter = iter(ds)``: read in other methods, made from what the
                # class is given.
                raise NotDistributable(
                    f"the iterator made on line {program.line(made)} is held in "
                    f"{program.module.code_for_node(holder.targets[0].target)}, not in a name the fix can follow; "
                    "distribute the dataset where it is made"
                )
            raise NotDistributable(f"the iterator made on line {program.line(made)} is not named once")
        names = [b for b in facts.bindings(name) or () if isinstance(b, cst.Name)]
        iterated = name.value
    # Every binding of the iterator's name in its scope (made again in a loop: ``except
    # StopIteration: it = iter(dataset)``), and every read of them.
    names = [b for b in (facts.bindings(names[0]) or []) if isinstance(b, cst.Name)] if names else []
    nexts: dict[int, cst.Call] = {}
    for binding in names:
        for use in facts.uses(binding):
            call = _next_of(inputs, use)
            if call is None:
                raise NotDistributable(f"the iterator {iterated} is also read on line {program.line(use)}, where it would give distributed batches")
            nexts[id(call)] = call
    calls = [_iter_of(inputs, facts.assigned_value(b)) for b in names]
    if not calls or not all(calls):
        raise NotDistributable(f"the iterator {iterated} is not made by iter() of a dataset wherever it is set")
    code = program.module.code_for_node
    if len({code(c.args[0].value) for c in calls if c}) != 1:
        raise NotDistributable(f"the iterator {iterated} is made of more than one dataset")
    ordered = sorted((c for c in calls if c), key=program.line)
    return (ordered, list(nexts.values())) if nexts else None


def _iter_of(inputs: Inputs, node: cst.CSTNode | None) -> cst.Call | None:
    """``node`` when it is ``iter(value)`` (one positional argument)."""
    if not isinstance(node, cst.Call) or len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
        return None
    return node if "builtins.iter" in inputs.facts.names_of(node.func) else None


def _next_of(inputs: Inputs, node: cst.CSTNode) -> cst.Call | None:
    """``next(node)``, when ``node`` is read there (with no default)."""
    arg = inputs.program.parent(node)
    call = inputs.program.parent(arg)
    if isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and len(call.args) == 1 and arg.keyword is None and not arg.star:
        if "builtins.next" in inputs.facts.names_of(call.func):
            return call
    return None


def _next_runs(inputs: Inputs, nexts: list[cst.Call], structure: object) -> tuple[list[cst.Call], list[cst.BaseExpression]]:
    """The ``strategy.run`` calls the batches that ``next`` hands back go to, and the reads of
    a batch unpacked from it (``x, y = next(it)``) that go nowhere near them (a display): those
    read the global batch, ``strategy.gather``, as a loop's do (:func:`_batch_runs`). Raises
    when a batch goes anywhere else."""
    program, facts = inputs.program, inputs.facts
    parts = isinstance(structure, (tuple, dict))
    runs: list[cst.Call] = []
    gathered: list[cst.BaseExpression] = []
    for call in nexts:
        assign = program.parent(call)
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1 else None
        if target is None or not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            found, elsewhere = _follow(inputs, call, parts)
            if elsewhere is not None:
                raise NotDistributable(f"the batch is also used on line {program.line(elsewhere)}, where a distributed batch would not do")
            runs.extend(found)
            continue
        for name, path in _names_at(target):
            for use in facts.uses(name):
                found, elsewhere = _follow(inputs, use, parts)
                if elsewhere is None:
                    runs.extend(found)
                    continue
                read = _tensor_read(use, _part(structure, path), program) if not found and _drawn_gatherable(inputs, assign, target, use) else None
                if read is None:
                    raise NotDistributable(f"the batch is also used on line {program.line(elsewhere)}, where a distributed batch would not do")
                gathered.append(read)
    return runs, gathered


def _drawn_gatherable(inputs: Inputs, assign: cst.Assign, target: cst.BaseExpression, use: cst.CSTNode) -> bool:
    """:func:`_gatherable` for a batch ``next`` hands back: a plain read in the scope of the
    statement that draws it, outside any tf.function, that only that statement's binding
    reaches."""
    program, facts = inputs.program, inputs.facts
    return (
        isinstance(use, cst.Name)
        and program.scope(use) is program.scope(assign)
        and not _feeds_a_step(inputs, use)
        and not inputs.steps.in_graph(assign)
        and all(program.within(b, target) or b is target for b in facts.reaching_bindings(use) or [use])
    )


def _batch_runs(inputs: Inputs, loop: cst.For, target: cst.BaseExpression, structure: object) -> tuple[list[cst.Call], list[cst.BaseExpression]]:
    """The ``strategy.run`` calls the loop's batches (bound to ``target``; each item of the
    dataset is ``structure``, :func:`_item_structure`) go to, and the reads of a batch in the
    loop's body that go nowhere near them (a display of the batch, a score on it): those read
    it through ``strategy.gather`` (:func:`_gatherable`), a tensor at a time. Raises when a
    batch goes anywhere else (a distributed batch is not a tensor)."""
    program, facts = inputs.program, inputs.facts
    runs: list[cst.Call] = []
    gathered: list[cst.BaseExpression] = []
    for name, path in _names_at(target):
        for use in facts.uses(name):
            if _rebound_before_exit(inputs, loop, name, use):
                continue
            found, elsewhere = _follow(inputs, use, isinstance(structure, (tuple, dict)))
            if elsewhere is None:
                runs.extend(found)
                continue
            read = _tensor_read(use, _part(structure, path), program) if not found and _gatherable(inputs, loop, use) else None
            if read is None:
                raise NotDistributable(f"the batch is also used on line {program.line(elsewhere)}, where a distributed batch would not do")
            gathered.append(read)
    return runs, gathered


def _rebound_before_exit(inputs: Inputs, loop: cst.For, target: cst.Name, use: cst.CSTNode) -> bool:
    """A read after the loop of a name the loop binds, which every pass of the body binds
    again (``x = step(x)``, a statement of the body itself, no ``break`` or ``continue`` in
    it): the loop leaves the name holding that value, never the batch it bound at its head
    (what a dataflow that binds the target at the loop's head cannot tell)."""
    program, facts = inputs.program, inputs.facts
    if program.within(use, loop) or loop.orelse is not None or not isinstance(loop.body, cst.IndentedBlock):
        return False
    if nodes_in(loop.body, (cst.Break, cst.Continue), stop=(cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
        return False
    for statement in loop.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == target.value
                or isinstance(t.target, (cst.Tuple, cst.List)) and any(isinstance(e.value, cst.Name) and e.value.value == target.value for e in t.target.elements)
                for t in small.targets
            ):
                return True
    return False


def _names_at(target: cst.BaseExpression, path: tuple[int, ...] = ()) -> list[tuple[cst.Name, tuple[int, ...]]]:
    """The names a loop target binds, each with where it is in the item (``for (x, y), z in``:
    ``x`` at (0, 0))."""
    if isinstance(target, cst.Name):
        return [(target, path)]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [found for i, e in enumerate(target.elements) for found in _names_at(e.value, (*path, i))]
    return []


def _part(structure: object, path: tuple[int, ...]) -> object:
    for index in path:
        structure = structure[index] if isinstance(structure, tuple) and index < len(structure) else None
    return structure


def _tensor_read(use: cst.CSTNode, structure: object, program) -> cst.BaseExpression | None:
    """What a read of a batch gathers (``strategy.gather`` of a tuple or dict of a batch's parts
    hands back only the first replica's share of each, measured on TF 2.21): the read itself
    when the dataset's items are a tensor there, the part read by a constant index (``batch[0]``,
    ``batch["image"]``) when they are a tuple or dict of tensors there; else None."""
    if structure == "tensor":
        return use  # type: ignore[return-value]
    parent = program.parent(use)
    if isinstance(parent, cst.Subscript) and parent.value is use and _constant_index(parent):
        index = parent.slice[0].slice.value  # type: ignore[attr-defined]
        key = int(index.value, 0) if isinstance(index, cst.Integer) else index.evaluated_value
        if isinstance(structure, tuple) and isinstance(key, int) and 0 <= key < len(structure) and structure[key] == "tensor":
            return parent
        if isinstance(structure, dict) and structure.get(key) == "tensor":
            return parent
    return None


def _follow(inputs: Inputs, start: cst.CSTNode, parts: bool = False) -> tuple[list[cst.Call], cst.CSTNode | None]:
    """Where the value read at ``start`` goes: the ``strategy.run`` calls it reaches (through
    local functions' parameters, tuple unpacking and a part of it taken by a constant index,
    ``batch[0]``, ``batch["image"]``), and the first place it goes anywhere else (None when it
    goes nowhere else). Raises when a part of it reaches a step and the batch is not shown to
    have parts (``parts``: the dataset's elements are a tuple or a dict; a distributed batch of
    one tensor cannot be indexed, measured: ``TypeError``)."""
    program, facts, steps = inputs.program, inputs.facts, inputs.steps
    pending = [start]
    runs: list[cst.Call] = []
    elsewhere: cst.CSTNode | None = None
    indexed: list[cst.Subscript] = []
    seen: set[int] = set()
    while pending:
        use = pending.pop()
        if id(use) in seen:
            continue
        seen.add(id(use))
        parent = program.parent(use)
        if isinstance(parent, cst.Subscript) and parent.value is use and _constant_index(parent):
            # ``batch[0]``: a part of the batch, followed on.
            indexed.append(parent)
            pending.append(parent)
            continue
        holder = program.parent(parent) if isinstance(parent, cst.Element) else None
        arg = program.parent(holder) if isinstance(holder, (cst.Tuple, cst.List)) else parent
        call = program.parent(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and call in steps.runs and arg is not call.args[0]:
            runs.append(call)
            continue
        if isinstance(parent, cst.Arg) and isinstance(call, cst.Call):
            callees, complete = inputs.callables.of_call(call.func)
            params = []
            for callee in callees:
                found = [p for p in (*callee.function.params.params, *callee.function.params.kwonly_params) if callee.argument(call, p) is parent]
                star = callee.function.params.star_arg
                if not found and parent.keyword is None and isinstance(star, cst.Param):
                    found = [star]  # ``def step(*args)``: the tuple holds it
                params.extend(found)
            if complete and callees and len(params) == len(callees):
                pending.extend(u for param in params for u in facts.uses(param.name))
                continue
        if isinstance(parent, cst.Assign) and parent.value is use:
            names = [n for t in parent.targets for n in _names(t.target)]
            if names and all(isinstance(t.target, (cst.Tuple, cst.List, cst.Name)) for t in parent.targets):
                pending.extend(u for n in names for u in facts.uses(n))
                continue
        elsewhere = elsewhere or use
    if runs and indexed and not parts:
        raise NotDistributable(
            f"the batch is indexed on line {program.line(indexed[0])} on its way to the step, and the dataset's items "
            "are not shown to be a tuple or a dict: a distributed batch of one tensor cannot be indexed"
        )
    if elsewhere is not None and indexed and any(program.within(elsewhere, i) or elsewhere is i for i in indexed):
        # A part of the batch read elsewhere (``batch[0].shape``): read where the batch is.
        elsewhere = start
    return runs, elsewhere


def _constant_index(subscript: cst.Subscript) -> bool:
    """``value[0]``, ``value["image"]``: one index, a constant."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return False
    index = subscript.slice[0].slice.value
    return isinstance(index, (cst.Integer, cst.SimpleString))


# What a dataset's items are made of, along the methods that keep their structure.
_KEEP_STRUCTURE = frozenset({"batch", "padded_batch", "shuffle", "repeat", "prefetch", "cache", "take", "skip", "filter", "shard", "with_options", "rebatch"})


def _item_structure(inputs: Inputs, made: cst.BaseExpression, depth: int = 0) -> object:
    """What each item of the dataset ``made`` makes is: ``"tensor"``, a tuple or a dict of
    such structures, or None when not known. Known for ``from_tensor_slices`` /
    ``from_tensors`` of a value the file shows (a tuple or dict written there, a value made
    elsewhere: a tensor), through the methods that keep the structure (not ``map``)."""
    facts = inputs.facts
    expr = made
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _KEEP_STRUCTURE:
        expr = expr.func.value
    if depth < 4 and isinstance(expr, cst.Name):
        origins = facts.values.origins(expr)
        found = {repr(_item_structure(inputs, o.node, depth + 1)) for o in origins if o.whole and isinstance(o.node, cst.BaseExpression)}
        return _item_structure(inputs, origins[0].node, depth + 1) if origins and len(found) == 1 and all(o.whole for o in origins) else None  # type: ignore[arg-type]
    if not isinstance(expr, cst.Call) or not expr.args:
        return None
    names = facts.names_of(expr.func)
    if names & {"tensorflow.data.Dataset.from_tensor_slices", "tensorflow.data.Dataset.from_tensors"}:
        return _value_structure(inputs, expr.args[0].value, 0)
    return None


def _loaded_array(inputs: Inputs, origin) -> bool:
    """An array of ``keras.datasets.<name>.load_data()``'s ``(x, y)`` pairs."""
    node = origin.node
    return isinstance(node, cst.Call) and len(origin.path) == 2 and any(n.startswith("keras.datasets.") for n in inputs.facts.names_of(node.func))


def _value_structure(inputs: Inputs, expr: cst.BaseExpression, depth: int) -> object:
    """A value's structure as ``from_tensor_slices`` reads it: a tuple or a dict literal (or one
    the value flow leads to) is one of its items' structures, anything else a tensor."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Tuple):
        return tuple(_value_structure(inputs, e.value, depth + 1) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        keys = [e.key.evaluated_value if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) else None for e in expr.elements]
        if any(k is None for k in keys):
            return None
        return {k: _value_structure(inputs, e.value, depth + 1) for k, e in zip(keys, expr.elements)}  # type: ignore[union-attr]
    if isinstance(expr, (cst.List, cst.Set, cst.ListComp, cst.GeneratorExp, cst.DictComp, cst.Lambda)):
        return None
    origins = [o for o in inputs.facts.values.origins(expr) if not _loaded_array(inputs, o)]
    if not origins:
        return "tensor"  # arrays a Keras dataset loads: ``(x, y), _ = keras.datasets.mnist.load_data()``
    if not all(o.whole and isinstance(o.node, cst.BaseExpression) for o in origins):
        return None
    if all(o.node is expr or not isinstance(o.node, (cst.Tuple, cst.Dict, cst.List)) for o in origins):
        return "tensor"
    structures = {repr(_value_structure(inputs, o.node, depth + 1)) for o in origins}  # type: ignore[arg-type]
    return _value_structure(inputs, origins[0].node, depth + 1) if len(structures) == 1 else None  # type: ignore[arg-type]


def _gatherable(inputs: Inputs, loop: cst.For, use: cst.CSTNode) -> bool:
    """Whether a read of a batch can read the global batch instead, ``strategy.gather(batch,
    axis=0)``: the replicas' shares, in replica order, are the batch the dataset made
    (measured, also for a last batch that does not split evenly). Only a plain read in the
    loop's own scope (its body, or after it: the last batch it drew), outside any tf.function
    (where the code runs in cross-replica context)."""
    program, facts = inputs.program, inputs.facts
    return (
        isinstance(use, cst.Name)
        and program.scope(use) is program.scope(loop)
        and not _feeds_a_step(inputs, use)
        and not inputs.steps.in_graph(loop)
        # Only the loop's batch reaches it (not a value bound again on some path; after the
        # loop, not a value bound before a loop that may draw nothing either).
        and all(
            program.within(b, loop.target) or b is loop.target
            for b in (facts.reaching_bindings(use) if program.within(use, loop.body) else facts.bindings(use)) or [use]
        )
    )


def _feeds_a_step(inputs: Inputs, use: cst.CSTNode) -> bool:
    """Whether what is computed from the read ``use`` (``batch / 255.0``, ``tf.cast(batch,
    ...)``, in the expression around it) reaches ``strategy.run``: gathered there, every replica
    would be given the whole global batch."""
    program = inputs.program
    node: cst.CSTNode | None = use
    while node is not None and not isinstance(node, (cst.BaseSmallStatement, cst.BaseStatement)):
        if node is not use and isinstance(node, cst.BaseExpression) and _follow(inputs, node)[0]:
            return True
        node = program.parent(node)
    return False


def _strategy_at(inputs: Inputs, runs: list[cst.Call], loop: cst.CSTNode) -> cst.BaseExpression:
    program = inputs.program
    receivers = [run.func.value for run in runs]  # type: ignore[union-attr]
    codes = {program.module.code_for_node(r) for r in receivers}
    if len(codes) != 1:
        raise NotDistributable("the batches go to more than one strategy")
    receiver = receivers[0]
    if isinstance(receiver, cst.Name):
        return receiver
    if isinstance(receiver, cst.Attribute) and is_self_attribute(receiver):
        site, run = program.enclosing_function(loop), program.enclosing_function(runs[0])
        if site is not None and run is not None and _class_of(program, site) is _class_of(program, run) is not None:
            return receiver
    raise NotDistributable("the strategy that runs the step is not in view where the dataset is iterated")


def _scaled_for(inputs: Inputs, runs: list[cst.Call], dataset: cst.Name, batch: cst.BaseExpression) -> None:
    """Raises when a step divides its loss by a global batch that is not the dataset's batch:
    once the dataset is split, that loss would change."""
    program, steps = inputs.program, inputs.steps
    for run in runs:
        target = steps.run_target(run)
        root = steps.definition(target) if target is not None else None
        for _call, differentiated in steps.gradient_targets(root) if root is not None else ():
            for term in loss_terms_of(steps, differentiated):
                divisors = [s.right for s in term.scaling if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Divide)]
                if isinstance(term.node, cst.Call) and "tensorflow.nn.compute_average_loss" in inputs.facts.names_of(term.node.func):
                    divisors.append(argument_value(term.node, "global_batch_size", 2))
                for divisor in divisors:
                    if divisor is not None and "batch" in _words_of(divisor) and not _same(inputs, divisor, batch):
                        raise NotDistributable(
                            f"the step divides its loss by {program.module.code_for_node(divisor)} (line "
                            f"{program.line(divisor)}), which is not the batch {dataset.value} is made with: "
                            "split over the replicas, its loss would change"
                        )


def _sized_by(inputs: Inputs, runs: list[cst.Call], dataset: cst.Name, batch: cst.BaseExpression) -> None:
    """Raises when a step reads the size the dataset is batched with other than as the divisor
    of its loss (``tf.zeros((BATCH,) + shape)`` for its labels): the step is written for a batch
    of that size, and split over the replicas each replica's batch is smaller (the shapes no
    longer match, or the count is wrong)."""
    program, steps = inputs.program, inputs.steps
    code = program.module.code_for_node
    if not isinstance(batch, (cst.Name, cst.Attribute)):
        return
    for run in runs:
        target = steps.run_target(run)
        root = steps.definition(target) if target is not None else None
        if not isinstance(root, cst.FunctionDef):
            continue
        for read in nodes_in(root.body, type(batch)):
            if code(read) != code(batch) or not _same(inputs, read, batch) and isinstance(batch, cst.Name):
                continue
            parent = program.parent(read)
            if isinstance(parent, cst.Attribute) and parent.value is read:
                continue  # ``self.batch.x``: another value
            if isinstance(parent, cst.BinaryOperation) and parent.right is read and isinstance(parent.operator, cst.Divide):
                continue  # a loss divided by the global batch: right once the dataset is split
            if isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "global_batch_size":
                continue  # ``compute_average_loss(..., global_batch_size=BATCH)``: the same
            raise NotDistributable(
                f"the step reads {code(batch)} on line {program.line(read)}, the batch {dataset.value} is made "
                "with: split over the replicas, each replica's batch is smaller than that"
            )


def _wrapped(inputs: Inputs, name: cst.Name) -> tuple[cst.BaseExpression, cst.BaseStatement] | None:
    """For a loop over ``name`` bound once to what wraps a dataset for iteration: a progress
    bar (``bar = tqdm(dataset, total=n)``), what it iterates and the statement that makes it;
    None when ``name`` is bound to something else. Raises for any other wrapper (``enumerate``,
    ``zip``, ``iter``, ``itertools``: a distributed dataset would go inside it), and for a bar
    read otherwise than by its methods (``len(bar)``, which a distributed dataset has not)."""
    program, facts = inputs.program, inputs.facts
    bindings = facts.bindings(name) or []
    values = [facts.assigned_value(b) for b in bindings]
    calls = [v for v in values if isinstance(v, cst.Call)]
    if not bindings or len(calls) != len(values):
        return None
    wrappers = [c for c in calls if facts.names_of(c.func) & _WRAPPERS]
    if not wrappers:
        return None
    what = sorted(facts.names_of(wrappers[0].func) & _WRAPPERS)[0].rsplit(".", 1)[-1]
    wrapped = progress_bar_iterable(facts, wrappers[0])
    if wrapped is None or len(bindings) != 1:
        raise NotDistributable(
            f"{name.value} is {what}(...) of the dataset, not a dataset: the dataset would be distributed inside "
            f"it, where {name.value} is made (line {program.line(wrappers[0])}), which this fix does not write"
        )
    loop_reads = 0
    for use in facts.uses(bindings[0]):
        parent = program.parent(use)
        if isinstance(parent, cst.For) and parent.iter is use:
            loop_reads += 1
        elif not (isinstance(parent, cst.Attribute) and parent.value is use):
            raise NotDistributable(
                f"the progress bar {name.value} is also read on line {program.line(use)}, where a bar over a "
                "distributed dataset may not do (it has no length)"
            )
    statement = program.statement_of(wrappers[0])
    if loop_reads != 1 or statement is None:
        raise NotDistributable(f"the progress bar {name.value} is iterated by more than one loop")
    return wrapped, statement


# What wraps a dataset for iteration without being one.
_WRAPPERS = PROGRESS_BARS | {"builtins.enumerate", "builtins.zip", "builtins.iter", "builtins.reversed", "builtins.map", "builtins.filter"} | {
    f"itertools.{f}" for f in ("islice", "cycle", "chain", "tee", "zip_longest", "starmap", "takewhile", "dropwhile")
}


def _same(inputs: Inputs, a: cst.BaseExpression, b: cst.BaseExpression | None) -> bool:
    if b is None:
        return False
    code = inputs.program.module.code_for_node
    if code(a) == code(b):
        return True
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return set(inputs.facts.bindings(a) or [a]) == set(inputs.facts.bindings(b) or [b])
    return False


def _words_of(expr: cst.BaseExpression) -> set[str]:
    return {w for name in nodes_in(expr, cst.Name) for w in words(name.value)}


# Dataset methods that cut, repeat or reorder its batches without changing them.
_HEADER_METHODS = frozenset({"take", "skip", "shuffle", "repeat", "prefetch", "cache"})


def _chain_root(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``ds`` of ``ds.take(n).prefetch(1)``, when every call on the way is one of
    :data:`_HEADER_METHODS`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _HEADER_METHODS:
        expr = expr.func.value
    return expr if isinstance(expr, cst.Name) else None


def _outermost_loop(program, loop: cst.BaseStatement, made: cst.CSTNode) -> cst.BaseStatement:
    """The outermost loop around ``loop`` (itself when there is none) in its function, below the
    loop ``made`` (where the dataset is bound) is in."""
    outer: cst.BaseStatement = loop
    for ancestor in program.ancestors(loop):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) or program.within(made, ancestor):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            outer = ancestor
    return outer


def _class_of(program, function: cst.FunctionDef) -> cst.ClassDef | None:
    block = program.parent(function)
    cls = program.parent(block) if block is not None else None
    return cls if isinstance(cls, cst.ClassDef) else None


def _names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []


def _short(code: str, limit: int = 60) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


def _drawn_by(inputs: Inputs, feeds: list[Feed]) -> str | None:
    """``X, from data_loader.get_batch(batch_size), line 45``: the call whose result the code
    that calls the function running ``strategy.run`` passes it, when a feed is a parameter of
    that function (a step's generated wrapper) bound there by a call."""
    program, facts = inputs.program, inputs.facts
    for feed in feeds:
        argument = feed.argument
        function = program.enclosing_function(feed.run)
        if not isinstance(argument, cst.Name) or function is None:
            continue
        names = [p.name.value for p in function.params.params]
        if argument.value not in names:
            continue
        index = names.index(argument.value)
        for call in nodes_in(program.module, cst.Call):
            if not (isinstance(call.func, cst.Name) and call.func.value == function.name.value) or len(call.args) <= index:
                continue
            passed = call.args[index]
            if passed.keyword is not None or passed.star or not isinstance(passed.value, cst.Name):
                continue
            for binding in facts.reaching_bindings(passed.value) or []:
                value = facts.assigned_value(binding)
                if value is None:
                    statement = program.statement_of(binding)
                    assign = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and statement.body else None
                    value = assign.value if isinstance(assign, cst.Assign) else None
                if isinstance(value, cst.Call):
                    return (
                        f"{passed.value.value}, from {_short(program.module.code_for_node(value))}, line {program.line(value)}, "
                        "at every step"
                    )
    return None
