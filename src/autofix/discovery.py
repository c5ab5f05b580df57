"""From the paths on the command line to the files to analyse.

Directories are walked; ``.gitignore`` files are honoured (with git's own pattern rules, via
pathspec), as are ``--exclude`` and ``--include`` globs; virtualenvs, site-packages, caches and
build folders are skipped. Symlinks are followed only when they point inside the tree being
walked, and each file is yielded once. A file named explicitly is always analysed unless an
``--exclude`` glob matches it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pathspec

DEFAULT_INCLUDE = ("*.py", "*.ipynb")
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        ".eggs",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        "site-packages",
        "dist-packages",
        "node_modules",
        "build",
        "dist",
        "_build",
        "buck-out",
    }
)


@dataclass
class Discovery:
    include: Sequence[str] = DEFAULT_INCLUDE
    exclude: Sequence[str] = ()
    respect_gitignore: bool = True
    # Paths that were given but do not exist, with why.
    missing: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._include = pathspec.GitIgnoreSpec.from_lines(list(self.include))
        self._exclude = pathspec.GitIgnoreSpec.from_lines(list(self.exclude))

    def files(self, paths: Sequence[str]) -> Iterator[str]:
        seen: set[str] = set()
        for path in paths:
            if os.path.isdir(path):
                root = os.path.realpath(path)
                for found in self._walk(path, root, [], {root}):
                    key = os.path.realpath(found)
                    if key not in seen:
                        seen.add(key)
                        yield found
            elif os.path.lexists(path):
                key = os.path.realpath(path)
                if key not in seen and not self._excluded(path, os.path.basename(path), False):
                    seen.add(key)
                    yield path
            else:
                self.missing.append(path)

    def _excluded(self, relative: str, name: str, is_dir: bool) -> bool:
        candidate = relative + "/" if is_dir else relative
        return self._exclude.match_file(candidate) or self._exclude.match_file(name + ("/" if is_dir else ""))

    def _walk(self, directory: str, root: str, ignores: list[tuple[str, pathspec.PathSpec]], visited: set[str]) -> Iterator[str]:
        if self.respect_gitignore:
            spec = _gitignore(directory)
            if spec is not None:
                ignores = [*ignores, (directory, spec)]
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = entry.path
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()  # follows links
            except OSError:
                continue
            if is_link:
                target = os.path.realpath(path)
                if not (target == root or target.startswith(root + os.sep)):
                    continue  # never leave the tree
            relative = os.path.relpath(path, root)
            if _ignored(path, is_dir, ignores) or self._excluded(relative, entry.name, is_dir):
                continue
            if is_dir:
                real = os.path.realpath(path)
                if entry.name in SKIP_DIRS or real in visited or _is_virtualenv(path):
                    continue
                yield from self._walk(path, root, ignores, visited | {real})
            elif entry.is_file() and self._include.match_file(entry.name):
                yield path


def _gitignore(directory: str) -> pathspec.PathSpec | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as fh:
            return pathspec.GitIgnoreSpec.from_lines(fh)
    except OSError:
        return None


def _ignored(path: str, is_dir: bool, ignores: list[tuple[str, pathspec.PathSpec]]) -> bool:
    """Git's rule: the deepest .gitignore with a matching pattern decides (``!`` re-includes)."""
    for base, spec in reversed(ignores):
        relative = os.path.relpath(path, base)
        decision = spec.check_file(relative + "/" if is_dir else relative).include
        if decision is not None:
            return decision
    return False


def _is_virtualenv(path: str) -> bool:
    return os.path.exists(os.path.join(path, "pyvenv.cfg")) or os.path.exists(
        os.path.join(path, "conda-meta")
    )
