"""`autofix check --add-noqa`: every current finding gets an `# autofix: ignore[CODE]` comment,
so that `check` passes until a new finding appears."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from autofix.cli import main
from conftest import BROKEN
from fixturecases import FIXTURES

ORDERED = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "ds = tf.data.Dataset.range(8).batch(32)  # autofix: ignore[TFD004]\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # the model\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(ds)\n"
)
# The batch's line ends with a backslash (it cannot hold a comment): the statement's first
# line takes it.
CONTINUED = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "ds = (tf.data.Dataset.range(8)  # the data\n"
    "      .batch(32) \\\n"
    "      .prefetch(1))\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(ds)\n"
)
# No line of the model's statement can end with a comment.
NOWHERE = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)]); optimizer = \\\n"
    "    tf.keras.optimizers.Adam()\n"
    "model.fit(tf.zeros([4, 1]), tf.zeros([4, 1]))\n"
)


def run(*args: str):
    return CliRunner().invoke(main, [*args, "-j", "1"], catch_exceptions=False)


def findings(*args: str) -> list[dict]:
    return json.loads(run("check", "--format", "json", *args).stdout)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BROKEN)
    (tmp_path / "ordered.py").write_text(ORDERED)
    shutil.copyfile(FIXTURES / "notebooks" / "train.ipynb", tmp_path / "explore.ipynb")
    (tmp_path / "clean.py").write_text("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_finding_is_suppressed_and_check_then_passes(repo):
    before = findings(".")
    assert before
    result = run("check", "--add-noqa", ".")
    assert result.exit_code == 0
    assert f"Suppressed {len(before)} findings with `# autofix: ignore` comments in 3 files." in result.stderr
    after = run("check", ".")
    assert after.exit_code == 0 and after.stdout == ""


def test_only_lines_with_findings_change_and_comments_merge(repo):
    before = {p.name: p.read_bytes() for p in repo.iterdir()}
    run("check", "--add-noqa", "ordered.py", "train.py")
    assert (repo / "ordered.py").read_text().splitlines() == [
        "import tensorflow as tf",
        "",
        "strategy = tf.distribute.MirroredStrategy()",
        "ds = tf.data.Dataset.range(8).batch(32)  # autofix: ignore[TFD002, TFD004]",
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # the model  # autofix: ignore[TFD001]",
        "model.compile(optimizer='adam', loss='mse')  # autofix: ignore[TFD001]",
        "model.fit(ds)",
    ]
    for name in ("clean.py", "explore.ipynb"):
        assert (repo / name).read_bytes() == before[name]


def test_it_is_idempotent(repo):
    run("check", "--add-noqa", ".")
    once = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}
    again = run("check", "--add-noqa", ".")
    assert again.exit_code == 0 and "Suppressed 0 findings" in again.stderr
    assert {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()} == once


def test_the_first_line_of_the_statement_when_the_finding_line_cannot_end_with_a_comment(tmp_path, monkeypatch):
    (tmp_path / "continued.py").write_text(CONTINUED)
    monkeypatch.chdir(tmp_path)
    assert run("check", "--add-noqa", "continued.py").exit_code == 0
    lines = (tmp_path / "continued.py").read_text().splitlines()
    assert lines[3] == "ds = (tf.data.Dataset.range(8)  # the data  # autofix: ignore[TFD002]"
    assert lines[4] == "      .batch(32) \\"
    assert run("check", "continued.py").exit_code == 0


def test_a_finding_no_comment_can_reach_is_named_and_fails(tmp_path, monkeypatch):
    (tmp_path / "nowhere.py").write_text(NOWHERE)
    monkeypatch.chdir(tmp_path)
    result = run("check", "--add-noqa", "nowhere.py")
    assert result.exit_code == 1
    assert "warning: nowhere.py:4:9: TFD001 not suppressed: no line of its statement can end with" in result.stderr
    assert (tmp_path / "nowhere.py").read_text() == NOWHERE


def test_notebook_cells_get_the_comments(repo):
    before = json.loads((repo / "explore.ipynb").read_text())
    run("check", "--add-noqa", "explore.ipynb")
    after = json.loads((repo / "explore.ipynb").read_text())
    assert [c for c in after["cells"] if c["cell_type"] != "code"] == [c for c in before["cells"] if c["cell_type"] != "code"]
    assert after["cells"][3]["source"][-1].endswith(".batch(32)  # autofix: ignore[TFD002]")
    assert after["cells"][4]["source"][1].endswith("  # autofix: ignore[TFD001]\n")
    assert after["cells"][4]["outputs"] == before["cells"][4]["outputs"]
    assert run("check", "explore.ipynb").exit_code == 0


def test_encoding_bom_and_newlines_are_kept(tmp_path, monkeypatch):
    latin = ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + BROKEN).replace("\n", "\r\n").encode("latin-1")
    (tmp_path / "latin.py").write_bytes(latin)
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + BROKEN.encode())
    monkeypatch.chdir(tmp_path)
    run("check", "--add-noqa", ".")
    written = (tmp_path / "latin.py").read_bytes()
    assert b"caf\xe9\r\n" in written and b"\n" not in written.replace(b"\r\n", b"")
    assert b"Dense(1)])  # autofix: ignore[TFD001]\r\n" in written
    assert (tmp_path / "bom.py").read_bytes().startswith(b"\xef\xbb\xbfimport tensorflow")
    assert run("check", ".").exit_code == 0


def test_only_the_rules_that_run(repo):
    run("check", "--add-noqa", "--select", "TFD002", "ordered.py")
    text = (repo / "ordered.py").read_text()
    assert "ignore[TFD002, TFD004]" in text and "TFD001" not in text


def test_standard_input_is_refused(repo):
    result = CliRunner().invoke(main, ["check", "--add-noqa", "-"], input=BROKEN)
    assert result.exit_code == 2 and "--add-noqa" in result.stderr


def _notebook(*sources: str) -> str:
    cells = [
        {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": source}
        for i, source in enumerate(sources)
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


TIMED = _notebook(
    "import tensorflow as tf\nfrom tensorflow import keras\nstrategy = tf.distribute.MirroredStrategy()",
    '%time model = keras.Sequential([keras.layers.Dense(1)])  # the model\nmodel.compile(optimizer="adam", loss="mse")',
    "%matplotlib inline\nmodel.fit(tf.zeros([8, 4]), tf.zeros([8, 1]), epochs=1)",
)


def test_a_finding_on_a_time_magic_line_gets_its_comment(tmp_path, monkeypatch):
    """IPython hands the rest of a `%time` line to the magic, which runs it as Python: a
    comment at its end is part of that Python (checked below with IPython itself)."""
    (tmp_path / "timed.ipynb").write_text(TIMED)
    monkeypatch.chdir(tmp_path)
    result = run("check", "--add-noqa", "timed.ipynb")
    assert result.exit_code == 0, result.stderr
    assert "Suppressed 2 findings with `# autofix: ignore` comments in 1 file." in result.stderr
    cell = "".join(json.loads((tmp_path / "timed.ipynb").read_text())["cells"][1]["source"])
    assert cell.splitlines() == [
        "%time model = keras.Sequential([keras.layers.Dense(1)])  # the model  # autofix: ignore[TFD001]",
        'model.compile(optimizer="adam", loss="mse")  # autofix: ignore[TFD001]',
    ]
    assert run("check", "timed.ipynb").exit_code == 0
    written = (tmp_path / "timed.ipynb").read_bytes()
    again = run("check", "--add-noqa", "timed.ipynb")
    assert again.exit_code == 0 and (tmp_path / "timed.ipynb").read_bytes() == written

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["built"] = []
    ran = shell.run_cell("%time x = built.append(1) or 2  # the model  # autofix: ignore[TFD001]", silent=True)
    assert ran.success and shell.user_ns["x"] == 2 and shell.user_ns["built"] == [1]


def test_comments_that_could_not_be_written_are_not_claimed(tmp_path, monkeypatch):
    """Only comments that reach the file count: a file that cannot be written leaves each of
    its findings named as not suppressed, with why."""
    (tmp_path / "train.py").write_text(BROKEN)
    (tmp_path / "timed.ipynb").write_text(TIMED)
    for name in ("train.py", "timed.ipynb"):
        (tmp_path / name).chmod(0o444)
    monkeypatch.chdir(tmp_path)
    result = run("check", "--add-noqa", ".")
    assert result.exit_code == 2
    assert "Suppressed 0 findings with `# autofix: ignore` comments in 0 files." in result.stderr
    assert "warning: timed.ipynb:cell 2:1:15: TFD001 not suppressed: its comment could not be written (is read-only" in result.stderr
    assert "warning: train.py:4:9: TFD001 not suppressed: its comment could not be written" in result.stderr
    assert (tmp_path / "timed.ipynb").read_text() == TIMED and (tmp_path / "train.py").read_text() == BROKEN
