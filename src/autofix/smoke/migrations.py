"""``autofix migrate --smoke``: prove each migration by training it beside its original
(``autofix smoke MIGRATED --compare ORIGINAL``), all of them in one TensorFlow process.

The other side of each pair runs from a temporary mirror of the folder that holds the files
(see :func:`autofix.smoke.before_after.mirror_with`): the original, when the migration was
written; the migration, when it was only shown. Either way both find their data and sibling
modules where the script does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from autofix.results import FileResult
from autofix.smoke.before_after import mirror_with
from autofix.smoke.compare import ComparePair, compare_many
from autofix.smoke.harness import DEFAULT_REPLICAS, DEFAULT_TIMEOUT
from autofix.smoke.report import EXIT_FAILED, EXIT_HARNESS, EXIT_OK, SmokeReport

# Compare statuses that say the migration is wrong.
WRONG = ("different", "migrated-fails")


def provable(results: Sequence[FileResult]) -> list[FileResult]:
    return [r for r in results if r.old_text is not None and r.new_text is not None and r.path.endswith((".py", ".ipynb"))]


def prove(
    results: Sequence[FileResult],
    *,
    written: bool,
    replicas: int = DEFAULT_REPLICAS,
    timeout: float = DEFAULT_TIMEOUT,
    offline: bool | None = None,
) -> list[SmokeReport]:
    """One compare report per migration of ``results`` (written, or only shown), named by the
    file's path."""
    changed = provable(results)
    if not changed:
        return []
    paths = [os.path.abspath(r.path) for r in changed]
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    mirror = tempfile.mkdtemp(prefix="autofix-migrate-smoke-")
    try:
        other = mirror_with(root, mirror, {p: (r.old_text if written else r.new_text) or "" for p, r in zip(paths, changed)})
        pairs = [ComparePair(p, other[p]) if written else ComparePair(other[p], p) for p in paths]
        reports = compare_many(pairs, replicas=replicas, timeout=timeout, offline=offline)
    finally:
        shutil.rmtree(mirror, ignore_errors=True)
    return [replace(report, script=result.path) for result, report in zip(changed, reports)]


def exit_code(reports: Sequence[SmokeReport]) -> int:
    """1 when a migration computes something else or fails where its original runs, 2 when
    the harness failed, else 0 (an original that fails on its own, or a comparison that could
    not be held equal, is said but is not a failure of the migration)."""
    statuses = {r.compare.status for r in reports if r.compare is not None}
    if statuses & set(WRONG):
        return EXIT_FAILED
    if "harness-error" in statuses:
        return EXIT_HARNESS
    return EXIT_OK
