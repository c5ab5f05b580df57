"""Unified diffs that ``git apply`` and ``patch -p1`` accept."""

from __future__ import annotations

import difflib
import os

NO_NEWLINE = "\\ No newline at end of file\n"


def display_path(path: str) -> str:
    """The path as it should appear in diffs and reports: relative to the working directory
    when it is inside it, with forward slashes."""
    if os.path.isabs(path):
        try:
            relative = os.path.relpath(path)
        except ValueError:
            relative = path
        if not relative.startswith(".."):
            path = relative
    path = os.path.normpath(path)
    return path.replace(os.sep, "/")


def lines_of(text: str) -> list[str]:
    """Lines as git sees them: split at ``\n`` only (``\r\n`` stays on the line; a form feed
    or a lone ``\r`` does not end one, unlike ``str.splitlines``)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(old: str, new: str, path: str, context: int = 3) -> str:
    name = display_path(path)
    lines = difflib.unified_diff(
        lines_of(old),
        lines_of(new),
        f"a/{name}",
        f"b/{name}",
        n=context,
    )
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE)
    return "".join(out)
