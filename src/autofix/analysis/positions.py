"""Where nodes are in the code, without libcst's PositionProvider when possible.

libcst computes positions by generating the code of the whole module while tracking lines and
columns token by token. autofix needs positions only for the few nodes it reports, so it
generates the code of one statement and records *offsets* (cheaper than lines and columns).
That needs a subclass of libcst's code-generation state, which is not public API: it is
used through :func:`offsets` alone, and when it cannot be imported (a libcst that moved it)
:func:`offsets` is None and positions come from the public PositionProvider
(:func:`provider_positions`). tests/test_positions.py checks that both give the same answer.
"""

from __future__ import annotations

import bisect
import re
from contextlib import contextmanager
from typing import Callable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

NEWLINE = re.compile(r"\r\n?|\n")

# ``(node, indent, newline, prefix) -> (ranges, code)``: the code of ``node`` generated with
# ``prefix`` as its indentation, and the offsets of every node of it in that code.
Offsets = Callable[[cst.CSTNode, str, str, str], tuple[dict, str]]


def line_starts(code: str) -> list[int]:
    """Offsets where lines start (a line ends at \\n, \\r\\n or a lone \\r, as libcst counts)."""
    return [0, *(match.end() for match in NEWLINE.finditer(code))]


def point(starts: list[int], offset: int) -> CodePosition:
    line = bisect.bisect_right(starts, offset) - 1
    return CodePosition(line + 1, offset - starts[line])


def provider_positions(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    """Every node's position from libcst's public PositionProvider (whole-module, slower)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return dict(wrapper.resolve(PositionProvider))


def _make_offsets() -> Offsets | None:
    try:
        from libcst._nodes.internal import CodegenState
    except ImportError:  # pragma: no cover - depends on the libcst version
        return None

    class OffsetState(CodegenState):
        """Code generation that records where each node's syntax starts and ends, as offsets
        into the generated code."""

        def __init__(self, default_indent: str, default_newline: str) -> None:
            super().__init__(default_indent=default_indent, default_newline=default_newline)
            self.length = 0
            self.ranges: dict[cst.CSTNode, tuple[int, int]] = {}
            self._starts: list[int] = []

        def before_codegen(self, node: cst.CSTNode) -> None:
            self._starts.append(self.length)

        def after_codegen(self, node: cst.CSTNode) -> None:
            start = self._starts.pop()
            # A node that recorded its syntactic range keeps it; others span all they printed.
            if node not in self.ranges:
                self.ranges[node] = (start, self.length)

        def add_token(self, value: str) -> None:
            self.tokens.append(value)
            self.length += len(value)

        def add_indent_tokens(self) -> None:
            for token in self.indent_tokens:
                self.add_token(token)

        def pop_trailing_newline(self) -> None:
            if self.tokens:
                self.length -= len(self.tokens.pop())

        @contextmanager
        def record_syntactic_position(self, node, *, start_node=None, end_node=None):
            start = self.length
            try:
                yield
            finally:
                end = self.length
                if start_node is not None:
                    start = self.ranges[start_node][0]
                if end_node is not None:
                    end = self.ranges[end_node][1]
                self.ranges[node] = (start, end)

    def offsets(node: cst.CSTNode, indent: str, newline: str, prefix: str) -> tuple[dict, str]:
        state = OffsetState(default_indent=indent, default_newline=newline)
        if prefix:
            state.increase_indent(prefix)
        node._codegen(state)
        return state.ranges, "".join(state.tokens)

    return offsets


offsets: Offsets | None = _make_offsets()
