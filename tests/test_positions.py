"""Positions come from autofix's own offset-recording code generation, which subclasses a
private libcst class; without it they come from libcst's public PositionProvider. Both must
put every finding in the same place."""

from __future__ import annotations

import pytest

from autofix.analysis import positions
from autofix.analysis.program import Program
from autofix.engine import Options, analyse
from fixturecases import FIXTURES, ROOT, read

CASES = sorted(p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(ROOT)))
def test_findings_are_placed_the_same_without_the_private_api(path, monkeypatch):
    text = read(path)
    fast = analyse(text, Options())
    monkeypatch.setattr(positions, "offsets", None)
    public = analyse(text, Options())
    assert public.findings == fast.findings
    assert public.new_text == fast.new_text


def test_the_fallback_is_really_taken(monkeypatch):
    import libcst as cst

    text = "import tensorflow as tf\n\nif True:\n    strategy = tf.distribute.MirroredStrategy()\n"
    module = cst.parse_module(text)
    program = Program(module, text)
    calls = []
    real = positions.provider_positions

    def counting(tree):
        calls.append(tree)
        return real(tree)

    monkeypatch.setattr(positions, "offsets", None)
    monkeypatch.setattr(positions, "provider_positions", counting)
    statement = module.body[1].body.body[0]
    where = program.position(statement)
    assert (where.start.line, where.start.column) == (4, 4)
    assert len(calls) == 1
