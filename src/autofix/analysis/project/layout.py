"""Where a file's project is, and which of its files an import names.

The root is the nearest folder, from the file's own up, holding ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``; for a file in no such folder, the folder autofix runs
in when the file is under it (the folder given: ``autofix migrate .``), else the file's own. Modules are looked for as Python would find them when the file is run: in the file's
own folder (``sys.path[0]`` of a script), then at the root and in ``src/`` under it (a package
installed from the repository, or run with ``python -m``), and only inside the root: what
resolves elsewhere (an installed library) is not the project's.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(path: str) -> str:
    """The root of the project ``path`` (a file) belongs to: the nearest folder holding a
    marker; else the folder autofix runs in (``autofix migrate .`` in a checkout without
    one), when the file is under it; else the file's own folder."""
    return _root(os.path.abspath(path), os.getcwd())


@lru_cache(maxsize=256)
def _root(path: str, cwd: str) -> str:
    folder = os.path.dirname(path)
    current = folder
    while True:
        if any(os.path.exists(os.path.join(current, marker)) for marker in MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return cwd if inside(folder, cwd) else folder


def search_paths(path: str) -> tuple[str, ...]:
    """Where absolute imports of ``path`` are looked for, in order (inside its project)."""
    root = project_root(path)
    found = [os.path.dirname(os.path.abspath(path)), root, os.path.join(root, "src")]
    return tuple(dict.fromkeys(p for p in found if os.path.isdir(p)))


def _module_file(base: str, parts: list[str]) -> str | None:
    """``a/b/c.py`` or ``a/b/c/__init__.py`` under ``base`` (every folder on the way a
    package or a namespace folder)."""
    if not parts:
        init = os.path.join(base, "__init__.py")
        return init if os.path.isfile(init) else None
    folder = os.path.join(base, *parts)
    for candidate in (folder + ".py", os.path.join(folder, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def inside(path: str, root: str) -> bool:
    path, root = os.path.abspath(path), os.path.abspath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_module(importer: str, module: str, level: int = 0) -> str | None:
    """The project file of ``module`` imported by the file ``importer`` (``level`` leading
    dots for a relative import), or None when it is not one of the project's own modules."""
    parts = [p for p in module.split(".") if p] if module else []
    root = project_root(importer)
    if level:
        base = os.path.dirname(os.path.abspath(importer))
        for _ in range(level - 1):
            base = os.path.dirname(base)
        found = _module_file(base, parts)
        return found if found is not None and inside(found, root) else None
    if not parts:
        return None
    for base in search_paths(importer):
        found = _module_file(base, parts)
        if found is not None and inside(found, root):
            return os.path.normpath(found)
    return None


def is_package(path: str) -> bool:
    return os.path.basename(path) == "__init__.py"


def _may_pin(name: str) -> bool:
    lower = name.lower()
    return (
        (lower.startswith("requirements") and lower.endswith(".txt"))
        or lower in ("setup.py", "setup.cfg", "pyproject.toml", "makefile", "gnumakefile")
        or (lower.startswith(("environment", "conda")) and lower.endswith((".yml", ".yaml")))
        or lower.startswith("dockerfile")
        or lower.endswith((".dockerfile", ".sh"))
    )


def pin_files(folder: str) -> list[str]:
    """The names of the files in ``folder`` that may pin the TensorFlow or Keras its programs
    run on (requirements files, setup and project files, conda environments, Dockerfiles,
    shell scripts, a Makefile), sorted; :mod:`.pins` reads them."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if _may_pin(n) and os.path.isfile(os.path.join(folder, n)))


def pin_listing(folder: str) -> str:
    """The digest of :func:`pin_files` of ``folder``: the result cache checks by it that no
    such file was added or removed."""
    return digest("\n".join(pin_files(folder)).encode("utf-8"))


def digest(data: bytes) -> str:
    """The digest that names a module's content: summaries are kept by it, and the result
    cache checks the modules an analysis read by it (this module imports nothing heavy)."""
    return hashlib.blake2b(data, digest_size=20).hexdigest()
