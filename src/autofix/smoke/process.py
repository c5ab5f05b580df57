"""One smoke-test process, seen from the harness: start it, follow its events, stop it.

The runner (:mod:`autofix.smoke.runner`) is started through the reaper
(:mod:`autofix.smoke.reaper`), in a new session: stopping the reaper ends the runner and
every process the script started, even one that left the process group. Stopping is a SIGTERM
to the reaper, then, if it has not gone within :data:`STOP_GRACE` seconds, SIGKILL to both
process groups.

:func:`stop_on_signals` turns SIGTERM and SIGHUP into :class:`Interrupted` while a smoke run
is under way (SIGINT already raises ``KeyboardInterrupt``), so that the same clean-up runs
for all three: every process ended, the temporary folder removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autofix.smoke.checks import death_reason

STOP_GRACE = 10.0
OUTPUT_TAIL = 4000


class Interrupted(BaseException):
    """The smoke run was stopped by a signal; everything it started has been ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread (only where they would
    otherwise kill the process: a handler the program set, or an ignored signal, is kept)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum, frame):
        # The clean-up that the exception starts must not be cut short by a second signal.
        for other in previous:
            signal.signal(other, signal.SIG_IGN)
        raise Interrupted(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


class Child:
    """One runner process for ``jobs`` (its spec), in ``workdir``, with its own events file."""

    def __init__(self, workdir: Path, spec: dict[str, Any], env: dict[str, str], python: str) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.events_path = workdir / "events.jsonl"
        self.status_path = workdir / "status"
        self.boot_log = workdir / "bootstrap.log"
        self.logs = [workdir / f"script-{n}.log" for n in range(len(spec["scripts"]))]
        for job, log in zip(spec["scripts"], self.logs):
            job["log"] = str(log)
        spec = dict(spec, events=str(self.events_path))
        (workdir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        self.events_path.touch()
        self.env = env
        self.python = python
        self.launched = 0.0
        self.ready: dict[str, Any] = {}
        self.running: int | None = None
        self.started = 0.0
        self.progress: dict[str, Any] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.harness_error: tuple[str, str] | None = None
        self.exited = False
        self.returncode: int | None = None
        self._buffer = ""
        self._events = None
        self._boot = None
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self._boot = open(self.boot_log, "wb")
        command = [self.python, "-m", "autofix.smoke.runner", str(self.workdir / "spec.json")]
        self.process = subprocess.Popen(
            [self.python, "-m", "autofix.smoke.reaper", str(self.status_path), str(os.getpid()), "--", *command],
            # Not a script's folder: its modules must not shadow what the bootstrap imports.
            cwd=str(self.workdir),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._boot,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.launched = time.monotonic()
        self._events = open(self.events_path, encoding="utf-8")

    def poll(self) -> list[dict[str, Any]]:
        """Read the new events; note when the process has exited. Returns the events read."""
        assert self.process is not None and self._events is not None
        exited = self.process.poll() is not None
        self._buffer += self._events.read()
        *lines, self._buffer = self._buffer.split("\n")
        events = [json.loads(line) for line in lines if line.strip()]
        for event in events:
            kind = event["event"]
            if kind == "ready":
                self.ready = event
            elif kind == "start":
                self.running, self.started, self.progress = event["index"], time.monotonic(), {}
            elif kind == "progress":
                self.progress = event["records"]
            elif kind == "done":
                self.done[event["index"]] = dict(event["result"], output=tail(self.logs[event["index"]]))
                self.running, self.progress = None, {}
            elif kind == "harness-error":
                self.harness_error = (str(event["error"]), event.get("traceback", ""))
        if exited and not events:
            self.exited = True
            self.returncode = self._status()
        return events

    def _status(self) -> int | None:
        """The runner's exit status, as the reaper wrote it (else the reaper's own)."""
        try:
            text = self.status_path.read_text(encoding="utf-8").strip()
            return None if text == "None" else int(text)
        except (OSError, ValueError):
            return None if self.process is None else self.process.returncode

    def peak_memory_mb(self) -> float | None:
        pid = self.ready.get("pid")
        return None if pid is None else peak_memory_mb(int(pid))

    def ended_mid_script(self, reason: str | None = None) -> dict[str, Any]:
        """The raw result of the script that was running when the process ended (or was
        stopped): what it recorded so far, and how it ended."""
        assert self.running is not None
        raw: dict[str, Any] = dict(self.progress)
        raw["seconds"] = round(time.monotonic() - self.started, 3)
        raw["ended_at"] = time.time()
        code = self.returncode
        if reason is not None:
            raw.update(status=reason)
        elif code == 0:
            # The script ended the process itself with status 0 (os._exit(0) after training is
            # a common way round MirroredStrategy's hangs at exit): as a plain run would, it
            # succeeded, and what it recorded stands.
            raw.update(status="completed")
            raw.setdefault("notes", []).append("the script ended the process itself, with exit status 0 (os._exit)")
        else:
            raw.update(status="died", died=death_reason(code))
        raw["output"] = tail(self.logs[self.running])
        return raw

    def stop(self) -> None:
        """End the runner and everything below it; wait for it."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            try:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                pass
            except ProcessLookupError:
                pass
        if process.poll() is None:
            for pid in (process.pid, self.ready.get("pid")):
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(pid), signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        self.stop()
        for fh in (self._events, self._boot):
            if fh is not None:
                fh.close()

    def boot_output(self) -> str:
        return tail(self.boot_log)


def tail(path: Path) -> str:
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


def peak_memory_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
