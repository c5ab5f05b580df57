"""Runs scripts under the smoke-test bootstrap and turns what happened into reports (parent side).

:func:`run_smoke` runs one script in its own process; :func:`run_many` runs several in ONE
process (TensorFlow starts once, ~6 s saved per script), each in its own directory, with its
own ``sys.argv``, a fresh ``__main__`` and a cleared Keras session. An exception in a script
fails that script only. When the process dies or a script times out, the whole process group
is killed, the script that was running is reported with the reason, and the scripts not yet
run are run again in a new process.

The timeout is per script and starts when the script starts (TensorFlow's start-up has its
own limit, ``startup_timeout``; exceeding it is a harness failure).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofix.smoke import checks
from autofix.smoke.report import SmokeReport

DEFAULT_REPLICAS = 2
DEFAULT_STEPS = 3
DEFAULT_TIMEOUT = 120.0
STARTUP_TIMEOUT = 180.0
OUTPUT_TAIL = 4000
POLL_SECONDS = 0.05
# Where keras.datasets downloads from: when it cannot be reached, --offline is the default.
DATASET_HOST = ("storage.googleapis.com", 443)


@dataclass(frozen=True)
class SmokeJob:
    """One script to run: its path, arguments and working directory (default: its folder)."""

    script: str
    args: tuple[str, ...] = ()
    cwd: str | None = None


@dataclass(frozen=True)
class _Settings:
    replicas: int
    steps: int
    timeout: float
    offline: bool
    legacy_keras: bool
    python: str
    startup_timeout: float


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
) -> SmokeReport:
    """Smoke-test one script: ``replicas`` replicas, ``steps`` steps, ``timeout`` seconds."""
    return run_many(
        [SmokeJob(os.fspath(script), tuple(args))],
        replicas=replicas,
        steps=steps,
        timeout=timeout,
        offline=offline,
        legacy_keras=legacy_keras,
        python=python,
        startup_timeout=startup_timeout,
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
) -> list[SmokeReport]:
    """Smoke-test several scripts in one process; one report per script, in order.

    ``args`` are given to every script passed as a path; a :class:`SmokeJob` carries its own.
    """
    if replicas < 1 or steps < 1:
        raise ValueError("replicas and steps must be at least 1")
    jobs = [s if isinstance(s, SmokeJob) else SmokeJob(os.fspath(s), tuple(args)) for s in scripts]
    settings = _Settings(
        replicas,
        steps,
        float(timeout),
        datasets_unreachable() if offline is None else bool(offline),
        legacy_keras,
        python or sys.executable,
        float(startup_timeout),
    )
    reports: list[SmokeReport | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))
    while pending:
        for index, report in _Batch(settings, [(i, jobs[i]) for i in pending]).run().items():
            reports[index] = report
        left = [i for i in pending if reports[i] is None]
        if len(left) == len(pending):  # no progress: never loop forever
            for i in left:
                reports[i] = _report(settings, jobs[i], {"status": "harness-error", "harness_error": "the harness made no progress"}, {})
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

    def __init__(self, settings: _Settings, jobs: list[tuple[int, SmokeJob]]) -> None:
        self.settings = settings
        self.jobs = jobs
        self.reports: dict[int, SmokeReport] = {}
        self.ready: dict[str, Any] = {}

    def run(self) -> dict[int, SmokeReport]:
        workdir = tempfile.mkdtemp(prefix="autofix-smoke-")
        try:
            self._run(Path(workdir))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return self.reports

    def _run(self, workdir: Path) -> None:
        events_path = workdir / "events.jsonl"
        logs = [workdir / f"script-{n}.log" for n in range(len(self.jobs))]
        spec = {
            "replicas": self.settings.replicas,
            "steps": self.settings.steps,
            "offline": self.settings.offline,
            "events": str(events_path),
            "scripts": [
                {"path": os.path.abspath(job.script), "args": list(job.args), "cwd": job.cwd, "log": str(log)}
                for (_, job), log in zip(self.jobs, logs)
            ],
        }
        (workdir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        events_path.touch()
        boot_log = workdir / "bootstrap.log"
        with open(boot_log, "wb") as boot:
            process = subprocess.Popen(
                [self.settings.python, "-m", "autofix.smoke.runner", str(workdir / "spec.json")],
                # Not a script's folder: its modules must not shadow what the bootstrap imports.
                cwd=str(workdir),
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=boot,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                self._watch(process, events_path, logs, boot_log)
            finally:
                if process.poll() is None:
                    _kill_group(process)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        if self.settings.legacy_keras:
            env["TF_USE_LEGACY_KERAS"] = "1"
        return env

    def _watch(self, process: subprocess.Popen, events_path: Path, logs: list[Path], boot_log: Path) -> None:
        launched = time.monotonic()
        running: int | None = None
        started = 0.0
        with open(events_path, encoding="utf-8") as events:
            buffer = ""
            while True:
                exited = process.poll() is not None
                chunk = events.read()
                buffer += chunk
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    event = json.loads(line)
                    kind = event["event"]
                    if kind == "ready":
                        self.ready = event
                    elif kind == "start":
                        running, started = event["index"], time.monotonic()
                    elif kind == "done":
                        self._done(event["index"], event["result"], logs[event["index"]])
                        running = None
                    elif kind == "harness-error":
                        self._harness_error(f"{event['error']}", boot_log, event.get("traceback", ""))
                        return
                if exited:
                    break
                now = time.monotonic()
                if not self.ready and now - launched > self.settings.startup_timeout:
                    _kill_group(process)
                    self._harness_error(f"TensorFlow did not start within {self.settings.startup_timeout:g} s", boot_log)
                    return
                if running is not None and now - started > self.settings.timeout:
                    peak = _peak_memory_mb(process.pid)
                    _kill_group(process)
                    raw = {"status": "timeout", "seconds": round(now - started, 3), "peak_memory_mb": peak}
                    self._done(running, raw, logs[running])
                    return
                time.sleep(POLL_SECONDS)
        if not self.ready:
            self._harness_error(f"the smoke-test process ended before TensorFlow started ({checks.death_reason(process.returncode)})", boot_log)
        elif running is not None:
            raw = {"status": "died", "died": checks.death_reason(process.returncode), "seconds": round(time.monotonic() - started, 3)}
            self._done(running, raw, logs[running])

    def _done(self, index: int, raw: dict[str, Any], log: Path) -> None:
        order, job = self.jobs[index]
        raw = dict(raw, output=_tail(log))
        self.reports[order] = _report(self.settings, job, raw, self.ready)

    def _harness_error(self, message: str, boot_log: Path, details: str = "") -> None:
        output = (details or _tail(boot_log)).strip()
        for order, job in self.jobs:
            if order not in self.reports:
                raw = {"status": "harness-error", "harness_error": message, "output": output[-OUTPUT_TAIL:]}
                self.reports[order] = _report(self.settings, job, raw, self.ready)


def _report(settings: _Settings, job: SmokeJob, raw: dict[str, Any], ready: dict[str, Any]) -> SmokeReport:
    found = checks.evaluate(raw, replicas=settings.replicas, timeout=settings.timeout)
    harness_error = raw.get("harness_error")
    if harness_error and raw.get("status") != "harness-error":
        found = (*found, checks.Check("harness", False, f"the harness failed: {harness_error}"))
    return SmokeReport(
        script=job.script,
        ok=all(c.passed for c in found),
        status=raw.get("status", "harness-error"),
        replicas=settings.replicas,
        steps=settings.steps,
        args=tuple(job.args),
        fits=checks.fit_records(raw),
        runs=checks.run_records(raw),
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
    )


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            # Progress bars rewrite their line hundreds of times: read more than is kept.
            fh.seek(max(0, size - 8 * OUTPUT_TAIL))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return clean_output(text)[-OUTPUT_TAIL:]


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def clean_output(text: str) -> str:
    """What a terminal would finally show: no colour codes, progress bars at their last state."""
    text = _ANSI.sub("", text).replace("\x08", "")
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))


def _peak_memory_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
