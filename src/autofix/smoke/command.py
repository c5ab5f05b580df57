"""``autofix smoke`` and the ``--smoke`` part of ``autofix fix``: the terminal side.

Exit codes: 0 when training happened and every check passed; 1 when a check failed (one line
per failed check on standard error); 2 when the harness itself failed (or a bad option).
Stopped by SIGTERM or SIGHUP, it ends every process of the run, removes its temporary folder,
then dies by that signal (SIGINT: "Aborted!", as click has it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autofix.diffs import display_path
from autofix.results import FileResult
from autofix.smoke import before_after
from autofix.smoke.harness import (
    DEFAULT_REPLICAS,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT,
    run_smoke,
)
from autofix.smoke.process import Interrupted
from autofix.smoke.render import report_view, summary
from autofix.smoke.report import SmokeReport

# --compare compares this many steps (weights, optimizer state, what the script reports).
COMPARE_STEPS = 3
# Lines of the script's output shown when it crashed, died or the harness failed.
OUTPUT_LINES = 15
PIPED_WIDTH = 160


@click.command("smoke", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--replicas", type=click.IntRange(min=1), default=None, help=f"Replicas to train on, per worker  [default: {DEFAULT_REPLICAS}; 1 with --workers]")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Run the script as N worker processes of one MultiWorkerMirroredStrategy cluster.")
@click.option("--steps", type=click.IntRange(min=1), default=None, help=f"Steps per fit (one epoch) and per custom loop  [default: {DEFAULT_STEPS}; {COMPARE_STEPS} with --compare]")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT, show_default=True, help="Seconds the script may run (TensorFlow's start-up not counted).")
@click.option("--json", "json_file", type=click.Path(dir_okay=False), default=None, help="Also write the report as JSON to this file.")
@click.option("--offline/--online", default=None, help="Serve synthetic keras.datasets (default: offline when they cannot be downloaded).")
@click.option("--legacy-keras", is_flag=True, help="Run under Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1).")
@click.option("--show-output", is_flag=True, help="Print everything the script printed.")
@click.option(
    "--compare",
    "original",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="SCRIPT is a migration of ORIGINAL (a single-device script): prove it trains as the original does, data-parallel: on N replicas, the same steps as the original on each replica's share of the global batch (gradients averaged); on 1 replica, the same as the original.",
)
def smoke(script, args, replicas, workers, steps, timeout, json_file, offline, legacy_keras, show_output, original) -> None:
    """Train SCRIPT (a .py script or a .ipynb notebook) for a few steps on N replicas and check
    that training was distributed.

    Arguments after `--` are passed to the script (and, with --compare, to ORIGINAL). The script
    runs in its own folder, for real: it may write files there. With --workers N it runs as N
    worker processes on this machine (TF_CONFIG on loopback ports, worker 0 the chief), each
    with --replicas replicas.
    """
    if original is not None and workers > 1:
        raise click.UsageError("--compare runs on one machine: it cannot be combined with --workers")
    with _die_when_interrupted():
        if original is not None:
            from autofix.smoke.compare import run_compare

            report = run_compare(
                script,
                original,
                replicas=replicas or DEFAULT_REPLICAS,
                steps=steps or COMPARE_STEPS,
                timeout=timeout,
                args=args,
                offline=offline,
                legacy_keras=legacy_keras,
            )
        else:
            report = run_smoke(
                script,
                replicas=default_replicas(replicas, workers),
                steps=steps or DEFAULT_STEPS,
                timeout=timeout,
                args=args,
                offline=offline,
                legacy_keras=legacy_keras,
                workers=workers,
            )
    if json_file:
        with open(json_file, "w", encoding="utf-8") as fh:
            fh.write(report.to_json() + "\n")
    # Piped output is read by tools and logs, not squeezed into 80 columns.
    width = None if sys.stdout.isatty() else PIPED_WIDTH
    Console(soft_wrap=False, highlight=False, width=width).print(report_view(report, display_path(script)))
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    _print_output(err, report, show_output)
    _print_failures(err, display_path(script), report)
    sys.exit(report.exit_code)


def default_replicas(replicas: int | None, workers: int) -> int:
    """Replicas per worker: as asked, else 2 on one machine and 1 per worker (one CPU each, as
    TensorFlow gives a worker without GPUs) with several."""
    if replicas is not None:
        return replicas
    return DEFAULT_REPLICAS if workers == 1 else 1


FAILED_STATUSES = ("crashed", "died", "harness-error", "timeout", "stopped")


def _print_output(err: Console, report: SmokeReport, everything: bool) -> None:
    """The script's output: all of it when asked, else the end of it where it failed (each
    failed worker's own, in a multi-worker run)."""
    if report.compare is not None:
        shown: set[str] = set()
        for run in report.compare.runs:
            # The first failed run of each script says it; the others mostly repeat it.
            if run.output and (everything or (not run.ok and run.role not in shown)):
                shown.add(run.role)
                err.print(Text(f"--- {run.role} on {run.replicas} replica{'s' if run.replicas != 1 else ''}, batch x{run.batch_scale}, {run.mode} ({run.status}) ---", style="bold"))
                err.print(Text(run.output if everything else _last_lines(run.output), style="dim"))
        return
    if report.workers is None:
        if everything:
            err.print(Text(report.output, style="dim"))
        elif report.status in FAILED_STATUSES and report.output.strip():
            err.print(Text(_last_lines(report.output), style="dim"))
        return
    for worker in report.workers.each:
        if everything or (worker.status in FAILED_STATUSES and worker.status != "stopped" and worker.output.strip()):
            err.print(Text(f"--- worker {worker.index} ({worker.status}) ---", style="bold"))
            err.print(Text(worker.output if everything else _last_lines(worker.output), style="dim"))


@contextlib.contextmanager
def _die_when_interrupted() -> Iterator[None]:
    """Once the harness has cleaned up after SIGTERM / SIGHUP, die by that signal, so that
    whoever sent it sees the usual status (128 + signal number)."""
    try:
        yield
    except Interrupted as stop:
        Console(stderr=True, highlight=False).print(Text(f"Stopped by {stop.name}: every process of the smoke test ended.", style="red"))
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(stop.signum, signal.SIG_DFL)
        os.kill(os.getpid(), stop.signum)
        raise SystemExit(128 + stop.signum)  # where the signal does not end the process at once


def _last_lines(text: str, count: int = OUTPUT_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-count:])


def _print_failures(err: Console, shown: str, report: SmokeReport, prefix: str = "") -> None:
    for message in report.failures:
        err.print(Text(f"{shown}: {prefix}{message}", style="red"))
    if report.compare is not None and not report.compare.ok:
        err.print(Text(f"{shown}: compare: {report.compare.status}: {report.compare.message}", style="red"))


def smoke_changed(results: Sequence[FileResult], err: Console, workers: int = 1) -> int:
    """Smoke-test the scripts ``fix`` changed, before and after (as ``workers`` worker
    processes each); the exit code it earns."""
    count = len(before_after.smokeable(results))
    if not count:
        return 0
    err.print(Text(f"Smoke-testing {count} changed script{'s' if count != 1 else ''} before and after the fix...", style="bold"))
    with _die_when_interrupted():
        comparisons = before_after.compare(results, replicas=default_replicas(None, workers), workers=workers)
    table = Table(title="autofix fix --smoke", title_justify="left")
    table.add_column("script")
    table.add_column("before")
    table.add_column("after")
    table.add_column("")
    for comparison in comparisons:
        after = comparison.after
        verdict = Text("pass", style="green") if after.ok else Text("FAIL", style="bold red")
        table.add_row(display_path(comparison.path), summary(comparison.before), summary(after), verdict)
    err.print(table)
    for comparison in comparisons:
        shown = display_path(comparison.path)
        err.print(Text(f"{shown}: before: {summary(comparison.before)} / after: {summary(comparison.after)}"))
        _print_failures(err, shown, comparison.after, prefix="after the fix: ")
    return before_after.exit_code(comparisons)


def smoke_migrations(results: Sequence[FileResult], err: Console, written: bool) -> int:
    """Prove each migration ``migrate`` wrote (or showed) beside its original; the exit code
    it earns."""
    from autofix.smoke import migrations

    count = len(migrations.provable(results))
    if not count:
        return 0
    err.print(Text(f"Proving {count} migration{'s' if count != 1 else ''} against the original{'s' if count != 1 else ''}...", style="bold"))
    with _die_when_interrupted():
        reports = migrations.prove(results, written=written)
    table = Table(title="autofix migrate --smoke", title_justify="left")
    table.add_column("script")
    table.add_column("compare")
    table.add_column("")
    for report in reports:
        status = report.compare.status if report.compare is not None else "harness-error"
        wrong = status in migrations.WRONG
        style = "bold red" if wrong else "green" if status == "equivalent" else "yellow"
        table.add_row(display_path(report.script), Text(status, style=style), "FAIL" if wrong else "")
    err.print(table)
    for report in reports:
        shown = display_path(report.script)
        if report.compare is not None:
            style = "red" if report.compare.status in migrations.WRONG else "dim"
            err.print(Text(f"{shown}: {report.compare.status}: {report.compare.message}", style=style))
    return migrations.exit_code(reports)
