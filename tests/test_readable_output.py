"""Output people read: findings in the order of the files and places, the rule list in 80
columns, --statistics and --show-fixes."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
from click.testing import CliRunner

from autofix import registry
from autofix.cli import main
from conftest import BROKEN
from fixturecases import FIXTURES

# TFD002 (line 4) comes before TFD001 (lines 5 and 6) in the file; rules run TFD001 first.
ORDERED = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "ds = tf.data.Dataset.range(8).batch(32)  # per replica\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(ds)\n"
)


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / "b.py").write_text(ORDERED)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text(BROKEN)
    (tmp_path / "a.py").write_text(BROKEN)
    shutil.copyfile(FIXTURES / "notebooks" / "train.ipynb", tmp_path / "c.ipynb")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_findings_are_sorted_by_file_then_line_then_column(repo):
    lines = run("check", "sub", "c.ipynb", "b.py", "a.py").stdout.splitlines()
    places = [line.split(": ")[0] for line in lines]
    assert places == [
        "a.py:4:9",
        "a.py:5:1",
        "b.py:4:37",
        "b.py:5:9",
        "b.py:6:1",
        "c.ipynb:cell 4:3:61",
        "c.ipynb:cell 5:2:9",
        "c.ipynb:cell 5:3:1",
        "sub/a.py:4:9",
        "sub/a.py:5:1",
    ]
    assert [line.split(": ")[1][:6] for line in lines[2:5]] == ["TFD002", "TFD001", "TFD001"]


def test_json_and_the_other_formats_follow_the_same_order(repo):
    items = json.loads(run("check", "--format", "json", ".").stdout)
    keys = [(i["path"], i["cell"] if i["cell"] is not None else -1, i["line"], i["column"]) for i in items]
    assert keys == sorted(keys, key=lambda k: (k[0].split("/"), *k[1:]))


def test_rules_fit_80_columns_when_piped_and_nothing_is_cut():
    result = run("rules")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert all(len(line) < 80 for line in lines)
    flowing = " ".join(line.strip() for line in lines)
    for rule in registry.all_rules():
        assert rule.CODE in flowing and rule.NAME in flowing
        assert " ".join(rule.DESCRIPTION.split()) in flowing, rule.CODE
    assert "…" not in result.stdout


def test_statistics_count_findings_per_rule_and_what_is_fixable(repo):
    items = json.loads(run("check", "--format", "json", ".").stdout)
    expected = {}
    for item in items:
        count, fixable = expected.get(item["code"], (0, 0))
        expected[item["code"]] = (count + 1, fixable + item["fixable"])
    result = run("check", "--statistics", ".")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["count", "code", "name", "fixable"]
    rows = [line.split() for line in lines[1:]]
    assert {code: (int(count), int(fixable)) for count, code, _name, fixable in rows} == expected
    counts = [int(row[0]) for row in rows]
    assert counts == sorted(counts, reverse=True)
    as_json = json.loads(run("check", "--statistics", "--format", "json", ".").stdout)
    assert {r["code"]: (r["count"], r["fixable"]) for r in as_json} == expected
    assert {r["name"] for r in as_json} == {registry.rule_by_code(code).NAME for code in expected}


def test_statistics_in_a_format_that_cannot_show_them(repo):
    assert run("check", "--statistics", "--format", "sarif", ".").exit_code == 2


def test_statistics_of_a_clean_tree_are_empty(tmp_path, monkeypatch):
    (tmp_path / "clean.py").write_text("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n")
    monkeypatch.chdir(tmp_path)
    result = run("check", "--statistics", ".")
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads(run("check", "--statistics", "--format", "json", ".").stdout) == []


def test_show_fixes_lists_the_fixes_by_file(repo):
    expected = textwrap.dedent(
        """\
        - a.py:
            2 × TFD001 (variables-outside-scope)
        - b.py:
            2 × TFD001 (variables-outside-scope)
            1 × TFD002 (unscaled-batch)
        """
    )
    shown = run("diff", "--show-fixes", "a.py", "b.py")
    assert "Would fix 5 findings:\n" + expected in shown.stderr
    checked = run("check", "--show-fixes", "a.py", "b.py")
    assert "Would fix 5 findings:\n" + expected in checked.stderr
    fixed = run("fix", "--show-fixes", "a.py", "b.py")
    assert "Fixed 5 findings:\n" + expected in fixed.stderr
    again = run("fix", "--show-fixes", "a.py", "b.py")
    assert "No findings fixed." in again.stderr
