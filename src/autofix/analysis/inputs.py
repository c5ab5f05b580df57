"""What ``strategy.run`` feeds a training step: distributed batches, or data every replica gets
whole.

``strategy.run(step, args=(batch,))`` gives each replica its own share only when ``batch`` comes
from the strategy (``experimental_distribute_dataset``, ``distribute_datasets_from_function``,
``experimental_distribute_values_from_function``). A batch of a plain ``tf.data`` dataset, a
NumPy array, or one replica's shard (``batch.values[0]``) goes whole to every replica (measured:
each of 2 replicas sees all 8 examples): no data parallelism, and the replicas' gradients of the
same batch are summed.

Each argument is followed backwards to where its value is made: through names (every binding
that may reach the read: a value rebuilt on one branch counts), ``for`` loops and
``enumerate`` / ``zip`` / ``iter`` / ``next``, tuple unpacking, subscripts, the parameters of
local functions (to what their callers pass) and their returns, and ``self`` attributes. An
origin is ``distributed``, ``dataset`` (a ``tf.data`` / Keras / TFDS dataset, with the
expression iterated), ``array`` (NumPy, or a Keras ``load_data``), ``shard``, or unknown
(scalars, step counters, tensors made by TensorFlow, values from other modules: never a
finding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.callees import Callables, words
from autofix.analysis.dataflow import LOADERS, PASSTHROUGH
from autofix.analysis.losses import loss_terms_of
from autofix.analysis.steps import Steps
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.analysis.training import batch_size_of

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
_DEPTH = 12
# TPU strategies take their own kind of input: not judged here.
_TPU = ("TPUStrategy", "TPUStrategyV2")


@dataclass(frozen=True)
class Origin:
    kind: str  # "distributed", "dataset", "array", "shard", "unknown"
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
        return [o for o in self.origins if o.kind in ("dataset", "array", "shard")]


class Inputs(Derived):
    def __init__(self, program) -> None:
        super().__init__(program)
        self.steps = Steps.of(program)
        self.facts = self.steps.facts
        self.callables = Callables.of(program)

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
                origins = self.origins(argument)
                feed = Feed(run, argument, origins)
                if feed.undistributed:
                    found.append(feed)
        return found

    def _judged(self, run: cst.Call) -> bool:
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
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("apply_gradients", "minimize")
            for c in steps.calls(step)
        )

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
        elif isinstance(expr, cst.Attribute) and _self_attribute(expr):
            for value, _ in self.callables.attribute_assignments(expr):
                self._value(value, found, seen, depth + 1)
        elif isinstance(expr, cst.Call):
            self._call(expr, found, seen, depth)
        else:
            found.append(Origin("unknown", expr))

    def _call(self, call: cst.Call, found: list[Origin], seen: set, depth: int) -> None:
        facts = self.facts
        names = facts.names_of(call.func)
        func = call.func
        if names & {"builtins.next"} and call.args:
            self._elements(call.args[0].value, found, seen, depth + 1, None)
            return
        if any(n.startswith("numpy.") for n in names) or any(n.startswith("keras.datasets.") for n in names):
            found.append(Origin("array", call))
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
                self._value(func.value, found, seen, depth + 1)
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
        if isinstance(expr, cst.Name):
            bindings = facts.reaching_bindings(expr) or []
            values = [facts.assigned_value(b) for b in bindings]
            inner: list[Origin] = []
            if bindings and all(v is not None for v in values):
                for value in values:
                    self._elements(value, inner, seen, depth + 1, loop, path)  # type: ignore[arg-type]
            elif len(bindings) == 1 and isinstance(bindings[0], cst.Param):
                # A dataset handed in: what the callers hand in.
                self._parameter(bindings[0], inner, seen, depth, iterated=True, path=path)
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
        if isinstance(expr, cst.Call) and self._kind(expr) is None:
            callees, complete = self.callables.of_call(expr.func)
            if callees and complete:
                for callee in callees:
                    info = facts.functions.get(callee.function)  # type: ignore[arg-type]
                    for ret in info.returns if info else ():
                        if ret.value is not None:
                            self._elements(ret.value, found, seen, depth + 1, loop, path)
                return
        kind = self._kind(expr)
        found.append(Origin(kind or "unknown", expr, loop, (expr,) if kind == "dataset" else ()))

    def _kind(self, expr: cst.BaseExpression) -> str | None:
        """What iterating the value ``expr`` gives, when it is evident from how it is made."""
        facts = self.facts
        depth = 0
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and depth < _DEPTH:
            method = expr.func.attr.value
            if method in DISTRIBUTE_METHODS and self.steps.is_strategy(expr.func.value):
                return "distributed"
            if method not in _DATASET_METHODS:
                break
            expr, depth = expr.func.value, depth + 1
        if isinstance(expr, cst.Call):
            names = facts.names_of(expr.func)
            if any(n.startswith(_DATASET_MAKERS) for n in names) or names & LOADERS:
                return "dataset"
            if any(n.startswith("numpy.") for n in names):
                return "array"
        return None

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
            found.append(Origin("unknown", param))
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


@dataclass(frozen=True)
class Distribution:
    """How to distribute the dataset a loop feeds to ``strategy.run``: once, before
    ``before`` (the outermost loop around the one that iterates it), with the strategy
    ``strategy`` (the receiver of the ``strategy.run`` calls, when it names the same object where
    the loop is: a plain name the caller checks is in view, or ``self.<name>`` in the same class)."""

    dataset: cst.Name
    loop: cst.For
    before: cst.BaseStatement
    strategy: cst.BaseExpression


class NotDistributable(Exception):
    """Why the dataset cannot be shown safe to distribute in place (the message says why)."""


def distribution(inputs: Inputs, feeds: list[Feed]) -> Distribution:
    """The one dataset the undistributed data of ``feeds`` (of one ``strategy.run`` call)
    comes from, and where to distribute it; raises :class:`NotDistributable`."""
    program, facts, steps = inputs.program, inputs.facts, inputs.steps
    origins = [o for feed in feeds for o in feed.origins if o.kind != "unknown"]
    if any(o.kind != "dataset" for o in origins):
        kinds = sorted({o.kind for o in origins if o.kind != "dataset"})
        raise NotDistributable(
            "some of it is distributed and some is not" if "distributed" in kinds else
            f"it is a {'NumPy array' if 'array' in kinds else 'replica shard'}, not a dataset that can be distributed in place"
        )
    loops = {id(o.loop): o for o in origins}
    if len(loops) != 1:
        raise NotDistributable("the data comes from more than one place")
    origin = next(iter(loops.values()))
    loop, dataset = origin.loop, origin.node
    if loop is None or loop.iter is not dataset or not isinstance(dataset, cst.Name):
        raise NotDistributable("the batches are not those of a for loop over a dataset named in view")
    bindings = facts.bindings(dataset) or []
    if len(bindings) == 1 and isinstance(bindings[0], cst.Param):
        function = program.enclosing_function(bindings[0])
        raise NotDistributable(
            f"the dataset is a parameter of {function.name.value if function else 'a function'}(), which code in "
            "other files may call with a distributed dataset; distribute it where it is made"
        )
    if len(bindings) != 1 or facts.assigned_value(bindings[0]) is None:
        raise NotDistributable(f"{dataset.value} is bound more than once")
    batches = [batch_size_of(program, made) for made in origin.made]
    if not batches or any(b is None for b in batches) or len({program.module.code_for_node(b) for b in batches}) != 1:  # type: ignore[arg-type]
        raise NotDistributable(f"{dataset.value} is not batched where it is made")
    if steps.in_graph(loop):
        raise NotDistributable("the loop runs inside a tf.function, where a dataset cannot be distributed")
    runs = {id(feed.run): feed.run for feed in feeds}
    for run in _batch_runs(inputs, loop):
        runs[id(run)] = run
    strategy = _strategy_at(inputs, list(runs.values()), loop)
    _scaled_for(inputs, list(runs.values()), dataset, batches[0])  # type: ignore[arg-type]
    before = _outermost_loop(program, loop)
    if program.line(bindings[0]) >= program.line(before) and program.enclosing_function(bindings[0]) is program.enclosing_function(before):
        raise NotDistributable(f"{dataset.value} is not made before the loop")
    return Distribution(dataset, loop, before, strategy)


def _batch_runs(inputs: Inputs, loop: cst.For) -> list[cst.Call]:
    """The ``strategy.run`` calls the loop's batches go to; raises when they also go anywhere
    else (a distributed batch is not a tensor)."""
    program, facts, steps = inputs.program, inputs.facts, inputs.steps
    pending = [use for name in _names(loop.target) for use in facts.uses(name)]
    runs: list[cst.Call] = []
    seen: set[int] = set()
    while pending:
        use = pending.pop()
        if id(use) in seen:
            continue
        seen.add(id(use))
        parent = program.parent(use)
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
            if names and all(isinstance(t.target, (cst.Tuple, cst.List)) for t in parent.targets):
                pending.extend(u for n in names for u in facts.uses(n))
                continue
        raise NotDistributable(f"the batch is also used on line {program.line(use)}, where a distributed batch would not do")
    return runs


def _strategy_at(inputs: Inputs, runs: list[cst.Call], loop: cst.For) -> cst.BaseExpression:
    program = inputs.program
    receivers = [run.func.value for run in runs]  # type: ignore[union-attr]
    codes = {program.module.code_for_node(r) for r in receivers}
    if len(codes) != 1:
        raise NotDistributable("the batches go to more than one strategy")
    receiver = receivers[0]
    if isinstance(receiver, cst.Name):
        return receiver
    if isinstance(receiver, cst.Attribute) and _self_attribute(receiver):
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


def _outermost_loop(program, loop: cst.For) -> cst.BaseStatement:
    outer: cst.BaseStatement = loop
    for ancestor in program.ancestors(loop):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
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


def _self_attribute(expr: cst.Attribute) -> bool:
    return isinstance(expr.value, cst.Name) and expr.value.value == "self"
