"""Runs scripts under the smoke-test bootstrap and turns what happened into reports (parent side).

:func:`run_smoke` runs one script in its own process; :func:`run_many` runs several in ONE
process (TensorFlow starts once, ~6 s saved per script), each in its own directory, with its
own ``sys.argv``, a fresh ``__main__`` and a cleared Keras session. An exception in a script
fails that script only. When the process dies or a script times out, the process and
everything it started are ended (see :mod:`autofix.smoke.process`), the script that was
running is reported with the reason and what it recorded so far, and the scripts not yet run
are run again in a new process. With ``workers > 1`` each script runs as that many worker
processes of one cluster instead (:mod:`autofix.smoke.cluster`).

The timeout is per script and starts when the script starts (TensorFlow's start-up has its
own limit, ``startup_timeout``; exceeding it is a harness failure). SIGTERM and SIGHUP stop a
run as SIGINT does: every process ended, the temporary folder removed, then
:class:`~autofix.smoke.process.Interrupted` (``KeyboardInterrupt`` for SIGINT) is raised.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from autofix.smoke import checks
from autofix.smoke.cluster import run_workers
from autofix.smoke.jobs import Settings, SmokeJob, build_report, child_env, refused_report, script_spec
from autofix.smoke.notebook import Refused
from autofix.smoke.process import OUTPUT_TAIL, Child, clean_output, stop_on_signals
from autofix.smoke.report import SmokeReport

__all__ = ["SmokeJob", "clean_output", "run_many", "run_smoke"]

DEFAULT_REPLICAS = 2
DEFAULT_STEPS = 3
DEFAULT_TIMEOUT = 120.0
STARTUP_TIMEOUT = 180.0
POLL_SECONDS = 0.05
# Where keras.datasets downloads from: when it cannot be reached, --offline is the default.
DATASET_HOST = ("storage.googleapis.com", 443)


def run_smoke(
    script: str | os.PathLike,
    *,
    replicas: int = DEFAULT_REPLICAS,
    steps: int = DEFAULT_STEPS,
    timeout: float = DEFAULT_TIMEOUT,
    args: Sequence[str] = (),
    offline: bool | None = None,
    legacy_keras: bool = False,
    python: str | None = None,
    startup_timeout: float = STARTUP_TIMEOUT,
    workers: int = 1,
) -> SmokeReport:
    """Smoke-test one script: ``replicas`` replicas (per worker), ``steps`` steps, ``timeout``
    seconds, as ``workers`` worker processes."""
    return run_many(
        [SmokeJob(os.fspath(script), tuple(args))],
        replicas=replicas,
        steps=steps,
        timeout=timeout,
        offline=offline,
        legacy_keras=legacy_keras,
        python=python,
        startup_timeout=startup_timeout,
        workers=workers,
    )[0]


def run_many(
    scripts: Iterable[str | os.PathLike | SmokeJob],
    *,
    replicas: int = DEFAULT_REPLICAS,
    steps: int = DEFAULT_STEPS,
    timeout: float = DEFAULT_TIMEOUT,
    args: Sequence[str] = (),
    offline: bool | None = None,
    legacy_keras: bool = False,
    python: str | None = None,
    startup_timeout: float = STARTUP_TIMEOUT,
    workers: int = 1,
) -> list[SmokeReport]:
    """Smoke-test several scripts in one process; one report per script, in order.

    ``args`` are given to every script passed as a path; a :class:`SmokeJob` carries its own.
    With ``workers > 1``, each script runs in turn as ``workers`` processes of one
    MultiWorkerMirroredStrategy cluster, each with ``replicas`` replicas.
    """
    if replicas < 1 or steps < 1 or workers < 1:
        raise ValueError("replicas, steps and workers must be at least 1")
    jobs = [s if isinstance(s, SmokeJob) else SmokeJob(os.fspath(s), tuple(args)) for s in scripts]
    settings = Settings(
        replicas,
        steps,
        float(timeout),
        datasets_unreachable() if offline is None else bool(offline),
        legacy_keras,
        python or sys.executable,
        float(startup_timeout),
        workers,
    )
    with stop_on_signals():
        if workers > 1:
            return [run_workers(settings, job) for job in jobs]
        return _run_batches(settings, jobs)


def _run_batches(settings: Settings, jobs: list[SmokeJob]) -> list[SmokeReport]:
    reports: list[SmokeReport | None] = [None] * len(jobs)
    specs: dict[int, dict[str, Any]] = {}
    for index, job in enumerate(jobs):
        try:
            specs[index] = script_spec(job)
        except Refused as exc:
            reports[index] = refused_report(settings, job, str(exc))
    pending = sorted(specs)
    while pending:
        for index, report in _Batch(settings, [(i, jobs[i], specs[i]) for i in pending]).run().items():
            reports[index] = report
        left = [i for i in pending if reports[i] is None]
        if len(left) == len(pending):  # no progress: never loop forever
            for i in left:
                reports[i] = build_report(settings, jobs[i], {"status": "harness-error", "harness_error": "the harness made no progress"}, {})
            break
        pending = left
    return [r for r in reports if r is not None]


@functools.cache
def datasets_unreachable() -> bool:
    try:
        socket.create_connection(DATASET_HOST, timeout=2).close()
    except OSError:
        return True
    return False


class _Batch:
    """One child process running some of the jobs."""

    def __init__(self, settings: Settings, jobs: list[tuple[int, SmokeJob, dict[str, Any]]]) -> None:
        self.settings = settings
        self.jobs = jobs
        self.reports: dict[int, SmokeReport] = {}
        self.ready: dict[str, Any] = {}

    def run(self) -> dict[int, SmokeReport]:
        workdir = tempfile.mkdtemp(prefix="autofix-smoke-")
        try:
            spec = {
                "replicas": self.settings.replicas,
                "steps": self.settings.steps,
                "offline": self.settings.offline,
                "scripts": [spec for _, _, spec in self.jobs],
            }
            child = Child(Path(workdir), spec, child_env(self.settings), self.settings.python)
            try:
                child.start()
                self._watch(child)
            finally:
                child.close()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return self.reports

    def _watch(self, child: Child) -> None:
        while True:
            for event in child.poll():
                kind = event["event"]
                if kind == "ready":
                    self.ready = child.ready
                elif kind == "done":
                    self._done(event["index"], child.done[event["index"]])
                elif kind == "harness-error":
                    message, details = child.harness_error or ("", "")
                    self._harness_error(message, details or child.boot_output())
                    return
            if child.exited:
                break
            now = time.monotonic()
            if not child.ready and now - child.launched > self.settings.startup_timeout:
                child.stop()
                self._harness_error(f"TensorFlow did not start within {self.settings.startup_timeout:g} s", child.boot_output())
                return
            if child.running is not None and now - child.started > self.settings.timeout:
                peak = child.peak_memory_mb()
                raw = dict(child.ended_mid_script("timeout"), peak_memory_mb=peak)
                child.stop()
                self._done(child.running, raw)
                return
            time.sleep(POLL_SECONDS)
        if not child.ready:
            reason = checks.death_reason(child.returncode)
            self._harness_error(f"the smoke-test process ended before TensorFlow started ({reason})", child.boot_output())
        elif child.running is not None:
            self._done(child.running, child.ended_mid_script())

    def _done(self, index: int, raw: dict[str, Any]) -> None:
        order, job, _ = self.jobs[index]
        self.reports[order] = build_report(self.settings, job, raw, self.ready)

    def _harness_error(self, message: str, output: str) -> None:
        for order, job, _ in self.jobs:
            if order not in self.reports:
                raw = {"status": "harness-error", "harness_error": message, "output": output.strip()[-OUTPUT_TAIL:]}
                self.reports[order] = build_report(self.settings, job, raw, self.ready)
