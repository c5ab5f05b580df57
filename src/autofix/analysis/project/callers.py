"""Who calls a function of the project, from which module, with what: the reverse of
:mod:`.imports`.

A function of one module often gets its values from a caller in another (``fit_dist(self,
...)`` in ``models.py`` for ``fit.py``'s ``def fit_dist(obj, ...)``): what a parameter holds
is known only there. :func:`callers` answers, for a top-level function ``name`` of the
project file ``path``, every call of it made by the project's other modules, each with the
caller's module parsed (with its path, so that its own imports are followed too) and the call.

Only files that spell ``name`` as a word can call it (an import names it, ``module.name``
names it), so the project's Python files are listed and read as text, and only those are
parsed (once per content: :func:`~.imports.project_program`). What the answer depends on is
recorded for the result cache (:func:`~.layout.mentions_key`): the files that spell the name and their
contents; a file added, removed or edited that spells it makes the answer stale, any other
file does not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.core.value_flow import Values
from autofix.analysis.program import Program
from autofix.analysis.project import layout
from autofix.analysis.project.imports import ProjectImports, project_program, record
from autofix.analysis.project.layout import MENTION, mentions, mentions_digest


@dataclass(frozen=True)
class Caller:
    """One call of the function, in another module of the project."""

    path: str
    program: Program = field(compare=False, repr=False)
    # The call (for :func:`users`, the read of the name when it is not called).
    call: cst.BaseExpression = field(compare=False, repr=False)

    @property
    def line(self) -> int:
        return self.program.line(self.call)


def callers(path: str, name: str) -> tuple[Caller, ...] | None:
    """Every call of the top-level function ``name`` of the project file ``path`` made by
    another module of its project (resolved through that module's imports: ``from fit import
    *``, ``import fit``, a package's re-export), in path order; None when the project is too
    large to search. The files read are recorded for the result cache."""
    found = users(path, name)
    if found is None:
        return None
    return tuple(u for u in found if isinstance(u.call, cst.Call))


def users(path: str, name: str) -> tuple[Caller, ...] | None:
    """Every use of the top-level definition ``name`` of the project file ``path`` by another
    module of its project: a call of it (``call`` is the call), or any other read of the name
    that resolves to it (``call`` is the name or attribute read: a base class, a value passed
    on); in path order, None when the project is too large to search. Recorded as
    :func:`callers`."""
    root = layout.project_root(path)
    found = mentions(root, name)
    record(root + os.sep + MENTION + name, mentions_digest(root, found))
    if found is None:
        return None
    target = os.path.normpath(os.path.abspath(path))
    uses: list[Caller] = []
    for other, _ in found:
        if os.path.normpath(os.path.abspath(other)) == target:
            continue
        program = project_program(other)
        if program is None:
            continue
        imports = ProjectImports.of(program)
        for node in reads_named(program, name):
            resolved = imports.resolve(node)
            if resolved is None or resolved.path is None or resolved.definition is None:
                continue
            if os.path.normpath(os.path.abspath(resolved.path)) == target and resolved.definition.name == name:
                parent = program.parent(node)
                use = parent if isinstance(parent, cst.Call) and parent.func is node else node
                uses.append(Caller(other, program, use))  # type: ignore[arg-type]
    return tuple(uses)


def reads_named(program: Program, name: str) -> list[cst.BaseExpression]:
    """The names ``name`` read and the attributes ``<...>.name`` of ``program``, outermost
    first (not the names an import statement binds)."""
    return _Reads.of(program).named.get(name, [])


class _Reads(Derived):
    """Every name read and attribute of a program, by the name they spell (one walk of the
    program, whatever the number of names looked up in it)."""

    def __init__(self, program: Program) -> None:
        from autofix.analysis.syntax import nodes_in

        super().__init__(program)
        self.named: dict[str, list[cst.BaseExpression]] = {}
        accesses = program.index.accesses
        for node in nodes_in(program.module, (cst.Name, cst.Attribute)):
            if isinstance(node, cst.Attribute):
                self.named.setdefault(node.attr.value, []).append(node)
            elif accesses.get(node) is not None:
                parent = program.parent(node)
                if not (isinstance(parent, cst.Attribute) and parent.attr is node):
                    self.named.setdefault(node.value, []).append(node)


def method_calls(path: str, class_name: str, method: str) -> tuple[Caller, ...] | None:
    """Every call ``obj.method(...)`` that another module of the project makes on an object of
    the top-level class ``class_name`` of the project file ``path``, where those modules make
    every such object themselves and keep it to themselves: ``config = ModelConfiguration(args)``
    bound to a name only read as ``config.attr`` (or ``ModelConfiguration(args).method()``).
    None when that cannot be shown (the class subclassed, passed on, made into an attribute or
    a container, an object handed elsewhere, a project too large to search): whoever else
    holds an object may call the method anywhere. Empty when no other module makes one."""
    found = users(path, class_name)
    if found is None:
        return None
    calls: list[Caller] = []
    for use in found:
        if not isinstance(use.call, cst.Call):
            return None  # a base class, a value passed on
        program = use.program
        made = use.call
        parent = program.parent(made)
        if isinstance(parent, cst.Attribute) and parent.value is made:
            grand = program.parent(parent)
            if parent.attr.value == method and isinstance(grand, cst.Call) and grand.func is parent:
                calls.append(Caller(use.path, program, grand))
            continue
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return None
        binding = program.index.bindings.get(parent.targets[0].target)
        if binding is None:
            return None
        for access in binding.references:
            node = access.node
            read = program.parent(node)
            if not (isinstance(read, cst.Attribute) and read.value is node):
                return None  # the object itself is handed on
        values = Values.of(program)
        for read in reads_named(program, method):
            if not isinstance(read, cst.Attribute):
                continue
            origins = values.origins(read.value)
            if not any(o.node is made for o in origins):
                continue
            call = program.parent(read)
            if not (isinstance(call, cst.Call) and call.func is read and all(o.whole and o.node is made for o in origins)):
                return None  # the method handed on, or called on this object or another one
            calls.append(Caller(use.path, program, call))
    return tuple(calls)


def users_spell(path: str, name: str, words: frozenset[str] | set[str]) -> bool | None:
    """Whether a module of the project that uses the top-level definition ``name`` of the
    file ``path`` (:func:`users`) spells one of ``words``; None when the project is too
    large to search."""
    found = users(path, name)
    if found is None:
        return None
    programs = {id(u.program): u.program for u in found}
    return any(word in program.source for program in programs.values() for word in words)
