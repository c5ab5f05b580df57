"""The engine: one file in, one :class:`~autofix.results.FileResult` out, and never an exception.

For each file: read it (keeping encoding, BOM and newlines), skip it cheaply when it cannot use
tf.distribute, parse it once, let every rule report on that one tree, then apply the fixes one
rule after another. A fix is kept only if the result parses and a second pass over it changes
nothing; otherwise the file is left as it was and the result says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache

import libcst as cst
import pathspec

from autofix import indentation, notebooks, registry, unused_suppressions
from autofix.analysis.program import Program
from autofix.parsing import AnalysisError, MixedIndentation, parse
from autofix.results import FileResult, Finding
from autofix.rule import NO_FIX, UNSAFE_FIX, Outcome, Rule
from autofix.sourcefile import SourceError, read_source, write_atomic
from autofix.suppressions import Suppressions
from autofix.suppressions import parse as parse_suppressions


@dataclass(frozen=True)
class Options:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    # ``(glob, codes)`` pairs: rules not run on files matching the glob (gitignore-style,
    # relative to ``root``, the directory of the configuration that set them).
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    root: str | None = None
    # Report ``# autofix: ignore`` comments that suppress nothing (as TFD100 findings).
    unused_suppressions: bool = False
    # Compute the fixed text. ``check`` in a format that shows no fix skips it (and the
    # second pass that verifies it): whether a fix exists is known without building it.
    build_fixes: bool = True

    def rules(self) -> tuple[type[Rule], ...]:
        return _rules(self.select, self.ignore)

    def fixes(self, rule: type[Rule]) -> bool:
        return rule.SAFE or self.unsafe_fixes

    def for_path(self, path: str) -> "Options":
        """These options with the per-file ignores that apply to ``path`` folded in."""
        if not self.per_file_ignores:
            return self
        relative = os.path.relpath(os.path.abspath(path), self.root or os.getcwd()).replace(os.sep, "/")
        extra = [code for pattern, codes in self.per_file_ignores if _matches(pattern, relative) for code in codes]
        if not extra:
            return self
        return replace(self, ignore=tuple(dict.fromkeys((*self.ignore, *extra))), per_file_ignores=())


@lru_cache(maxsize=256)
def _matches(pattern: str, relative: str) -> bool:
    return pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(relative)


@lru_cache(maxsize=None)
def _rules(select, ignore) -> tuple[type[Rule], ...]:
    return registry.select(select, ignore)


# Every rule needs a tf.distribute strategy, and every way of naming one (``tf.distribute.X``,
# ``from tensorflow.distribute import X``, ``tensorflow.python.distribute``...) spells this
# word, or the strategy is made elsewhere and used here as ``with strategy.scope():``; so a
# file with neither has nothing to find. This is checked on every fixture and on generated
# variants (tests/test_prefilter.py).
PREFILTER = "distribute"
# A strategy made in another module is known by its use: ``with strategy.scope():``.
PREFILTER_SCOPE = ".scope()"


def might_need_analysis(text: str) -> bool:
    return PREFILTER in text or PREFILTER_SCOPE in text


# Why a file the prefilter passes over is not analysed.
NOT_USED = "it does not use tf.distribute"


@dataclass
class Analysis:
    findings: list[Finding]
    new_text: str | None = None
    refused: str | None = None
    skipped: str | None = None


def analyse(text: str, options: Options) -> Analysis:
    """Findings for ``text`` and, when the rules fix something, the fixed text."""
    rules = options.rules()
    suppressions = parse_suppressions(text)
    if suppressions.ignore_file:
        return Analysis([], skipped="it has an autofix: ignore-file comment")
    if not rules or not might_need_analysis(text):
        return Analysis(_unused(suppressions, [], rules, options))
    try:
        program = Program(parse(text), text)
        findings: list[Finding] = []
        outcomes: dict[type[Rule], Outcome] = {}
        first = False
        for rule in rules:
            outcome = outcomes[rule] = rule().run(program)
            findings.extend(_findings(rule, outcome, program, options))
            first = first or (outcome.changes and options.fixes(rule))
        findings.extend(_unused(suppressions, findings, rules, options))
    except RecursionError:
        raise AnalysisError("nested too deeply to be analysed") from None
    if not first or not options.build_fixes:
        return Analysis(findings)
    fixers = [r for r in rules if options.fixes(r)]
    try:
        new_text = _apply(text, fixers, {r: o for r, o in outcomes.items()})
    except AnalysisError as exc:
        return _refuse(findings, f"the fix produced code that does not parse ({exc})")
    if new_text == text:
        return Analysis(findings)
    try:
        again = _apply(new_text, fixers, {})
    except AnalysisError as exc:
        return _refuse(findings, f"the fixed code could not be checked again ({exc})")
    if again != new_text:
        return _refuse(findings, "a second pass would change the fixed code again")
    return Analysis(findings, new_text)


def _apply(text: str, rules: list[type[Rule]], known: dict[type[Rule], Outcome]) -> str:
    """Run the fixes of ``rules`` one after another, each on the text the previous ones left.
    ``known`` holds outcomes already computed on ``text`` itself, reused while nothing has
    changed yet. Every rule runs: a later one may have work only once an earlier one has
    fixed something (TFD005 scales an optimizer once TFD001 has moved it after the strategy).
    One program (parse and metadata) serves every rule until a rule changes the text."""
    current = text
    program: Program | None = None
    for rule in rules:
        if current is text and rule in known:
            outcome = known[rule]
        else:
            if program is None:
                program = Program(parse(current), current)
            outcome = rule().run(program)
        if outcome.module is not None:
            code = outcome.module.code
            if code != current:
                current = code
                program = None
    if current != text and program is None:
        parse(current)
    return current


def _refuse(findings: list[Finding], why: str) -> Analysis:
    refused = [
        replace(f, fixable=False, reason=f"fix refused: {why}") if f.fixable else f for f in findings
    ]
    return Analysis(refused, None, why)


def _findings(rule: type[Rule], outcome: Outcome, program: Program, options: Options) -> list[Finding]:
    found = []
    for report in outcome.reports:
        where = program.position(report.node)
        suppressed = program.suppressed(report.node, rule.CODE)
        fixable = report.reason is None and outcome.changes and options.fixes(rule) and not suppressed
        reason = None if fixable else (NO_FIX + report.reason if report.reason else None)
        if reason is None and not fixable and not rule.is_suggestion() and outcome.changes and not suppressed:
            # A finding of an unsafe rule that is not a suggestion: it fails `check`, and its
            # fix waits for --unsafe-fixes.
            reason = UNSAFE_FIX
        found.append(
            Finding(
                code=rule.CODE,
                name=rule.NAME,
                message=report.message,
                line=where.start.line,
                column=where.start.column + 1,
                end_line=where.end.line,
                end_column=where.end.column + 1,
                fixable=fixable,
                reason=reason,
                unsafe=rule.is_suggestion(),
                suppressed=suppressed,
                suppressed_by=_suppression_line(program, report.node, rule.CODE) if suppressed else None,
            )
        )
    return found


def _suppression_line(program: Program, node: cst.CSTNode, code: str) -> int | None:
    lines = [program.position(node).start.line]
    statement = program.statement_of(node)
    if statement is not None:
        lines.append(program.position(statement).start.line)
    return next((line for line in lines if program.suppressions.covers(line, code)), None)


def _unused(suppressions: Suppressions, findings: list[Finding], rules, options: Options) -> list[Finding]:
    """TFD100: ``# autofix: ignore`` comments (for rules that ran) that suppressed nothing."""
    if not options.unused_suppressions or not suppressions.by_line:
        return []
    return unused_suppressions.unused(suppressions, findings, (rule.CODE for rule in rules))


def analyse_as_written(text: str, options: Options) -> Analysis:
    """:func:`analyse`, also for code that libcst cannot take as it is written (form feeds,
    some mixes of tabs and spaces): then a copy with plain indentation is analysed and its fix
    brought back (see :mod:`autofix.indentation`)."""
    if not indentation.has_form_feed(text):
        try:
            return analyse(text, options)
        except MixedIndentation:
            pass
    copy = indentation.normalise(text)
    analysis = analyse(copy.text, options)
    findings = [
        replace(f, column=copy.column(f.line, f.column), end_column=copy.column(f.end_line, f.end_column))
        for f in analysis.findings
    ]
    if analysis.new_text is None:
        return replace(analysis, findings=findings)
    try:
        return replace(analysis, findings=findings, new_text=copy.restore(analysis.new_text))
    except indentation.CannotKeep as exc:
        return _refuse(findings, str(exc))


def process_text(text: str, path: str, options: Options) -> FileResult:
    """Analyse text that is not read from a file (standard input)."""
    try:
        analysis = analyse_as_written(text, options)
    except AnalysisError as exc:
        return FileResult(path, error=str(exc))
    except Exception as exc:  # a bug in a rule must not stop the run
        return FileResult(path, error=_internal(exc))
    skipped = analysis.skipped
    if skipped is None and not analysis.findings and not might_need_analysis(text):
        skipped = NOT_USED
    return FileResult(path, tuple(analysis.findings), text, analysis.new_text, refused=analysis.refused, skipped=skipped)


def process_notebook(text: str, path: str, options: Options) -> FileResult:
    """Analyse a notebook's code cells as one program; findings name their cell."""
    if not might_need_analysis(text):
        return FileResult(path, notebook=True, skipped=NOT_USED)
    try:
        notebook = notebooks.load(text)
    except notebooks.NotebookError as exc:
        return FileResult(path, error=f"notebook: {exc}", notebook=True)
    except Exception as exc:  # a bug must not stop the run
        return FileResult(path, error=_internal(exc), notebook=True)
    if not notebooks.is_python(notebook.data):
        return FileResult(path, skipped="not a Python notebook", notebook=True)
    try:
        analysis = analyse_as_written(notebook.program, options)
    except AnalysisError as exc:
        where = notebook.cell_of(exc.line) if exc.line else None
        prefix = f"cell {where[0] + 1}, line {where[1]}: " if where else ""
        return FileResult(path, error=prefix + exc.detail, notebook=True)
    except Exception as exc:
        return FileResult(path, error=_internal(exc), notebook=True)
    findings = []
    for finding in analysis.findings:
        start = notebook.cell_of(finding.line)
        if start is None:
            continue
        end = notebook.cell_of(finding.end_line)
        if end is None or end[0] != start[0]:
            end, end_column = start, notebook.column(finding.line, finding.column)
        else:
            end_column = notebook.column(finding.end_line, finding.end_column)
        column = notebook.column(finding.line, finding.column)
        reason = notebook.in_cells(finding.reason) if finding.reason else finding.reason
        findings.append(
            replace(finding, line=start[1], column=column, end_line=end[1], end_column=end_column, cell=start[0], reason=reason)
        )
    new_text = None
    refused = analysis.refused
    if analysis.new_text is not None:
        try:
            new_text = notebooks.rebuild(notebook, analysis.new_text)
        except Exception as exc:  # NotebookError, or a bug: the notebook is left as it is
            refused = str(exc) if isinstance(exc, notebooks.NotebookError) else _internal(exc)
            findings = [replace(f, fixable=False, reason=f"fix refused: {refused}") if f.fixable else f for f in findings]
    return FileResult(path, tuple(findings), text, new_text, refused=refused, skipped=analysis.skipped, notebook=True)


def process_path(path: str, options: Options, write: bool = False) -> FileResult:
    """Analyse one file and, with ``write``, fix it in place. Never raises (but for Ctrl-C)."""
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    except Exception as exc:
        return FileResult(path, error=_internal(exc))
    if path.lower().endswith(".ipynb"):
        result = process_notebook(source.text, path, options.for_path(path))
    else:
        result = process_text(source.text, path, options.for_path(path))
    if not result.changed:
        # Unchanged files keep no text: results stay small however many files there are.
        return replace(result, old_text=None, new_text=None)
    result = replace(result, encoding=source.encoding, bom=source.bom)
    if write:
        try:
            write_atomic(path, source.encode(result.new_text), source.digest)
        except SourceError as exc:
            return replace(result, error=str(exc))
        return replace(result, written=True)
    return result


def _internal(exc: Exception) -> str:
    return f"internal error ({type(exc).__name__}: {exc}); the file was left unchanged"
