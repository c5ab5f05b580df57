"""Jupyter notebooks: their code cells analysed as one program, fixes written back into cells.

The code cells are joined into one Python program (a strategy made in cell 2 counts in
cell 5), with a wall statement between cells (``__autofix_cell__(4, b"<token>")``, see
:data:`autofix.analysis.syntax.CELL_MARKER`) so that no fix spans two of them, and with IPython syntax
masked (see :mod:`autofix.ipysyntax`). The token in the walls is the one the masks use: it
occurs nowhere in the notebook, so a user's own line can never be taken for a wall. Only the
``source`` values of changed cells are rewritten, in the file's own JSON style (see
:mod:`autofix.nbjson`); outputs, metadata, ids and every other byte of the file stay.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Callable

from autofix import ipysyntax, nbjson, newlines
from autofix.analysis.syntax import CELL_MARKER as MARKER

_LINE = re.compile(r"\bline (\d+)\b")
_LINES = re.compile(r"\blines (\d+(?:, \d+)+)\b")


class NotebookError(Exception):
    """The notebook cannot be read or written back safely; the message is for the user."""


@dataclass
class Notebook:
    text: str
    data: dict
    sources: dict[int, nbjson.Source]
    masker: ipysyntax.Masker
    # Indexes (in ``cells``) of the code cells in the program, in order.
    code_cells: list[int] = field(default_factory=list)
    program: str = ""
    # Program line (1-based) -> (cell index, line in the cell, 1-based); None for marker lines.
    lines: list[tuple[int, int] | None] = field(default_factory=list)
    # Program line (1-based) -> columns its code moved left when masked (``%time x``).
    shifts: dict[int, int] = field(default_factory=dict)
    # Cell index -> numbers of the IPython lines masked in it.
    magics: dict[int, set[int]] = field(default_factory=dict)

    def cell_of(self, line: int) -> tuple[int, int] | None:
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1]
        return None

    def in_cells(self, text: str) -> str:
        """``text`` with the program's "line 12" (and "lines 3, 12") said as the notebook's
        "cell 2, line 4": reasons name lines of the program the cells are joined into."""

        def one(line: str) -> str:
            where = self.cell_of(int(line))
            return f"cell {where[0] + 1}, line {where[1]}" if where else f"line {line}"

        text = _LINES.sub(lambda m: "; ".join(one(n) for n in m.group(1).split(", ")), text)
        return _LINE.sub(lambda m: one(m.group(1)), text)

    def column(self, line: int, column: int) -> int:
        """A column of a program line as a column of its line in the cell."""
        return column + self.shifts.get(line, 0)

    def marker(self, cell: int) -> str:
        return f'{MARKER}({cell}, b"{self.masker.token}")'


def load(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise NotebookError("not a notebook: no list of cells")
    version = data.get("nbformat", 4)
    if isinstance(version, int) and version < 4:
        raise NotebookError(f"nbformat {version} notebooks are not supported (only version 4)")
    if not isinstance(data.get("cells"), list):
        raise NotebookError("not a notebook: no list of cells")
    try:
        sources = nbjson.locate_sources(text)
    except (ValueError, IndexError) as exc:  # pragma: no cover - json.loads accepted it
        raise NotebookError(f"its JSON could not be followed ({exc})") from None
    notebook = Notebook(text, data, sources, ipysyntax.Masker(""))
    _build_program(notebook)
    return notebook


def is_python(data: dict) -> bool:
    metadata = data.get("metadata") or {}
    language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    return language in (None, "python", "python3", "ipython3")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise NotebookError("a cell's source is neither text nor a list of lines")


def _build_program(notebook: Notebook) -> None:
    code: list[tuple[int, str]] = []
    for index, cell in enumerate(notebook.data["cells"]):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {index + 1} is not an object")
        if cell.get("cell_type") == "code":
            code.append((index, _source(cell)))
    notebook.masker = ipysyntax.Masker(ipysyntax.new_token(notebook.text, *(source for _, source in code)))
    parts: list[str] = []
    lines: list[tuple[int, int] | None] = []
    for index, source in code:
        start = len(notebook.masker.magics)
        # A cell whose lines end with a lone \r (as Python and IPython read them) is read as
        # its copy with \n newlines: the program's lines are the cell's.
        masked = notebook.masker.cell(newlines.translate(source).text)
        if masked is None:
            continue  # a cell magic that is not Python (%%bash...)
        cell_lines, shifts = masked
        notebook.code_cells.append(index)
        notebook.magics[index] = set(range(start, len(notebook.masker.magics)))
        for offset, shift in shifts.items():
            notebook.shifts[len(lines) + offset + 1] = shift
        for number, line in enumerate(cell_lines, start=1):
            parts.append(line + "\n")
            lines.append((index, number))
        parts.append(notebook.marker(index) + "\n")
        lines.append(None)
    notebook.program = "".join(parts)
    notebook.lines = lines


def rebuild(notebook: Notebook, program: str) -> str:
    """The notebook's JSON text with its code cells taken from the fixed ``program``."""
    sources: dict[int, list[str]] = {}
    current: list[str] = []
    walls = {notebook.marker(index): index for index in notebook.code_cells}
    for line in program.split("\n"):
        stripped = line.rstrip("\r")
        if stripped in walls:
            sources[walls[stripped]] = current
            current = []
            continue
        if notebook.masker.token in line and MARKER in line:
            raise NotebookError("a fix would move code across cells")
        current.append(line)
    if current and any(current) or sorted(sources) != sorted(notebook.code_cells):
        raise NotebookError("a fix would move code across cells")
    edits: list[tuple[nbjson.Source, str]] = []
    for index, cell_lines in sources.items():
        try:
            restored = notebook.masker.restore(cell_lines, notebook.magics[index])
        except ipysyntax.RestoreError as exc:
            raise NotebookError(f"cell {index + 1}: {exc}") from None
        old = _source(notebook.data["cells"][index])
        copy = newlines.translate(old)
        new = "\n".join(restored)
        if not copy.text.endswith("\n") and new.endswith("\n"):
            new = new[:-1]
        new = copy.restore(new)
        if new == old:
            continue
        if not ipysyntax.ipython_reads(new):
            raise NotebookError(f"cell {index + 1}: the fixed cell would not run under IPython")
        edits.append((notebook.sources[index], new))
    text = notebook.text
    style = nbjson.Style.of(text, notebook.sources)
    for source, new in sorted(edits, key=lambda edit: edit[0].start, reverse=True):
        text = text[: source.start] + nbjson.source_value(text, source, new, style) + text[source.end :]
    return text


def file_positions(text: str) -> Callable[[int, int, int], tuple[int, int] | None] | None:
    """See :func:`autofix.nbjson.file_positions`."""
    return nbjson.file_positions(text)


def cell_sources(text: str) -> list[tuple[int, str]]:
    """``(cell index, source)`` of the code cells of a notebook's JSON text."""
    data = json.loads(text)
    return [(i, _source(c)) for i, c in enumerate(data.get("cells", [])) if isinstance(c, dict) and c.get("cell_type") == "code"]


def cell_diffs(old: str, new: str, path: str) -> str:
    """A unified diff per changed code cell, headed with the cell's number (for reading)."""
    before = dict(cell_sources(old))
    out = []
    for index, source in cell_sources(new):
        previous = before.get(index)
        if previous is None or previous == source:
            continue
        name = f"{path}:cell {index + 1}"
        lines = difflib.unified_diff(
            (previous + "\n").splitlines(keepends=True),
            (source + "\n").splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
        out.append("".join(lines))
    return "".join(out)


# ``%env NAME=VALUE`` or ``%env NAME VALUE`` (IPython's env magic), the value unquoted.
_ENV = re.compile(r"^\s*%env\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s*=\s*|\s+)([A-Za-z0-9_.\-]+)\s*$")


def env_magics(notebook: Notebook) -> tuple[tuple[bytes, str, str], ...]:
    """The notebook's one-line ``%env NAME=VALUE`` magics: (the bytes of the literal masking
    it in the program, NAME, VALUE)."""
    found = []
    for magic in notebook.masker.magics:
        if len(magic.original) != 1 or magic.statement_prefix is not None:
            continue
        match = _ENV.match(magic.original[0])
        if match is not None:
            found.append((f"{notebook.masker.token}_{magic.number}".encode(), match.group(1), match.group(2)))
    return tuple(found)


def shell_lines(notebook: Notebook) -> list[str]:
    """The IPython lines (shell commands, magics) the program the rules see leaves out."""
    return [line for magic in notebook.masker.magics for line in magic.original]
