"""TFD009 backup-and-restore: a suggestion for multi-worker Keras 2 fit; --unsafe-fixes adds the callback."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read

UNSAFE = Options(select=("TFD009",), unsafe_fixes=True)
SAFE_ONLY = Options(select=("TFD009",))


@pytest.mark.parametrize("case", params("tfd009", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd009", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd009", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd009"))
def test_it_is_only_ever_a_suggestion(case):
    analysis = analyse(read(case.before), SAFE_ONLY)
    assert analysis.new_text is None
    assert all(f.unsafe and not f.fixable for f in analysis.findings)


def test_check_does_not_fail_on_a_suggestion(tmp_path):
    from click.testing import CliRunner

    from autofix.cli import main

    script = tmp_path / "train.py"
    script.write_text(read(params("tfd009", "fixed")[0].values[0].before))
    result = CliRunner().invoke(main, ["check", "--isolated", "--select", "TFD009", str(script)])
    assert result.exit_code == 0, result.output
    assert "TFD009" in result.output and "suggestion" in result.output
    result = CliRunner().invoke(main, ["check", "--isolated", "--select", "TFD009", "--unsafe-fixes", str(script)])
    assert result.exit_code == 1
