"""From what the child recorded to a verdict: the checks and their one-line messages.

Pure functions over plain data, so every message can be tested without TensorFlow. The
checks, by name:

- ``finished``: the script ran to its end or to the step cap (not: crashed, exited with a
  non-zero status, timed out, died);
- ``trained``: some ``fit`` ran a step, or some ``strategy.run`` step applied gradients;
- ``fit[i].replicas``: fit ``i`` trained on all the replicas asked for;
- ``fit[i].mirrored``: every model and optimizer variable of fit ``i`` is mirrored;
- ``fit[i].loss`` / ``run[i].loss``: the losses seen are finite;
- ``run[i].given``: ``strategy.run`` was given a function, not a model, layer or module;
- ``run[i].replicas``: the step function ran on all the replicas;
- ``harness``: the harness itself worked (a failure here means exit status 2).
"""

from __future__ import annotations

import math
import signal
from typing import Any

from autofix.smoke.report import Check, FitRecord, RunRecord, _record

STEP_FUNCTIONS = ("function", "tf.function", "callable")


def fit_records(raw: dict[str, Any]) -> tuple[FitRecord, ...]:
    return tuple(_record(FitRecord, f) for f in raw.get("fits", ()))


def run_records(raw: dict[str, Any]) -> tuple[RunRecord, ...]:
    return tuple(_record(RunRecord, r) for r in raw.get("runs", ()))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def death_reason(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"the process exited with status {returncode}"


def finished(raw: dict[str, Any], timeout: float) -> Check:
    status = raw.get("status")
    error = raw.get("error")
    if status == "timeout":
        return Check("finished", False, f"timed out after {timeout:g} s")
    if status == "died":
        return Check("finished", False, f"the script died: {raw.get('died') or 'the process ended'}")
    if status == "exited":
        detail = f": {error}" if error else ""
        return Check("finished", False, f"the script exited with status {raw.get('exit_code')}{detail}")
    if status == "crashed":
        failure = raw.get("failure") or {}
        if failure.get("cause"):
            return Check("finished", False, f"{failure['where']} failed: {failure['cause']} ({error})")
        where = f" at {raw['error_site']}" if raw.get("error_site") else ""
        return Check("finished", False, f"the script crashed{where}: {error}")
    if status == "step-limit":
        return Check("finished", True, "stopped cleanly at the step cap")
    return Check("finished", True, "the script ran to its end")


def evaluate(raw: dict[str, Any], *, replicas: int, timeout: float) -> tuple[Check, ...]:
    """Every check for one script, from the child's record of it (or the harness's, for a
    script whose process timed out or died)."""
    if raw.get("status") == "harness-error":
        return (Check("harness", False, f"the harness failed: {raw.get('harness_error')}"),)
    checks = [finished(raw, timeout)]
    fits, runs = fit_records(raw), run_records(raw)
    crashed = not checks[0].passed
    trained = any(f.steps > 0 for f in fits) or any(r.steps > 0 and r.applies_gradients for r in runs)
    if not crashed:
        if trained:
            steps = sum(f.steps for f in fits) + sum(r.steps for r in runs if r.applies_gradients)
            checks.append(Check("trained", True, f"trained {_plural(steps, 'step')}"))
        else:
            checks.append(Check("trained", False, "no training happened"))
    for index, fit in enumerate(fits):
        checks.extend(_fit_checks(index, fit, replicas, len(fits) > 1, crashed))
    for index, run in enumerate(runs):
        checks.extend(_run_checks(index, run, replicas, crashed))
    return tuple(checks)


def _fit_checks(index: int, fit: FitRecord, replicas: int, several: bool, crashed: bool) -> list[Check]:
    name = f"fit[{index}]"
    what = f"{fit.method} at {fit.site}" if several else fit.method
    if fit.error is not None:
        # A crash already says why (and the failure is this fit's); only a failure the script
        # caught itself needs its own line.
        if crashed:
            return []
        return [Check(f"{name}.error", False, f"{what} failed: {fit.cause or fit.error}")]
    checks = []
    if fit.replicas < replicas:
        why = fit.cause or f"{_plural(replicas, 'replica')} were asked for"
        checks.append(Check(f"{name}.replicas", False, f"{what} trained on {_plural(fit.replicas, 'replica')}: {why}"))
        return checks
    checks.append(Check(f"{name}.replicas", True, f"{what} trained on {_plural(fit.replicas, 'replica')}"))
    if fit.all_mirrored:
        checks.append(Check(f"{name}.mirrored", True, f"all {_plural(fit.variables, 'variable')} mirrored"))
    elif fit.steps:
        shown = ", ".join(fit.unmirrored) or "(no variables)"
        if fit.unmirrored_count > len(fit.unmirrored):
            shown += f" and {fit.unmirrored_count - len(fit.unmirrored)} more"
        checks.append(Check(f"{name}.mirrored", False, f"{what} trained with variables that are not mirrored: {shown}"))
    bad = [v for v in fit.losses if not math.isfinite(v)]
    if bad:
        checks.append(Check(f"{name}.loss", False, f"{what} loss is not finite ({bad[0]})"))
    return checks


def _run_checks(index: int, run: RunRecord, replicas: int, crashed: bool) -> list[Check]:
    name = f"run[{index}]"
    checks = []
    if run.given not in STEP_FUNCTIONS:
        checks.append(
            Check(f"{name}.given", False, f"strategy.run was given a {run.given} ({run.name}) at {run.site}, not a per-replica step function")
        )
        return checks
    checks.append(Check(f"{name}.given", True, f"strategy.run was given {run.given} {run.name}"))
    if run.error is not None and crashed:
        return checks
    seen = len(run.replicas) if run.replicas_observed else run.num_replicas
    if run.steps and seen < replicas:
        checks.append(Check(f"{name}.replicas", False, f"strategy.run ran {run.name} on {_plural(seen, 'replica')} at {run.site}"))
    elif run.steps:
        checks.append(Check(f"{name}.replicas", True, f"{run.name} ran on {_plural(seen, 'replica')}"))
    bad = [v for v in run.losses if not math.isfinite(v)]
    if bad:
        checks.append(Check(f"{name}.loss", False, f"the loss of {run.name} is not finite ({bad[0]})"))
    return checks


def notes(raw: dict[str, Any]) -> tuple[str, ...]:
    """Worth knowing, not failures: eager strategy.run, several strategies, synthetic data."""
    found = list(raw.get("notes", ()))
    for run in run_records(raw):
        if not run.in_tf_function and run.given in ("function", "callable"):
            found.append(f"strategy.run at {run.site} runs eagerly, which is slow: call it inside a tf.function")
    strategies = raw.get("strategies", ())
    if len(strategies) > 1:
        found.append(f"{len(strategies)} strategies were created")
    for name in raw.get("datasets", ()):
        found.append(f"{name}.load_data() returned synthetic data (--offline)")
    return tuple(found)
