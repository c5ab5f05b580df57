"""``--workers N``: one script as N worker processes of one MultiWorkerMirroredStrategy cluster
on this machine (parent side).

Each worker is a runner process of its own (through the reaper, see
:mod:`autofix.smoke.process`) with its own ``TF_CONFIG``: the cluster is N workers on free
loopback ports, worker 0 the chief; each worker has R replicas (``replicas``). The workers
talk through TensorFlow's own collective runtime (gRPC). They all run the script in its folder,
as workers sharing a file system would.

A worker that has run the script waits (the chief hosts the coordination service the others
still talk to) until every worker has; then all are stopped together.
A worker that fails (crash, exit, death, timeout), or ends without training, leaves the others
waiting in a collective:
they get :data:`PEER_GRACE` seconds to end on their own (they often fail the same way, with
their own message), then are stopped. Every worker process is ended in any case.

The report is the chief's (its fits, runs and output), with the failed checks of every worker
(a failure that every worker shares is one line, otherwise ``worker i: ...``), the checks
across the workers (:func:`autofix.smoke.checks.cluster`) and a ``workers`` section.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from autofix.smoke import checks
from autofix.smoke.jobs import Settings, SmokeJob, build_report, child_env, refused_report, script_spec
from autofix.smoke.notebook import Refused
from autofix.smoke.process import Child
from autofix.smoke.report import Check, SmokeReport, WorkerReport, WorkersReport

PEER_GRACE = 15.0
POLL_SECONDS = 0.05
ENDED = ("completed", "step-limit")


def free_ports(count: int) -> list[int]:
    """Ports free on the loopback interface now (held open together so that they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("localhost", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_workers(settings: Settings, job: SmokeJob) -> SmokeReport:
    try:
        script = script_spec(job)
    except Refused as exc:
        return refused_report(settings, job, str(exc))
    count = settings.workers
    addresses = [f"localhost:{port}" for port in free_ports(count)]
    workdir = Path(tempfile.mkdtemp(prefix="autofix-smoke-"))
    children: list[Child] = []
    try:
        for index in range(count):
            spec = {
                "replicas": settings.replicas,
                "steps": settings.steps,
                "offline": settings.offline,
                "worker": {"index": index, "count": count},
                "scripts": [script],
            }
            tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
            env = child_env(settings, {"TF_CONFIG": json.dumps(tf_config)})
            children.append(Child(workdir / f"worker-{index}", spec, env, settings.python))
        for child in children:
            child.start()
        raws, failure, first_failed = _watch(settings, children)
    finally:
        for child in children:
            child.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(settings, job, addresses, raws, [c.ready for c in children], failure, first_failed)


def _watch(settings, children: list[Child]) -> tuple[list[dict[str, Any]], tuple[str, str] | None, int | None]:
    """Each worker's raw result, the worker that failed first (if any); or a harness failure
    (message, output)."""
    raws: list[dict[str, Any] | None] = [None] * len(children)
    first_failure: tuple[int, float] | None = None
    while True:
        now = time.monotonic()
        for index, child in enumerate(children):
            if raws[index] is not None:
                continue
            child.poll()
            if child.harness_error is not None:
                message, details = child.harness_error
                return [], (f"worker {index}: {message}", details or child.boot_output()), None
            if 0 in child.done:
                raws[index] = dict(child.done[0])
            elif child.exited:
                if not child.ready:
                    reason = checks.death_reason(child.returncode)
                    return [], (f"worker {index} ended before TensorFlow started ({reason})", child.boot_output()), None
                if child.running is None:
                    return [], (f"worker {index} ended without running the script", child.boot_output()), None
                raws[index] = child.ended_mid_script()
            elif not child.ready and now - child.launched > settings.startup_timeout:
                return [], (f"worker {index}: TensorFlow did not start within {settings.startup_timeout:g} s", child.boot_output()), None
            elif child.running is not None and now - child.started > settings.timeout:
                peak = child.peak_memory_mb()
                raws[index] = dict(child.ended_mid_script("timeout"), peak_memory_mb=peak)
                child.stop()
            if first_failure is None and raws[index] is not None and _failed_or_left(raws[index]):
                first_failure = (index, now)
        first = None if first_failure is None else first_failure[0]
        if all(raw is not None for raw in raws):
            return [raw for raw in raws if raw is not None], None, first
        if first_failure is not None and now - first_failure[1] > min(PEER_GRACE, settings.timeout):
            for index, child in enumerate(children):
                if raws[index] is None:
                    raw = child.ended_mid_script("stopped") if child.running is not None else {"status": "stopped", "output": child.boot_output()}
                    left = raws[first_failure[0]].get("status") in ENDED
                    raws[index] = dict(raw, stopped_after=first_failure[0], peer_left=left)
                    child.stop()
            return [raw for raw in raws if raw is not None], None, first
        time.sleep(POLL_SECONDS)


def _failed_or_left(raw: dict[str, Any]) -> bool:
    """A worker that failed, or that ended cleanly without training: in a cluster the others
    wait for it in their first collective until they are stopped."""
    return raw.get("status") not in ENDED or not checks.has_trained(raw)


def left_early(raws: list[dict[str, Any]]) -> list[int]:
    """The workers that ended cleanly without training while another worker trained or was
    left waiting (stopped, timed out). When no worker trained and none waited, each one's own
    ``no training happened`` says it all."""
    waited = any(checks.has_trained(raw) or raw.get("status") in ("stopped", "timeout") for raw in raws)
    if not waited:
        return []
    return [i for i, raw in enumerate(raws) if raw.get("status") in ENDED and not checks.has_trained(raw)]


def _report(
    settings, job, addresses: list[str], raws: list[dict[str, Any]], readies: list[dict[str, Any]], failure, first_failed: int | None = None
) -> SmokeReport:
    chief_ready = readies[0] if readies else {}
    if failure is not None:
        message, output = failure
        raw = {"status": "harness-error", "harness_error": message, "output": output.strip()[-4000:]}
        return build_report(settings, job, raw, chief_ready)
    total = settings.replicas * settings.workers
    script_dir = os.path.dirname(os.path.abspath(job.script))
    per_worker = [checks.evaluate(raw, replicas=total, timeout=settings.timeout, workers=settings.workers) for raw in raws]
    left = left_early(raws)
    for index in left:
        # Its "no training happened" is said, with what it did to the others, by the check below.
        per_worker[index] = tuple(c for c in per_worker[index] if c.name != "trained")
    left_checks = [Check(f"worker {i}.left", False, f"worker {i} ended before training: the others were left waiting") for i in left]
    failed = _first_failed(raws, first_failed, left)
    merged = _merge(per_worker, first=failed or 0)
    across = checks.cluster(raws, lambda path: _shown(path, script_dir))
    workers = tuple(_worker(settings, i, addresses[i], raw, found, readies[i]) for i, (raw, found) in enumerate(zip(raws, per_worker)))
    agree = next((c.passed for c in across if c.name == "workers.agree"), None)
    shared = tuple(c.message for c in across if c.name == "workers.files" and not c.passed)
    section = WorkersReport(
        count=settings.workers,
        replicas_per_worker=settings.replicas,
        trained=sum(1 for w in workers if w.trained),
        agree=agree,
        shared_writes=shared,
        each=workers,
    )
    # The output of the worker that failed first: the others often fail because it did.
    shown = raws[0] if failed is None else raws[failed]
    base = build_report(settings, job, dict(raws[0], status=shown.get("status"), output=shown.get("output", "")), chief_ready)
    # The worker that left comes first: the others' failures (stopped, timed out) follow from it.
    all_checks = (*(c for c in merged if c.passed), *left_checks, *(c for c in merged if not c.passed), *across)
    return SmokeReport(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "ok": all(c.passed for c in all_checks),
            "replicas": total,
            "checks": all_checks,
            "seconds": max(w.seconds for w in workers),
            "startup_seconds": max((w.startup_seconds for w in workers if w.startup_seconds is not None), default=None),
            "peak_memory_mb": max((w.peak_memory_mb for w in workers if w.peak_memory_mb is not None), default=None),
            "error": shown.get("error"),
            "error_site": shown.get("error_site"),
            "provided": f"{settings.workers} workers x {base.provided or f'{settings.replicas} replicas'}",
            "workers": section,
        }
    )


def _first_failed(raws: list[dict[str, Any]], seen_first: int | None, left: list[int] = ()) -> int | None:
    """The worker that failed (or left without training) first, by the time each ended (else
    the one seen first)."""
    failed = [i for i, raw in enumerate(raws) if raw.get("status") not in ENDED or i in left]
    timed = [i for i in failed if raws[i].get("ended_at") is not None and raws[i].get("status") != "stopped"]
    if timed:
        return min(timed, key=lambda i: raws[i]["ended_at"])
    return seen_first if seen_first is not None else (failed[0] if failed else None)


def _merge(per_worker: list[tuple[Check, ...]], first: int = 0) -> tuple[Check, ...]:
    """The chief's passed checks, and every failed check once: as it is when every worker failed
    it, else prefixed with the workers that did; the failures of worker ``first`` (the first to
    fail) come first."""
    count = len(per_worker)
    failed: dict[tuple[str, str], list[int]] = {}
    order = [first] + [i for i in range(count) if i != first]
    for index in order:
        for check in per_worker[index]:
            if not check.passed:
                failed.setdefault((check.name, check.message), []).append(index)
    merged = [c for c in per_worker[0] if c.passed]
    for (name, message), indexes in failed.items():
        indexes = sorted(indexes)
        if len(indexes) == count:
            merged.append(Check(name, False, message))
        else:
            merged.append(Check(f"worker{'s' if len(indexes) > 1 else ''} {','.join(map(str, indexes))}.{name}", False, f"{checks.workers_phrase(indexes)}: {message}"))
    return tuple(merged)


def _worker(settings, index: int, address: str, raw: dict[str, Any], found: tuple[Check, ...], ready: dict[str, Any]) -> WorkerReport:
    fits, runs, loops = checks.fit_records(raw), checks.run_records(raw), checks.loop_records(raw)
    trained = checks.trained_records(raw)
    replicas = [f.replicas for f in fits if f.steps] + [r.num_replicas for r in runs if r.steps] + [loop.replicas for loop in loops if loop.steps]
    batches = [f.global_batch for f in fits if f.global_batch] + [r.global_batch for r in runs if r.global_batch]
    batches += [loop.global_batch for loop in loops if loop.global_batch]
    return WorkerReport(
        index=index,
        address=address,
        status=raw.get("status", "harness-error"),
        ok=all(c.passed for c in found),
        trained=bool(trained),
        replicas=min(replicas) if replicas else None,
        steps=checks.steps_trained(raw),
        losses=tuple(v for _, losses, _ in trained for v in losses),
        weights=tuple(w for _, _, w in trained),
        global_batch=batches[0] if batches else None,
        writes=checks.write_records(raw),
        failures=tuple(c.message for c in found if not c.passed),
        seconds=float(raw.get("seconds") or 0.0),
        startup_seconds=ready.get("startup_seconds"),
        peak_memory_mb=raw.get("peak_memory_mb"),
        error=raw.get("error"),
        error_site=raw.get("error_site"),
        output=raw.get("output", ""),
    )


def _shown(path: str, script_dir: str) -> str:
    try:
        relative = os.path.relpath(path, script_dir)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
