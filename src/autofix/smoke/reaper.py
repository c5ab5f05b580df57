"""Runs one command and ends, with it, every process it started (stdlib only, no TensorFlow).

    python -m autofix.smoke.reaper STATUS_FILE PARENT_PID -- COMMAND...

The harness starts the smoke-test runner through this small process. On Linux it is a *child
subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a process that the script double-forks and
detaches with ``os.setsid()`` is re-parented here, not to init, so it can still be found and
killed. The reaper ends every process below it, and exits, when:

- the command exits (a daemon the script left behind must not outlive the run);
- it receives SIGTERM, SIGHUP or SIGINT (the harness stops a run this way);
- the harness dies, even by SIGKILL (``PR_SET_PDEATHSIG`` turns that into a SIGTERM here);
  then it also removes the run's temporary folder, which the harness can no longer do.

The command's own exit status (negative: killed by that signal) is written to STATUS_FILE
before the reaper exits. Elsewhere (macOS) there is no subreaper: the command's process group
is killed, and a process that left the group survives.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# A process that keeps forking while it is killed: give up after this many sweeps.
MAX_SWEEPS = 200
# The harness's temporary folders (tempfile.mkdtemp(prefix=...)): the only ones removed here.
RUN_FOLDER_PREFIX = "autofix-smoke-"


class _Stop(Exception):
    pass


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def can_reap() -> bool:
    """True where orphaned descendants can be adopted (Linux >= 3.4)."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self/task")


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc), children before their children."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the fields follow the last ")".
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = [], [root]
    while queue:
        for child in parents.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def end_all_below(root: int) -> None:
    """SIGKILL every process below ``root`` and reap those that were its children, until none is
    left. Killed processes' own children are re-parented to ``root`` (the subreaper), so each
    sweep finds what the last one orphaned."""
    for _ in range(MAX_SWEEPS):
        found = descendants(root)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reaped = _reap()
        if not found and not reaped:
            return
        time.sleep(0.01)


def _reap() -> int:
    count = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return count
        if pid == 0:
            return count
        count += 1


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: python -m autofix.smoke.reaper STATUS_FILE PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    status_file, parent, command = argv[1], int(argv[2]), argv[4:]
    adopted = can_reap() and _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    def stop(signum, frame):
        raise _Stop(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    child = None
    status: int | None = None
    try:
        if os.getppid() != parent:  # the harness died before the death signal was armed
            raise _Stop(signal.SIGTERM)
        # Its own process group: the fallback where there is no subreaper.
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
        while status is None:
            try:
                status = child.wait()
            except OSError as exc:  # pragma: no cover - EINTR is retried by Python
                if exc.errno != errno.EINTR:
                    raise
    except _Stop:
        pass
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        if child is not None:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
            # Its own status first: the sweep below reaps whatever else is left.
            child.wait()
            status = child.returncode
        if adopted:
            end_all_below(os.getpid())
        elif child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
    if os.getppid() != parent:
        # The harness died (killed with SIGKILL?): nobody will read the status or remove the
        # run's temporary folder but this process.
        _remove_run_folder(status_file)
        return 0
    with open(status_file, "w", encoding="utf-8") as fh:
        fh.write(f"{status}\n")
    return 0


def _remove_run_folder(status_file: str) -> None:
    folder = os.path.dirname(os.path.abspath(status_file))
    while folder != os.path.dirname(folder):
        if os.path.basename(folder).startswith(RUN_FOLDER_PREFIX):
            shutil.rmtree(folder, ignore_errors=True)
            return
        folder = os.path.dirname(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
