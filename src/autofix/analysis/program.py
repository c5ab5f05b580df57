"""One parsed module and what every rule asks of it, computed once per parsed tree.

The names, scopes and parents come from one :class:`~autofix.tf.index.Index` pass; positions
(only needed for what is reported) from one code generation that records offsets. See
:mod:`autofix.tf.index` for why this does not use libcst's metadata providers.
"""

from __future__ import annotations

import ast
import bisect
from functools import cached_property
from typing import Callable, ClassVar, Iterator, TypeVar

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from autofix.analysis import positions
from autofix.suppressions import parse as parse_suppressions
from autofix.tf.index import Access, Binding, Index, Scope
from autofix.tf.symbols import canonical

Block = cst.Module | cst.IndentedBlock
T = TypeVar("T")


class Program:
    # Positions from libcst's public PositionProvider instead of autofix's own (tests set it).
    use_provider = False
    # What a name imported from one of the project's own modules stands for when that module
    # only re-exports a library (``from xuance.tensorflow import tk`` where that module does
    # ``import tensorflow.keras as tk``): ``(file, "xuance.tensorflow.tk.losses.MSE")`` ->
    # ``"tensorflow.keras.losses.MSE"``, or None. Set by :mod:`autofix.analysis.project.imports`
    # (a higher layer, which reads the other modules).
    reexported: ClassVar[Callable[[str, str], str | None] | None] = None

    def __init__(
        self,
        module: cst.Module,
        source: str | None = None,
        syntax_tree: ast.Module | None = None,
        migration: str | None = None,
        path: str | None = None,
        migrated: bool = False,
    ) -> None:
        self.module = module
        # The file the text was read from, when it was read from one: its project's modules
        # are then known through its imports (:mod:`autofix.analysis.project`). None for
        # standard input and text analysed alone.
        self.path = path
        # The strategy this file is being moved to by ``autofix migrate`` (``"mirrored"``...),
        # when it had none: its batches are the single-device (per-replica) batches whatever
        # they are called. None for every other run, and for a file that already distributes.
        self.migration = migration
        # The text is what a migration wrote, checked before it is shown (Options.migrated_check).
        self.migrated = migrated
        self._source = source
        # Python's own tree of ``source``, when the caller already has it (see _statement_lines).
        self._syntax_tree = syntax_tree
        # Rules ask the same names of the same expressions many times.
        self._names: dict[cst.CSTNode, frozenset[str]] = {}
        self._reexports: dict[str, str | None] = {}
        self._ranges: dict[cst.CSTNode, tuple[dict, list[int], int]] = {}
        self._derived: dict[type, object] = {}
        self._provided: dict[cst.CSTNode, CodeRange] | None = None

    @cached_property
    def source(self) -> str:
        """The text the module was parsed from."""
        return self._source if self._source is not None else self.module.code

    @cached_property
    def index(self) -> Index:
        return Index(self.module)

    # --- names -----------------------------------------------------------------------------

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]:
        """Canonical qualified names of an expression (``tf.keras.Model`` -> ``keras.Model``)."""
        cache = self._names
        found = cache.get(node)
        if found is None:
            names = self.index.qualified_names(node)
            follow = Program.reexported
            if follow is not None and self.path is not None and names:
                known = self._reexports
                for name in names:
                    if name not in known:
                        known[name] = follow(self.path, name)
                names = {known[name] or name for name in names}
            found = cache[node] = frozenset(canonical(name) for name in names)
        return found

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

    def within(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        """Whether ``node`` lies inside ``container`` (``container`` is one of its ancestors)."""
        return any(a is container for a in self.ancestors(node))

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The innermost statement (simple line or compound) that contains ``node``."""
        if isinstance(node, cst.BaseStatement):
            return node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.BaseStatement):
                return ancestor
        return None

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost function whose code contains ``node``."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def outermost_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The outermost function whose code contains ``node`` (a method's, its class's
        method; a nested function's, the function it is nested in)."""
        found = None
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                found = ancestor
        return found

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
    def _statement_lines(self) -> dict[cst.CSTNode, tuple[int, int]] | None:
        """Line and column of each statement (at any depth), read off Python's own (C, fast)
        parser, so that a position needs the code of one statement, not of the whole module.
        None when the two parsers' statements do not line up (then positions come from the
        whole module's code)."""
        if self._source is None:
            return None
        tree = self._syntax_tree
        if tree is None:
            try:
                tree = ast.parse(self._source)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
        found: dict[cst.CSTNode, tuple[int, int]] = {}
        try:
            if not _pair_block(self.module.body, tree.body, found):
                return None
        except RecursionError:
            return None
        return found

    def _ranges_of(self, node: cst.CSTNode) -> tuple[dict, list[int], int]:
        """Offsets of the nodes of ``node`` in its own code, that code's line starts, and the
        line (1-based) at which that code's first line sits in the module."""
        cache = self._ranges
        found = cache.get(node)
        if found is None:
            indent, newline = self.module.default_indent, self.module.default_newline
            assert positions.offsets is not None
            if node is self.module:
                ranges, code = positions.offsets(node, indent, newline, "")
                first = 1
                starts = positions.line_starts(code)
            else:
                line, column = self._statement_lines[node]  # type: ignore[index]
                # Generated alone, a nested statement lacks the indentation of its block:
                # give it the one it has in the file, so that columns come out right.
                prefix = self._source_line(line)[:column]
                ranges, code = positions.offsets(node, indent, newline, prefix)
                starts = positions.line_starts(code)
                syntactic_line = bisect.bisect_right(starts, ranges[node][0])
                first = line - syntactic_line + 1
            found = cache[node] = (ranges, starts, first)
        return found

    @cached_property
    def _source_lines(self) -> list[str]:
        return positions.NEWLINE.split(self._source or "")

    def _source_line(self, line: int) -> str:
        lines = self._source_lines
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def line(self, node: cst.CSTNode) -> int:
        """The line ``node`` starts on."""
        return self.position(node).start.line

    def position(self, node: cst.CSTNode) -> CodeRange:
        """Where ``node`` is (1-based lines, 0-based columns, without surrounding whitespace,
        as libcst's PositionProvider gives it)."""
        if positions.offsets is None or self.use_provider:
            if self._provided is None:
                self._provided = positions.provider_positions(self.module)
            return self._provided[node]
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
        begin, finish = positions.point(starts, start), positions.point(starts, end)
        offset = first - 1
        return CodeRange(
            CodePosition(begin.line + offset, begin.column), CodePosition(finish.line + offset, finish.column)
        )

    # --- derived facts ---------------------------------------------------------------------

    @cached_property
    def suppressions(self):
        """The ``# autofix: ignore[...]`` comments of this module."""
        return parse_suppressions(self.source)

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

    def derived(self, kind: type[T]) -> T:
        """The analysis ``kind`` of this program (``kind(program)``), built once and shared by
        every rule (see :class:`autofix.analysis.Derived`)."""
        found = self._derived.get(kind)
        if found is None:
            found = self._derived[kind] = kind(self)
        return found  # type: ignore[return-value]




def _pair_block(statements, nodes, found: dict) -> bool:
    """Pair libcst statements with Python's (``a = 1; b = 2`` is one libcst line and two
    ast statements); False when they do not line up."""
    index = 0
    for statement in statements:
        if index >= len(nodes):
            return False
        node = nodes[index]
        found[statement] = (node.lineno, node.col_offset)
        if isinstance(statement, cst.SimpleStatementLine):
            index += len(statement.body)
            continue
        index += 1
        if not _pair_compound(statement, node, found):
            return False
    return index == len(nodes)


def _suite(block) -> list | None:
    return list(block.body) if isinstance(block, cst.IndentedBlock) else None


def _pair_body(block, nodes, found: dict) -> bool:
    body = _suite(block)
    # A one-line suite (``if x: y = 1``) is left to its compound statement's code.
    return body is None or _pair_block(body, nodes, found)


def _pair_compound(statement, node, found: dict) -> bool:
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.With)):
        return _pair_body(statement.body, node.body, found)
    if isinstance(statement, (cst.For, cst.While)):
        ok = _pair_body(statement.body, node.body, found)
        if statement.orelse is not None:
            ok = ok and _pair_body(statement.orelse.body, node.orelse, found)
        return ok
    if isinstance(statement, cst.If):
        if not isinstance(node, ast.If) or not _pair_body(statement.body, node.body, found):
            return False
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            if len(node.orelse) != 1:
                return False
            # An ``elif`` is not paired itself (alone it would print as ``if``), only its body.
            return _pair_compound(orelse, node.orelse[0], found)
        if isinstance(orelse, cst.Else):
            return _pair_body(orelse.body, node.orelse, found)
        return True
    if isinstance(statement, (cst.Try, cst.TryStar)):
        if len(statement.handlers) != len(node.handlers):
            return False
        ok = _pair_body(statement.body, node.body, found)
        for handler, ast_handler in zip(statement.handlers, node.handlers):
            ok = ok and _pair_body(handler.body, ast_handler.body, found)
        if statement.orelse is not None:
            ok = ok and _pair_body(statement.orelse.body, node.orelse, found)
        if statement.finalbody is not None:
            ok = ok and _pair_body(statement.finalbody.body, node.finalbody, found)
        return ok
    if isinstance(statement, cst.Match):
        if len(statement.cases) != len(node.cases):
            return False
        return all(_pair_body(case.body, ast_case.body, found) for case, ast_case in zip(statement.cases, node.cases))
    return True
