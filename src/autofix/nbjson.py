"""A notebook's JSON text, edited in place: only the ``source`` values of changed cells change.

Tools write notebooks in different JSON styles (nbformat: indent 1, non-ASCII as is; Colab:
``<``, ``>`` and ``&`` escaped as ``\\u003c``...; others: ``ensure_ascii``, ``\\/``...). Rather
than serialise the whole notebook again, which reproduces only the styles it knows, the text is
read with the place of each cell's ``source`` value, and a changed value is written in the
style the file uses (its escapes, its layout of lists of lines); every other byte stays.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring
from typing import Callable

from autofix.newlines import translate

_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


@dataclass
class Source:
    """Where a cell's ``source`` value is: ``[start, end)`` in the text; for a list, each
    string's ``[start, end)`` too (quotes included)."""

    start: int
    end: int
    strings: list[tuple[int, int]] = field(default_factory=list)
    is_list: bool = False


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _value_end(text: str, i: int) -> int:
    return _DECODER.raw_decode(text, i)[1]


def _container(text: str, i: int, close: str, on_item) -> int:
    """Read the object or array opening at ``i``; ``on_item(key or index, start)`` reads each
    value and returns where it ends. Returns where the container ends."""
    i = _skip(text, i + 1)
    if text[i : i + 1] == close:
        return i + 1
    index = 0
    while True:
        if close == "}":
            if text[i : i + 1] != '"':
                raise ValueError("expected a key")
            key, i = scanstring(text, i + 1)
            i = _skip(text, i)
            if text[i : i + 1] != ":":
                raise ValueError("expected ':'")
            i = on_item(key, _skip(text, i + 1))
        else:
            i = on_item(index, i)
            index += 1
        i = _skip(text, i)
        if text[i : i + 1] == ",":
            i = _skip(text, i + 1)
        elif text[i : i + 1] == close:
            return i + 1
        else:
            raise ValueError(f"expected ',' or '{close}'")


def locate_sources(text: str) -> dict[int, Source]:
    """Cell index -> where its ``source`` value is in ``text`` (a valid notebook)."""
    found: dict[int, Source] = {}

    def source(cell: int, start: int) -> int:
        end = _value_end(text, start)
        if text[start] != "[":
            found[cell] = Source(start, end)
            return end
        strings: list[tuple[int, int]] = []

        def string(_: object, at: int) -> int:
            stop = _value_end(text, at)
            strings.append((at, stop))
            return stop

        _container(text, start, "]", string)
        found[cell] = Source(start, end, strings, is_list=True)
        return end

    def cell(index: object, start: int) -> int:
        if text[start] != "{":
            return _value_end(text, start)
        return _container(text, start, "}", lambda key, at: source(index, at) if key == "source" else _value_end(text, at))

    def top(key: object, start: int) -> int:
        if key == "cells" and text[start] == "[":
            return _container(text, start, "]", cell)
        return _value_end(text, start)

    _container(text, _skip(text, 0), "}", top)
    return found


# A \u escape of a printable ASCII character (after an even number of backslashes).
_ASCII_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u00([2-7][0-9a-fA-F])")
_NON_ASCII_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u([0-9a-fA-F]{4})")
_SLASH_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\/")


@dataclass
class Style:
    """How the file writes strings and lists of lines."""

    ensure_ascii: bool
    # Characters the file writes as escapes, with the escape it uses (e.g. "<" -> "\u003c").
    escapes: dict[str, str]
    upper_hex: bool
    # The text between '[' and the first string, between two strings, and after the last,
    # in a cell's list of lines; None where the file has no such list to copy.
    opening: str | None = None
    separator: str | None = None
    closing: str | None = None

    @classmethod
    def of(cls, text: str, sources: dict[int, Source]) -> "Style":
        escapes = {}
        for match in _ASCII_ESCAPE.finditer(text):
            code = match.group(0)[-6:]
            ch = chr(int(code[2:], 16))
            if ch not in '"\\':  # escaped in every style
                escapes.setdefault(ch, code)
        if _SLASH_ESCAPE.search(text):
            escapes.setdefault("/", "\\/")
        escaped_non_ascii = [m.group(1) for m in _NON_ASCII_ESCAPE.finditer(text) if int(m.group(1), 16) > 0x7F]
        raw_non_ascii = any(ord(ch) > 0x7F for ch in text)
        style = cls(
            ensure_ascii=bool(escaped_non_ascii) and not raw_non_ascii,
            escapes=escapes,
            upper_hex=any(c.isupper() for code in escaped_non_ascii for c in code),
        )
        for source in sources.values():
            if len(source.strings) >= 2:
                style.opening = text[source.start + 1 : source.strings[0][0]]
                style.separator = text[source.strings[0][1] : source.strings[1][0]]
                style.closing = text[source.strings[-1][1] : source.end - 1]
                break
        return style

    def string(self, value: str) -> str:
        out = json.dumps(value, ensure_ascii=self.ensure_ascii)
        if self.upper_hex:
            out = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), out)
        for ch, escape in self.escapes.items():
            out = out.replace(ch, escape)
        return out


def split_lines(source: str) -> list[str]:
    """A cell's source as a list of lines, as nbformat stores it (each line keeps its ``\\n``)."""
    parts = source.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def source_value(text: str, source: Source, new: str, style: Style) -> str:
    """The JSON for a cell's new source, laid out like the value it replaces."""
    if not source.is_list:
        return style.string(new)
    strings = [style.string(line) for line in split_lines(new)]
    if not strings:
        return "[]"
    if len(source.strings) >= 2:
        opening = text[source.start + 1 : source.strings[0][0]]
        separator = text[source.strings[0][1] : source.strings[1][0]]
        closing = text[source.strings[-1][1] : source.end - 1]
    elif source.strings:
        opening = text[source.start + 1 : source.strings[0][0]]
        closing = text[source.strings[-1][1] : source.end - 1]
        separator = style.separator if style.separator is not None else "," + opening
    elif style.opening is not None:
        opening, separator, closing = style.opening, style.separator or ",", style.closing or ""
    else:
        opening, separator, closing = "", ", ", ""
    return "[" + opening + separator.join(strings) + closing + "]"


def file_positions(text: str) -> Callable[[int, int, int], tuple[int, int] | None] | None:
    """A map from a place in a code cell (cell index; line in the cell and column, 1-based) to
    the same place in the notebook's own JSON text (line and column, 1-based), where code hosts
    show it; None when the notebook cannot be read."""
    try:
        json.loads(text)
        return Positions(text, locate_sources(text))
    except (ValueError, IndexError):
        return None


class Positions:
    """Places in a cell's source -> places (line, column; 1-based, in code points) in the
    notebook's JSON text."""

    def __init__(self, text: str, sources: dict[int, Source]) -> None:
        self.text = text
        self.sources = sources
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", text)]

    def __call__(self, cell: int, line: int, column: int) -> tuple[int, int] | None:
        source = self.sources.get(cell)
        if source is None:
            return None
        spans = source.strings if source.is_list else [(source.start, source.end)]
        first_line = 1
        for number, (start, end) in enumerate(spans):
            value = json.loads(self.text[start:end])
            if not isinstance(value, str):
                return None
            # Lines as the analysis counts them (a lone \r ends one too); the same length.
            value = translate(value).text
            lines_here = value.count("\n")
            last = number == len(spans) - 1
            if line <= first_line + lines_here and (line < first_line + lines_here or last or not value.endswith("\n")):
                offset = 0
                for _ in range(line - first_line):
                    offset = value.index("\n", offset) + 1
                offset = min(offset + column - 1, len(value))
                return self._place(_raw_offset(self.text, start, offset))
            first_line += lines_here
        return None

    def _place(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1


def _raw_offset(text: str, start: int, decoded: int) -> int:
    """The offset in ``text`` of character ``decoded`` of the JSON string starting at ``start``."""
    i = start + 1
    for _ in range(decoded):
        if text[i] != "\\":
            i += 1
        elif text[i + 1] != "u":
            i += 2
        else:
            code = int(text[i + 2 : i + 6], 16)
            i += 6
            if 0xD800 <= code < 0xDC00 and text[i : i + 2] == "\\u":
                i += 6  # a surrogate pair: one character
    return i
