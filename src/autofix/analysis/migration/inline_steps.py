"""A training step written inline in a loop body, for ``autofix migrate``: which statements of
the body are the step, what they take and hand back, and why a body cannot be split.

The step is the run of statements of the loop body from reading the batch to the update (the
forward pass under the tape, the gradients, ``apply_gradients``), with the metric updates right
after it that read what it computed. Moved into a function that the loop calls with the batch,
it is a custom step like any other (:mod:`.single_device`): run per replica by ``strategy.run``, fed
a distributed dataset, its loss averaged over the global batch.

Every name the step reads or sets is accounted for (:mod:`autofix.analysis.core.inline_flow`,
:mod:`.inline_names`). What it reads from
outside comes in as a parameter (the batch: the loop's targets, values the body makes before
the step outside TensorFlow, such as a sampler's arrays; values set by the loops around it, once
per epoch) or is read where it is (the model, the optimizer, settings made before the loops).
What it sets and something after it reads (the rest of the body, after the loop, the next turn
of the loop) is handed back, and must be the loss: that is all strategy.run can give back
(summed over the replicas). A ``print`` in the step that only shows values is moved after it.

Not split (the reason is given): the update under a condition or in a nested loop; the loop's
counter read in the step (a traced step would be traced again for each value); a value carried
from one step to the next (a running total, a Python counter); a value set after the step in
the body and read in it; ``break``, ``continue``, ``return``, ``yield``, ``try``, a ``def`` in
the step; a name the step sets that a function reads (it would no longer see it); a value read
after the step that is not the loss; and Python effects the step would have once per replica,
or only while tracing (appending to a list, a method of a Python object, a print that cannot
be moved).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.script import Facts
from autofix.analysis.core.inline_flow import Flow, NotSplit, Unsplittable, position_of
from autofix.analysis.migration.inline_names import loop_targets, split_names
from autofix.analysis.migration.unbuilt_models import Unbuilt, in_step_builds
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.steps.tracing import statement_effect
from autofix.tf.symbols import Kind


@dataclass(eq=False)
class InlineStep:
    """The step of a loop body, as it is moved into a function of its own."""

    loop: cst.For | cst.While
    # The outermost loop around it (in the same function): the function is defined before it.
    outer: cst.BaseStatement
    # The step: ``loop.body.body[start:end]``.
    start: int
    end: int
    # What the function takes (the loop calls it with these names) and hands back (assigned
    # to these names by the call).
    params: list[str]
    returns: list[str]
    # ``print`` statements of the step that go after the call instead (they only show values).
    moved: list[cst.SimpleStatementLine] = field(default_factory=list)
    updates: list[cst.Call] = field(default_factory=list)

    @property
    def statements(self) -> list[cst.BaseStatement]:
        return list(self.loop.body.body[self.start : self.end])  # type: ignore[union-attr]


class InlineSteps(Derived):
    """The inline steps of a program, one per loop (built once per program)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.steps = Steps.of(program)
        self._found: dict[int, InlineStep | NotSplit] = {}

    def step(self, loop: cst.For | cst.While, updates: list[cst.Call]) -> InlineStep | NotSplit:
        """The step of ``loop``'s body, whose updates are ``updates`` (every update in the body),
        or why the body cannot be split."""
        key = id(loop)
        if key not in self._found:
            try:
                self._found[key] = self._split(loop, updates)
            except Unsplittable as why:
                self._found[key] = why.refusal
        return self._found[key]

    # --- the statements of the step -----------------------------------------------------------

    def _split(self, loop: cst.For | cst.While, updates: list[cst.Call]) -> InlineStep:
        program = self.program
        line = program.line(loop)
        if isinstance(loop, cst.For) and loop.asynchronous is not None:
            raise Unsplittable(loop, f"the loop on line {line} is an async for")
        if not isinstance(loop.body, cst.IndentedBlock):
            raise Unsplittable(loop, f"the loop on line {line} is written on one line")
        if self.steps.in_graph(loop):
            raise Unsplittable(loop, f"the loop on line {line} runs inside a tf.function")
        scope = program.scope(loop)
        if scope is None or scope.kind not in ("module", "function"):
            raise Unsplittable(loop, f"the loop on line {line} is in a class body")
        body = list(loop.body.body)
        indexes = []
        for update in updates:
            top = program.top_statement_in(update, loop.body)
            nested = _nested_in(program, update, top)
            if top is None or nested is not None:
                raise Unsplittable(update, (
                    f"the update on line {program.line(update)} is made {_where(nested)} of the loop on line {line}, "
                    "not on every pass: autofix moves only a step that runs once per batch into a function"
                ))
            indexes.append(body.index(top))
        start, end = min(indexes), max(indexes) + 1
        counters = loop_targets(self, loop)[1]
        start = self._batch_reading(body, start, end, scope, counters)
        end = self._metric_updates(body, start, end, scope)
        start = self._batch_reading(body, start, end, scope, counters)
        prints = [p for s in body[start:end] for p in _prints(program, self.facts, s, loop)]
        flow = Flow(program, scope, {id(p) for p in prints})
        flow.run(body[start:end])
        ids = {id(p) for p in prints}
        others = {n for s in body[start:end] for part in _parts(s, ids) for n in _names_used(program, part)}
        moved = [p for p in prints if self._movable(p, flow, body[start:end], others, loop)]
        for statement in body[start:end]:
            self._effects(statement, {id(p) for p in moved}, flow)
        self._random_draws(body[start:end])
        self._unbuilt_models(body[start:end], loop)
        params, returns = split_names(self, loop, body, start, end, flow, moved)
        outer = _outermost_loop(program, loop)
        if program.block_of(outer) is None:
            raise Unsplittable(loop, f"the loop on line {program.line(outer)} is not a statement of a block")
        return InlineStep(loop, outer, start, end, params, returns, moved, list(updates))

    def _metric_updates(self, body: list[cst.BaseStatement], start: int, end: int, scope) -> int:
        """``end`` moved past the metric updates right after the update that read what the
        step computed (``train_acc.update_state(y, logits)``): they belong to the step."""
        flow = Flow(self.program, scope, set())
        flow.run(body[start:end])
        while end < len(body) and self._metric_update(body[end]) and flow.written.keys() & _names_read(self.program, body[end]):
            end += 1
        return end

    def _metric_update(self, statement: cst.BaseStatement) -> bool:
        call = _called(statement)
        if call is None:
            return False
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "update_state":
            return True
        return isinstance(func, cst.Name) and self._made_as(func, Kind.METRIC)

    def _made_as(self, name: cst.Name, kind: Kind) -> bool:
        values = [self.facts.assigned_value(b) for b in self.facts.bindings(name) or ()]
        return bool(values) and all(isinstance(v, cst.Call) and self.facts.call_kind(v) is kind for v in values)

    def _batch_reading(self, body: list[cst.BaseStatement], start: int, end: int, scope, counters: set[str]) -> int:
        """``start`` moved back over the statements that compute, in TensorFlow, what the step
        reads (``x = tf.reshape(x, ...)``), up to where the batch is read: a statement made of
        anything else (a sampler, NumPy), or reading the loop's counter (a slice of arrays), is
        where the batch comes from, and stays in the loop: the step takes what it sets."""
        while True:
            flow = Flow(self.program, scope, set())
            flow.run(body[start:end])
            wanted = set(flow.outside)
            found = None
            for index in range(start - 1, -1, -1):
                if not _bound_names(self.program, body[index]) & wanted:
                    continue
                statement = body[index]
                if isinstance(statement, cst.With) or (
                    _computes(statement)
                    and not _names_read(self.program, statement) & counters
                    and statement_effect(self.program, self.steps, statement, lambda _name: False) is None
                ):
                    found = index  # (what a with block does is judged with the rest of the step)
                break
            if found is None:
                return start
            start = found

    def _movable(self, statement: cst.SimpleStatementLine, flow: Flow, step: list[cst.BaseStatement], others: set[str], loop: cst.CSTNode) -> bool:
        """Whether a ``print`` (or an append to a list made before the loop) of the step can run after it instead: it reads only what the
        step sets before it and not after (handed back), and names the rest of the step does
        not use (``others``: what it shows of them may change in the step)."""
        program = self.program
        if any(isinstance(s, (cst.Raise, cst.Assert)) for top in step for s in _small_statements(top)):
            return False  # printed before an exception the step may raise
        before = flow.before.get(id(statement), set())
        at = position_of(program, statement)
        for name in _names_read(program, statement):
            if name in flow.written:
                if name not in before or any(position_of(program, n) > at for n in flow.written[name]):
                    return False
            elif name in others:
                return False
        holder = program.parent(statement)
        if isinstance(holder, cst.IndentedBlock) and not any(s is statement for s in step):
            if all(_is_print(program, self.facts, s) or _is_record(program, self.facts, s, loop) for s in holder.body):
                return False  # its block would be left empty
        return True

    def _calls_run(self, step: list[cst.BaseStatement]) -> list[cst.Call]:
        """The calls the step's statements make, and those of the local functions they call."""
        calls = [c for s in step for c in _nodes(s, cst.Call)]
        for call in list(calls):
            local = self.facts.local_definition(call.func) if isinstance(call.func, cst.Name) else None
            if isinstance(local, cst.FunctionDef):
                calls.extend(self.steps.calls(local))
        return calls

    def _random_draws(self, step: list[cst.BaseStatement]) -> None:
        """Raises when the step draws random numbers in TensorFlow (a GAN's noise): split over
        the replicas, each draws its own rows, which ``smoke --compare`` holds equal to the
        original's draw only when the original draws them in a ``tf.function`` step (measured:
        drawn in the loop, the first updates differ), so the migration could not be proven."""
        calls = self._calls_run(step)
        for call in calls:
            if any(n.startswith(_RANDOM) for n in self.facts.names_of(call.func)):
                raise Unsplittable(call, (
                    f"the step draws random numbers ({self.program.module.code_for_node(call.func)}, line "
                    f"{self.program.line(call)}): moved into a step that runs on every replica, each would draw its own "
                    "rows, which `autofix smoke --compare` holds equal to the original's draw only when the original "
                    "draws them in a tf.function step; put the step in a tf.function the loop calls, then migrate"
                ))

    def _unbuilt_models(self, step: list[cst.BaseStatement], loop: cst.For | cst.While) -> None:
        """Raises when the step calls a Sequential model that its first call would build per
        replica and that cannot be built in the step once it is a function of its own
        (:mod:`.unbuilt_models`)."""
        calls = self._calls_run(step)
        found = in_step_builds(self.program, self.facts, calls, loop)
        if isinstance(found, Unbuilt):
            raise Unsplittable(found.call, found.reason)

    def _effects(self, statement: cst.BaseStatement, moved: set[int], flow: Flow) -> None:
        """Raises when ``statement`` does in Python what run per replica (or traced) it would
        not do the same: appending to a list, a method of a Python object, a print."""
        program = self.program
        for part in _parts(statement, moved):
            why = statement_effect(program, self.steps, part, lambda name: name.value in flow.written)
            if why is None:
                continue
            raise Unsplittable(part, (
                f"the step {why} (line {program.line(part)}): moved into a function that runs on every replica, "
                "that would happen once on each replica (and in a tf.function, only while it is traced); "
                "move it out of the training step, then migrate"
            ))


# Random numbers drawn in TensorFlow or Keras.
_RANDOM = ("tensorflow.random.", "keras.random.", "tensorflow.nn.dropout", "keras.backend.random_")


# --- syntax helpers ------------------------------------------------------------------------------


def _nested_in(program: Program, node: cst.CSTNode, top: cst.CSTNode | None) -> cst.CSTNode | None:
    """The compound statement (other than ``with``) between ``node`` and ``top`` it is nested
    in, if any: then it does not run once per pass of the loop."""
    for ancestor in program.ancestors(node):
        if ancestor is top:
            return ancestor if not isinstance(ancestor, (cst.With, cst.SimpleStatementLine)) else None
        if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Match)):
            return ancestor
    return None


def _where(nested: cst.CSTNode | None) -> str:
    if isinstance(nested, cst.If):
        return "under a condition"
    if isinstance(nested, (cst.For, cst.While)):
        return "in a nested loop"
    if isinstance(nested, (cst.Try, cst.TryStar)):
        return "in a try statement"
    return "in a nested block"


def _outermost_loop(program: Program, loop: cst.CSTNode) -> cst.BaseStatement:
    outer = loop
    for ancestor in program.ancestors(loop):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            outer = ancestor
    return outer  # type: ignore[return-value]


def _small_statements(statement: cst.CSTNode) -> list[cst.BaseSmallStatement]:
    found: list = []

    class Visitor(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.BaseSmallStatement):
                found.append(node)
            return not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))

    statement.visit(Visitor())
    return found


def _bound_names(program: Program, statement: cst.BaseStatement) -> set[str]:
    """Names of the statement's own scope that it binds."""
    scope = program.scope(statement)
    found = set()
    for node in _nodes(statement, cst.Name):
        binding = program.index.bindings.get(node)
        if binding is not None and binding.scope is scope:
            found.add(node.value)
    return found


def _names_read(program: Program, statement: cst.CSTNode) -> set[str]:
    return {n.value for n in _nodes(statement, cst.Name) if program.access(n) is not None}


def _names_used(program: Program, node: cst.CSTNode) -> set[str]:
    """Every name read or set in ``node``, of any scope."""
    return {n.value for n in _nodes(node, cst.Name) if program.access(n) is not None or n in program.index.bindings}


def _nodes(root: cst.CSTNode, kind: type) -> list:
    found: list = []

    class Visitor(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind):
                found.append(node)
            return True

    root.visit(Visitor())
    return found


def _computes(statement: cst.BaseStatement) -> bool:
    """An assignment (what computes a value from the batch), not a statement shown or run
    for its effect."""
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Assign, cst.AugAssign, cst.AnnAssign)) for s in statement.body)


def _called(statement: cst.CSTNode) -> cst.Call | None:
    """The call a statement of one call alone makes (``print(x)``, ``h.append(x)``)."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr)):
        return None
    call = statement.body[0].value
    return call if isinstance(call, cst.Call) else None


def _is_print(program: Program, facts: Facts, statement: cst.CSTNode) -> bool:
    call = _called(statement)
    return call is not None and "builtins.print" in facts.names_of(call.func)


def _is_record(program: Program, facts: Facts, statement: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """``history.append(value)`` / ``logs["loss"].append(value)``: a value kept in a Python
    list made before the loop (a loss history to plot), which, like a ``print``, only takes what
    the step computed and can be kept after it."""
    call = _called(statement)
    if call is None or not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"):
        return False
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return False
    holder = call.func.value
    if isinstance(holder, cst.Subscript) and len(holder.slice) == 1 and isinstance(holder.slice[0].slice, cst.Index):
        if not isinstance(holder.slice[0].slice.value, cst.SimpleString):
            return False
        holder = holder.value
    if not isinstance(holder, cst.Name):
        return False
    bindings = facts.reaching_bindings(holder) or []
    inside = lambda node: any(a is loop for a in program.ancestors(node))  # noqa: E731
    return bool(bindings) and all(
        isinstance(facts.assigned_value(b), (cst.List, cst.Dict)) and not inside(b) for b in bindings
    )


def _prints(program: Program, facts: Facts, statement: cst.BaseStatement, loop: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The ``print`` statements of the step at its top level or in its ``with`` blocks (the
    ones that run once per pass), and the values it appends to lists made before the loop
    (:func:`_is_record`)."""
    if _is_print(program, facts, statement) or _is_record(program, facts, statement, loop):
        return [statement]  # type: ignore[list-item]
    if isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock):
        return [p for s in statement.body.body for p in _prints(program, facts, s, loop)]
    return []


def _parts(statement: cst.BaseStatement, moved: set[int]) -> list[cst.CSTNode]:
    """What of ``statement`` runs in the step: itself, or for a ``with`` block holding moved
    statements, its items and the rest of its body."""
    if id(statement) in moved:
        return []
    if isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock) and _holds(statement, moved):
        parts: list[cst.CSTNode] = [item.item for item in statement.items]
        for inner in statement.body.body:
            parts.extend(_parts(inner, moved))
        return parts
    return [statement]


def _holds(statement: cst.CSTNode, moved: set[int]) -> bool:
    return any(id(n) in moved for n in _nodes(statement, cst.SimpleStatementLine))
