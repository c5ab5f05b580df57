"""TFD003, driven by the fixture pairs in fixtures/tfd003."""

from __future__ import annotations

import pytest

from autofix.engine import Options
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params

OPTIONS = Options(select=("TFD003",))


@pytest.mark.parametrize("case", params("tfd003", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd003", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd003", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)
