"""Code generation, in one place: statement-level edits of a tree (wrap a run of statements
in a ``with`` block, insert or move statements), the expressions rules write (a batch scaled by
the replica count, a loss with ``reduction="none"``), fresh names, and what generated code
needs to know about the script (how it spells TensorFlow and Keras, its loss per example).

Edits are planned against the original tree (blocks are named by their node) and applied in
one pass, innermost blocks first.

libcst keeps comments attached to the statements they precede (``leading_lines``) and the
indentation of continuation lines relative to the block, so a moved statement keeps its
comments and its layout.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Collection, Callable, Mapping, Sequence

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.strategies import may_be_none
from autofix.analysis.program import Program
from autofix.analysis.syntax import names_in
from autofix.tf.symbols import Kind

Block = cst.Module | cst.IndentedBlock

Statements = list[cst.BaseStatement]
BodyEdit = Callable[[Statements], Statements]


NodeEdit = Callable[[cst.CSTNode], cst.CSTNode]
# Statements put before the statement at an index of a block's body as it was read.
Insert = Callable[[Statements, int], Statements]


class BlockEdits:
    """Edits planned against one tree: statement lists (by block) and single nodes."""

    def __init__(self) -> None:
        self._edits: dict[int, list[BodyEdit]] = defaultdict(list)
        self._nodes: dict[int, list[NodeEdit]] = defaultdict(list)
        self._inserts: dict[int, list[tuple[int, Insert]]] = defaultdict(list)
        self._keep: list[cst.CSTNode] = []

    def __bool__(self) -> bool:
        return bool(self._edits) or bool(self._nodes) or bool(self._inserts)

    def insert(self, block: Block, index: int, edit: Insert) -> None:
        """Queue ``edit``, which puts statements before ``block.body[index]`` (an index of the
        body as it was read): it gets the body and where that statement is in it when it
        runs. Inserts run before the block's other edits, the last statement's first, so one
        never moves where another goes (two loops of one block each get their dataset
        distributed before them); two before one statement keep the order they were queued in."""
        self._keep.append(block)
        self._inserts[id(block)].append((index, edit))

    def add(self, block: Block, edit: BodyEdit) -> None:
        """Queue ``edit`` for the body of ``block``; edits of one block run in the order added."""
        self._keep.append(block)  # ids stay valid while the plan lives
        self._edits[id(block)].append(edit)

    def replace(self, node: cst.CSTNode, edit: NodeEdit) -> None:
        """Queue ``edit`` for ``node``: it gets the node as rewritten so far and returns its
        replacement (``node``'s own children are edited first)."""
        self._keep.append(node)
        self._nodes[id(node)].append(edit)

    def extend(self, other: "BlockEdits") -> None:
        """Queue every edit of ``other`` after those already queued."""
        self._keep.extend(other._keep)
        for key, edits in other._edits.items():
            self._edits[key].extend(edits)
        for key, edits in other._nodes.items():
            self._nodes[key].extend(edits)
        for key, inserts in other._inserts.items():
            self._inserts[key].extend(inserts)

    def apply(self, module: cst.Module, parents: Mapping[cst.CSTNode, cst.CSTNode] | None = None) -> cst.Module:
        """The module with every edit made. With ``parents`` (the tree's parent of each node),
        only the paths from the module down to the edited nodes are walked and rebuilt; the
        rest of the tree is shared, untouched, with the original."""
        return module.visit(_Apply(self._edits, self._nodes, self._paths(module, parents), self._inserts))

    def _paths(self, module: cst.Module, parents: Mapping[cst.CSTNode, cst.CSTNode] | None) -> set[int] | None:
        """Ids of the edited nodes and of all their ancestors; None (walk everything) when a
        node's ancestors do not lead up to ``module``."""
        if parents is None:
            return None
        on_path: set[int] = set()
        for node in self._keep:
            current: cst.CSTNode | None = node
            while current is not None and id(current) not in on_path:
                on_path.add(id(current))
                if current is module:
                    break
                current = parents.get(current)
                if current is None:
                    return None
        return on_path


class _Apply(cst.CSTTransformer):
    def __init__(
        self,
        edits: dict[int, list[BodyEdit]],
        nodes: dict[int, list[NodeEdit]],
        paths: set[int] | None = None,
        inserts: dict[int, list[tuple[int, Insert]]] | None = None,
    ) -> None:
        self.edits = edits
        self.nodes = nodes
        self.paths = paths
        self.inserts = inserts or {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Outside the paths to the edited nodes nothing changes: libcst then keeps the node
        # as it is instead of rebuilding it.
        return self.paths is None or id(node) in self.paths

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        for edit in self.nodes.get(id(original_node), ()):
            updated = edit(updated)
        return updated

    def _edit(self, original: Block, updated: Block) -> Block:
        edits = self.edits.get(id(original))
        inserts = self.inserts.get(id(original))
        if not edits and not inserts:
            return updated
        body = list(updated.body)
        # The last statement's first (and, before one statement, the last queued first): what
        # goes in never moves the statements the other inserts go before.
        order = sorted(range(len(inserts or ())), key=lambda i: (inserts[i][0], i), reverse=True)  # type: ignore[index]
        for i in order:
            index, insert = inserts[i]  # type: ignore[index]
            body = insert(body, index)
        for edit in edits or ():
            body = edit(body)
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._edit(original_node, updated_node)  # type: ignore[return-value]

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._edit(original_node, updated_node)  # type: ignore[return-value]


@dataclass(frozen=True)
class ScopeSpan:
    """Statements ``first..last`` (inclusive) of a block, to go into one ``with`` block.

    ``hosts`` are indexes inside the span of existing ``with <strategy>.scope():`` statements:
    their bodies are merged in, and the first one's header is kept.
    """

    first: int
    last: int
    hosts: tuple[int, ...] = ()


def strategy_expression(strategy: str) -> cst.BaseExpression:
    """``strategy`` or ``self.strategy`` (a strategy held in an attribute), as an expression;
    any other spelling (``(strategy or tf.distribute.get_strategy())``) is parsed."""
    if not all(part.isidentifier() for part in strategy.split(".")):
        return cst.parse_expression(strategy)
    first, *rest = strategy.split(".")
    expr: cst.BaseExpression = cst.Name(first)
    for part in rest:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def on_both_paths(program: Program, strategy: str, at: cst.CSTNode | None = None, placeholders: bool = True) -> str | None:
    """How generated code spells the strategy ``strategy`` (``strategy``, ``self.strategy``):
    as it is, or, where the file shows it may be None (a trainer whose single-device path passes
    no strategy: ``facts.strategies.may_be_none``), ``(strategy or tf.distribute.get_strategy())``,
    which is the strategy when there is one and otherwise the strategy in effect (outside every
    scope the default one: its ``scope()`` changes nothing, its ``num_replicas_in_sync`` is 1,
    its ``experimental_distribute_dataset`` hands the dataset back, its ``run`` calls the
    function; measured, docs/tf-distribute-facts.md). None where the file does not
    import ``tensorflow`` by that name (a fix must then be refused). ``at``: where the code
    goes (a plain name is looked up in the function around it); ``placeholders``: see
    ``may_be_none``."""
    if may_be_none(program, strategy, at, placeholders) is None:
        return strategy
    tf = module_alias(program, "tensorflow")
    return f"({strategy} or {tf}.distribute.get_strategy())" if tf is not None else None


def scope_call(strategy: str) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=strategy_expression(strategy), attr=cst.Name("scope")))


def wrap_spans(spans: Sequence[ScopeSpan], strategy: str) -> BodyEdit:
    """An edit that puts each span of a body into a ``with <strategy>.scope():`` block."""

    def edit(body: Statements) -> Statements:
        result = list(body)
        for span in sorted(spans, key=lambda s: s.first, reverse=True):
            result[span.first : span.last + 1] = [_wrap(result, span, strategy)]
        return result

    return edit


def _wrap(body: Statements, span: ScopeSpan, strategy: str) -> cst.With:
    statements = body[span.first : span.last + 1]
    inner: Statements = []
    host: cst.With | None = None
    # Blank lines and comments that closed a host's body: they stay where they were, before
    # what now follows them in the merged block.
    footer: Sequence[cst.EmptyLine] = ()
    for offset, statement in enumerate(statements):
        index = span.first + offset
        if index in span.hosts:
            assert isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock)
            children = list(statement.body.body)
            if host is None:
                host = statement
                if inner and children:
                    # Comments and blank lines above the old ``with`` now sit inside it.
                    children[0] = _prepend_lines(children[0], _unindented(statement.leading_lines))
            elif children:
                children[0] = _prepend_lines(children[0], _unindented(statement.leading_lines))
            if children:
                children[0] = _prepend_lines(children[0], footer)
                footer = ()
            inner.extend(children)
            footer = (*footer, *statement.body.footer)
        else:
            # Moved in from outside: its blank lines must not take the block's indentation.
            inner.append(_prepend_lines(_blank_lines_unindented(statement), footer))
            footer = ()
    leading = statements[0].leading_lines
    if host is None or statements[0] is not host:
        inner[0] = inner[0].with_changes(leading_lines=())
    if host is None:
        return cst.With(
            items=[cst.WithItem(scope_call(strategy))],
            body=cst.IndentedBlock(body=inner),
            leading_lines=leading,
        )
    return host.with_changes(body=host.body.with_changes(body=inner, footer=footer), leading_lines=leading)


def reordered(body: Statements, order: Sequence[int], up: Collection[int] = (), down: Collection[int] = ()) -> list[cst.BaseStatement]:
    """``body`` in the order ``order`` gives (``[body[i] for i in order]``), keeping the blank
    lines that separate statements where they were: a statement that moves takes along only its
    comments (and what follows them), and leaves its blank lines to the statement after it (if
    that one has none). A statement moved up (``up``: the strategy, above what needs it) lands
    in the place of the statement it goes before, blank lines included; one moved down (an
    optimizer, to just before the ``compile`` that uses it) goes right before it."""
    moved = set(up) | set(down)
    leading = {i: list(s.leading_lines) for i, s in enumerate(body)}
    for i in sorted(moved):
        blank, own = _split_blank(leading[i])
        leading[i] = own
        after = next((k for k in range(i + 1, len(body)) if k not in moved), None)
        if after is not None and blank and not _split_blank(leading[after])[0]:
            leading[after] = [*blank, *leading[after]]
    for position, i in enumerate(order):
        if i in moved and i in up and position + 1 < len(order):
            following = order[position + 1]
            blank, own = _split_blank(leading[following])
            leading[i] = [*blank, *leading[i]]
            leading[following] = own
    return [body[i].with_changes(leading_lines=leading[i]) if leading[i] != list(body[i].leading_lines) else body[i] for i in order]


def _split_blank(lines: Sequence[cst.EmptyLine]) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """Leading lines as (the blank lines before the first comment, the rest)."""
    count = 0
    for line in lines:
        if line.comment is not None:
            break
        count += 1
    if count == len(lines):
        return list(lines), []
    return list(lines[:count]), list(lines[count:])


def _blank_lines_unindented(statement: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines stay blank when their statement moves into a block (at module level libcst
    marks them as indented, which would leave trailing spaces once they are inside one)."""
    return statement.with_changes(leading_lines=_unindented(statement.leading_lines))


def _unindented(lines: Sequence[cst.EmptyLine]) -> Sequence[cst.EmptyLine]:
    if not any(line.indent and line.comment is None and not line.whitespace.value for line in lines):
        return lines
    return [line.with_changes(indent=False) if line.comment is None and not line.whitespace.value else line for line in lines]


def _prepend_lines(statement: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    if not lines:
        return statement
    return statement.with_changes(leading_lines=[*lines, *statement.leading_lines])


# --- expressions ---------------------------------------------------------------------------


def scaled(node: cst.BaseExpression, strategy: str) -> cst.BinaryOperation:
    """``node * strategy.num_replicas_in_sync`` (parenthesised where precedence needs it)."""
    left = node
    if not isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript)) and not (
        isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Multiply, cst.Power))
    ):
        left = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if not node.lpar else node
    replicas = cst.Attribute(value=strategy_expression(strategy), attr=cst.Name("num_replicas_in_sync"))
    return cst.BinaryOperation(left=left, operator=cst.Multiply(), right=replicas)


def add_keyword(call: cst.Call, keyword: str, default: int, strategy: str) -> cst.Call:
    return add_argument(call, keyword, scaled(cst.Integer(str(default)), strategy))


def add_argument(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``keyword=value`` last, laid out as its other arguments are."""
    new = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if last.comma is not cst.MaybeSentinel.DEFAULT and isinstance(last.comma, cst.Comma):
        # A trailing comma (often one argument per line): the new argument goes on its own
        # line like the others, keeping the trailing comma.
        comma = last.comma
        previous = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
        between = previous.whitespace_after if previous is not None else cst.SimpleWhitespace(" ")
        args[-1] = last.with_changes(comma=comma.with_changes(whitespace_after=between))
        args.append(new.with_changes(comma=comma))
    else:
        # What follows the last argument (a space, or the line break before a closing
        # parenthesis on a line of its own) follows the new one; on several lines, the new
        # argument goes on a line of its own, indented as the others.
        between: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ")
        if _breaks(last.whitespace_after_arg):
            earlier = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else call.whitespace_before_args
            if _breaks(earlier):
                between = earlier
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=between), whitespace_after_arg=cst.SimpleWhitespace(""))
        args.append(new.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def _breaks(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    """Whether ``whitespace`` ends its line (the next argument, or the parenthesis, on a new one)."""
    return isinstance(whitespace, cst.ParenthesizedWhitespace)


def with_reduction_none(node: cst.Call) -> cst.Call:
    """The loss construction ``node`` with ``reduction="none"`` (one loss per example)."""
    args = [a for a in node.args if not (a.keyword is not None and a.keyword.value == "reduction")]
    new = cst.Arg(
        value=cst.SimpleString('"none"'),
        keyword=cst.Name("reduction"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            args.append(new.with_changes(comma=last.comma))
            args[-2] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(new)
    else:
        args = [new]
    return node.with_changes(args=args)


# --- what generated code needs to know about the script --------------------------------------

# Keras loss names accepted by compile(loss="..."), and the class computing each.
LOSS_CLASSES = {
    "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
    "categorical_crossentropy": "CategoricalCrossentropy",
    "binary_crossentropy": "BinaryCrossentropy",
    "binary_focal_crossentropy": "BinaryFocalCrossentropy",
    "mse": "MeanSquaredError",
    "mean_squared_error": "MeanSquaredError",
    "mae": "MeanAbsoluteError",
    "mean_absolute_error": "MeanAbsoluteError",
    "mape": "MeanAbsolutePercentageError",
    "mean_absolute_percentage_error": "MeanAbsolutePercentageError",
    "msle": "MeanSquaredLogarithmicError",
    "mean_squared_logarithmic_error": "MeanSquaredLogarithmicError",
    "huber": "Huber",
    "huber_loss": "Huber",
    "log_cosh": "LogCosh",
    "logcosh": "LogCosh",
    "kld": "KLDivergence",
    "kl_divergence": "KLDivergence",
    "kullback_leibler_divergence": "KLDivergence",
    "poisson": "Poisson",
    "hinge": "Hinge",
    "squared_hinge": "SquaredHinge",
    "categorical_hinge": "CategoricalHinge",
    "cosine_similarity": "CosineSimilarity",
}


class NotFound(Exception):
    """What generated code would need cannot be found; the message says what, for the user."""


def module_alias(program: Program, module: str) -> str | None:
    """The name the script imports ``module`` under (``import tensorflow as tf`` -> ``tf``)."""
    for statement in program.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if program.module.code_for_node(alias.name) == module:
                        return alias.asname.name.value if alias.asname else module  # type: ignore[union-attr]
    return None


def keras_spelling(program: Program, near: list[cst.CSTNode]) -> str:
    """How the script names the Keras module that built its model (``keras``, ``tf.keras``,
    ``tf_keras``): generated losses must come from that same Keras."""
    facts = Facts.of(program)
    for node in near:
        for expr in _attribute_chains(node):
            names = facts.names_of(expr)
            if not any(n.startswith("keras.") for n in names):
                continue
            code = program.module.code_for_node(expr)
            for root in ("tf.keras", "tensorflow.keras", "tf_keras", "keras"):
                if code.startswith(root + "."):
                    return root
            parts = code.split(".")
            if len(parts) > 2 and parts[1] == "keras":
                return ".".join(parts[:2])
    tf = module_alias(program, "tensorflow")
    if tf is not None:
        return f"{tf}.keras"
    raise NotFound("could not tell which Keras the model comes from")


def _attribute_chains(node: cst.CSTNode) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class Visitor(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            found.append(attribute)
            return False

    node.visit(Visitor())
    return found


def per_example_loss(program: Program, loss: cst.BaseExpression | None, keras: str) -> tuple[str | None, str]:
    """``(making, calling)``: code that makes a loss object computing one loss per example
    (``reduction="none"``), or None when none is needed, and the callable to apply to
    ``(labels, predictions)``."""
    facts = Facts.of(program)
    if loss is None:
        raise NotFound("the model's compile() has no loss")
    if isinstance(loss, cst.SimpleString):
        name = loss.evaluated_value
        cls = LOSS_CLASSES.get(str(name).lower())
        if cls is None:
            raise NotFound(f"the loss {loss.value} has no Keras loss class autofix knows")
        return f'{keras}.losses.{cls}(reduction="none")', ""
    if isinstance(loss, cst.Name):
        bindings = facts.bindings(loss) or []
        values = [facts.assigned_value(b) for b in bindings]
        if len(values) == 1 and isinstance(values[0], cst.Call):
            return per_example_loss(program, values[0], keras)
    if isinstance(loss, cst.Call) and facts.call_kind(loss) is Kind.LOSS:
        return program.module.code_for_node(with_reduction_none(loss)), ""
    if isinstance(loss, (cst.Name, cst.Attribute)):
        names = facts.names_of(loss)
        if any(n.startswith("keras.losses.") and n.rpartition(".")[2][:1].islower() for n in names):
            # A loss function (keras.losses.mse): it already returns one loss per example.
            return None, program.module.code_for_node(loss)
    raise NotFound("the compiled loss is not a Keras loss that can be rebuilt with reduction='none'")


def visible_at(program: Program, expr: cst.BaseExpression, site: cst.CSTNode) -> bool:
    """Whether every name ``expr`` reads means the same at ``site`` (so it can be copied there)."""
    scope = program.scope(site)
    if scope is None:
        return False
    for name in names_in(expr):
        access = program.access(name)
        if access is None:
            return False
        here = {a for a in scope[name.value]} if name.value in scope else set()
        if not set(access.referents) <= here and not set(access.referents) & here:
            return False
        if not here:
            return False
    return True


def fresh_name(taken: set[str], base: str) -> str:
    """``base``, or ``base_2``, ``base_3``... the first that is not in ``taken`` (which it joins)."""
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


def fresh_names(program: Program, wanted: list[str]) -> dict[str, str]:
    """Names for generated code that no name of the module already uses."""
    taken = Facts.of(program).names()
    return {name: fresh_name(taken, name) for name in wanted}
