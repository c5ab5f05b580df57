"""``[tool.autofix]`` in ``pyproject.toml``.

The table is looked for in the directory of the paths given (their common parent; the working
directory for ``-``), then in each parent up to and including the root of the git work tree
(a directory holding ``.git``): the first ``pyproject.toml`` with a ``[tool.autofix]`` table
wins, and a ``pyproject.toml`` without one is passed over. Keys follow Ruff's spelling::

    [tool.autofix]
    select = ["TFD001", "TFD002"]      # rules to run (codes or prefixes; default: all)
    ignore = ["TFD005"]                # rules to skip
    unsafe-fixes = false               # also apply unsafe fixes (TFD005; TFD002 on a batch not said per replica)
    include = ["*.py"]                 # file names picked up in directories
    exclude = ["legacy/"]              # gitignore-style globs of paths to skip
    extend-exclude = ["scratch/"]      # more globs, kept even when --exclude is given
    respect-gitignore = true           # honour .gitignore files
    force-exclude = false              # apply exclude to files named on the command line too
    per-file-ignores = {"tests/*" = ["TFD002"]}   # globs relative to the pyproject's directory

A command-line option replaces the key it corresponds to (``--select`` replaces ``select``,
``--exclude`` replaces ``exclude``, ``--no-unsafe-fixes`` turns ``unsafe-fixes`` off...);
``extend-exclude`` and ``per-file-ignores`` have no command-line twin and always apply. An
unknown key, a value of the wrong type or an unknown rule code is a :class:`ConfigError` that
names the file and the key.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from autofix import registry
from autofix.discovery import DEFAULT_INCLUDE, Discovery
from autofix.options import Options

FILENAME = "pyproject.toml"


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Settings:
    """What ``[tool.autofix]`` says; the defaults when there is none (``path`` None)."""

    path: str | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def root(self) -> str | None:
        return os.path.dirname(os.path.abspath(self.path)) if self.path else None

    def options(
        self,
        select: tuple[str, ...] | None = None,
        ignore: tuple[str, ...] | None = None,
        unsafe_fixes: bool | None = None,
    ) -> Options:
        """Engine options: each argument that is not None replaces its key."""
        return Options(
            select=select if select is not None else self.select,
            ignore=ignore if ignore is not None else self.ignore,
            unsafe_fixes=unsafe_fixes if unsafe_fixes is not None else self.unsafe_fixes,
            per_file_ignores=self.per_file_ignores,
            root=self.root,
        )

    def discovery(
        self,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        respect_gitignore: bool | None = None,
        force_exclude: bool | None = None,
    ) -> Discovery:
        """File discovery: a non-empty ``include``/``exclude`` or a ``respect_gitignore`` that is
        not None replaces its key; ``extend-exclude`` is always added."""
        return Discovery(
            include=tuple(include) or self.include or DEFAULT_INCLUDE,
            exclude=(*(tuple(exclude) or self.exclude), *self.extend_exclude),
            respect_gitignore=self.respect_gitignore if respect_gitignore is None else respect_gitignore,
            force_exclude=self.force_exclude if force_exclude is None else force_exclude,
            # The table's globs are relative to its file; the command line's to the cwd.
            root=None if exclude else self.root,
        )


def _strings(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(key, "a list of strings", value)
    return tuple(value)


def _codes(key: str, value: Any) -> tuple[str, ...]:
    codes = tuple(code.strip().upper() for code in _strings(key, value) if code.strip())
    for code in codes:
        try:
            registry.select((code,))
        except registry.UnknownRule:
            raise ConfigError(f"{key}: unknown rule code {code!r}; see `autofix rules`") from None
    return codes


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(key, "true or false", value)
    return value


def _per_file_ignores(key: str, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise _bad(key, 'a table of glob = ["CODE", ...]', value)
    return tuple((pattern, _codes(f"{key}.{pattern!r}", codes)) for pattern, codes in value.items())


def _bad(key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{key}: expected {expected}, got {value!r}")


# TOML key -> (Settings field, parser of the value).
KEYS = {
    "select": ("select", _codes),
    "ignore": ("ignore", _codes),
    "unsafe-fixes": ("unsafe_fixes", _bool),
    "include": ("include", _strings),
    "exclude": ("exclude", _strings),
    "extend-exclude": ("extend_exclude", _strings),
    "respect-gitignore": ("respect_gitignore", _bool),
    "force-exclude": ("force_exclude", _bool),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
}

def parse(table: dict, path: str | None = None) -> Settings:
    """Settings from a ``[tool.autofix]`` table read from ``path``."""
    where = f"{path or FILENAME}: [tool.autofix]"
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise ConfigError(f"{where}: unknown key {key!r} (known keys: {known})")
        name, parser = KEYS[key]
        try:
            values[name] = parser(key, value)
        except ConfigError as exc:
            raise ConfigError(f"{where} {exc}") from None
    return Settings(path=path, **values)


def _toml():
    """The TOML reader, imported when a ``pyproject.toml`` is read (a run in a folder without
    one does without it)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    return tomllib


def read(path: str) -> Settings | None:
    """The settings in the ``pyproject.toml`` at ``path``; None when it has no ``[tool.autofix]``."""
    tomllib = _toml()
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    tool = document.get("tool")
    if not isinstance(tool, dict) or "autofix" not in tool:
        return None
    table = tool["autofix"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.autofix] must be a table")
    return parse(table, path)


def find(paths: Sequence[str], stdin_filename: str | None = None) -> str | None:
    """The ``pyproject.toml`` that configures ``paths`` (see the module docstring), if any."""
    for directory in _upwards(_start(paths, stdin_filename)):
        candidate = os.path.join(directory, FILENAME)
        if os.path.isfile(candidate) and _has_table(candidate):
            return candidate
        if os.path.exists(os.path.join(directory, ".git")):
            return None
    return None


def load(
    paths: Sequence[str], stdin_filename: str | None = None, config: str | None = None, isolated: bool = False
) -> Settings:
    """The settings for a run: from ``config`` when given, none when ``isolated``, else found."""
    if isolated:
        return Settings()
    if config:
        found = read(config)
        if found is None:
            raise ConfigError(f"{config}: no [tool.autofix] table")
        return found
    path = find(paths, stdin_filename)
    return (read(path) or Settings()) if path else Settings()


def _start(paths: Sequence[str], stdin_filename: str | None) -> str:
    named = [stdin_filename] if paths == ("-",) and stdin_filename else [p for p in paths if p != "-"]
    if not named:
        return os.getcwd()
    directories = [p if os.path.isdir(p) else os.path.dirname(p) or "." for p in named]
    try:
        return os.path.commonpath([os.path.abspath(d) for d in directories])
    except ValueError:  # different drives
        return os.path.abspath(directories[0])


def _upwards(start: str):
    directory = os.path.abspath(start)
    while True:
        yield directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def _has_table(path: str) -> bool:
    tomllib = _toml()
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        # It may be the file meant to configure the run: let read() report it rather than
        # silently falling back to a configuration further up.
        return True
    tool = document.get("tool")
    return isinstance(tool, dict) and "autofix" in tool
