"""Statement-level edits of a tree: wrap a run of statements in a ``with`` block, insert or move
statements. Edits are planned against the original tree (blocks are named by their node) and
applied in one pass, innermost blocks first.

libcst keeps comments attached to the statements they precede (``leading_lines``) and the
indentation of continuation lines relative to the block, so a moved statement keeps its
comments and its layout.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import libcst as cst

Block = cst.Module | cst.IndentedBlock

# The statement put between the cells of a notebook analysed as one program: no statement
# may be moved into the same block as one, so that every fix stays inside its cell.
CELL_MARKER = "__autofix_cell__"


def is_wall(statement: cst.CSTNode) -> bool:
    """Whether ``statement`` is a notebook cell boundary (``__autofix_cell__(3)``)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    expr = statement.body[0]
    return (
        isinstance(expr, cst.Expr)
        and isinstance(expr.value, cst.Call)
        and isinstance(expr.value.func, cst.Name)
        and expr.value.func.value == CELL_MARKER
    )
Statements = list[cst.BaseStatement]
BodyEdit = Callable[[Statements], Statements]


NodeEdit = Callable[[cst.CSTNode], cst.CSTNode]


class BlockEdits:
    """Edits planned against one tree: statement lists (by block) and single nodes."""

    def __init__(self) -> None:
        self._edits: dict[int, list[BodyEdit]] = defaultdict(list)
        self._nodes: dict[int, list[NodeEdit]] = defaultdict(list)
        self._keep: list[cst.CSTNode] = []

    def __bool__(self) -> bool:
        return bool(self._edits) or bool(self._nodes)

    def add(self, block: Block, edit: BodyEdit) -> None:
        """Queue ``edit`` for the body of ``block``; edits of one block run in the order added."""
        self._keep.append(block)  # ids stay valid while the plan lives
        self._edits[id(block)].append(edit)

    def replace(self, node: cst.CSTNode, edit: NodeEdit) -> None:
        """Queue ``edit`` for ``node``: it gets the node as rewritten so far and returns its
        replacement (``node``'s own children are edited first)."""
        self._keep.append(node)
        self._nodes[id(node)].append(edit)

    def apply(self, module: cst.Module) -> cst.Module:
        return module.visit(_Apply(self._edits, self._nodes))


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: dict[int, list[BodyEdit]], nodes: dict[int, list[NodeEdit]]) -> None:
        self.edits = edits
        self.nodes = nodes

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        for edit in self.nodes.get(id(original_node), ()):
            updated = edit(updated)
        return updated

    def _edit(self, original: Block, updated: Block) -> Block:
        edits = self.edits.get(id(original))
        if not edits:
            return updated
        body = list(updated.body)
        for edit in edits:
            body = edit(body)
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._edit(original_node, updated_node)  # type: ignore[return-value]

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._edit(original_node, updated_node)  # type: ignore[return-value]


@dataclass(frozen=True)
class Span:
    """Statements ``first..last`` (inclusive) of a block, to go into one ``with`` block.

    ``hosts`` are indexes inside the span of existing ``with <strategy>.scope():`` statements:
    their bodies are merged in, and the first one's header is kept.
    """

    first: int
    last: int
    hosts: tuple[int, ...] = ()


def scope_call(strategy: str) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=cst.Name(strategy), attr=cst.Name("scope")))


def wrap_spans(spans: Sequence[Span], strategy: str) -> BodyEdit:
    """An edit that puts each span of a body into a ``with <strategy>.scope():`` block."""

    def edit(body: Statements) -> Statements:
        result = list(body)
        for span in sorted(spans, key=lambda s: s.first, reverse=True):
            result[span.first : span.last + 1] = [_wrap(result, span, strategy)]
        return result

    return edit


def _wrap(body: Statements, span: Span, strategy: str) -> cst.With:
    statements = body[span.first : span.last + 1]
    inner: Statements = []
    host: cst.With | None = None
    for offset, statement in enumerate(statements):
        index = span.first + offset
        if index in span.hosts:
            assert isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock)
            children = list(statement.body.body)
            if host is None:
                host = statement
                if inner and children:
                    # Comments and blank lines above the old ``with`` now sit inside it.
                    children[0] = _prepend_lines(children[0], statement.leading_lines)
            elif children:
                children[0] = _prepend_lines(children[0], statement.leading_lines)
            inner.extend(children)
        else:
            inner.append(statement)
    leading = statements[0].leading_lines
    inner = [_blank_lines_unindented(s) for s in inner]
    if host is None or statements[0] is not host:
        inner[0] = inner[0].with_changes(leading_lines=())
    if host is None:
        return cst.With(
            items=[cst.WithItem(scope_call(strategy))],
            body=cst.IndentedBlock(body=inner),
            leading_lines=leading,
        )
    return host.with_changes(body=host.body.with_changes(body=inner), leading_lines=leading)


def _blank_lines_unindented(statement: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines stay blank when their statement moves into a block (at module level libcst
    marks them as indented, which would leave trailing spaces once they are inside one)."""
    lines = statement.leading_lines
    if not any(line.indent and line.comment is None and not line.whitespace.value for line in lines):
        return statement
    fixed = [
        line.with_changes(indent=False) if line.comment is None and not line.whitespace.value else line
        for line in lines
    ]
    return statement.with_changes(leading_lines=fixed)


def _prepend_lines(statement: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    if not lines:
        return statement
    return statement.with_changes(leading_lines=[*lines, *statement.leading_lines])
