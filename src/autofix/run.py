"""One ``check``, ``diff`` or ``fix``: what it was asked, and what it has seen so far.

The command line (:mod:`autofix.cli`) makes a :class:`Run` from its options, takes its results
one file at a time and prints them; ``fix --interactive`` (:mod:`autofix.review`) reviews the
same results. Nothing here prints: the counts become the summary line and the ``--show-fixes``
list as text, which the command line writes.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator

from autofix import cache, registry
from autofix.diffs import display_path
from autofix.options import Options
from autofix.results import FileResult, merged_elsewhere
from autofix.sourcefile import SourceError, decode

if TYPE_CHECKING:
    from autofix.discovery import Discovery

# Wraps the stream of results once the number of files is known (the command line's progress
# bar); it must yield every result it is given, in order.
Watch = Callable[[Iterator[FileResult], int], Iterator[FileResult]]


class RunProblem(Exception):
    """The run cannot start as asked; the message is for the user. ``usage`` says whether it
    is a bad option (shown with the command's usage) rather than a bad configuration."""

    def __init__(self, message: str, usage: bool = True) -> None:
        super().__init__(message)
        self.usage = usage


def codes(value: str | None) -> tuple[str, ...]:
    """``--select`` / ``--ignore``: comma-separated codes."""
    if not value:
        return ()
    return tuple(part.strip().upper() for part in value.split(",") if part.strip())


@dataclass
class Run:
    """What a command was asked to do, shared by check, diff and fix, and its counts."""

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
    # Warnings about the result cache: why it is not used although it was asked for, or
    # markers an earlier autofix left where they hide the project.
    cache_warnings: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, kw: dict) -> "Run":
        """The run the shared options of check, diff and fix ask for; raises
        :class:`RunProblem`."""
        from autofix import config

        paths = tuple(kw["paths"]) or (".",)
        try:
            settings = config.load(paths, kw["stdin_filename"], kw["config_file"], kw["isolated"])
        except config.ConfigError as exc:
            raise RunProblem(str(exc), usage=False) from None
        # A command-line option replaces the [tool.autofix] key it corresponds to.
        options = settings.options(
            select=codes(kw["select"]) or None,
            ignore=codes(kw["ignore"]) if kw["ignore"] is not None else None,
            unsafe_fixes=kw["unsafe_fixes"],
        )
        results_cache = None
        warnings: list[str] = []
        if paths != ("-",) and not (kw["no_cache"] or cache.disabled_by_environment()):
            directory = kw["cache_dir"] or cache.default_directory(settings.root)
            try:
                results_cache = cache.ResultCache.open(directory)
            except cache.CacheUnavailable as exc:
                warnings.append(f"result cache not used: {exc}")
            for folder in dict.fromkeys((directory, settings.root or os.getcwd())):
                stray = cache.stray_markers(folder)
                if stray:
                    warnings.append(
                        f"{' and '.join(display_path(p) for p in stray)} were written by an earlier autofix "
                        f"that took {display_path(folder)} for its cache folder: they hide it from git, backups "
                        "and autofix itself; delete them"
                    )
        if results_cache is not None:
            # What the rules are, as this autofix recorded it: no need to import them.
            options = replace(options, known_rules=results_cache.known_rules())
        try:
            options.rule_infos()
        except registry.UnknownRule as exc:
            raise RunProblem(f"unknown rule code {exc.args[0]!r}; see `autofix rules`") from None
        discovery = settings.discovery(
            include=tuple(kw["include"]),
            exclude=tuple(kw["exclude"]),
            respect_gitignore=False if kw["no_gitignore"] else None,
            force_exclude=True if kw["force_exclude"] else None,
        )
        if "-" in paths and paths != ("-",):
            raise RunProblem("'-' (standard input) cannot be combined with other paths")
        options = replace(options, exclude=tuple(discovery.exclude), exclude_root=discovery.root)
        return cls(
            paths, options, discovery, kw["jobs"], kw["stdin_filename"], cache=results_cache, cache_warnings=tuple(warnings)
        )

    @property
    def from_stdin(self) -> bool:
        return self.paths == ("-",)

    def results(self, write: bool = False, watch: Watch | None = None) -> Iterator[FileResult]:
        """Each file's result, in path order, counted as it is handed out. ``watch`` sees the
        stream of the files found (not standard input)."""
        from autofix.runner import Runner

        self.writing = write
        if self.from_stdin:
            result = self._stdin()
            if result is not None:
                yield result
            return
        if "-" in self.paths:
            raise RunProblem("'-' (standard input) cannot be combined with other paths")
        # Files in the order of their paths (as Ruff reports them), whatever the order named.
        files = sorted(self.discovery.files(self.paths), key=_path_order)
        for missing in self.discovery.missing:
            result = FileResult(missing, error="no such file or directory")
            self.count(result)
            yield result
        jobs = min(self.jobs or os.cpu_count() or 1, max(1, len(files)))
        with Runner(self.options, jobs, self.cache if files else None) as runner:
            stream = runner.process(files, write)
            # From the first result with a finding placed in another module, results are held
            # until the last: one such place found through several files is one finding.
            held: list[FileResult] = []
            for result in watch(stream, len(files)) if watch is not None else stream:
                if held or any(f.path is not None for f in result.findings):
                    held.append(result)
                    continue
                self.count(result)
                yield result
        for result in merged_elsewhere(held):
            self.count(result)
            yield result

    def _stdin(self) -> FileResult | None:
        """Standard input as one file; None when ``--stdin-filename`` names a path that the
        excludes skip (with ``--force-exclude``, as the same path on the command line would be)."""
        name = self.stdin_filename or "-"
        problem = None
        if stdin_closed():
            problem = "standard input is closed: there is no code to read"
        else:
            try:
                self.stdin_bytes = read_stdin()
            except OSError as exc:
                problem = f"standard input cannot be read: {exc.strerror or exc}"
        if problem is not None:
            result = FileResult(name, error=problem)
            self.count(result)
            return result
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
                # One whose fix --unsafe-fixes would apply (no reason given against it).
                self.counts["suggested_fixes"] += finding.reason is None
                continue
            self.counts["findings"] += 1
            self.counts["fixable"] += finding.fixable
            self.rules[finding.code] += 1
        if result.refused:
            self.counts["refused"] += 1
        if result.declined:
            self.counts["declined"] += 1

    def summary(self, verb: str = "Checked", wrote: bool = False) -> str:
        """The last line of every run: ``Checked 3 files, 2 findings (TFD001 2), ...``."""
        c = self.counts
        parts = [f"{verb} {_plural(c['files'], 'file')}"]
        if c["findings"]:
            per_rule = ", ".join(f"{code} {n}" for code, n in sorted(self.rules.items()))
            parts.append(f"{_plural(c['findings'], 'finding')} ({per_rule})")
            parts.append(f"{c['fixable']} fixable")
        else:
            parts.append("no findings")
        if c["suggestions"]:
            hint = " (--unsafe-fixes to apply)" if c["suggested_fixes"] else ""
            parts.append(f"{_plural(c['suggestions'], 'suggestion')}{hint}")
        if c["changed"]:
            parts.append(f"{_plural(c['changed'], 'file')} {'changed' if wrote else 'to change'}")
        if c["refused"]:
            parts.append(f"{c['refused']} fix{'es' if c['refused'] != 1 else ''} refused")
        if c["errors"]:
            parts.append(_plural(c["errors"], "error"))
        return ", ".join(parts) + "."

    def fixes_listed(self, wrote: bool) -> str:
        """--show-fixes: what the fixes fix, file by file (as Ruff lists them)."""
        total = sum(sum(c.values()) for c in self.fixes.values())
        if not total:
            return "No findings fixed." if wrote else "No fixable findings."
        names = {rule.CODE: rule.NAME for rule in self.options.known_rules or registry.infos()}
        lines = [f"{'Fixed' if wrote else 'Would fix'} {_plural(total, 'finding')}:"]
        for path, found in self.fixes.items():
            lines.append(f"- {path}:")
            lines.extend(f"    {n} × {code} ({names.get(code, '')})" for code, n in sorted(found.items()))
        return "\n".join(lines)


def read_stdin() -> bytes:
    """All of standard input; nothing when it is closed (a program started with ``<&-``)."""
    stream = sys.stdin
    if stream is None:
        return b""
    try:
        return stream.buffer.read()
    except ValueError:  # a file object that was closed
        return b""


def stdin_closed() -> bool:
    """Whether there is no standard input at all (``<&-``), as opposed to an empty one."""
    stream = sys.stdin
    return stream is None or stream.closed


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _path_order(path: str) -> list[str]:
    return os.path.normpath(path).split(os.sep)


