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
        out[path.name] = analyse(text, Options()).new_text or text
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
            new = expected[path.name]
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
