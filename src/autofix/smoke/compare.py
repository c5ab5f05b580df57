"""``autofix smoke MIGRATED --compare ORIGINAL``: is the migrated script the same training as the
original, on N replicas and on one? (parent side)

*The same training* is defined by data parallelism: on N replicas with the original's batch B
on each, the migration must make, at every step, the update that averaging the original's
gradients over the N replicas' shards of the global batch makes (each replica runs the
original's step on its own B examples) — whatever the original divides its loss by, and with
BatchNormalization's statistics per replica, as MirroredStrategy computes them. Four runs, in
one process (TensorFlow starts once), each recording its first K steps (see
:mod:`autofix.smoke.snapshot`) with seeds, data order and randomness held equal (see
:mod:`autofix.smoke.controls`, :mod:`autofix.smoke.noise`):

==============================  ==========  ================================================
run                             replicas    batch
==============================  ==========  ================================================
original                        1 device    as written (B)
original, the reference         N virtual   N x B, each step run as N replicas of B on one
                                            device, eagerly (:mod:`autofix.smoke.replicas`)
migrated                        N           as written: its global batch
migrated, 1 replica             1           as written
==============================  ==========  ================================================

The migrated run on N replicas must make the reference's steps, and on 1 replica the
original's; :mod:`autofix.smoke.verdict` judges each pair: what each replica was fed (a
partition of the global batch, the original's examples), the initial weights, the
optimizers, every step's gradients, weights and optimizer variables, the noise layers, and
what the script reports. An original whose step cannot be split (written inline in its loop,
drawing its batch itself) is run again as micro-steps instead (:mod:`autofix.smoke.accumulate`).
The migrated run on N replicas is also smoke-tested as usual (every replica trained, every
variable mirrored).

Where the runs differ only as float32's rounding magnified can make them differ (Adam's
first update, ``lr * g / (|g| + eps)``, turns the rounding of a gradient near 0 into an update
of about ``lr``), the runs are made again in float64 (Keras's float type, the data, a step's
draws: see :mod:`autofix.smoke.controls`), where that rounding is a billion times smaller:
equal there, within the same tolerance, the migration is proven (``floatx`` says so).

The result, :class:`CompareReport` (``report.compare``, ``"compare"`` in the JSON), has a
``status`` a caller can act on:

- ``equivalent``: proven (exit status 0); its message also says what was set to be equal
  (initial weights drawn by the same initializers) and what was not seen;
- ``different``: the migration changes what is computed, named (exit 1);
- ``migrated-fails``: the migrated script fails where the original runs (exit 1);
- ``original-fails``: the original does not run either (removed APIs such as
  ``metric.reset_states``, ``SGD(lr=...)``...): not a failure of the migration (exit 2);
- ``inconclusive``: the runs could not be held equal (randomness the harness cannot hold, data
  that differs between the original's own runs, initial weights that differ and may not be
  set, a reference that cannot be computed exactly...) (exit 2);
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
from autofix.smoke.jobs import Recording, SmokeJob
from autofix.smoke.report import CompareReport, CompareRun, Pair, SmokeReport

DEFAULT_STEPS = 3


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
        results = _compared(pairs, replicas, steps, folder, None, settings)
        # float32's rounding, magnified by Adam's first update: the same runs again in float64,
        # where it is a billion times smaller. Only a proof is taken from them: a script that
        # mixes in float32 of its own may not run in float64.
        again = [n for n, r in enumerate(results) if r.compare is not None and r.compare.rounding]
        if again:
            wide = _compared([pairs[n] for n in again], replicas, steps, folder, "float64", settings)
            for n, report in zip(again, wide):
                results[n] = _widened(results[n], report)
        return results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _compared(pairs: Sequence[ComparePair], replicas: int, steps: int, folder: str, floatx: str | None, settings: dict) -> list[SmokeReport]:
    jobs: list[SmokeJob] = []
    prefixes = [os.path.join(folder, f"{number}-{floatx or 'float32'}") for number in range(len(pairs))]
    for pair, prefix in zip(pairs, prefixes):
        jobs.extend(_jobs(pair, replicas, steps, prefix, floatx))
    reports = run_many(jobs, **settings)
    per_pair = len(reports) // max(len(pairs), 1)
    grouped = [list(reports[n * per_pair : (n + 1) * per_pair]) for n in range(len(pairs))]
    # An original whose steps cannot be split into replicas: its reference again, as micro-steps.
    split_failed = [n for n, runs in enumerate(grouped) if replicas > 1 and runs[1].status == "unsplittable"]
    if split_failed:
        again = [_accumulated(pairs[n], replicas, steps, prefixes[n], floatx) for n in split_failed]
        for n, report in zip(split_failed, run_many(again, **settings)):
            grouped[n][1] = replace(report, notes=(*report.notes, f"compare: the original's steps could not be split into replicas ({grouped[n][1].error}): run as micro-steps"))
    results = []
    for pair, runs in zip(pairs, grouped):
        o1, on, mn, m1 = runs if replicas > 1 else (runs[0], runs[0], runs[1], runs[1])
        verdict = judge(pair.original, o1, on, mn, m1, replicas)
        results.append(replace(mn, compare=replace(verdict, floatx=floatx or "float32")))
    return results


def _widened(narrow: SmokeReport, wide: SmokeReport) -> SmokeReport:
    """The float32 runs' report, with the float64 runs' verdict where they give one: a proof, or
    a difference that float32's rounding cannot explain."""
    assert narrow.compare is not None and wide.compare is not None
    apart = next((p for p in narrow.compare.pairs if p.status == "different"), None)
    difference = (apart.first_difference or {}) if apart is not None else {}
    what = f"{difference.get('name', 'a variable')} {100 * difference.get('relative', 0.0):.2g}% apart"
    if wide.compare.status in ("equivalent", "different"):
        why = "float32's rounding, magnified over the steps" if wide.compare.status == "equivalent" else "not float32's rounding"
        message = f"in float64 (in float32, {what}: {why}): {wide.compare.message}"
        return replace(narrow, compare=replace(wide.compare, message=message, rounding=False))
    return replace(narrow, compare=replace(narrow.compare, message=f"{narrow.compare.message}; in float64: {wide.compare.status}: {wide.compare.message}"))


def _jobs(pair: ComparePair, replicas: int, steps: int, prefix: str, floatx: str | None = None) -> list[SmokeJob]:
    """The original as written, its reference on ``replicas`` virtual replicas, the migrated
    script on ``replicas`` replicas and on 1, in that order (the migrated runs start from the
    original's initial weights where they may)."""
    original_args = pair.args if pair.original_args is None else pair.original_args
    o1 = SmokeJob(pair.original, original_args, replicas=1, recording=Recording(f"{prefix}-o1.npz", floatx=floatx, steps=steps))
    m1 = SmokeJob(pair.migrated, pair.args, replicas=1, recording=Recording(f"{prefix}-m1.npz", initial=f"{prefix}-o1.npz", floatx=floatx, steps=steps))
    if replicas == 1:
        return [o1, m1]
    on = SmokeJob(
        pair.original, original_args, replicas=1,
        recording=Recording(f"{prefix}-oN.npz", batch_scale=replicas, floatx=floatx, steps=steps, virtual=replicas),
    )
    mn = SmokeJob(pair.migrated, pair.args, replicas=replicas, recording=Recording(f"{prefix}-mN.npz", initial=f"{prefix}-o1.npz", floatx=floatx, steps=steps))
    return [o1, on, mn, m1]


def _accumulated(pair: ComparePair, replicas: int, steps: int, prefix: str, floatx: str | None) -> SmokeJob:
    original_args = pair.args if pair.original_args is None else pair.original_args
    return SmokeJob(
        pair.original, original_args, replicas=1,
        recording=Recording(f"{prefix}-oA.npz", floatx=floatx, steps=steps, accumulate=replicas),
    )


def judge(original: str, o1: SmokeReport, on: SmokeReport, mn: SmokeReport, m1: SmokeReport, replicas: int) -> CompareReport:
    """The verdict from the four reports (their records still on disk): ``o1`` the original
    as written, ``on`` its reference on ``replicas`` replicas, ``mn`` / ``m1`` the migrated
    script on ``replicas`` and on 1."""
    from autofix.smoke import verdict

    runs = (
        _run("original", o1, 1, "as written"),
        *((_run("original", on, replicas, _mode(on, replicas)),) if replicas > 1 else ()),
        _run("migrated", mn, 1, "as written"),
        *((_run("migrated", m1, 1, "as written"),) if replicas > 1 else ()),
    )
    steps = max([int((r.trace or {}).get("steps", 0)) for r in (mn, m1)] or [0])

    def made(status: str, message: str, pairs: Sequence[Pair] = (), rounding: bool = False, said: Sequence[str] = ()) -> CompareReport:
        return CompareReport(original, status, message, tuple(pairs), runs, *_tolerances(), rounding=rounding, steps=steps, said=tuple(said))

    everything = (o1, on, mn, m1)
    if any(r.harness_error for r in everything):
        broken = next(r for r in everything if r.harness_error)
        return made("harness-error", f"the harness failed: {broken.harness_error}")
    original_failure = reference_failure(o1) or (reference_failure(on) if replicas > 1 and on.status not in ("diverged",) else None)
    if original_failure is not None:
        migrated_failure = (mn.failures or m1.failures or (None,))[0]
        if migrated_failure is not None:
            return made("original-fails", f"the original fails too: {original_failure} (the migrated script: {migrated_failure})")
        return made("original-fails", f"the original fails: {original_failure}; the migrated script passes, but cannot be compared with it")
    for report, where in ((mn, f"on {_plural(replicas, 'replica')}"), (m1, "on 1 replica")):
        if report.failures and (report is mn or replicas > 1):
            return made("migrated-fails", f"the migrated script fails {where} where the original runs: {report.failures[0]}")
    if replicas > 1 and on.status == "diverged":
        return made("inconclusive", f"the original's data-parallel step could not be computed: {on.error}")
    batch = _batch_check(o1, mn, replicas)
    if batch is not None:
        return made("different", batch)
    judged = [verdict.judge_pair(mn, on, replicas, o1)]
    if replicas > 1:
        judged.append(verdict.judge_pair(m1, o1, 1, compared=replicas))
    pairs = [j.pair(r) for j, r in zip(judged, (replicas, 1))]
    said = [text for j in judged for text in j.said]
    said = list(dict.fromkeys(said))
    different = [p for p in pairs if p.status == "different"]
    if different and _rounding_only(different[0]):
        apart = different[0].first_difference or {}
        message = (
            f"{different[0].message}: a difference this small ({100 * apart.get('relative', 0.0):.2g}% in direction, its size the "
            f"same within {100 * NORMALIZATION_SLACK:g}%) is what float32's rounding, magnified over the steps by the optimizer "
            f"(Adam's update is lr * g / (|g| + eps): about lr for any g well above eps) and the model (a BatchNormalization, for one), "
            f"can make; it cannot be proven or disproven in float32"
        )
        return made("inconclusive", message, pairs, rounding=True, said=said)
    if different:
        return made("different", different[0].message, pairs, said=said)
    skipped = [p for p in pairs if p.status != "same"]
    if skipped:
        return made("inconclusive", skipped[0].message, pairs, said=said)
    message = "; ".join(p.message for p in pairs)
    if said:
        message += "; " + "; ".join(said)
    unreached = unreached_training(mn)
    if unreached:
        said = [*said, unreached]
        message += "; " + unreached
    return made("equivalent", message + "; " + _unseen(mn, on), pairs, said=said)


# The calls that train: every one the run reached is recorded with its place (a fit, a
# strategy.run site, a loop's step).
TRAINING_CALLS = ("fit", "train_on_batch", "run", "fit_generator")


def unreached_training(report: SmokeReport) -> str | None:
    """Training the comparing run never reached: a comparing run ends once its K steps are
    recorded, so a script that trains one model and then another (a teacher, then its student
    distilled) has only the first one's steps compared. Read from the script's text (a
    ``.py``): each ``fit`` / ``train_on_batch`` / ``strategy.run`` call none of whose lines the
    run recorded a training site at. Said with the proof, never hidden in it."""
    import ast

    script = report.script
    if not script.endswith(".py") or not os.path.isfile(script):
        return None
    try:
        with open(script, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    reached: set[int] = set()
    for record in (*report.fits, *report.runs, *report.loops):
        line = str(getattr(record, "site", "")).rpartition(":")[2]
        if line.isdigit():
            reached.add(int(line))
    if not reached:
        return None
    missed = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TRAINING_CALLS:
            if node.func.attr == "run" and "strateg" not in ast.unparse(node.func.value).lower():
                continue
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if not any(line in reached for line in lines):
                missed.append(f"{ast.unparse(node.func)} at line {node.lineno}")
    if not missed:
        return None
    missed.sort(key=lambda text: int(text.rpartition(" ")[2]))
    shown = ", ".join(missed[:3]) + (", ..." if len(missed) > 3 else "")
    return (
        f"not compared: the training the script does after the steps compared ({shown}): "
        f"its steps are not proven (a model trained after the first one is not compared)"
    )


def _mode(report: SmokeReport, replicas: int) -> str:
    return f"{replicas} micro-steps a step" if any("run as micro-steps" in n for n in report.notes) else f"{replicas} virtual replicas"


def _unseen(migrated: SmokeReport, reference: SmokeReport) -> str:
    """What a proof does not cover, said with it: after its steps, nothing is compared."""
    steps = int((migrated.trace or {}).get("steps", 0))
    phased = (migrated.trace or {}).get("phases") or []
    after = f"the {_plural(int(phased[0].get('steps', 0)), 'step')} of each phase of training" if len(phased) > 1 else _plural(steps, "step")
    return (
        f"not compared: what the scripts do after {after} (evaluation, predictions, checkpoints, "
        f"learning-rate changes the script makes itself between epochs)"
    )


# A difference a little apart in direction (under DIRECTION_SLACK), its norm the reference's
# (within NORMALIZATION_SLACK): float32's rounding, magnified by Adam's update of a gradient
# near 0 and by BatchNormalization, over the steps compared (TensorFlow's DCGAN: 0.3% at step 3;
# ResNet50's first convolution through 53 BatchNormalization layers: 1.6% at step 1, measured).
NORMALIZATION_SLACK = 0.02
DIRECTION_SLACK = 0.1


def _rounding_only(pair: Pair) -> bool:
    """A difference within what float32's rounding, magnified, can make: a little apart in
    direction, its size the same. What a wrong migration changes is a gradient's size (a loss
    averaged per replica: N x), or a value that rounding cannot reach; float64, where rounding is
    a billion times smaller, decides."""
    difference = pair.first_difference or {}
    ratio, relative = difference.get("ratio"), difference.get("relative")
    return (
        difference.get("kind") in ("gradient", "weight", "optimizer")
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


def _run(role: str, report: SmokeReport, scale: int, mode: str) -> CompareRun:
    transplanted = (report.trace or {}).get("transplanted") or {}
    done = [name for name, what in transplanted.items() if what.startswith("set to")]
    said = f"{len(done)} set to the original's" if done else ("not needed" if not transplanted else "none set")
    failures = report.failures if role == "migrated" else tuple(m for m in (reference_failure(report),) if m)
    return CompareRun(
        role, report.script, report.replicas, scale, report.status, not failures, global_batch(report), failures, report.seconds, said,
        report.output, mode,
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
