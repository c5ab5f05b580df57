"""Parsing without libcst's per-node check (autofix.parsing.parse_module): the same tree as
libcst's own parse, and the check back on for every node made afterwards."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from autofix.parsing import parse_module

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures").rglob("*.py"))[:200] + sorted((ROOT / "src" / "autofix").rglob("*.py"))


def _invalid_node() -> None:
    # Unbalanced parentheses: libcst's check refuses the node as it is made.
    cst.Name("x", lpar=[cst.LeftParen()])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_tree_is_libcsts_own(path):
    text = path.read_text(encoding="utf-8")
    try:
        expected = cst.parse_module(text)
    except cst.ParserSyntaxError:
        with pytest.raises(cst.ParserSyntaxError):
            parse_module(text)
        return
    parsed = parse_module(text)
    assert parsed.deep_equals(expected)
    assert parsed.code == text


def test_nodes_made_after_a_parse_are_checked_again():
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()
    parse_module("x = (1 +\n  2)\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()


def test_nodes_made_after_a_failed_parse_are_checked_again():
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()
