"""IPython syntax in notebook cells: masked so that the cells read as Python, and put back.

What is IPython syntax is IPython's decision, not ours: a cell that Python cannot parse is
handed to IPython's ``TransformerManager`` (what Jupyter runs on a cell before executing it, and
what ``black[jupyter]`` relies on), and the lines it rewrote into ``get_ipython()`` calls are the
magics. A cell that Python parses is plain Python (a ``?`` in a comment, a ``%`` operator at
the start of a continuation line, ``!`` in a string stay code).

Each magic is masked as a statement that keeps the cell valid wherever it stands (also as the
only statement of an indented block: ``try:`` / ``    %tensorflow_version 2.x``): a bytes
literal holding a random token, ``b"<token>_3"``, with an assignment kept in front
(``files = !ls`` becomes ``files = b"<token>_4"``) and one literal per line of a magic continued
with backslashes. The token is drawn until it occurs nowhere in the notebook, so no user text can
be mistaken for a mask. ``%time <statement>`` runs the statement in the notebook's namespace:
it is analysed as that statement, marked by a ``#<token>_5`` comment, and ``%time`` is put back
in front of it. ``%%time`` and ``%%capture`` cells run their body as Python: the body is
analysed, the first line masked. Other cell magics (``%%bash``...) are not Python and are left
out. Putting back is checked: every masked line must come back once, as it was (only its
indentation may change), or the fix is refused.
"""

from __future__ import annotations

import ast
import difflib
import re
import secrets
import warnings
from dataclasses import dataclass, field
from functools import lru_cache

# Cell magics whose body is Python run once in the notebook's namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "capture"})
# Characters that end a line for IPython (str.splitlines) but not for the program.
_OTHER_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_TIME = re.compile(r"%time\s+")


class RestoreError(Exception):
    """A fix moved, changed or dropped a masked IPython line."""


def new_token(*texts: str) -> str:
    """A token that occurs in none of ``texts``."""
    while True:
        token = "ipy" + secrets.token_hex(8)
        if not any(token in text for text in texts):
            return token


def parses(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    except (RecursionError, MemoryError):
        return True  # Python reads it; the engine reports the depth
    return True


@lru_cache(maxsize=1)
def _transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


def ipython_reads(source: str) -> bool:
    """Whether IPython turns ``source`` into Python that parses."""
    if parses(source):
        return True
    try:
        return parses(_transformer().transform_cell(source))
    except Exception:  # IPython's own error for a cell it cannot read
        return False


@dataclass(frozen=True)
class Magic:
    number: int
    original: tuple[str, ...]
    masked: tuple[str, ...]
    # ``%time <statement>``: the text before the statement (``%time ``), kept in front of it.
    statement_prefix: str | None = None
    # The first line of a ``%%time`` cell: it must stay the first line, unindented.
    cell_head: bool = False


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _get_ipython_call(node: ast.AST) -> ast.Call | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Call)
        and isinstance(node.func.value.func, ast.Name)
        and node.func.value.func.id == "get_ipython"
    ):
        return node
    return None


def _one_line_statement(code: str) -> bool:
    if "\n" in code.strip() or not code.strip():
        return False
    try:
        body = ast.parse(code.strip()).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return len(body) == 1 and not isinstance(
        body[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)
    )


def _groups(lines: list[str]) -> list[list[str]]:
    """Lines joined by a final backslash, as IPython joins them for a magic."""
    groups: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        current.append(line)
        if not line.endswith("\\"):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


@dataclass
class Masker:
    """Masks the cells of one notebook with one token; remembers what to put back."""

    token: str
    magics: list[Magic] = field(default_factory=list)

    def cell(self, source: str) -> tuple[list[str], dict[int, int]] | None:
        """The cell's lines with IPython syntax masked and, for lines whose code moved left
        when masked (``%time x`` -> ``x``), by how many columns (line index -> columns); None
        for a cell that is not Python (a ``%%bash`` cell) or cannot be masked line by line."""
        lines = source.split("\n")
        if parses(source):
            return lines, {}
        head = next((i for i, line in enumerate(lines) if line.strip()), None)
        if head is not None and lines[head].startswith("%%"):
            name = lines[head][2:].split(maxsplit=1)[0] if lines[head][2:].strip() else ""
            if name not in PYTHON_CELL_MAGICS:
                return None
            body = self.cell("\n".join(lines[head + 1 :]))
            if body is None:
                return None
            masked = self._mask([lines[head]], "", cell_head=True)
            shifts = {i + head + 1: shift for i, shift in body[1].items()}
            return [*lines[:head], *masked, *body[0]], shifts
        if _OTHER_LINE_BREAKS.search(source):
            return lines, {}  # IPython would see other lines than the program: the parse decides
        try:
            transformed = _transformer().transform_cell(source)
        except Exception:
            return lines, {}  # IPython cannot read it either: reported as a syntax error
        if not parses(transformed):
            return lines, {}
        ours = lines[:-1] if lines[-1] == "" else list(lines)
        theirs = transformed.split("\n")[:-1]
        out: list[str] = []
        shifts: dict[int, int] = {}
        matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out.extend(ours[i1:i2])
            elif tag == "delete" and i1 == 0 and not any(line.strip() for line in ours[i1:i2]):
                out.extend(ours[i1:i2])  # leading blank lines, which IPython drops
            elif tag == "replace":
                groups = _groups(ours[i1:i2])
                if len(groups) != j2 - j1:
                    return None
                for group, rewritten in zip(groups, theirs[j1:j2]):
                    masked = self._magic(group, rewritten)
                    if masked is None:
                        return None
                    if self.magics[-1].statement_prefix:
                        shifts[len(out)] = len(self.magics[-1].statement_prefix)
                    out.extend(masked)
            else:
                return None
        if len(ours) != len(lines):
            out.append(lines[-1])
        return out, shifts

    def _magic(self, group: list[str], rewritten: str) -> list[str] | None:
        if "get_ipython()" not in rewritten:
            return None  # an autocall (``/f x``) or a prompt: not masked line by line
        indent = _indent(group[0])
        try:
            node = ast.parse(rewritten.strip()).body[0]
        except (SyntaxError, IndexError):
            return None
        call = _get_ipython_call(node.value) if isinstance(node, (ast.Expr, ast.Assign)) else None
        if call is None:
            return None
        if (
            len(group) == 1
            and isinstance(node, ast.Expr)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "run_line_magic"
            and len(call.args) == 2
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
            and call.args[0].value == "time"
        ):
            statement = call.args[1].value
            rest = group[0][len(indent) :]
            before = rest[: len(rest) - len(statement)]
            if statement and rest.endswith(statement) and _TIME.fullmatch(before) and _one_line_statement(statement):
                number = len(self.magics)
                masked = f"{indent}{statement}  #{self.token}_{number}"
                self.magics.append(Magic(number, tuple(group), (masked,), statement_prefix=before))
                return [masked]
        prefix = indent
        if isinstance(node, ast.Assign):
            stripped = rewritten.strip()
            target = indent + stripped.encode("utf-8")[: call.col_offset].decode("utf-8", errors="replace")
            if group[0].startswith(target) and group[0][len(target) : len(target) + 1] in ("%", "!"):
                prefix = target
        return self._mask(group, prefix)

    def _mask(self, group: list[str], prefix: str, cell_head: bool = False) -> list[str]:
        number = len(self.magics)
        last = len(group) - 1
        masked = [f'{prefix}b"{self.token}_{number}"{" " + chr(92) if last else ""}']
        masked += [f'b"{self.token}_{number}_{j}"{" " + chr(92) if j < last else ""}' for j in range(1, last + 1)]
        self.magics.append(Magic(number, tuple(group), tuple(masked), cell_head=cell_head))
        return masked

    def restore(self, lines: list[str], expected: set[int]) -> list[str]:
        """A cell's lines with its masks (numbers ``expected``) replaced by the original IPython
        lines; :class:`RestoreError` if a mask was moved, changed, dropped or repeated."""
        first = re.compile(rf'b"{self.token}_(\d+)"')
        # A ``%time`` statement's mask, and a comment written after it (``check --add-noqa``
        # puts ``# autofix: ignore[...]`` there): IPython hands the rest of a ``%time`` line to
        # the magic, which runs it as Python, so a comment at its end is the statement's.
        time = re.compile(rf"  #{self.token}_(\d+)((?:[ \t]+#.*)?)$")
        out: list[str] = []
        seen: set[int] = set()
        index = 0
        while index < len(lines):
            line = lines[index]
            if self.token not in line:
                out.append(line)
                index += 1
                continue
            match = time.search(line) or first.search(line)
            number = int(match.group(1)) if match else -1
            if number not in expected or number in seen:
                raise RestoreError("a fix would move, copy or change an IPython line")
            seen.add(number)
            magic = self.magics[number]
            indent = _indent(line)
            if magic.statement_prefix is not None:
                if match.re is not time:
                    raise RestoreError("a fix would change an IPython line")
                statement = line[len(indent) : match.start()]
                if not _one_line_statement(statement):
                    raise RestoreError("a fix would split a statement run by %time")
                out.append(indent + magic.statement_prefix + statement + match.group(2))
                index += 1
                continue
            if line[len(indent) :] != magic.masked[0].lstrip(" \t"):
                raise RestoreError("a fix would change an IPython line")
            if magic.cell_head and (indent or any(previous.strip() for previous in out)):
                raise RestoreError("a fix would move a cell magic off the first line of its cell")
            following = lines[index + 1 : index + len(magic.masked)]
            if following != list(magic.masked[1:]):
                raise RestoreError("a fix would split an IPython line continued with a backslash")
            out.append(indent + magic.original[0].lstrip(" \t"))
            out.extend(magic.original[1:])
            index += len(magic.masked)
        if seen != expected:
            raise RestoreError("a fix would drop an IPython line")
        return out
