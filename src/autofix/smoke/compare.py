"""``autofix smoke MIGRATED --compare ORIGINAL``: is the migrated script the same training as the
original, on N replicas and on one? (parent side)

Four runs, in one process (TensorFlow starts once), each recording its first update (see
:mod:`autofix.smoke.snapshot`) with seeds, data order and noise layers held equal (see
:mod:`autofix.smoke.controls`):

====================  ==========  =================================================
run                   replicas    batch
====================  ==========  =================================================
original              1 device    as written (B)
original, scaled      1 device    N x B: what the script asks ``Dataset.batch`` / ``fit`` for
migrated              N           as written (its global batch, N x B)
migrated, 1 replica   1           as written (B)
====================  ==========  =================================================

The migrated script on N replicas must make the same first update as the original at N x B on
one device, and on 1 replica the same as the original at B: the same gradients (summed over
the replicas), trainable variables and optimizer variables (Adam's moments...) after the first
step, within the tolerances of :mod:`autofix.smoke.tolerance`. The migrated runs start from the
original's initial weights (set where seeds did not already give them). The migrated run on N
replicas is also smoke-tested as usual (every replica trained, every variable mirrored), and
its global batch must be N x the original's.

Where the runs differ only as float32's rounding magnified can make them differ (through
BatchNormalization's statistics, or Adam's first update, ``lr * g / (|g| + eps)``, which turns
the rounding of a gradient near 0 into an update of about ``lr``), the four runs are made
again in float64 (Keras's float type, the data, a step's draws: see
:mod:`autofix.smoke.controls`), where that rounding is a billion times smaller: equal there,
within the same tolerance, the migration is proven (``floatx`` says so); otherwise the float32
verdict stands, with what float64 said.

The result, :class:`CompareReport` (``report.compare``, ``"compare"`` in the JSON), has a
``status`` a caller can act on:

- ``equivalent``: proven (exit status 0);
- ``different``: the migration changes what is computed, named (exit 1);
- ``migrated-fails``: the migrated script fails where the original runs (exit 1);
- ``original-fails``: the original does not run either (removed APIs such as
  ``metric.reset_states``, ``SGD(lr=...)``...): not a failure of the migration (exit 2);
- ``inconclusive``: the runs could not be held equal (different initial weights that could not
  be set, no first update seen, a batch that could not be scaled...) (exit 2);
- ``harness-error`` (exit 2).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autofix.smoke.harness import DEFAULT_REPLICAS, DEFAULT_TIMEOUT, run_many
from autofix.smoke.jobs import FirstUpdate, SmokeJob
from autofix.smoke.report import CompareReport, CompareRun, Pair, SmokeReport

DEFAULT_STEPS = 1


def run_compare(
    migrated: str | os.PathLike,
    original: str | os.PathLike,
    *,
    replicas: int = DEFAULT_REPLICAS,
    steps: int = DEFAULT_STEPS,
    timeout: float = DEFAULT_TIMEOUT,
    args: Sequence[str] = (),
    original_args: Sequence[str] | None = None,
    offline: bool | None = None,
    legacy_keras: bool = False,
    python: str | None = None,
) -> SmokeReport:
    """The migrated script's smoke report on ``replicas`` replicas, with ``compare`` set."""
    pair = ComparePair(os.fspath(migrated), os.fspath(original), tuple(args), None if original_args is None else tuple(original_args))
    return compare_many([pair], replicas=replicas, steps=steps, timeout=timeout, offline=offline, legacy_keras=legacy_keras, python=python)[0]


@dataclass(frozen=True)
class ComparePair:
    """A migrated script and its original, with their arguments (the original's default: the
    same)."""

    migrated: str
    original: str
    args: tuple[str, ...] = ()
    original_args: tuple[str, ...] | None = None


def compare_many(
    pairs: Sequence[ComparePair],
    *,
    replicas: int = DEFAULT_REPLICAS,
    steps: int = DEFAULT_STEPS,
    timeout: float = DEFAULT_TIMEOUT,
    offline: bool | None = None,
    legacy_keras: bool = False,
    python: str | None = None,
) -> list[SmokeReport]:
    """Compare several pairs in one process (TensorFlow starts once): one report per pair, the
    migrated script's on ``replicas`` replicas, with ``compare`` set."""
    folder = tempfile.mkdtemp(prefix="autofix-smoke-compare-")
    try:
        settings = dict(replicas=replicas, steps=steps, timeout=timeout, offline=offline, legacy_keras=legacy_keras, python=python)
        results = _compared(pairs, replicas, folder, None, settings)
        # float32's rounding, magnified by BatchNormalization's statistics or Adam's first
        # update: the same runs again in float64, where it is a billion times smaller. Only a
        # proof is taken from them: a script that mixes in float32 of its own may not run so.
        again = [n for n, r in enumerate(results) if r.compare is not None and r.compare.rounding]
        if again:
            wide = _compared([pairs[n] for n in again], replicas, folder, "float64", settings)
            for n, report in zip(again, wide):
                results[n] = _widened(results[n], report)
        return results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _compared(pairs: Sequence[ComparePair], replicas: int, folder: str, floatx: str | None, settings: dict) -> list[SmokeReport]:
    jobs: list[SmokeJob] = []
    for number, pair in enumerate(pairs):
        jobs.extend(_jobs(pair, replicas, os.path.join(folder, f"{number}-{floatx or 'float32'}"), floatx))
    reports = run_many(jobs, **settings)
    per_pair = len(reports) // max(len(pairs), 1)
    results = []
    for number, pair in enumerate(pairs):
        mine = reports[number * per_pair : (number + 1) * per_pair]
        o1, on, mn, m1 = mine if replicas > 1 else (mine[0], mine[0], mine[1], mine[1])
        verdict = judge(pair.original, o1, on, mn, m1, replicas)
        results.append(replace(mn, compare=replace(verdict, floatx=floatx or "float32")))
    return results


def _widened(narrow: SmokeReport, wide: SmokeReport) -> SmokeReport:
    """The float32 runs' report, with the float64 runs' proof when they make one."""
    assert narrow.compare is not None and wide.compare is not None
    if wide.compare.status == "equivalent":
        apart = next((p for p in narrow.compare.pairs if p.status == "different"), None)
        difference = (apart.first_difference or {}) if apart is not None else {}
        what = f"{difference.get('name', 'a variable')} {100 * difference.get('relative', 0.0):.2g}% apart"
        cause = "BatchNormalization's statistics" if "BatchNormalization" in narrow.compare.message else "the optimizer's first update"
        message = f"in float64 (in float32, {what}: float32's rounding, magnified by {cause}): {wide.compare.message}"
        return replace(narrow, compare=replace(wide.compare, message=message, rounding=False))
    return replace(narrow, compare=replace(narrow.compare, message=f"{narrow.compare.message}; in float64: {wide.compare.status}: {wide.compare.message}"))


def _jobs(pair: ComparePair, replicas: int, prefix: str, floatx: str | None = None) -> list[SmokeJob]:
    """The original at its batch and at ``replicas`` x it, the migrated script on ``replicas``
    replicas and on 1, in that order (the migrated runs read the originals' initial weights)."""
    original_args = pair.args if pair.original_args is None else pair.original_args
    o1 = SmokeJob(pair.original, original_args, replicas=1, first_update=FirstUpdate(f"{prefix}-o1.npz", floatx=floatx))
    m1 = SmokeJob(pair.migrated, pair.args, replicas=1, first_update=FirstUpdate(f"{prefix}-m1.npz", initial=f"{prefix}-o1.npz", floatx=floatx))
    if replicas == 1:
        return [o1, m1]
    on = SmokeJob(pair.original, original_args, replicas=1, first_update=FirstUpdate(f"{prefix}-oN.npz", batch_scale=replicas, floatx=floatx))
    mn = SmokeJob(pair.migrated, pair.args, replicas=replicas, first_update=FirstUpdate(f"{prefix}-mN.npz", initial=f"{prefix}-oN.npz", floatx=floatx))
    return [o1, on, mn, m1]


def judge(original: str, o1: SmokeReport, on: SmokeReport, mn: SmokeReport, m1: SmokeReport, replicas: int) -> CompareReport:
    """The verdict from the four reports (their snapshots still on disk)."""
    runs = (
        _run("original", o1, 1),
        *((_run("original", on, replicas),) if replicas > 1 else ()),
        _run("migrated", mn, 1),
        *((_run("migrated", m1, 1),) if replicas > 1 else ()),
    )

    def made(status: str, message: str, pairs: Sequence[Pair] = (), rounding: bool = False) -> CompareReport:
        return CompareReport(original, status, message, tuple(pairs), runs, *_tolerances(), rounding=rounding)

    if any(r.harness_error for r in (o1, on, mn, m1)):
        broken = next(r for r in (o1, on, mn, m1) if r.harness_error)
        return made("harness-error", f"the harness failed: {broken.harness_error}")
    original_failure = reference_failure(o1)
    if original_failure is not None:
        migrated_failure = (mn.failures or m1.failures or (None,))[0]
        if migrated_failure is not None:
            return made("original-fails", f"the original fails too: {original_failure} (the migrated script: {migrated_failure})")
        return made("original-fails", f"the original fails: {original_failure}; the migrated script passes, but cannot be compared with it")
    for report, where in ((mn, f"on {_plural(replicas, 'replica')}"), (m1, "on 1 replica")):
        if report.failures and (report is mn or replicas > 1):
            return made("migrated-fails", f"the migrated script fails {where} where the original runs: {report.failures[0]}")
    batch = _batch_check(o1, mn, replicas)
    if batch is not None:
        return made("different", batch)
    pairs = [compare_updates(mn, on, replicas, replicas)]
    if replicas > 1:
        pairs.append(compare_updates(m1, o1, 1, 1))
    different = [p for p in pairs if p.status == "different"]
    if different and _normalization_only(different[0], mn):
        message = (
            f"{different[0].message}: BatchNormalization, normalized over the global batch for the comparison "
            f"(synchronized=True), still differs by more than the tolerance from one device's (sums in another order); "
            f"it cannot be proven this way"
        )
        return made("inconclusive", message, pairs, rounding=True)
    if different and _amplified_only(different[0]):
        message = (
            f"{different[0].message}: every gradient is the original's, and the optimizer's first update amplifies "
            f"their rounding (Adam's is lr * g / (|g| + eps): about lr for any g well above eps, whatever its size); "
            f"it cannot be proven this way"
        )
        return made("inconclusive", message, pairs, rounding=True)
    if different:
        return made("different", different[0].message, pairs)
    skipped = [p for p in pairs if p.status != "same"]
    if skipped:
        return made("inconclusive", skipped[0].message, pairs)
    return made("equivalent", "; ".join(p.message for p in pairs), pairs)


# Measured on a conv net with BatchNormalization (synchronized) on 2 logical CPUs: gradients
# within 0.3% of one device's; a wrong migration is 2 x, or 6% off with per-replica statistics.
# Through the 53 synchronized BatchNormalization layers of ResNet50 (sums and sums of squares
# added over the replicas, a formula less exact than one device's) the first convolution's
# gradient ends 6.5% apart in direction, its norm the same (measured): with BatchNormalization
# held, a difference of direction alone, under DIRECTION_SLACK, with norms within
# NORMALIZATION_SLACK, proves nothing either way. What a wrong migration changes is the norm:
# N x or 1/N x (a loss averaged per replica, each replica on the whole batch).
NORMALIZATION_SLACK = 0.02
DIRECTION_SLACK = 0.1


def _normalization_only(pair: Pair, migrated: SmokeReport) -> bool:
    """A small difference where BatchNormalization was synchronized for the comparison."""
    held = (migrated.first_update or {}).get("held") or ()
    difference = pair.first_difference or {}
    ratio, relative = difference.get("ratio"), difference.get("relative")
    return (
        "BatchNormalization" in held
        and relative is not None
        and relative <= DIRECTION_SLACK
        and ratio is not None
        and abs(ratio - 1) <= NORMALIZATION_SLACK
    )


def _amplified_only(pair: Pair) -> bool:
    """An update (or optimizer variable) a little apart in direction, its norm the original's,
    where every gradient is the original's: rounding made large by the optimizer (a wrong
    migration changes the gradients, or the update's size: a learning rate N x)."""
    difference = pair.first_difference or {}
    ratio, relative = difference.get("ratio"), difference.get("relative")
    return (
        difference.get("kind") in ("weight", "optimizer")
        and bool(difference.get("gradients_same"))
        and relative is not None
        and relative <= DIRECTION_SLACK
        and ratio is not None
        and abs(ratio - 1) <= NORMALIZATION_SLACK
    )


def _tolerances() -> tuple[float, float]:
    try:
        from autofix.smoke import tolerance
    except ImportError:  # no NumPy: no TensorFlow either, and nothing was compared
        return 0.0, 0.0
    return tolerance.RELATIVE, tolerance.ABSOLUTE


def reference_failure(report: SmokeReport) -> str | None:
    """Why the original (a single-device script, the reference) did not run and train: its
    replica and mirroring checks are not asked of it."""
    for check in report.checks:
        if not check.passed and (check.name in ("finished", "trained", "runnable", "harness") or check.name.endswith(".loss")):
            return check.message
    return None


def _run(role: str, report: SmokeReport, scale: int) -> CompareRun:
    transplanted = (report.first_update or {}).get("transplanted")
    failures = report.failures if role == "migrated" else tuple(m for m in (reference_failure(report),) if m)
    return CompareRun(
        role, report.script, report.replicas, scale, report.status, not failures, global_batch(report), failures, report.seconds, transplanted,
        report.output,
    )


def global_batch(report: SmokeReport) -> int | None:
    """The batch the first training step received, before it was split over the replicas."""
    for fit in report.fits:
        if fit.steps and fit.global_batch:
            return fit.global_batch
    for run in report.runs:
        if run.steps and run.applies_gradients and run.global_batch:
            return run.global_batch
    for loop in report.loops:
        if loop.steps and loop.global_batch:
            return loop.global_batch
    return report.batches[0] if report.batches else None


def _batch_check(original: SmokeReport, migrated: SmokeReport, replicas: int) -> str | None:
    ours, theirs = global_batch(migrated), global_batch(original)
    if ours is None or theirs is None or ours == replicas * theirs:
        return None
    return (
        f"the migrated script trains on a global batch of {ours} on {_plural(replicas, 'replica')}, the original on {theirs}: "
        f"the global batch must be {replicas} x {theirs} = {replicas * theirs} (the original's batch per replica)"
    )


def compare_updates(migrated: SmokeReport, original: SmokeReport, replicas: int, scale: int) -> Pair:
    """The migrated run's first update against the original's (their snapshots)."""
    import numpy as np

    from autofix.smoke import tolerance
    from autofix.smoke.snapshot import match

    where = f"on {_plural(replicas, 'replica')}"
    against = f"the original at {'its batch' if scale == 1 else f'{scale} x its batch'} on one device"
    mine, theirs = migrated.first_update, original.first_update
    if not mine or not theirs:
        missing = "the migrated run" if not mine else "the original"
        return Pair(replicas, scale, "not-compared", f"{where}: no first update was seen in {missing} (no training step that applies gradients)")
    try:
        with np.load(mine["file"]) as m_data, np.load(theirs["file"]) as o_data:
            m_arrays = {k: m_data[k] for k in m_data.files}
            o_arrays = {k: o_data[k] for k in o_data.files}
    except (OSError, ValueError) as exc:
        return Pair(replicas, scale, "not-compared", f"{where}: the first updates could not be read ({exc})")
    m_vars = [v for v in mine["variables"] if v["kind"] == "weight"]
    o_vars = [v for v in theirs["variables"] if v["kind"] == "weight"]
    pairs = match([v["name"] for v in m_vars], [v["name"] for v in o_vars], [tuple(v["shape"]) for v in m_vars], [tuple(v["shape"]) for v in o_vars])
    if pairs is None:
        return Pair(
            replicas, scale, "not-compared",
            f"{where}: the trainable variables updated differ from the original's ({len(m_vars)} against {len(o_vars)}, or other shapes): they cannot be compared",
        )
    outcome = tolerance.compare(mine["variables"], theirs["variables"], pairs, m_arrays, o_arrays)
    if outcome.not_compared is not None:
        reason = outcome.not_compared
        if reason.startswith("the runs start from different weights"):
            reason += f" and they could not be set to the original's: {mine.get('transplanted') or 'no step function or fit to set them in'}"
        return Pair(replicas, scale, "not-compared", f"{where}: {reason}")
    if not outcome.same:
        difference = outcome.difference or {}
        what = {"gradient": "the gradient of ", "weight": "", "optimizer": "the optimizer's "}[difference.get("kind", "weight")]
        noun = "the update" if difference.get("kind") == "weight" else "it"
        return Pair(
            replicas, scale, "different",
            f"after one step {where}, {what}{difference.get('name')} differs from {against}: "
            f"{_ratio_text(difference.get('ratio'), replicas, noun)} (relative difference {difference.get('relative', math.inf):.3g})",
            outcome.compared, outcome.worst, difference,
        )
    skipped = f", {outcome.skipped} with a rounding-level gradient compared by it only" if outcome.skipped else ""
    return Pair(
        replicas, scale, "same",
        f"{where}: the same first update as {against} ({outcome.compared} variables{skipped}, within {outcome.worst:.1g})",
        outcome.compared, outcome.worst,
    )


def _ratio_text(ratio: float | None, replicas: int, noun: str = "the update") -> str:
    if ratio is None or not math.isfinite(ratio):
        return f"{noun} differs"
    text = f"{noun} is {ratio:.2f} x the original's"
    if replicas > 1 and abs(ratio - replicas) < 0.05 * replicas:
        text += f" ({replicas} x: is the loss averaged per replica, not over the global batch?)"
    elif replicas > 1 and abs(ratio - 1 / replicas) < 0.05 / replicas:
        text += f" (1/{replicas}: is the loss divided by the replicas twice?)"
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
