"""Many files on many processes: results in the order of the paths, whatever happens to a worker.

Files the result cache answers are answered here, in the main process, before any worker is
started (a warm run starts none); the others go to the workers. Each worker process takes one
file at a time (and has the next one queued). A worker that dies
(a crash in native code, the OOM killer, ``kill -9``) costs only the file it was working on:
that file gets an error result, the file queued behind it goes back to the others, a new worker
takes its place, and the run goes on. Ctrl-C in the main process ends the workers.

While a file is analysed, Python's cyclic garbage collector is paused (see
:func:`collector_paused`).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections import deque
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable, Iterator

from autofix.cache import ResultCache
from autofix.options import Options
from autofix.results import FileResult

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

# Files handed to a worker before it has finished the first: it never waits for the main
# process, which may be busy printing.
QUEUED_PER_WORKER = 2


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector runs every few hundred allocations and walks the
    young objects each time; parsing a file makes hundreds of thousands of libcst nodes (which
    reference counting alone frees), so it would walk them over and over. Pause it for one
    file; once it is back on, it walks what is left of that file (little) once."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def process_path(path: str, options: Options, write: bool, cache: ResultCache | None = None) -> FileResult:
    """The engine's :func:`~autofix.engine.process_path`. The engine (the rules, libcst) is
    imported on the first file the cache does not answer: a warm run never loads it."""
    from autofix.engine import process_path as analyse_path

    return analyse_path(path, options, write, cache)


def process_one(path: str, options: Options, write: bool, cache: ResultCache | None = None) -> FileResult:
    """One file not answered by the cache: analysed (its result then stored in ``cache``)."""
    with collector_paused():
        return process_path(path, options, write, cache)


class Runner:
    """Processes many files on ``jobs`` processes, yielding results in the order of the paths.

    Use as a context manager: the workers, when needed, start in :meth:`process` before it
    yields anything (before any display thread); leaving ends them.
    """

    def __init__(self, options: Options, jobs: int | None = None, cache: ResultCache | None = None) -> None:
        self.options = options
        self.jobs = jobs or os.cpu_count() or 1
        self.cache = cache
        self._pool: _Pool | None = None

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.close(graceful=exc[0] is None)
            self._pool = None
            gc.unfreeze()

    def process(self, paths: Iterable[str], write: bool = False) -> Iterator[FileResult]:
        paths = list(paths)
        answered: dict[int, FileResult] = {}
        if self.cache is not None:
            for index, path in enumerate(paths):
                found = self.cache.lookup(path, self.options, write)
                if found is not None:
                    answered[index] = found
        left = [paths[i] for i in range(len(paths)) if i not in answered]
        analysed = self._analyse(left, write)
        for index in range(len(paths)):
            yield answered.pop(index) if index in answered else next(analysed)

    def _analyse(self, paths: list[str], write: bool) -> Iterator[FileResult]:
        if not paths:
            return iter(())
        # Every file left will be analysed: load the engine once, before the workers fork.
        import autofix.engine  # noqa: F401

        if self.jobs < 2 or len(paths) < 2:
            return (process_one(path, self.options, write, self.cache) for path in paths)
        import multiprocessing

        # What is loaded now (modules, rules) stays for the workers' lifetime: keep it out of
        # the collector's way, and the forked pages shared.
        gc.freeze()
        context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
        self._pool = _Pool(context, self.jobs, self.options, self.cache)
        return self._pool.run(paths, write)


def _serve(conn: "Connection", inherited: list["Connection"], options: Options, cache: ResultCache | None) -> None:
    """A worker: ``(index, path, write)`` in, ``(index, result)`` out, until told to stop."""
    # Ctrl-C goes to the whole process group: the main process decides what happens.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The main process's ends of every pipe (copied by fork): without closing them, a worker
    # would not see its own pipe close when the main process dies.
    for other in inherited:
        other.close()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, path, write = message
        conn.send((index, process_one(path, options, write, cache)))


class _Worker:
    def __init__(self, context, options: Options, cache: ResultCache | None, inherited: list["Connection"]) -> None:
        self.conn, child = context.Pipe()
        # Only a forked worker holds copies of the main process's ends of the pipes.
        ends = [*inherited, self.conn] if context.get_start_method() == "fork" else []
        self.process = context.Process(target=_serve, args=(child, ends, options, cache), daemon=True)
        self.process.start()
        child.close()
        # Indexes sent and not answered yet, in the order the worker takes them.
        self.queue: deque[int] = deque()


def died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


class _Pool:
    """Started before any display thread (a fork copies only the thread that forks); only a
    worker that replaces a dead one is forked later."""

    def __init__(self, context, size: int, options: Options, cache: ResultCache | None) -> None:
        self.context = context
        self.options = options
        self.cache = cache
        self.write = False
        self.workers: list[_Worker] = []
        for _ in range(size):
            self._spawn()

    def _spawn(self) -> bool:
        try:
            worker = _Worker(self.context, self.options, self.cache, [w.conn for w in self.workers])
        except OSError:
            return False
        self.workers.append(worker)
        return True

    def run(self, paths: list[str], write: bool) -> Iterator[FileResult]:
        self.write = write
        pending: deque[int] = deque(range(len(paths)))
        done: dict[int, FileResult] = {}
        following = 0
        while following < len(paths):
            if not self.workers:
                # No worker could be started again: the rest runs here.
                index = pending.popleft()
                done[index] = process_one(paths[index], self.options, self.write, self.cache)
            else:
                self._dispatch(paths, pending, done)
                self._collect(paths, pending, done)
            while following in done:
                yield done.pop(following)
                following += 1

    def _dispatch(self, paths: list[str], pending: deque[int], done: dict[int, FileResult]) -> None:
        for worker in list(self.workers):
            while pending and len(worker.queue) < QUEUED_PER_WORKER:
                index = pending.popleft()
                try:
                    worker.conn.send((index, paths[index], self.write))
                except OSError:
                    pending.appendleft(index)
                    self._lost(worker, paths, pending, done)
                    break
                worker.queue.append(index)

    def _collect(self, paths: list[str], pending: deque[int], done: dict[int, FileResult]) -> None:
        import pickle
        from multiprocessing.connection import wait

        busy = [w for w in self.workers if w.queue]
        if not busy:
            return
        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
        for worker in busy:
            if worker.conn not in ready and worker.process.sentinel not in ready:
                continue
            try:
                # Everything the worker sent before it ended, then EOF if it ended.
                while worker.queue and worker.conn.poll():
                    index, result = worker.conn.recv()
                    worker.queue.remove(index)
                    done[index] = result
            except (EOFError, OSError, pickle.UnpicklingError):
                self._lost(worker, paths, pending, done)
                continue
            if worker.process.sentinel in ready and worker.queue:
                self._lost(worker, paths, pending, done)

    def _lost(self, worker: _Worker, paths: list[str], pending: deque[int], done: dict[int, FileResult]) -> None:
        """``worker`` died: the file it was working on gets the blame, the ones queued behind
        it go back to the others, and a new worker takes its place."""
        worker.process.join(timeout=5)
        how = died(worker.process.exitcode)
        if worker.queue:
            index = worker.queue.popleft()
            done[index] = FileResult(paths[index], error=f"its analysis crashed: the worker process died ({how})")
        pending.extendleft(reversed(worker.queue))
        worker.queue.clear()
        worker.conn.close()
        self.workers.remove(worker)
        self._spawn()

    def close(self, graceful: bool) -> None:
        for worker in self.workers:
            if graceful:
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
            else:
                worker.process.terminate()
        for worker in self.workers:
            worker.process.join(timeout=None if graceful else 5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.workers.clear()
