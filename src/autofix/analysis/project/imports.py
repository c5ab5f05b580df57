"""What a name read in one program is, seen through its imports of the project's own modules.

``ProjectImports.of(program).resolve(expr)`` follows ``build`` (``from models import build``,
``from .models import build``, ``from pkg.models import build``, ``from models import *``) or
``models.build`` (``import models``, ``import pkg.models as models``) to the project file that
defines it and its :class:`~.summary.Definition` (through a package's ``__init__.py`` that
re-exports it). An import of a module that is not the project's, or that cannot be found, is a
:class:`Resolved` without a file: what it names, and why it is not followed.

Every file read is recorded (:func:`reading`): the result cache keeps a file's answer only as
long as the modules its analysis read are unchanged, and absent ones still absent.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.program import Program
from autofix.analysis.project import layout
from autofix.analysis.project.layout import digest
from autofix.analysis.core import guards
from autofix.analysis.project.summary import Definition, ModuleSummary, makes_model, parsed, program_alone, summary_of
from autofix.tf.symbols import NO_KERAS_OBJECTS

# Libraries a project does not shadow in practice: their names are not looked for in it.
LIBRARIES = NO_KERAS_OBJECTS | {"keras", "tensorflow", "tf_keras", "tensorflow_datasets", "torch", "sklearn", "jax", "flax", "absl", "tqdm"}

# (path, digest) of every project file read by the analysis of the current file; digest "" for
# a module looked for and not found there.
_READ: dict[str, str] | None = None


@contextmanager
def reading() -> Iterator[dict[str, str]]:
    """Record the project files read meanwhile (path -> digest; "" when absent)."""
    global _READ
    previous, _READ = _READ, {}
    try:
        yield _READ
    finally:
        _READ = previous


def record(path: str, key: str) -> None:
    """Record that the analysis read ``path`` as ``key`` (a folder's listing: ``path`` ends
    with the separator, see :func:`~.layout.pin_listing`)."""
    if _READ is not None:
        _READ[path] = key


def _read(path: str) -> tuple[bytes, str] | None:
    """The bytes of the project file ``path`` and their digest, None when it cannot be read;
    the read (or the absence) recorded as :func:`reading` says."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        if _READ is not None:
            _READ[path] = ""
        return None
    key = digest(data)
    if _READ is not None:
        _READ[path] = key
    return data, key


def _load(path: str) -> ModuleSummary | None:
    read = _read(path)
    return summary_of(read[0]) if read is not None else None


def program_of(path: str) -> Program | None:
    """The project file ``path`` parsed as a program of its own (no path: its own imports are
    not followed), once per content; None when it cannot be read or parsed. The read is
    recorded as :func:`reading` says."""
    read = _read(path)
    if read is None:
        return None
    data, key = read
    return program_alone(key, summary_of(data).text)


_PATHED: dict[tuple[str, str], Program | None] = {}


def project_program(path: str) -> Program | None:
    """The project file ``path`` parsed as a program of its own with its path, so that its
    own imports of the project are followed when it is analysed (a caller found by
    :mod:`.callers`), once per content and path; None when it cannot be read or parsed. The
    read is recorded as :func:`reading` says."""
    read = _read(path)
    if read is None:
        return None
    data, key = read
    slot = (key, os.path.normpath(os.path.abspath(path)))
    if slot not in _PATHED:
        text = summary_of(data).text
        module = parsed(key, text)
        _PATHED[slot] = None if module is None else Program(module, text, path=slot[1])
    return _PATHED[slot]


@dataclass(frozen=True)
class Resolved:
    """What an imported name is: the project file and definition it resolves to, or why not."""

    # The name as the importing file spells the import (``models.build``, ``.models.build``).
    qualified: str
    # The module it is imported from, as written (``models``, ``.models``).
    module: str
    # The name in that module (None: the module itself).
    name: str | None
    path: str | None = None
    definition: Definition | None = None
    # Why it is not followed, when it is not.
    reason: str | None = None

    def where(self, importer: str | None = None, line: int | None = None) -> str:
        """``models.py:12``: relative to the importing file's folder when it is there or
        below, else to the project's root (``tcn/tcn.py:398``); ``line``: another line of that
        file than the definition's."""
        if self.path is None:
            return self.module
        shown = self.path
        if importer is not None:
            here = os.path.dirname(os.path.abspath(importer))
            base = here if layout.inside(self.path, here) else layout.project_root(importer)
            try:
                shown = os.path.relpath(self.path, base)
            except ValueError:
                pass
        if line is None and self.definition is not None:
            line = self.definition.line
        return f"{shown}:{line}" if line is not None else shown


class ProjectImports(Derived):
    """The project's own modules as one program sees them (nothing without a path)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.path: str | None = getattr(program, "path", None)
        self._resolved: dict[tuple[str], Resolved | None] = {}

    @property
    def active(self) -> bool:
        return self.path is not None

    def resolve(self, expr: cst.BaseExpression) -> Resolved | None:
        """What ``expr`` (a name or ``module.name``) is, when it is imported (None when it is
        not imported, or the program has no project)."""
        if self.path is None:
            return None
        names = sorted(self.program.index.qualified_names(expr))
        for qualified in names:
            if not self._imported(expr):
                break
            if qualified.split(".", 1)[0] in LIBRARIES:
                continue
            key = (qualified,)
            if key not in self._resolved:
                self._resolved[key] = self.resolve_name(qualified)
            found = self._resolved[key]
            if found is not None:
                return found
        if isinstance(expr, cst.Name) and not names:
            return self._starred(expr.value)
        return None

    def batch_argument(self, call: cst.Call) -> tuple[cst.Arg, Resolved] | None:
        """``make_dataset(64)`` where ``make_dataset`` is a function of another module of the
        project that returns a dataset it batches with that parameter and reads it nowhere
        else (:attr:`Definition.batch_parameter`): the argument, and what it resolves to."""
        resolved = self.resolve(call.func)
        if resolved is None or resolved.definition is None or resolved.definition.batch_parameter is None:
            return None
        name, position = resolved.definition.batch_parameter
        if any(arg.star for arg in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg, resolved
        positional = [arg for arg in call.args if arg.keyword is None]
        if position is not None and position < len(positional):
            return positional[position], resolved
        return None

    def may_return_model(self, call: cst.Call, resolved: Resolved) -> bool:
        """Whether ``call`` of the project function ``resolved`` may return a Keras model:
        it returns one (:attr:`Definition.returns_model`), unless the constants the call
        passes, or the defaults it leaves, make dead every expression of the function that
        makes one (``get_loss(name="mae")`` of a loss registry whose only model is a
        ``VGGLoss()`` made under ``elif name == "vgg":``; :func:`.summary.makes_model`)."""
        definition = resolved.definition
        if definition is None or definition.kind != "function" or definition.returns_model is None:
            return False
        program = program_of(resolved.path) if resolved.path is not None else None
        if program is None:
            return True
        function = next(
            (s for s in program.module.body if isinstance(s, cst.FunctionDef) and s.name.value == definition.name and program.line(s) == definition.line),
            None,
        )
        if function is None:
            return True
        known = guards.constants_passed(program, function, call)
        return makes_model(program, definition, known)

    def _imported(self, expr: cst.BaseExpression) -> bool:
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        return isinstance(expr, cst.Name) and self.program.is_import(expr)

    def resolve_name(self, qualified: str) -> Resolved | None:
        """``models.build`` / ``.models.build`` / ``pkg.models.build`` from this file."""
        assert self.path is not None
        return resolve_from(self.path, qualified)

    def module_path(self, module: str, level: int) -> str | None:
        """The project file of ``module`` (``level`` dots before it) as this file imports it;
        None when it is not a module of the project, or the file has no project."""
        return self._module(module, level) if self.path is not None else None

    def _module(self, module: str, level: int) -> str | None:
        assert self.path is not None
        return _FileImports(self.path).module(module, level)

    def _starred(self, name: str) -> Resolved | None:
        """A name bound by ``from module import *`` of a project module."""
        assert self.path is not None
        for statement in self.program.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, cst.ImportFrom) or not isinstance(small.names, cst.ImportStar):
                    continue
                module = self.program.module.code_for_node(small.module) if small.module is not None else ""
                level = len(small.relative)
                path = self._module(module, level)
                if path is None:
                    continue
                summary = _load(path)
                if summary is not None and name in summary.public:
                    return _resolve_in(f"{'.' * level}{module}.{name}", "." * level + module, path, name, set())
        return None

    def imported_modules(self) -> list[tuple[int, str]]:
        """The project modules this file imports at its top level (``import model``, ``from
        model import X``, ``from .layers import *``): each statement's line and the module's
        path."""
        if self.path is None:
            return []
        found: list[tuple[int, str]] = []
        for statement in self.program.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                modules: list[tuple[str, int]] = []
                if isinstance(small, cst.ImportFrom):
                    module = self.program.module.code_for_node(small.module) if small.module is not None else ""
                    modules.append((module, len(small.relative)))
                elif isinstance(small, cst.Import):
                    modules.extend((self.program.module.code_for_node(alias.name), 0) for alias in small.names)
                for module, level in modules:
                    if level == 0 and module.split(".", 1)[0] in LIBRARIES:
                        continue
                    path = self._module(module, level)
                    if path is not None and os.path.normpath(path) != os.path.normpath(self.path):
                        found.append((self.program.line(statement), path))
        return found

    def keras2_module(self) -> tuple[int, str, int, str] | None:
        """A project module this file imports whose own code runs only on Keras 2 (see
        ``ModuleSummary.keras2``): the import's line, the module's path, the line there and
        what it is."""
        for line, path in self.imported_modules():
            summary = _load(path)
            if summary is not None and summary.keras2 is not None:
                return line, path, *summary.keras2
        return None

    def definitions_called(self) -> list[tuple[cst.Call, Resolved]]:
        """Every call of this program whose function is an imported project name."""
        found = []
        for call in nodes_in_module(self.program.module):
            resolved = self.resolve(call.func)
            if resolved is not None:
                found.append((call, resolved))
        return found


def nodes_in_module(module: cst.Module) -> list[cst.Call]:
    from autofix.analysis.syntax import nodes_in

    return nodes_in(module, cst.Call)


def _resolve_in(qualified: str, module: str, path: str, name: str, seen: set[str]) -> Resolved:
    """``name`` defined in the project file ``path`` (followed through re-exports)."""
    if path in seen:
        return Resolved(qualified, module, name, path, reason=f"{module} imports itself in a circle")
    seen.add(path)
    summary = _load(path)
    if summary is None or summary.error is not None:
        why = summary.error if summary is not None else "it cannot be read"
        return Resolved(qualified, module, name, path, reason=f"{os.path.basename(path)}: {why}")
    definition = summary.definitions.get(name)
    if definition is not None and definition.kind == "import" and definition.source is not None:
        source_module, level, source_name = definition.source
        target = layout.resolve_module(path, source_module, level)
        if target is not None and source_name is not None:
            return _resolve_in(qualified, module, target, source_name, seen)
        if target is not None and source_name is None:
            return Resolved(qualified, module, name, target)
        if target is None and level == 0 and source_name is not None:
            # ``from pkg import sub`` (a submodule) or a name of an installed library.
            sub = layout.resolve_module(path, f"{source_module}.{source_name}", 0)
            if sub is not None:
                return Resolved(qualified, module, name, sub)
        return Resolved(qualified, module, name, path, definition, reason=(
            f"it comes from {'.' * level}{source_module}, imported on line {definition.line} of {os.path.basename(path)}, "
            "which is not a module of this project"
        ))
    if definition is None:
        for star_module, level in summary.star_imports:
            target = layout.resolve_module(path, star_module, level)
            if target is not None:
                inner = _load(target)
                if inner is not None and name in inner.public:
                    return _resolve_in(qualified, module, target, name, seen)
        if layout.is_package(path):
            sub = layout.resolve_module(path, name, 1)
            if sub is not None:
                return Resolved(qualified, module, name, sub)
        return Resolved(qualified, module, name, path, reason=f"{os.path.basename(path)} defines no {name} at its top level")
    return Resolved(qualified, module, name, path, definition)


def library_reexport(importer: str, qualified: str) -> str | None:
    """What ``qualified`` (a name as the file ``importer`` imports it, with the attributes read
    off it: ``xuance.tensorflow.tk.losses.MeanSquaredError``) stands for when the project module
    it is imported from binds it by importing a library (``import tensorflow.keras as tk``,
    ``from tensorflow.keras import layers``), followed through the project's re-exports:
    ``tensorflow.keras.losses.MeanSquaredError``. None for a library's own name, a name the
    project defines, or one that cannot be resolved (a module not read: nothing is assumed)."""
    top = qualified.lstrip(".").split(".", 1)[0]
    if not qualified.startswith(".") and (top in LIBRARIES or top == "builtins"):
        return None
    found = None
    parts = qualified.split(".")
    level = len(qualified) - len(qualified.lstrip("."))
    if level:
        parts = ["." * level + parts[level]] + parts[level + 1:]
    for cut in range(len(parts), 1, -1):
        resolved = resolve_from(importer, ".".join(parts[:cut]))
        if resolved is None:
            continue
        definition = resolved.definition
        if definition is not None and definition.kind == "import" and definition.source is not None:
            module, source_level, name = definition.source
            if not source_level and module.split(".", 1)[0] in LIBRARIES:
                found = ".".join([module] + ([name] if name else []) + parts[cut:])
        break
    return found


def resolve_from(importer: str, qualified: str) -> Resolved | None:
    """What ``qualified`` (as :meth:`ProjectImports.resolve_name` takes it) is, imported by
    the project file ``importer``."""
    if qualified.split(".", 1)[0] in LIBRARIES:
        return None
    return _FileImports(importer).resolve_name(qualified)


class _FileImports:
    """Imports as one file of the project makes them."""

    def __init__(self, path: str) -> None:
        self.path = path

    def resolve_name(self, qualified: str) -> Resolved | None:
        """``models.build`` / ``.models.build`` / ``pkg.models.build`` from this file."""
        level = len(qualified) - len(qualified.lstrip("."))
        parts = qualified[level:].split(".") if qualified[level:] else []
        shown = qualified
        # The longest prefix that is a module of the project, then the rest as a name in it.
        for cut in range(len(parts), -1, -1):
            if not cut and not level:
                break
            module = ".".join(parts[:cut])
            path = self.module(module, level)
            if path is None:
                continue
            rest = parts[cut:]
            written = "." * level + module
            if not rest:
                return Resolved(shown, written, None, path)
            if len(rest) > 1:
                return None  # an attribute of what the module defines (``build.cache_clear``)
            return _resolve_in(shown, written, path, rest[0], set())
        top = parts[0] if parts else ""
        if level or self._looks_local(top):
            module = "." * level + ".".join(parts[:-1])
            return Resolved(shown, module, parts[-1] if parts else None, reason=(
                f"{module or qualified} is imported as a module of this project, but autofix cannot find it "
                f"from {os.path.basename(self.path)} (looked in {', '.join(self._searched())})"
            ))
        return None

    def module(self, module: str, level: int) -> str | None:
        found = layout.resolve_module(self.path, module, level)
        if found is None:
            for base in self._candidates(module, level):
                if _READ is not None:
                    _READ.setdefault(base, "")
        return found

    def _candidates(self, module: str, level: int) -> list[str]:
        parts = [p for p in module.split(".") if p]
        if level:
            base = os.path.dirname(os.path.abspath(self.path))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases = list(layout.search_paths(self.path))
        found = []
        for base in bases:
            folder = os.path.join(base, *parts) if parts else base
            found.extend([folder + ".py", os.path.join(folder, "__init__.py")])
        return found

    def _searched(self) -> list[str]:
        here = os.path.dirname(os.path.abspath(self.path))
        return [os.path.relpath(p, here) if p != here else "its folder" for p in layout.search_paths(self.path)]

    def _looks_local(self, top: str) -> bool:
        """A top-level module name that is not installed, nor a module of the standard library:
        the project's own, by the way it is written."""
        import importlib.util
        import sys

        if not top or top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
            return False
        try:
            return importlib.util.find_spec(top) is None
        except (ImportError, ValueError):
            return False


# Names a project module re-exports from a library read as that library's (see Program.reexported).
Program.reexported = staticmethod(library_reexport)  # type: ignore[assignment]
