"""Lines that end with a lone carriage return (Python reads them as it reads \\n) are analysed as
their \\n twin would be, and every fix keeps the file's own newlines."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import astuple

import pytest
from click.testing import CliRunner

from autofix import engine, newlines, parsing
from autofix.cli import main
from autofix.engine import Options, process_notebook, process_text
from fixturecases import FIXTURES, cases, read

FIXED_CASES = [c for rule in sorted(p.name for p in FIXTURES.glob("tfd*")) for c in cases(rule) if c.after is not None]

TRAIN = (
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    'model.compile(optimizer="adam", loss="mse")\n'
    "model.fit(tf.data.Dataset.range(8).batch(4))  # 4 per replica\n"
)


def places(result):
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.fixable, f.reason) for f in result.findings]


@pytest.mark.parametrize("case", FIXED_CASES, ids=lambda c: c.id)
def test_a_lone_cr_file_is_analysed_and_fixed_as_its_lf_twin(case):
    text = read(case.before)
    if "\r" in text:
        pytest.skip("the fixture has its own carriage returns")
    # (TFD002's cases are fixed with --unsafe-fixes, as test_tfd002 fixes them: most leave
    # unsaid whether their batch is per replica.)
    options = Options(unsafe_fixes=case.rule == "tfd002")
    lf = process_text(text, "x.py", options)
    cr = process_text(text.replace("\n", "\r"), "x.py", options)
    assert cr.error is None and places(cr) == places(lf)
    assert (cr.new_text is None) == (lf.new_text is None)
    if lf.new_text is not None:
        assert cr.new_text == lf.new_text.replace("\n", "\r")
        compile(cr.new_text, "fixed", "exec")
        assert process_text(cr.new_text, "x.py", options).new_text is None  # idempotent


def test_mixed_newlines_keep_each_line_its_own():
    # A file edited on three systems: each line the fix does not rewrite keeps its newline;
    # lines it writes take the file's most common one.
    lines = TRAIN.split("\n")
    text = lines[0] + "\r\n" + lines[1] + "\r" + lines[2] + "\r" + lines[3] + "\n" + lines[4] + "\r"
    result = process_text(text, "x.py", Options())
    assert [f[:3] for f in places(result)] == [("TFD002", 5, 44), ("TFD001", 3, 9), ("TFD001", 4, 1)] or places(result)
    twin = process_text(newlines.translate(text).text, "x.py", Options())
    assert places(result) == places(twin)
    new = result.new_text
    assert new.startswith(lines[0] + "\r\n" + lines[1] + "\r")
    assert newlines.translate(new).text == twin.new_text
    assert "\n" + lines[4].replace("(4)", "(4 * strategy.num_replicas_in_sync)") not in new
    compile(new, "fixed", "exec")


def test_the_depth_check_counts_lone_cr_lines():
    deep = "x = " + "(" * 150 + "1" + ")" * 150
    text = "import tensorflow as tf\r" * 3 + "y = [" + "[" * 50 + "]" * 50 + "]\r" + deep + "\r"
    assert parsing.refuse_too_deep(text) is not None
    too_deep = "\r" * 5 + "x = " + " and ".join(["a"] * 1200) + "\r"
    with pytest.raises(parsing.AnalysisError) as caught:
        parsing.refuse_too_deep(too_deep)
    assert caught.value.line == 6


def test_suppressions_and_add_noqa_in_a_lone_cr_file():
    text = TRAIN.replace("\n", "\r")
    noted = process_text(text, "x.py", Options(add_noqa=True, build_fixes=False))
    assert noted.new_text is not None and "\n" not in noted.new_text
    assert "# autofix: ignore[TFD001]" in noted.new_text
    assert [f for f in process_text(noted.new_text, "x.py", Options()).findings if not f.suppressed] == []


def test_mixed_indentation_and_lone_cr():
    text = TRAIN.replace("model = tf", "if True:\n\tmodel = tf").replace("model.compile", "if True:\n        model.compile")
    cr = process_text(text.replace("\n", "\r"), "x.py", Options())
    lf = process_text(text, "x.py", Options())
    assert cr.error == lf.error and places(cr) == places(lf)
    if lf.new_text is not None:
        assert cr.new_text == lf.new_text.replace("\n", "\r")


def test_a_notebook_cell_with_lone_cr_newlines():
    cells = [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
        for source in (TRAIN.split("\n", 2)[0] + "\r" + TRAIN.split("\n", 2)[1] + "\r", "%time x = 1\r" + TRAIN.split("\n", 2)[2].replace("\n", "\r"))
    ]
    notebook = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    result = process_notebook(notebook, "n.ipynb", Options())
    assert result.error is None
    assert [(f.code, f.cell, f.line) for f in result.findings] == [("TFD001", 1, 2), ("TFD001", 1, 3), ("TFD002", 1, 4)]
    fixed = json.loads(result.new_text)["cells"][1]["source"]
    assert fixed.startswith("%time x = 1\r") and "\n" not in fixed and "with strategy.scope():\r" in fixed
    assert process_notebook(result.new_text, "n.ipynb", Options()).new_text is None


def test_fix_writes_lone_cr_and_diff_applies(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_bytes(TRAIN.replace("\n", "\r").encode())
    check = CliRunner().invoke(main, ["check", "--isolated", "train.py"])
    assert check.exit_code == 1 and "train.py:3:9: TFD001" in check.stdout
    patch = CliRunner().invoke(main, ["diff", "--isolated", "train.py"]).stdout_bytes
    done = CliRunner().invoke(main, ["fix", "--isolated", "train.py"])
    assert done.exit_code == 0
    fixed = (tmp_path / "train.py").read_bytes()
    assert b"\n" not in fixed and b"with strategy.scope():\r" in fixed
    if shutil.which("git"):
        (tmp_path / "train.py").write_bytes(TRAIN.replace("\n", "\r").encode())
        subprocess.run(["git", "init", "-q"], check=True)
        subprocess.run(["git", "apply", "-"], input=patch, check=True)
        assert (tmp_path / "train.py").read_bytes() == fixed
    # JSON places each finding's part of the fix in the lines Python reads, as the findings'
    # own lines are: where the \n twin has them.
    def parts(text):
        (tmp_path / "train.py").write_bytes(text.encode())
        report = json.loads(CliRunner().invoke(main, ["check", "--isolated", "--format", "json", "train.py"]).stdout)
        return [
            (item["code"], item["line"], [(r["start_line"], r["start_column"], r["end_line"], r["end_column"]) for r in item["fix"]["replacements"]])
            for item in report
        ]

    cr, lf = parts(TRAIN.replace("\n", "\r")), parts(TRAIN)
    assert cr == lf and any(replacements for _, _, replacements in cr)
