"""``check --add-noqa``: an ``# autofix: ignore[CODE]`` comment for every current finding.

Each finding is suppressed where :mod:`autofix.suppressions` looks for it: on the line it starts
on, or else on the first line of its statement. A line that already has an ``# autofix:
ignore[...]`` comment gets the code added to its list; a line with another comment keeps it and
gets ours after it; a line that cannot end with a comment (it ends inside a string that spans
lines, or is continued by a backslash) is not used. Nothing but the end of the chosen lines
changes: their newline characters, and every other line, stay as they were.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Sequence

from autofix.suppressions import _COMMENT



@dataclass(frozen=True)
class Wanted:
    """A finding of rule ``code`` that an ignore comment on any of ``lines`` would suppress,
    in the order to try them."""

    code: str
    lines: tuple[int, ...]


@dataclass(frozen=True)
class Added:
    text: str
    # For each wanted suppression, the line its comment is on, or None when no line could
    # take one.
    placed: tuple[int | None, ...]


def _lines(text: str) -> list[list[str]]:
    """Each line's text and its line break, split where the tokenizer (and so the reading of
    suppression comments) splits them: at ``\n``."""
    found = []
    parts = text.split("\n")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if last and not part:
            break
        newline = "" if last else "\n"
        if part.endswith("\r") and not last:
            part, newline = part[:-1], "\r\n"
        found.append([part, newline])
    return found


def _comment_lines(text: str) -> tuple[set[int], dict[int, tokenize.TokenInfo]]:
    """Lines that may end with a comment (the tokenizer ends a line there), and the comment
    each line already has."""
    ends: set[int] = set()
    comments: dict[int, tokenize.TokenInfo] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                ends.add(token.start[0])
            elif token.type == tokenize.COMMENT:
                comments[token.start[0]] = token
                ends.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return set(), {}
    return ends, comments


def add(text: str, wanted: Sequence[Wanted]) -> Added:
    """``text`` with a comment for each of ``wanted``; codes already suppressed on the chosen
    line are not repeated."""
    lines = _lines(text)
    ends, comments = _comment_lines(text)
    codes: dict[int, set[str]] = {}
    placed: list[int | None] = []
    for want in wanted:
        candidates = [line for line in dict.fromkeys(want.lines) if line in ends and 0 < line <= len(lines)]
        # A line that already holds an ignore comment (or one this run adds) is the place.
        existing = [line for line in candidates if line in codes or _ignore(comments.get(line))]
        chosen = (existing or candidates or [None])[0]
        placed.append(chosen)
        if chosen is not None:
            codes.setdefault(chosen, set()).add(want.code)
    for line, new in codes.items():
        body, newline = lines[line - 1]
        comment = comments.get(line)
        lines[line - 1] = [_with_codes(body, comment, new), newline]
    return Added("".join(body + newline for body, newline in lines), tuple(placed))


def _ignore(comment: tokenize.TokenInfo | None) -> re.Match | None:
    if comment is None:
        return None
    match = _COMMENT.search(comment.string)
    return match if match and match.group(1).lower() == "ignore" else None


def _with_codes(body: str, comment: tokenize.TokenInfo | None, new: set[str]) -> str:
    match = _ignore(comment)
    if comment is not None and match is not None:
        start = comment.start[1]
        if match.group(2) is None:
            return body  # a bare ``# autofix: ignore`` already covers every rule
        listed = [c.strip().upper() for c in match.group(2).split(",") if c.strip()]
        merged = ", ".join(sorted(set(listed) | new))
        inner_start, inner_end = match.span(2)
        return body[: start + inner_start] + merged + body[start + inner_end :]
    suffix = f"# autofix: ignore[{', '.join(sorted(new))}]"
    return body.rstrip(" \t") + "  " + suffix
