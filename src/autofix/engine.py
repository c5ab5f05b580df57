"""The engine: one file in, one :class:`~autofix.results.FileResult` out, and never an exception.

For each file: read it (keeping encoding, BOM and newlines), skip it cheaply when it cannot use
tf.distribute, parse it once, let every rule report on that one tree, then apply the fixes one
rule after another. A fix is kept only if the result parses and a second pass over it changes
nothing; otherwise the file is left as it was and the result says why.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field, replace

import libcst as cst

from autofix import crossfile, indentation, migrating, newlines, noqa, notebooks, unused_suppressions
from autofix.analysis import environment
from autofix.analysis.program import Program
from autofix.analysis.project.imports import reading
from autofix.cache import ResultCache
from autofix.options import Options, _rules  # noqa: F401  (re-exported: the engine's options)
from autofix.prefilter import NOT_USED, PREFILTER, PREFILTER_USES, might_need_analysis, skip_reason  # noqa: F401
from autofix.parsing import AnalysisError, MixedIndentation, parse_both
from autofix.results import FileResult, Finding
from autofix.rule import NO_FIX, UNSAFE_FIX, Outcome, Rule
from autofix.sourcefile import SourceError, read_source, write_atomic
from autofix.suppressions import Suppressions
from autofix.suppressions import parse as parse_suppressions




@dataclass
class Analysis:
    findings: list[Finding]
    new_text: str | None = None
    refused: str | None = None
    skipped: str | None = None
    # With ``add_noqa``: for each finding (by its index in ``findings``) that no comment
    # suppresses yet, where one would.
    unsuppressed: list[tuple[int, noqa.Wanted]] = field(default_factory=list)
    # A migration that edits other modules of the project too: (path, old text, new text).
    also: list[tuple[str, str, str]] = field(default_factory=list)


def analyse(text: str, options: Options, path: str | None = None) -> Analysis:
    """Findings for ``text`` and, when the rules fix something, the fixed text. ``path``, the
    file the text was read from, lets the analysis follow the imports of its project's own
    modules (see :mod:`autofix.analysis.project`); without it the text is analysed alone."""
    rules = options.rules()
    suppressions = parse_suppressions(text)
    if suppressions.ignore_file:
        return Analysis([], skipped="it has an autofix: ignore-file comment")
    migrate = options.migrate is not None
    if not rules or not might_need_analysis(text, migrate, path is not None):
        return Analysis(_unused(suppressions, [], rules, options))
    try:
        program = Program(*_parsed(text), migration=options.migrate, path=path, migrated=options.migrated_check)
        if program.migration is not None and migrating.uses_strategy(program):
            program.migration = None  # a file that distributes already is left to the rules
        findings: list[Finding] = []
        outcomes: dict[type[Rule], Outcome] = {}
        first = False
        for rule in rules:
            outcome = outcomes[rule] = rule().run(program, options.unsafe_fixes)
            findings.extend(_findings(rule, outcome, program, options))
            first = first or (outcome.changes and options.fixes(rule))
        findings.extend(_unused(suppressions, findings, rules, options))
        if program.migration is not None and not migrating.trains(program):
            return Analysis(findings, skipped=migrating.NOT_TRAINING)
        if options.add_noqa:
            return Analysis(findings, unsuppressed=_unsuppressed(outcomes, program, findings))
    except RecursionError:
        raise AnalysisError("nested too deeply to be analysed") from None
    if not first or not options.build_fixes:
        return Analysis(findings)
    fixers = [r for r in rules if options.fixes(r)]
    try:
        new_text, fixed, settled = _apply(text, fixers, outcomes, program, options.unsafe_fixes)
    except AnalysisError as exc:
        return _refuse(findings, f"the fix produced code that does not parse ({exc})")
    if new_text == text:
        return Analysis(findings)
    if program.migration is not None:
        migrated = _migrated(text, new_text, fixed, settled, findings, fixers, options, path, program)
        return crossfile.with_other_files(migrated, program, options) if migrated.new_text is not None else migrated
    try:
        # The second pass starts from what the first one learned about the fixed text: its
        # parse, and the rules that already ran on it (after the last one that changed it).
        again, _, _ = _apply(new_text, fixers, settled, fixed, options.unsafe_fixes)
    except AnalysisError as exc:
        return _refuse(findings, f"the fixed code could not be checked again ({exc})")
    if again != new_text:
        return _refuse(findings, "a second pass would change the fixed code again")
    return Analysis(findings, new_text)


def _migrated(
    text: str,
    new_text: str,
    fixed: Program | None,
    settled: dict[type[Rule], Outcome],
    findings: list[Finding],
    fixers: list[type[Rule]],
    options: Options,
    path: str | None = None,
    original: Program | None = None,
) -> Analysis:
    """A migration (see :mod:`autofix.migrating`): the rules run again on what they wrote until
    nothing changes, and the result is kept only when ``check`` finds nothing left in it, and no
    other module of the project that uses what it changes would break (``original``: the
    original's program)."""
    for _ in range(migrating.ROUNDS):
        try:
            again, fixed, settled = _apply(new_text, fixers, settled, fixed, options.unsafe_fixes)
        except AnalysisError as exc:
            return Analysis(migrating.refused(findings, f"the migrated code does not parse ({exc})"), None, "it does not parse")
        if again == new_text:
            break
        new_text = again
    else:
        why = "the rules kept changing the migrated code"
        return Analysis(migrating.refused(findings, why), None, why)
    rule = next(r for r in fixers if r.MIGRATION)
    unfinished = migrating.unfinished(fixed, settled.get(rule)) if fixed is not None else []
    if unfinished:
        why = "the steps written in loops were moved into functions, but those could not be migrated" + migrating.at_lines(
            text, new_text, [line for line, _ in unfinished]
        )
        found = migrating.refused(findings, why) + migrating.unscaled_refusals(rule.CODE, rule.NAME, text, new_text, unfinished)
        return Analysis(found, None, why)
    try:
        check = analyse(new_text, replace(options, migrate=None, migrated_check=True, build_fixes=False, unused_suppressions=False), path)
    except AnalysisError as exc:
        return Analysis(migrating.refused(findings, f"the migrated code could not be checked ({exc})"), None, "it could not be checked")
    left = migrating.with_migration_reasons(migrating.left_over(check.findings, options.unsafe_fixes), fixed, settled)
    if left:
        why = f"the migrated code would still have {len(left)} finding{'s' if len(left) != 1 else ''}" + migrating.at_lines(
            text, new_text, [f.line for f in left]
        )
        found = migrating.refused(findings, why) + migrating.refusals(rule.CODE, rule.NAME, text, new_text, left)
        return Analysis(found, None, why)
    unscaled = migrating.unscaled(fixed) if fixed is not None else []
    if unscaled:
        why = "a batch of the migrated code is not shown to be the global batch" + migrating.at_lines(
            text, new_text, [line for line, _ in unscaled]
        )
        found = migrating.refused(findings, why) + migrating.unscaled_refusals(rule.CODE, rule.NAME, text, new_text, unscaled)
        return Analysis(found, None, why)
    broken = migrating.importers_broken(original, fixed, new_text) if original is not None else []
    if broken:
        why = "another module of the project uses what the migration changes, and would break" + migrating.at_lines(
            text, new_text, [line for line, _ in broken]
        )
        found = migrating.refused(findings, why) + migrating.unscaled_refusals(rule.CODE, rule.NAME, text, new_text, broken)
        return Analysis(found, None, why)
    return Analysis(findings, new_text)


def _apply(
    text: str, rules: list[type[Rule]], known: dict[type[Rule], Outcome], program: Program | None = None, unsafe_fixes: bool = False
) -> tuple[str, Program | None, dict[type[Rule], Outcome]]:
    """Run the fixes of ``rules`` one after another, each on the text the previous ones left.
    ``known`` holds outcomes already computed on ``text`` itself (on ``program``, its parse,
    when given), reused while nothing has changed yet. Every rule runs: a later one may have
    work only once an earlier one has fixed something (TFD005 scales an optimizer once TFD001
    has moved it after the strategy). One program (parse and metadata) serves every rule until
    a rule changes the text.

    Returns the fixed text, its program (the text is parsed once more when the last rule to
    run changed it: the fixed code must parse), and the outcomes of the rules that ran on that
    program, none of which changed it."""
    current = text
    outcomes: dict[type[Rule], Outcome] = {}
    # (A migration's signal holds for every text of its pass: see Program.migration.)
    migration = program.migration if program is not None else None
    path = program.path if program is not None else None
    migrated = program.migrated if program is not None else False
    for rule in rules:
        if current is text and rule in known:
            outcome = known[rule]
        else:
            if program is None:
                program = Program(*_parsed(current), migration=migration, path=path, migrated=migrated)
            outcome = rule().run(program, unsafe_fixes)
        if outcome.module is not None:
            code = outcome.module.code
            if code != current:
                current = code
                program = None
                outcomes = {}
                continue
        outcomes[rule] = outcome
    if program is None:
        program = Program(*_parsed(current), migration=migration, path=path, migrated=migrated)
    return current, program, outcomes


def _parsed(text: str) -> tuple[cst.Module, str, ast.Module | None]:
    """``Program``'s arguments for ``text``: its module, the text, Python's own tree of it."""
    module, tree = parse_both(text)
    return module, text, tree


def _refuse(findings: list[Finding], why: str) -> Analysis:
    refused = [
        replace(f, fixable=False, reason=f"fix refused: {why}") if f.fixable else f for f in findings
    ]
    return Analysis(refused, None, why)


def _findings(rule: type[Rule], outcome: Outcome, program: Program, options: Options) -> list[Finding]:
    found = []
    for report in outcome.reports:
        if report.elsewhere is not None:
            found.append(_found_elsewhere(rule, report, program))
            continue
        where = program.position(report.node)
        suppressed = program.suppressed(report.node, rule.CODE)
        fixable = (
            report.reason is None and outcome.changes and options.fixes(rule) and not suppressed
            and (not report.suggestion or options.unsafe_fixes)
        )
        reason = None if fixable else (NO_FIX + report.reason if report.reason else None)
        if reason is None and not fixable and not rule.is_suggestion() and not report.suggestion and outcome.changes and not suppressed:
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
                unsafe=rule.is_suggestion() or report.suggestion,
                suppressed=suppressed,
                suppressed_by=_suppression_line(program, report.node, rule.CODE) if suppressed else None,
                related=_related(report, program),
            )
        )
    return found


def shown_path(path: str, analysed: str | None) -> str:
    """``path`` (a file of the project) as the user named ``analysed``: relative to the same
    folder (``proj/trainer.py`` analysed, ``proj/losses.py`` shown)."""
    if analysed is None:
        return path
    folder = os.path.dirname(analysed)
    try:
        relative = os.path.relpath(os.path.abspath(path), os.path.abspath(folder or "."))
    except ValueError:
        return path
    return os.path.normpath(os.path.join(folder, relative))


def _related(report, program: Program) -> tuple[tuple[str | None, int, str], ...]:
    """A report's related places, their paths shown as the analysed file's is."""
    here = program.path
    return tuple((shown_path(p, here) if p is not None else here, at, message) for p, at, message in report.related)


def _found_elsewhere(rule: type[Rule], report, program: Program) -> Finding:
    """A finding placed in another module (never fixed here), naming this file where it uses it."""
    path, line, column, end_line, end_column, suppressed = report.elsewhere
    here = program.path
    related = _related(report, program)
    return Finding(
        code=rule.CODE,
        name=rule.NAME,
        message=report.message,
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        fixable=False,
        reason=NO_FIX + report.reason if report.reason else None,
        unsafe=rule.is_suggestion() or report.suggestion,
        suppressed=suppressed,
        path=shown_path(path, here),
        related=related,
    )


def _unsuppressed(outcomes: dict[type[Rule], Outcome], program: Program, findings: list[Finding]) -> list[tuple[int, noqa.Wanted]]:
    """Where an ``# autofix: ignore[CODE]`` comment would suppress each finding that none
    suppresses yet: its first line, or the first line of its statement (as
    :meth:`Program.suppressed` reads them). ``findings`` start with the rules' findings, one
    per report, in the order of ``outcomes``."""
    wanted = []
    index = 0
    for rule, outcome in outcomes.items():
        for report in outcome.reports:
            if not findings[index].suppressed and findings[index].path is None:
                lines = [findings[index].line]
                statement = program.statement_of(report.node)
                if statement is not None:
                    lines.append(program.position(statement).start.line)
                wanted.append((index, noqa.Wanted(rule.CODE, tuple(lines))))
            index += 1
    return wanted


NO_PLACE = "no line of its statement can end with an `# autofix: ignore` comment (a string or a backslash continues it)"


def with_ignore_comments(text: str, options: Options, path: str | None = None) -> Analysis:
    """``check --add-noqa``: ``text`` with an ``# autofix: ignore[CODE]`` comment for each
    finding (see :mod:`autofix.noqa`). The findings returned are those it acted on: suppressed
    by the comment now written, or not, with why. Runs again on its own result (a suppressed
    place can let a rule see another) until nothing is left to suppress."""
    current = text
    acted: dict[tuple[str, int, int], Finding] = {}
    for _ in range(3):
        analysis = analyse_as_written(current, options, path)
        places = [(i, want) for i, want in analysis.unsuppressed if _place(analysis.findings[i]) not in acted]
        if not places:
            break
        added = noqa.add(current, [want for _, want in places])
        for (index, _), line in zip(places, added.placed):
            finding = analysis.findings[index]
            if line is None:
                finding = replace(finding, fixable=False, reason=NO_PLACE)
            else:
                finding = replace(finding, fixable=False, reason=None, suppressed=True, suppressed_by=line)
            acted[_place(finding)] = finding
        if added.text == current:
            break
        current = added.text
    return Analysis(list(acted.values()), current if current != text else None)


def _place(finding: Finding) -> tuple[str, int, int]:
    return finding.code, finding.line, finding.column


def _analysed(text: str, options: Options, path: str | None = None) -> Analysis:
    if newlines.has_lone_cr(text):
        # Lines that end with a lone \r: the analysis reads a copy with \n newlines (the same
        # lines and columns), and the fix comes back in the file's own newlines.
        copy = newlines.translate(text)
        analysis = _analysed(copy.text, options, path)
        if analysis.new_text is None:
            return analysis
        return replace(analysis, new_text=copy.restore(analysis.new_text))
    return with_ignore_comments(text, options, path) if options.add_noqa else analyse_as_written(text, options, path)


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


def analyse_as_written(text: str, options: Options, path: str | None = None) -> Analysis:
    """:func:`analyse`, also for code that libcst cannot take as it is written (form feeds,
    some mixes of tabs and spaces): then a copy with plain indentation is analysed and its fix
    brought back (see :mod:`autofix.indentation`)."""
    if not indentation.has_form_feed(text):
        try:
            return analyse(text, options, path)
        except MixedIndentation:
            pass
    copy = indentation.normalise(text)
    analysis = analyse(copy.text, options, path)
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


def process_text(text: str, path: str, options: Options, project: bool = False) -> FileResult:
    """Analyse text that is not read from a file (standard input); with ``project``, text read
    from the file ``path``, whose project's modules its imports name are followed."""
    try:
        analysis = _analysed(text, options, path if project else None)
    except AnalysisError as exc:
        return FileResult(path, error=str(exc))
    except Exception as exc:  # a bug in a rule must not stop the run
        return FileResult(path, error=_internal(exc))
    skipped = analysis.skipped
    migrate = options.migrate is not None
    if skipped is None and not analysis.findings and not might_need_analysis(text, migrate, project):
        skipped = skip_reason(migrate)
    also = tuple((other, "", old, new) for other, old, new in analysis.also)
    return FileResult(path, in_order(analysis.findings), text, analysis.new_text, refused=analysis.refused, skipped=skipped, also=also)


def _in_cell(notebook, path: str, related: tuple[str | None, int, str]) -> tuple[str | None, int, str]:
    """A related place in the notebook analysed: its line in its cell (``train.ipynb:cell 3:5``)."""
    where, line, message = related
    if where != path:
        return related
    cell = notebook.cell_of(line)
    if cell is None:
        return related
    return where, cell[1], message.removesuffix(f":{line}") + f":cell {cell[0] + 1}:{cell[1]}"


def in_order(findings) -> tuple[Finding, ...]:
    """Findings in the order of their places (as Ruff sorts them): by cell in a notebook, then
    line, then column; findings at one place by rule code; those placed in another module
    (``Finding.path``) after the file's own, by path."""
    return tuple(sorted(findings, key=lambda f: (f.path is not None, f.path or "", f.cell if f.cell is not None else -1, f.line, f.column, f.code)))


def process_notebook(text: str, path: str, options: Options, project: bool = False) -> FileResult:
    """Analyse a notebook's code cells as one program; findings name their cell."""
    migrate = options.migrate is not None
    if not might_need_analysis(text, migrate, project):
        return FileResult(path, notebook=True, skipped=skip_reason(migrate))
    try:
        notebook = notebooks.load(text)
    except notebooks.NotebookError as exc:
        return FileResult(path, error=f"notebook: {exc}", notebook=True)
    except Exception as exc:  # a bug must not stop the run
        return FileResult(path, error=_internal(exc), notebook=True)
    if not notebooks.is_python(notebook.data):
        return FileResult(path, skipped="not a Python notebook", notebook=True)
    try:
        with environment.installed(environment.from_shell_lines(notebooks.shell_lines(notebook), notebooks.env_magics(notebook))):
            analysis = _analysed(notebook.program, options, path if project else None)
    except AnalysisError as exc:
        where = notebook.cell_of(exc.line) if exc.line else None
        prefix = f"cell {where[0] + 1}, line {where[1]}: " if where else ""
        return FileResult(path, error=prefix + exc.detail, notebook=True)
    except Exception as exc:
        return FileResult(path, error=_internal(exc), notebook=True)
    findings = []
    for finding in analysis.findings:
        if finding.path is not None:
            # Placed in another module: only its related places in the notebook are in cells.
            findings.append(replace(finding, related=tuple(_in_cell(notebook, path, r) for r in finding.related)))
            continue
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
        # (A message may name a line too: "the dataset made on line N".)
        message = notebook.in_cells(finding.message)
        findings.append(
            replace(finding, message=message, line=start[1], column=column, end_line=end[1], end_column=end_column, cell=start[0], reason=reason)
        )
    new_text = None
    refused = notebook.in_cells(analysis.refused) if analysis.refused else analysis.refused
    if analysis.new_text is not None:
        try:
            new_text = notebooks.rebuild(notebook, analysis.new_text)
        except Exception as exc:  # NotebookError, or a bug: the notebook is left as it is
            refused = str(exc) if isinstance(exc, notebooks.NotebookError) else _internal(exc)
            findings = [replace(f, fixable=False, reason=f"fix refused: {refused}") if f.fixable else f for f in findings]
    return FileResult(path, in_order(findings), text, new_text, refused=refused, skipped=analysis.skipped, notebook=True)


def process_path(path: str, options: Options, write: bool = False, cache: ResultCache | None = None) -> FileResult:
    """Analyse one file and, with ``write``, fix it in place. Never raises (but for Ctrl-C).
    With ``cache``, a result stored for the same bytes, options and tool is used instead of
    analysing the file again (see :mod:`autofix.cache`)."""
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    except Exception as exc:
        return FileResult(path, error=_internal(exc))
    notebook = path.lower().endswith(".ipynb")
    options = options.for_path(path)
    key, result = cache.find(source, path, options, write) if cache is not None else (None, None)
    if result is None:
        with reading() as read:
            result = process_notebook(source.text, path, options, True) if notebook else process_text(source.text, path, options, True)
        # The project modules its analysis read: its answer holds while they are unchanged.
        result = replace(result, read=tuple(sorted(read.items())))
        # (A fix that spans files is not stored: the cache keeps one file's text.)
        if key is not None and not result.also and not (result.error or "").startswith(INTERNAL):
            cache.put(key, result)
    result = result.settled(source.encoding, source.bom, source.digest)
    if not result.changed:
        return result
    if result.also:
        return crossfile.written(result, source, write)
    if write:
        try:
            write_atomic(path, source.encode(result.new_text), source.digest)
        except SourceError as exc:
            return replace(result, error=str(exc))
        return replace(result, written=True)
    return result


INTERNAL = "internal error"


def _internal(exc: Exception) -> str:
    return f"{INTERNAL} ({type(exc).__name__}: {exc}); the file was left unchanged"
