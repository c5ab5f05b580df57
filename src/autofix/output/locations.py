"""Where files are, for reports read by a code host: paths relative to the repository root."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable

from autofix.results import FileResult, Finding
from autofix.sourcefile import SourceError, read_source

Positions = Callable[[int, int, int], "tuple[int, int] | None"]


def source_root(start: str | None = None) -> str:
    """The git work tree holding ``start`` (default: the working directory), else ``start``.

    Code hosts resolve report paths against the repository root, which is not the working
    directory when autofix runs in a subdirectory.
    """
    here = os.path.abspath(start or os.getcwd())
    directory = here
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return here
        directory = parent


def root_relative(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` with forward slashes; None when it lies outside ``root``
    (or is standard input)."""
    if path == "-":
        return None
    relative = os.path.relpath(os.path.abspath(path), root)
    if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
        return None
    return relative.replace(os.sep, "/")


def notebook_positions(result: FileResult) -> Positions | None:
    """For a notebook with findings: the map from places in its cells to places in its JSON
    text (see :func:`autofix.nbjson.file_positions`); None otherwise."""
    if not result.notebook or not any(f.cell is not None for f in result.findings):
        return None
    text = result.old_text
    if text is None:
        try:
            text = read_source(result.path).text
        except (SourceError, OSError):
            return None
    from autofix import nbjson

    return nbjson.file_positions(text)


def place(finding: Finding) -> str:
    """``line N``, or ``cell M, line N`` in a notebook (cells counted from 1), for messages
    read next to the file rather than the cell."""
    if finding.cell is not None:
        return f"cell {finding.cell_number}, line {finding.line}"
    return f"line {finding.line}"


def placed(result: FileResult) -> list[Finding] | None:
    """The result's findings placed in the lines of the file's own text: a notebook's (placed
    by cell) in the lines of its JSON, where its diff's hunks are, with no cell any more. None
    for a notebook whose findings cannot be placed (its JSON cannot be read)."""
    findings = list(result.findings)
    if not result.notebook:
        return findings
    positions = notebook_positions(result)
    if positions is None:
        return None
    out = []
    for finding in findings:
        line, column, end_line, end_column = file_region(finding, positions)
        out.append(replace(finding, line=line, column=column, end_line=end_line, end_column=end_column, cell=None))
    return out


def file_region(finding: Finding, positions: Positions | None) -> tuple[int, int, int, int]:
    """``(line, column, end line, end column)`` of a finding in the file itself: for a
    notebook, in its JSON text, which is what a code host shows; the cell's own when that
    place cannot be found."""
    own = (finding.line, finding.column, finding.end_line, finding.end_column)
    if finding.cell is None or positions is None:
        return own
    start = positions(finding.cell, finding.line, finding.column)
    end = positions(finding.cell, finding.end_line, finding.end_column)
    if start is None or end is None:
        return own
    return (*start, *end)
