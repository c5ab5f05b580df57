"""``autofix fix --smoke``: smoke-test each changed script as it was and as it is now.

The originals run from a temporary mirror of the folder that holds the changed files: the
same layout, the changed files written back with their original text, everything else a
symbolic link to the real file or folder. So an original script imports the original versions
of sibling modules that were fixed too and finds its data by the same relative paths; new
files it writes beside itself land in the mirror, which is removed afterwards (files written
into a linked folder, such as an existing ``checkpoints/``, land in the real one). Both
versions of every script run in one process (with ``workers > 1``: one cluster of worker
processes after another).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autofix.results import FileResult
from autofix.smoke.harness import (
    DEFAULT_REPLICAS,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT,
    SmokeJob,
    run_many,
)
from autofix.smoke.report import EXIT_FAILED, EXIT_HARNESS, EXIT_OK, SmokeReport
from autofix.sourcefile import SourceError, read_source


@dataclass(frozen=True)
class Comparison:
    path: str
    before: SmokeReport
    after: SmokeReport

    @property
    def exit_code(self) -> int:
        return self.after.exit_code


def smokeable(results: Sequence[FileResult]) -> list[FileResult]:
    """The results whose fixed script was written and can be run (not notebooks)."""
    return [r for r in results if r.written and r.old_text is not None and not r.notebook and r.path.endswith(".py")]


def compare(
    results: Sequence[FileResult],
    *,
    replicas: int = DEFAULT_REPLICAS,
    steps: int = DEFAULT_STEPS,
    timeout: float = DEFAULT_TIMEOUT,
    offline: bool | None = None,
    legacy_keras: bool = False,
    workers: int = 1,
) -> list[Comparison]:
    changed = smokeable(results)
    if not changed:
        return []
    paths = [os.path.abspath(r.path) for r in changed]
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    mirror = tempfile.mkdtemp(prefix="autofix-smoke-before-")
    try:
        originals = mirror_with(root, mirror, {p: r.old_text or "" for p, r in zip(paths, changed)})
        jobs = [SmokeJob(originals[p]) for p in paths] + [SmokeJob(p) for p in paths]
        reports = run_many(
            jobs, replicas=replicas, steps=steps, timeout=timeout, offline=offline, legacy_keras=legacy_keras, workers=workers
        )
    finally:
        shutil.rmtree(mirror, ignore_errors=True)
    half = len(paths)
    return [
        Comparison(result.path, replace(before, script=result.path), replace(after, script=result.path))
        for result, before, after in zip(changed, reports[:half], reports[half:])
    ]


def exit_code(comparisons: Sequence[Comparison]) -> int:
    codes = {c.exit_code for c in comparisons}
    if EXIT_HARNESS in codes:
        return EXIT_HARNESS
    return EXIT_FAILED if EXIT_FAILED in codes else EXIT_OK


def mirror_with(root: str, mirror: str, changed: dict[str, str]) -> dict[str, str]:
    """Mirror ``root`` into ``mirror``, each file of ``changed`` (absolute paths) with the text
    given for it (its original, or a migration not written yet); returns where each now is.

    Only the folders on the way to a changed file are recreated; everything else is one
    symbolic link, so a large data folder costs nothing.
    """
    on_the_way = {os.path.dirname(p) for p in changed}
    for path in list(on_the_way):
        while path != root and path.startswith(root):
            path = os.path.dirname(path)
            on_the_way.add(path)
    where: dict[str, str] = {}

    def fill(source_dir: str, target_dir: str) -> None:
        os.makedirs(target_dir, exist_ok=True)
        for entry in os.scandir(source_dir):
            source = os.path.abspath(entry.path)
            target = os.path.join(target_dir, entry.name)
            if entry.name == "__pycache__":
                continue  # compiled originals must not land next to the fixed sources
            if source in changed:
                with open(target, "wb") as fh:
                    fh.write(_bytes(source, changed[source]))
                where[source] = target
            elif source in on_the_way and entry.is_dir(follow_symlinks=False):
                fill(source, target)
            else:
                os.symlink(source, target)

    fill(root, mirror)
    return where


def _bytes(path: str, text: str) -> bytes:
    # A fix keeps the file's encoding and BOM, so the file on disk says how to encode the other text.
    try:
        return read_source(path).encode(text)
    except SourceError:
        return text.encode("utf-8")
