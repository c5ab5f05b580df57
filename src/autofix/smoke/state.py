"""What the bootstrap records while one script runs (child side).

Everything here is plain Python data that :mod:`autofix.smoke.runner` turns into one JSON
object per script. The hooks write into the one :data:`recorder`; it is reset between the
scripts of a batch. Replica threads of MirroredStrategy write into it too, so nothing here is
thread-local. The hooks call :meth:`Recorder.publish` after every step and every ``fit``:
the runner streams the records to the harness as they happen, so a script that ends the
process itself (``os._exit(0)`` after training) keeps them.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from dataclasses import asdict, dataclass, field
from typing import Any


class StepLimitReached(BaseException):
    """Ends a script once it asks for more distributed steps than the cap.

    A BaseException, so that a script's own ``except Exception`` does not swallow it; the
    runner treats it as a normal end of the script.
    """


@dataclass
class FitRec:
    method: str
    site: str
    user_args: dict[str, Any]
    capped_args: dict[str, Any]
    strategy: str = ""
    replicas: int = 0
    all_mirrored: bool = False
    variables: int = 0
    unmirrored: list[str] = field(default_factory=list)
    unmirrored_count: int = 0
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    global_batch: int | None = None
    compiled_in_scope: bool | None = None
    optimizer_in_scope: bool | None = None
    cause: str | None = None
    error: str | None = None
    keras: str = ""
    batch_probed: bool = False
    # Multi-worker runs only: a digest of the model's weights after fit, and how the dataset
    # fit received is split over the workers (auto-shard policy, shard() in the pipeline).
    weights: str | None = None
    auto_shard: str | None = None
    sharded: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("batch_probed")
        return data


@dataclass
class RunRec:
    site: str
    given: str
    name: str
    in_tf_function: bool
    strategy: str
    num_replicas: int
    calls: int = 0
    steps: int = 0
    replicas: list[int] = field(default_factory=list)
    replicas_observed: bool = False
    applies_gradients: bool = False
    losses: list[float] = field(default_factory=list)
    global_batch: int | None = None
    error: str | None = None
    weights: str | None = None
    auto_shard: str | None = None
    sharded: bool | None = None
    # What each replica was given in the step's first call: {replica: [examples, digest]} (one
    # digest of all its examples): replicas given the same examples are not data-parallel.
    fed: dict[str, list[Any]] = field(default_factory=dict)
    # Keras 3 Sequential models the step built on its first call, per replica inside a
    # tf.function: outside the harness that run fails (see keras_hooks._sequential_build).
    built: list[str] = field(default_factory=list)
    # Variables the step's tf.function made on its first call and TensorFlow could not
    # initialize outside it, under a strategy whose collective all-reduce the harness replaced:
    # run as written that step fails (see loops._unlifted).
    unlifted: list[str] = field(default_factory=list)
    collective_replaced: bool = False

    def saw_replica(self, replica: int | None) -> None:
        self.replicas_observed = True
        if replica is not None and replica not in self.replicas:
            self.replicas.append(replica)
            self.replicas.sort()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LoopRec:
    """A custom loop that applies gradients without ``strategy.run`` (every single-device loop):
    one per ``tf.function`` whose trace applied gradients, or per eager call site of an
    optimizer. ``replicas`` is 1: one device computed each gradient."""

    site: str
    name: str
    in_tf_function: bool
    strategy: str = ""
    replicas: int = 1
    optimizers: list[str] = field(default_factory=list)
    steps: int = 0
    losses: list[float] = field(default_factory=list)
    global_batch: int | None = None
    weights: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StepFunction:
    """A user tf.function that calls strategy.run or applies gradients: each call of it is one
    training step."""

    runs: list[RunRec] = field(default_factory=list)
    loops: list[LoopRec] = field(default_factory=list)
    calls: int = 0


@dataclass
class WriteRec:
    """A write the script made (or a library made for it): the API, the path it was given
    (absolute), the Keras callback it came through, and where in the script."""

    api: str
    path: str
    via: str | None
    site: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MAX_WRITES = 200


@dataclass
class Recorder:
    steps: int = 3
    replicas: int = 2
    # This process's place in a multi-worker run (workers == 1: a plain run).
    worker: int = 0
    workers: int = 1
    script_dir: str = ""
    fits: list[FitRec] = field(default_factory=list)
    runs: dict[str, RunRec] = field(default_factory=dict)
    loops: dict[str, LoopRec] = field(default_factory=dict)
    strategies: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Depth of Keras' own fit/evaluate/predict calls: strategy.run and tf.function calls made
    # by Keras itself are not the script's and must not be recorded or capped.
    keras_depth: int = 0
    in_compile: int = 0
    # Where the script failed, when a hook saw the exception pass: {"where", "cause"}.
    failure: dict[str, Any] | None = None
    current_fit: FitRec | None = None
    current_run: RunRec | None = None
    last_eager_run: RunRec | None = None
    last_user_batch: int | None = None
    function_stack: list[Any] = field(default_factory=list)
    step_functions: dict[int, StepFunction] = field(default_factory=dict)
    # Keeps the tf.function objects of step_functions alive so that their ids stay unique.
    step_function_refs: list[Any] = field(default_factory=list)
    # The variables each strategy.run or loop record's optimizers updated (for its weights digest).
    run_variables: dict[int, list[Any]] = field(default_factory=dict)
    # Depth of the script's own optimizer calls (Keras 3's apply_gradients calls apply: one update).
    applying: int = 0
    # The scalar an eager tape last differentiated: the loss of an eager loop's next update.
    gradient_loss: float | None = None
    last_user_sharding: tuple[str | None, bool | None] = (None, None)
    writes: list[WriteRec] = field(default_factory=list)
    # Depth of the hooked write APIs: what they write themselves is not recorded again.
    write_depth: int = 0
    # A notebook run as one program: its path, and (cell index, line in the cell) of each
    # program line (None for the lines between cells).
    notebook: str | None = None
    cells: list[Any] | None = None
    # With --compare: where the steps were saved, and what they hold (see snapshot.py).
    trace: dict[str, Any] | None = None
    # The batch sizes the script asked Dataset.batch for, and by how much they were scaled.
    batches: list[int] = field(default_factory=list)
    # Receives ``to_dict()`` after every step; set by the runner.
    sink: Any = None

    def reset(self, script_dir: str) -> None:
        keep = {"steps": self.steps, "replicas": self.replicas, "sink": self.sink, "worker": self.worker, "workers": self.workers}
        self.__init__(script_dir=script_dir, **keep)  # type: ignore[misc]

    def publish(self) -> None:
        """Send the records so far to the harness. Never raises: recording must not fail a
        script."""
        if self.sink is None:
            return
        try:
            self.sink(self.to_dict())
        except Exception:
            pass

    @property
    def multi_worker(self) -> bool:
        return self.workers > 1

    def wrote(self, record: WriteRec) -> None:
        if len(self.writes) < MAX_WRITES and not any(w == record for w in self.writes):
            self.writes.append(record)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": [f.to_dict() for f in self.fits],
            "runs": [r.to_dict() for r in self.runs.values()],
            "loops": [r.to_dict() for r in self.loops.values()],
            "strategies": list(self.strategies),
            "datasets": list(self.datasets),
            "notes": list(self.notes),
            "failure": self.failure,
            "writes": [w.to_dict() for w in self.writes],
            "trace": self.trace,
            "batches": list(self.batches),
        }


recorder = Recorder()


def scalar(value: Any) -> float | None:
    """A float for a Python/NumPy/TF scalar (or a 1-element structure), else None."""
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    elif isinstance(value, dict):
        value = value.get("loss")
    if value is None or isinstance(value, (str, bytes, bool)):
        return None
    shape = getattr(value, "shape", ())
    try:
        if shape is not None and len(shape) != 0:
            return None
        return float(value)
    except (TypeError, ValueError):
        return None


_LIBRARY_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
_OWN_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<") or "__autograph_generated_file" in filename:
        return False
    real = os.path.realpath(filename)
    return not real.startswith(_OWN_DIR) and not real.startswith(_LIBRARY_DIRS)


def user_site(depth: int = 2) -> str:
    """``file:line`` of the innermost frame in the user's code (relative to the script)."""
    frame = sys._getframe(depth)
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename):
            return place(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return "<unknown>"


def place(filename: str, line: int) -> str:
    """``file:line`` as the user knows it: a notebook's code is run as one program, whose lines
    are said as ``nb.ipynb:cell 3:2`` (cells counted from 1, as the other commands do)."""
    cells = recorder.cells
    if cells is not None and filename == recorder.notebook and 1 <= line <= len(cells) and cells[line - 1] is not None:
        cell, cell_line = cells[line - 1]
        return f"{shown(filename)}:cell {cell + 1}:{cell_line}"
    return f"{shown(filename)}:{line}"


def shown(filename: str) -> str:
    base = recorder.script_dir
    try:
        rel = os.path.relpath(filename, base) if base else filename
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


_OBJECT_REPR = re.compile(r"<(?:[\w.]+\.)?(\w+) object at 0x[0-9a-fA-F]+>")
MAX_MESSAGE = 300


def describe_exception(exc: BaseException) -> str:
    """``Type: first line of the message`` — what a user recognises from a traceback."""
    name = type(exc).__name__
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return name
    text = lines[0]
    if text == "in user code:":
        # tf.function errors list the traced frames first; the cause is the last line.
        text = lines[-1]
        if text.startswith(f"{name}: "):
            text = text[len(name) + 2 :]
    text = _OBJECT_REPR.sub(r"<\1>", text)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return f"{name}: {text}"
