"""Rewrites that keep what is trained (``right``): the structure of the program changes, not
what it computes.

Independent statements reordered (pure assignments, imports of modules without side effects
here, two updates of different models by different optimizers once both gradients are taken),
a function's local renamed everywhere it is used, two ``with strategy.scope():`` blocks merged
(with the pure assignments and loss objects between them), ``tf.function`` added to or removed
from the outer step that only runs ``strategy.run`` and reduces, and a distributed dataset
made with ``distribute_datasets_from_function`` where that splits every global batch as
``experimental_distribute_dataset`` does (every batch full: measured, a partial last batch is
split otherwise).
"""

from __future__ import annotations

import libcst as cst

from mutants.core import RIGHT, Edit, callee, dotted, expr, keyword, operator, true
from mutants.data import batch_call, chain, examples, global_batch
from mutants.vocabulary import names_in, walk

FAMILY = "right"
PURE_CALLS = {"len", "int", "float", "min", "max", "str", "abs", "round"}
QUIET_MODULES = {"numpy", "tensorflow", "keras", "os", "sys", "time", "math", "glob", "json", "datetime", "collections", "functools", "itertools", "random", "pathlib"}


def _pure(node: cst.CSTNode) -> bool:
    """An expression that computes a value and does nothing else."""
    for n in walk(node):
        if isinstance(n, cst.Call) and not (isinstance(n.func, cst.Name) and n.func.value in PURE_CALLS):
            return False
        if isinstance(n, (cst.Lambda, cst.Await, cst.Yield, cst.NamedExpr, cst.ListComp, cst.GeneratorExp, cst.DictComp, cst.SetComp)):
            return False
    return True


def _pure_assignment(statement) -> tuple[set[str], set[str]] | None:
    """(written, read) of a line holding one pure assignment to plain names."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Assign) or not all(isinstance(t.target, cst.Name) for t in small.targets) or not _pure(small.value):
        return None
    return {t.target.value for t in small.targets}, names_in(small.value)


def _quiet_import(statement) -> tuple[set[str], set[str]] | None:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Import):
        modules = [dotted(a.name) or "" for a in small.names]
        bound = {(a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name) else (dotted(a.name) or "").split(".")[0]) for a in small.names}
    elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative and not isinstance(small.names, cst.ImportStar):
        modules = [dotted(small.module) or ""]
        bound = {(a.asname.name.value if a.asname is not None else dotted(a.name) or "") for a in small.names}
    else:
        return None
    if not all(m.split(".")[0] in QUIET_MODULES for m in modules):
        return None
    return bound, set()


def _apply(statement):
    """(optimizer, model) of ``opt.apply_gradients(zip(grads, model.trainable_variables))``."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1 or not isinstance(statement.body[0], cst.Expr):
        return None
    call = statement.body[0].value
    if not (isinstance(call, cst.Call) and callee(call) in ("apply_gradients", "apply") and isinstance(call.func, cst.Attribute)):
        return None
    models = {dotted(n.value) for n in walk(call) if isinstance(n, cst.Attribute) and n.attr.value in ("trainable_variables", "trainable_weights")}
    if len(models) != 1 or None in models:
        return None
    return dotted(call.func.value), models.pop()


def _blocks(p):
    for node in [p.module, *p.nodes(cst.IndentedBlock)]:
        yield node.body


@operator("independent-reordered", RIGHT, FAMILY, "two adjacent independent statements swapped", "nothing (the same program)")
def independent_reordered(p):
    for body in _blocks(p):
        for first, second in zip(body, body[1:]):
            if p.is_wall(first) or p.is_wall(second):
                continue
            what = None
            a, b = _pure_assignment(first), _pure_assignment(second)
            if a and b and not (a[0] & b[0]) and not (a[0] & b[1]) and not (b[0] & a[1]):
                what = "two pure assignments swapped"
            a, b = _quiet_import(first), _quiet_import(second)
            if a and b and not (a[0] & b[0]):
                what = "two imports swapped"
            a, b = _apply(first), _apply(second)
            if a and b and a[0] != b[0] and a[1] != b[1]:
                what = f"the updates of {a[1]} and {b[1]} (gradients already taken) swapped"
            if what:
                yield Edit(p.replace({first: second.deep_clone(), second: first.deep_clone()}), what, p.line(first))


# --- a local renamed -------------------------------------------------------------------------
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _renamable(p, function: cst.FunctionDef) -> list[str]:
    params = {q.name.value for q in [*function.params.params, *function.params.posonly_params, *function.params.kwonly_params]}
    for star in (function.params.star_arg, function.params.star_kwarg):
        if isinstance(star, cst.Param):
            params.add(star.name.value)
    declared = set()
    calls = set()
    for n in walk(function.body):
        if isinstance(n, (cst.Global, cst.Nonlocal)):
            declared |= {item.name.value for item in n.names}
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name):
            calls.add(n.func.value)
    if calls & {"locals", "vars", "eval", "exec", "globals"}:
        return []
    assigned = []
    for n in walk(function.body):
        if isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name):
            assigned.append(n.target.value)
    nested = set()
    for n in walk(function.body):
        if isinstance(n, _SCOPES):
            nested |= names_in(n)
    return [name for name in dict.fromkeys(assigned) if name not in params | declared | nested and not name.startswith("__")]


class _Rename(cst.CSTTransformer):
    def __init__(self, p, old: str, new: str):
        super().__init__()
        self.p, self.old, self.new = p, old, new

    def leave_Name(self, original_node, updated_node):
        parent = self.p.parent(original_node)
        if original_node.value != self.old:
            return updated_node
        if isinstance(parent, cst.Attribute) and parent.attr is original_node:
            return updated_node
        if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is original_node:
            return updated_node
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.ImportAlias)):
            return updated_node
        return updated_node.with_changes(value=self.new)


@operator("renamed-consistently", RIGHT, FAMILY, "a function's local variable renamed everywhere in the function", "nothing (the same program)")
def renamed_consistently(p):
    taken = {n.value for n in p.nodes(cst.Name)}
    functions = [f for f in p.nodes(cst.FunctionDef) if isinstance(f.body, cst.IndentedBlock)]
    functions.sort(key=lambda f: (f not in p.facts.steps, p.line(f)))
    for function in functions:
        for name in _renamable(p, function)[:1]:
            new = f"{name}_renamed"
            if new in taken:
                continue
            renamed = function.body.visit(_Rename(p, name, new))
            yield Edit(p.replace_one(function.body, renamed), f"{function.name.value}: {name} -> {new}", p.line(function))


# --- scopes merged -----------------------------------------------------------------------------
def _scope_block(p, statement) -> bool:
    if not isinstance(statement, cst.With) or len(statement.items) != 1 or not isinstance(statement.body, cst.IndentedBlock):
        return False
    item = statement.items[0]
    return item.asname is None and isinstance(item.item, cst.Call) and callee(item.item) == "scope" and not item.item.args


def _loss_object(statement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
        return False
    value = statement.body[0].value
    return isinstance(value, cst.Call) and ".losses." in (cst.Module([]).code_for_node(value.func) + ".") and all(_pure(a.value) for a in value.args)


@operator("scopes-merged", RIGHT, FAMILY, "two with strategy.scope(): blocks merged into one (pure assignments and loss objects between them moved in)", "nothing (the same objects, made in the scope)")
def scopes_merged(p):
    for body in _blocks(p):
        body = list(body)
        for i, first in enumerate(body):
            if not _scope_block(p, first):
                continue
            j = i + 1
            while j < len(body) and not _scope_block(p, body[j]) and (_pure_assignment(body[j]) or _loss_object(body[j])) and not p.is_wall(body[j]):
                j += 1
            if j >= len(body) or not _scope_block(p, body[j]) or p.code(first.items[0].item) != p.code(body[j].items[0].item):
                continue
            second = body[j]
            between = [s.deep_clone() for s in body[i + 1 : j]]
            merged = first.with_changes(body=first.body.with_changes(body=[*first.body.body, *between, *second.body.body]))
            changes = {first: merged, second: cst.RemoveFromParent()}
            for s in body[i + 1 : j]:
                changes[s] = cst.RemoveFromParent()
            yield Edit(p.replace(changes), f"the scope blocks of lines {p.line(first)} and {p.line(second)} merged", p.line(first))


# --- tf.function on the outer step --------------------------------------------------------------
_EFFECTS = {"print", "append", "numpy", "float", "int", "extend", "write"}


def _quiet(function: cst.FunctionDef) -> bool:
    for n in walk(function.body):
        if isinstance(n, (cst.Global, cst.Nonlocal)):
            return False
        if isinstance(n, cst.Call) and callee(n) in _EFFECTS:
            return False
    return True


def _outer_steps(p):
    """Module-level functions whose body only runs strategy.run and reduces (and returns)."""
    for function in p.facts.module_functions:
        if not isinstance(function.body, cst.IndentedBlock) or p.function_of(function) is not None or p.class_of(function) is not None:
            continue
        runs = [n for n in walk(function.body) if isinstance(n, cst.Call) and callee(n) == "run"]
        if len(runs) != 1 or not runs[0].args or not isinstance(runs[0].args[0].value, cst.Name):
            continue
        inner = p.facts.functions.get(runs[0].args[0].value.value)
        calls = {callee(n) for n in walk(function.body) if isinstance(n, cst.Call)}
        if inner is None or not calls <= {"run", "reduce", "experimental_local_results"} or not _quiet(function) or not _quiet(inner):
            continue
        if any(not isinstance(s, cst.SimpleStatementLine) for s in function.body.body):
            continue
        yield function, inner


def _is_tf_function(decorator: cst.Decorator) -> bool:
    return dotted(decorator.decorator) in ("tf.function", "function")


@operator("tf-function-toggled", RIGHT, FAMILY, "@tf.function removed from (or added to) the outer step that only runs strategy.run", "nothing (the same step, traced or eager)")
def tf_function_toggled(p):
    if "tf" not in p.facts.module_names:
        return
    for function, inner in _outer_steps(p):
        if any(isinstance(d.decorator, cst.Call) for d in function.decorators):
            continue
        marked = [d for d in function.decorators if _is_tf_function(d)]
        if marked:
            new = function.with_changes(decorators=[d for d in function.decorators if d not in marked])
            yield Edit(p.replace_one(function, new), f"@tf.function removed from {function.name.value}", p.line(function))
        elif not function.decorators and not any(_is_tf_function(d) for d in inner.decorators):
            new = function.with_changes(decorators=[cst.Decorator(decorator=expr("tf.function"))])
            yield Edit(p.replace_one(function, new), f"@tf.function added to {function.name.value}", p.line(function))


# --- distribute_datasets_from_function ----------------------------------------------------------
@operator("distribute-from-function", RIGHT, FAMILY, "experimental_distribute_dataset(ds) -> distribute_datasets_from_function(ds.rebatch(per-replica batch)) where every batch is full", "nothing (each replica gets the same examples)")
def distribute_from_function(p):
    for call in p.nodes(cst.Call):
        if callee(call) != "experimental_distribute_dataset" or len(call.args) != 1 or not isinstance(call.func, cst.Attribute):
            continue
        dataset = call.args[0].value
        calls = chain(p, dataset)
        batch = batch_call(p, dataset)
        if batch is None or any(callee(c) != "prefetch" for c in calls[: calls.index(batch)]):
            continue  # only a prefetch may follow the batch
        g = global_batch(p, batch)
        if g is None:
            continue
        below = calls[calls.index(batch) + 1 :]
        n = examples(p, dataset)
        drop = keyword(batch, "drop_remainder")
        full = drop is not None and true(drop.value) or any(callee(c) == "repeat" and not c.args for c in below) or n is not None and n % g == 0
        if not full:
            continue
        size = p.code(batch.args[0].value)
        strategy = p.code(call.func.value)
        new = expr(f"{strategy}.distribute_datasets_from_function(lambda input_context: {p.code(dataset)}.rebatch(input_context.get_per_replica_batch_size({size})))")
        yield Edit(p.replace_one(call, new), f"{p.code(call)[:60]} -> distribute_datasets_from_function(... .rebatch(per-replica batch))", p.line(call))
