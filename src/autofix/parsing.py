"""From text to a libcst tree, or an :class:`AnalysisError` that says why not, never a crash.

libcst's parser is native code: on input nested deeply enough it overflows the C stack and
the whole process dies (SIGSEGV), long before Python's own limits would stop it. So CPython
looks at the text first: what it refuses for depth (``too many nested parentheses``, more
than 100 levels of indentation, its own recursion limit while building the tree) is refused
here with its words, and a tree deeper than :data:`DEPTH_LIMIT` is refused before libcst sees
it (the rules cannot analyse such code anyway: their tree walks are recursive). Other syntax
errors are left to libcst, which also knows syntax newer than the Python running autofix, and
are then reported with CPython's message where it has one.

libcst checks every node as it is made (``CSTNode.__post_init__`` calls ``_validate``), the
nodes its parser makes from valid code included: a sixth of the time of a parse (its own
source says so: "avoid validating the tree when parsing a file"). :func:`parse_module` parses
with that check off and turns it back on before returning; nodes made anywhere else (every
fix) are checked as before. The switch is a class attribute libcst does not document: when it
is not where this expects it, parsing simply keeps the check.
"""

from __future__ import annotations

import ast
import io
import re
import threading
import tokenize
import warnings

import libcst as cst

from autofix import newlines

try:
    from libcst._nodes.base import CSTNode as _CSTNode

    _CHECKED_INIT = _CSTNode.__dict__["__post_init__"]
except (ImportError, KeyError):  # a libcst that moved it: parse with the check
    _CSTNode = None
_parsing = threading.Lock()

# Expression depth (AST levels, where each operand of ``and`` / ``or`` counts as one: libcst
# nests them) beyond which code is not handed to libcst. Every rule gives up far earlier (at
# a few hundred levels, with a RecursionError that is reported as "nested too deeply"); libcst
# itself crashes somewhere above 3000.
DEPTH_LIMIT = 1000
# CPython's own limits on nesting, the same in every version: reported as the syntax errors
# they are.
_PYTHON_LIMITS = ("too many nested parentheses", "too many levels of indentation")
MAX_BRACKETS = 200


class AnalysisError(Exception):
    """The file could not be analysed; the message (with line where known) is for the user."""

    def __init__(self, message: str, line: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        # The message without its "line N" prefix, for places that name the line themselves.
        self.detail = detail or message


class MixedIndentation(AnalysisError):
    """Python accepts the file's mix of tabs and spaces, libcst does not (a block indented with
    text that does not start with its parent block's indentation)."""


def parse(text: str) -> cst.Module:
    return parse_both(text)[0]


def parse_both(text: str) -> tuple[cst.Module, ast.Module | None]:
    """The libcst module of ``text``, and Python's own tree of it when Python could read it
    (the depth check makes it anyway; positions reuse it)."""
    tree = refuse_too_deep(text)
    try:
        return parse_module(text), tree
    except cst.ParserSyntaxError as exc:
        raise _syntax_error(text, exc) from None
    except RecursionError:
        raise AnalysisError("nested too deeply to be parsed") from None


def parse_module(text: str) -> cst.Module:
    """``cst.parse_module(text)``, without checking again each node the parser makes from
    valid code (see the module docstring); raises what it raises."""
    if _CSTNode is None:
        return cst.parse_module(text)
    with _parsing:
        _CSTNode.__post_init__ = _unchecked_init
        try:
            return cst.parse_module(text)
        finally:
            _CSTNode.__post_init__ = _CHECKED_INIT


def _unchecked_init(self: object) -> None:
    """What a parsed node does once made: nothing."""


def refuse_too_deep(text: str) -> ast.Module | None:
    """Raise :class:`AnalysisError` for code nested deeper than CPython or libcst can take;
    else return Python's tree of ``text`` (None when Python cannot read it)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        if any(limit in str(exc.msg) for limit in _PYTHON_LIMITS):
            raise _python_error(exc) from None
        # Perhaps syntax newer than this Python: libcst decides, once the brackets are known
        # to be within CPython's limit (the parse above may have stopped before them).
        _refuse_deep_brackets(text)
        return None
    except (RecursionError, MemoryError):
        raise AnalysisError("nested too deeply: Python itself cannot compile it") from None
    except ValueError:
        return None  # NUL bytes: reading the file already refuses them
    line = _too_deep(tree, text)
    if line is not None:
        message = f"nested too deeply to be analysed (more than {DEPTH_LIMIT} levels)"
        raise AnalysisError(f"line {line}: {message}", line, message)
    return tree


def _too_deep(tree: ast.Module, text: str) -> int | None:
    """The line of an expression deeper than :data:`DEPTH_LIMIT`, if there is one.

    An expression cannot be deeper than the number of characters it is written with, so only
    statements whose lines hold more than that many are walked."""
    ends = [0]
    # Lines as Python counts them (a lone \r ends one too), as the tree's line numbers are.
    for line in newlines.lines(text):
        ends.append(ends[-1] + len(line))
    ends.append(ends[-1])  # the empty last line after a final newline
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                first = getattr(child, "lineno", None)
                last = getattr(child, "end_lineno", None)
                if first is None or last is None or ends[min(last, len(ends) - 1)] - ends[first - 1] > DEPTH_LIMIT:
                    pending.append(child)
            else:
                deep = _deeper_than(child, DEPTH_LIMIT)
                if deep is not None:
                    return getattr(deep, "lineno", None) or getattr(node, "lineno", 1)
    return None


def _deeper_than(root: ast.AST, limit: int) -> ast.AST | None:
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.BoolOp):
            depth += len(node.values) - 1
        if depth > limit:
            return node
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def _refuse_deep_brackets(text: str) -> None:
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.OP:
                continue
            if token.string in "([{":
                depth += 1
                if depth > MAX_BRACKETS:
                    message = "syntax error: too many nested parentheses"
                    raise AnalysisError(f"line {token.start[0]}: {message}", token.start[0], message)
            elif token.string in ")]}":
                depth = max(0, depth - 1)
    except (tokenize.TokenError, SyntaxError):
        pass


def _python_error(exc: SyntaxError) -> AnalysisError:
    column = f", column {exc.offset}" if exc.offset else ""
    return AnalysisError(f"line {exc.lineno}{column}: syntax error: {exc.msg}", exc.lineno, f"syntax error: {exc.msg}")


_TAB_INDENT = re.compile(r"^[ \f]*\t", re.M)


def _syntax_error(text: str, exc: cst.ParserSyntaxError) -> AnalysisError:
    """Python's own message where it has one: it is clearer than the parser's token lists."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as py:
        return _python_error(py)
    except (ValueError, RecursionError, MemoryError):
        pass
    else:
        if _TAB_INDENT.search(text):
            from autofix.indentation import unrepresentable_line

            line = unrepresentable_line(text) or exc.raw_line
            message = "indented with tabs and spaces in a way libcst cannot read (Python can)"
            return MixedIndentation(f"line {line}: {message}", line, message)
    return AnalysisError(f"line {exc.raw_line}: cannot be parsed ({exc.message})", exc.raw_line, f"cannot be parsed ({exc.message})")
