"""Smoke test: run a training script for a few steps on N replicas and check that it trained
distributed.

Public API (nothing here imports TensorFlow; the scripts run in a child process)::

    run_smoke(script, *, replicas=2, steps=3, timeout=120, args=(), offline=None,
              legacy_keras=False, workers=1) -> SmokeReport
    run_many(scripts, *, replicas=2, steps=3, timeout=120, args=(), offline=None,
             legacy_keras=False, workers=1) -> list[SmokeReport]   # one process for all scripts

    run_compare(migrated, original, *, replicas=2, steps=1, ...) -> SmokeReport   # .compare
    compare_many([ComparePair(migrated, original), ...], ...) -> list[SmokeReport]

A script may be a notebook (``.ipynb``): its code cells run as one program
(:mod:`autofix.smoke.notebook`). ``offline=None`` serves synthetic ``keras.datasets`` when their download host cannot be
reached; ``legacy_keras=True`` runs under Keras 2 (``TF_USE_LEGACY_KERAS=1``, tf-keras);
``workers=N`` runs each script as N worker processes of one MultiWorkerMirroredStrategy
cluster (``replicas`` per worker) and adds ``report.workers``. SIGTERM and SIGHUP during a
run raise :class:`~autofix.smoke.process.Interrupted` once every process is ended.

Typical assertions::

    report = run_many(paths, replicas=2, steps=2)[0]
    report.ok, report.failures                 # verdict and the failed checks' messages
    report.fits[0].replicas, report.fits[0].all_mirrored, report.fits[0].unmirrored
    report.fits[0].global_batch, report.fits[0].losses
    report.fits[0].user_args["steps_per_epoch"]   # the script's own value, before capping
    report.runs[0].given, report.runs[0].replicas, report.runs[0].losses
    report.writes                              # paths the script wrote (api, path, via, site)
    report.workers.trained, report.workers.agree, report.workers.each[1].weights
    report.loops[0].steps, report.loops[0].replicas   # custom loops without strategy.run
    report.compare.status, report.compare.pairs[0].max_relative   # --compare

The fields are described in :mod:`autofix.smoke.report`, the checks in
:mod:`autofix.smoke.checks`, the process handling in :mod:`autofix.smoke.harness`,
:mod:`autofix.smoke.process` and :mod:`autofix.smoke.reaper`, the workers in
:mod:`autofix.smoke.cluster`, and what runs inside the child in :mod:`autofix.smoke.runner`.
"""

from autofix.smoke.harness import (
    DEFAULT_REPLICAS,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT,
    SmokeJob,
    run_many,
    run_smoke,
)
from autofix.smoke.compare import ComparePair, compare_many, run_compare
from autofix.smoke.jobs import Recording
from autofix.smoke.process import Interrupted
from autofix.smoke.report import (
    Check,
    CompareReport,
    FitRecord,
    LoopRecord,
    RunRecord,
    SmokeReport,
    WorkerReport,
    WorkersReport,
    WriteRecord,
)


__all__ = [
    "DEFAULT_REPLICAS",
    "DEFAULT_STEPS",
    "DEFAULT_TIMEOUT",
    "Check",
    "ComparePair",
    "CompareReport",
    "Recording",
    "FitRecord",
    "LoopRecord",
    "Interrupted",
    "RunRecord",
    "SmokeJob",
    "SmokeReport",
    "WorkerReport",
    "WorkersReport",
    "WriteRecord",
    "compare_many",
    "run_compare",
    "run_many",
    "run_smoke",
]
