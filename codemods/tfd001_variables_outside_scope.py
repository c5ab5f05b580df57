"""TFD001 variables-outside-scope: Keras objects created outside ``strategy.scope()``.

Models, layers, optimizers, metrics and losses, loaded models and weights, and ``compile`` must
run inside ``with strategy.scope():`` so that their variables are mirrored. Outside it, ``fit``
silently trains on one replica (or fails with "Mixing different tf.distribute.Strategy
objects"). The fix moves those statements into one ``with strategy.scope():`` block right where
they are, merged with an adjacent one; ``fit``, ``evaluate``, ``predict`` and the data pipeline
stay where they are.

Not fixed (reported, or left alone):
- code already inside a scope, or in a function whose every caller is inside one;
- a model that is only inspected (``summary()``, ``plot_model``) and never trained;
- a function that builds a model but is called both inside and outside a scope;
- more than one strategy in the same block;
- Keras objects created before the strategy exists (for now: reported only);
- attributes (``self.model = ...``) and methods of classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.blocks import BlockEdits, Span, wrap_spans
from autofix.rule import Example, Outcome, Report, Rule
from autofix.tf.facts import COMPILE, TRAIN, Facts, Strategy
from autofix.tf.program import Block, Program
from autofix.tf.symbols import Kind

_WHAT = {
    Kind.MODEL: "model built",
    Kind.LOAD: "model or weights loaded",
    Kind.OPTIMIZER: "optimizer created",
    COMPILE: "compile() called",
    Kind.METRIC: "metric created",
    Kind.LOSS: "loss object created",
    Kind.LAYER: "layer created",
}
_PRIORITY = list(_WHAT)
_WHY = "so its variables are not mirrored across replicas"

NEEDS, TRAINS, MIXED, NEUTRAL, SCOPE = "needs", "trains", "mixed", "neutral", "scope"


@dataclass
class _Statement:
    category: str
    # Calls in it that must run in the scope, with what they do.
    needing: list[tuple[cst.Call, object]] = field(default_factory=list)


class VariablesOutsideScope(Rule):
    CODE = "TFD001"
    NAME = "variables-outside-scope"
    DESCRIPTION = "Model, optimizer, metric or loss objects, load_model and compile outside strategy.scope()"
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                'model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
    )

    def run(self, program: Program) -> Outcome:
        facts = program.facts
        if not facts.strategies:
            return Outcome()
        planner = _Planner(program, facts)
        planner.plan()
        module = planner.edits.apply(program.module) if planner.edits else None
        return Outcome(planner.reports, module)


@dataclass
class _Context:
    block: Block
    start: int
    strategy: Strategy


class _Planner:
    def __init__(self, program: Program, facts: Facts) -> None:
        self.program = program
        self.facts = facts
        self.reports: list[Report] = []
        self.edits = BlockEdits()
        self._done: dict[int, str] = {}
        # Functions whose body gets its own scope: calls of them need no wrapping.
        self.internal: set[cst.FunctionDef] = set()

    # --- where the strategy applies ------------------------------------------------------------

    def plan(self) -> None:
        contexts = self._contexts()
        for context in contexts:
            function = self._function_of(context.block)
            if function is not None:
                self.internal.add(function)
        for context in contexts:
            self._process(context.block, context.start, context.strategy)

    def _contexts(self) -> list[_Context]:
        contexts: list[_Context] = []
        for strategy in self.facts.strategies:
            if strategy.is_parameter:
                function = self._enclosing_function(strategy.bindings[0])
                if function is not None and isinstance(function.body, cst.IndentedBlock):
                    contexts.append(_Context(function.body, 0, strategy))
                continue
            located = self._creation(strategy)
            if located is not None:
                block, index = located
                contexts.append(_Context(block, index + 1, strategy))
        # Functions that build and train, run where a strategy made earlier is visible.
        for function, effects in self.facts.effects.items():
            if not (effects.creates and effects.trains) or self._skip_function(function):
                continue
            if any(self._function_of(c.block) is function for c in contexts):
                continue
            strategy = self._visible_strategy(function, contexts)
            if strategy is not None and isinstance(function.body, cst.IndentedBlock):
                contexts.append(_Context(function.body, 0, strategy))
        return contexts

    def _enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def _function_of(self, block: Block) -> cst.FunctionDef | None:
        if isinstance(block, cst.Module):
            return None
        return self._enclosing_function(block)

    def _skip_function(self, function: cst.FunctionDef) -> bool:
        info = self.facts.functions[function]
        return (
            info.is_method
            or self.facts.is_replica_function(function)
            or self.facts.always_called_under_scope(function)
        )

    def _creation(self, strategy: Strategy) -> tuple[Block, int] | None:
        """The innermost block holding every binding of the strategy, and the index of the
        statement after which the strategy exists."""
        statements = [self.program.statement_of(b) for b in strategy.bindings]
        if any(s is None for s in statements):
            return None
        for ancestor in self.program.ancestors(statements[0]):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if not isinstance(ancestor, (cst.Module, cst.IndentedBlock)):
                continue
            indexes = [_index(ancestor.body, self.program.top_statement_in(s, ancestor)) for s in statements]
            if all(i is not None for i in indexes):
                return ancestor, max(indexes)  # type: ignore[type-var]
        return None

    def _visible_strategy(self, function: cst.FunctionDef, contexts: list[_Context]) -> Strategy | None:
        """A strategy of an enclosing scope that exists whenever ``function`` runs."""
        body = function.body
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            return None
        scope = self.program.scope(body.body[0])
        candidates = []
        for context in contexts:
            strategy = context.strategy
            if strategy.is_parameter or scope is None or strategy.name not in scope:
                continue
            visible = {a.node for a in scope[strategy.name]}
            if visible != set(strategy.bindings):
                continue
            if self._referenced_before(function, context):
                continue
            candidates.append(strategy)
        return candidates[0] if len(candidates) == 1 else None

    def _referenced_before(self, function: cst.FunctionDef, context: _Context) -> bool:
        """Whether the function may run before the strategy is created (called earlier in the
        block that creates it)."""
        for ref in self.facts.references(function):
            top = self.program.top_statement_in(ref, context.block)
            if top is None:
                continue
            index = _index(context.block.body, top)
            if index is not None and index < context.start and not isinstance(
                top, (cst.FunctionDef, cst.ClassDef)
            ):
                return True
        return False

    # --- what each statement does --------------------------------------------------------------

    def _classify(self, statement: cst.BaseStatement, strategy: Strategy) -> _Statement:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return _Statement(NEUTRAL)
        if self.facts.scope_with_strategy_name(statement) == strategy.name:
            return _Statement(SCOPE)
        needing: list[tuple[cst.Call, object]] = []
        trains = False
        for call in _calls_in(statement):
            kind = self.facts.call_kind(call)
            if kind == TRAIN:
                trains = True
                continue
            if isinstance(kind, cst.FunctionDef):
                effects = self.facts.effects.get(kind)
                if effects is None or self._skip_function(kind):
                    continue
                if effects.trains:
                    trains = True
                if not effects.creates or kind in self.internal:
                    continue
            elif not (isinstance(kind, Kind) or kind == COMPILE):
                continue
            if self.facts.under_scope(call) or self.facts.inspection_only(call):
                continue
            needing.append((call, kind))
        if needing and trains:
            return _Statement(MIXED, needing)
        if needing:
            return _Statement(NEEDS, needing)
        return _Statement(TRAINS if trains else NEUTRAL)

    # --- the plan ------------------------------------------------------------------------------

    def _process(self, block: Block, start: int, strategy: Strategy) -> None:
        done = self._done.get(id(block))
        if done is not None:
            return
        self._done[id(block)] = strategy.name
        body = list(block.body)
        info = [self._classify(s, strategy) for s in body]
        spans: list[Span] = []
        first = last = None
        for index in range(start, len(body)):
            category = info[index].category
            if category == MIXED and _sub_blocks(body[index]):
                for sub in _sub_blocks(body[index]):
                    self._process(sub, 0, strategy)
                category = TRAINS
            if category in (NEEDS, MIXED):
                self._report(info[index].needing)
                if first is None:
                    first = index
                last = index
            elif category in (TRAINS, SCOPE) and first is not None:
                spans.append(self._span(body, info, first, last, strategy))
                first = last = None
        if first is not None:
            spans.append(self._span(body, info, first, last, strategy))
        if spans:
            self.edits.add(block, wrap_spans(_merge(spans), strategy.name))

    def _span(self, body, info, first: int, last: int, strategy: Strategy) -> Span:
        hosts = []
        if first > 0 and info[first - 1].category == SCOPE:
            first -= 1
            hosts.append(first)
        if last + 1 < len(body) and info[last + 1].category == SCOPE:
            last += 1
            hosts.append(last)
        return Span(first, last, tuple(hosts))

    def _report(self, needing: list[tuple[cst.Call, object]]) -> None:
        by_statement: dict[int, list[tuple[cst.Call, object]]] = {}
        for call, kind in needing:
            statement = self.program.statement_of(call)
            by_statement.setdefault(id(statement), []).append((call, kind))
        for calls in by_statement.values():
            call, kind = min(calls, key=lambda ck: _rank(ck[1]))
            self.reports.append(Report(call, _message(call, kind)))


def _rank(kind: object) -> int:
    if isinstance(kind, cst.FunctionDef):
        return -1
    return _PRIORITY.index(kind) if kind in _PRIORITY else len(_PRIORITY)


def _message(call: cst.Call, kind: object) -> str:
    if isinstance(kind, cst.FunctionDef):
        return f"{kind.name.value}() builds Keras objects outside strategy.scope(), {_WHY}"
    return f"{_WHAT.get(kind, 'Keras object created')} outside strategy.scope(), {_WHY}"


def _merge(spans: list[Span]) -> list[Span]:
    spans = sorted(spans, key=lambda s: s.first)
    merged: list[Span] = []
    for span in spans:
        if merged and span.first <= merged[-1].last:
            prev = merged.pop()
            span = Span(prev.first, max(prev.last, span.last), tuple(sorted(set(prev.hosts) | set(span.hosts))))
        merged.append(span)
    return merged


def _index(body, statement) -> int | None:
    for i, s in enumerate(body):
        if s is statement:
            return i
    return None


def _sub_blocks(statement: cst.BaseStatement) -> list[cst.IndentedBlock]:
    """The indented bodies of a compound statement (if/else, for, while, try, with), or []
    when one of them is a one-line suite that cannot hold a ``with``."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) or not isinstance(statement, cst.BaseCompoundStatement):
        return []
    blocks: list = []

    def add(suite) -> bool:
        if suite is None:
            return True
        if isinstance(suite, cst.IndentedBlock):
            blocks.append(suite)
            return True
        return False

    ok = add(statement.body)
    orelse = getattr(statement, "orelse", None)
    while ok and isinstance(orelse, cst.If):
        ok = add(orelse.body)
        orelse = orelse.orelse
    if ok and orelse is not None:
        ok = add(orelse.body)
    for handler in getattr(statement, "handlers", ()):
        ok = ok and add(handler.body)
    final = getattr(statement, "finalbody", None)
    if ok and final is not None:
        ok = add(final.body)
    if isinstance(statement, cst.Match):
        for case in statement.cases:
            ok = ok and add(case.body)
    return blocks if ok else []


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _calls_in(statement: cst.BaseStatement) -> list[cst.Call]:
    visitor = _Calls()
    statement.visit(visitor)
    return visitor.calls
