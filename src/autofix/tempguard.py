"""Temporary files that outlive a killed process are removed by a watcher that outlives it.

An atomic write needs a named temporary file next to the target for a moment (between linking
it in and renaming it over the target). A SIGKILL in that moment would leave it behind. So
before a process names a temporary file, it tells a small watcher process about it; the
watcher runs in its own session (a ``kill`` of autofix's process group does not reach it) and,
when the pipe from autofix closes (autofix ended, however it ended), removes every file it was
told about and not told was done with.

Each process that writes (the main process, each worker) starts its own watcher the first
time it needs one, so each pipe has one writer and records are never interleaved.

Run as a script, this file is the watcher: it reads NUL-terminated records from stdin,
``+path`` (about to exist) and ``-path`` (renamed or removed), and needs nothing but ``os``.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading

_lock = threading.Lock()
_watcher: subprocess.Popen | None = None
_watcher_pid = -1  # the process that started ``_watcher`` (a forked worker starts its own)
_broken = False


def _send(record: bytes) -> None:
    global _watcher, _watcher_pid, _broken
    with _lock:
        if _broken:
            return
        if _watcher is None or _watcher_pid != os.getpid():
            try:
                _watcher = subprocess.Popen(
                    [sys.executable, "-I", "-S", __file__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError:
                # No watcher: writes still work and clean up after themselves on every
                # error Python can see; only a SIGKILL at the wrong moment could leave a file.
                _broken = True
                return
            _watcher_pid = os.getpid()
            atexit.register(_close, _watcher)
        try:
            _watcher.stdin.write(record)
            _watcher.stdin.flush()
        except OSError:
            _broken = True


def _close(watcher: subprocess.Popen) -> None:
    """On a normal exit: end the watcher (nothing is pending then) and reap it."""
    try:
        watcher.stdin.close()
        watcher.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        pass


def guard(path: str) -> None:
    """Call before ``path`` is created: removed if this process dies before ``release``."""
    _send(b"+" + os.fsencode(path) + b"\0")


def release(path: str) -> None:
    """Call once ``path`` has been renamed away or removed."""
    _send(b"-" + os.fsencode(path) + b"\0")


def _watch() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pending: set[bytes] = set()
    buffer = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buffer += chunk
        *records, buffer = buffer.split(b"\0")
        for record in records:
            if record[:1] == b"+":
                pending.add(record[1:])
            elif record[:1] == b"-":
                pending.discard(record[1:])
    for path in pending:
        try:
            os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    _watch()
