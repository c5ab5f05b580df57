"""Faults around the smoke test: `autofix smoke` stopped by a signal (or killed outright)
part-way ends every process it started, the script's detached daemon included, and removes its
temporary folder; the reaper that makes this possible, on its own, without TensorFlow."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import dead
from fixturecases import FIXTURES

AUTOFIX = Path(sys.executable).with_name("autofix")
SMOKE = FIXTURES / "smoke"
REAPER = [sys.executable, "-m", "autofix.smoke.reaper"]

def wait_for(path: Path, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text()


def wait_dead(pids: list[int], seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [p for p in pids if not dead(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if not dead(p)]


# --- the reaper alone -------------------------------------------------------------------------

DOUBLE_FORK = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(600)
    os._exit(0)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
sys.exit(int(sys.argv[2]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux only")
def test_reaper_ends_a_detached_daemon_when_the_command_exits_and_passes_its_status(tmp_path):
    pid_file, status = tmp_path / "daemon.pid", tmp_path / "status"
    done = subprocess.run(
        [*REAPER, str(status), str(os.getpid()), "--", sys.executable, "-c", DOUBLE_FORK, str(pid_file), "7"],
        timeout=60,
    )
    assert done.returncode == 0
    assert status.read_text() == "7\n"
    assert dead(int(pid_file.read_text()))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux only")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_reaper_stopped_by_a_signal_ends_everything_below_it(tmp_path, signum):
    pid_file, status = tmp_path / "daemon.pid", tmp_path / "status"
    command = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], '0']); time.sleep(600)"
    reaper = subprocess.Popen([*REAPER, str(status), str(os.getpid()), "--", sys.executable, "-c", command, DOUBLE_FORK, str(pid_file)])
    daemon = int(wait_for(pid_file, 30))
    reaper.send_signal(signum)
    assert reaper.wait(timeout=30) == 0
    assert status.read_text() == f"{-signal.SIGKILL}\n", "the command itself was killed"
    assert wait_dead([daemon]) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux only")
def test_reaper_cleans_up_when_the_harness_is_killed(tmp_path):
    """The harness killed with SIGKILL: the reaper ends the run and removes its folder."""
    run_folder = tmp_path / "autofix-smoke-test"
    run_folder.mkdir()
    pid_file = tmp_path / "daemon.pid"
    harness = (
        "import os, subprocess, sys, time\n"
        "status, program, pid_file = sys.argv[1:4]\n"
        f"subprocess.Popen({REAPER!r} + [status, str(os.getpid()), '--', sys.executable, '-c', program, pid_file, '0'])\n"
        "time.sleep(600)\n"
    )
    waiting = DOUBLE_FORK.replace("sys.exit(int(sys.argv[2]))", "time.sleep(600)")
    process = subprocess.Popen([sys.executable, "-c", harness, str(run_folder / "status"), waiting, str(pid_file)])
    daemon = int(wait_for(pid_file, 30))
    process.kill()
    process.wait(timeout=30)
    assert wait_dead([daemon]) == []
    deadline = time.monotonic() + 10
    while run_folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not run_folder.exists(), "the run's temporary folder must be removed"


# --- `autofix smoke` stopped part-way ---------------------------------------------------------


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
@pytest.mark.parametrize(
    "signum, expected",
    [
        (signal.SIGTERM, -signal.SIGTERM),
        (signal.SIGHUP, -signal.SIGHUP),
        (signal.SIGINT, 1),  # click: "Aborted!"
        (signal.SIGKILL, -signal.SIGKILL),  # nothing runs in autofix: the reaper cleans up
    ],
    ids=["SIGTERM", "SIGHUP", "SIGINT", "SIGKILL"],
)
def test_smoke_stopped_by_a_signal_ends_every_process_and_removes_its_folder(tmp_path, signum, expected):
    temp = tmp_path / "temp"
    temp.mkdir()
    pid_file = tmp_path / "pids"
    env = dict(os.environ, TMPDIR=str(temp))
    process = subprocess.Popen(
        [str(AUTOFIX), "smoke", str(SMOKE / "waits_with_helpers.py"), "--timeout", "120", "--", str(pid_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        # As from an interactive shell: none of the three is ignored (a background job or
        # nohup would have inherited SIG_IGN, which autofix keeps on purpose).
        preexec_fn=_default_signals,
    )
    try:
        pids = [int(p) for p in wait_for(pid_file, 120).split()]
        assert list(temp.iterdir()), "the smoke test keeps its files in a temporary folder"
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == expected, err.decode()
    if signum in (signal.SIGTERM, signal.SIGHUP):
        assert f"Stopped by {signal.Signals(signum).name}" in err.decode()
    # The runner, the script's child and its detached daemon.
    assert wait_dead(pids) == [], "every process the smoke test started must end with it"
    deadline = time.monotonic() + 10
    while list(temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(temp.iterdir()) == [], "the temporary folder must be removed"

