"""Jupyter notebooks: their code cells analysed as one program, fixes written back into cells.

The code cells are joined into one Python program (a strategy made in cell 2 counts in
cell 5), with a marker statement between cells so that no fix spans two of them, and with
IPython syntax (``%magic``, ``!shell``, ``x = !cmd``, ``obj?``, ``%%cell magics``) hidden behind
placeholder comments that are put back afterwards. Only the sources of changed cells are
replaced: outputs, metadata, ids and the rest are kept, and the file is written back in its
own JSON style (indent, key order, escaping, final newline). A notebook whose JSON style
cannot be reproduced exactly is reported, never rewritten.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Callable

from autofix.codegen import CELL_MARKER as MARKER

_MARKER_LINE = re.compile(rf"^{MARKER}\((\d+)\)\r?$")
_PLACEHOLDER = "# autofix-ipython:"
_PLACEHOLDER_LINE = re.compile(rf"^(\s*){re.escape(_PLACEHOLDER)}(\d+)$")
# Lines IPython transforms before Python sees them.
_IPYTHON_LINE = re.compile(r"^\s*(?:[%!]|\w[\w.]*\s*=\s*[%!])|\?\s*$")


class NotebookError(Exception):
    """The notebook cannot be read or written back safely; the message is for the user."""


@dataclass
class Style:
    indent: int | None
    ensure_ascii: bool
    final_newline: bool


@dataclass
class Notebook:
    data: dict
    style: Style
    # Indexes (in ``cells``) of the code cells in the program, in order.
    code_cells: list[int] = field(default_factory=list)
    program: str = ""
    # Program line (1-based) -> (cell index, line in the cell, 1-based); None for marker lines.
    lines: list[tuple[int, int] | None] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)

    def cell_of(self, line: int) -> tuple[int, int] | None:
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1]
        return None


def load(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a notebook: no list of cells")
    if data.get("nbformat", 4) < 4:
        raise NotebookError(f"nbformat {data.get('nbformat')} notebooks are not supported (only version 4)")
    style = _style(text)
    if dumps(data, style) != text:
        raise NotebookError("its JSON layout cannot be reproduced exactly, so it would not be written back unchanged")
    notebook = Notebook(data, style)
    _build_program(notebook)
    return notebook


def is_python(data: dict) -> bool:
    metadata = data.get("metadata") or {}
    language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    return language in (None, "python", "python3", "ipython3")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise NotebookError("a cell's source is neither text nor a list of lines")


def _build_program(notebook: Notebook) -> None:
    parts: list[str] = []
    lines: list[tuple[int, int] | None] = []
    for index, cell in enumerate(notebook.data["cells"]):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {index + 1} is not an object")
        if cell.get("cell_type") != "code":
            continue
        source = _source(cell)
        if source.lstrip().startswith("%%"):
            continue  # a cell magic: the whole cell is not Python
        notebook.code_cells.append(index)
        cell_lines = source.split("\n")
        for number, line in enumerate(cell_lines, start=1):
            if _IPYTHON_LINE.search(line) and not line.lstrip().startswith("#"):
                indent = line[: len(line) - len(line.lstrip())]
                notebook.placeholders.append(line)
                line = f"{indent}{_PLACEHOLDER}{len(notebook.placeholders) - 1}"
            parts.append(line + "\n")
            lines.append((index, number))
        parts.append(f"{MARKER}({index})\n")
        lines.append(None)
    notebook.program = "".join(parts)
    notebook.lines = lines


def rebuild(notebook: Notebook, program: str) -> str:
    """The notebook's JSON text with its code cells taken from the fixed ``program``."""
    sources: dict[int, list[str]] = {}
    current: list[str] = []
    for line in program.split("\n"):
        match = _MARKER_LINE.match(line)
        if match:
            sources[int(match.group(1))] = current
            current = []
            continue
        if line.lstrip().startswith(MARKER):
            raise NotebookError("a fix would move code across cells")
        placeholder = _PLACEHOLDER_LINE.match(line)
        if placeholder:
            original = notebook.placeholders[int(placeholder.group(2))]
            line = placeholder.group(1) + original.lstrip() if placeholder.group(1) else original
        current.append(line)
    if current and any(current) or sorted(sources) != sorted(notebook.code_cells):
        raise NotebookError("a fix would move code across cells")
    data = json.loads(json.dumps(notebook.data))
    for index, cell_lines in sources.items():
        cell = data["cells"][index]
        old = _source(cell)
        new = "\n".join(cell_lines)
        if not old.endswith("\n") and new.endswith("\n"):
            new = new[:-1]
        if new == old:
            continue
        if isinstance(cell.get("source"), list):
            cell["source"] = new.splitlines(keepends=True)
        else:
            cell["source"] = new
    return dumps(data, notebook.style)


def _style(text: str) -> Style:
    indent = None
    for line in text.split("\n")[1:3]:
        stripped = line.lstrip(" ")
        if stripped and len(stripped) != len(line):
            indent = len(line) - len(stripped)
            break
    ensure_ascii = not any(ord(ch) > 127 for ch in text)
    return Style(indent=indent, ensure_ascii=ensure_ascii, final_newline=text.endswith("\n"))


def dumps(data: dict, style: Style) -> str:
    text = json.dumps(data, indent=style.indent, ensure_ascii=style.ensure_ascii)
    return text + "\n" if style.final_newline else text


_TAG = re.compile(r"\\u0000autofix(\d+)\\u0000")


def file_positions(text: str) -> Callable[[int, int, int], tuple[int, int] | None] | None:
    """A map from a place in a code cell (cell index; line in the cell and column, 1-based) to
    the same place in the notebook's own JSON text (line and column, 1-based), where code hosts
    show it; None when the notebook cannot be read.

    Each source string (one per line, or one for the whole cell) is tagged with a numbered
    prefix and the notebook dumped in its own style: the tags show on which line of the file,
    and at which column, each string starts; a column inside it is that plus the length of
    what precedes it, as JSON escapes it."""
    try:
        notebook = load(text)
    except NotebookError:
        return None
    data = copy.deepcopy(notebook.data)
    pieces: dict[int, list[tuple[int, str, int]]] = {}  # cell -> [(first line, string, tag)]
    count = 0
    for index in notebook.code_cells:
        cell = data["cells"][index]
        source = cell.get("source", "")
        strings = source if isinstance(source, list) else [source]
        tagged = []
        line = 1
        for string in strings:
            pieces.setdefault(index, []).append((line, string, count))
            tagged.append(f"\x00autofix{count}\x00{string}")
            line += string.count("\n")
            count += 1
        cell["source"] = tagged if isinstance(source, list) else tagged[0]
    dumped = dumps(data, notebook.style)
    starts: dict[int, tuple[int, int]] = {}
    line, line_start, scanned = 1, 0, 0
    shift_line, shift = 0, 0
    for match in _TAG.finditer(dumped):
        newlines = dumped.count("\n", scanned, match.start())
        if newlines:
            line += newlines
            line_start = dumped.rfind("\n", 0, match.start()) + 1
        scanned = match.start()
        if line != shift_line:
            shift_line, shift = line, 0
        starts[int(match.group(1))] = (line, match.start() - line_start - shift)
        shift += match.end() - match.start()
    ensure_ascii = notebook.style.ensure_ascii

    def position(cell: int, line: int, column: int) -> tuple[int, int] | None:
        holder = None
        for first, string, tag in pieces.get(cell, ()):
            if first > line:
                break
            holder = (first, string, tag)
        if holder is None or holder[2] not in starts:
            return None
        first, string, tag = holder
        offset = 0
        for _ in range(line - first):
            offset = string.find("\n", offset) + 1
        offset = min(offset + column - 1, len(string))
        file_line, file_column = starts[tag]
        escaped = json.dumps(string[:offset], ensure_ascii=ensure_ascii)[1:-1]
        return file_line, file_column + len(escaped) + 1

    return position


def cell_sources(text: str) -> list[tuple[int, str]]:
    """``(cell index, source)`` of the code cells of a notebook's JSON text."""
    data = json.loads(text)
    return [(i, _source(c)) for i, c in enumerate(data.get("cells", [])) if isinstance(c, dict) and c.get("cell_type") == "code"]


def cell_diffs(old: str, new: str, path: str) -> str:
    """A unified diff per changed code cell, headed with the cell's number."""
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
