"""Modules of the project that a migration would break by editing what they import.

A script that trains only when it is run gets its strategy in its ``if __name__ ==
"__main__":`` block (:mod:`.placement`), and its functions and classes then read that global:
``train()`` runs ``strategy.run``, a helper method divides its loss by
``strategy.num_replicas_in_sync``. Run as a script, the module has it; imported by another
module of the project (``from gan import GAN, train`` in ``ls_gan.py``), the block does not run
and the name is not bound: the importer fails with ``NameError`` where it runs that code.

:func:`main_only_reads` finds such reads in a program: names read by a top-level function or
class whose every module-level binding is in the ``__main__`` block. :func:`broken_importers`
compares the migrated program's with the original's (a read the original already made is not
the migration's doing) and asks the project which other modules use each definition that gained
one (:func:`~autofix.analysis.project.callers.users`): each is a reason to refuse the migration,
naming the importer and its line. Not followed: what a use runs of a class (any use of a class
one of whose methods gained such a read counts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from autofix.analysis.program import Program
from autofix.analysis.project.callers import users


@dataclass(frozen=True)
class MainOnlyRead:
    """A top-level definition (``definition``, at ``line``) that reads ``name``, a global the
    module binds only in its ``__main__`` block (first read at ``read_line``)."""

    definition: str
    line: int
    name: str
    read_line: int


@dataclass(frozen=True)
class BrokenImporter:
    """A module of the project that uses a definition the migration makes read a global bound
    only when the migrated module runs as a script."""

    read: MainOnlyRead
    # The importer, relative to the migrated module's folder, and the line of its use.
    path: str
    use_line: int

    def reason(self, module: str) -> str:
        read = self.read
        called = f"{read.definition}()" if not read.definition[:1].isupper() else read.definition
        return (
            f"{self.path}:{self.use_line} uses {called} of this module (line {read.line}), which the migration "
            f"makes read {read.name} (line {read.read_line}): {module} makes it only when it runs as a script, "
            f"so {self.path} would fail there with NameError: name '{read.name}' is not defined; migrate "
            f"{self.path} with it, or give {called} the strategy as a parameter, then migrate"
        )


def _is_main_block(statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.If):
        return False
    test = statement.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return isinstance(test.comparisons[0].operator, cst.Equal) and len(names) == 1 and len(strings) == 1


def main_only_reads(program: Program) -> list[MainOnlyRead]:
    """Each (top-level function or class, name) where the definition's body reads a global
    bound only inside the module's ``if __name__ == "__main__":`` block; in line order."""
    body = list(program.module.body)
    mains = [s for s in body if _is_main_block(s)]
    if not mains:
        return []
    index = program.index
    module_scope = index.scopes[program.module]
    found: dict[tuple[str, str], MainOnlyRead] = {}
    for name, bindings in module_scope.bindings.items():
        if not bindings or not all(_top_statement(program, b.node) in mains for b in bindings):
            continue
        for binding in bindings:
            for access in binding.references:
                top = _top_statement(program, access.node)
                if not isinstance(top, (cst.FunctionDef, cst.ClassDef)):
                    continue
                key = (top.name.value, name)
                read_line = program.line(access.node)
                known = found.get(key)
                if known is None or read_line < known.read_line:
                    found[key] = MainOnlyRead(top.name.value, program.line(top.name), name, read_line)
    return sorted(found.values(), key=lambda r: (r.line, r.name))


def _top_statement(program: Program, node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of the module's body that holds ``node``."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = program.parent(current)
        if parent is program.module or isinstance(parent, cst.Module):
            return current
        current = parent
    return None


def broken_importers(original: Program, migrated: Program) -> list[BrokenImporter]:
    """The modules of the project that use a definition the migration made read a global bound
    only in the ``__main__`` block (one per definition and importer, first use); empty for a
    program with no path."""
    path = original.path
    if path is None:
        return []
    before = {(r.definition, r.name) for r in main_only_reads(original)}
    gained = [r for r in main_only_reads(migrated) if (r.definition, r.name) not in before]
    found: list[BrokenImporter] = []
    here = os.path.dirname(os.path.abspath(path))
    for read in gained:
        seen: set[str] = set()
        for use in users(path, read.definition) or ():
            if use.path in seen:
                continue
            seen.add(use.path)
            try:
                shown = os.path.relpath(use.path, here)
            except ValueError:
                shown = use.path
            found.append(BrokenImporter(read, shown, use.program.line(use.call)))
    return found
