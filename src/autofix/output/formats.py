"""The line-oriented formats of ``autofix check --format`` (text, json, github).

A formatter gets each file's result as it arrives (so ``text`` and ``github`` stream) and may
return text to print; ``finish`` returns what is left (``json`` prints everything at the end).
``sarif`` and ``suggestions`` live in their own modules; ``autofix.output.FORMATS`` lists all.
"""

from __future__ import annotations

import json

from autofix.diffs import display_path
from autofix.output.locations import file_region, notebook_positions, place
from autofix.results import FileResult, Finding


class Formatter:
    name = ""

    def __init__(self, unsafe_fixes: bool = False) -> None:
        # Whether unsafe rules' findings count as findings (they fail `check`) rather than
        # suggestions.
        self.unsafe_fixes = unsafe_fixes

    def result(self, result: FileResult) -> str:
        return ""

    def finish(self) -> str:
        return ""


def finding_status(finding: Finding) -> str:
    if finding.fixable:
        return "[*] "
    return ""


def finding_note(finding: Finding) -> str:
    if finding.fixable:
        return ""
    if finding.unsafe and not finding.reason:
        return " (suggestion: fix available with --unsafe-fixes)"
    if finding.unsafe:
        return f" (suggestion; {finding.reason})"
    if finding.reason:
        return f" ({finding.reason})"
    return ""


def location(result: FileResult, finding: Finding) -> str:
    """``path:line:col``, or ``path:cell N:line:col`` in a notebook (cells counted from 1,
    markdown cells included, as Jupyter shows them)."""
    cell = f":cell {finding.cell_number}" if finding.cell is not None else ""
    return f"{display_path(finding_path(result, finding))}{cell}:{finding.line}:{finding.column}"


def finding_path(result: FileResult, finding: Finding) -> str:
    """The file a finding is in: the one analysed, or another module of its project."""
    return finding.path if finding.path is not None else result.path


USED_BY = "used by "


def related_note(finding: Finding) -> str:
    """`` (used by trainer.py:26)``: the finding's related places, as the text format shows them."""
    if not finding.related:
        return ""
    shown: list[str] = []
    for _path, _line, message in finding.related:
        # "used by a.py:10, b.py:20": one finding that several files use.
        if shown and shown[-1].startswith(USED_BY) and message.startswith(USED_BY):
            shown[-1] += ", " + message.removeprefix(USED_BY)
        else:
            shown.append(message)
    return " (" + "; ".join(shown) + ")"


def related_items(result: FileResult, finding: Finding) -> list[dict]:
    """The finding's related places as JSON: ``[{path, line, message}]``."""
    return [
        {"path": display_path(path if path is not None else result.path), "line": line, "message": message}
        for path, line, message in finding.related
    ]


class TextFormatter(Formatter):
    name = "text"

    def result(self, result: FileResult) -> str:
        lines = [
            f"{location(result, f)}: {f.code} {finding_status(f)}{f.message}{related_note(f)}{finding_note(f)}\n"
            for f in result.findings
            if not f.suppressed
        ]
        return "".join(lines)


class JsonFormatter(Formatter):
    """One object per finding. A fixable finding's ``fix`` holds its share of the file's fix as
    ``replacements`` (see :mod:`autofix.output.fixes`): applying those of all findings of a
    file gives the fixed file. ``fix`` is null when the finding is not fixed. In a notebook,
    ``cell`` is the cell's number as the text format says it (from 1) and ``cell_index`` the
    index into the notebook's ``cells`` list (from 0); ``line`` and ``column`` are the cell's."""

    name = "json"

    def __init__(self, unsafe_fixes: bool = False) -> None:
        super().__init__(unsafe_fixes)
        self.items: list[dict] = []

    def result(self, result: FileResult) -> str:
        from autofix.output.fixes import file_fixes

        fixes = file_fixes(result) if result.changed else None
        for index, f in enumerate(result.findings):
            if f.suppressed:
                continue
            fix = None
            if fixes is not None and index in fixes.by_finding:
                fix = {"replacements": [r.as_json() for r in fixes.by_finding[index]]}
            self.items.append(
                {
                    "path": display_path(finding_path(result, f)),
                    "code": f.code,
                    "name": f.name,
                    "message": f.message,
                    "line": f.line,
                    "column": f.column,
                    "end_line": f.end_line,
                    "end_column": f.end_column,
                    "cell": f.cell_number,
                    "cell_index": f.cell,
                    "fixable": f.fixable,
                    "unsafe": f.unsafe,
                    "reason": f.reason,
                    "fix": fix,
                    "related": related_items(result, f),
                }
            )
        if result.error:
            self.items.append({"path": display_path(result.path), "error": result.error})
        return ""

    def finish(self) -> str:
        return json.dumps(self.items, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubFormatter(Formatter):
    """GitHub Actions workflow commands: annotations on the pull request's files."""

    name = "github"

    def result(self, result: FileResult) -> str:
        path = _escape_property(display_path(result.path))
        positions = notebook_positions(result)
        out = []
        for f in result.findings:
            if f.suppressed:
                continue
            message = _escape_data(f"{f.message}{related_note(f)}{finding_note(f)}")
            if f.cell is not None:
                message = _escape_data(f"{place(f)}: ") + message
            # In a notebook, the place in its JSON text, which is what the pull request shows.
            line, column, end_line, end_column = file_region(f, positions)
            where = path if f.path is None else _escape_property(display_path(f.path))
            out.append(
                f"::warning file={where},line={line},col={column},"
                f"endLine={end_line},endColumn={end_column},title={f.code}::{message}\n"
            )
        if result.error:
            out.append(f"::error file={path},title=autofix::{_escape_data(result.error)}\n")
        return "".join(out)

