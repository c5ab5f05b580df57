"""One parsed module and the libcst metadata every rule shares.

A :class:`Program` is built once per parsed tree; each metadata provider is resolved at most
once, and only when a rule first asks for it (positions, the most expensive, only when there is
something to report).
"""

from __future__ import annotations

from functools import cached_property
from typing import Iterator

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    ScopeProvider,
)
from libcst.metadata.scope_provider import Access, Assignment, Scope

from autofix.tf.symbols import canonical

Block = cst.Module | cst.IndentedBlock


class Program:
    def __init__(self, module: cst.Module, source: str | None = None) -> None:
        self.module = module
        # The module comes straight from the parser, so it has no shared nodes: no copy needed.
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._source = source

    @cached_property
    def _scopes(self):
        return self.wrapper.resolve(ScopeProvider)

    @cached_property
    def _parents(self):
        return self.wrapper.resolve(ParentNodeProvider)

    @cached_property
    def _positions(self):
        return self.wrapper.resolve(PositionProvider)

    # --- names -----------------------------------------------------------------------------

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """Canonical qualified names of an expression (``tf.keras.Model`` -> ``keras.Model``)."""
        scope = self._scopes.get(node)
        if scope is None:
            return set()
        # What QualifiedNameProvider computes, without building a lazy value for every node.
        return {canonical(q.name) for q in scope.get_qualified_names_for(node)}

    def scope(self, node: cst.CSTNode) -> Scope | None:
        return self._scopes.get(node)

    @cached_property
    def _name_index(self) -> tuple[dict, dict]:
        """Every access and every assignment, by the node that makes it.

        libcst's ``scope.accesses[node]`` looks up by the *name* (all uses of ``x`` in the
        scope), which is not precise enough to tell a read from a write of one node.
        """
        accesses: dict[cst.CSTNode, Access] = {}
        assignments: dict[cst.CSTNode, Assignment] = {}
        for scope in {id(s): s for s in self._scopes.values() if s is not None}.values():
            for access in scope.accesses:
                accesses[access.node] = access
            for assignment in scope.assignments:
                if type(assignment) is Assignment:
                    assignments[assignment.node] = assignment
        return accesses, assignments

    def access(self, node: cst.CSTNode) -> Access | None:
        """The read of a name at ``node``, if ``node`` reads one."""
        return self._name_index[0].get(node)

    def assignment(self, node: cst.CSTNode) -> Assignment | None:
        """The binding made at ``node`` (an assignment target, parameter, def or class)."""
        return self._name_index[1].get(node)

    def is_import(self, name: cst.Name) -> bool:
        """Whether ``name`` refers to an imported module or object."""
        access = self.access(name)
        return access is not None and any(
            type(referent).__name__ == "ImportAssignment" for referent in access.referents
        )

    # --- tree ------------------------------------------------------------------------------

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parents = self._parents
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

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self._positions[node]

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
