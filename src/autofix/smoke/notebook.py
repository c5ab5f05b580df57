"""A notebook's code cells as one program to smoke-test (parent side, no TensorFlow).

The cells are read as the rules read them (:func:`autofix.notebooks.load`: joined in order,
IPython syntax found by IPython's own ``TransformerManager`` and masked): ``%time <statement>``
runs the statement, ``%%time`` and ``%%capture`` cells run their body, and every other magic or
shell line is skipped, with a note naming it. Cells in another language (``%%bash``...) are
skipped with a note too. The program runs as Jupyter's "run all" would, in one namespace, as
``__main__`` with the notebook's folder as the working folder.

A notebook that cannot be run this way is refused, in one line that says where and why:
not a notebook, not Python, a cell neither Python nor IPython reads, a line that uses what a
magic or shell command returns (``files = !ls``), or a magic that changes what the program
does (``%cd``, ``%env``, ``%run``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from typing import TYPE_CHECKING

from autofix.ipysyntax import PYTHON_CELL_MAGICS

if TYPE_CHECKING:
    from autofix import notebooks

# Line magics whose effect the program depends on: skipping them would run another program.
STATEFUL_MAGICS = {
    "cd": "changes the working folder",
    "pushd": "changes the working folder",
    "popd": "changes the working folder",
    "env": "sets environment variables",
    "set_env": "sets environment variables",
    "run": "runs another file in the notebook's namespace",
    "load": "loads code into the cell",
    "store": "restores variables from IPython's store",
    "reset": "clears the namespace",
    "xdel": "deletes variables",
    "autoawait": "changes how the cells run",
}


class Refused(Exception):
    """The notebook cannot be smoke-tested as one program; the message says where and why."""


@dataclass(frozen=True)
class Program:
    """The program to run: its text, the (cell index, line in the cell) of each line (None for
    the lines between cells), and what was skipped."""

    text: str
    cells: tuple[tuple[int, int] | None, ...]
    notes: tuple[str, ...]


def is_notebook(path: str) -> bool:
    return str(path).endswith(".ipynb")


def program(path: str) -> Program:
    from autofix import notebooks  # the rules' reading of cells (libcst's, too): only for notebooks

    try:
        with open(path, encoding="utf-8-sig") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"cannot read the notebook ({exc})") from None
    try:
        notebook = notebooks.load(text)
    except notebooks.NotebookError as exc:
        raise Refused(f"not a notebook that can be run: {exc}") from None
    if not notebooks.is_python(notebook.data):
        raise Refused("the notebook's kernel is not Python")
    lines = notebook.program.split("\n")
    cells: list[tuple[int, int] | None] = list(notebook.lines) + [None] * (len(lines) - len(notebook.lines))
    notes: list[tuple[tuple[int, int], str]] = _left_out_cells(notebook)
    where = _magic_lines(notebook, lines)
    for magic in notebook.masker.magics:
        if magic.statement_prefix is not None or magic.cell_head:
            continue  # %time <statement>, %%time / %%capture: they run as their code
        line = where.get(magic.number)
        place = _place(cells[line]) if line is not None and cells[line] else "a cell"
        shown = " ".join(part.strip() for part in magic.original).rstrip("\\ ")
        kind = _kind(shown)
        if line is not None and not lines[line].lstrip().startswith(f'b"{notebook.masker.token}'):
            raise Refused(f"{place}: `{shown}` uses what a {kind} returns, which the smoke test does not run")
        name = _magic_name(shown)
        if name in STATEFUL_MAGICS:
            raise Refused(f"{place}: `{shown}` {STATEFUL_MAGICS[name]}, which the smoke test does not do: the cells would run as another program")
        notes.append((cells[line] if line is not None and cells[line] else (0, 0), f"{place}: skipped `{shown}` ({kind})"))
    runnable = [line if cells[i] is not None else "" for i, line in enumerate(lines)]
    source = "\n".join(runnable)
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        found = cells[exc.lineno - 1] if exc.lineno and exc.lineno <= len(cells) else None
        place = _place(found) if found else "a cell"
        raise Refused(f"{place}: neither Python nor IPython can read it ({exc.msg})") from None
    return Program(source, tuple(cells), tuple(text for _, text in sorted(notes)))


def _place(where: tuple[int, int]) -> str:
    return f"cell {where[0] + 1}, line {where[1]}"


def _left_out_cells(notebook: notebooks.Notebook) -> list[tuple[tuple[int, int], str]]:
    notes = []
    for index, cell in enumerate(notebook.data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or index in notebook.code_cells:
            continue
        source = "".join(cell.get("source") or "") if isinstance(cell.get("source"), list) else str(cell.get("source") or "")
        head = next((line.strip() for line in source.split("\n") if line.strip()), "")
        if head.startswith("%%") and head[2:].split(maxsplit=1)[0] not in PYTHON_CELL_MAGICS:
            notes.append(((index, 0), f"cell {index + 1}: skipped a `{head.split()[0]}` cell (not Python)"))
        else:
            notes.append(((index, 0), f"cell {index + 1}: skipped (not Python)"))
    return notes


def _magic_lines(notebook: notebooks.Notebook, lines: list[str]) -> dict[int, int]:
    """The program line (0-based) holding each masked magic's first line."""
    pattern = re.compile(rf"{re.escape(notebook.masker.token)}_(\d+)\b")
    found: dict[int, int] = {}
    for index, line in enumerate(lines):
        for match in pattern.finditer(line):
            found.setdefault(int(match.group(1)), index)
    return found


def _kind(shown: str) -> str:
    text = shown.split("=", 1)[1].strip() if re.match(r"^[\w\s,.\[\]()*]+=\s*[!%]", shown) else shown
    if text.startswith("!"):
        return "shell command"
    if text.startswith("%"):
        return "magic"
    return "help"


def _magic_name(shown: str) -> str:
    match = re.match(r"^%{1,2}(\w+)", shown.strip())
    return match.group(1) if match else ""
