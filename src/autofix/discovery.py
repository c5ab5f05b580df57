"""From the paths on the command line to the files to analyse.

Directories are walked; ``.gitignore`` files are honoured (with git's own pattern rules, via
pathspec), as are ``--exclude`` and ``--include`` globs; virtualenvs, site-packages, caches and
build folders are skipped. Symlinks are followed only when they point inside the tree being
walked, and each file is yielded once. A symlink is judged twice: as the path it is found at,
and as every path it leads through to its file (a chain of links included), so a link to an
excluded or ignored file, or into a skipped folder, is skipped as that file is: a fix is never
written through a link into a file the configuration keeps autofix away from. Exclude globs are
matched relative to ``root`` (the directory of the configuration that set them, else the
working directory). A file named explicitly is always analysed, as with Ruff, unless
``force_exclude`` is set (what pre-commit hooks want, since they name every staged file); then
the file a named link leads to is judged by the excludes too.

pathspec is imported only when a glob has to be matched: the default ``--include`` globs
(``*.py``, ``*.ipynb``) are name suffixes, and a tree without ``.gitignore`` files or excludes
needs no other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Sequence

if TYPE_CHECKING:
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
        ".autofix_cache",
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
# Links followed at most (the kernel's own limit).
MAX_LINKS = 40
_GLOB_CHARACTERS = frozenset("*?[]!\\/")


def spec(patterns: Sequence[str]) -> "pathspec.PathSpec":
    """Gitignore-style patterns, compiled."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


class Names:
    """Which file names ``--include`` picks up: plain ``*.suffix`` globs are compared as
    suffixes (no pathspec needed), anything else is matched as a gitignore pattern."""

    def __init__(self, patterns: Sequence[str]) -> None:
        suffixes = [p[1:] for p in patterns if p.startswith("*") and not _GLOB_CHARACTERS & set(p[1:])]
        self.suffixes = tuple(suffixes) if len(suffixes) == len(patterns) else None
        self._spec = None if self.suffixes is not None else spec(patterns)

    def match(self, name: str) -> bool:
        if self.suffixes is not None:
            return name.endswith(self.suffixes)
        return self._spec.match_file(name)


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
        self._include = Names(self.include)
        self._exclude = spec(self.exclude) if self.exclude else None
        # Directory -> its .gitignore (None when it has none), read once.
        self._gitignores: dict[str, "pathspec.PathSpec | None"] = {}

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
        only with ``force_exclude``, when it or a path its links lead through is excluded."""
        if not self.force_exclude:
            return False
        return any(self._excluded(hop, False, self._exclude) for hop in (path, *link_chain(path)))

    def excluded_file(self, path: str) -> bool:
        """Whether the exclude globs match ``path`` or a folder it is in (below the root)."""
        if self._exclude is None:
            return False
        if self._excluded(path, False, self._exclude):
            return True
        folder = os.path.dirname(os.path.abspath(path))
        base = os.path.abspath(self.root or ".")
        while folder.startswith(base + os.sep):
            if self._excluded(folder, True, self._exclude):
                return True
            folder = os.path.dirname(folder)
        return False

    def _relative(self, path: str) -> str:
        return relative_to(path, self.root)

    def _below(self, directory: str) -> "pathspec.PathSpec | None":
        """The exclude globs to use inside a directory named on the command line: those that
        would exclude the directory itself are dropped (asking for it overrides them, unless
        ``force_exclude``), so ``autofix check examples/demo`` works even if ``examples/`` is
        excluded."""
        if self.force_exclude or not self.exclude:
            return self._exclude
        relative = self._relative(directory).rstrip("/") + "/"
        if relative == "./":
            return self._exclude
        kept = [p for p in self.exclude if not spec([p]).match_file(relative)]
        return spec(kept) if kept else None

    def _excluded(self, path: str, is_dir: bool, exclude: "pathspec.PathSpec | None") -> bool:
        if exclude is None:
            return False
        suffix = "/" if is_dir else ""
        return exclude.match_file(self._relative(path) + suffix) or exclude.match_file(os.path.basename(path) + suffix)

    def _gitignore(self, directory: str) -> "pathspec.PathSpec | None":
        key = os.path.realpath(directory)
        if key not in self._gitignores:
            self._gitignores[key] = _read_gitignore(directory)
        return self._gitignores[key]

    def _walk(
        self,
        directory: str,
        root: str,
        ignores: list[tuple[str, "pathspec.PathSpec"]],
        visited: set[str],
        exclude: "pathspec.PathSpec | None",
    ) -> Iterator[str]:
        if self.respect_gitignore:
            found = self._gitignore(directory)
            if found is not None:
                ignores = [*ignores, (directory, found)]
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
            if is_link and not self._leads_to_admitted(path, root, exclude):
                continue
            if _ignored(path, is_dir, ignores) or self._excluded(path, is_dir, exclude):
                continue
            if is_dir:
                real = os.path.realpath(path)
                if entry.name in SKIP_DIRS or real in visited or _is_virtualenv(path):
                    continue
                yield from self._walk(path, root, ignores, visited | {real}, exclude)
            elif entry.is_file() and self._include.match(entry.name):
                yield path

    def _leads_to_admitted(self, link: str, root: str, exclude: "pathspec.PathSpec | None") -> bool:
        """Whether every path the link ``link`` leads through (its chain of links, then its
        file or folder) lies in the tree and would be walked into or picked up there."""
        chain = link_chain(link)
        return bool(chain) and all(_inside(hop, root) and self._admitted(hop, root, exclude) for hop in chain)

    def _admitted(self, path: str, root: str, exclude: "pathspec.PathSpec | None") -> bool:
        """Whether the walk from ``root`` would reach ``path`` (absolute, inside ``root``): no
        folder on the way, nor the path itself, is skipped, excluded or git-ignored."""
        if path == root:
            return True
        parts = os.path.relpath(path, root).split(os.sep)
        ignores: list[tuple[str, "pathspec.PathSpec"]] = []
        current = root
        for depth, name in enumerate(parts):
            if self.respect_gitignore:
                found = self._gitignore(current)
                if found is not None:
                    ignores.append((current, found))
            current = os.path.join(current, name)
            last = depth == len(parts) - 1
            is_dir = not last or os.path.isdir(current)
            if _ignored(current, is_dir, ignores) or self._excluded(current, is_dir, exclude):
                return False
            if is_dir and (name in SKIP_DIRS or _is_virtualenv(current)):
                return False
        return True


def link_chain(path: str) -> list[str]:
    """The absolute paths a symlink leads through, one per link followed, the last being the
    real path of what it finally names; empty when ``path`` is not a link (a folder on its way
    may be one: then its real path alone)."""
    real = os.path.realpath(path)
    chain: list[str] = []
    current = os.path.abspath(path)
    for _ in range(MAX_LINKS):
        try:
            target = os.readlink(current)
        except OSError:
            break  # not a link (any more)
        current = os.path.join(os.path.realpath(os.path.dirname(current)), target)
        current = os.path.normpath(current)
        chain.append(current)
    if real != os.path.abspath(path) and (not chain or chain[-1] != real):
        chain.append(real)
    return chain


def relative_to(path: str, root: str | None) -> str:
    """``path`` relative to ``root`` (default: the working directory), with forward slashes, as
    globs are matched; a path outside it is its base name. A path reached through a link (a
    real path, when ``root`` is written through a link, or the other way round) is compared
    by real paths."""
    base = root or os.getcwd()
    relative = os.path.relpath(os.path.abspath(path), base)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        relative = os.path.relpath(os.path.realpath(path), os.path.realpath(base))
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return os.path.basename(path)
    return relative.replace(os.sep, "/")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _read_gitignore(directory: str) -> "pathspec.PathSpec | None":
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as fh:
            return spec(fh.read().splitlines())
    except OSError:
        return None


def _ignored(path: str, is_dir: bool, ignores: list[tuple[str, "pathspec.PathSpec"]]) -> bool:
    """Git's rule: the deepest .gitignore with a matching pattern decides (``!`` re-includes)."""
    for base, found in reversed(ignores):
        relative = os.path.relpath(path, base)
        decision = found.check_file(relative + "/" if is_dir else relative).include
        if decision is not None:
            return decision
    return False


def _is_virtualenv(path: str) -> bool:
    return os.path.exists(os.path.join(path, "pyvenv.cfg")) or os.path.exists(
        os.path.join(path, "conda-meta")
    )
