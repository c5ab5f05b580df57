"""Which examples each step sees.

Wrong by the definition: the global batch is not N x B split into N disjoint shards of the
original's stream of examples (the batch left per replica or doubled, the undistributed
dataset handed to every replica), or the stream itself changed (batches skipped or cut short,
a shuffle added, an example dropped, the validation set trained on, the last partial batch
dropped or kept). Where the change could leave a short dataset as it was (one batch), the
dataset's size must be known.
"""

from __future__ import annotations

import math

import libcst as cst

from mutants import uses
from mutants.core import WRONG, Edit, callee, expr, keyword, number, operator, positional, true, with_keyword, without_arg
from mutants.vocabulary import walk

FAMILY = "data"
DATASET_METHODS = {"batch", "padded_batch", "shuffle", "prefetch", "map", "repeat", "cache", "take", "skip", "filter", "from_tensor_slices", "from_tensors", "zip", "unbatch", "rebatch", "apply"}


def chain(p, node: cst.BaseExpression, depth: int = 0) -> list[cst.Call]:
    """The dataset calls an expression is made of, outermost first, through names."""
    calls: list[cst.Call] = []
    current = p.facts.resolve(node) if isinstance(node, cst.Name) else node
    while depth < 20:
        depth += 1
        if isinstance(current, cst.Call) and callee(current) in DATASET_METHODS:
            calls.append(current)
            if isinstance(current.func, cst.Attribute) and callee(current) not in ("from_tensor_slices", "from_tensors", "zip"):
                current = current.func.value
                if isinstance(current, cst.Name):
                    current = p.facts.resolve(current)
                continue
        break
    return calls


def is_dataset(p, node) -> bool:
    calls = chain(p, node)
    return bool(calls) and callee(calls[-1]) in ("from_tensor_slices", "from_tensors", "zip") or any(callee(c) in ("batch", "padded_batch") for c in calls)


def examples(p, node) -> int | None:
    """How many examples a dataset expression holds (None when unknown or infinite)."""
    calls = chain(p, node)
    if not calls or callee(calls[-1]) != "from_tensor_slices" or not calls[-1].args:
        return None
    n = uses.size_of(p, calls[-1].args[0].value)
    for call in reversed(calls[:-1]):
        name = callee(call)
        if name in ("repeat", "filter", "rebatch", "unbatch", "apply", "padded_batch"):
            return None
        if name in ("take", "skip"):
            k = number(call.args[0].value) if call.args else None
            if k is None or n is None:
                return None
            n = min(n, int(k)) if name == "take" else max(0, n - int(k))
        if name == "batch":
            break
    return n


def global_batch(p, call: cst.Call) -> int | None:
    """The value of a ``.batch(B * N)`` call's batch on the replicas judged."""
    if not call.args:
        return None
    value = call.args[0].value
    value = p.facts.resolve(value) if isinstance(value, cst.Name) else value
    from mutants.vocabulary import scaled_operand

    operand = scaled_operand(value)
    if operand is None:
        return None
    b = number(p.facts.resolve(operand) if isinstance(operand, cst.Name) else operand)
    return int(b) * p.replicas if b is not None else None


def batch_call(p, node) -> cst.Call | None:
    return next((c for c in chain(p, node) if callee(c) == "batch"), None)


def trained_datasets(p) -> list[tuple[cst.BaseExpression, str]]:
    """The dataset expressions training steps consume: distributed for a custom loop, or
    given to a trained model's fit."""
    found = []
    for call in p.nodes(cst.Call):
        if callee(call) == "experimental_distribute_dataset" and call.args and _feeds_steps(p, call):
            found.append((call.args[0].value, "loop"))
        elif callee(call) == "fit" and _trained_fit(p, call):
            args = positional(call)
            if args and is_dataset(p, args[0].value):
                found.append((args[0].value, "fit"))
    return found


def _trained_fit(p, call: cst.Call) -> bool:
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if not isinstance(receiver, cst.Name):
        return False
    return any(id(e.assigns.get(receiver.value)) in p.facts.fit_trained for e in p.facts.reaching(receiver.value, call))


def _feeds_steps(p, call: cst.Call) -> bool:
    """The distributed dataset is iterated by a loop whose body runs a step with strategy.run."""
    parent = p.parent(call)
    names = []
    if isinstance(parent, cst.Assign):
        names = [t.target.value for t in parent.targets if isinstance(t.target, cst.Name)]
    for loop in p.nodes(cst.For):
        iterated = loop.iter
        if isinstance(iterated, cst.Call) and callee(iterated) == "enumerate" and iterated.args:
            iterated = iterated.args[0].value
        if iterated is call or isinstance(iterated, cst.Name) and iterated.value in names:
            if _runs_strategy(p, loop.body):
                return True
    return False


def _runs_strategy(p, body) -> bool:
    for n in walk(body):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in p.facts.functions:
            function = p.facts.functions[n.func.value]
            if any(isinstance(m, cst.Call) and callee(m) == "run" for m in walk(function.body)):
                return True
    return False


def _whole_epochs(p, dataset: cst.BaseExpression, how: str) -> bool:
    """Every batch of the dataset is trained on: fit without steps_per_epoch, or a loop over it
    with no break."""
    for call in p.nodes(cst.Call):
        if how == "fit" and callee(call) == "fit" and positional(call) and positional(call)[0].value is dataset:
            return keyword(call, "steps_per_epoch") is None
        if how == "loop" and callee(call) == "experimental_distribute_dataset" and call.args and call.args[0].value is dataset:
            return not any(isinstance(n, cst.Break) for loop in p.nodes(cst.For) for n in walk(loop.body))
    return False


@operator("undistributed-dataset", WRONG, FAMILY, "the step fed the dataset itself, not its distributed copy: every replica gets the whole global batch", "the batch each replica's step receives")
def undistributed_dataset(p):
    for call in p.nodes(cst.Call):
        if callee(call) == "experimental_distribute_dataset" and call.args and _feeds_steps(p, call):
            yield Edit(p.replace_one(call, call.args[0].value.deep_clone()), f"{p.code(call)} -> {p.code(call.args[0].value)}", p.line(call))


def _scaled_batches(p):
    for product, operand in uses.global_batches(p):
        if uses.batch_uses(p, product):
            yield product, operand


@operator("batch-per-replica", WRONG, FAMILY, "the global batch B * N written back as B", "the global batch (N x B)")
def batch_per_replica(p):
    for product, operand in _scaled_batches(p):
        yield Edit(p.replace_one(product, operand.deep_clone()), f"{p.code(product)} -> {p.code(operand)}", p.line(product))


@operator("batch-doubled", WRONG, FAMILY, "the global batch B * N doubled again", "the global batch (N x B)")
def batch_doubled(p):
    for product, _ in _scaled_batches(p):
        new = expr(f"{p.code(product)} * 2")
        yield Edit(p.replace_one(product, new), f"{p.code(product)} -> {p.code(new)}", p.line(product))


def _batches_in(p, dataset) -> int | None:
    call = batch_call(p, dataset)
    n = examples(p, dataset)
    g = global_batch(p, call) if call is not None else None
    if n is None or g is None or g <= 0:
        return None
    drop = keyword(call, "drop_remainder")
    return n // g if drop is not None and true(drop.value) else math.ceil(n / g)


@operator("take-added", WRONG, FAMILY, "the trained dataset cut to its first 2 batches (.take(2))", "steps past the second (the batches of step 3 on)")
def take_added(p):
    for dataset, how in trained_datasets(p):
        batches = _batches_in(p, dataset)
        if batches is not None and batches > 2:
            new = expr(f"{p.code(dataset)}.take(2)") if not isinstance(dataset, cst.Name) else expr(f"{dataset.value}.take(2)")
            yield Edit(p.replace_one(dataset, new), f"{p.code(dataset)} -> .take(2) of it ({batches} batches an epoch)", p.line(dataset))


@operator("skip-added", WRONG, FAMILY, "the trained dataset's first batch skipped (.skip(1))", "the first batch's examples")
def skip_added(p):
    for dataset, how in trained_datasets(p):
        calls = chain(p, dataset)
        if any(callee(c) == "repeat" for c in calls):
            batches = _batches_in(p, dataset)
            if batches is None or batches < 2:
                continue
        new = expr(f"{p.code(dataset)}.skip(1)")
        yield Edit(p.replace_one(dataset, new), f"{p.code(dataset)} -> .skip(1) of it", p.line(dataset))


@operator("shuffle-added", WRONG, FAMILY, "a shuffle added before the batch of a dataset that had none", "the examples of each batch (shuffle is held as identity)")
def shuffle_added(p):
    for dataset, how in trained_datasets(p):
        calls = chain(p, dataset)
        call = batch_call(p, dataset)
        if call is None or any(callee(c) == "shuffle" for c in calls) or not isinstance(call.func, cst.Attribute):
            continue
        batches = _batches_in(p, dataset)
        if batches is None or batches < 2:
            continue
        receiver = call.func.value
        shuffled = expr("_.shuffle(1024, seed=3)").with_changes(func=cst.Attribute(value=receiver, attr=cst.Name("shuffle")))
        new = call.with_changes(func=call.func.with_changes(value=shuffled))
        yield Edit(p.replace_one(call, new), f"{p.code(call)} -> .shuffle(1024, seed=3) before it", p.line(call))


@operator("validation-swapped", WRONG, FAMILY, "fit trains on its validation data and validates on its training data", "the examples of each batch")
def validation_swapped(p):
    for call in p.nodes(cst.Call):
        if callee(call) != "fit" or not _trained_fit(p, call):
            continue
        validation = keyword(call, "validation_data")
        args = positional(call)
        if validation is None or not args:
            continue
        value = validation.value
        if isinstance(value, cst.Tuple) and len(value.elements) == 2 and len(args) >= 2:
            xv, yv = value.elements[0].value, value.elements[1].value
            x, y = args[0].value, args[1].value
            if p.code(xv) == p.code(x):
                continue
            changes = {x: xv.deep_clone(), y: yv.deep_clone(), xv: x.deep_clone(), yv: y.deep_clone()}
        elif not isinstance(value, cst.Tuple) and len(args) == 1 and is_dataset(p, args[0].value) and is_dataset(p, value):
            if p.code(value) == p.code(args[0].value):
                continue
            changes = {args[0].value: value.deep_clone(), value: args[0].value.deep_clone()}
        else:
            continue
        yield Edit(p.replace(changes), "fit's training and validation data swapped", p.line(call))


@operator("drop-remainder-flipped", WRONG, FAMILY, "drop_remainder added (or removed) where the last batch is partial", "the last batch of an epoch")
def drop_remainder_flipped(p):
    for dataset, how in trained_datasets(p):
        call = batch_call(p, dataset)
        n = examples(p, dataset)
        g = global_batch(p, call) if call is not None else None
        if call is None or n is None or g is None or n % g == 0 or not _whole_epochs(p, dataset, how):
            continue
        drop = keyword(call, "drop_remainder")
        if drop is None:
            new = with_keyword(call, "drop_remainder", expr("True"))
            what = f"drop_remainder=True: the last {n % g} of {n} examples dropped"
        elif true(drop.value):
            new = without_arg(call, drop)
            what = f"drop_remainder removed: a last batch of {n % g} examples trained"
        else:
            continue
        yield Edit(p.replace_one(call, new), what, p.line(call))


@operator("example-dropped", WRONG, FAMILY, "one example dropped from the training data (every batch shifts by one)", "the examples of each batch")
def example_dropped(p):
    for dataset, how in trained_datasets(p):
        calls = chain(p, dataset)
        if calls and callee(calls[-1]) == "from_tensor_slices":
            source = calls[-1]
            new = expr(f"{p.code(source)}.skip(1)")
            yield Edit(p.replace_one(source, new), f"{p.code(source)[:60]} -> .skip(1) of it", p.line(source))
    for call, x, y in _fits_on_arrays(p):
        changes = {x: expr(f"{p.code(x)}[1:]"), y: expr(f"{p.code(y)}[1:]")}
        yield Edit(p.replace(changes), f"fit({p.code(x)}[1:], {p.code(y)}[1:], ...): the first example dropped", p.line(call))


def _fits_on_arrays(p):
    """The trained fit calls given their examples and labels as two arrays written as names,
    attributes or slices (not datasets, dicts or lists): (call, x, y)."""
    for call in p.nodes(cst.Call):
        if callee(call) != "fit" or not _trained_fit(p, call):
            continue
        args = positional(call)
        if len(args) >= 2 and not is_dataset(p, args[0].value) and all(isinstance(a.value, (cst.Name, cst.Attribute, cst.Subscript)) for a in args[:2]):
            if any(isinstance(p.facts.resolve(a.value), (cst.Dict, cst.List)) for a in args[:2]):
                continue
            yield call, args[0].value, args[1].value


@operator("epoch-cut", WRONG, FAMILY, "an epoch cut after the steps compared: the trained dataset's last batch left out (.take), fit's arrays without their last rows", "what an epoch holds (its batches, fit's rows), compared as the scripts give it")
def epoch_cut(p):
    for dataset, how in trained_datasets(p):
        batches = _batches_in(p, dataset)
        # more batches than the steps a proof compares (3 by default): the steps it runs are the
        # original's, only the epoch's end differs
        if batches is None or batches < 5:
            continue
        new = expr(f"{p.code(dataset)}.take({batches - 1})") if not isinstance(dataset, cst.Name) else expr(f"{dataset.value}.take({batches - 1})")
        yield Edit(p.replace_one(dataset, new), f"{p.code(dataset)} -> .take({batches - 1}) of it ({batches} batches an epoch)", p.line(dataset))
    for call, x, y in _fits_on_arrays(p):
        changes = {x: expr(f"{p.code(x)}[:-1]"), y: expr(f"{p.code(y)}[:-1]")}
        yield Edit(p.replace(changes), f"fit({p.code(x)}[:-1], {p.code(y)}[:-1], ...): the last example left out", p.line(call))


@operator("fit-shuffle-flipped", WRONG, FAMILY, "fit on arrays given shuffle=False where it shuffles (Keras's default), or shuffle=True where it does not", "fit's shuffle, compared as the scripts give it (every run's shuffling is turned off)")
def fit_shuffle_flipped(p):
    for call in p.nodes(cst.Call):
        if callee(call) != "fit" or not _trained_fit(p, call):
            continue
        args = positional(call)
        given_x = keyword(call, "x")
        x = args[0].value if args else (given_x.value if given_x is not None else None)
        made = p.facts.resolve(x) if isinstance(x, cst.Name) else x
        if x is None or is_dataset(p, x) or isinstance(made, cst.Call) and callee(made) in DATASET_METHODS:
            continue
        given = keyword(call, "shuffle")
        shuffles = given is None or true(given.value)
        flag = expr("False" if shuffles else "True")
        new = with_keyword(call, "shuffle", flag) if given is None else call.with_changes(args=[a.with_changes(value=flag) if a is given else a for a in call.args])
        what = "its arrays trained in order, where the original shuffles them" if shuffles else "its arrays shuffled, where the original trains on them in order"
        yield Edit(p.replace_one(call, new), f"fit(..., shuffle={'False' if shuffles else 'True'}): {what}", p.line(call))


@operator("validation-cut", WRONG, FAMILY, "fit's validation arrays without their last example", "fit's validation arrays, digested as a step's examples are (what it reports at an epoch's end)")
def validation_cut(p):
    for call in p.nodes(cst.Call):
        if callee(call) != "fit" or not _trained_fit(p, call):
            continue
        validation = keyword(call, "validation_data")
        if validation is None or not isinstance(validation.value, cst.Tuple) or len(validation.value.elements) != 2:
            continue
        parts = [e.value for e in validation.value.elements]
        if not all(isinstance(v, (cst.Name, cst.Attribute, cst.Subscript)) for v in parts):
            continue
        changes = {v: expr(f"{p.code(v)}[:-1]") for v in parts}
        yield Edit(p.replace(changes), f"validation_data=({p.code(parts[0])}[:-1], {p.code(parts[1])}[:-1]): its last example left out", p.line(call))


@operator("loop-epochs-changed", WRONG, FAMILY, "a loop of the script's own over range(n) around its steps run once more (n + 1), or once less (n - 1 of a number 2 or more)", "how many times the script's own loops around its first update run, compared as the scripts give them")
def loop_epochs_changed(p):
    for loop in p.nodes(cst.For):
        ranged = loop.iter
        if isinstance(ranged, cst.Call) and callee(ranged) in ("enumerate", "tqdm") and ranged.args:
            ranged = ranged.args[0].value
        if not (isinstance(ranged, cst.Call) and callee(ranged) == "range" and len(ranged.args) == 1 and _runs_strategy(p, loop.body)):
            continue
        count = ranged.args[0].value
        value = number(count)
        new = expr(str(int(value) - 1)) if isinstance(count, cst.Integer) and value is not None and value >= 2 else expr(f"{p.code(count)} + 1")
        yield Edit(p.replace_one(count, new), f"range({p.code(count)}) -> range({p.code(new)})", p.line(loop))
