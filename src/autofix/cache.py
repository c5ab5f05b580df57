"""The result cache: a file whose bytes, options and tool are unchanged is not analysed again.

Modelled on Ruff's. The cache lives in ``.autofix_cache/`` at the project root (the folder of
the ``pyproject.toml`` that configures the run, else the working directory), or in
``--cache-dir`` / ``AUTOFIX_CACHE_DIR``; the folder holds a ``.gitignore`` that ignores it
and a ``CACHEDIR.TAG`` for backup tools. ``--no-cache`` (or ``AUTOFIX_NO_CACHE=1``) neither
reads nor writes it. Deleting the folder at any time is safe.

Those two markers hide a folder from git, from backups and from autofix's own discovery, so
they are only ever written into a folder the cache owns: one it makes, an empty one, or one
that holds nothing but what a cache holds (:func:`owned`). A folder named with other things in
it (the project itself, ``--cache-dir .``, a shared ``~/.cache``) gets the cache in a
``.autofix_cache`` folder inside it (:func:`cache_folder`).

One entry per file and question, named by a hash of everything the answer depends on:

- the file's bytes (their digest), where it is (its absolute path: the same bytes in another
  folder belong to another project, whose modules the analysis reads, and their findings name
  other paths) and whether it is a notebook;
- the rules that run on it (``--select`` / ``--ignore`` and the per-file ignores already
  folded in), ``--unsafe-fixes``, ``--unused-suppressions``, and whether fixes are built
  (``check`` in most formats only asks whether one exists);
- the tool itself: its version, a hash of every source file of the package and of its rules
  (so an edit of a checkout invalidates), and the versions of Python, libcst and IPython.

A rule reads no other file itself (tests/test_cache.py checks it by running every fixture with
file reads forbidden; a rule that some day does sets ``Rule.CROSS_FILE``, and files are then
not cached while it runs: ``ResultCache.usable``). The analysis of a file read from disk does
read the modules of its project that it imports (:mod:`autofix.analysis.project`): the entry
records each of them with the digest of its bytes (or as absent), and is used only while
every one is still so (``ResultCache.get``): editing ``model.py`` re-checks ``train.py``.

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
import re
import sys
from dataclasses import dataclass
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


# The names a cache folder holds: its markers, a folder per version of the tool (holding a
# folder per fingerprint), and entries being written.
_VERSION_FOLDER = re.compile(r"^\d+(\.\d+)*[A-Za-z0-9.+_-]*$")
_TEMPORARY = re.compile(r"^\.entry-.*\.tmp$")


class CacheUnavailable(Exception):
    """The cache folder cannot be made or written; the message says why."""


def owned(directory: str) -> bool:
    """Whether ``directory`` (which exists) may hold the cache's markers: it is empty, or holds
    only what a cache folder holds (its own ``.gitignore`` and ``CACHEDIR.TAG``, version
    folders, entries being written). A folder with anything else in it is someone's."""
    for entry in os.scandir(directory):
        name = entry.name
        if name == ".gitignore":
            if _read(entry.path) != GITIGNORE:
                return False
        elif name == "CACHEDIR.TAG":
            if _read(entry.path) != CACHEDIR_TAG:
                return False
        elif _TEMPORARY.match(name) and entry.is_file(follow_symlinks=False):
            continue
        elif not (_VERSION_FOLDER.match(name) and entry.is_dir(follow_symlinks=False)):
            return False
    return True


def cache_folder(directory: str) -> str:
    """The folder the cache keeps itself in when asked to use ``directory``: ``directory``
    when it does not exist yet or the cache owns it (see :func:`owned`), else a
    ``.autofix_cache`` folder inside it. Raises :class:`CacheUnavailable` when it is a file or
    cannot be read."""
    try:
        if not os.path.exists(directory):
            return directory
        if not os.path.isdir(directory):
            raise CacheUnavailable(f"cannot use {directory}: it is a file, not a folder")
        if owned(directory):
            return directory
    except OSError as exc:
        raise CacheUnavailable(f"cannot use {directory}: {exc.strerror or exc}") from None
    return os.path.join(directory, DEFAULT_NAME)


def stray_markers(directory: str) -> list[str]:
    """The markers an earlier autofix wrote into ``directory`` although it is not a cache
    folder (it took any folder named for its cache): they hide that folder from git and from
    autofix itself. Named so that the user can remove them; never removed here."""
    found = []
    for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
        path = os.path.join(directory, name)
        if _read(path) == text:
            found.append(path)
    try:
        return [] if not found or owned(directory) else found
    except OSError:
        return []


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096)
    except OSError:
        return None


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
        found = []
        for directory, subfolders, files in os.walk(folder):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            found.extend(os.path.join(directory, name) for name in files if name.endswith(".py"))
        for path in sorted(found, key=lambda p: os.path.relpath(p, folder).split(os.sep)):
            h.update(os.path.relpath(path, folder).replace(os.sep, "/").encode("utf-8", "surrogateescape") + b"\0")
            try:
                with open(path, "rb") as fh:
                    h.update(fh.read())
            except OSError:
                h.update(b"<unreadable>")
            h.update(b"\0")
    return h.hexdigest()


def _version(distribution: str, module: str) -> str:
    """The installed version of ``distribution``, whose top-level module is ``module``: read
    from the name of the ``.dist-info`` folder beside the module (importing neither it nor
    importlib.metadata, which together cost a warm run a tenth of its time), else asked of
    importlib.metadata."""
    from importlib.util import find_spec

    try:
        spec = find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "none"
    if spec.submodule_search_locations:
        site = os.path.dirname(list(spec.submodule_search_locations)[0])
    else:
        site = os.path.dirname(spec.origin or "")
    prefix = distribution.lower().replace("-", "_") + "-"
    try:
        names = [n for n in os.listdir(site) if n.lower().startswith(prefix) and n.endswith(".dist-info")]
    except OSError:
        names = []
    if len(names) == 1:
        return names[0][len(prefix) : -len(".dist-info")]
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
        f"libcst {_version('libcst', 'libcst')}",
        f"ipython {_version('ipython', 'IPython')}",
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
        """The cache asked for in ``directory``: there, or in a folder inside it (see
        :func:`cache_folder`), made with its ``.gitignore`` and ``CACHEDIR.TAG`` if needed."""
        directory = cache_folder(directory)
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

    def key(self, digest: str, options: "Options", notebook: bool, path: str) -> str:
        """The entry for the file at ``path`` whose bytes have ``digest``, analysed with
        ``options`` (its per-file ignores already folded in). The same bytes elsewhere are
        another question: the project whose modules the analysis reads, and the paths its
        findings name, are those of where the file is."""
        question = [
            self.fingerprint,
            digest,
            os.path.normcase(os.path.abspath(path)),
            notebook,
            [rule.CODE for rule in options.rule_infos()],
            options.unsafe_fixes,
            options.unused_suppressions,
            options.build_fixes,
            options.migrate,
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
        key = self.key(source.digest, options, path.lower().endswith(".ipynb"), path)
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
            read = tuple((str(p), str(d)) for p, d in stored.get("read", ()))
            if not _still(read):
                return None
            findings = tuple(Finding(**{**f, "related": tuple(tuple(r) for r in f.get("related", ()))}) for f in stored["findings"])
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
                read=read,
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
                "read": [list(item) for item in result.read],
            },
        }
        try:
            _write_atomic(self.directory, self._path(key), json.dumps(entry).encode("utf-8"))
        except (OSError, ValueError):
            pass


def _still(read: tuple[tuple[str, str], ...]) -> bool:
    """Whether every project module an analysis read still has the bytes it had ("" : is
    still absent)."""
    if not read:
        return True
    from autofix.analysis.project.layout import MENTION, digest, mentions_still, pin_listing

    for path, wanted in read:
        if MENTION in path:
            # The files of a project that spell a name (its callers were looked for).
            if not mentions_still(path, wanted):
                return False
            continue
        if path.endswith(os.sep):
            # A folder whose files that may pin a TensorFlow version were listed.
            if pin_listing(path) != wanted:
                return False
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            if wanted:
                return False
            continue
        if not wanted or digest(data) != wanted:
            return False
    return True


def _write_atomic(directory: str, target: str, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file renamed over it: a reader sees
    the old entry, the new one, or none, never part of one."""
    import tempfile

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
