"""Where a strategy exists: the blocks of a module that run after a strategy is created, and
whether fixing there would have to choose between two strategy objects.

A :class:`Context` is a block plus the strategy that exists in it: after the statement that
creates it (``index``), or from the block's start (a strategy parameter, or a strategy of an
enclosing scope visible in a function). Every rule that rewrites code "under the strategy"
starts from these.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.keras_objects import COMPILE
from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.strategies import Strategy
from autofix.analysis.program import Block, Program
from autofix.analysis.syntax import nodes_in, root_name, target_names
from autofix.tf.symbols import Kind


@dataclass(eq=False)
class Context:
    block: Block
    strategy: Strategy
    # The statement of ``block`` that creates the strategy; None when it exists from the start.
    index: int | None = None
    # Why a fix here would have to choose between strategy objects (report only), or None.
    conflict: str | None = None
    # The strategy classes in effect after ``index`` (the last of several creations in the
    # block wins); None: those of the strategy.
    classes: set[str] | None = None

    @property
    def strategy_classes(self) -> set[str]:
        return self.classes if self.classes is not None else self.strategy.classes


def index_of(body, statement) -> int | None:
    for i, s in enumerate(body):
        if s is statement:
            return i
    return None


def two_objects(what: str) -> str:
    return (
        f"{what}; Keras objects made under one strategy object cannot be used under another "
        '("Mixing different tf.distribute.Strategy objects"), so which scope they belong in '
        "is for you to decide"
    )


class Contexts(Derived):
    """The strategy contexts of one module (built once per program: ``Contexts.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts: Facts = Facts.of(program)

    # --- the contexts ------------------------------------------------------------------------

    @cached_property
    def created(self) -> list[Context]:
        """One context per strategy: where it is created (or the function it is a parameter of)."""
        contexts: list[Context] = []
        for strategy in self.facts.strategies:
            if strategy.is_parameter:
                function = self.program.enclosing_function(strategy.bindings[0])
                if function is not None and isinstance(function.body, cst.IndentedBlock):
                    contexts.append(Context(function.body, strategy))
                continue
            located = self.creation(strategy)
            if located is None:
                continue
            block, indexes = located
            context = Context(block, strategy, max(indexes))
            last = [b for b, i in zip(strategy.creations, indexes) if i == max(indexes)]
            if len(last) == 1 and self.program.statement_of(last[0]) is block.body[max(indexes)]:
                context.classes = self.facts.strategy_classes(self.facts.assigned_value(last[0]))
            if len(set(indexes)) > 1:
                lines = ", ".join(str(self.program.line(block.body[i])) for i in sorted(set(indexes)))
                context.conflict = two_objects(f"{strategy.name!r} is created more than once (lines {lines})")
            else:
                context.conflict = self._helper_called_twice(strategy) or self._reentered(context)
            contexts.append(context)
        own = {id(c.block) for c in contexts}
        for context in self._attribute_contexts():
            # ``self.strategy = strategy`` in a method that has ``strategy``: one object, whose
            # context there is the name's.
            if id(context.block) not in own or not self._aliases(context):
                contexts.append(context)
        by_block: dict[int, list[Context]] = {}
        for context in contexts:
            by_block.setdefault(id(context.block), []).append(context)
        for group in by_block.values():
            if len({id(c.strategy) for c in group}) > 1:
                names = " and ".join(sorted({c.strategy.name for c in group}))
                for context in group:
                    context.conflict = two_objects(f"this block makes two strategies ({names})")
        return contexts

    def _attribute_contexts(self) -> list[Context]:
        """A strategy held in an attribute (``self.strategy``) exists in every method of its
        class (and the classes deriving from it or it derives from) from the method's start;
        in the method that sets it, from the statement that does."""
        found: list[Context] = []
        values = self.facts.values
        for cls, attribute, classes in self.facts.strategy_attributes():
            targets = values.attribute_targets(cls).get(attribute, [])
            for klass in values.family(cls):
                body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
                for method in body:
                    if not isinstance(method, cst.FunctionDef) or not isinstance(method.body, cst.IndentedBlock):
                        continue
                    params = method.params.params
                    if not params or not values.is_self(params[0]):
                        continue
                    name = f"{params[0].name.value}.{attribute}"
                    mine = [t for t in targets if values.enclosing_function(t) is method]
                    strategy = Strategy(name, mine, set(classes), creations=mine, attribute=True)
                    if not mine:
                        if self._used_before_set(method, cls, attribute):
                            continue
                        found.append(Context(method.body, strategy))
                        continue
                    located = self.creation(strategy)
                    if located is not None:
                        block, indexes = located
                        found.append(Context(block, strategy, max(indexes)))
        return found

    def _aliases(self, context: Context) -> bool:
        """Whether the attribute strategy of ``context`` is set, in its block, only from names
        of other strategies (``self.strategy = strategy``)."""
        for target in context.strategy.creations:
            value = self.facts.assigned_value(target) if not isinstance(self.program.parent(target), cst.AssignTarget) else self.program.parent(self.program.parent(target)).value  # type: ignore[union-attr]
            if not (isinstance(value, cst.Name) and self.facts.strategy_for_name(value) is not None):
                return False
        return True

    def _used_before_set(self, method: cst.FunctionDef, cls: cst.ClassDef, attribute: str) -> bool:
        """Whether a method of the class that sets ``self.<attribute>`` calls ``method`` before
        it does (``__init__`` building the model first): the attribute may not exist yet."""
        values = self.facts.values
        calls, _passed_on = values.calls_of(method)
        for call, _offset in calls:
            caller = values.enclosing_function(call)
            if caller is None or values.class_of(caller) not in values.family(cls):
                continue
            sets = [t for t in values.attribute_targets(values.class_of(caller)).get(attribute, ()) if values.enclosing_function(t) is caller]
            if not sets or any(self.program.line(t) > self.program.line(call) for t in sets):
                return True
        return False

    def creation(self, strategy: Strategy) -> tuple[Block, list[int]] | None:
        """The innermost block holding every binding that makes the strategy, and the indexes
        of the statements that make it (one, unless it is made twice in that block). A
        strategy a local function makes for a name of the module (``global strategy``) is made
        where that function is called."""
        statements = [self.program.statement_of(b) for b in strategy.creations]
        if not statements or any(s is None for s in statements):
            return None
        statements = self._where_made(strategy, statements)  # type: ignore[arg-type]
        if not statements:
            return None
        for ancestor in self.program.ancestors(statements[0]):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if not isinstance(ancestor, (cst.Module, cst.IndentedBlock)):
                continue
            indexes = [index_of(ancestor.body, self.program.top_statement_in(s, ancestor)) for s in statements]
            if all(i is not None for i in indexes):
                return ancestor, indexes  # type: ignore[return-value]
        return None

    def _where_made(self, strategy: Strategy, statements: list[cst.CSTNode]) -> list[cst.CSTNode]:
        """The statements of the scope that owns the strategy's name that make it: the
        statements themselves, or, for those in a function the name does not belong to (a
        ``global`` set by ``set_tpu()``), the statements that call that function."""
        if strategy.attribute or strategy.is_parameter:
            return statements
        binding = self.program.index.bindings.get(strategy.creations[0])
        owner = binding.scope.node if binding is not None else None
        found: list[cst.CSTNode] = []
        pending = list(statements)
        seen: set[int] = set()
        while pending:
            statement = pending.pop()
            if id(statement) in seen:
                continue
            seen.add(id(statement))
            function = self.facts.values.enclosing_function(statement)
            if function is None or function is owner or owner is None or any(a is function for a in self.program.ancestors(owner)):
                found.append(statement)
                continue
            calls, passed_on = self.facts.values.calls_of(function)
            if passed_on or not calls:
                return []
            pending.extend(self.program.statement_of(call) for call, _offset in calls)
        return [s for s in statements if s in found] + [s for s in found if s not in statements]

    def visible_strategy(self, function: cst.FunctionDef) -> Context | None:
        """The context of a strategy of an enclosing scope that exists whenever ``function``
        runs (it is not called before the strategy is created), if there is exactly one."""
        body = function.body
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            return None
        scope = self.program.scope(body.body[0])
        candidates = []
        for context in self.created:
            strategy = context.strategy
            if strategy.is_parameter or scope is None or strategy.name not in scope:
                continue
            if {a.node for a in scope[strategy.name]} != set(strategy.bindings):
                continue
            if self._referenced_before(function, context):
                continue
            candidates.append(context)
        return candidates[0] if len(candidates) == 1 else None

    def function_context(self, function: cst.FunctionDef) -> Context | None:
        """A context covering the whole body of ``function``, through a strategy it can see."""
        found = self.visible_strategy(function)
        if found is None or not isinstance(function.body, cst.IndentedBlock):
            return None
        return Context(function.body, found.strategy, None, found.conflict)

    def at(self, node: cst.CSTNode, extra: list[Context] = ()) -> tuple[Context, int] | None:
        """The innermost context whose block contains ``node``, with the index of the
        statement of that block that holds it (before ``context.index`` means: before the
        strategy exists)."""
        by_block = {id(c.block): c for c in [*self.created, *extra]}
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return None
            context = by_block.get(id(ancestor))
            if context is not None:
                top = self.program.top_statement_in(node, ancestor)
                index = index_of(ancestor.body, top)
                if index is not None:
                    return context, index
        return None

    def executes_after(self, node: cst.CSTNode, context: Context, _seen: set | None = None) -> bool:
        """Whether ``node`` only ever runs after the context's strategy exists: it is after the
        creating statement in that block, or in a function that is only called (or passed
        on) from such places."""
        seen = _seen if _seen is not None else set()
        if id(node) in seen:
            return True
        seen.add(id(node))
        previous = node
        for ancestor in self.program.ancestors(node):
            if ancestor is context.block:
                index = index_of(ancestor.body, previous)
                return index is not None and (context.index is None or index > context.index)
            if isinstance(ancestor, cst.FunctionDef) and previous is ancestor.body:
                references = self.facts.references(ancestor)
                # A function runs where it is called; one never called here runs on import
                # by another module, after this module's top level.
                return all(self.executes_after(ref, context, seen) for ref in references) and (
                    bool(references) or isinstance(context.block, cst.Module)
                )
            if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return False
            previous = ancestor
        return False

    # --- two strategy objects ------------------------------------------------------------------

    def _helper_called_twice(self, strategy: Strategy) -> str | None:
        """A helper that makes a new strategy on every call, called more than once."""
        for binding in strategy.creations:
            value = self.facts.assigned_value(binding)
            if not isinstance(value, cst.Call):
                continue
            helper = self.facts.local_definition(value.func)
            if isinstance(helper, cst.FunctionDef) and self.runs_more_than_once(helper):
                return two_objects(f"{helper.name.value}() makes a new strategy on every call and is called more than once")
        return None

    def _reentered(self, context: Context) -> str | None:
        """The creating function runs more than once and compiles or loads into a model that
        it did not build itself: that model meets a second strategy object."""
        function = self.function_of(context.block)
        if function is None or not self.runs_more_than_once(function):
            return None
        for call in self.facts.functions[function].calls:
            if self.facts.call_kind(call) not in (COMPILE, Kind.LOAD):
                continue
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if isinstance(receiver, cst.Name):
                bindings = self.facts.bindings(receiver) or []
                if not bindings or any(
                    self.program.enclosing_function(b) is not function or isinstance(b, cst.Param) for b in bindings
                ):
                    return two_objects(
                        f"{function.name.value}() creates a strategy each time it runs and is called more than once"
                    )
        return None

    def runs_more_than_once(self, function: cst.FunctionDef) -> bool:
        references = self.facts.references(function)
        if len(references) > 1:
            return True
        return any(isinstance(a, (cst.For, cst.While)) for ref in references for a in self._until_function(ref))

    def _until_function(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return
            yield ancestor

    def _referenced_before(self, function: cst.FunctionDef, context: Context) -> bool:
        """Whether the function may run before the strategy is created (called earlier in the
        block that creates it)."""
        for ref in self.facts.references(function):
            top = self.program.top_statement_in(ref, context.block)
            if top is None:
                continue
            index = index_of(context.block.body, top)
            if (
                index is not None
                and context.index is not None
                and index <= context.index
                and not isinstance(top, (cst.FunctionDef, cst.ClassDef))
            ):
                return True
        return False

    # --- small helpers -------------------------------------------------------------------------

    def function_of(self, block: Block) -> cst.FunctionDef | None:
        if isinstance(block, cst.Module):
            return None
        return self.program.enclosing_function(block)

    def skip_function(self, function: cst.FunctionDef) -> bool:
        """Methods, replica functions and functions always called under a scope are never
        places to add a scope."""
        info = self.facts.functions[function]
        return (
            info.is_method
            or self.facts.is_replica_function(function)
            or self.facts.always_called_under_scope(function)
        )



def unbound_on_a_path(program: Program, name: str, block: Block, after: int | None = None) -> cst.CSTNode | None:
    """Where a function's local ``name`` (or a module's global, for code at the module's level)
    is bound when some path from the start of the function (module) to ``block`` (past its
    statement ``after``, when given) binds it nowhere (``if multi_gpu: strategy =
    MirroredStrategy()`` before code after the ``if``): reading it in ``block`` could raise
    ``UnboundLocalError`` (``NameError``). None when every path binds it first, or when ``name``
    is not bound there (a parameter, a name of an enclosing function or of the module read by a
    function: not this question)."""
    function = program.enclosing_function(block) if not isinstance(block, cst.Module) else None
    scope: cst.CSTNode = function if function is not None else program.module
    if function is not None and any(
        p.name.value == name for p in (*function.params.params, *function.params.kwonly_params, *function.params.posonly_params)
    ):
        return None
    bindings = [n for n in _bound_names(function.body if function is not None else program.module) if n.value == name]
    if not bindings:
        return None
    if after is not None and any(_binds_on_every_path(s, name) for s in block.body[: after + 1]):
        return None
    # The chain of statements from the function's body down to ``block``.
    chain: list[cst.CSTNode] = []
    node: cst.CSTNode | None = block
    while node is not None and node is not scope:
        chain.append(node)
        node = program.parent(node)
    chain.reverse()
    for node in chain:
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            continue
        if isinstance(node, cst.BaseStatement):
            outer = program.block_of(node)
            position = index_of(outer.body, node) if outer is not None else None
            if outer is not None and position is not None and any(_binds_on_every_path(s, name) for s in outer.body[:position]):
                return None
            if isinstance(node, cst.For) and name in {n.value for n in target_names(node.target)}:
                return None
            if isinstance(node, cst.With) and any(
                item.asname is not None and name in {n.value for n in target_names(item.asname.name)} for item in node.items
            ):
                return None
    return bindings[0]


def _bound_names(node: cst.CSTNode) -> list[cst.Name]:
    """The names ``node`` binds by assignment (its nested functions and classes left out; an
    iterative walk, so deeply nested expressions cost no recursion)."""
    found: list[cst.Name] = []
    kinds = (cst.AssignTarget, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr, cst.FunctionDef, cst.ClassDef)
    for item in nodes_in(node, kinds, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if isinstance(item, (cst.FunctionDef, cst.ClassDef)):
            if item is not node:
                found.append(item.name)
        elif isinstance(item, cst.AssignTarget):
            found.extend(target_names(item.target))
        elif isinstance(item, cst.AnnAssign):
            if item.value is not None:
                found.extend(target_names(item.target))
        elif isinstance(item, (cst.For, cst.NamedExpr)):
            found.extend(target_names(item.target))
        elif isinstance(item, cst.AsName):
            found.extend(target_names(item.name))
    return found


def _binds_on_every_path(statement: cst.BaseStatement, name: str) -> bool:
    """Whether running ``statement`` to its end binds ``name`` whichever way it goes (a path
    that leaves by ``return`` or ``raise`` does not reach what follows, and counts as binding)."""
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        for small in statement.body:
            if isinstance(small, (cst.Return, cst.Raise)):
                return True
            if isinstance(small, cst.Assign) and any(name in {n.value for n in target_names(t.target)} for t in small.targets):
                return True
            if isinstance(small, cst.AnnAssign) and small.value is not None and name in {n.value for n in target_names(small.target)}:
                return True
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(bound, cst.Name) and bound.value == name:
                        return True
                    if isinstance(bound, cst.Attribute) and (root := root_name(bound)) is not None and root.value == name:
                        return True
        return False
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return statement.name.value == name
    if isinstance(statement, cst.If):
        if statement.orelse is None:
            return False
        other = statement.orelse
        orelse_binds = _binds_on_every_path(other, name) if isinstance(other, cst.If) else _block_binds(other.body, name)
        return _block_binds(statement.body, name) and orelse_binds
    if isinstance(statement, cst.With):
        if any(item.asname is not None and name in {n.value for n in target_names(item.asname.name)} for item in statement.items):
            return True
        return _block_binds(statement.body, name)
    if isinstance(statement, cst.Try):
        return _block_binds(statement.body, name) and all(_block_binds(h.body, name) for h in statement.handlers)
    return False


def _block_binds(block: cst.BaseSuite, name: str) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    return any(_binds_on_every_path(s, name) for s in body)  # type: ignore[arg-type]
