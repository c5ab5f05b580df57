"""Canned records of comparing runs (what autofix.smoke.snapshot writes), for the verdict's
tests: an index (``trace``) and an .npz file of each variable's values before training and after
each step, its gradient in each step, and the optimizer's variables after each step."""

from __future__ import annotations

import dataclasses

import numpy as np

from autofix.smoke.report import Check, LoopRecord, SmokeReport


def _trace(path, initial, updates, gradients=None, *, names=None, origins=None, optimizers=None, slots=None, **extra):
    """A run's records: ``initial`` values, then each step's update (added), the gradients of
    each step (default: minus the update, as SGD(1.0) makes it)."""
    arrays, index = {}, []
    names = names or [f"dense/w{k}" for k in range(len(initial))]
    steps = len(updates)
    for k, start in enumerate(initial):
        value = np.asarray(start, dtype=np.float32)
        arrays[f"i{k}"], arrays[f"n{k}"] = value, np.array(names[k])
        for s in range(1, steps + 1):
            value = value + np.asarray(updates[s - 1][k], dtype=np.float32)
            arrays[f"w{k}_{s}"] = value
            grads = gradients[s - 1][k] if gradients is not None else -np.asarray(updates[s - 1][k])
            arrays[f"g{k}_{s}"] = np.asarray(grads, dtype=np.float32)
        origin = (origins or {}).get(names[k], {"kind": "initializer", "what": "GlorotUniform", "config": {"seed": None}})
        index.append({"key": k, "kind": "weight", "name": names[k], "shape": list(np.shape(start)), "initial": True, "origin": origin})
    for j, per_step in enumerate(slots or ()):
        for s, value in enumerate(per_step, start=1):
            arrays[f"o{j}_{s}"] = np.asarray(value, dtype=np.float32)
        index.append({"key": j, "kind": "optimizer", "name": f"SGD/m{j}", "shape": list(np.shape(per_step[0]))})
    np.savez(path, **arrays)
    base = {
        "file": str(path),
        "steps": steps,
        "asked": steps,
        "variables": index,
        "optimizers": optimizers if optimizers is not None else [{"name": "SGD", "config": {"learning_rate": 1.0, "momentum": 0.0}, "learning_rates": [1.0] * (steps + 1), "schedule": None}],
        "transplanted": {},
        "feeds": {},
        "reported": {},
        "noise_layers": [],
        "unheld": [],
        "inexact": [],
    }
    base.update(extra)
    return base


def _report(trace, replicas=1, batch=8, **changes) -> SmokeReport:
    loop = LoopRecord(site="t.py:5", name="step", steps=trace["steps"] if trace else 0, global_batch=batch)
    base = SmokeReport(
        script="t.py", ok=True, status="step-limit", replicas=replicas, steps=3, loops=(loop,), trace=trace,
        checks=(Check("finished", True, "stopped cleanly at the step cap"), Check("trained", True, "trained 3 steps")),
    )
    return dataclasses.replace(base, **changes)
