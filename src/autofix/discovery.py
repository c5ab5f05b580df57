"""From the paths on the command line to the files to analyse.

Directories are walked; ``.gitignore`` files are honoured (with git's own pattern rules, via
pathspec), as are ``--exclude`` and ``--include`` globs; virtualenvs, site-packages, caches and
build folders are skipped. Symlinks are followed only when they point inside the tree being
walked, and each file is yielded once. Exclude globs are matched relative to ``root`` (the
directory of the configuration that set them, else the working directory). A file named
explicitly is always analysed, as with Ruff, unless ``force_exclude`` is set (what pre-commit
hooks want, since they name every staged file).
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
    force_exclude: bool = False
    root: str | None = None
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
                exclude = self._below(path)
                for found in self._walk(path, root, [], {root}, exclude):
                    key = os.path.realpath(found)
                    if key not in seen:
                        seen.add(key)
                        yield found
            elif os.path.lexists(path):
                key = os.path.realpath(path)
                if key not in seen and not self.excludes_named(path):
                    seen.add(key)
                    yield path
            else:
                self.missing.append(path)

    def excludes_named(self, path: str) -> bool:
        """Whether ``path``, named on the command line (or as ``--stdin-filename``), is skipped:
        only with ``force_exclude``."""
        return self.force_exclude and self._excluded(path, False, self._exclude)

    def _relative(self, path: str) -> str:
        relative = os.path.relpath(os.path.abspath(path), self.root or os.getcwd()).replace(os.sep, "/")
        return os.path.basename(path) if relative.startswith("../") or relative == ".." else relative

    def _below(self, directory: str) -> pathspec.PathSpec:
        """The exclude globs to use inside a directory named on the command line: those that
        would exclude the directory itself are dropped (asking for it overrides them, unless
        ``force_exclude``), so ``autofix check examples/demo`` works even if ``examples/`` is
        excluded."""
        if self.force_exclude or not self.exclude:
            return self._exclude
        relative = self._relative(directory).rstrip("/") + "/"
        if relative == "./":
            return self._exclude
        kept = [p for p in self.exclude if not pathspec.GitIgnoreSpec.from_lines([p]).match_file(relative)]
        return pathspec.GitIgnoreSpec.from_lines(kept)

    def _excluded(self, path: str, is_dir: bool, spec: pathspec.PathSpec) -> bool:
        suffix = "/" if is_dir else ""
        return spec.match_file(self._relative(path) + suffix) or spec.match_file(os.path.basename(path) + suffix)

    def _walk(
        self,
        directory: str,
        root: str,
        ignores: list[tuple[str, pathspec.PathSpec]],
        visited: set[str],
        exclude: pathspec.PathSpec,
    ) -> Iterator[str]:
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
            if _ignored(path, is_dir, ignores) or self._excluded(path, is_dir, exclude):
                continue
            if is_dir:
                real = os.path.realpath(path)
                if entry.name in SKIP_DIRS or real in visited or _is_virtualenv(path):
                    continue
                yield from self._walk(path, root, ignores, visited | {real}, exclude)
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
