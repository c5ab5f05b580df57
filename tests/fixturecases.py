"""Fixture pairs: ``fixtures/<rule>/<case>.py`` and the expected ``<case>.fixed.py``.

A case without a ``.fixed.py`` twin must be left byte-identical (its name starts with
``noop_``), or, when its name starts with ``report_``, reported without being changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    before: Path
    after: Path | None

    @property
    def id(self) -> str:
        return f"{self.rule}/{self.name}"


def cases(rule_dir: str) -> list[Case]:
    found = []
    for before in sorted((FIXTURES / rule_dir).glob("*.py")):
        if before.name.endswith(".fixed.py"):
            continue
        after = before.with_name(before.stem + ".fixed.py")
        found.append(Case(rule_dir, before.stem, before, after if after.exists() else None))
    return found


def params(rule_dir: str, kind: str = "all"):
    selected = cases(rule_dir)
    if kind == "fixed":
        selected = [c for c in selected if c.after is not None]
    elif kind == "unchanged":
        selected = [c for c in selected if c.after is None]
    return [pytest.param(c, id=c.id) for c in selected]


def read(path: Path) -> str:
    # Bytes-exact: newline="" keeps \r\n.
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


def assert_fixes_to_expected(case: Case, options) -> None:
    from autofix.engine import analyse

    analysis = analyse(read(case.before), options)
    assert analysis.refused is None
    assert analysis.findings, "a broken fixture must be reported"
    assert analysis.new_text == read(case.after)


def assert_fixed_is_clean(case: Case, options) -> None:
    from autofix.engine import analyse

    analysis = analyse(read(case.after), options)
    assert analysis.new_text is None
    assert all(not f.fixable for f in analysis.findings)


def assert_left_alone(case: Case, options) -> None:
    from autofix.engine import analyse

    analysis = analyse(read(case.before), options)
    assert analysis.new_text is None
    if case.name.startswith("noop_"):
        assert analysis.findings == []
    else:
        assert analysis.findings and not any(f.fixable for f in analysis.findings)
        assert all(f.reason and f.reason.startswith("no automatic fix: ") for f in analysis.findings)
