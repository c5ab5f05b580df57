"""Every rule carries its own metadata and examples, and the examples are true."""

from __future__ import annotations

import re
import sys

import pytest

from autofix import registry
from autofix.engine import Options, analyse

RULES = registry.all_rules()


def test_rules_are_discovered_in_order():
    # The migration rule first (it makes the strategy the others work under), then by code.
    assert [r.CODE for r in RULES if r.MIGRATION] == [r.CODE for r in RULES[:1]] == ["TFD010"]
    codes = [r.CODE for r in RULES if not r.MIGRATION]
    assert codes[0] == "TFD001"
    assert codes == sorted(codes)
    assert len(set(r.CODE for r in RULES)) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.CODE)
def test_metadata(rule):
    assert re.fullmatch(r"TFD\d{3}", rule.CODE)
    assert re.fullmatch(r"[a-z]+(-[a-z]+)+", rule.NAME)
    assert rule.DESCRIPTION and "\n" not in rule.DESCRIPTION
    module = sys.modules[rule.__module__]
    assert module.__name__.startswith(f"autofix.codemods.{rule.CODE.lower()}_")
    assert "Not fixed" in (module.__doc__ or ""), "the docstring must say what the rule will not fix"
    assert rule.EXAMPLES, "a rule needs before/after examples"
    assert any(e.after is not None for e in rule.EXAMPLES)
    assert any(e.after is None for e in rule.EXAMPLES), "and one it leaves alone"


@pytest.mark.parametrize(
    "rule, example",
    [(r, e) for r in RULES for e in r.EXAMPLES],
    ids=lambda v: getattr(v, "CODE", "example"),
)
def test_examples_hold(rule, example):
    # A migration rule runs under `autofix migrate` only, and with the rules that finish what
    # it starts (its example is a whole migration).
    if rule.MIGRATION:
        options = Options(migrate="mirrored")
    else:
        options = Options(select=(rule.CODE,), unsafe_fixes=True)
    analysis = analyse(example.before, options)
    if example.after is None:
        assert analysis.new_text is None and analysis.findings == []
    else:
        assert analysis.findings
        assert analysis.new_text == example.after


def test_select_prefixes_and_unknown_codes():
    regular = [r for r in RULES if not r.OPT_IN and not r.MIGRATION]
    assert [r.CODE for r in registry.select(("tfd00",))] == [r.CODE for r in regular if r.CODE.startswith("TFD00")]
    assert registry.select(None, ("TFD001",)) == tuple(r for r in regular if r.CODE != "TFD001")
    with pytest.raises(registry.UnknownRule):
        registry.select(("NOPE",))


def test_opt_in_rules_run_only_when_named_exactly():
    opt_in = [r for r in RULES if r.OPT_IN]
    assert [r.CODE for r in opt_in] == ["TFD005"]
    for selection in (None, ("ALL",), ("TFD",), ("TFD00",)):
        assert not set(registry.select(selection)) & set(opt_in)
    assert registry.select(("tfd005",)) == tuple(opt_in)
    assert registry.select(("TFD0", "TFD005")) == tuple(r for r in RULES if not r.MIGRATION)


def test_migration_rules_run_under_migrate_only():
    migration = [r for r in RULES if r.MIGRATION]
    assert [r.CODE for r in migration] == ["TFD010"]
    for selection in (None, ("ALL",), ("TFD",), ("TFD010",)):
        assert not set(registry.select(selection)) & set(migration)
        assert set(registry.select(selection, migrating=True)) >= set(migration)
    # Ignored, it does not run: `autofix migrate --ignore TFD010` fixes as `fix` does.
    assert not set(registry.select(None, ("TFD010",), migrating=True)) & set(migration)
