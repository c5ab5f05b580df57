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
import re
from functools import lru_cache

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(path: str) -> str:
    """The root of the project ``path`` (a file) belongs to: the nearest folder holding a
    marker; else the folder autofix runs in (``autofix migrate .`` in a checkout without
    one), when the file is under it; else the file's own folder."""
    return _root(os.path.abspath(path), os.getcwd())


def marked_project(path: str) -> bool:
    """Whether the file ``path`` belongs to a project marked as one (a folder above it holds
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``), so that its modules are all
    in view; not a folder of loose scripts."""
    return _marked(project_root(path))


def _marked(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, marker)) for marker in MARKERS)


@lru_cache(maxsize=256)
def _root(path: str, cwd: str) -> str:
    folder = os.path.dirname(path)
    current = folder
    while True:
        if _marked(current):
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
    # ``from ai_api.ai_models.facenet.model import X`` in ``AIServer/ai_api/ai_models/facenet/
    # train.py``: the file's own package, imported from the folder it sits in (run from there,
    # or with that folder on PYTHONPATH).
    child = os.path.dirname(os.path.abspath(importer))
    while inside(child, root) and child != root:
        parent = os.path.dirname(child)
        if os.path.basename(child) == parts[0]:
            found = _module_file(parent, parts)
            if found is not None and inside(found, root):
                return os.path.normpath(found)
        child = parent
    return None


def is_package(path: str) -> bool:
    return os.path.basename(path) == "__init__.py"


# What names a Python file that submits training jobs (only such files are read for pins: a
# pin file's edit re-checks every file below its folder).
_LAUNCHER_WORDS = frozenset({"job", "jobs", "submit", "launch", "launcher", "sagemaker", "azureml", "aml", "vertex", "estimator"})


def _may_pin(name: str) -> bool:
    lower = name.lower()
    return (
        (lower.startswith("requirements") and lower.endswith(".txt"))
        or lower in ("setup.py", "setup.cfg", "pyproject.toml", "makefile", "gnumakefile", ".env")
        # conda environments, compose files, Kubernetes / Kubeflow / Vertex manifests (not a
        # hidden file: CI configurations are not how the program runs)
        or (lower.endswith((".yml", ".yaml")) and not lower.startswith("."))
        or lower.startswith("dockerfile")
        or lower.endswith((".dockerfile", ".sh"))
        # a Python job launcher by its name (``job.py``, ``submit_training.py``,
        # ``sagemaker_launch.py``): read by :mod:`.pins`
        or lower.endswith(".py") and bool(set(re.split(r"[^a-z]+", lower[:-3])) & _LAUNCHER_WORDS)
        or is_readme(name)
    )


def is_readme(name: str) -> bool:
    """A README (``README.md``, ``README.rst``, ``README.txt``, ``README``): its install
    commands name a TensorFlow when no other file of the repository pins one."""
    lower = name.lower()
    return lower in ("readme", "readme.md", "readme.markdown", "readme.rst", "readme.txt")


def pin_files(folder: str) -> list[str]:
    """The names of the files in ``folder`` that may pin the TensorFlow or Keras its programs
    run on (requirements files, setup and project files, conda environments, Dockerfiles,
    compose files and other YAML manifests, ``.env``, shell scripts, a Makefile, Python files
    named as job launchers, a README),
    sorted; :mod:`.pins` reads them."""
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


# --- the files that spell a name (for :mod:`.callers`) ---------------------------------------

# Folders never listed: version control, environments, caches, builds.
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist", "venv", "env", ".autofix_cache"})
# A project with more Python files than this is not searched for callers (the answer is None).
MAX_FILES = 3000
# The separator of a mention key's recorded path (``<root>/\0<name>``): no file has that name.
MENTION = "\0"


def python_files(root: str) -> list[str] | None:
    """The ``.py`` files under ``root`` (not in hidden folders, environments, caches or
    builds), sorted; None when there are more than :data:`MAX_FILES` (or the tree holds more
    than 20 times as many entries: a home folder, a data set)."""
    found: list[str] = []
    seen = 0
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in _SKIPPED and not f.endswith(".egg-info"))
        seen += len(folders) + len(files)
        if seen > 20 * MAX_FILES:
            return None
        for name in sorted(files):
            if name.endswith(".py"):
                found.append(os.path.join(folder, name))
                if len(found) > MAX_FILES:
                    return None
    return found


def mentions(root: str, name: str) -> list[tuple[str, str]] | None:
    """The project files that spell ``name`` as a word, each with its digest."""
    files = python_files(root)
    if files is None:
        return None
    spelled = name.encode("utf-8")
    plain = _WORD.fullmatch(spelled) is not None
    word = None if plain else re.compile(rb"\b" + re.escape(spelled) + rb"\b")
    found = []
    for path in files:
        read = _words_of(path)
        if read is None:
            continue
        key, words, data = read
        if word is None:
            hit = spelled in words
        else:
            data = data if data is not None else _bytes(path)
            hit = data is not None and word.search(data) is not None
        if hit:
            found.append((path, key))
    return found


def may_import(path: str, module: str) -> bool:
    """Whether the file ``path`` may import the module whose last name is ``module``: it
    spells that name as a word (``import train``, ``from app.train import step``), imports
    with ``*``, or imports by a name it computes (``importlib.import_module``, ``__import__``,
    ``runpy``, ``exec``). A file that does none of these cannot reach a function of that module
    (unreadable: it may)."""
    read = _words_of(path)
    if read is None:
        return True
    _key, words, data = read
    if module.encode("utf-8") in words or words & _DYNAMIC_IMPORTS:
        return True
    data = data if data is not None else _bytes(path)
    return data is None or _STAR_IMPORT.search(data) is not None


# Words of a file that imports modules by computed names.
_DYNAMIC_IMPORTS = frozenset({b"import_module", b"__import__", b"runpy", b"exec", b"execfile", b"SourceFileLoader", b"spec_from_file_location"})
_STAR_IMPORT = re.compile(rb"\bimport\s*\(?\s*\*")


# An ASCII word: the words of a file are the runs of these, so a name is spelled in it when
# it is one of them (``\bname\b``).
_WORD = re.compile(rb"\w+")
# Per content digest: the words a file spells.
_WORDS: dict[str, frozenset[bytes]] = {}
# Per path: (size, mtime_ns, ctime_ns, inode) -> digest, for a file whose time was not too recent when
# read (a file written within the clock's granularity of its read may change and keep its
# time: such a one is read again every time, as git treats "racy" entries).
_STATS: dict[str, tuple[tuple[int, int, int, int], str]] = {}
_RACY_NS = 3_000_000_000


def _bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _words_of(path: str) -> tuple[str, frozenset[bytes], bytes | None] | None:
    """The digest of ``path``'s bytes and the words they spell (and the bytes, when read now),
    memoised per content: a file unchanged since it was last read is not read again."""
    import time

    try:
        stat = os.stat(path)
    except OSError:
        return None
    signature = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    known = _STATS.get(path)
    if known is not None and known[0] == signature and known[1] in _WORDS:
        return known[1], _WORDS[known[1]], None
    data = _bytes(path)
    if data is None:
        return None
    key = digest(data)
    if key not in _WORDS:
        _WORDS[key] = frozenset(_WORD.findall(data))
    if time.time_ns() - stat.st_mtime_ns > _RACY_NS:
        _STATS[path] = (signature, key)
    else:
        _STATS.pop(path, None)
    return key, _WORDS[key], data


def mentions_key(root: str, name: str) -> str:
    """The digest of the files under ``root`` that spell ``name`` and of their contents: the
    result cache compares it to the one recorded (``"-"``: too many files to search)."""
    return mentions_digest(root, mentions(root, name))


def mentions_digest(root: str, found: list[tuple[str, str]] | None) -> str:
    """The key of :func:`mentions_key` for what :func:`mentions` found."""
    if found is None:
        return "-"
    return digest("\n".join(f"{os.path.relpath(p, root)}\0{d}" for p, d in found).encode("utf-8", "surrogateescape"))


def mentions_still(recorded_path: str, wanted: str) -> bool:
    """Whether a mention key recorded as ``recorded_path`` (``<root>/\\0<name>``) is still
    ``wanted``."""
    root, _, name = recorded_path.partition(os.sep + MENTION)
    return mentions_key(root, name) == wanted
