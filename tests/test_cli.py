"""The command-line contract: output, exit codes, and what is (not) written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix.cli import main
from conftest import BROKEN, FIXED

CLEAN = "import tensorflow as tf\nx = tf.constant(1)\n"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BROKEN)
    (tmp_path / "clean.py").write_text(CLEAN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_check_reports_findings_and_exits_1(repo):
    result = run("check", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "train.py:4:9: TFD001 [*] model built outside strategy.scope(), so its variables are not mirrored across replicas",
        "train.py:5:1: TFD001 [*] compile() makes its optimizer outside strategy.scope(): Keras 3 fails with \"Mixing different tf.distribute.Strategy objects\"",
    ]
    assert "Checked 2 files, 2 findings (TFD001 2), 2 fixable" in result.stderr
    assert "suggestion" not in result.stderr
    assert (repo / "train.py").read_text() == BROKEN


def test_the_opt_in_rule_runs_only_when_named(repo):
    result = run("check", "--select", "TFD,TFD005", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[2:] == [
        "train.py:5:25: TFD005 learning rate is not scaled with the global batch: linear scaling multiplies it by "
        "strategy.num_replicas_in_sync (suggestion; no automatic fix: a string optimizer uses its default rate; to "
        "scale it, pass keras.optimizers.Adam(learning_rate=<rate> * strategy.num_replicas_in_sync))",
    ]
    # Its suggestion has no fix: --unsafe-fixes would apply nothing, so the summary does not offer it.
    assert "Checked 2 files, 2 findings (TFD001 2), 2 fixable, 1 suggestion." in result.stderr
    assert "TFD005" not in run("check", "--select", "ALL", ".").stdout
    (repo / "rates.py").write_text(
        "import tensorflow as tf\nfrom tensorflow import keras\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n    model = keras.Sequential([keras.layers.Dense(1)])\n"
        "    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss='mse')\n"
        "model.fit(tf.zeros((8, 4)), tf.zeros((8, 1)), batch_size=64 * strategy.num_replicas_in_sync)\n"
    )
    offered = run("check", "--select", "TFD005", "rates.py")
    assert "1 suggestion (--unsafe-fixes to apply)" in offered.stderr, offered.stderr


def test_check_clean_exits_0(repo):
    result = run("check", "clean.py")
    assert result.exit_code == 0
    assert result.stdout == ""


def test_suggestions_do_not_fail_check_unless_unsafe_fixes_are_on(repo):
    (repo / "ok.py").write_text(FIXED)
    result = run("check", "--select", "TFD005", "ok.py")
    assert result.exit_code == 0
    assert "TFD005" in result.stdout and "suggestion" in result.stdout
    assert run("check", "--select", "TFD005", "--unsafe-fixes", "ok.py").exit_code == 1


def test_check_with_a_bad_file_exits_2_and_still_reports_the_others(repo):
    (repo / "broken.py").write_bytes(b"import tensorflow.distribute\ndef (\n")
    result = run("check", ".")
    assert result.exit_code == 2
    assert "train.py:4:9: TFD001" in result.stdout
    assert "error: broken.py: line 2" in result.stderr


def test_exit_zero(repo):
    assert run("check", "--exit-zero", ".").exit_code == 0


def test_missing_path_is_an_error(repo):
    result = run("check", "nope.py")
    assert result.exit_code == 2
    assert "nope.py: no such file or directory" in result.stderr


def test_diff_prints_a_patch_git_can_apply_and_writes_nothing(repo):
    result = run("diff", "train.py")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n@@ ")
    assert (repo / "train.py").read_text() == BROKEN
    if shutil.which("git"):
        (repo / "fix.patch").write_text(result.stdout)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["git", "apply", "fix.patch"], cwd=repo, check=True)
        assert (repo / "train.py").read_text() == FIXED


def test_diff_of_crlf_file_applies_and_keeps_crlf(repo):
    (repo / "win.py").write_bytes(BROKEN.replace("\n", "\r\n").encode())
    result = CliRunner().invoke(main, ["diff", "win.py"])
    assert result.exit_code == 1
    patch = result.stdout_bytes
    assert b"+    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\r\n" in patch
    if shutil.which("git"):
        (repo / "win.patch").write_bytes(patch)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["git", "apply", "win.patch"], cwd=repo, check=True)
        assert (repo / "win.py").read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_diff_without_changes_exits_0(repo):
    result = run("diff", "clean.py")
    assert result.exit_code == 0 and result.stdout == ""


def test_fix_writes_and_second_run_changes_nothing(repo):
    result = run("fix", ".")
    assert result.exit_code == 0
    assert "fixed train.py (2 findings)" in result.stderr
    assert (repo / "train.py").read_text() == FIXED
    assert (repo / "clean.py").read_text() == CLEAN
    again = run("fix", ".")
    assert again.exit_code == 0 and "fixed" not in again.stderr
    assert run("check", ".").exit_code == 0


def test_fix_crlf_round_trip(repo):
    (repo / "win.py").write_bytes(BROKEN.replace("\n", "\r\n").encode())
    assert run("fix", "win.py").exit_code == 0
    assert (repo / "win.py").read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_fix_with_an_unreadable_file_exits_2_but_fixes_the_rest(repo):
    (repo / "bin.py").write_bytes(b"\x00\x00distribute")
    (repo / "latin.py").write_bytes(b"# distribute\nx = '\xe9'\n")
    result = run("fix", ".")
    assert result.exit_code == 2
    assert "bin.py: binary file" in result.stderr
    assert "latin.py: line 2: not valid utf-8" in result.stderr
    assert (repo / "train.py").read_text() == FIXED
    assert (repo / "bin.py").read_bytes() == b"\x00\x00distribute"
    assert (repo / "latin.py").read_bytes() == b"# distribute\nx = '\xe9'\n"


def test_stdin(repo):
    check = run("check", "-", input=BROKEN)
    assert check.exit_code == 1 and check.stdout.startswith("-:4:9: TFD001")
    named = run("check", "--stdin-filename", "t.py", "-", input=BROKEN)
    assert named.stdout.startswith("t.py:4:9: TFD001")
    fixed = run("fix", "-", input=BROKEN)
    assert fixed.exit_code == 0 and fixed.stdout == FIXED
    unchanged = run("fix", "-", input=CLEAN)
    assert unchanged.stdout == CLEAN
    diff = run("diff", "-", input=BROKEN)
    assert diff.exit_code == 1 and "+with strategy.scope():" in diff.stdout


def test_select_and_ignore(repo):
    assert run("check", "--select", "TFD001", ".").exit_code == 1
    assert run("check", "--ignore", "TFD001", ".").exit_code == 0
    assert run("check", "--select", "TFD0", ".").exit_code == 1
    bad = CliRunner().invoke(main, ["check", "--select", "XYZ1", "."])
    assert bad.exit_code == 2 and "unknown rule code 'XYZ1'" in bad.stderr


def test_json_format(repo):
    result = run("check", "--format", "json", "--select", "TFD001,TFD005", ".")
    assert result.exit_code == 1
    items = json.loads(result.stdout)
    assert [(i["path"], i["code"], i["line"], i["column"], i["fixable"], i["unsafe"]) for i in items] == [
        ("train.py", "TFD001", 4, 9, True, False),
        ("train.py", "TFD001", 5, 1, True, False),
        ("train.py", "TFD005", 5, 25, False, True),
    ]


def test_github_format(repo):
    result = run("check", "--format", "github", "train.py")
    first = result.stdout.splitlines()[0]
    assert first.startswith("::warning file=train.py,line=4,col=9,endLine=4,endColumn=")
    assert first.endswith("title=TFD001::model built outside strategy.scope(), so its variables are not mirrored across replicas")


def test_output_file(repo):
    result = run("check", "--format", "json", "--output", "report.json", ".")
    assert result.exit_code == 1 and result.stdout == ""
    assert len(json.loads((repo / "report.json").read_text())) == 2


def test_rules_and_explain():
    listing = run("rules")
    assert listing.exit_code == 0 and "TFD001" in listing.stdout and "variables-outside-scope" in listing.stdout
    text = run("explain", "tfd001")
    assert text.exit_code == 0
    assert text.stdout.startswith("TFD001 variables-outside-scope")
    assert "+with strategy.scope():" in text.stdout
    assert CliRunner().invoke(main, ["explain", "TFD404"]).exit_code == 2


def test_installed_console_script(tmp_path):
    """The real `autofix` executable, as installed next to this Python."""
    exe = Path(sys.executable).with_name("autofix")
    if not exe.exists():
        exe = shutil.which("autofix")
    assert exe, "autofix is not installed in this environment"
    (tmp_path / "train.py").write_text(BROKEN)
    env = {**os.environ, "NO_COLOR": "1"}
    check = subprocess.run([str(exe), "check", "train.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert check.returncode == 1 and "train.py:4:9: TFD001 [*]" in check.stdout
    diff = subprocess.run([str(exe), "diff", "train.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert diff.returncode == 1 and diff.stdout.startswith("--- a/train.py")
    fix = subprocess.run([str(exe), "fix", "train.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert fix.returncode == 0 and (tmp_path / "train.py").read_text() == FIXED


def test_libcst_tool_runs_a_rule(tmp_path):
    """Each rule is also a libcst codemod: `python -m libcst.tool codemod` finds it through
    the project's .libcst.codemod.yaml, also with parallel jobs (the command is pickled)."""
    root = Path(__file__).resolve().parent.parent
    for name in ("train.py", "other.py"):
        (tmp_path / name).write_text(BROKEN)
    proc = subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", "tfd001_variables_outside_scope.VariablesOutsideScope",
         "--no-format", "-j", "2", str(tmp_path)],
        cwd=root, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "train.py").read_text() == FIXED and (tmp_path / "other.py").read_text() == FIXED
    assert proc.stderr.count("TFD001 model built outside strategy.scope()") == 2


def test_autofix_does_not_load_libcst_codemod(tmp_path):
    """libcst.codemod (and libcst.matchers) take half a second to import; autofix only needs
    them when libcst's own tool runs a rule."""
    (tmp_path / "train.py").write_text(BROKEN)
    code = (
        "import sys\n"
        "from autofix.cli import main\n"
        "try:\n"
        "    main(['check', '-j', '1', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('libcst.codemod' in sys.modules, 'libcst.matchers' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert proc.stdout.strip().splitlines()[-1] == "False False", proc.stdout + proc.stderr


def test_notebook_findings_and_diffs_name_the_cell(tmp_path, monkeypatch):
    notebook = Path(__file__).resolve().parent.parent / "fixtures" / "notebooks" / "train.ipynb"
    (tmp_path / "train.ipynb").write_bytes(notebook.read_bytes())
    monkeypatch.chdir(tmp_path)
    check = run("check", "--select", "TFD001", ".")
    assert check.exit_code == 1
    assert check.stdout.splitlines()[0].startswith("train.ipynb:cell 5:2:9: TFD001 [*] model built")
    cells = run("diff", "--cells", "--select", "TFD001", "train.ipynb")
    assert cells.exit_code == 1
    assert cells.stdout.startswith("--- a/train.ipynb:cell 5\n+++ b/train.ipynb:cell 5\n")
    assert "+with strategy.scope():" in cells.stdout
    # Without --cells, the diff is of the notebook file itself (so that it applies).
    diff = run("diff", "--select", "TFD001", "train.ipynb")
    assert diff.exit_code == 1
    assert diff.stdout.startswith("--- a/train.ipynb\n+++ b/train.ipynb\n")
    assert '+    "with strategy.scope():\\n",' in diff.stdout


def test_unused_suppressions_flag(repo):
    (repo / "ok.py").write_text(FIXED.replace("model.fit(x, y)", "model.fit(x, y)  # autofix: ignore[TFD001]"))
    assert "TFD100" not in run("check", "ok.py").stdout
    result = run("check", "--unused-suppressions", "ok.py")
    assert "ok.py:7:1: TFD100 autofix: ignore comment suppresses nothing (TFD001)" in result.stdout
    assert result.exit_code == 1
