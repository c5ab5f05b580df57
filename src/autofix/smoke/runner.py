"""The child process: ``python -m autofix.smoke.runner SPEC.json`` (started by the harness).

It imports TensorFlow once, provides the replicas, installs the hooks, then runs each script
of the spec in turn as ``__main__`` — in its own directory, with its own ``sys.argv``,
``sys.path[0]``, a fresh namespace and its output in its own log — and clears the Keras
session between scripts. Progress goes to the spec's ``events`` file, one JSON object a line,
written as it happens, so that the harness knows which script was running if this process
dies: ``ready`` (or ``harness-error``), then for each script ``start``, ``progress`` (the
records so far, after every step and every ``fit``) and ``done``. A script that ends the
process itself (``os._exit``) keeps what it recorded up to its last step.

It prints nothing itself; what the scripts print goes to their logs.
"""

from __future__ import annotations

import builtins
import gc
import importlib.abc
import importlib.util
import json
import linecache
import os
import resource
import runpy
import sys
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from autofix.smoke.state import StepLimitReached, describe_exception, place, recorder

KERAS_PACKAGES = ("keras", "tf_keras")
_hook_errors: list[str] = []


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    with open(spec["events"], "a", encoding="utf-8") as events:

        def emit(event: dict[str, Any]) -> None:
            events.write(json.dumps(event, default=repr) + "\n")
            events.flush()

        return _run_all(spec, emit)


def _run_all(spec: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> int:
    started = time.perf_counter()
    _die_with_parent()
    try:
        provision = _bootstrap(spec)
    except BaseException as exc:  # the harness cannot work here: say why and stop
        emit({"event": "harness-error", "error": describe_exception(exc), "traceback": traceback.format_exc()})
        return 3
    import tensorflow as tf

    emit(
        {
            "event": "ready",
            # To the microsecond: two start-ups of a batch then never read the same (a test tells
            # the processes of a batch apart by it).
            "startup_seconds": round(time.perf_counter() - started, 6),
            "tensorflow": tf.__version__,
            "provided": provision.how,
            "pid": os.getpid(),
        }
    )
    home = os.getcwd()
    for index, job in enumerate(spec["scripts"]):
        emit({"event": "start", "index": index})
        recorder.sink = lambda records, index=index: emit({"event": "progress", "index": index, "records": records})
        result = _run_one(job, int(spec["replicas"]))
        os.chdir(home)
        _clear_sessions()
        emit({"event": "done", "index": index, "result": result})
    if recorder.workers > 1:
        # A worker that left now could break the others' last collective or their
        # coordination service (the chief hosts it): the harness stops every worker together
        # once it has them all.
        while True:
            time.sleep(3600)
    return 0


def _die_with_parent() -> None:
    """End with the reaper that started this process, even when it is SIGKILLed (Linux)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _exit(code: int) -> None:
    """Everything is reported: skip TensorFlow's teardown, which takes 1-2 s."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _bootstrap(spec: dict[str, Any]):
    if hasattr(sys.stdout, "reconfigure"):
        # A script killed by a timeout must not lose what it printed last.
        sys.stdout.reconfigure(line_buffering=True)
    recorder.steps = int(spec["steps"])
    recorder.replicas = int(spec["replicas"])
    worker = spec.get("worker") or {}
    recorder.worker, recorder.workers = int(worker.get("index", 0)), int(worker.get("count", 1))
    import tensorflow  # noqa: F401  (starts nothing: the runtime starts on first use)

    from autofix.smoke import batches, controls, devices, loops, multiworker, origins, standins, writes

    provision = devices.Provision(recorder.replicas)
    devices.install(provision)
    multiworker.install(provision)
    loops.install()
    controls.install()
    origins.install()
    batches.install()
    standins.install(recorder.note)
    writes.install(os.path.dirname(os.path.abspath(spec["events"])))
    offline = bool(spec.get("offline"))
    actions = {name: _keras_action(offline) for name in KERAS_PACKAGES}
    for name in list(actions):
        if name in sys.modules:
            actions.pop(name)(sys.modules[name])
    if _hook_errors:
        raise RuntimeError("; ".join(_hook_errors))
    sys.meta_path.insert(0, _AfterImport(actions))
    # TensorFlow leaves ~10^6 objects that live as long as the process: keeping them out of
    # the collector makes the clean-up between scripts (clear_session collects) ~10x cheaper.
    gc.freeze()
    return provision


def _keras_action(offline: bool) -> Callable[[Any], None]:
    def action(module: Any) -> None:
        from autofix.smoke import controls, datasets, keras_hooks, origins, reported, writes

        try:
            keras_hooks.install(module)
            writes.install_keras(module)
            controls.install_keras(module)
            origins.install_keras(module)
            reported.install_keras(module)
            if offline:
                datasets.install(module.__name__)
        except Exception as exc:  # reported as a harness failure, not as the script's
            _hook_errors.append(f"cannot hook {module.__name__}: {describe_exception(exc)}")

    return action


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs an action right after a package (``keras``, ``tf_keras``) is first imported."""

    def __init__(self, actions: dict[str, Callable[[Any], None]]) -> None:
        self.actions = actions

    def find_spec(self, fullname, path=None, target=None):
        action = self.actions.pop(fullname, None)
        if action is None:
            return None
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, action)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, action) -> None:
        self._loader = loader
        self._action = action

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = self._loader
        module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._action(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _run_one(job: dict[str, Any], replicas: int) -> dict[str, Any]:
    from autofix.smoke import accumulate, context, controls, phases, snapshot
    from autofix.smoke import replicas as virtual

    path = os.path.abspath(job["path"])
    script_dir = os.path.dirname(path)
    recorder.reset(script_dir)
    recorder.replicas = int(job.get("replicas") or replicas)
    compare = job.get("compare") or {}
    for note in job.get("notes", ()):
        recorder.note(note)
    del _hook_errors[:]
    saved = _redirect(job["log"])
    saved_argv, saved_path, saved_environ = sys.argv, list(sys.path), dict(os.environ)
    modules_before = set(sys.modules)
    _reset_peak_memory()
    result: dict[str, Any] = {"status": "completed", "error": None, "error_site": None, "exit_code": None}
    started = time.perf_counter()
    try:
        os.chdir(job.get("cwd") or script_dir)
        sys.argv = [path, *job.get("args", [])]
        sys.path[0] = script_dir
        virtual_count, micro = int(compare.get("virtual") or 0), int(compare.get("accumulate") or 0)
        context.start(max(virtual_count, micro, 1))
        controls.start(bool(compare), compare.get("batch_scale", 1), compare.get("floatx"), micro)
        virtual.start(virtual_count)
        accumulate.start(micro)
        snapshot.start(compare.get("snapshot"), compare.get("initial"), int(compare.get("steps") or recorder.steps))
        phases.start(path, _program_text(job, path)) if compare.get("snapshot") else phases.start(None, None)
        if "program" in job:
            _run_program(path, job["program"], job.get("cells"))
        else:
            runpy.run_path(path, run_name="__main__")
    except StepLimitReached as exc:
        result["status"] = "step-limit"
        recorder.note(f"stopped after {recorder.steps} steps ({exc})")
    except (virtual.NotSplittable, virtual.Diverged) as exc:
        # The reference run cannot run this original's steps as replicas: said, not a crash.
        result.update(status="unsplittable" if isinstance(exc, virtual.NotSplittable) else "diverged", error=str(exc))
    except BaseException as exc:
        if compare and snapshot.between() and not isinstance(exc, KeyboardInterrupt) and not _clean_exit(exc):
            # After a phase of training had its steps recorded, and before the next one: the
            # run ends with what it recorded, and the verdict says where the script stopped.
            result["status"] = "step-limit"
            snapshot.stop(f"stopped after a phase of training: {_stopped_by(exc)}")
            recorder.note(f"compare: the script stopped between two phases of training ({_stopped_by(exc)}): the steps recorded are compared")
        elif isinstance(exc, SystemExit):
            if exc.code not in (None, 0):
                result.update(status="exited", exit_code=exc.code if isinstance(exc.code, int) else 1)
                result["error"] = None if isinstance(exc.code, int) else str(exc.code)
        else:
            traceback.print_exc()
            result.update(status="crashed", error=describe_exception(exc), error_site=_error_site(exc))
    finally:
        result["seconds"] = round(time.perf_counter() - started, 3)
        try:
            snapshot.finish()
        except Exception as exc:  # the script's result stands
            recorder.note(f"could not save the first update ({describe_exception(exc)})")
        controls.start(False)
        virtual.start(0)
        accumulate.start(0)
        context.start()
        # Wall-clock end, to tell which worker of a multi-worker run failed first.
        result["ended_at"] = time.time()
        sys.argv = saved_argv
        sys.path[:] = saved_path
        if os.environ != saved_environ:
            os.environ.clear()
            os.environ.update(saved_environ)
        _restore(saved)
    result["peak_memory_mb"] = _peak_memory_mb()
    _forget_modules(modules_before, script_dir)
    result.update(recorder.to_dict())
    if _hook_errors:
        result["harness_error"] = "; ".join(_hook_errors)
    return result


def _clean_exit(exc: BaseException) -> bool:
    return isinstance(exc, SystemExit) and exc.code in (None, 0)


def _stopped_by(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"sys.exit({exc.code!r})"
    site = _error_site(exc)
    return f"{describe_exception(exc)}{f' at {site}' if site else ''}"


def _program_text(job: dict[str, Any], path: str) -> str | None:
    """The text of the program a comparing run runs (a notebook's joined cells), for the
    training it has ahead (:mod:`autofix.smoke.phases`)."""
    if "program" in job:
        return job["program"]
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _run_program(path: str, program: str, cells: list[Any] | None) -> None:
    """Run a notebook's code cells, joined into one program, as ``__main__`` (as Jupyter runs
    them: no ``__file__``). Its frames name the notebook; its lines are said as cells."""
    recorder.notebook, recorder.cells = path, cells
    # Tracebacks show the program's lines, not the notebook's JSON.
    linecache.cache[path] = (len(program), None, program.splitlines(keepends=True), path)
    code = compile(program, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    try:  # what a kernel gives every notebook without an import
        from IPython.display import display

        module.__dict__["display"] = display
    except ImportError:
        pass
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
        linecache.cache.pop(path, None)


def _error_site(exc: BaseException) -> str | None:
    site = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        filename = frame.f_code.co_filename
        # Compiled extensions name their frames relative ("h5py/h5f.pyx"): never the script's.
        if os.path.isabs(filename) and os.path.realpath(filename).startswith(os.path.realpath(recorder.script_dir) + os.sep):
            site = place(filename, line)
    return site


def _redirect(log: str) -> tuple[int, int]:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = (os.dup(1), os.dup(2))
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return saved


def _restore(saved: tuple[int, int]) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # the script may have closed or replaced it
            pass
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])


def _forget_modules(before: set[str], script_dir: str) -> None:
    """Modules imported from the script's folder belong to that script: the next script may
    have its own ``model.py``."""
    from autofix.smoke import standins

    prefix = os.path.realpath(script_dir) + os.sep
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None) or ""
        # A stand-in is served (and noted) again to the next script that imports it.
        if filename and os.path.realpath(filename).startswith(prefix) or standins.is_stand_in(module):
            del sys.modules[name]


def _clear_sessions() -> None:
    for name in KERAS_PACKAGES:
        module = sys.modules.get(name)
        if module is None:
            continue
        try:
            module.backend.clear_session()
            module.mixed_precision.set_global_policy("float32")
        except Exception:  # a half-imported or unusual Keras: the next script starts anyway
            pass
    try:
        import tensorflow as tf

        tf.config.run_functions_eagerly(False)
    except Exception:
        pass
    gc.collect()


def _reset_peak_memory() -> None:
    # Linux >= 4.0 resets the peak resident size on this write, giving each script its own peak.
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak_memory_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


if __name__ == "__main__":
    _exit(main(sys.argv))
