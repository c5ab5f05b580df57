"""From what the child recorded to a verdict: the checks and their one-line messages.

Pure functions over plain data, so every message can be tested without TensorFlow. The
checks, by name:

- ``finished``: the script ran to its end or to the step cap (not: crashed, exited with a
  non-zero status, timed out, died);
- ``trained``: some ``fit`` ran a step, some ``strategy.run`` step applied gradients, or some
  custom loop applied gradients outside ``strategy.run``;
- ``fit[i].replicas``: fit ``i`` trained on all the replicas asked for;
- ``fit[i].mirrored``: every model and optimizer variable of fit ``i`` is mirrored;
- ``fit[i].loss`` / ``run[i].loss``: the losses seen are finite;
- ``run[i].given``: ``strategy.run`` was given a function, not a model, layer or module;
- ``run[i].replicas``: the step function ran on all the replicas;
- ``loop[i].replicas``: a custom loop that applies gradients outside ``strategy.run`` trains on
  one replica (a failure when more were asked for); ``loop[i].loss``: its losses are finite;
- ``runnable``: a notebook that cannot be run as one program (exit status 2, as ``harness``);
- ``fit[i].sharding`` / ``run[i].sharding`` (multi-worker runs): the dataset is split over
  the workers (not: auto-sharding OFF and no ``shard()``, so every worker trains on the same
  examples);
- ``harness``: the harness itself worked (a failure here means exit status 2).

Across the workers of a multi-worker run (:func:`cluster`):

- ``workers.trained``: every worker trained (passed only: a worker that did not fails its own
  checks);
- ``workers.agree``: their losses and final weights (a digest) are the same;
- ``workers.files``: no path was written by two workers (on a shared file system they race).
"""

from __future__ import annotations

import math
import signal
from typing import Any

from autofix.smoke.report import Check, FitRecord, LoopRecord, RunRecord, WriteRecord, _record

STEP_FUNCTIONS = ("function", "tf.function", "callable")


def fit_records(raw: dict[str, Any]) -> tuple[FitRecord, ...]:
    return tuple(_record(FitRecord, f) for f in raw.get("fits", ()))


def run_records(raw: dict[str, Any]) -> tuple[RunRecord, ...]:
    return tuple(_record(RunRecord, r) for r in raw.get("runs", ()))


def loop_records(raw: dict[str, Any]) -> tuple[LoopRecord, ...]:
    return tuple(_record(LoopRecord, r) for r in raw.get("loops", ()))


def write_records(raw: dict[str, Any]) -> tuple[WriteRecord, ...]:
    return tuple(_record(WriteRecord, w) for w in raw.get("writes", ()))


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
    if status == "stopped":
        what = "had ended without training" if raw.get("peer_left") else "had failed"
        return Check("finished", False, f"stopped: worker {raw.get('stopped_after')} {what} and this worker was still waiting for it")
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
    if status in ("unsplittable", "diverged"):
        return Check("finished", True, f"stopped: its steps cannot be run as replicas ({error})")
    return Check("finished", True, "the script ran to its end")


def evaluate(raw: dict[str, Any], *, replicas: int, timeout: float, workers: int = 1) -> tuple[Check, ...]:
    """Every check for one script, from the child's record of it (or the harness's, for a
    script whose process timed out or died)."""
    if raw.get("status") == "harness-error":
        return (Check("harness", False, f"the harness failed: {raw.get('harness_error')}"),)
    if raw.get("status") == "refused":
        return (Check("runnable", False, f"cannot be run as a script: {raw.get('refused')}"),)
    checks = [finished(raw, timeout)]
    fits, runs, loops = fit_records(raw), run_records(raw), loop_records(raw)
    crashed = not checks[0].passed
    if not crashed:
        if has_trained(raw):
            checks.append(Check("trained", True, f"trained {_plural(steps_trained(raw), 'step')}"))
        else:
            checks.append(Check("trained", False, "no training happened"))
    for index, fit in enumerate(fits):
        checks.extend(_fit_checks(index, fit, replicas, len(fits) > 1, crashed))
    for index, run in enumerate(runs):
        checks.extend(_run_checks(index, run, replicas, crashed, workers))
    for index, loop in enumerate(loops):
        checks.extend(_loop_checks(index, loop, replicas, bool(raw.get("strategies"))))
    return tuple(checks)


def steps_trained(raw: dict[str, Any]) -> int:
    return (
        sum(f.steps for f in fit_records(raw))
        + sum(r.steps for r in run_records(raw) if r.applies_gradients)
        + sum(loop.steps for loop in loop_records(raw))
    )


def _loop_checks(index: int, loop: LoopRecord, replicas: int, strategy_made: bool) -> list[Check]:
    """A custom loop that applies gradients outside ``strategy.run`` trains on one device."""
    name = f"loop[{index}]"
    what = f"custom loop {loop.name} at {loop.site}"
    checks = []
    if loop.steps:
        if loop.replicas < replicas:
            why = "its step does not run through strategy.run" if strategy_made else "no MirroredStrategy was created"
            checks.append(Check(f"{name}.replicas", False, f"{what} trained on {_plural(loop.replicas, 'replica')}: {why}"))
        else:
            checks.append(Check(f"{name}.replicas", True, f"{what} trained on {_plural(loop.replicas, 'replica')}"))
    bad = [v for v in loop.losses if not math.isfinite(v)]
    if bad:
        checks.append(Check(f"{name}.loss", False, f"the loss of {what} is not finite ({bad[0]})"))
    return checks


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
    checks.extend(_sharding(name, what, fit.auto_shard, fit.sharded))
    return checks


def _sharding(name: str, what: str, policy: str | None, sharded: bool | None) -> list[Check]:
    if policy is None:
        return []
    if policy == "OFF" and sharded is False:
        return [Check(f"{name}.sharding", False, f"{what} trains every worker on the same examples: the dataset's auto-sharding is OFF and it is not shard()ed")]
    how = "shard() in the pipeline" if sharded else f"auto-shard policy {policy}"
    return [Check(f"{name}.sharding", True, f"{what} splits its dataset over the workers ({how})")]


def _run_checks(index: int, run: RunRecord, replicas: int, crashed: bool, workers: int = 1) -> list[Check]:
    name = f"run[{index}]"
    checks = []
    if run.given not in STEP_FUNCTIONS:
        checks.append(
            Check(f"{name}.given", False, f"strategy.run was given a {run.given} ({run.name}) at {run.site}, not a per-replica step function")
        )
        return checks
    checks.append(Check(f"{name}.given", True, f"strategy.run was given {run.given} {run.name}"))
    if run.built:
        layers = ", ".join(run.built[:3]) + (" ..." if len(run.built) > 3 else "")
        checks.append(Check(f"{name}.built", False, (
            f"{run.name} builds the Sequential model ({layers}) on its first call, per replica inside a tf.function, at "
            f"{run.site}: run as written, Keras 3 fails on that step under the strategy; build the model before the "
            "loop (keras.Input as its first layer, or model.build(...) in strategy.scope())"
        )))
    elif run.unlifted:
        made = ", ".join(run.unlifted[:3]) + (f" and {len(run.unlifted) - 3} more" if len(run.unlifted) > 3 else "")
        slots = " (an optimizer's slot variables: optimizer.build(model.trainable_variables))" if _optimizer_slots(run.unlifted) else ""
        checks.append(Check(f"{name}.variables", False, (
            f"{run.name} makes variables on its first call, per replica inside a tf.function ({made}), at {run.site}: "
            "TensorFlow cannot initialize them outside the function and runs the step in a tf.cond, where the default "
            "all-reduce of a machine of GPUs fails (\"You must feed a value for placeholder tensor\"; this run used "
            f"ReductionToOneDevice, which hides it); make them in strategy.scope() before the loop{slots}"
        )))
    if run.error is not None and crashed:
        return checks
    seen = run_replicas(run, replicas, workers)
    if run.steps and seen < replicas:
        checks.append(Check(f"{name}.replicas", False, f"strategy.run ran {run.name} on {_plural(seen, 'replica')} at {run.site}"))
    elif run.steps:
        checks.append(Check(f"{name}.replicas", True, f"{run.name} ran on {_plural(seen, 'replica')}"))
    bad = [v for v in run.losses if not math.isfinite(v)]
    if bad:
        checks.append(Check(f"{name}.loss", False, f"the loss of {run.name} is not finite ({bad[0]})"))
    if run.steps:
        checks.extend(_sharding(name, run.name, run.auto_shard, run.sharded))
    fed = [tuple(v) for v in (run.fed or {}).values()]
    # (Replicas given batches of identical rows cannot be told apart by their examples.)
    distinct = all(len(v) < 3 or v[2] > 1 for v in fed)
    if run.applies_gradients and len(fed) > 1 and len(set(fed)) == 1 and fed[0][0] > 1 and distinct:
        checks.append(
            Check(
                f"{name}.data",
                False,
                f"strategy.run gives every replica the same {fed[0][0]} examples at {run.site}: the batch is not split over the "
                f"replicas (is the dataset distributed with strategy.experimental_distribute_dataset?)",
            )
        )
    return checks


def _optimizer_slots(names: list[str] | tuple[str, ...]) -> bool:
    """Whether variables were made by an optimizer (Keras names its slots after it)."""
    return any(n.split("/")[0].lower().rstrip("_0123456789") in _OPTIMIZER_SCOPES or "/iteration" in n or n.endswith("iterations") for n in names)


_OPTIMIZER_SCOPES = {
    "adam", "adamw", "adamax", "nadam", "sgd", "rmsprop", "adagrad", "adadelta", "adafactor", "ftrl", "lion", "lamb",
    "loss_scale_optimizer",
}


def run_replicas(run: RunRecord, replicas: int, workers: int = 1) -> int:
    """How many replicas ran a ``strategy.run`` step function: those seen running it, or the
    strategy's count where none were seen. A worker of a multi-worker run sees only its own
    replicas run (their ids are global: the chief sees 0), while the strategy spans every worker:
    when each worker saw its share, it ran on all of them."""
    if not run.replicas_observed:
        return run.num_replicas
    if workers > 1:
        return run.num_replicas if len(run.replicas) * workers >= replicas else len(run.replicas) * workers
    return len(run.replicas)


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


# --- across the workers of a multi-worker run ---------------------------------------------------

LOSS_TOLERANCE = 1e-5


def cluster(raws: list[dict[str, Any]], shown_path) -> list[Check]:
    """The checks across workers, from each worker's record (``shown_path`` turns an absolute
    path into what the report shows)."""
    count = len(raws)
    trained = [i for i, raw in enumerate(raws) if has_trained(raw)]
    found = []
    if len(trained) == count:
        found.append(Check("workers.trained", True, f"all {count} workers trained"))
    # Otherwise each worker's own checks say why it did not (crashed, no training happened...).
    if len(trained) > 1:
        found.append(_agreement(raws, trained))
    found.extend(_shared_writes(raws, shown_path))
    return found


def has_trained(raw: dict[str, Any]) -> bool:
    return steps_trained(raw) > 0


def workers_phrase(indexes: list[int]) -> str:
    if len(indexes) == 1:
        return f"worker {indexes[0]}"
    return "workers " + ", ".join(map(str, indexes[:-1])) + f" and {indexes[-1]}"


def trained_records(raw: dict[str, Any]) -> list[tuple[str, tuple[float, ...], str | None]]:
    """(what, losses, weights digest) of every fit and custom loop that trained, in order."""
    out = []
    for fit in fit_records(raw):
        if fit.steps:
            out.append((f"{fit.method} at {fit.site}", fit.losses, fit.weights))
    for run in run_records(raw):
        if run.steps and run.applies_gradients:
            out.append((f"{run.name} at {run.site}", run.losses, run.weights))
    for loop in loop_records(raw):
        if loop.steps:
            out.append((f"{loop.name} at {loop.site}", loop.losses, loop.weights))
    return out


def _agreement(raws: list[dict[str, Any]], trained: list[int]) -> Check:
    records = {i: trained_records(raws[i]) for i in trained}
    first = trained[0]
    for other in trained[1:]:
        if len(records[other]) != len(records[first]):
            return Check("workers.agree", False, f"the workers disagree: worker {first} trained {len(records[first])} times, worker {other} {len(records[other])}")
        for (what, losses, weights), (_, other_losses, other_weights) in zip(records[first], records[other]):
            if len(losses) != len(other_losses) or any(
                not math.isclose(a, b, rel_tol=LOSS_TOLERANCE, abs_tol=LOSS_TOLERANCE) for a, b in zip(losses, other_losses)
            ):
                return Check(
                    "workers.agree", False, f"the workers disagree: {what} losses differ (worker {first} {_short(losses)}, worker {other} {_short(other_losses)})"
                )
            if weights != other_weights:
                return Check("workers.agree", False, f"the workers disagree: {what} ends with different weights (worker {first} {weights}, worker {other} {other_weights})")
    digests = ", ".join(str(w) for _, _, w in records[first])
    return Check("workers.agree", True, f"the workers agree: same losses and final weights ({digests})")


def _short(losses: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in losses) + "]"


def _shared_writes(raws: list[dict[str, Any]], shown_path) -> list[Check]:
    writers: dict[str, dict[int, WriteRecord]] = {}
    for index, raw in enumerate(raws):
        for write in write_records(raw):
            writers.setdefault(write.path, {}).setdefault(index, write)
    shared = {path: by for path, by in writers.items() if len(by) > 1}
    if not writers:
        return []
    if not shared:
        return [Check("workers.files", True, "no two workers wrote the same path")]
    found = []
    for path, by in shared.items():
        write = next(iter(by.values()))
        how = write.api + (f" via {write.via}" if write.via else "") + (f" at {write.site}" if write.site else "")
        found.append(
            Check(
                "workers.files",
                False,
                f"{workers_phrase(sorted(by))} {'both' if len(by) == 2 else 'all'} wrote {shown_path(path)} ({how}): on a shared file system they overwrite each other; "
                "only the chief should write there, the others to a temporary folder",
            )
        )
    return found
