"""Where the command line writes: standard error (messages, the summary) and standard output
(reports, diffs, fixed code), styled where a person reads them.

rich is loaded only to style text on a terminal (or with ``FORCE_COLOR``), for the progress
bar of a run that takes a while, and by the commands that draw tables: a run whose output goes
to a pipe or a file (CI, pre-commit, an editor) writes plain text and never imports it. A
stream that is closed (``2>&-``, ``>&-``: Python then has None for it) takes nothing and never
raises; one that fails while written to (a pipe whose reader left) is dropped.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Iterator

from autofix.diffs import display_path, line_style
from autofix.results import FileResult

# Below this many files a progress bar only flickers.
PROGRESS_MIN_FILES = 20
# A progress bar appears once a run has taken this long (a warm cache answers hundreds of
# files in less).
PROGRESS_DELAY = 0.5


class Stream:
    """Standard error or standard output, looked up at each write (tests swap them)."""

    def __init__(self, stderr: bool) -> None:
        self.stderr = stderr
        self._rich = None
        self._broken = False

    @property
    def file(self) -> IO[str] | None:
        if self._broken:
            return None
        return sys.stderr if self.stderr else sys.stdout

    @property
    def is_terminal(self) -> bool:
        file = self.file
        try:
            return file is not None and file.isatty()
        except (ValueError, OSError):
            return False

    @property
    def styled(self) -> bool:
        """Whether text is styled (rich decides how, NO_COLOR and TERM included)."""
        return self.file is not None and (self.is_terminal or bool(os.environ.get("FORCE_COLOR")))

    def rich(self):
        """A rich console on this stream (imports rich)."""
        from rich.console import Console

        if self._rich is None:
            self._rich = Console(stderr=self.stderr, highlight=False, soft_wrap=True)
        return self._rich

    def print(self, text: str = "", style: str = "", end: str = "\n") -> None:
        file = self.file
        if file is None:
            return
        try:
            if self.styled:
                from rich.text import Text

                self.rich().print(Text(text, style=style), end=end)
            else:
                file.write(text + end)
                file.flush()
        except (OSError, ValueError):
            self._broken = True

    def write(self, text: str) -> None:
        """Plain text, never styled."""
        file = self.file
        if file is None:
            return
        try:
            file.write(text)
            file.flush()
        except (OSError, ValueError):
            self._broken = True

    def drop(self) -> None:
        """Stop writing to this stream after it failed (its reader left): what is still
        buffered goes nowhere, so that Python's own flush at exit does not fail again."""
        file = self.file
        self._broken = True
        if file is None:
            return
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, file.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write_bytes(self, data: bytes) -> None:
        """``data`` as it is (a diff in the file's own bytes, fixed code); raises OSError
        when the stream is closed or cannot take it."""
        file = self.file
        if file is None:
            raise OSError(f"standard {'error' if self.stderr else 'output'} is closed")
        file.flush()
        file.buffer.write(data)
        file.buffer.flush()


err = Stream(stderr=True)
out = Stream(stderr=False)


def watch(stream: Iterator[FileResult], total: int) -> Iterator[FileResult]:
    """``stream`` as it is, with a progress bar on standard error when it is a terminal, the
    run has many files and it is taking a while."""
    if total < PROGRESS_MIN_FILES or not err.is_terminal:
        yield from stream
        return
    started = time.monotonic()
    done = 0
    progress = task = None
    try:
        for result in stream:
            done += 1
            if progress is not None:
                progress.advance(task)
            elif done < total and time.monotonic() - started > PROGRESS_DELAY:
                progress, task = _progress(total, done)
            yield result
    finally:
        if progress is not None:
            progress.stop()


def _progress(total: int, done: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err.rich(),
        transient=True,
    )
    task = progress.add_task("Analysing", total=total, completed=done)
    progress.start()
    return progress, task


def print_diff(diff: bytes, encoding: str = "utf-8") -> None:
    """A diff on standard output: colored on a terminal, else the bytes as they are."""
    if not diff:
        return
    if not out.is_terminal:
        # The file's own bytes, for `git apply` and `patch`: rich would expand tabs, could
        # re-wrap lines, and would write them in the terminal's encoding.
        out.write_bytes(diff)
        return
    for line in diff.decode(encoding, errors="replace").splitlines(keepends=True):
        out.print(line.rstrip("\r\n"), style=line_style(line))


def print_error(result: FileResult) -> None:
    err.print(f"error: {result.describe_error(display_path(result.path))}", style="red")


def print_refused(result: FileResult, what: str = "fix") -> None:
    err.print(f"warning: {display_path(result.path)}: {what} not applied: {result.refused}", style="yellow")
