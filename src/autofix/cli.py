"""The command line. This is the only module that prints.

Exit codes (the same for every command; see README "Exit codes"):
  0  nothing found (check), nothing would change (diff), fixes written (fix), smoke test passed
  1  findings (check), changes to show (diff), smoke test failed
  2  an error: a file that could not be read or parsed, a bad option or [tool.autofix] table,
     a report that could not be written (--output),
     a harness failure
"""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, NoReturn

import click
from rich.console import Console
from rich.text import Text

from autofix import __version__, cache, config, registry
from autofix.diffs import display_path, line_style, unified_diff
from autofix.discovery import DEFAULT_INCLUDE, Discovery
from autofix.exitcodes import ERROR as EXIT_ERROR
from autofix.exitcodes import FINDINGS as EXIT_FINDINGS
from autofix.exitcodes import OK as EXIT_OK
from autofix.options import Options
from autofix.output import FORMATS
from autofix.output.formats import finding_note, location
from autofix.output.statistics import Statistics
from autofix.results import FileResult
from autofix.runner import Runner
from autofix.sourcefile import SourceError, decode, encode

FORMATS_WITH_FIXES = frozenset({"json", "sarif", "suggestions"})
# Below this many files a progress bar only flickers.
PROGRESS_MIN_FILES = 20

err = Console(stderr=True, highlight=False, soft_wrap=True)


class ConfigProblem(click.ClickException):
    """A [tool.autofix] table that cannot be used: exit 2 with the message alone (no usage)."""

    exit_code = EXIT_ERROR


def _codes(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(part.strip().upper() for part in value.split(",") if part.strip())


def _common(func):
    options = [
        click.option("--select", metavar="CODES", help="Only these rules (comma-separated codes or prefixes)."),
        click.option("--ignore", metavar="CODES", help="Skip these rules (comma-separated codes or prefixes)."),
        click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes that may change results (TFD005)."),
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


@dataclass
class Run:
    """What a command was asked to do, shared by check, diff and fix."""

    paths: tuple[str, ...]
    options: Options
    discovery: Discovery
    jobs: int | None
    stdin_filename: str | None
    counts: Counter = field(default_factory=Counter)
    rules: Counter = field(default_factory=Counter)
    # For --show-fixes: per file shown, the codes of the findings its fix fixes (or fixed).
    fixes: dict[str, Counter] = field(default_factory=dict)
    # `fix` writes files: a file counts as changed once it is written.
    writing: bool = False
    # Standard input as read, for `fix -` to echo when it changes nothing.
    stdin_bytes: bytes = b""
    # The result cache; None with --no-cache (and for standard input).
    cache: cache.ResultCache | None = None

    @classmethod
    def from_args(cls, kw: dict) -> "Run":
        paths = tuple(kw["paths"]) or (".",)
        try:
            settings = config.load(paths, kw["stdin_filename"], kw["config_file"], kw["isolated"])
        except config.ConfigError as exc:
            raise ConfigProblem(str(exc)) from None
        # A command-line option replaces the [tool.autofix] key it corresponds to.
        options = settings.options(
            select=_codes(kw["select"]) or None,
            ignore=_codes(kw["ignore"]) if kw["ignore"] is not None else None,
            unsafe_fixes=kw["unsafe_fixes"],
        )
        results_cache = None
        if paths != ("-",) and not (kw["no_cache"] or cache.disabled_by_environment()):
            results_cache = _open_cache(kw["cache_dir"] or cache.default_directory(settings.root))
        if results_cache is not None:
            # What the rules are, as this autofix recorded it: no need to import them.
            options = replace(options, known_rules=results_cache.known_rules())
        try:
            options.rule_infos()
        except registry.UnknownRule as exc:
            raise click.UsageError(f"unknown rule code {exc.args[0]!r}; see `autofix rules`") from None
        discovery = settings.discovery(
            include=tuple(kw["include"]),
            exclude=tuple(kw["exclude"]),
            respect_gitignore=False if kw["no_gitignore"] else None,
            force_exclude=True if kw["force_exclude"] else None,
        )
        return cls(paths, options, discovery, kw["jobs"], kw["stdin_filename"], cache=results_cache)

    @property
    def from_stdin(self) -> bool:
        return self.paths == ("-",)

    def results(self, write: bool = False) -> Iterable[FileResult]:
        self.writing = write
        if self.from_stdin:
            result = self._stdin()
            if result is not None:
                yield result
            return
        if "-" in self.paths:
            raise click.UsageError("'-' (standard input) cannot be combined with other paths")
        # Files in the order of their paths (as Ruff reports them), whatever the order named.
        files = sorted(self.discovery.files(self.paths), key=_path_order)
        for missing in self.discovery.missing:
            result = FileResult(missing, error="no such file or directory")
            self.count(result)
            yield result
        jobs = min(self.jobs or os.cpu_count() or 1, max(1, len(files)))
        with Runner(self.options, jobs, self.cache if files else None) as runner:
            stream = runner.process(files, write)
            if len(files) >= PROGRESS_MIN_FILES and err.is_terminal:
                yield from self._with_progress(stream, len(files))
            else:
                for result in stream:
                    self.count(result)
                    yield result

    def _with_progress(self, stream: Iterable[FileResult], total: int) -> Iterable[FileResult]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        with progress:
            task = progress.add_task("Analysing", total=total)
            for result in stream:
                self.count(result)
                progress.advance(task)
                yield result

    def _stdin(self) -> FileResult | None:
        """Standard input as one file; None when ``--stdin-filename`` names a path that the
        excludes skip (with ``--force-exclude``, as the same path on the command line would be)."""
        self.stdin_bytes = sys.stdin.buffer.read()
        name = self.stdin_filename or "-"
        if self.stdin_filename and self.discovery.excludes_named(self.stdin_filename):
            return None
        try:
            source = decode(self.stdin_bytes)
        except SourceError as exc:
            result = FileResult(name, error=str(exc))
        else:
            # Per-file ignores apply to the name the code is reported under.
            options = self.options.for_path(self.stdin_filename) if self.stdin_filename else self.options
            from autofix.engine import process_text

            result = replace(process_text(source.text, name, options), encoding=source.encoding, bom=source.bom)
        self.count(result)
        return result

    def named(self, result: FileResult) -> bool:
        """Whether the file was named on the command line (not found in a directory)."""
        return result.path in self.paths or (self.from_stdin and result.path == (self.stdin_filename or "-"))

    def count(self, result: FileResult) -> None:
        self.counts["files"] += 1
        if result.error:
            self.counts["errors"] += 1
        changed = result.written if self.writing and not self.from_stdin else result.changed
        if changed:
            self.counts["changed"] += 1
        fixed = Counter(f.code for f in result.findings if f.fixable and not f.suppressed)
        if fixed and (changed or not self.writing):
            self.fixes[display_path(result.path)] = fixed
        for finding in result.findings:
            if finding.suppressed:
                continue
            if finding.unsafe and not self.options.unsafe_fixes:
                # A suggestion (TFD005): shown, but it does not fail `check`.
                self.counts["suggestions"] += 1
                continue
            self.counts["findings"] += 1
            self.counts["fixable"] += finding.fixable
            self.rules[finding.code] += 1
        if result.refused:
            self.counts["refused"] += 1

    def summary(self, verb: str = "Checked", wrote: bool = False) -> None:
        c = self.counts
        parts = [f"{verb} {c['files']} file{'s' if c['files'] != 1 else ''}"]
        if c["findings"]:
            per_rule = ", ".join(f"{code} {n}" for code, n in sorted(self.rules.items()))
            parts.append(f"{c['findings']} finding{'s' if c['findings'] != 1 else ''} ({per_rule})")
            parts.append(f"{c['fixable']} fixable")
        else:
            parts.append("no findings")
        if c["suggestions"]:
            parts.append(f"{c['suggestions']} suggestion{'s' if c['suggestions'] != 1 else ''} (--unsafe-fixes to apply)")
        if c["changed"]:
            parts.append(f"{c['changed']} file{'s' if c['changed'] != 1 else ''} {'changed' if wrote else 'to change'}")
        if c["refused"]:
            parts.append(f"{c['refused']} fix{'es' if c['refused'] != 1 else ''} refused")
        if c["errors"]:
            parts.append(f"{c['errors']} error{'s' if c['errors'] != 1 else ''}")
        err.print(Text(", ".join(parts) + ".", style="bold"))

    def show_fixes(self, wrote: bool) -> None:
        """--show-fixes: what the fixes fix, file by file (as Ruff lists them)."""
        total = sum(sum(c.values()) for c in self.fixes.values())
        if not total:
            err.print("No findings fixed." if wrote else "No fixable findings.")
            return
        names = {rule.CODE: rule.NAME for rule in self.options.known_rules or registry.infos()}
        lines = [f"{'Fixed' if wrote else 'Would fix'} {total} finding{'s' if total != 1 else ''}:"]
        for path, codes in self.fixes.items():
            lines.append(f"- {path}:")
            lines.extend(f"    {n} × {code} ({names.get(code, '')})" for code, n in sorted(codes.items()))
        err.print(Text("\n".join(lines)))


def _open_cache(directory: str) -> cache.ResultCache | None:
    try:
        return cache.ResultCache.open(directory)
    except cache.CacheUnavailable as exc:
        err.print(Text(f"warning: result cache not used: {exc}", style="yellow"))
        return None


def _path_order(path: str) -> list[str]:
    return os.path.normpath(path).split(os.sep)


def _print_error(result: FileResult) -> None:
    err.print(Text(f"error: {result.describe_error(display_path(result.path))}", style="red"))


def _print_unfixed(result: FileResult, style: str) -> None:
    """What diff and fix leave as it is, with the reason, on standard error."""
    for finding in result.findings:
        if not finding.fixable and not finding.suppressed:
            note = finding_note(finding) or " (not fixed)"
            err.print(Text(f"{location(result, finding)}: {finding.code} {finding.message}{note}", style=style))


def _print_refused(result: FileResult) -> None:
    err.print(Text(f"warning: {display_path(result.path)}: fix not applied: {result.refused}", style="yellow"))


def _print_problems(run: Run, result: FileResult) -> None:
    """An error, a refused fix, or why a file named on the command line was skipped."""
    if result.error:
        _print_error(result)
    if result.refused:
        _print_refused(result)
    if result.skipped and run.named(result):
        err.print(Text(f"{display_path(result.path)}: skipped: {result.skipped}", style="dim"))


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
    run = Run.from_args(kw)
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
    formatter = Statistics(fmt) if statistics else FORMATS[fmt](unsafe_fixes=run.options.unsafe_fixes)
    report = _Report(output)
    for result in run.results():
        report.write(formatter.result(result))
        _print_problems(run, result)
    report.write(formatter.finish())
    report.close()
    run.summary("Checked")
    if show_fixes:
        run.show_fixes(wrote=False)
    if run.counts["errors"]:
        sys.exit(EXIT_ERROR)
    if run.counts["findings"] and not exit_zero:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


def _add_noqa(run: Run) -> NoReturn:
    """`check --add-noqa`: write the comments, say how many, exit 0 (1 when a finding found
    no line to hold one, 2 on an error)."""
    if run.from_stdin:
        raise click.UsageError("--add-noqa writes files: it does not read standard input")
    run.options = replace(run.options, build_fixes=False, unused_suppressions=False, add_noqa=True)
    added = files = unplaced = 0
    for result in run.results(write=True):
        _print_problems(run, result)
        for finding in result.findings:
            if finding.suppressed:
                added += 1
            else:
                unplaced += 1
                err.print(Text(f"warning: {location(result, finding)}: {finding.code} not suppressed: {finding.reason}", style="yellow"))
        files += result.written
    found = f"{added} finding{'s' if added != 1 else ''}"
    err.print(Text(f"Suppressed {found} with `# autofix: ignore` comments in {files} file{'s' if files != 1 else ''}.", style="bold"))
    sys.exit(EXIT_ERROR if run.counts["errors"] else EXIT_FINDINGS if unplaced else EXIT_OK)


class _Report:
    """Where ``check`` writes its report: standard output, or ``--output FILE``. A report that
    cannot be written is an error (exit 2) with one line that says why, whatever
    ``--exit-zero`` says."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        try:
            self.out = open(path, "w", encoding="utf-8") if path else sys.stdout
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> NoReturn:
        where = display_path(self.path) if self.path else "standard output"
        err.print(Text(f"error: cannot write the report to {where}: {exc.strerror or exc}", style="red"))
        sys.exit(EXIT_ERROR)

    def write(self, text: str) -> None:
        if not text:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self.path:
            try:
                self.out.close()
            except OSError as exc:
                self._fail(exc)


def _print_diff(diff: bytes, encoding: str = "utf-8") -> None:
    if not diff:
        return
    if not sys.stdout.isatty():
        # The file's own bytes, for `git apply` and `patch`: rich would expand tabs, could
        # re-wrap lines, and would write them in the terminal's encoding.
        sys.stdout.flush()
        sys.stdout.buffer.write(diff)
        sys.stdout.buffer.flush()
        return
    console = Console(highlight=False, soft_wrap=True)
    for line in diff.decode(encoding, errors="replace").splitlines(keepends=True):
        console.print(Text(line.rstrip("\r\n"), style=line_style(line)))


@main.command()
@_common
@click.option("--cells", is_flag=True, help="Show a notebook's changes cell by cell, headed `path:cell N` (for reading: git apply does not take it).")
@click.option("--show-fixes", is_flag=True, help="List, after the summary, what the fixes fix in each file.")
def diff(cells: bool, show_fixes: bool, **kw) -> None:
    """Print the fixes as a unified diff; write nothing. Exit 1 when something would change.

    The diff applies with `git apply` or `patch -p1` (a notebook's as a diff of its .ipynb
    file), unless --cells is given.
    """
    run = Run.from_args(kw)
    for result in run.results():
        if result.changed and result.notebook and cells:
            from autofix import notebooks

            shown = notebooks.cell_diffs(result.old_text or "", result.new_text or "", display_path(result.path))
            _print_diff(shown.encode("utf-8"))
        elif result.changed:
            try:
                patch = unified_diff(result.old_text or "", result.new_text or "", result.path, result.encoding, result.bom)
            except SourceError as exc:
                result = replace(result, error=str(exc))
                run.counts["errors"] += 1
            else:
                _print_diff(patch, result.encoding)
        _print_problems(run, result)
        _print_unfixed(result, "dim")
    run.summary("Checked")
    if show_fixes:
        run.show_fixes(wrote=False)
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
    run = Run.from_args(kw)
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

        results = review.fix_interactively(run, err)
    else:
        results = run.results(write=True)
    for result in results:
        if smoke and result.written:
            written.append(result)
        if run.from_stdin:
            _echo_fixed(run, result)
            echoed = True
        elif result.written and not interactive:
            fixed = sum(1 for f in result.findings if f.fixable)
            err.print(Text(f"fixed {display_path(result.path)} ({fixed} finding{'s' if fixed != 1 else ''})"))
        _print_problems(run, result)
        _print_unfixed(result, "yellow")
    if run.from_stdin and not echoed:
        # Excluded by name: passed through untouched.
        _write_stdout(run.stdin_bytes)
    run.summary(wrote=True)
    if show_fixes:
        run.show_fixes(wrote=True)
    code = EXIT_ERROR if run.counts["errors"] else EXIT_OK
    if smoke:
        from autofix.smoke.command import smoke_changed

        code = max(code, smoke_changed(written, err, workers=workers))
    sys.exit(code)


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
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@main.command()
def rules() -> None:
    """List the rules."""
    console = Console(highlight=False, soft_wrap=True)
    # Wrapped to the terminal (80 columns when piped), never cut: each rule's line, then its
    # description indented below it. One column is left free: a line that fills the terminal
    # exactly makes some terminals add an empty one.
    width = max(40, min(console.width if console.is_terminal else 80, 100)) - 1
    listed = registry.all_rules()
    name_width = max(len(rule.NAME) for rule in listed)
    indent = " " * 8
    for rule in listed:
        fix = "safe fix" if rule.SAFE else "unsafe fix"
        if rule.OPT_IN:
            fix += ", opt-in"
        head = Text()
        head.append(f"{rule.CODE:<6}", style="bold")
        head.append(f"  {rule.NAME:<{name_width}}  ")
        head.append(fix, style="dim")
        console.print(head)
        for line in textwrap.wrap(rule.DESCRIPTION, width=width - len(indent), break_on_hyphens=False):
            console.print(indent + line)
    notes = (
        "Unsafe fixes are applied only with --unsafe-fixes; an opt-in rule runs only when "
        "--select names its code. `autofix explain CODE` says more about a rule."
    )
    console.print()
    for line in textwrap.wrap(notes, width=width):
        console.print(Text(line, style="dim"))


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a rule: what it finds, why, and what its fix looks like."""
    from autofix.unused_suppressions import UnusedSuppression

    try:
        rule = registry.rule_by_code(code)
    except registry.UnknownRule:
        if code.upper() != UnusedSuppression.CODE:
            raise click.UsageError(f"unknown rule code {code!r}; see `autofix rules`") from None
        rule = UnusedSuppression
    out = sys.stdout
    out.write(f"{rule.CODE} {rule.NAME}{'' if rule.SAFE else ' (unsafe fix: only with --unsafe-fixes)'}\n\n")
    out.write(f"{rule.DESCRIPTION}.\n\n")
    _, body = registry.rule_doc(rule)
    if body:
        out.write(body + "\n\n")
    for title, text in registry.rule_examples(rule):
        out.write(f"{title}:\n\n" + _indent(text) + "\n")


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))


if __name__ == "__main__":  # pragma: no cover
    main()
