"""Rich renderables and one-line summaries of smoke reports (nothing here prints)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from autofix.exitcodes import HARNESS as EXIT_HARNESS
from autofix.smoke.checks import run_replicas
from autofix.smoke.report import FitRecord, SmokeReport


def _losses(losses: Iterable[float]) -> str:
    values = list(losses)
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4g}"
    return f"{values[0]:.4g} -> {values[-1]:.4g}"


def _args(fit: FitRecord) -> str:
    if fit.method != "fit":
        return f"capped at {fit.capped_args.get('calls')} calls"
    user = ", ".join(f"{k}={v}" for k, v in fit.user_args.items() if v is not None)
    capped = ", ".join(f"{k}={v}" for k, v in fit.capped_args.items() if v is not None)
    return f"{user or '(defaults)'} -> {capped}"


def _strategy(name: str) -> str:
    return "default (none)" if name.startswith("_Default") else (name or "-")


def _yes(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def report_view(report: SmokeReport, shown_path: str) -> Group:
    parts = []
    head = Text(f"autofix smoke: {shown_path}", style="bold")
    if report.args:
        head.append(" " + " ".join(report.args))
    setup = [report.provided or f"{report.replicas} replicas", f"cap {report.steps} steps"]
    if report.tensorflow:
        setup.append(f"TensorFlow {report.tensorflow}")
    if report.legacy_keras:
        setup.append("Keras 2 (tf-keras)")
    head.append(f"  ({', '.join(setup)})", style="dim")
    parts.append(head)
    if report.fits:
        table = Table(title="fit", title_justify="left", expand=False)
        for column in ("where", "strategy", "replicas", "mirrored", "global batch", "script args -> capped", "steps", "loss"):
            table.add_column(column)
        for fit in report.fits:
            mirrored = "all" if fit.all_mirrored else f"{fit.unmirrored_count} of {fit.variables} not"
            table.add_row(
                f"{fit.site}" + ("" if fit.method == "fit" else f" ({fit.method})"),
                _strategy(fit.strategy),
                str(fit.replicas),
                mirrored,
                "-" if fit.global_batch is None else str(fit.global_batch),
                _args(fit),
                str(fit.steps),
                _losses(fit.losses),
            )
        parts.append(table)
    if report.runs:
        table = Table(title="strategy.run", title_justify="left", expand=False)
        for column in ("where", "given", "tf.function", "replicas", "steps", "applies gradients", "loss"):
            table.add_column(column)
        workers = report.workers.count if report.workers is not None else 1
        for run in report.runs:
            # A count, as the fit table has it: the ids a worker sees are only its own replicas'.
            replicas = str(run_replicas(run, report.replicas, workers)) + ("" if run.replicas_observed else " (not seen)")
            table.add_row(
                run.site, f"{run.given} {run.name}", _yes(run.in_tf_function), replicas, str(run.steps), _yes(run.applies_gradients), _losses(run.losses)
            )
        parts.append(table)
    if report.loops:
        table = Table(title="custom loop (no strategy.run)", title_justify="left", expand=False)
        for column in ("where", "step", "strategy", "replicas", "optimizers", "batch", "steps", "loss"):
            table.add_column(column)
        for loop in report.loops:
            table.add_row(
                loop.site,
                f"{loop.name}" + (" (tf.function)" if loop.in_tf_function else " (eager)"),
                _strategy(loop.strategy),
                str(loop.replicas),
                ", ".join(loop.optimizers) or "-",
                "-" if loop.global_batch is None else str(loop.global_batch),
                str(loop.steps),
                _losses(loop.losses),
            )
        parts.append(table)
    if report.workers is not None:
        parts.append(_workers_table(report))
    if report.compare is not None:
        parts.append(_compare_table(report.compare))
    checks = Table(title="checks", title_justify="left", show_header=False, expand=False)
    checks.add_column("")
    checks.add_column("")
    for check in report.checks:
        checks.add_row(Text("pass", style="green") if check.passed else Text("FAIL", style="bold red"), check.message)
    parts.append(checks)
    foot = f"{report.seconds:.1f} s"
    if report.startup_seconds is not None:
        foot += f" (+ {report.startup_seconds:.1f} s TensorFlow start-up)"
    if report.peak_memory_mb is not None:
        foot += f", peak memory {report.peak_memory_mb:.0f} MB"
    if report.compare is not None:
        word = {0: "PROVEN", 1: "FAILED"}.get(report.exit_code, "NO VERDICT")
        verdict = Text(word, style="bold green" if report.exit_code == 0 else "bold red")
    elif report.refused is not None:
        verdict = Text("NOT RUN", style="bold red")
    else:
        verdict = Text("PASSED" if report.ok else ("HARNESS FAILED" if report.exit_code == EXIT_HARNESS else "FAILED"), style="bold green" if report.ok else "bold red")
    parts.append(Text.assemble(verdict, "  ", (foot, "dim")))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


COMPARE_STYLES = {"equivalent": "bold green", "different": "bold red", "migrated-fails": "bold red"}


def _compare_table(compare) -> Group:
    title = f"compared with {compare.original}" + (f", {compare.steps} step{'s' if compare.steps != 1 else ''}" if compare.steps else "")
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("run", "replicas", "batch", "how", "status", "steps"):
        table.add_column(column)
    pairs = {p.replicas: p for p in compare.pairs}
    for run in compare.runs:
        scaled = f" ({run.batch_scale} x)" if run.batch_scale > 1 else ""
        pair = pairs.get(run.replicas) if run.role == "migrated" else None
        update = "-" if pair is None else {"same": "same", "different": "DIFFERENT"}.get(pair.status, "not compared")
        if pair is not None and pair.max_relative is not None and pair.status == "same":
            update += f" (within {pair.max_relative:.1g})"
        status = run.status + ("" if run.ok else ", failed")
        how = run.mode
        if run.role == "migrated" and run.transplanted and run.transplanted.endswith("set to the original's"):
            how += f"; initial values: {run.transplanted}"
        table.add_row(run.role, str(run.replicas), ("-" if run.global_batch is None else str(run.global_batch)) + scaled, how, status, update)
    verdict = Text.assemble(("compare: ", "bold"), (compare.status.upper(), COMPARE_STYLES.get(compare.status, "bold yellow")), "  ", compare.message)
    return Group(table, verdict)


def _workers_table(report: SmokeReport) -> Table:
    section = report.workers
    assert section is not None
    title = f"workers: {section.trained} of {section.count} trained"
    if section.agree is not None:
        title += ", in agreement" if section.agree else ", NOT in agreement"
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("worker", "address", "status", "replicas", "global batch", "steps", "loss", "weights", "wrote"):
        table.add_column(column)
    for worker in section.each:
        wrote = sorted({_shown(w.path, report.script) for w in worker.writes})
        table.add_row(
            f"{worker.index}" + (" (chief)" if worker.chief else ""),
            worker.address,
            worker.status,
            "-" if worker.replicas is None else str(worker.replicas),
            "-" if worker.global_batch is None else str(worker.global_batch),
            str(worker.steps),
            _losses(worker.losses),
            ", ".join(w or "?" for w in worker.weights) or "-",
            ", ".join(wrote[:4]) + (f" (+{len(wrote) - 4})" if len(wrote) > 4 else "") or "-",
        )
    return table


def _shown(path: str, script: str) -> str:
    folder = os.path.dirname(os.path.abspath(script))
    try:
        relative = os.path.relpath(path, folder)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def summary(report: SmokeReport) -> str:
    """One line: "2 replicas, all variables mirrored, loss 1.38 -> 1.21" or what went wrong."""
    if report.harness_error:
        return f"harness failed: {report.harness_error}"
    if report.refused:
        return f"cannot be run as a script: {report.refused}"
    failed = [c for c in report.checks if not c.passed]
    if report.status in ("crashed", "exited", "timeout", "died", "stopped"):
        return failed[0].message if failed else report.status
    if report.workers is not None and failed:
        return failed[0].message
    losses = [v for f in report.fits for v in f.losses] + [v for r in report.runs for v in r.losses] + [v for lp in report.loops for v in lp.losses]
    loss = f", loss {losses[0]:.2f} -> {losses[-1]:.2f}" if len(losses) > 1 else ""
    trained = [f for f in report.fits if f.steps]
    if trained:
        low = min(trained, key=lambda f: f.replicas)
        if low.replicas < report.replicas:
            return f"trained on {low.replicas} replica{'s' if low.replicas != 1 else ''}" + (f" ({low.cause})" if low.cause else "")
        mirrored = "all variables mirrored" if all(f.all_mirrored for f in trained) else "some variables not mirrored"
        return f"{_on_workers(report)}{low.replicas} replicas, {mirrored}{loss}"
    runs = [r for r in report.runs if r.steps and r.applies_gradients]
    if runs:
        # A worker of a multi-worker run sees only its own replicas run.
        workers = report.workers.count if report.workers is not None else 1
        seen = min(run_replicas(r, report.replicas, workers) for r in runs)
        return f"{_on_workers(report)}custom loop on {seen} replica{'s' if seen != 1 else ''}, {sum(r.steps for r in runs)} steps{loss}"
    loops = [loop for loop in report.loops if loop.steps]
    if loops:
        low = min(loop.replicas for loop in loops)
        steps = sum(loop.steps for loop in loops)
        return f"{_on_workers(report)}custom loop on {low} replica{'s' if low != 1 else ''}, {steps} steps{loss}"
    return failed[0].message if failed else "no training happened"


def _on_workers(report: SmokeReport) -> str:
    section = report.workers
    if section is None:
        return ""
    agree = ", in agreement" if section.agree else ""
    return f"{section.trained} of {section.count} workers trained{agree}: "
