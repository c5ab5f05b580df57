"""Code that Python runs but libcst cannot take as it is written: analysed as a normalised copy.

Two cases, both about the whitespace that starts a line:

- Tabs and spaces mixed so that a block's indentation does not start with its parent block's
  (``if a:`` / `` for q in r:`` / ``<tab>     y = 2``): CPython measures indentation in columns
  (a tab goes to the next multiple of 8) and accepts it; libcst keeps indentation as text
  relative to the parent block and cannot.
- A form feed at the start of a line (a page break in older code): CPython resets the column
  there; libcst drops the character when it writes the tree back.

The copy has the indentation of each such line written as the spaces CPython counts; it has the
same lines, so findings keep their line numbers (columns are mapped back). A fix made on the
copy is brought back line by line: lines the fix did not touch are the original lines, byte for
byte; a line it rewrote is indented like the original lines of the same depth. The result must
mean to CPython exactly what the fixed copy means (same columns, no TabError), or the fix is
refused with the line that stands in its way.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
import warnings
from dataclasses import dataclass, field

_FORM_FEED = re.compile(r"^[ \t]*\f", re.M)


class CannotKeep(Exception):
    """The fixed copy cannot be written back in the file's own indentation."""


def has_form_feed(text: str) -> bool:
    return bool(_FORM_FEED.search(text))


def _column(whitespace: str) -> int:
    """The column CPython's tokenizer gives the first character after ``whitespace``."""
    column = 0
    for ch in whitespace:
        if ch == "\t":
            column = (column // 8 + 1) * 8
        elif ch == "\f":
            column = 0
        else:
            column += 1
    return column


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t\f"))]


def _line_starts(text: str) -> tuple[list[int], list[int]]:
    """(lines that start a statement, comment-only lines), 1-based."""
    starts: list[int] = []
    comments: list[int] = []
    at_start = True
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = token.type
        if kind in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            continue
        if at_start and kind == tokenize.COMMENT:
            comments.append(token.start[0])
            continue
        if kind == tokenize.NL:
            continue
        if kind == tokenize.NEWLINE:
            at_start = True
            continue
        if at_start and kind != tokenize.ENDMARKER:
            starts.append(token.start[0])
            at_start = False
    return starts, comments


@dataclass
class Reindented:
    """``text`` with the leading whitespace of statement and comment lines written as spaces."""

    original: list[str]
    lines: list[str]
    # line (1-based) -> (length of the original leading whitespace, of the new one)
    changed: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def column(self, line: int, column: int) -> int:
        """A 1-based column of the copy as a column of the original."""
        if line not in self.changed:
            return column
        old, new = self.changed[line]
        return column - new + old if column > new else min(column, old + 1)

    def restore(self, fixed: str) -> str:
        """The fixed copy with the original text of every line the fix left alone."""
        new = fixed.split("\n")
        matcher = difflib.SequenceMatcher(None, self.lines, new, autojunk=False)
        rewritten: set[int] = set()
        out: list[str] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out.extend(self.original[i1:i2])
            else:
                rewritten.update(range(len(out), len(out) + j2 - j1))
                out.extend(new[j1:j2])
        styled = self._indent_like_original(out, rewritten, fixed)
        for candidate in (styled, "\n".join(out)):
            if _means(candidate, fixed):
                return candidate
        line = unrepresentable_line("\n".join(self.original))
        where = f"line {line} " if line else "the file "
        raise CannotKeep(
            f"{where}mixes tabs and spaces in its indentation, and the fixed lines could not be "
            "indented to match it (indent it with spaces only to have it fixed)"
        )

    def _indent_like_original(self, out: list[str], rewritten: set[int], fixed: str) -> str:
        """Rewritten statement lines indented with the original text for the same column
        (the deepest original indentation below it, plus spaces)."""
        styles: dict[int, str] = {}
        for number, (old, _) in self.changed.items():
            # A form feed is a page break of its line, not a way to indent.
            whitespace = self.original[number - 1][:old].rpartition("\f")[2]
            if "\t" in whitespace:
                styles.setdefault(_column(whitespace), whitespace)
        if not styles:
            return "\n".join(out)
        try:
            starts = set(_line_starts(fixed)[0])
        except (tokenize.TokenError, SyntaxError):
            return "\n".join(out)
        lines = list(out)
        for index in rewritten:
            if index + 1 not in starts:
                continue
            line = lines[index]
            body = line.lstrip(" \t\f")
            width = _column(_leading(line))
            base = max((c for c in styles if c <= width), default=None)
            if base is not None:
                lines[index] = styles[base] + " " * (width - base) + body
        return "\n".join(lines)


def normalise(text: str) -> Reindented:
    """The copy of ``text`` that libcst can read and write back (see the module docstring)."""
    original = text.split("\n")
    lines = list(original)
    starts, comments = _line_starts(text)
    changed: dict[int, tuple[int, int]] = {}
    for number in (*starts, *comments):
        line = original[number - 1]
        whitespace = _leading(line)
        if "\t" not in whitespace and "\f" not in whitespace:
            continue
        spaces = " " * _column(whitespace)
        lines[number - 1] = spaces + line[len(whitespace) :]
        changed[number] = (len(whitespace), len(spaces))
    return Reindented(original, lines, changed)


def _means(candidate: str, fixed: str) -> bool:
    """Whether CPython reads ``candidate`` as the same program as ``fixed``, indentation
    included."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(candidate, "<fixed>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        return normalise(candidate).text == normalise(fixed).text
    except (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError):
        return False


def unrepresentable_line(text: str) -> int | None:
    """The first line whose indentation does not start with its parent block's (what libcst
    cannot represent), if any."""
    levels = [""]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    for token in tokens:
        if token.type == tokenize.INDENT:
            if not token.string.startswith(levels[-1]):
                return token.start[0]
            levels.append(token.string)
        elif token.type == tokenize.DEDENT and len(levels) > 1:
            levels.pop()
    return None
