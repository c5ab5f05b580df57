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
from libcst.metadata.scope_provider import Assignment, Scope

from autofix.tf.symbols import canonical

Block = cst.Module | cst.IndentedBlock


class Program:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        # The module comes straight from the parser, so it has no shared nodes: no copy needed.
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)

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

    def assignments_of(self, name: cst.Name) -> list[Assignment]:
        """Where a name used at ``name`` was assigned (plain assignments only, no imports)."""
        scope = self.scope(name)
        if scope is None:
            return []
        accesses = scope.accesses[name]
        found: list[Assignment] = []
        for access in accesses:
            for referent in access.referents:
                if type(referent) is Assignment:
                    found.append(referent)
        if not accesses:
            # A name being assigned to, not read: its own scope's assignments of that name.
            found = [a for a in scope.assignments[name.value] if type(a) is Assignment]
        return found

    def is_import(self, name: cst.Name) -> bool:
        """Whether ``name`` refers to an imported module or object."""
        scope = self.scope(name)
        if scope is None:
            return False
        for access in scope.accesses[name]:
            for referent in access.referents:
                if type(referent).__name__ == "ImportAssignment":
                    return True
        return False

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
    def facts(self):
        """The TF facts of this module (see :mod:`autofix.tf.facts`), built on first use."""
        from autofix.tf.facts import Facts

        return Facts(self)
