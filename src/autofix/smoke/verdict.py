"""The verdict of ``--compare`` from the runs' records (parent side; NumPy, no TensorFlow).

A pair is the migrated run on ``n`` replicas against its reference: the original as N virtual
replicas (or micro-steps) for ``n`` > 1, the original as written for ``n`` = 1. Each pair is
judged on, in this order (the first that differs decides):

1. **what each replica was fed** (:func:`feeds`): the replicas' examples together are the
   global batch, none twice, as many on each (of a batch that does not split evenly, an
   epoch's last, as tf.distribute splits it: ``ceil(B / N)`` each, the rest to the last); and
   they are the reference's, in its order;
2. **the initial state**: the weights each run starts from; a variable set to the reference's
   value is said (only ones drawn by the same Keras initializer in both runs are ever set);
3. **the optimizers**: their class and hyper-parameters, their learning rate at every step,
   and their learning-rate schedule read at the same number of examples seen;
4. **every step compared** (:mod:`autofix.smoke.tolerance`): the gradients applied, the
   weights after it, the optimizers' variables (moments, momentum, the step count);
5. **the noise layers**: which ones each step ran, with which rate and ``training`` flag;
6. **what the script sees** (:func:`reported`): what its step returns, ``fit``'s logs, every
   metric's result after each step.

What cannot be held equal makes a pair inconclusive, never different and never proven: draws
the harness does not hold (:mod:`autofix.smoke.noise`), data that differs between the
original's own runs, a reference that cannot be computed exactly (a step that updates one
model after another, written inline).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from autofix.smoke.report import Pair, SmokeReport

# Reported values and learning rates: float32 sums made in another order, over N replicas.
REPORTED_RELATIVE = 1e-3
RATE_RELATIVE = 1e-6
HYPER_PARAMETERS = (
    "learning_rate",
    "momentum",
    "nesterov",
    "beta_1",
    "beta_2",
    "epsilon",
    "amsgrad",
    "rho",
    "centered",
    "weight_decay",
    "clipnorm",
    "global_clipnorm",
    "clipvalue",
    "use_ema",
    "ema_momentum",
    "initial_accumulator_value",
    "gradient_accumulation_steps",
    "loss_scale_factor",
)


@dataclass
class Judged:
    """One pair's outcome: ``status`` same / different / not-compared (inconclusive)."""

    status: str
    message: str
    steps: int = 0
    variables: int = 0
    worst: float | None = None
    difference: dict[str, Any] | None = None
    said: list[str] = field(default_factory=list)

    def pair(self, replicas: int) -> Pair:
        return Pair(replicas, replicas, self.status, self.message, self.variables, self.worst, self.difference)


def trace(report: SmokeReport) -> dict[str, Any]:
    return report.trace or {}


def judge_pair(
    migrated: SmokeReport, reference: SmokeReport, replicas: int, original_one: SmokeReport | None = None, compared: int | None = None
) -> Judged:
    """The migrated run on ``replicas`` against ``reference``; ``original_one``: the original
    as written (to tell data the original itself does not reproduce); ``compared``: the
    replicas the migration is judged on (its step counts written for them hold on 1 too)."""
    import numpy as np

    from autofix.smoke import tolerance
    from autofix.smoke.snapshot import match

    where = f"on {_plural(replicas, 'replica')}"
    against = "the original's data-parallel step (its step on each replica's shard, gradients averaged)" if replicas > 1 else "the original"
    mine, theirs = trace(migrated), trace(reference)
    if not mine or not theirs:
        missing = "the migrated run" if not mine else "the original"
        return Judged("not-compared", f"{where}: no training step was seen in {missing} (no update of its weights)")
    steps = min(int(mine.get("steps", 0)), int(theirs.get("steps", 0)))
    if steps == 0:
        return Judged("not-compared", f"{where}: no training step was recorded")
    phased = _phases(mine, theirs)
    if phased is not None:
        return Judged(phased[0], f"{where}: {phased[1]}", steps)
    if int(mine.get("steps", 0)) != int(theirs.get("steps", 0)):
        return Judged(
            "different",
            f"{where}: the migrated script trained {_plural(int(mine.get('steps', 0)), 'step')} where the original's data-parallel run "
            f"trained {int(theirs.get('steps', 0))} (of the {_plural(int(mine.get('asked', steps) or steps), 'step')} compared)",
        )
    unsure: list[str] = []
    for side, recorded in (("the migrated run", mine), ("the original", theirs)):
        for draw in recorded.get("unheld") or ():
            unsure.append(f"{draw} in {side}'s step is random in a way the comparison cannot hold equal")
    inexact = theirs.get("inexact") or []
    if inexact:
        unsure.append(f"the original's step cannot be computed as replicas: {inexact[0]}")

    piped = pipeline(mine.get("pipeline"), theirs.get("pipeline"), compared or replicas)
    if piped is None:
        piped = loops(mine.get("pipeline"), theirs.get("pipeline"), compared or replicas)
    if piped is not None:
        return Judged("different", f"{where}: {piped}", steps)

    unscaled = next((f["unscaled"] for f in (theirs.get("pipeline") or {}).get("fits", []) if f.get("unscaled")), None)
    fed = feeds(mine.get("feeds") or {}, theirs.get("feeds") or {}, replicas, steps, trace(original_one) if original_one else None, unscaled)
    if fed.status == "different":
        return Judged("different", f"{where}: {fed.message}", steps)
    if fed.status == "not-compared":
        unsure.append(fed.message)
    else:
        epoch = epochs(mine.get("pipeline"), theirs.get("pipeline"), compared or replicas)
        if epoch is not None:
            return Judged("different", f"{where}: {epoch}", steps)

    try:
        with np.load(mine["file"]) as m_data, np.load(theirs["file"]) as o_data:
            m_arrays = {k: m_data[k] for k in m_data.files}
            o_arrays = {k: o_data[k] for k in o_data.files}
    except (OSError, ValueError, KeyError) as exc:
        return Judged("not-compared", f"{where}: the runs' steps could not be read ({exc})")
    m_vars = [v for v in mine.get("variables", ()) if v["kind"] == "weight"]
    o_vars = [v for v in theirs.get("variables", ()) if v["kind"] == "weight"]
    pairs = match([v["name"] for v in m_vars], [v["name"] for v in o_vars], [tuple(v["shape"]) for v in m_vars], [tuple(v["shape"]) for v in o_vars])
    if pairs is None:
        # Both runs are the same scripts' steps on the same data: updating other variables (fewer,
        # more, of other shapes) is training another model, or leaving some of it untrained.
        return _unless_unsure(
            Judged(
                "different",
                f"{where}: the migrated step updates other variables than the original's ({len(m_vars)} against {len(o_vars)}, or other shapes): "
                "another model (a layer's width or bias changed), or a variable left out of the update",
                steps,
            ),
            unsure,
        )
    said = _transplants(mine)

    optimizers = _optimizers(mine.get("optimizers") or [], theirs.get("optimizers") or [], steps, replicas)
    if optimizers is not None:
        return _unless_unsure(Judged("different", f"{where}: {optimizers}", steps), unsure)

    noisy = _noise_layers(mine.get("noise_layers") or [], theirs.get("noise_layers") or [])
    if noisy is not None:
        return _unless_unsure(Judged("different", f"{where}: {noisy}", steps), unsure)

    worst = 0.0
    variables = 0
    quiet = 0
    for step in range(1, steps + 1):
        outcome = tolerance.compare(mine["variables"], theirs["variables"], pairs, m_arrays, o_arrays, step)
        if outcome.not_compared is not None:
            if (outcome.difference or {}).get("kind") == "initial":
                return _unless_unsure(_initial(outcome, m_vars, o_vars, mine, where), unsure)
            return Judged("not-compared", f"{where}: {outcome.not_compared}", steps)
        if not outcome.same:
            difference = dict(outcome.difference or {}, step=step)
            what = {"gradient": "the gradient of ", "weight": "", "optimizer": "the optimizer's "}[difference.get("kind", "weight")]
            noun = "the update" if difference.get("kind") == "weight" else "it"
            clipped = "clipped" in (theirs.get("done") or ())
            message = (
                f"{where}, in step {step}, {what}{difference.get('name')} differs from {against}: "
                f"{_ratio_text(difference.get('ratio'), replicas, noun, clipped)} (relative difference {difference.get('relative', math.inf):.3g})"
            )
            return _unless_unsure(Judged("different", message, steps, outcome.compared, outcome.worst, difference, said), unsure)
        worst = max(worst, outcome.worst)
        variables = outcome.compared
        quiet = max(quiet, outcome.skipped)

    inline = inline_loss(mine.get("reported") or {}, theirs.get("reported") or {}, steps, replicas)
    if inline is not None:
        return _unless_unsure(Judged(inline[0], f"{where}: {inline[1]}", steps, variables, worst, {"kind": "reported"}), unsure)
    shown = reported(mine.get("reported") or {}, theirs.get("reported") or {}, steps, replicas)
    unread = unreported(mine.get("reported") or {}, theirs.get("reported") or {}, steps)
    if unread is not None and unread not in said:
        said = [*said, unread]
    if shown is not None:
        return _unless_unsure(Judged("different", f"{where}: {shown}", steps, variables, worst, {"kind": "reported"}), unsure)

    if unsure:
        return Judged("not-compared", f"{where}: the same {_plural(steps, 'step')}, but {unsure[0]}", steps, variables, worst)
    asked = int(mine.get("asked") or steps)
    short = f" (of {asked} asked: the scripts trained no more)" if asked > steps else ""
    noise = (
        f"; {quiet} of them with a gradient at rounding level (below {tolerance.NOISE:g} of the largest: a bias before "
        f"BatchNormalization) compared by its size only"
        if quiet
        else ""
    )
    phased = mine.get("phases") or []
    over = f" in {len(phased)} phases of training ({', '.join(_phase_text(p) for p in phased)})" if len(phased) > 1 else ""
    message = f"{where}: the same {_plural(steps, 'step')}{short}{over} as {against} ({variables} variables, within {worst:.1g}{noise})"
    stops = [f"the {side} {recorded['stopped']}" for side, recorded in (("migrated script", mine), ("original", theirs)) if recorded.get("stopped")]
    if stops:
        text = f"not compared: the training after {'both scripts stopped: ' if len(stops) > 1 else ''}{'; '.join(stops)}"
        said = [*said, *([text] if text not in said else [])]
    return Judged("same", message, steps, variables, worst, None, said)


def _phase_text(phase: dict[str, Any]) -> str:
    return f"{phase.get('kind')} at {phase.get('site')}"


def _phases(mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[str, str] | None:
    """Every phase of training (a fit, a custom loop, train_on_batch: K steps each) in the same
    order and of the same length in both runs: a phase missing or extra is a training the
    migration does not do, or does that the original does not. ``(status, why)``, or None when
    they agree (or a run recorded none)."""
    m_phases, o_phases = mine.get("phases") or [], theirs.get("phases") or []
    if not m_phases or not o_phases:
        return None
    m_steps, o_steps = [int(p.get("steps", 0)) for p in m_phases], [int(p.get("steps", 0)) for p in o_phases]
    if m_steps == o_steps:
        return None
    shown = lambda phases: ", ".join(f"{_phase_text(p)}: {_plural(int(p.get('steps', 0)), 'step')}" for p in phases)  # noqa: E731
    text = (
        f"the migrated script trains in {_plural(len(m_phases), 'phase')} ({shown(m_phases)}) where the original trains in "
        f"{len(o_phases)} ({shown(o_phases)})"
    )
    if len(m_phases) < len(o_phases):
        text += f": the original's {_phase_text(o_phases[len(m_phases)])} has no counterpart in the migration"
    elif len(m_phases) > len(o_phases):
        text += f": the migration's {_phase_text(m_phases[len(o_phases)])} has no counterpart in the original"
    else:
        first = next(n for n, (a, b) in enumerate(zip(m_steps, o_steps)) if a != b)
        text += f": phase {first + 1} trains {m_steps[first]} steps in the migration, {o_steps[first]} in the original"
    shorter = theirs if (len(o_phases), sum(o_steps)) < (len(m_phases), sum(m_steps)) else mine
    if shorter.get("stopped"):
        if shorter is theirs:
            return "not-compared", f"{text}; the original {shorter['stopped']}: its later training cannot be compared"
        return "different", f"{text}; the migrated script {shorter['stopped']}"
    return "different", text


def _unless_unsure(judged: Judged, unsure: list[str]) -> Judged:
    """A difference seen where something could not be held equal proves nothing either way."""
    if not unsure or judged.status != "different":
        return judged
    return Judged("not-compared", f"{judged.message}; but {unsure[0]}, which may explain it", judged.steps, judged.variables, judged.worst, judged.difference)


def pipeline(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, replicas: int = 1) -> str | None:
    """What holding the runs equal hides: every run's shuffles are turned off (so a shuffle the
    migration adds or removes would not show in what the replicas are fed), a partial last
    batch dropped and the epochs (and steps an epoch) fit is asked for come after the steps
    compared, and the seeds the script sets are overridden. Compared where the scripts do them."""
    if mine is None or theirs is None:
        return None
    m_seeds, o_seeds = [tuple(x) for x in mine.get("seeds") or []], [tuple(x) for x in theirs.get("seeds") or []]
    # A migration may seed an original that leaves its start to chance (its initial weights are
    # then set to the original's where both draw them alike); an original that seeds itself
    # chose its start, and a migration must keep the choice.
    if o_seeds and m_seeds != o_seeds:
        said = lambda seeds: ", ".join(f"{name}({value})" for name, value in seeds) or "nothing"  # noqa: E731
        return (
            f"the script seeds otherwise: the migration calls {said(m_seeds)}, the original {said(o_seeds)} "
            "(its random initial state and draws are not the original's)"
        )
    # fit is capped to the steps compared in every run: how long it was asked to train shows
    # only in its arguments.
    for m_fit, o_fit in zip(mine.get("fits") or [], theirs.get("fits") or []):
        for key in ("epochs", "initial_epoch"):
            if m_fit.get(key) != o_fit.get(key):
                return f"fit is asked for {key}={m_fit.get(key)} in the migration, {key}={o_fit.get(key)} in the original: it trains for another number of epochs"
        steps = _steps_per_epoch(m_fit.get("steps_per_epoch"), o_fit.get("steps_per_epoch"), replicas)
        if steps is not None:
            return steps
        given = _fit_data(m_fit, o_fit)
        if given is not None:
            return given
    m_shuffled, o_shuffled = mine.get("shuffled") or [], theirs.get("shuffled") or []
    if len(m_shuffled) > len(o_shuffled):
        return (
            f"the migration shuffles a dataset the original does not (Dataset.shuffle at {m_shuffled[-1]}): "
            "its steps are fed other examples than the original's"
        )
    if len(m_shuffled) < len(o_shuffled):
        return f"the original shuffles its data (Dataset.shuffle at {o_shuffled[-1]}), the migration does not"
    m_drop, o_drop = mine.get("dropping") or [], theirs.get("dropping") or []
    if len(m_drop) > len(o_drop):
        return (
            f"the migration drops the partial last batch of an epoch (drop_remainder=True at {m_drop[-1]}), "
            "the original trains on it"
        )
    if len(m_drop) < len(o_drop):
        return f"the original drops the partial last batch of an epoch (drop_remainder=True at {o_drop[-1]}), the migration trains on it"
    return None


def _fit_data(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """What ``fit`` trains on, as the scripts give it: its arrays' rows (every run is capped to
    the steps compared, so arrays cut short show only here), whether it shuffles them each epoch
    (turned off in every run), the share kept apart for validation. A right migration keeps
    each as it is."""
    rows_m, rows_o = mine.get("examples"), theirs.get("examples")
    if isinstance(rows_m, int) and isinstance(rows_o, int) and rows_m != rows_o:
        return f"fit trains on {rows_m} examples in the migration, {rows_o} in the original: an epoch holds other examples"
    if "shuffle" in mine and "shuffle" in theirs and mine["shuffle"] != theirs["shuffle"]:
        return (
            f"fit is given shuffle={mine['shuffle']!r} in the migration, shuffle={theirs['shuffle']!r} in the original "
            "(Keras's default is True): it trains on its examples in another order"
        )
    calls_m, calls_o = mine.get("callbacks"), theirs.get("callbacks")
    if isinstance(calls_m, list) and isinstance(calls_o, list) and calls_m != calls_o:
        said = lambda names: ", ".join(names) or "none"  # noqa: E731
        return (
            f"fit is given other callbacks: {said(calls_m)} in the migration, {said(calls_o)} in the original "
            "(a callback may change the learning rate, stop training or restore weights after the steps compared)"
        )
    split_m, split_o = mine.get("validation_split"), theirs.get("validation_split")
    if split_m is not None and split_o is not None and split_m != split_o:
        return (
            f"fit keeps validation_split={split_m!r} of its arrays apart in the migration, {split_o!r} in the original: "
            "it trains on other examples"
        )
    return None


def epochs(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, replicas: int = 1) -> str | None:
    """How many batches an epoch of the trained dataset holds (fit's dataset, or the one the
    script's own loop iterates), where both runs' are known: every run is capped to the steps
    compared, so a dataset cut short (``take``) or made longer (``repeat``) shows only here.
    Asked only when both runs were fed the same batches (the reference's batch is the
    migration's global batch, so a right migration's epoch of the whole data holds as many).
    An epoch the script cuts to a number of batches (``ds.take(n)``) may keep its steps or its
    examples: n, or n / N, as fit's ``steps_per_epoch`` may (n the original's own steps, also
    where its reference runs N of them a step as micro-steps)."""
    if mine is None or theirs is None:
        return None
    pairs = list(zip(mine.get("fits") or [], theirs.get("fits") or [], ["fit's dataset"] * len(mine.get("fits") or [])))
    m_loop, o_loop = mine.get("trained") or {}, theirs.get("trained") or {}
    pairs.append((m_loop, o_loop, f"the dataset iterated at {m_loop.get('site')}"))
    for m_fit, o_fit in zip(mine.get("fits") or [], theirs.get("fits") or []):
        if m_fit.get("validation") and o_fit.get("validation") and m_fit["validation"] != o_fit["validation"]:
            m_count, o_count = m_fit["validation"].split(":")[0], o_fit["validation"].split(":")[0]
            sizes = f" ({m_count} examples in the migration, {o_count} in the original)" if m_count != o_count else ""
            return (
                f"fit validates on other data than the original's{sizes}: what it reports at the end of an epoch "
                "(val_loss, val_ metrics) and the callbacks that read it differ"
            )
    for m_data, o_data, what in pairs:
        m_steps, o_steps = _steps_an_epoch(m_data), _steps_an_epoch(o_data)
        if m_steps is None or o_steps is None:
            continue
        kept = {o_steps}
        if m_data.get("limited") or o_data.get("limited"):
            # The original's own steps an epoch (its batches: a reference of micro-steps runs
            # at its batch; a scaled one keeps a take(n) of batches), or its examples' (/ N).
            own = o_data["batches"]
            kept |= {own} | {own // n for n in range(2, replicas + 1)} | {-(-own // n) for n in range(2, replicas + 1)}
        if m_steps not in kept:
            return (
                f"an epoch of {what} makes {_plural(m_steps, 'step')} in the migration, where the original's makes {o_steps} "
                "at the same global batch: after the steps compared it trains on other examples"
            )
    return None


def loops(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, replicas: int = 1) -> str | None:
    """How many times the script's own ``for`` loops around its first update run
    (:mod:`autofix.smoke.script_loops`): every run is capped to the steps compared, so a loop
    of epochs cut (``range(EPOCHS // 2)``) shows only here. Compared where both runs' loops are
    known and alike (as many, of the same kinds); a loop over a range must run as often as the
    original's, but the innermost one, when no loop over data and no ``fit`` is inside it,
    counts steps: it may keep the original's or divide them by the replicas (the same examples
    at N x the batch), as fit's ``steps_per_epoch`` may."""
    m_record, o_record = (mine or {}).get("loops"), (theirs or {}).get("loops")
    if not m_record or not o_record:
        return None
    m_loops, o_loops = m_record.get("loops") or [], o_record.get("loops") or []
    if len(m_loops) != len(o_loops) or any(m["kind"] != o["kind"] for m, o in zip(m_loops, o_loops)):
        return None
    for index, (m_loop, o_loop) in enumerate(zip(m_loops, o_loops)):
        m_count, o_count = m_loop.get("length"), o_loop.get("length")
        if m_loop["kind"] != "range" or not isinstance(m_count, int) or not isinstance(o_count, int):
            continue
        kept = {o_count}
        steps = not m_record.get("fit") and not o_record.get("fit") and all(loop["kind"] == "range" for loop in m_loops[index + 1:])
        if steps and index == len(m_loops) - 1:
            kept |= {o_count // n for n in range(2, replicas + 1)} | {-(-o_count // n) for n in range(2, replicas + 1)}
        if m_count not in kept:
            also = f" (or {sorted(kept - {o_count})[0]} for its steps at {replicas} x the batch)" if len(kept) > 1 else ""
            return (
                f"the loop at {m_loop['site']} runs {_plural(m_count, 'time')} in the migration, where the original's "
                f"(at {o_loop['site']}) runs {o_count}{also}: after the steps compared it trains for another number of "
                "epochs or steps"
            )
    return None


def _steps_an_epoch(data: dict[str, Any]) -> int | None:
    """The steps an epoch of a run's trained dataset makes: its batches, N of them a step in a
    reference run of micro-steps."""
    batches, micro = data.get("batches"), data.get("micro") or 1
    if not isinstance(batches, int) or isinstance(batches, bool) or not isinstance(micro, int):
        return None
    return -(-batches // max(1, micro))


def _steps_per_epoch(mine: Any, theirs: Any, replicas: int) -> str | None:
    """``fit``'s ``steps_per_epoch`` as written (every run is capped to the steps compared): the
    original's (the same number of steps, each of N x its examples), or the original's divided
    by the replicas (the same examples an epoch); another number ends its epochs elsewhere.
    Compared where both scripts give one."""
    if not isinstance(mine, int) or not isinstance(theirs, int) or isinstance(mine, bool) or isinstance(theirs, bool):
        return None
    kept = {theirs} | {theirs // n for n in range(2, replicas + 1)} | {-(-theirs // n) for n in range(2, replicas + 1)}
    if mine in kept:
        return None
    divided = f", or {theirs} / {replicas} for the same examples an epoch" if replicas > 1 else ""
    return (
        f"fit is asked for steps_per_epoch={mine} in the migration, steps_per_epoch={theirs} in the original: its epochs end at "
        f"other steps (a right migration keeps {theirs}{divided})"
    )


def feeds(
    mine: dict[str, Any], theirs: dict[str, Any], replicas: int, steps: int, original: dict[str, Any] | None, unscaled: str | None = None
) -> Judged:
    """What the replicas were fed: a partition of the global batch (else different), the
    reference's examples in its order (else not-compared: the data was not held equal).
    ``unscaled``: what the original's ``fit`` was fed when the reference could not ask it for
    N x its batch (a Python generator, a PyDataset): a global batch of another size is then
    not-compared, never different."""
    unseen = None
    for step in range(steps):
        calls = mine.get(str(step)) or []
        if not calls:
            continue
        first = calls[0]
        reference = (theirs.get(str(step)) or [None])[0]
        if reference and len(calls) > 1:
            # Several strategy.run calls in one step (one computing, per replica, what the
            # step is then given): the one fed the reference's examples is the step's.
            wanted = [row for r in range(replicas) for row in reference.get(str(r), [])]
            first = next((c for c in calls if [row for r in range(replicas) for row in (c.get(str(r)) or [])] == wanted), first)
        got = [first.get(str(r)) for r in range(replicas)]
        if replicas > 1 and any(rows is None for rows in got):
            missing = next(r for r, rows in enumerate(got) if rows is None)
            return Judged("different", f"in step {step + 1}, replica {missing} was fed nothing: the step did not run on every replica")
        if replicas > 1:
            sizes = [len(rows) for rows in got]
            if len(set(sizes)) > 1 and sizes != distributed_shares(sum(sizes), replicas):
                return Judged(
                    "different",
                    f"in step {step + 1}, the replicas were fed {', '.join(map(str, sizes))} examples: each must get an equal share of the "
                    f"global batch (of a batch that does not split evenly, an epoch's last, tf.distribute's: "
                    f"{', '.join(map(str, distributed_shares(sum(sizes), replicas)))})",
                )
            seen: Counter = Counter()
            for rows in got:
                seen.update(set(rows))
            # Examples that repeat within a replica's own shard (identical rows) cannot show
            # which replica got which: the partition is then not judged by content.
            repeated = any(len(set(rows)) < len(rows) for rows in got)
            twice = 0 if repeated else sum(1 for count in seen.values() if count > 1)
            if twice and all(rows == got[0] for rows in got):
                return Judged(
                    "different",
                    f"in step {step + 1}, every replica was fed the same {sizes[0]} examples: the step is given the whole batch on each "
                    f"replica (is its dataset distributed with strategy.experimental_distribute_dataset?)",
                )
            if twice:
                return Judged("different", f"in step {step + 1}, {twice} examples were fed to more than one replica")
        reference = (theirs.get(str(step)) or [None])[0]
        if not reference:
            unseen = unseen or "what the original was fed could not be seen (its batches are not given to a step function)"
            continue
        wanted = [row for r in range(replicas) for row in reference.get(str(r), [])]
        fed = [row for rows in got for row in rows]
        if len(fed) != len(wanted) and unscaled is not None:
            return Judged(
                "not-compared",
                f"the original's fit is fed by {unscaled}, whose batch the reference cannot ask for {replicas} x: "
                f"in step {step + 1} the replicas were fed {len(fed)} examples in all, the reference {len(wanted)}",
            )
        if len(fed) != len(wanted):
            return Judged(
                "different",
                f"in step {step + 1}, the replicas were fed {len(fed)} examples in all, the original's step {len(wanted)}: "
                f"the global batch must be {replicas} x the original's batch",
            )
        if fed != wanted:
            if Counter(fed) == Counter(wanted):
                return Judged("not-compared", f"in step {step + 1} the replicas were fed the original's examples in another order")
            if original and not _reproducible(original, reference, replicas):
                return Judged("not-compared", "the original's own runs were fed different examples (randomness in its input pipeline that seeds do not hold?)")
            return Judged("not-compared", f"in step {step + 1} the replicas were fed other examples than the original (the data was not held equal)")
    # Unseen only where the original's step is written inline and runs as written (the pair
    # on one replica): its updates are still compared.
    return Judged("same", unseen or "")


def distributed_shares(total: int, count: int) -> list[int]:
    """tf.distribute's split of a batch over ``count`` replicas (as
    :func:`autofix.smoke.replicas.shares`, which runs where TensorFlow is)."""
    size = -(-total // count)
    return [max(0, min(size, total - r * size)) for r in range(count)]


def _reproducible(original: dict[str, Any], reference: dict[str, Any], replicas: int) -> bool:
    """Whether the original as written was fed, in its first step, the first replica's shard
    of the reference's first step (else its data differs from run to run)."""
    calls = (original.get("feeds") or {}).get("0") or []
    if not calls:
        return True
    alone = calls[0].get("0") or []
    first = reference.get("0") or []
    return not alone or alone == first[: len(alone)]


def _initial(outcome: Any, m_vars: list, o_vars: list, mine: dict[str, Any], where: str) -> Judged:
    """The runs start from other weights: why, where the origins say it (a load, another
    initializer: different), else not-compared."""
    name = (outcome.difference or {}).get("name")
    refusal = (mine.get("transplanted") or {}).get(name, "")
    m_origin = next((v.get("origin") for v in m_vars if v["name"] == name), None) or {}
    o_origin = next((v.get("origin") for v in o_vars if v["name"] == name), None) or {}
    loads = [f"the {side} {origin['what']}" for side, origin in (("original", o_origin), ("migration", m_origin)) if origin.get("kind") == "loaded"]
    if loads:
        if m_origin.get("kind") != "loaded":
            why = f"the original loads them ({o_origin.get('what')}), the migration does not"
        elif o_origin.get("kind") != "loaded":
            why = f"the migration loads them ({m_origin.get('what')}), the original does not"
        else:
            why = f"both load them ({o_origin.get('what')}; {m_origin.get('what')}), and the values differ"
        return Judged("different", f"{where}: the migrated run starts from other weights than the original ({name}): {why}")
    if m_origin.get("kind") == "initializer" and o_origin.get("kind") == "initializer" and refusal.startswith("not set: initialized by"):
        return Judged("different", f"{where}: the migrated run starts from other weights than the original ({name}): {refusal.removeprefix('not set: ')}")
    reason = refusal.removeprefix("not set: ") or "no step function or fit to set them in (an eager loop has read them before it updates)"
    return Judged("not-compared", f"{where}: the runs start from different weights ({name}) and they could not be set to the original's: {reason}")


def _transplants(mine: dict[str, Any]) -> list[str]:
    done = [name for name, what in (mine.get("transplanted") or {}).items() if what.startswith("set to")]
    if not done:
        return []
    return [
        f"the initial values of {_plural(len(done), 'variable')} ({', '.join(done[:3])}{', ...' if len(done) > 3 else ''}) were set to the original's "
        f"(both runs draw them from the same Keras initializers, in another order)"
    ]


def _optimizers(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], steps: int, replicas: int) -> str | None:
    if len(mine) != len(theirs):
        return f"the migrated step updates with {len(mine)} optimizer(s), the original's with {len(theirs)}"
    for m, o in zip(mine, theirs):
        if m.get("name") != o.get("name"):
            return f"the migration's optimizer is {m.get('name')}, the original's {o.get('name')}"
        m_config, o_config = m.get("config") or {}, o.get("config") or {}
        for key in HYPER_PARAMETERS:
            a, b = m_config.get(key), o_config.get(key)
            if key == "learning_rate" and (isinstance(a, dict) or isinstance(b, dict)):
                continue  # a schedule: compared by its rates below
            if not _same_setting(a, b):
                return f"{o.get('name')}'s {key} is {a} in the migration, {b} in the original"
        m_rates, o_rates = m.get("learning_rates") or [], o.get("learning_rates") or []
        for step, (a, b) in enumerate(zip(m_rates[: steps + 1], o_rates[: steps + 1]), start=1):
            if a is not None and b is not None and not _close(a, b, RATE_RELATIVE):
                return (
                    f"{o.get('name')}'s learning rate at step {step} is {a:.6g} in the migration, {b:.6g} in the original at the same "
                    f"number of examples{_per_example(replicas)}"
                )
        m_schedule, o_schedule = m.get("schedule"), o.get("schedule")
        if m_schedule and o_schedule:
            for (t, a), (_, b) in zip(m_schedule, o_schedule):
                if not _close(a, b, RATE_RELATIVE):
                    return (
                        f"{o.get('name')}'s learning-rate schedule gives {a:.6g} at step {t} of the migration and {b:.6g} at the same "
                        f"number of examples in the original{_per_example(replicas, t)}"
                    )
        elif bool(m_schedule) != bool(o_schedule):
            return f"{o.get('name')}'s learning rate follows a schedule in the {'migration' if m_schedule else 'original'} only"
    return None


def _per_example(replicas: int, step: int | None = None) -> str:
    if replicas == 1:
        return ""
    at = f" (its step {step * replicas})" if step is not None else ""
    return (
        f"{at}: on {replicas} replicas a step takes {replicas} x the original's examples, so a schedule counted in steps "
        f"acts {replicas} x later in the data (divide its step counts by strategy.num_replicas_in_sync)"
    )


def _same_setting(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return _close(float(a), float(b), RATE_RELATIVE)
    return a == b


def _close(a: float, b: float, relative: float) -> bool:
    return abs(a - b) <= relative * max(abs(a), abs(b)) + 1e-12


def _noise_layers(mine: list[list[Any]], theirs: list[list[Any]]) -> str | None:
    def shown(call: list[Any]) -> str:
        details = ", ".join(f"{k}={v}" for k, v in sorted(call[1].items()))
        return f"{call[0]}({details}) with training={call[2]}"

    m_set = {shown(c) for c in mine}
    o_set = {shown(c) for c in theirs}
    if m_set == o_set:
        return None
    extra = sorted(m_set - o_set)
    missing = sorted(o_set - m_set)
    parts = []
    if missing:
        parts.append(f"the original's step runs {', '.join(missing)}")
    if extra:
        parts.append(f"the migrated step runs {', '.join(extra)}")
    return "its noise layers run otherwise: " + "; ".join(parts)


def reported(mine: dict[str, Any], theirs: dict[str, Any], steps: int, replicas: int) -> str | None:
    """What the script reports in each step (its step's return, fit's logs, metrics)."""
    for step in range(steps):
        for kind, label in (("returns", "what its step returns"), ("logs", "what fit logs")):
            a, b = (mine.get(kind) or {}).get(str(step)), (theirs.get(kind) or {}).get(str(step))
            if a is None or b is None:
                continue
            different = _first_different(a, b)
            if different is not None:
                where, x, y = different
                return f"{label} differs in step {step + 1}{where}: {_value(x)} in the migration, {_value(y)} in the original{_reported_ratio(x, y, replicas)}"
    last = max(
        (int(k) for k in set((mine.get("metrics") or {}).keys()) & set((theirs.get("metrics") or {}).keys())),
        default=None,
    )
    if last is None:
        return None
    for step in range(1, last + 1):
        m_list, o_list = (mine.get("metrics") or {}).get(str(step)) or [], (theirs.get("metrics") or {}).get(str(step)) or []
        for n, o_metric in enumerate(o_list):
            # Metrics of one name (a teacher's fit and its distiller both track a "loss"): the
            # k-th of that name and class in each run, in the order they were first updated.
            same = lambda metric, o_metric=o_metric: metric["name"] == o_metric["name"] and metric["class"] == o_metric["class"]  # noqa: E731
            k = sum(1 for earlier in o_list[:n] if same(earlier))
            m_metric = next(iter([m for m in m_list if same(m)][k : k + 1]), None)
            if m_metric is None or m_metric.get("value") is None or o_metric.get("value") is None:
                continue
            different = _first_different(m_metric["value"], o_metric["value"])
            if different is not None:
                _, x, y = different
                return (
                    f"the metric {o_metric['name']} ({o_metric['class']}) reads {_value(x)} after step {step} in the migration, "
                    f"{_value(y)} in the original{_reported_ratio(x, y, replicas)}"
                )
    return None


def inline_loss(mine: dict[str, Any], theirs: dict[str, Any], steps: int, replicas: int) -> tuple[str, str] | None:
    """An original whose step is written inline returns nothing: what its loop reports is taken
    to be the loss its update differentiated (its micro-steps' averaged, as the replicas' are),
    set against a migrated step that returns one number. ``("different", why)`` when it is
    N x or 1/N of it (a replica's share reported, or the replicas' losses summed);
    ``("not-compared", why)`` for another difference: the original may print another value
    than the one it differentiates (a loss without its regularization term)."""
    if theirs.get("returns"):
        return None
    returns, losses = mine.get("returns") or {}, theirs.get("losses") or {}
    for step in range(steps):
        a, b = returns.get(str(step)), losses.get(str(step))
        if not isinstance(a, float) or not isinstance(b, float) or _first_different(a, b) is None:
            continue
        text = f"the loss its step returns differs in step {step + 1}: {_value(a)} in the migration, {_value(b)} in the original (the loss its loop differentiates)"
        ratio = _reported_ratio(a, b, replicas)
        if replicas > 1 and b and (abs(a / b - 1 / replicas) < 0.05 / replicas or abs(a / b - replicas) < 0.05 * replicas):
            return "different", text + ratio
        return "not-compared", f"{text}{ratio}: the original's loop may report another value than the one it differentiates"
    return None


def unreported(mine: dict[str, Any], theirs: dict[str, Any], steps: int) -> str | None:
    """What a proof did not compare of what the scripts report, said with it: an original whose
    step is written inline (it returns nothing, its loop reports what it computes) against a
    migrated step whose return cannot be set against the loss the original differentiates."""
    if theirs.get("returns") or not theirs.get("losses"):
        return None
    returns = mine.get("returns") or {}
    losses = theirs.get("losses") or {}
    for step in range(steps):
        a, b = returns.get(str(step)), losses.get(str(step), _MISSING)
        if b is _MISSING:
            continue
        if a is None and not mine.get("logs"):
            return (
                "not compared: the loss the loops report (the original's step is written inline and the migrated step returns "
                "nothing: a loss printed or kept inside the step is not seen)"
            )
        if a is None:
            return "not compared: the loss the loops report (the original's step is written inline and the migration reports through fit's logs)"
        if b is None:
            return (
                "not compared: what the migrated step returns (the original's step is written inline and makes several updates, "
                "or differentiates no scalar: which loss it reports is not known)"
            )
        if not isinstance(a, float):
            return (
                "not compared: what the migrated step returns (not one number: the original's step is written inline, and only the "
                "loss it differentiates is known of what it reports)"
            )
    return None


_MISSING = object()


def _first_different(a: Any, b: Any, where: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if "shape" in a and "shape" in b and "norm" in b:
            if a.get("shape") != b.get("shape"):
                return (where, a, b)
            if not _close(a["norm"], b["norm"], REPORTED_RELATIVE * 10) or not _close(a["mean"], b["mean"], REPORTED_RELATIVE * 10):
                return (where, a["norm"], b["norm"])
            return None
        for key in b:
            if key in a:
                found = _first_different(a[key], b[key], f"{where} ({key})" if not where else f"{where}[{key}]")
                if found is not None:
                    return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return None
        for k, (x, y) in enumerate(zip(a, b)):
            found = _first_different(x, y, where)
            if found is not None:
                return found
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) and math.isnan(b):
            return None
        return None if _close(float(a), float(b), REPORTED_RELATIVE) or abs(a - b) <= 1e-6 else (where, a, b)
    return None


def _value(x: Any) -> str:
    if isinstance(x, dict):
        return f"an array of shape {x.get('shape')}"
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _reported_ratio(x: Any, y: Any, replicas: int) -> str:
    if not isinstance(x, (int, float)) or not isinstance(y, (int, float)) or not y:
        return ""
    ratio = x / y
    if replicas > 1 and abs(ratio - 1 / replicas) < 0.05 / replicas:
        return f" (1/{replicas}: each replica's share of the loss, not the loss?)"
    if replicas > 1 and abs(ratio - replicas) < 0.05 * replicas:
        return f" ({replicas} x: the replicas' values summed where they should be averaged?)"
    return f" ({ratio:.3g} x)"


def _ratio_text(ratio: float | None, replicas: int, noun: str = "the update", clipped: bool = False) -> str:
    if ratio is None or not math.isfinite(ratio):
        return f"{noun} differs"
    text = f"{noun} is {ratio:.2f} x the original's"
    if replicas > 1 and abs(ratio - replicas) < 0.05 * replicas:
        also = ", or are the gradients clipped by each replica's norm, not the all-reduced one (use_norm=)?" if clipped else "?"
        text += f" ({replicas} x: is the loss averaged per replica, or divided by the per-replica batch, not the global one{also})"
    elif replicas > 1 and abs(ratio - 1 / replicas) < 0.05 / replicas:
        text += f" (1/{replicas}: is the loss divided by the replicas twice?)"
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
