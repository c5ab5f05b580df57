"""Faults: autofix killed part-way through a run leaves every file whole (old or new, never
half), no temporary files; and user code runs only under ``smoke``, never under check, diff
or fix."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
import pytest

from autofix.engine import Options, analyse
from conftest import BROKEN as BROKEN_SCRIPT
from fixturecases import FIXTURES, read

AUTOFIX = Path(sys.executable).with_name("autofix")
SOURCES = sorted(p for p in FIXTURES.glob("tfd00*/*.py") if not p.name.endswith(".fixed.py"))
COPIES = 6


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """Each fixture's text after ``autofix fix`` (with the repository's default options)."""
    out = {}
    for path in SOURCES:
        text = read(path)
        out[f"{path.parent.name}/{path.name}"] = analyse(text, Options()).new_text or text
    return out


def populate(folder: Path) -> dict[Path, str]:
    originals = {}
    for copy in range(COPIES):
        for source in SOURCES:
            target = folder / f"copy{copy}" / source.parent.name / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            originals[target] = read(source)
    return originals


def leftovers(folder: Path, wait: float = 10.0) -> list[Path]:
    """Temporary files under ``folder``, once the watcher of a killed run has had its turn."""
    deadline = time.monotonic() + wait
    while True:
        found = [p for p in folder.rglob("*") if ".autofix-" in p.name]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


KILLED_BETWEEN_LINK_AND_RENAME = """
import os, signal, sys
from autofix import sourcefile
if sys.argv[2] == "named":
    sourcefile._NO_ANONYMOUS_LINK.add(os.stat(sys.argv[1]).st_dev)
st = os.stat(sys.argv[1])
name = sourcefile._write_temp(os.path.dirname(sys.argv[1]), "train.py", b"new = 1\\n", st)
print(name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("kind", ["anonymous", "named"])
def test_killed_between_naming_the_temporary_file_and_the_rename(tmp_path, kind):
    """The narrowest window: the temporary file has a name and the target is not replaced yet."""
    target = tmp_path / "train.py"
    target.write_text("old = 1\n")
    process = subprocess.run(
        [sys.executable, "-c", KILLED_BETWEEN_LINK_AND_RENAME, str(target), kind],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr
    name = Path(process.stdout.strip())
    assert name.parent == tmp_path and ".autofix-" in name.name
    assert leftovers(tmp_path) == []
    assert target.read_text() == "old = 1\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_part_way_every_file_is_old_or_new(tmp_path, expected, signum):
    rng = random.Random(signum)
    outcomes = {"old": 0, "new": 0}
    for attempt in range(3):
        folder = tmp_path / f"run{attempt}"
        originals = populate(folder)
        process = subprocess.Popen(
            [str(AUTOFIX), "fix", "--isolated", "-j", "2", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            # A test run started in the background of a non-interactive shell ignores SIGINT,
            # and a child inherits that: the signal must do to autofix what Ctrl-C does.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        # Kill once some files are written and others are not (the run takes seconds).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            written = sum(1 for p, old in originals.items() if p.read_text() != old)
            if written >= rng.randint(5, 40):
                break
            time.sleep(0.02)
        os.killpg(process.pid, signum)
        process.wait(timeout=60)
        time.sleep(0.2)  # let killed workers go
        for path, old in originals.items():
            text = path.read_text()
            cst.parse_module(text)
            new = expected[f"{path.parent.name}/{path.name}"]
            assert text in (old, new), f"{path} is neither its old nor its new text"
            if old != new:
                outcomes["new" if text == new else "old"] += 1
        assert leftovers(folder) == []
    # The kill really came part-way: some files were fixed, some not yet.
    assert outcomes["new"] > 0 and outcomes["old"] > 0, outcomes


def test_user_code_never_runs_under_check_diff_or_fix(tmp_path):
    script = tmp_path / "train.py"
    marker = tmp_path / "ran"
    script.write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential()\n"
        "model.fit(x, y)\n"
    )
    for command in (["check"], ["diff"], ["fix"], ["check", "--format", "sarif"], ["diff", "-"]):
        stdin = script.read_text() if command[-1] == "-" else None
        args = [*command, str(script)] if command[-1] != "-" else command
        subprocess.run([str(AUTOFIX), *args], cwd=tmp_path, input=stdin, capture_output=True, text=True)
        assert not marker.exists(), f"autofix {' '.join(command)} ran the user's code"


# A worker that dies: the file it was working on gets an error, the run goes on (it used to hang
# for ever), the other files are reported in order. The fault is injected in the forked workers
# by replacing the engine call in the runner before the pool starts.
WORKER_DIES = """
import os, signal, sys, time
from autofix import runner
from autofix.cli import main

real = runner.process_path

def dying(path, options, write=False, cache=None):
    if "segv" in path:
        os.kill(os.getpid(), signal.SIGSEGV)
    if "slow" in path:
        with open("worker.pid", "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(120)
    return real(path, options, write, cache)

runner.process_path = dying
main(sys.argv[1:])
"""


@pytest.mark.parametrize("jobs", ["2", "3"])
def test_a_worker_that_crashes_costs_only_its_file(tmp_path, jobs):
    names = [f"f{i:02}.py" for i in range(10)] + ["segv_a.py", "segv_b.py"]
    for name in names:
        (tmp_path / name).write_text(BROKEN_SCRIPT)
    run = subprocess.run(
        [sys.executable, "-c", WORKER_DIES, "check", "--isolated", "--select", "TFD001", "-j", jobs, "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 2, run.stderr
    for name in ("segv_a.py", "segv_b.py"):
        assert f"error: {name}: its analysis crashed: the worker process died (killed by SIGSEGV)" in run.stderr
    reported = [line.split(":")[0] for line in run.stdout.splitlines()]
    assert sorted(set(reported)) == sorted(n for n in names if "segv" not in n)
    assert reported == sorted(reported), "results come in the order of the paths"
    assert "Checked 12 files" in run.stderr and "2 errors" in run.stderr


def test_a_worker_killed_from_outside_costs_only_its_file(tmp_path):
    for i in range(6):
        (tmp_path / f"f{i}.py").write_text(BROKEN_SCRIPT)
    (tmp_path / "slow.py").write_text(BROKEN_SCRIPT)
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER_DIES, "fix", "--isolated", "-j", "2", "."],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    pid_file = tmp_path / "worker.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.05)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    assert "error: slow.py: its analysis crashed: the worker process died (killed by SIGKILL)" in err
    assert (tmp_path / "slow.py").read_text() == BROKEN_SCRIPT
    assert all("with strategy.scope():" in (tmp_path / f"f{i}.py").read_text() for i in range(6))
    assert "6 files changed" in err
