"""A fix that spans files (a migration that edits another module of the project too): built
with the file's own fix, shown with it, and written whole or not at all.

The other file's edit is refused, and with it the whole fix, when that file is excluded from
the run, cannot be written, or changed since the analysis read it (its content digest is
compared again just before writing: :func:`autofix.sourcefile.write_all`)."""

from __future__ import annotations

import os
from dataclasses import replace

from autofix.analysis.migration.companions import Companions
from autofix.analysis.migration.method_fits import MethodFits
from autofix.analysis.project.layout import digest as content_digest
from autofix.codemods._companions import EXPLAINED, divided_step, method_with_batch
from autofix.results import FileResult, Finding
from autofix.sourcefile import SourceError, read_source, write_all

# What the migration's finding says of the other module's edit of a training method.
BATCH_EXPLAINED = (
    "{module}:{line}: {cls}.{method} takes {params}, handed to its fit, and is passed the global batch here; "
    "any other caller keeps what it trained with before"
)


def with_other_files(analysis, program, options):
    """``analysis`` (a migration of ``program``) with the other modules it edits, or refused
    when one of them is excluded from the run."""
    edits = []
    for plan in Companions.of(program).planned():
        line = plan.program.line(plan.gradient)
        edits.append((plan.path, plan.program, divided_step(plan), line, lambda shown, plan=plan, line=line: EXPLAINED.format(module=shown, line=line, cls=plan.cls)))
    for method in MethodFits.of(program).found:
        if method.edit:
            line = method.other.line(method.fit)
            edits.append((method.path, method.other, method_with_batch(method), line, lambda shown, method=method, line=line: BATCH_EXPLAINED.format(
                module=shown, line=line, cls=method.cls, method=method.method.name.value, params=", ".join(f"{n}={d}" for n, d in method.added))))
    if not edits:
        return analysis
    notes = []
    also = []
    for path, other, new, line, explained in edits:
        shown = _shown(path, program.path)
        if options.excludes(path):
            why = f"it must also edit {shown}, which is excluded"
            return replace(analysis, findings=_refused(analysis.findings, why), new_text=None, refused=why)
        if any(path == done for done, _old, _new in also):
            why = f"it would edit {shown} twice, which autofix does not combine"
            return replace(analysis, findings=_refused(analysis.findings, why), new_text=None, refused=why)
        also.append((path, other.module.code, new))
        notes.append((shown, line, explained(shown)))
    findings = [replace(f, related=(*f.related, *notes)) if f.fixable else f for f in analysis.findings]
    return replace(analysis, findings=findings, also=also)


def written(result: FileResult, source, write: bool) -> FileResult:
    """``result`` (whose fix edits ``result.also`` too) with the other files' digests checked
    and, with ``write``, every file written; refused whole when one cannot be."""
    recorded = dict(result.read)
    writes = [(result.path, source.encode(result.new_text), source.digest)]
    also = []
    encodings = []
    for path, _digest, old, new in result.also:
        shown = _shown(path, result.path)
        try:
            other = read_source(path)
            with open(path, "rb") as fh:
                data = fh.read()
        except (SourceError, OSError) as exc:
            return _refused_result(result, f"it must also edit {shown}, which cannot be read ({exc})")
        if content_digest(data) != recorded.get(path) or other.text != old:
            return _refused_result(result, f"it must also edit {shown}, which changed since it was read")
        if not os.access(os.path.realpath(path), os.W_OK) or not os.stat(os.path.realpath(path)).st_mode & 0o222:
            return _refused_result(result, f"it must also edit {shown}, which is read-only")
        try:
            writes.append((path, other.encode(new), other.digest))
        except SourceError as exc:
            return _refused_result(result, f"it must also edit {shown}: {exc}")
        also.append((path, other.digest, old, new))
        encodings.append((path, other.encoding, other.bom))
    result = replace(result, also=tuple(also), also_encodings=tuple(encodings))
    if not write:
        return result
    try:
        write_all(writes)
    except SourceError as exc:
        return replace(result, error=str(exc))
    return replace(result, written=True)


def _shown(path: str, analysed: str | None) -> str:
    """``path`` relative to the analysed file's folder (``model.py``, ``classes/Model.py``)."""
    folder = os.path.dirname(os.path.abspath(analysed)) if analysed else os.getcwd()
    try:
        return os.path.relpath(os.path.abspath(path), folder)
    except ValueError:
        return path


def _refused(findings, why: str) -> list[Finding]:
    return [replace(f, fixable=False, reason=f"fix refused: {why}") if f.fixable else f for f in findings]


def _refused_result(result: FileResult, why: str) -> FileResult:
    return replace(result, findings=tuple(_refused(result.findings, why)), new_text=None, old_text=None, refused=why, also=(), also_encodings=())
