"""Code whose lines end with a lone carriage return (classic Mac OS, some old editors and
generators): analysed as a copy with ``\\n`` newlines, and its fix brought back in the file's own.

Python reads ``\\r``, ``\\r\\n`` and ``\\n`` alike as the end of a line (even inside a string
that spans lines, whose value holds ``\\n`` either way), but most of what reads lines splits at
``\\n`` only: the tokenize module, libcst's positions, the depth check, the line maps of
indentation and notebooks, ``# autofix: ignore`` comments. The copy has the same characters
but for each lone ``\\r``, which becomes ``\\n``: the same lines, the same columns, the same
program. A fix made on the copy is brought back line by line: a line the fix did not touch is
the original line with its own newline; a line it wrote ends with the file's newline (the lone
``\\r`` unless the file has more ``\\n`` ones), and a ``\\r\\n`` stays as it is.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_LONE_CR = re.compile(r"\r(?!\n)")
# A line and its newline, as Python ends lines: \r\n, a lone \r, or \n.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def has_lone_cr(text: str) -> bool:
    return "\r" in text and _LONE_CR.search(text) is not None


def lines(text: str) -> list[str]:
    """``text`` split into lines as Python reads them, each with its newline (``\\r\\n``, a
    lone ``\\r`` or ``\\n``; unlike ``str.splitlines``, nothing else ends a line)."""
    return _LINE.findall(text)


@dataclass(frozen=True)
class Translated:
    """``original`` with each lone ``\\r`` written as ``\\n`` (``text``)."""

    original: str
    text: str

    @property
    def newline(self) -> str:
        """The newline of lines a fix writes: the file's most common one."""
        lone = len(_LONE_CR.findall(self.original))
        bare = self.original.count("\n") - self.original.count("\r\n")
        return "\r" if lone > bare else "\n"

    def restore(self, fixed: str) -> str:
        """The fixed copy in the original's newlines (see the module docstring)."""
        if fixed == self.text or self.text == self.original:
            return fixed
        before, copy, after = lines(self.original), lines(self.text), lines(fixed)
        newline = self.newline
        out: list[str] = []
        matcher = difflib.SequenceMatcher(None, copy, after, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out.extend(before[i1:i2])
            else:
                out.extend(_ended(line, newline) for line in after[j1:j2])
        return "".join(out)


def translate(text: str) -> Translated:
    return Translated(text, _LONE_CR.sub("\n", text))


def _ended(line: str, newline: str) -> str:
    if line.endswith("\n") and not line.endswith("\r\n"):
        return line[:-1] + newline
    return line
