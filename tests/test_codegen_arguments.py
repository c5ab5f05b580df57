"""An argument a fix adds to a call (``batch_size=``, ``validation_batch_size=``) is laid out as
the call's other arguments are."""

from __future__ import annotations

import libcst as cst
import pytest

from autofix.codegen import add_argument


@pytest.mark.parametrize(
    "call, expected",
    [
        ("f(a, b=1)", "f(a, b=1, k=2)"),
        ("f(a, b=1 )", "f(a, b=1, k=2 )"),
        ("f(\n    a,\n    b=1\n)", "f(\n    a,\n    b=1,\n    k=2\n)"),
        ("f(\n    a\n)", "f(\n    a,\n    k=2\n)"),
        ("f(a,\n  b=1\n)", "f(a,\n  b=1,\n  k=2\n)"),
        ("f(\n    a,\n    b=1,\n)", "f(\n    a,\n    b=1,\n    k=2,\n)"),
        ("f(a, b=1,\n  c=3)", "f(a, b=1,\n  c=3, k=2)"),
        ("f()", "f(k=2)"),
    ],
)
def test_an_added_argument_is_laid_out_as_the_others(call, expected):
    """Last, after a comma; on several lines (the closing parenthesis on its own, with or
    without a trailing comma), on a line of its own indented as the others, the parenthesis
    kept where it was (before, without a trailing comma, it landed at column 0 and took the
    parenthesis's line)."""
    node = cst.parse_expression(call)
    assert cst.Module([]).code_for_node(add_argument(node, "k", cst.Integer("2"))) == expected
