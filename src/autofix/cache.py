"""The result cache: a file whose bytes, options and tool are unchanged is not analysed again.

Modelled on Ruff's. The cache lives in ``.autofix_cache/`` at the project root (the folder of
the ``pyproject.toml`` that configures the run, else the working directory), or in
``--cache-dir`` / ``AUTOFIX_CACHE_DIR``; the folder holds a ``.gitignore`` that ignores it
and a ``CACHEDIR.TAG`` for backup tools. ``--no-cache`` (or ``AUTOFIX_NO_CACHE=1``) neither
reads nor writes it. Deleting the folder at any time is safe.

One entry per file and question, named by a hash of everything the answer depends on:

- the file's bytes (their digest) and whether it is a notebook;
- the rules that run on it (``--select`` / ``--ignore`` and the per-file ignores already
  folded in), ``--unsafe-fixes``, ``--unused-suppressions``, and whether fixes are built
  (``check`` in most formats only asks whether one exists);
- the tool itself: its version, a hash of every source file of the package and of its rules
  (so an edit of a checkout invalidates), and the versions of Python, libcst and IPython.

A rule's result depends on nothing else: no rule reads another file (an imported helper is
judged at its call site), which tests/test_cache.py checks by running every fixture with file
reads forbidden. A rule that some day reads other files sets ``Rule.CROSS_FILE``; files are
then not cached while it runs (``ResultCache.usable``).

Every file is cached, those the prefilter passes over too, and the folder records what the
rules are (``rules.json``, per version of the tool): a warm run imports neither the rules nor
libcst. Writes go to a temporary file in the cache folder renamed over the entry, so
concurrent runs never see half an entry; an entry that cannot be read or does not hold its own
key is a miss. Internal errors (a bug, a worker that died) are not cached. ``fix`` never takes
fixed text from the cache: what it writes, it computed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from autofix import __version__, registry
from autofix.results import FileResult, Finding
from autofix.sourcefile import Source, SourceError, read_source

if TYPE_CHECKING:
    from autofix.options import Options

DEFAULT_NAME = ".autofix_cache"
ENV_DIR = "AUTOFIX_CACHE_DIR"
ENV_OFF = "AUTOFIX_NO_CACHE"
# Bumped when the layout of an entry changes.
FORMAT = 1

GITIGNORE = "# Made by autofix: this folder is its result cache.\n*\n"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by autofix.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


class CacheUnavailable(Exception):
    """The cache folder cannot be made or written; the message says why."""


def disabled_by_environment() -> bool:
    return os.environ.get(ENV_OFF, "").strip().lower() not in ("", "0", "false", "no")


def default_directory(project_root: str | None) -> str:
    """Where the cache lives when ``--cache-dir`` is not given."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return os.path.abspath(explicit)
    return os.path.join(project_root or os.getcwd(), DEFAULT_NAME)


def source_digest(folders: Iterable[str]) -> str:
    """A hash of every Python source file under ``folders`` (names and bytes)."""
    h = hashlib.blake2b(digest_size=16)
    for folder in folders:
        root = Path(folder)
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            h.update(str(path.relative_to(root)).encode("utf-8", "surrogateescape") + b"\0")
            try:
                h.update(path.read_bytes())
            except OSError:
                h.update(b"<unreadable>")
            h.update(b"\0")
    return h.hexdigest()


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


@functools.lru_cache(maxsize=1)
def tool_fingerprint() -> str:
    """What makes this autofix this autofix: its version, its sources and rules, and the
    versions of what its results depend on."""
    import autofix
    import autofix.codemods

    folders = [os.path.dirname(autofix.__file__), *autofix.codemods.__path__]
    parts = [
        f"format {FORMAT}",
        f"autofix {__version__}",
        f"sources {source_digest(folders)}",
        f"python {sys.version} {sys.implementation.cache_tag}",
        f"libcst {_version('libcst')}",
        f"ipython {_version('ipython')}",
    ]
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class ResultCache:
    """One run's view of the cache: the folder of entries made by this very tool."""

    directory: str
    fingerprint: str
    # Whether a cached fixed text may be used. ``fix`` says no: the text it writes is text
    # it computed itself, whatever the cache folder holds.
    fixes: bool = True

    @classmethod
    def open(cls, directory: str, fixes: bool = True) -> "ResultCache":
        """The cache in ``directory`` (made, with its ``.gitignore``, if needed)."""
        fingerprint = tool_fingerprint()
        bucket = os.path.join(directory, __version__, fingerprint)
        try:
            os.makedirs(bucket, exist_ok=True)
            for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
                marker = os.path.join(directory, name)
                if not os.path.exists(marker):
                    _write_atomic(directory, marker, text.encode())
            if not os.access(bucket, os.W_OK):
                raise PermissionError(13, "permission denied")
        except OSError as exc:
            raise CacheUnavailable(f"cannot use {directory}: {exc.strerror or exc}") from None
        return cls(bucket, fingerprint, fixes)

    @staticmethod
    def usable(options: "Options") -> bool:
        """Whether results under ``options`` may be cached: not when a rule that runs reads
        other files (their content is not in the key), nor for ``--add-noqa``."""
        return not options.add_noqa and not any(rule.CROSS_FILE for rule in options.rule_infos())

    def known_rules(self) -> tuple[registry.RuleInfo, ...]:
        """Every rule of this autofix, described: recorded in the cache folder by the first
        run, so that later runs need not import the rules (and libcst) to know them."""
        path = os.path.join(self.directory, "rules.json")
        try:
            with open(path, "rb") as fh:
                return tuple(registry.RuleInfo(**item) for item in json.loads(fh.read()))
        except (OSError, ValueError, TypeError):
            pass
        found = registry.infos()
        try:
            _write_atomic(self.directory, path, json.dumps([info.as_json() for info in found]).encode())
        except OSError:
            pass
        return found

    def key(self, digest: str, options: "Options", notebook: bool) -> str:
        """The entry for a file whose bytes have ``digest``, analysed with ``options`` (its
        per-file ignores already folded in)."""
        question = [
            self.fingerprint,
            digest,
            notebook,
            [rule.CODE for rule in options.rule_infos()],
            options.unsafe_fixes,
            options.unused_suppressions,
            options.build_fixes,
        ]
        return hashlib.blake2b(json.dumps(question).encode(), digest_size=20).hexdigest()

    def find(self, source: Source, path: str, options: "Options", write: bool) -> tuple[str | None, FileResult | None]:
        """The key under which the result for ``path`` (read as ``source``, its per-file
        ignores folded into ``options``) is kept, None when it is not cached; and the result
        kept there when it may be used. Text that ``write`` would write is never taken from
        the cache: a kept result with a fix is then a miss."""
        # Files the prefilter passes over are cached too: a warm run then never loads the
        # engine.
        if not self.usable(options):
            return None, None
        key = self.key(source.digest, options, path.lower().endswith(".ipynb"))
        result = self.get(key, path, source.text)
        if result is not None and result.changed and (write or not self.fixes):
            result = None
        return key, result

    def lookup(self, path: str, options: "Options", write: bool = False) -> FileResult | None:
        """The result for ``path`` from the cache, ready to hand out; None on a miss (or
        when the file cannot be read: the engine says why)."""
        try:
            source = read_source(path)
        except (SourceError, OSError):
            return None
        _, result = self.find(source, path, options.for_path(path), write)
        return None if result is None else result.settled(source.encoding, source.bom, source.digest)

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key + ".json")

    def get(self, key: str, path: str, text: str) -> FileResult | None:
        """The cached result for ``key`` as a result for ``path`` (whose text is ``text``), or
        None when there is none that can be trusted."""
        try:
            with open(self._path(key), "rb") as fh:
                entry = json.loads(fh.read())
            if entry.get("key") != key:
                return None
            stored = entry["result"]
            findings = tuple(Finding(**f) for f in stored["findings"])
            new_text = stored["new_text"]
            return FileResult(
                path,
                findings,
                old_text=text if new_text is not None else None,
                new_text=new_text,
                error=stored["error"],
                refused=stored["refused"],
                notebook=stored["notebook"],
                skipped=stored["skipped"],
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, result: FileResult) -> None:
        """Store ``result`` for ``key``; a cache that cannot be written is simply not used."""
        entry = {
            "key": key,
            "result": {
                "findings": [dataclasses.asdict(f) for f in result.findings],
                "new_text": result.new_text if result.changed else None,
                "error": result.error,
                "refused": result.refused,
                "notebook": result.notebook,
                "skipped": result.skipped,
            },
        }
        try:
            _write_atomic(self.directory, self._path(key), json.dumps(entry).encode("utf-8"))
        except (OSError, ValueError):
            pass


def _write_atomic(directory: str, target: str, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file renamed over it: a reader sees
    the old entry, the new one, or none, never part of one."""
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".entry-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
