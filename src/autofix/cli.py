"""The command line: its commands and options, what each prints, and its exit codes.

The run itself (what was asked, the files' results, the counts) is :mod:`autofix.run`; where
text goes, and how it is styled, is :mod:`autofix.terminal`; ``fix --interactive`` asks its
questions in :mod:`autofix.review`; what ``rules`` and ``explain`` say is
:mod:`autofix.describe`. Only these modules print.

Exit codes (the same for every command; see README "Exit codes"):
  0  nothing found (check), nothing would change (diff), fixes written (fix), smoke test passed
  1  findings (check), changes to show (diff), smoke test failed
  2  an error: a file that could not be read or parsed, a bad option or [tool.autofix] table,
     a report that could not be written (--output, or a closed standard output),
     a harness failure
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import replace
from typing import NoReturn

import click

from autofix import __version__, cache
from autofix.diffs import display_path, unified_diff
from autofix.discovery import DEFAULT_INCLUDE
from autofix.exitcodes import ERROR as EXIT_ERROR
from autofix.exitcodes import FINDINGS as EXIT_FINDINGS
from autofix.exitcodes import OK as EXIT_OK
from autofix.output import FORMATS
from autofix.options import STRATEGIES
from autofix.output.formats import finding_note, location
from autofix.results import FileResult
from autofix.run import Run, RunProblem
from autofix.sourcefile import SourceError, encode
from autofix.terminal import err, out, print_diff, print_error, print_refused, watch

FORMATS_WITH_FIXES = frozenset({"json", "sarif", "suggestions"})


class ConfigProblem(click.ClickException):
    """A [tool.autofix] table that cannot be used: exit 2 with the message alone (no usage)."""

    exit_code = EXIT_ERROR


def _common(func):
    options = [
        click.option("--select", metavar="CODES", help="Only these rules (comma-separated codes or prefixes)."),
        click.option("--ignore", metavar="CODES", help="Skip these rules (comma-separated codes or prefixes)."),
        click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes that may change results (TFD005; TFD002 on a batch not said to be per replica)."),
        click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching this gitignore-style glob (repeatable)."),
        click.option("--include", multiple=True, metavar="GLOB", help=f"File names to pick up in directories (default: {', '.join(DEFAULT_INCLUDE)})."),
        click.option("--no-gitignore", is_flag=True, help="Do not honour .gitignore files."),
        click.option("--force-exclude", is_flag=True, default=None, help="Apply excludes to files named on the command line too (for pre-commit)."),
        click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Processes to use (default: all cores)."),
        click.option("--stdin-filename", metavar="PATH", help="Name to report for code read from standard input."),
        click.option("--config", "config_file", metavar="FILE", type=click.Path(dir_okay=False), help="Read [tool.autofix] from this pyproject.toml instead of looking for one."),
        click.option("--isolated", is_flag=True, help="Ignore [tool.autofix] in pyproject.toml files."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache (also AUTOFIX_NO_CACHE=1)."),
        click.option("--cache-dir", metavar="DIR", type=click.Path(file_okay=False), help=f"Result cache folder (default: {cache.DEFAULT_NAME} at the project root, or AUTOFIX_CACHE_DIR)."),
        click.argument("paths", nargs=-1, type=click.Path()),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _run(kw: dict) -> Run:
    """The run the shared options ask for, or the usage error / configuration error (exit 2)."""
    try:
        run = Run.from_args(kw)
    except RunProblem as exc:
        if exc.usage:
            raise click.UsageError(str(exc)) from None
        raise ConfigProblem(str(exc)) from None
    for warning in run.cache_warnings:
        err.print(f"warning: {warning}", style="yellow")
    return run


def _print_unfixed(result: FileResult, style: str) -> None:
    """What diff and fix leave as it is, with the reason, on standard error."""
    for finding in result.findings:
        if not finding.fixable and not finding.suppressed:
            note = finding_note(finding) or " (not fixed)"
            err.print(f"{location(result, finding)}: {finding.code} {finding.message}{note}", style=style)


def _print_problems(run: Run, result: FileResult, refused: bool = True, what: str = "fix") -> None:
    """An error, a refused fix, or why a file named on the command line was skipped."""
    if result.error:
        print_error(result)
    if result.refused and refused:
        print_refused(result, what)
    if result.skipped and run.named(result):
        err.print(f"{display_path(result.path)}: skipped: {result.skipped}", style="dim")


def _finish(run: Run, verb: str, wrote: bool, show_fixes: bool) -> None:
    err.print(run.summary(verb, wrote), style="bold")
    if show_fixes:
        err.print(run.fixes_listed(wrote))


class _Commands(click.Group):
    """The commands; `smoke` (the harness, its modules) is loaded only when it is used, so
    that `check` on a warm cache starts fast."""

    LAZY = {"smoke": ("autofix.smoke.command", "smoke")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY and name not in self.commands:
            module, attribute = self.LAZY[name]
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autofix")
def main() -> None:
    """Find and fix tf.distribute strategy misuse in Keras training scripts."""


@main.command()
@_common
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="text", show_default=True, help="Report format.")
@click.option("-o", "--output", metavar="FILE", type=click.Path(dir_okay=False), default=None, help="Write the report to this file.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--unused-suppressions", is_flag=True, help="Also report `# autofix: ignore` comments that suppress nothing (TFD100).")
@click.option("--statistics", is_flag=True, help="Print the number of findings of each rule (and how many are fixable) instead of the findings.")
@click.option("--show-fixes", is_flag=True, help="List, after the summary, what the fixes would fix in each file.")
@click.option("--add-noqa", is_flag=True, help="Write an `# autofix: ignore[CODE]` comment on the line of every finding (so that only new ones fail).")
def check(fmt: str, output, exit_zero: bool, unused_suppressions: bool, statistics: bool, show_fixes: bool, add_noqa: bool, **kw) -> None:
    """Report findings. Exit 0 when clean, 1 with findings, 2 when a file had an error."""
    run = _run(kw)
    if add_noqa:
        _add_noqa(run)
    if statistics and fmt not in ("text", "json"):
        raise click.UsageError("--statistics prints text or JSON (--format text or json)")
    # Formats that show no fix only need to know that one exists: skip building it.
    run.options = replace(
        run.options,
        build_fixes=fmt in FORMATS_WITH_FIXES and not statistics,
        unused_suppressions=unused_suppressions,
    )
    if statistics:
        from autofix.output.statistics import Statistics

        formatter = Statistics(fmt)
    else:
        formatter = FORMATS[fmt](unsafe_fixes=run.options.unsafe_fixes)
    report = _Report(output)
    for result in run.results(watch=watch):
        report.write(formatter.result(result))
        _print_problems(run, result)
    report.write(formatter.finish())
    report.close()
    _finish(run, "Checked", False, show_fixes)
    if run.counts["errors"]:
        sys.exit(EXIT_ERROR)
    if run.counts["findings"] and not exit_zero:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


def _add_noqa(run: Run) -> NoReturn:
    """`check --add-noqa`: write the comments, say how many were written, exit 0 (1 when a
    finding is left unsuppressed: each is named, with why; 2 on an error)."""
    if run.from_stdin:
        raise click.UsageError("--add-noqa writes files: it does not read standard input")
    run.options = replace(run.options, build_fixes=False, unused_suppressions=False, add_noqa=True)
    added = files = unplaced = 0
    for result in run.results(write=True, watch=watch):
        # (What could not be written is said finding by finding.)
        _print_problems(run, result, refused=False)
        # A finding counts as suppressed once its comment is in the file: one planned in a
        # file that could not be written (or rebuilt) is not.
        unwritten = None if result.written else result.refused or result.error
        for finding in result.findings:
            if finding.suppressed and unwritten is None:
                added += 1
                continue
            unplaced += 1
            why = finding.reason if not finding.suppressed else f"its comment could not be written ({unwritten})"
            err.print(f"warning: {location(result, finding)}: {finding.code} not suppressed: {why}", style="yellow")
        files += result.written
    found = f"{added} finding{'s' if added != 1 else ''}"
    err.print(f"Suppressed {found} with `# autofix: ignore` comments in {files} file{'s' if files != 1 else ''}.", style="bold")
    sys.exit(EXIT_ERROR if run.counts["errors"] else EXIT_FINDINGS if unplaced else EXIT_OK)


class _Report:
    """Where ``check`` writes its report: standard output, or ``--output FILE``. A report that
    cannot be written (standard output closed, a full disk) is an error (exit 2) with one line
    that says why, whatever ``--exit-zero`` says."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.out = None
        if path:
            try:
                self.out = open(path, "w", encoding="utf-8")
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> NoReturn:
        if not self.path:
            out.drop()
        where = display_path(self.path) if self.path else "standard output"
        err.print(f"error: cannot write the report to {where}: {exc.strerror or exc}", style="red")
        sys.exit(EXIT_ERROR)

    def write(self, text: str) -> None:
        if not text:
            return
        try:
            if self.out is not None:
                self.out.write(text)
                self.out.flush()
            elif out.file is None:
                raise OSError("standard output is closed")
            else:
                out.file.write(text)
                out.file.flush()
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self.out is not None:
            try:
                self.out.close()
            except OSError as exc:
                self._fail(exc)


def _show_diff(diff: bytes, encoding: str = "utf-8") -> None:
    try:
        print_diff(diff, encoding)
    except OSError as exc:
        out.drop()
        err.print(f"error: cannot write the diff to standard output: {exc.strerror or exc}", style="red")
        sys.exit(EXIT_ERROR)


@main.command()
@_common
@click.option("--cells", is_flag=True, help="Show a notebook's changes cell by cell, headed `path:cell N` (for reading: git apply does not take it).")
@click.option("--show-fixes", is_flag=True, help="List, after the summary, what the fixes fix in each file.")
def diff(cells: bool, show_fixes: bool, **kw) -> None:
    """Print the fixes as a unified diff; write nothing. Exit 1 when something would change.

    The diff applies with `git apply` or `patch -p1` (a notebook's as a diff of its .ipynb
    file), unless --cells is given.
    """
    run = _run(kw)
    for result in run.results(watch=watch):
        if result.changed and result.notebook and cells:
            from autofix import notebooks

            shown = notebooks.cell_diffs(result.old_text or "", result.new_text or "", display_path(result.path))
            _show_diff(shown.encode("utf-8"))
        elif result.changed:
            try:
                patch = unified_diff(result.old_text or "", result.new_text or "", result.path, result.encoding, result.bom)
            except SourceError as exc:
                result = replace(result, error=str(exc))
                run.counts["errors"] += 1
            else:
                _show_diff(patch, result.encoding)
        _print_problems(run, result)
        _print_unfixed(result, "dim")
    _finish(run, "Checked", False, show_fixes)
    if run.counts["errors"]:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if run.counts["changed"] else EXIT_OK)


@main.command()
@_common
@click.option("-i", "--interactive", is_flag=True, help="Show each fix and ask whether to apply it (answers from the terminal, or standard input).")
@click.option("--show-fixes", is_flag=True, help="List, after the summary, what was fixed in each file.")
@click.option("--smoke", is_flag=True, help="Then smoke-test each changed script before and after the fix (runs it; needs TensorFlow).")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="With --smoke: run each script as N worker processes.")
def fix(interactive: bool = False, show_fixes: bool = False, smoke: bool = False, workers: int = 1, **kw) -> None:
    """Write the fixes into the files. Exit 0, or 2 when a file had an error.

    With --smoke, exit 1 when a fixed script fails its smoke test (2 when the harness fails).
    """
    run = _run(kw)
    if run.cache is not None:
        # What fix writes, it computes: fixed text is never taken from the cache.
        run.cache = replace(run.cache, fixes=False)
    if smoke and run.from_stdin:
        raise click.UsageError("--smoke needs files to run, not standard input")
    if interactive and run.from_stdin:
        raise click.UsageError("--interactive reads its answers from standard input: give files, not '-'")
    written: list[FileResult] = []
    echoed = False
    if interactive:
        from autofix import review

        results = review.fix_interactively(run)
    else:
        results = run.results(write=True, watch=watch)
    for result in results:
        if smoke and result.written:
            written.append(result)
        if run.from_stdin:
            _echo_fixed(run, result)
            echoed = True
        elif result.written and not interactive:
            fixed = sum(1 for f in result.findings if f.fixable)
            err.print(f"fixed {display_path(result.path)} ({fixed} finding{'s' if fixed != 1 else ''})")
        _print_problems(run, result)
        _print_unfixed(result, "yellow")
    if run.from_stdin and not echoed:
        # Excluded by name: passed through untouched.
        _write_stdout(run.stdin_bytes)
    _finish(run, "Checked", True, show_fixes)
    code = EXIT_ERROR if run.counts["errors"] else EXIT_OK
    if smoke:
        from autofix.smoke.command import smoke_changed

        code = max(code, smoke_changed(written, err.rich(), workers=workers))
    sys.exit(code)


@main.command()
@_common
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default=STRATEGIES[0],
    show_default=True,
    help="The strategy to move to: mirrored (MirroredStrategy: the GPUs of one machine) or multiworker (MultiWorkerMirroredStrategy: several machines; custom loops, as Keras 3 fit fails there).",
)
@click.option("--write", is_flag=True, help="Write the migrations into the files (atomically) instead of showing them.")
@click.option("-i", "--interactive", is_flag=True, help="Show each migration and ask whether to write it (answers from the terminal, or standard input).")
@click.option("--smoke", is_flag=True, help="Prove each migration shown or written: train it beside its original (autofix smoke --compare; needs TensorFlow).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["diff", *sorted(FORMATS)]),
    default="diff",
    show_default=True,
    help="diff: the migrations as a unified diff; any other: each file's findings in that report format.",
)
@click.option("-o", "--output", metavar="FILE", type=click.Path(dir_okay=False), default=None, help="Write the report (not the diff) to this file.")
@click.option("--cells", is_flag=True, help="Show a notebook's changes cell by cell (for reading: git apply does not take it).")
@click.option("--show-fixes", is_flag=True, help="List, after the summary, what the migrations change in each file.")
def migrate(strategy: str, write: bool, interactive: bool, smoke: bool, fmt: str, output, cells: bool, show_fixes: bool, **kw) -> None:
    """Move training that runs on one device to a tf.distribute strategy.

    Each script or notebook under PATHS that trains with no strategy gets one: made once where
    it trains, with its model, optimizer and compile in strategy.scope(), its batch kept per
    replica and training fed the global batch, its custom steps run per replica with their
    loss averaged over the global batch. A migration is shown as a diff or written with
    --write (exit 1 when one is shown or one is declined with its reason, 0 when there is
    nothing to migrate or everything was written, 2 on an error); it is only made when
    the result parses, a second run changes nothing and `check` finds nothing in it, else the
    file is left alone with why. Files that already use tf.distribute are fixed as `fix` does.
    """
    run = _run(kw)
    run.options = replace(run.options, migrate=strategy)
    writing = write or interactive
    if writing and run.cache is not None:
        run.cache = replace(run.cache, fixes=False)
    if run.from_stdin and (writing or smoke):
        raise click.UsageError("--write, --interactive and --smoke need files, not standard input")
    if fmt != "diff" and (cells or interactive):
        raise click.UsageError("--cells and --interactive show diffs: they cannot be combined with --format")
    report = formatter = None
    if fmt != "diff":
        run.options = replace(run.options, build_fixes=True)
        formatter = FORMATS[fmt](unsafe_fixes=run.options.unsafe_fixes)
        report = _Report(output)
    if interactive:
        from autofix import review

        results = review.fix_interactively(run)
    else:
        results = run.results(write=write, watch=watch)
    proven: list[FileResult] = []
    # Other files a fix that spans files edits, whose diff is shown already: (path) -> (edit, by).
    others: dict[str, tuple[tuple[str, str], str]] = {}
    for result in results:
        if formatter is not None and report is not None:
            report.write(formatter.result(result))
        elif result.changed and not writing:
            _show_changes(run, result, cells, others)
        if result.written and not interactive:
            err.print(f"migrated {display_path(result.path)}")
            for path, *_ in result.also:
                err.print(f"migrated {display_path(path)} (with {display_path(result.path)})")
        if smoke and (result.written or (result.changed and not writing)):
            proven.append(result)
        _print_problems(run, result, what="migration")
        _print_unfixed(result, "yellow" if writing else "dim")
    if formatter is not None and report is not None:
        report.write(formatter.finish())
        report.close()
    _finish(run, "Checked", writing, show_fixes)
    # 1: something to read: a migration shown (not written), or one declined with its reason.
    shown = run.counts["changed"] and not writing
    code = EXIT_ERROR if run.counts["errors"] else EXIT_FINDINGS if shown or run.counts["declined"] else EXIT_OK
    if smoke:
        from autofix.smoke.command import smoke_migrations

        code = max(code, smoke_migrations(proven, err.rich(), written=writing))
    sys.exit(code)


def _show_changes(run: Run, result: FileResult, cells: bool, others: dict | None = None) -> None:
    """A changed file's diff (``diff`` and ``migrate``): a unified diff of its own bytes, or a
    notebook's by cell."""
    if result.notebook and cells:
        from autofix import notebooks

        shown = notebooks.cell_diffs(result.old_text or "", result.new_text or "", display_path(result.path))
        _show_diff(shown.encode("utf-8"))
        return
    try:
        patch = unified_diff(result.old_text or "", result.new_text or "", result.path, result.encoding, result.bom)
        # A fix that spans files: one diff, the other files' after the file's own. An edit of
        # another file an earlier fix of the run showed already (two scripts training the same
        # method) is shown once, so that the run's diff applies.
        for path, _digest, old, new in result.also:
            earlier = others.get(path) if others is not None else None
            if earlier is not None and earlier[0] == (old, new):
                err.print(f"note: {display_path(result.path)}: its edit of {display_path(path)} is {display_path(earlier[1])}'s, shown with it", style="dim")
                continue
            if earlier is not None:
                err.print(f"warning: {display_path(result.path)}: it edits {display_path(path)} otherwise than {display_path(earlier[1])}'s fix: migrate them one at a time", style="yellow")
            elif others is not None:
                others[path] = ((old, new), result.path)
            patch += unified_diff(old, new, path, *result.encoding_of(path))
    except SourceError as exc:
        print_error(replace(result, error=str(exc)))
        run.counts["errors"] += 1
    else:
        _show_diff(patch, result.encoding)


def _echo_fixed(run: Run, result: FileResult) -> None:
    """`fix -`: the fixed code in the input's own encoding, else the input byte for byte (also
    when it could not be analysed: a pipeline must not lose the code)."""
    data = run.stdin_bytes
    if result.changed and not result.error:
        try:
            data = encode(result.new_text or "", result.encoding, result.bom)
        except SourceError:
            pass
    _write_stdout(data)


def _write_stdout(data: bytes) -> None:
    if not data:
        return
    try:
        out.write_bytes(data)
    except OSError as exc:
        out.drop()
        err.print(f"error: cannot write the code to standard output: {exc.strerror or exc}", style="red")
        sys.exit(EXIT_ERROR)


@main.command()
def rules() -> None:
    """List the rules."""
    from autofix import describe

    describe.print_rules(out.rich())


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a rule: what it finds, why, and what its fix looks like."""
    from autofix import describe, registry

    try:
        text = describe.explanation(code)
    except registry.UnknownRule:
        raise click.UsageError(f"unknown rule code {code!r}; see `autofix rules`") from None
    out.write(text)


if __name__ == "__main__":  # pragma: no cover
    main()
