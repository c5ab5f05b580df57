"""The training a comparing run has still ahead of it, for ``--compare`` (child side).

A comparing run records K steps of every *phase* of training the script runs (a teacher's
``fit``, then its student distilled with ``distiller.fit``: two phases), not only the first.
Once a phase's steps are recorded, the run goes on only while the script has training ahead:
a call written in the script that trains (``fit``, ``fit_generator``, ``train_on_batch``,
``strategy.run``, ``apply_gradients``, ``minimize``, an optimizer's ``apply``) that

- was not on the stack when a training call or an update was seen (*reached*), and
- is still ahead of where the program is: in its top-level code after the statement running
  now, after the line a function of the program on the stack is at, or in a function or class
  that code names (and what those name in turn: a ``main()`` calling ``train()``).

So a ``datagen.fit(x)`` before training does not keep the run going, and a script with one
training call ends where it ended before, right after its K steps.

Read from the program's text (a ``.py``, or a notebook's cells joined into one program):
nothing here imports TensorFlow.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from typing import Any

TRAINING_CALLS = ("fit", "fit_generator", "train_on_batch", "apply_gradients", "minimize")


@dataclass
class _Program:
    calls: list[tuple[int, int, str, str | None]] = field(default_factory=list)  # first, last, what, owner
    statements: list[tuple[int, int, list[tuple[int, str]]]] = field(default_factory=list)  # top level
    owners: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # def or class -> names it reads
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)


_filename: str | None = None
_program = _Program()
_reached: set[int] = set()


def start(filename: str | None, text: str | None) -> None:
    """Before a comparing run (``filename``: the program's, as its frames name it)."""
    global _filename, _program
    _filename, _program = filename, _Program()
    _reached.clear()
    if filename is None or text is None:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        _filename = None
        return
    _program = read(tree)


def read(tree: ast.Module) -> _Program:
    program = _Program()
    for statement in tree.body:
        owner = statement.name if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None
        names = [(n.lineno, n.id if isinstance(n, ast.Name) else n.attr) for n in ast.walk(statement) if isinstance(n, (ast.Name, ast.Attribute))]
        if owner is None:
            program.statements.append((statement.lineno, statement.end_lineno or statement.lineno, names))
        else:
            program.owners[owner] = names
            program.spans[owner] = (statement.lineno, statement.end_lineno or statement.lineno)
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _trains(node.func):
                program.calls.append((node.lineno, node.end_lineno or node.lineno, ast.unparse(node.func), owner))
    program.calls.sort()
    return program


def training_calls(text: str) -> list[tuple[int, int, str]]:
    """Each call of ``text`` that trains: (first line, last line, the call as written)."""
    try:
        return [(first, last, what) for first, last, what, _ in read(ast.parse(text)).calls]
    except (SyntaxError, ValueError):
        return []


def _trains(func: ast.Attribute) -> bool:
    receiver = ast.unparse(func.value).lower()
    return func.attr in TRAINING_CALLS or (func.attr == "run" and "strateg" in receiver) or (func.attr == "apply" and "opt" in receiver)


def _frames() -> list[Any]:
    """The program's frames on every thread's stack (a replica's step runs in a thread of its
    own: MirroredStrategy's, or the reference's virtual replicas, whose update is made by the
    thread that averages them)."""
    found = []
    try:
        stacks = list(sys._current_frames().values())
    except Exception:
        stacks = [sys._getframe()]
    for frame in stacks:
        while frame is not None:
            if frame.f_code.co_filename == _filename:
                found.append(frame)
            frame = frame.f_back
    return found


def reached_here() -> None:
    """The lines of the program on the stack now: a training call or an update is being made."""
    if _filename is None:
        return
    for frame in _frames():
        _reached.add(frame.f_lineno)


def ahead() -> list[str]:
    """The training calls of the program still ahead of it (``what at line N``): empty when the
    program's text is not known, or when it has no training call left to make."""
    if _filename is None or not _program.calls:
        return []
    frames = _frames()
    top = [f.f_lineno for f in frames if f.f_code.co_name == "<module>"]
    if not top:
        return [f"{what} at line {first}" for first, last, what, _ in _program.calls if not _hit(first, last)]
    here = max(top)
    running = [(f.f_code.co_firstlineno, f.f_lineno) for f in frames if f.f_code.co_name != "<module>"]
    # The names the rest of the program reads: top-level code after this line, the rest of
    # each function running now, and what the functions and classes they name read.
    names = {name for start, end, read_names in _program.statements if end >= here for line, name in read_names if line > here}
    for owner, (start, end) in _program.spans.items():
        for first, line in running:
            if start <= first <= end:
                names |= {name for at, name in _program.owners[owner] if at >= line}
    closed: set[str] = set()
    while True:
        more = {n for n in names if n in _program.owners and n not in closed}
        if not more:
            break
        closed |= more
        for owner in more:
            names |= {name for _, name in _program.owners[owner]}
    found = []
    for first, last, what, owner in _program.calls:
        if _hit(first, last):
            continue
        if owner is None and first > here or owner in closed or any(first > line and _within(owner, first_line) for first_line, line in running):
            found.append(f"{what} at line {first}")
    return found


def _within(owner: str | None, first_line: int) -> bool:
    span = _program.spans.get(owner or "")
    return span is not None and span[0] <= first_line <= span[1]


def _hit(first: int, last: int) -> bool:
    return any(line in _reached for line in range(first, last + 1))
