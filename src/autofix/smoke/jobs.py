"""What to run and how (parent side): the jobs, the settings of a run, the environment of a
runner process, and one script's report from what its runner recorded."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofix.smoke import checks, notebook
from autofix.smoke.report import SmokeReport


@dataclass(frozen=True)
class Recording:
    """Record the script's first ``steps`` steps into ``snapshot`` (an ``.npz`` path), holding
    seeds, data order and randomness equal (see :mod:`autofix.smoke.controls`), with the batch
    the script asks for multiplied by ``batch_scale``, and the weights set to the initial ones
    of the ``initial`` snapshot where they may be; ``floatx``: Keras's float type for the run
    (``float64``: float32's rounding out of the comparison). The reference run of an original
    runs its steps as ``virtual`` replicas (see :mod:`autofix.smoke.replicas`), or, when they
    cannot be split, as ``accumulate`` micro-steps (see :mod:`autofix.smoke.accumulate`)."""

    snapshot: str
    batch_scale: int = 1
    initial: str | None = None
    floatx: str | None = None
    steps: int = 1
    virtual: int = 0
    accumulate: int = 0


@dataclass(frozen=True)
class SmokeJob:
    """One script (or notebook) to run: its path, arguments and working directory (default:
    its folder); ``replicas``: for this job, fewer than the run provides; ``recording``: for
    ``--compare``."""

    script: str
    args: tuple[str, ...] = ()
    cwd: str | None = None
    replicas: int | None = None
    recording: Recording | None = None


def script_spec(job: SmokeJob) -> dict[str, Any]:
    """What the runner needs to run ``job``; :class:`~autofix.smoke.notebook.Refused` for a
    notebook that cannot be run as one program."""
    spec: dict[str, Any] = {"path": os.path.abspath(job.script), "args": list(job.args), "cwd": job.cwd}
    if job.replicas is not None:
        spec["replicas"] = job.replicas
    if job.recording is not None:
        spec["compare"] = dataclasses.asdict(job.recording)
    if notebook.is_notebook(job.script):
        program = notebook.program(job.script)
        spec.update(program=program.text, cells=list(program.cells), notes=list(program.notes))
    return spec


def refused_report(settings: Settings, job: SmokeJob, reason: str) -> SmokeReport:
    return build_report(settings, job, {"status": "refused", "refused": reason}, {})


@dataclass(frozen=True)
class Settings:
    """One run's settings: ``replicas`` per worker, ``workers`` processes per script."""

    replicas: int
    steps: int
    timeout: float
    offline: bool
    legacy_keras: bool
    python: str
    startup_timeout: float
    workers: int = 1


def child_env(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if settings.legacy_keras:
        env["TF_USE_LEGACY_KERAS"] = "1"
    env.update(extra or {})
    return env


def build_report(settings: Settings, job: SmokeJob, raw: dict[str, Any], ready: dict[str, Any]) -> SmokeReport:
    replicas = job.replicas or settings.replicas
    found = checks.evaluate(raw, replicas=replicas, timeout=settings.timeout)
    harness_error = raw.get("harness_error")
    if harness_error and raw.get("status") != "harness-error":
        found = (*found, checks.Check("harness", False, f"the harness failed: {harness_error}"))
    return SmokeReport(
        script=job.script,
        ok=all(c.passed for c in found),
        status=raw.get("status", "harness-error"),
        replicas=replicas,
        steps=settings.steps,
        args=tuple(job.args),
        fits=checks.fit_records(raw),
        runs=checks.run_records(raw),
        loops=checks.loop_records(raw),
        checks=found,
        seconds=float(raw.get("seconds") or 0.0),
        startup_seconds=ready.get("startup_seconds"),
        peak_memory_mb=raw.get("peak_memory_mb"),
        error=raw.get("error"),
        error_site=raw.get("error_site"),
        script_exit=raw.get("exit_code"),
        harness_error=harness_error,
        strategies=tuple(raw.get("strategies", ())),
        datasets=tuple(raw.get("datasets", ())),
        notes=checks.notes(raw),
        provided=ready.get("provided", ""),
        tensorflow=ready.get("tensorflow", ""),
        legacy_keras=settings.legacy_keras,
        offline=settings.offline,
        output=raw.get("output", ""),
        writes=checks.write_records(raw),
        refused=raw.get("refused"),
        trace=raw.get("trace"),
        batches=tuple(raw.get("batches", ())),
    )
