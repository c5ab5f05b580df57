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

# Lines of the script's output shown when it crashed, died or the harness failed.
OUTPUT_LINES = 15
PIPED_WIDTH = 160


@click.command("smoke", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--replicas", type=click.IntRange(min=1), default=DEFAULT_REPLICAS, show_default=True, help="Replicas to train on.")
@click.option("--steps", type=click.IntRange(min=1), default=DEFAULT_STEPS, show_default=True, help="Steps per fit (one epoch) and per custom loop.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT, show_default=True, help="Seconds the script may run (TensorFlow's start-up not counted).")
@click.option("--json", "json_file", type=click.Path(dir_okay=False), default=None, help="Also write the report as JSON to this file.")
@click.option("--offline/--online", default=None, help="Serve synthetic keras.datasets (default: offline when they cannot be downloaded).")
@click.option("--legacy-keras", is_flag=True, help="Run under Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1).")
@click.option("--show-output", is_flag=True, help="Print everything the script printed.")
def smoke(script, args, replicas, steps, timeout, json_file, offline, legacy_keras, show_output) -> None:
    """Train SCRIPT for a few steps on N replicas and check that training was distributed.

    Arguments after `--` are passed to the script. The script runs in its own folder, for real:
    it may write files there.
    """
    with _die_when_interrupted():
        report = run_smoke(
            script, replicas=replicas, steps=steps, timeout=timeout, args=args, offline=offline, legacy_keras=legacy_keras
        )
    if json_file:
        with open(json_file, "w", encoding="utf-8") as fh:
            fh.write(report.to_json() + "\n")
    # Piped output is read by tools and logs, not squeezed into 80 columns.
    width = None if sys.stdout.isatty() else PIPED_WIDTH
    Console(soft_wrap=False, highlight=False, width=width).print(report_view(report, display_path(script)))
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if show_output:
        err.print(Text(report.output, style="dim"))
    elif report.status in ("crashed", "died", "harness-error") and report.output.strip():
        err.print(Text(_last_lines(report.output), style="dim"))
    _print_failures(err, display_path(script), report)
    sys.exit(report.exit_code)


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


def smoke_changed(results: Sequence[FileResult], err: Console) -> int:
    """Smoke-test the scripts ``fix`` changed, before and after; the exit code it earns."""
    count = len(before_after.smokeable(results))
    if not count:
        return 0
    err.print(Text(f"Smoke-testing {count} changed script{'s' if count != 1 else ''} before and after the fix...", style="bold"))
    with _die_when_interrupted():
        comparisons = before_after.compare(results)
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
