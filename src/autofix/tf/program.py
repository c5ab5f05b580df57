"""One parsed module and what every rule asks of it, computed once per parsed tree.

The names, scopes and parents come from one :class:`~autofix.tf.index.Index` pass; positions
(only needed for what is reported) from one code generation that records offsets. See
:mod:`autofix.tf.index` for why this does not use libcst's metadata providers.
"""

from __future__ import annotations

import ast
import bisect
import re
from contextlib import contextmanager
from functools import cached_property
from typing import Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from autofix.tf.index import Access, Binding, Index, Scope
from autofix.tf.symbols import canonical

Block = cst.Module | cst.IndentedBlock


class Program:
    def __init__(self, module: cst.Module, source: str | None = None) -> None:
        self.module = module
        self._source = source

    @cached_property
    def index(self) -> Index:
        return Index(self.module)

    # --- names -----------------------------------------------------------------------------

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """Canonical qualified names of an expression (``tf.keras.Model`` -> ``keras.Model``)."""
        return {canonical(name) for name in self.index.qualified_names(node)}

    def scope(self, node: cst.CSTNode) -> Scope | None:
        """The scope the code at ``node`` runs in (for a name being bound: the scope it is
        bound in)."""
        binding = self.index.bindings.get(node)
        if binding is not None:
            return binding.scope
        access = self.index.accesses.get(node)
        if access is not None:
            return access.scope
        return self.index.scope_of(node)

    def access(self, node: cst.CSTNode) -> Access | None:
        """The read of a name at ``node``, if ``node`` reads one."""
        return self.index.accesses.get(node)

    def assignment(self, node: cst.CSTNode) -> Binding | None:
        """The binding made at ``node`` (an assignment target, parameter, def or class)."""
        return self.index.bindings.get(node)

    def is_import(self, name: cst.Name) -> bool:
        """Whether ``name`` refers to an imported module or object."""
        access = self.access(name)
        return access is not None and any(b.kind == "import" for b in access.referents)

    # --- tree ------------------------------------------------------------------------------

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parents = self.index.parents
        current = parents.get(node)
        while current is not None:
            yield current
            current = parents.get(current)

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The innermost statement (simple line or compound) that contains ``node``."""
        if isinstance(node, cst.BaseStatement):
            return node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.BaseStatement):
                return ancestor
        return None

    def block_of(self, statement: cst.BaseStatement) -> Block | None:
        """The block (module or indented block) whose ``body`` lists ``statement``."""
        parent = self.parent(statement)
        if isinstance(parent, (cst.Module, cst.IndentedBlock)):
            return parent
        return None

    def top_statement_in(self, node: cst.CSTNode, block: Block) -> cst.BaseStatement | None:
        """The statement of ``block`` that contains ``node`` (``node`` may be deep inside it)."""
        previous = node
        for ancestor in self.ancestors(node):
            if ancestor is block:
                return previous if isinstance(previous, cst.BaseStatement) else None
            previous = ancestor
        return None

    # --- positions -------------------------------------------------------------------------

    @cached_property
    def _statement_lines(self) -> dict[cst.CSTNode, int] | None:
        """The first line of each top-level statement, read off Python's own (C, fast) parser,
        so that a position needs the code of one statement, not of the whole module. None
        when the two parsers do not line up (then positions come from the whole module)."""
        source = self._source if self._source is not None else None
        if source is None:
            return None
        try:
            body = ast.parse(source).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        lines: dict[cst.CSTNode, int] = {}
        index = 0
        for statement in self.module.body:
            if index >= len(body):
                return None
            if isinstance(statement, cst.SimpleStatementLine):
                lines[statement] = body[index].lineno
                index += len(statement.body)
            else:
                # For a decorated def or class both parsers start at ``def``/``class``.
                lines[statement] = body[index].lineno
                index += 1
        return lines if index == len(body) else None

    def _ranges_of(self, node: cst.CSTNode) -> tuple[dict, list[int], int]:
        """Offsets of the nodes of ``node`` in its own code, that code's line starts, and the
        line (1-based) at which that code's first line sits in the module."""
        cache = self.__dict__.setdefault("_range_cache", {})
        found = cache.get(node)
        if found is None:
            state = _OffsetState(default_indent=self.module.default_indent, default_newline=self.module.default_newline)
            node._codegen(state)
            starts = _line_starts("".join(state.tokens))
            if node is self.module:
                first = 1
            else:
                # The statement's own syntax starts on the line Python's parser gave it.
                syntactic_line = bisect.bisect_right(starts, state.ranges[node][0])
                first = self._statement_lines[node] - syntactic_line + 1  # type: ignore[index]
            found = cache[node] = (state.ranges, starts, first)
        return found

    def position(self, node: cst.CSTNode) -> CodeRange:
        """Where ``node`` is (1-based lines, 0-based columns, without surrounding whitespace,
        as libcst's PositionProvider gives it)."""
        holder: cst.CSTNode = self.module
        lines = self._statement_lines
        if lines is not None:
            top = node if node in lines else None
            if top is None:
                for ancestor in self.ancestors(node):
                    if ancestor in lines:
                        top = ancestor
                        break
            if top is not None:
                holder = top
        ranges, starts, first = self._ranges_of(holder)
        start, end = ranges[node]
        begin, finish = _point(starts, start), _point(starts, end)
        offset = first - 1
        return CodeRange(
            CodePosition(begin.line + offset, begin.column), CodePosition(finish.line + offset, finish.column)
        )

    # --- derived facts ---------------------------------------------------------------------

    @cached_property
    def suppressions(self):
        """The ``# autofix: ignore[...]`` comments of this module."""
        from autofix.suppressions import parse

        return parse(self._source if self._source is not None else self.module.code)

    def suppressed(self, node: cst.CSTNode, code: str) -> bool:
        """Whether a finding of rule ``code`` at ``node`` is suppressed by a comment on its
        first line or on the first line of its statement. Rules leave such places unfixed."""
        suppressions = self.suppressions
        if not suppressions.by_line:
            return False
        lines = {self.position(node).start.line}
        statement = self.statement_of(node)
        if statement is not None:
            lines.add(self.position(statement).start.line)
        return any(suppressions.covers(line, code) for line in lines)

    @cached_property
    def facts(self):
        """The TF facts of this module (see :mod:`autofix.tf.facts`), built on first use."""
        from autofix.tf.facts import Facts

        return Facts(self)


_NEWLINE = re.compile(r"\r\n?|\n")


def _line_starts(code: str) -> list[int]:
    """Offsets where lines start (a line ends at \n, \r\n or a lone \r, as libcst counts)."""
    return [0, *(match.end() for match in _NEWLINE.finditer(code))]


def _point(starts: list[int], offset: int) -> CodePosition:
    line = bisect.bisect_right(starts, offset) - 1
    return CodePosition(line + 1, offset - starts[line])


class _OffsetState(CodegenState):
    """Code generation that records where each node's syntax starts and ends, as offsets into
    the generated code (cheaper than tracking lines and columns token by token)."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.length = 0
        self.ranges: dict[cst.CSTNode, tuple[int, int]] = {}
        self._starts: list[int] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(self.length)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        # A node that recorded its syntactic range keeps it; others span all they printed.
        if node not in self.ranges:
            self.ranges[node] = (start, self.length)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.length += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.length -= len(self.tokens.pop())

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        start = self.length
        try:
            yield
        finally:
            end = self.length
            if start_node is not None:
                start = self.ranges[start_node][0]
            if end_node is not None:
                end = self.ranges[end_node][1]
            self.ranges[node] = (start, end)
