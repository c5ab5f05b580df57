"""The result of smoke-testing one script: plain, frozen values (parent side).

:class:`SmokeReport` — one per script:

- ``script``, ``args``: what ran. ``ok``: training happened and every check passed.
- ``status``: how the script ended — ``completed`` (ran to its end), ``step-limit`` (stopped
  cleanly at the step cap), ``crashed`` (an exception), ``exited`` (``sys.exit`` with a
  non-zero status), ``timeout``, ``died`` (the process was killed or exited under the script),
  ``harness-error`` (the harness itself failed: no verdict on the script).
- ``replicas`` (asked for), ``provided`` (how: ``"2 logical CPUs"``), ``steps`` (the cap).
- ``fits``: one :class:`FitRecord` per ``fit`` (and per model trained with ``train_on_batch``).
- ``runs``: one :class:`RunRecord` per call site of ``strategy.run`` in the script.
- ``checks``: every :class:`Check`, passed or not; ``failures`` has the failed ones' messages.
- ``seconds`` (the script, without TensorFlow's start-up), ``startup_seconds`` (importing
  TensorFlow and providing the devices, shared by the scripts of one :func:`run_many` process),
  ``peak_memory_mb`` (peak resident memory while the script ran, TensorFlow included).
- ``error`` (``"Type: message"``) and ``error_site`` (``file:line`` in the script) of a crash;
  ``script_exit`` (the script's ``sys.exit`` status); ``harness_error``.
- ``strategies`` created, ``datasets`` served synthetically (``--offline``), ``notes``
  (things worth knowing that are not failures), ``output`` (the tail of what the script printed),
  ``tensorflow`` (version), ``legacy_keras``, ``offline``.
- ``writes``: one :class:`WriteRecord` per path the script wrote (``api``, absolute ``path``,
  ``via`` the Keras callback, ``site``).
- ``workers``: ``None``, or for a multi-worker run a :class:`WorkersReport`: ``count``,
  ``replicas_per_worker``, ``trained`` (workers that trained), ``agree`` (same losses and
  weights; ``None`` when fewer than two trained), ``shared_writes`` (messages of paths two
  workers wrote) and ``each``, one :class:`WorkerReport` per worker (``index``, ``chief``,
  ``address``, ``status``, ``ok``, ``trained``, ``replicas``, ``steps``, ``losses``,
  ``weights`` digests, ``global_batch``, ``writes``, ``failures``, times, ``error``, ``output``).
  The other fields are then the chief's, except ``status`` / ``error`` / ``output`` (the worker
  that failed first) and ``replicas`` (the total).
- ``loops``: one :class:`LoopRecord` per custom loop that applies gradients without
  ``strategy.run`` (a step function, or an eager call site and optimizer).
- ``refused``: why a notebook cannot be run as one program (``status`` ``refused``).
- ``trace`` (``--compare``): the index of the steps the run recorded (see
  :mod:`autofix.smoke.snapshot`: variables, their origins, optimizers, what each replica was
  fed, what the script reported, noise layers, draws not held, ``transplanted``, ``held``);
  ``batches``: the batch sizes the script asked ``Dataset.batch`` for (scaled).
- ``compare``: ``None``, or with ``--compare`` a :class:`CompareReport` (see
  :mod:`autofix.smoke.compare`): ``status``, ``message``, ``pairs`` (one :class:`Pair` per
  replica count compared), ``runs`` (the four :class:`CompareRun`), the tolerances.
- ``exit_code``: 0 (ok), 1 (a check failed), 2 (harness error, or a notebook refused) — the
  CLI's exit status; with ``compare``, the comparison's (0 equivalent, 1 different or the
  migrated script fails, 2 no verdict).

:class:`FitRecord` — one ``fit``: ``method`` (``fit`` / ``train_on_batch``), ``site``
(``file:line``), ``strategy`` (class of ``model.distribute_strategy``), ``replicas``
(its ``num_replicas_in_sync``), ``all_mirrored`` (every model and optimizer variable is a
``tf.distribute.DistributedValues``), ``variables`` (how many were checked), ``unmirrored``
(names of the others, at most 10; ``unmirrored_count`` counts them all), ``losses`` (the
running loss fit reports after each step), ``steps`` (that ran), ``global_batch`` (size of the first batch fit received, before it is
split over replicas), ``user_args`` (the script's ``epochs``, ``steps_per_epoch``,
``batch_size``, ``validation_steps``, before capping), ``capped_args``, ``compiled_in_scope``,
``optimizer_in_scope`` (created under the model's strategy), ``cause`` (why training was not
distributed, in the script's terms), ``error`` (when fit raised), ``keras`` (package and version);
in multi-worker runs ``weights`` (digest after fit), ``auto_shard`` and ``sharded``.

:class:`RunRecord` — one call site of ``strategy.run``: ``site`` (``file:line``, or the
``tf.function`` holding it: ``file:line name``), ``given`` (``function``, ``tf.function``,
``model``, ``layer``, ``module``, ``callable``), ``name``, ``in_tf_function``, ``strategy``,
``num_replicas``, ``calls`` (Python calls: traces when inside a tf.function), ``steps``
(distributed steps executed), ``replicas`` (replica ids seen running the function),
``replicas_observed``, ``applies_gradients`` (an optimizer applied gradients inside it),
``losses`` (per step, where the step returns a scalar or is followed by ``strategy.reduce``),
``global_batch`` (first batch of the dataset the script last passed to
``experimental_distribute_dataset``), ``error``.

:class:`LoopRecord` — one custom loop without ``strategy.run``: ``site``, ``name`` (the step
function, or ``Adam.apply_gradients`` for an eager update), ``in_tf_function``, ``strategy``
(current when gradients were applied), ``replicas`` (1), ``optimizers``, ``steps``, ``losses``,
``global_batch`` (leading dimension of the step function's first input), ``weights``,
``error``.

:class:`Check` — ``name``, ``passed``, ``message`` (one line, phrased for the user).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from autofix.exitcodes import FAILED as EXIT_FAILED
from autofix.exitcodes import HARNESS as EXIT_HARNESS
from autofix.exitcodes import OK as EXIT_OK

# --compare: proven (0), the migration is wrong (1); otherwise no verdict on it (2).
COMPARE_EXIT_CODES = {"equivalent": EXIT_OK, "different": EXIT_FAILED, "migrated-fails": EXIT_FAILED}


@dataclass(frozen=True)
class FitRecord:
    method: str = "fit"
    site: str = ""
    strategy: str = ""
    replicas: int = 0
    all_mirrored: bool = False
    variables: int = 0
    unmirrored: tuple[str, ...] = ()
    unmirrored_count: int = 0
    losses: tuple[float, ...] = ()
    steps: int = 0
    global_batch: int | None = None
    user_args: dict[str, Any] = field(default_factory=dict)
    capped_args: dict[str, Any] = field(default_factory=dict)
    compiled_in_scope: bool | None = None
    optimizer_in_scope: bool | None = None
    cause: str | None = None
    error: str | None = None
    keras: str = ""
    weights: str | None = None
    auto_shard: str | None = None
    sharded: bool | None = None


@dataclass(frozen=True)
class RunRecord:
    site: str = ""
    given: str = ""
    name: str = ""
    in_tf_function: bool = False
    strategy: str = ""
    num_replicas: int = 0
    calls: int = 0
    steps: int = 0
    replicas: tuple[int, ...] = ()
    replicas_observed: bool = False
    applies_gradients: bool = False
    losses: tuple[float, ...] = ()
    global_batch: int | None = None
    error: str | None = None
    weights: str | None = None
    auto_shard: str | None = None
    sharded: bool | None = None
    # {replica: [examples, digest]} of the step's first call (see autofix.smoke.state.RunRec).
    fed: dict[str, Any] = field(default_factory=dict)
    built: tuple[str, ...] = ()
    unlifted: tuple[str, ...] = ()
    collective_replaced: bool = False


@dataclass(frozen=True)
class LoopRecord:
    site: str = ""
    name: str = ""
    in_tf_function: bool = False
    strategy: str = ""
    replicas: int = 1
    optimizers: tuple[str, ...] = ()
    steps: int = 0
    losses: tuple[float, ...] = ()
    global_batch: int | None = None
    weights: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    message: str


@dataclass(frozen=True)
class WriteRecord:
    api: str = ""
    path: str = ""
    via: str | None = None
    site: str = ""


@dataclass(frozen=True)
class WorkerReport:
    index: int
    address: str
    status: str
    ok: bool
    trained: bool
    replicas: int | None = None
    steps: int = 0
    losses: tuple[float, ...] = ()
    weights: tuple[str | None, ...] = ()
    global_batch: int | None = None
    writes: tuple[WriteRecord, ...] = ()
    failures: tuple[str, ...] = ()
    seconds: float = 0.0
    startup_seconds: float | None = None
    peak_memory_mb: float | None = None
    error: str | None = None
    error_site: str | None = None
    output: str = ""

    @property
    def chief(self) -> bool:
        return self.index == 0


@dataclass(frozen=True)
class WorkersReport:
    count: int
    replicas_per_worker: int
    trained: int
    agree: bool | None
    shared_writes: tuple[str, ...] = ()
    each: tuple[WorkerReport, ...] = ()


@dataclass(frozen=True)
class CompareRun:
    """One of the four runs: who, on how many replicas, at which batch scale, how it ended."""

    role: str
    script: str
    replicas: int
    batch_scale: int
    status: str
    ok: bool
    global_batch: int | None = None
    failures: tuple[str, ...] = ()
    seconds: float = 0.0
    transplanted: str | None = None
    output: str = ""
    # as written; N virtual replicas (the reference); N micro-steps a step
    mode: str = "as written"


@dataclass(frozen=True)
class Pair:
    """The migrated run on ``replicas`` against the original at ``batch_scale`` x its batch."""

    replicas: int
    batch_scale: int
    status: str  # same, different, not-compared
    message: str
    variables: int = 0
    # max over the variables of |migrated - original| / the original's update
    max_relative: float | None = None
    first_difference: dict[str, Any] | None = None


@dataclass(frozen=True)
class CompareReport:
    original: str
    status: str
    message: str
    pairs: tuple[Pair, ...] = ()
    runs: tuple[CompareRun, ...] = ()
    relative: float = 0.0
    absolute: float = 0.0
    # Keras's float type in the runs compared (float64 when float32's rounding, magnified,
    # left the runs in float32 inconclusive).
    floatx: str = "float32"
    # Inconclusive only through float32 rounding that the optimizer magnifies.
    rounding: bool = False
    # Steps compared.
    steps: int = 0
    # What was done to hold the runs equal that a reader must know (initial values set).
    said: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "equivalent"

    @property
    def exit_code(self) -> int:
        return COMPARE_EXIT_CODES.get(self.status, EXIT_HARNESS)

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), ok=self.ok, exit_code=self.exit_code)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompareReport:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["pairs"] = tuple(Pair(**p) for p in data.get("pairs", ()))
        values["runs"] = tuple(CompareRun(**dict(r, failures=tuple(r.get("failures", ())))) for r in data.get("runs", ()))
        values["said"] = tuple(data.get("said", ()))
        return cls(**values)


@dataclass(frozen=True)
class SmokeReport:
    script: str
    ok: bool
    status: str
    replicas: int
    steps: int
    args: tuple[str, ...] = ()
    fits: tuple[FitRecord, ...] = ()
    runs: tuple[RunRecord, ...] = ()
    checks: tuple[Check, ...] = ()
    seconds: float = 0.0
    startup_seconds: float | None = None
    peak_memory_mb: float | None = None
    error: str | None = None
    error_site: str | None = None
    script_exit: int | None = None
    harness_error: str | None = None
    strategies: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    provided: str = ""
    tensorflow: str = ""
    legacy_keras: bool = False
    offline: bool = False
    output: str = ""
    writes: tuple[WriteRecord, ...] = ()
    workers: WorkersReport | None = None
    loops: tuple[LoopRecord, ...] = ()
    refused: str | None = None
    trace: dict[str, Any] | None = None
    batches: tuple[int, ...] = ()
    compare: CompareReport | None = None

    @property
    def failures(self) -> tuple[str, ...]:
        return tuple(c.message for c in self.checks if not c.passed)

    @property
    def trained(self) -> bool:
        return (
            any(f.steps > 0 for f in self.fits)
            or any(r.steps > 0 and r.applies_gradients for r in self.runs)
            or any(loop.steps > 0 for loop in self.loops)
        )

    @property
    def exit_code(self) -> int:
        if self.compare is not None:
            return self.compare.exit_code
        if self.harness_error is not None or self.refused is not None:
            return EXIT_HARNESS
        return EXIT_OK if self.ok else EXIT_FAILED

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        data["trained"] = self.trained
        data["failures"] = list(self.failures)
        if self.workers is not None:
            for worker, raw in zip(self.workers.each, data["workers"]["each"]):
                raw["chief"] = worker.chief
        if self.compare is not None:
            data["compare"] = self.compare.to_dict()
        return _finite(data)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SmokeReport:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["fits"] = tuple(_record(FitRecord, f) for f in data.get("fits", ()))
        values["runs"] = tuple(_record(RunRecord, r) for r in data.get("runs", ()))
        values["loops"] = tuple(_record(LoopRecord, r) for r in data.get("loops", ()))
        values["batches"] = tuple(data.get("batches", ()))
        if data.get("compare") is not None:
            values["compare"] = CompareReport.from_dict(data["compare"])
        values["checks"] = tuple(Check(**c) for c in data.get("checks", ()))
        for name in ("args", "strategies", "datasets", "notes"):
            values[name] = tuple(data.get(name, ()))
        values["writes"] = tuple(_record(WriteRecord, w) for w in data.get("writes", ()))
        workers = data.get("workers")
        if workers is not None:
            each = []
            for worker in workers.get("each", ()):
                worker = dict(worker)
                worker.pop("chief", None)
                worker["writes"] = [_record(WriteRecord, w) for w in worker.get("writes", ())]
                each.append(_record(WorkerReport, worker))
            values["workers"] = _record(WorkersReport, dict(workers, each=tuple(each)))
        return cls(**values)


def _record(cls, data: dict[str, Any]):
    known = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in known}
    for name, value in values.items():
        if isinstance(value, list):
            values[name] = tuple(value)
    if "losses" in values:
        values["losses"] = tuple(float("nan") if v is None else v for v in values["losses"])
    return cls(**values)


def _finite(value: Any) -> Any:
    """JSON has no NaN: a loss that is not finite is written as null (its check says so)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
