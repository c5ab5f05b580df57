"""``# autofix: ignore[TFD001]`` comments.

A comment ``# autofix: ignore[CODE, ...]`` (or ``# autofix: ignore`` for every rule) on the line
of a finding, or on the first line of the statement it is in, suppresses that finding and the
rule's fix there. ``# autofix: ignore-file`` on a line of its own skips the whole file.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

MARK = "autofix:"
_COMMENT = re.compile(r"#\s*autofix:\s*(ignore-file|ignore)(?:\[([^\]]*)\])?", re.IGNORECASE)
ALL = "*"


@dataclass
class Suppressions:
    # line -> codes ("*" for all) suppressed on that line
    by_line: dict[int, frozenset[str]] = field(default_factory=dict)
    ignore_file: bool = False

    def __bool__(self) -> bool:
        return bool(self.by_line) or self.ignore_file

    def covers(self, line: int, code: str) -> bool:
        codes = self.by_line.get(line)
        return codes is not None and (ALL in codes or code in codes)


def parse(text: str) -> Suppressions:
    """The suppression comments of ``text`` (real comments only, not ``#`` inside strings)."""
    found = Suppressions()
    if MARK not in text:
        return found
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _COMMENT.search(token.string)
        if match is None:
            continue
        if match.group(1).lower() == "ignore-file":
            found.ignore_file = True
            continue
        codes = match.group(2)
        parsed = frozenset(c.strip().upper() for c in codes.split(",") if c.strip()) if codes else frozenset({ALL})
        line = token.start[0]
        found.by_line[line] = found.by_line.get(line, frozenset()) | parsed
    return found
