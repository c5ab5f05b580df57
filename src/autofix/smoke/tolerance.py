"""Is a step of the migrated run the reference's? (parent side; NumPy, no TensorFlow)

Each step is compared as the first was before it, from the values the runs recorded after the
step before (the initial values for the first). Each variable is compared by norms, not element by element: float32 sums made in another
order (N replicas, then ReductionToOneDevice) move a few elements by more than the rest, and
Adam's first update, ``lr * g / (|g| + eps)``, turns a rounding-level gradient into an update
of any size up to ``lr``. So, per trainable variable, in this order:

- its starting value must be the original's (else the runs cannot be compared);
- its gradient (summed over the replicas, as the optimizer sums it) must be within
  :data:`RELATIVE` of the original's gradient (norm of the difference over the norm), plus
  :data:`ABSOLUTE` of the largest gradient in the model (per element): a loss averaged per
  replica shows here as 2 x, whatever the optimizer makes of it;
- its value after the step within :data:`RELATIVE` of the original's update, plus
  :data:`ABSOLUTE` of its own magnitude, unless its gradient is at rounding level (below
  :data:`NOISE` of the model's largest gradient: a bias before a BatchNormalization), where
  the update says nothing;

and each optimizer variable (Adam's moments, momentum, the step count) after the step within
:data:`RELATIVE` of the original's, plus :data:`ABSOLUTE` of the largest one.

Measured on 2 logical CPUs (ReductionToOneDevice, TF 2.21, Keras 3.15), the fixtures of
fixtures/smoke/compare and a conv net with BatchNormalization: a correct migration is within
about 1e-5 (2e-4 element-wise for the conv net under Adam); a wrong one is off by 0.5 to 1
(a loss averaged per replica: the gradient is 2 x on 2 replicas).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

RELATIVE = 1e-3
ABSOLUTE = 1e-6
NOISE = 1e-4


@dataclass(frozen=True)
class Outcome:
    same: bool
    compared: int = 0
    worst: float = 0.0
    # The first difference: the variable, what differs (gradient, weight, optimizer), the
    # relative difference, the ratio of the migrated to the original (norms).
    difference: dict[str, Any] | None = None
    # Why nothing could be compared (None when it could).
    not_compared: str | None = None
    skipped: int = 0


def _norm(a: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64).ravel())) if a.size else 0.0


def _rms(a: np.ndarray) -> float:
    return _norm(a) / math.sqrt(a.size) if a.size else 0.0


def _within(mine: np.ndarray, theirs: np.ndarray, reference: float, floor: float) -> tuple[bool, float]:
    """(same, relative difference): ``|mine - theirs| <= RELATIVE * reference + floor * sqrt(n)``."""
    if mine.shape != theirs.shape:
        return False, math.inf
    if mine.dtype.kind not in "fc":
        same = bool(np.array_equal(mine, theirs))
        return same, 0.0 if same else math.inf
    difference = _norm(mine.astype(np.float64) - theirs.astype(np.float64))
    relative = difference / reference if reference else (0.0 if difference == 0 else math.inf)
    return difference <= RELATIVE * reference + floor * math.sqrt(mine.size), relative


def compare(
    mine: list[dict[str, Any]],
    theirs: list[dict[str, Any]],
    pairs: list[tuple[int, int]],
    m: dict[str, np.ndarray],
    o: dict[str, np.ndarray],
    step: int = 1,
) -> Outcome:
    """Compare step ``step`` (from 1): the trainable variables ``pairs`` (indexes into the
    entries of kind ``weight`` of ``mine`` / ``theirs``, the runs' indexes), then the optimizer
    variables. The first step also compares where the runs start."""
    everything = (mine, theirs)
    mine, theirs = ([v for v in entries if v["kind"] == "weight"] for entries in everything)

    def before(arrays: dict[str, np.ndarray], key: Any) -> np.ndarray | None:
        # (A variable a later phase of training starts to update, a student distilled after its
        # teacher's steps, has no value after the steps before its first: its initial value.)
        if step == 1 or f"w{key}_{step - 1}" not in arrays:
            return arrays.get(f"i{key}")
        return arrays.get(f"w{key}_{step - 1}")

    gradients = [o.get(f"g{theirs[j]['key']}_{step}") for _, j in pairs]
    largest = max((_rms(g) for g in gradients if g is not None), default=0.0)
    compared = skipped = 0
    worst = 0.0
    # The first update that differs while its gradient is the original's: the gradients of the
    # variables after it are still compared (one of them may differ), their updates no longer.
    update_differs: Outcome | None = None
    every_gradient = True  # each variable's gradient was recorded in both runs (and compared)
    for (k, j), gradient in zip(pairs, gradients):
        mv, ov = mine[k], theirs[j]
        name = ov["name"]
        if f"w{mv['key']}_{step}" not in m and f"w{ov['key']}_{step}" not in o and f"w{ov['key']}_{step - 1}" not in o:
            continue  # trained by a later phase only (a student distilled after its teacher's steps)
        m_before, o_before = before(m, mv["key"]), before(o, ov["key"])
        if o_before is None:
            return Outcome(False, not_compared=f"the original's weights before step {step} were not seen ({name})")
        starting = step == 1 or f"w{ov['key']}_{step - 1}" not in o
        if starting and m_before is not None and not _within(m_before, o_before, 0.0, ABSOLUTE * max(_rms(o_before), 1e-3))[0]:
            return Outcome(False, not_compared=f"the runs start from different weights ({name})", difference={"name": name, "kind": "initial"})
        m_gradient = m.get(f"g{mv['key']}_{step}")
        every_gradient = every_gradient and gradient is not None and m_gradient is not None
        informative = True
        if gradient is not None and m_gradient is not None:
            informative = _rms(gradient) > NOISE * largest
            # A gradient at rounding level (a bias just before BatchNormalization, whose exact
            # gradient is 0) says nothing but its size: the migration's must be as small.
            floor = ABSOLUTE * largest if informative else NOISE * largest
            same, relative = _within(m_gradient, gradient, _norm(gradient) if informative else 0.0, floor)
            if not same:
                return Outcome(False, compared, max(worst, relative), _difference(name, "gradient", relative, m_gradient, gradient))
            worst = max(worst, relative if informative else 0.0)
        compared += 1
        if update_differs is not None:
            continue
        if not informative:
            skipped += 1
            continue
        m_after, o_after = m.get(f"w{mv['key']}_{step}"), o.get(f"w{ov['key']}_{step}")
        if m_after is None or o_after is None:
            return Outcome(False, not_compared=f"{name} after step {step} was not seen in {'the migrated run' if m_after is None else 'the original'}")
        if m_before is not None and np.array_equal(o_after, o_before) and np.array_equal(m_after, m_before):
            # Left as it was by this step in both runs (a model trained in an earlier phase,
            # while the next one trains): the same, whatever rounding its earlier steps left
            # between the runs (compared with those steps), which a zero update cannot scale.
            continue
        update = o_after.astype(np.float64) - o_before.astype(np.float64)
        same, relative = _within(m_after, o_after, _norm(update), ABSOLUTE * max(_rms(o_after), 1e-3))
        worst = _worse(worst, relative, same)
        if not same:
            ours = m_after.astype(np.float64) - o_before.astype(np.float64)
            update_differs = Outcome(False, compared, worst, _difference(name, "weight", relative, ours, update))
    if update_differs is not None:
        update_differs.difference["gradients_same"] = every_gradient  # type: ignore[index]
        return update_differs
    return _optimizer_variables(*everything, m, o, compared, worst, skipped, every_gradient, step)


def _optimizer_variables(mine, theirs, m, o, compared: int, worst: float, skipped: int, every_gradient: bool = False, step: int = 1) -> Outcome:
    from autofix.smoke.snapshot import match

    m_vars = [v for v in mine if v["kind"] == "optimizer"]
    o_vars = [v for v in theirs if v["kind"] == "optimizer"]
    pairs = match([v["name"] for v in m_vars], [v["name"] for v in o_vars], [tuple(v["shape"]) for v in m_vars], [tuple(v["shape"]) for v in o_vars])
    if pairs is None:
        return Outcome(False, not_compared=f"the optimizer variables differ from the original's ({len(m_vars)} against {len(o_vars)}, or other shapes)")
    present = [o.get(f"o{v['key']}_{step}") for v in o_vars]
    largest = max((_rms(a) for a in present if a is not None and a.dtype.kind in "fc"), default=0.0)
    for k, j in pairs:
        mine_value, theirs_value = m.get(f"o{m_vars[k]['key']}_{step}"), o.get(f"o{o_vars[j]['key']}_{step}")
        if mine_value is None or theirs_value is None:
            continue
        # A slot of a variable whose gradient is rounding noise (Adam's moments of a bias before
        # BatchNormalization) is that noise too: compared by its size, as the gradient is.
        quiet = _rms(theirs_value) <= NOISE * largest
        same, relative = _within(mine_value, theirs_value, 0.0 if quiet else _norm(theirs_value), (NOISE if quiet else ABSOLUTE) * largest)
        compared += 1
        if not same:
            return Outcome(False, compared, relative, _difference(o_vars[j]["name"], "optimizer", relative, mine_value, theirs_value, gradients_same=every_gradient))
        worst = _worse(worst, relative, same)
    return Outcome(True, compared, worst, skipped=skipped)


def _worse(worst: float, relative: float, same: bool) -> float:
    """The largest relative difference so far, of those within :data:`RELATIVE`: a value the same
    only by the absolute floor (Adam's second moment of a rounding-level gradient, near 0) has a
    relative difference that says nothing."""
    return max(worst, relative) if not same or relative <= RELATIVE else worst


def _difference(name: str, what: str, relative: float, ours: np.ndarray, theirs: np.ndarray, gradients_same: bool = False) -> dict[str, Any]:
    """The first difference; ``gradients_same``: every trainable variable's gradient is the
    original's (the difference is in what the optimizer made of them)."""
    ratio = None
    if ours.dtype.kind in "fc" and _norm(theirs):
        ratio = _norm(ours) / _norm(theirs)
    return {"name": name, "kind": what, "relative": relative, "ratio": ratio, "gradients_same": gradients_same}
