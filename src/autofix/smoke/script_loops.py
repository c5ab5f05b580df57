"""The script's own ``for`` loops around its first update, and how many times each runs.

Every comparing run is capped to the steps compared, so a loop of the script that would have
run for fewer epochs (``for epoch in range(EPOCHS // 2)``) or more steps is never seen
running out. When the first update is made, each frame of the script's code on the stack is at
a line; the ``for`` statements of its source around that line are the loops the update runs
in, outermost first. A loop over ``range(...)`` (also through ``enumerate``, ``tqdm`` and
``trange``) is given its length, its arguments evaluated in the frame as they stand then (only
names, attributes, items, numbers, arithmetic and ``len`` / ``int`` / ``min`` / ``max`` /
``round`` / ``math.ceil`` / ``math.floor``: nothing that could change what the script does);
a loop over anything else (a dataset, an iterator, ``zip(range(n), ds)``) is "other": how many
times it runs is its data's business (:func:`autofix.smoke.verdict.epochs` compares the
datasets' epochs).

:func:`autofix.smoke.verdict.loops` compares the two runs' loops.
"""

from __future__ import annotations

import ast
import linecache
import math
from typing import Any

from autofix.smoke.state import _is_user_file, place

_CALLS = {"len": len, "int": int, "min": min, "max": max, "round": round, "abs": abs}
_MATH = {"ceil": math.ceil, "floor": math.floor}
# Wrappers whose first argument is what they iterate (``enumerate(range(n))``, ``tqdm(range(n))``).
_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm_notebook", "tnrange", "notebook_tqdm"})
_parsed: dict[str, ast.Module | None] = {}


def around(start: Any) -> list[dict[str, Any]]:
    """The ``for`` loops of the script's code around the point ``start`` (a frame), outermost
    first: ``{"site", "kind": "range" | "other", "length"}``."""
    frames = []
    frame = start
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename):
            frames.append(frame)
        frame = frame.f_back
    found: list[dict[str, Any]] = []
    for frame in reversed(frames):
        found.extend(_loops_in(frame))
    return found


def _loops_in(frame: Any) -> list[dict[str, Any]]:
    filename, line = frame.f_code.co_filename, frame.f_lineno
    tree = _tree(filename)
    if tree is None:
        return []
    found = []
    for node in _enclosing_fors(tree, line, frame.f_code.co_firstlineno):
        length = _length(node.iter, frame)
        kind = "range" if length is not None else "other"
        found.append({"site": place(filename, node.lineno), "kind": kind, "length": length})
    return found


def _tree(filename: str) -> ast.Module | None:
    if filename not in _parsed:
        try:
            _parsed[filename] = ast.parse("".join(linecache.getlines(filename)))
        except (SyntaxError, ValueError):
            _parsed[filename] = None
    return _parsed[filename]


def _enclosing_fors(tree: ast.AST, line: int, first: int) -> list[ast.For]:
    """The ``for`` statements whose body holds ``line``, outermost first, in the code of the
    frame whose code starts at line ``first`` (a function's own loops: those of the code
    around its definition are its callers' frames', or none)."""
    found: list[ast.For] = []
    node: ast.AST = tree
    while True:
        inner = None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.ExceptHandler, ast.match_case)) and _holds(child, line):
                inner = child
                break
        if inner is None:
            return found
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            starts = min([inner.lineno, *(d.lineno for d in inner.decorator_list)])
            if starts != first:
                return found  # the line is in code another frame runs
            found = []  # this frame's code: the loops around the definition are not its own
        elif isinstance(inner, (ast.For, ast.AsyncFor)) and any(_holds(s, line) for s in inner.body):
            found.append(inner)  # type: ignore[arg-type]
        node = inner


def _holds(node: ast.AST, line: int) -> bool:
    start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    return start is not None and end is not None and start <= line <= end


def _length(iterable: ast.expr, frame: Any) -> int | None:
    """How many times a loop over ``iterable`` runs, when it is a range the frame can say."""
    if not isinstance(iterable, ast.Call) or iterable.keywords:
        return None
    name = _called(iterable.func)
    if name in _WRAPPERS and iterable.args:
        return _length(iterable.args[0], frame)
    if name not in ("range", "trange") or not 1 <= len(iterable.args) <= 3:
        return None
    try:
        values = [_evaluate(arg, frame) for arg in iterable.args]
        return len(range(*values))
    except Exception:
        return None


def _called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class _Unsafe(Exception):
    pass


def _evaluate(node: ast.expr, frame: Any) -> Any:
    """The value of a side-effect-free expression in ``frame``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in frame.f_locals:
            return frame.f_locals[node.id]
        if node.id in frame.f_globals:
            return frame.f_globals[node.id]
        raise _Unsafe(node.id)
    if isinstance(node, ast.Attribute):
        value = _evaluate(node.value, frame)
        if node.attr.startswith("_"):
            raise _Unsafe(node.attr)
        return getattr(value, node.attr)
    if isinstance(node, ast.Subscript):
        return _evaluate(node.value, frame)[_evaluate(node.slice, frame)]
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, frame), _evaluate(node.right, frame)
        operators = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                     ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b}
        operator = operators.get(type(node.op))
        if operator is None or not all(isinstance(v, (int, float)) or hasattr(v, "__index__") for v in (left, right)):
            raise _Unsafe("operator")
        return operator(left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, frame)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _CALLS:
            function = _CALLS[func.id]
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math" and func.attr in _MATH:
            function = _MATH[func.attr]
        else:
            raise _Unsafe("call")
        return function(*[_evaluate(arg, frame) for arg in node.args])
    raise _Unsafe(type(node).__name__)
