"""The fixes of the multi-worker rules, proven on two worker processes (``autofix smoke --workers 2``).

For TFD006, TFD007 and TFD008, the broken fixture is run as a cluster of two loopback workers
and must fail the smoke test for the reason the rule gives; the rule's fix of it must pass,
with both workers in agreement. Each run starts two TensorFlow processes (15-20 s here), so
there are three tests.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixturecases import FIXTURES, read

from autofix.cli import main
from autofix.engine import Options, analyse

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras is not installed"),
]


def _smoke(folder: Path, name: str, text: str) -> tuple[int, dict]:
    script = folder / name
    script.write_text(text)
    report = folder / f"{name}.json"
    result = CliRunner().invoke(main, ["smoke", str(script), "--workers", "2", "--steps", "2", "--json", str(report)])
    return result.exit_code, json.loads(report.read_text())


def _failed(report: dict) -> list[str]:
    return [c["message"] for c in report["checks"] if not c["passed"]]


def _fixed(rule: str, case: str, unsafe: bool = False) -> tuple[str, str]:
    before = read(FIXTURES / rule.lower() / f"{case}.py")
    analysis = analyse(before, Options(select=(rule,), unsafe_fixes=unsafe))
    assert analysis.new_text is not None and analysis.findings
    return before, analysis.new_text


def _agree(report: dict) -> None:
    workers = report["workers"]
    assert (workers["count"], workers["trained"], workers["agree"]) == (2, 2, True)


def test_tfd006_tf_keras_trains_where_keras_3_fails(tmp_path):
    before, after = _fixed("TFD006", "tf_keras_spelling", unsafe=True)
    code, report = _smoke(tmp_path, "broken.py", before)
    assert code == 1
    assert any("keras-team/keras#20585" in message for message in _failed(report))
    code, report = _smoke(tmp_path, "fixed.py", after)
    assert code == 0, _failed(report)
    assert report["fits"][0]["keras"].startswith("tf_keras 2.")
    _agree(report)


def test_tfd007_only_the_chief_writes_the_real_path(tmp_path):
    before, after = _fixed("TFD007", "save_in_main")
    code, report = _smoke(tmp_path, "broken.py", before)
    assert code == 1
    assert any("both wrote output/model.keras" in w for w in report["workers"]["shared_writes"])
    code, report = _smoke(tmp_path, "fixed.py", after)
    assert code == 0, _failed(report)
    assert report["workers"]["shared_writes"] == []
    _agree(report)


def test_tfd008_data_sharding_splits_the_examples(tmp_path):
    before, after = _fixed("TFD008", "off_no_shard")
    code, report = _smoke(tmp_path, "broken.py", before)
    assert code == 1
    assert any("every worker on the same examples" in message for message in _failed(report))
    code, report = _smoke(tmp_path, "fixed.py", after)
    assert code == 0, _failed(report)
    _agree(report)
