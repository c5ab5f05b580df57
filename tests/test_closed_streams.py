"""A program may be started with a standard stream closed (``<&-``, ``>&-``, ``2>&-``: job
runners and daemons do it; Python then has None for it), or with its output piped into a reader
that leaves early. No command may then die with a traceback: a closed standard input is the end
of the answers (``fix -i``) or an error (``check -``), and output that cannot be written is an
error with exit 2, said on standard error when that is open."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import BROKEN

CLOSE = {"stdin": 0, "stdout": 1, "stderr": 2}


def autofix(cwd, *args, closed=(), env=None):
    """``python -m autofix ARGS`` with the streams in ``closed`` closed (not redirected: the
    file descriptor is gone, as with ``<&-``)."""
    fds = [CLOSE[name] for name in closed]

    def close():
        for fd in fds:
            os.close(fd)

    return subprocess.run(
        [sys.executable, "-m", "autofix", *args],
        cwd=cwd,
        preexec_fn=close,
        stdin=None if "stdin" in closed else subprocess.DEVNULL,
        stdout=None if "stdout" in closed else subprocess.PIPE,
        stderr=None if "stderr" in closed else subprocess.PIPE,
        env=env,
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(BROKEN)
    return tmp_path


def _text(data: bytes | None) -> str:
    return (data or b"").decode()


def test_fix_interactive_with_stdin_closed_is_answered_quit(project):
    done = autofix(project, "fix", "-i", "--isolated", "train.py", closed=("stdin",))
    err = _text(done.stderr)
    assert "Traceback" not in err
    assert done.returncode == 0
    assert (project / "train.py").read_text() == BROKEN
    assert "Checked 1 file" in err and "changed" not in err.split("Checked")[-1]


def test_check_stdin_closed_is_an_error_exit_2(project):
    done = autofix(project, "check", "-", closed=("stdin",))
    err = _text(done.stderr)
    assert "Traceback" not in err
    assert done.returncode == 2
    assert "error: -: standard input is closed" in err


def test_fix_stdin_closed_is_an_error_exit_2_and_writes_nothing(project):
    done = autofix(project, "fix", "-", closed=("stdin",))
    assert "Traceback" not in _text(done.stderr)
    assert done.returncode == 2 and done.stdout == b""


@pytest.mark.parametrize(
    "args",
    [("check", "train.py"), ("diff", "train.py"), ("explain", "TFD001"), ("rules",), ("--version",)],
    ids=lambda a: a[0],
)
def test_closed_stdout_is_an_error_or_nothing_never_a_traceback(project, args):
    done = autofix(project, *args, closed=("stdout",))
    err = _text(done.stderr)
    assert "Traceback" not in err and "Exception ignored" not in err
    if args[0] in ("check", "diff"):
        # The report (the diff) could not be written: an error, whatever was found.
        assert done.returncode == 2
        assert "error: cannot write the" in err and "standard output is closed" in err
    else:
        assert done.returncode == 0


def test_fix_stdout_closed_is_an_error(project):
    done = subprocess.run(
        [sys.executable, "-m", "autofix", "fix", "--isolated", "-"],
        cwd=project,
        input=BROKEN.encode(),
        stdout=None,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
    )
    err = _text(done.stderr)
    assert "Traceback" not in err
    assert done.returncode == 2 and "cannot write the code to standard output" in err


@pytest.mark.parametrize("command", ["check", "diff", "fix"])
def test_closed_stderr_changes_nothing_but_the_messages(project, command):
    done = autofix(project, command, "--isolated", "train.py", closed=("stderr",))
    assert done.returncode == {"check": 1, "diff": 1, "fix": 0}[command]
    if command == "fix":
        assert (project / "train.py").read_text() != BROKEN
    else:
        assert b"train.py" in done.stdout


def test_every_stream_closed(project):
    done = autofix(project, "fix", "-i", "--isolated", "train.py", closed=("stdin", "stdout", "stderr"))
    assert done.returncode == 0
    assert (project / "train.py").read_text() == BROKEN


@pytest.mark.parametrize("command", ["check", "diff"])
def test_a_reader_that_left_is_an_error_without_a_traceback(project, command):
    # The reading end is closed before autofix writes (`autofix check | head -0`, say).
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "autofix", command, "--isolated", "train.py"],
            cwd=project,
            stdout=write,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(write)
    err = _text(done.stderr)
    assert "Traceback" not in err and "Exception ignored" not in err
    assert done.returncode == 2 and "Broken pipe" in err
