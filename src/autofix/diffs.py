"""Unified diffs that ``git apply`` and ``patch -p1`` accept.

A diff is bytes: the lines of the file as they are on disk, in its own encoding and with its
BOM, so that the context lines match the file byte for byte. File names are written as git
writes them: C-quoted when they hold a quote, a backslash, a control character or a non-ASCII
byte, and followed by a tab when they hold a space (GNU patch reads a name up to a tab).
"""

from __future__ import annotations

import os
from typing import Callable

from autofix.sourcefile import encode

NO_NEWLINE = b"\\ No newline at end of file\n"

_ESCAPES = {
    ord("\a"): "\\a",
    ord("\b"): "\\b",
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\v"): "\\v",
    ord("\f"): "\\f",
    ord("\r"): "\\r",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
}


def line_style(line: str) -> str:
    """The color a diff line is shown in on a terminal (a rich style; "" for context)."""
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("@@"):
        return "cyan"
    return ""


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


def header_name(name: str) -> bytes:
    """``name`` as git writes it after ``---`` / ``+++``."""
    raw = os.fsencode(name)
    if any(byte < 0x20 or byte >= 0x7F or byte in b'"\\' for byte in raw):
        quoted = "".join(_ESCAPES.get(byte) or (chr(byte) if 0x20 <= byte < 0x7F else f"\\{byte:03o}") for byte in raw)
        return f'"{quoted}"'.encode("ascii")
    return raw + b"\t" if b" " in raw else raw


def unified_diff(
    old: str,
    new: str,
    path: str,
    encoding: str = "utf-8",
    bom: bool = False,
    context: int = 3,
    split: Callable[[str], list[str]] = lines_of,
) -> bytes:
    """The diff from ``old`` to ``new`` of the file at ``path``, as the bytes of that file, in
    the lines ``split`` makes (git's, so that it applies; Python's, to be read)."""
    import difflib

    name = display_path(path)
    # Latin-1 maps every byte to one character and back: difflib compares the file's bytes.
    before = split(encode(old, encoding, bom).decode("latin-1"))
    after = split(encode(new, encoding, bom).decode("latin-1"))
    lines = difflib.unified_diff(before, after, n=context, lineterm="\n")
    out = []
    for number, line in enumerate(lines):
        if number == 0:
            out.append(b"--- " + header_name(f"a/{name}") + b"\n")
        elif number == 1:
            out.append(b"+++ " + header_name(f"b/{name}") + b"\n")
        elif line.endswith("\n") or (split is not lines_of and line.endswith("\r")):
            out.append(line.encode("latin-1"))
        else:
            out.append(line.encode("latin-1") + b"\n" + NO_NEWLINE)
    return b"".join(out)
