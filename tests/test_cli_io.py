"""What the command line reads and writes: standard input byte for byte, reports that cannot be
written, honest summaries, and diffs that `git apply` and `patch -p1` really accept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from autofix.cli import main
from conftest import BROKEN, FIXED

CP1252_CLEAN = '# -*- coding: cp1252 -*-\nGREETING = "café"\nprint(GREETING, len(GREETING))\n'.encode("cp1252")
BOM_CLEAN = b"\xef\xbb\xbfx = 1\n"


def invoke(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.mark.parametrize("data", [CP1252_CLEAN, BOM_CLEAN, BROKEN.replace("\n", "\r\n").encode()], ids=["cp1252", "bom", "crlf"])
def test_fix_stdin_echoes_code_it_does_not_change_byte_for_byte(data):
    if b"distribute" in data:
        data = FIXED.replace("\n", "\r\n").encode()
    result = invoke("fix", "--isolated", "-", input=data)
    assert result.exit_code == 0
    assert result.stdout_bytes == data


def test_fix_stdin_writes_the_fix_in_the_input_encoding():
    source = "# -*- coding: cp1252 -*-\n# café\n" + BROKEN
    result = invoke("fix", "--isolated", "--select", "TFD001", "-", input=b"\xef\xbb\xbf" + source.encode("cp1252"))
    # A BOM says UTF-8 and wins over the cookie, as for Python: a cp1252 cookie with a BOM is
    # an error, and the input comes back as it was.
    assert result.exit_code == 2 and result.stdout_bytes.startswith(b"\xef\xbb\xbf")
    result = invoke("fix", "--isolated", "--select", "TFD001", "-", input=source.encode("cp1252"))
    assert result.exit_code == 0
    assert result.stdout_bytes == ("# -*- coding: cp1252 -*-\n# café\n" + FIXED).encode("cp1252")


def test_fix_stdin_that_cannot_be_parsed_is_echoed_with_the_error_on_stderr():
    data = b"import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy(\n"
    result = invoke("fix", "-", input=data)
    assert result.exit_code == 2
    assert result.stdout_bytes == data
    assert "error: -: line 2" in result.stderr


def test_stdin_filename_honours_force_exclude(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.autofix]\nexclude = ["legacy/"]\nforce-exclude = true\n')
    (tmp_path / "legacy").mkdir()
    monkeypatch.chdir(tmp_path)
    check = invoke("check", "-", "--stdin-filename", "legacy/x.py", input=BROKEN)
    assert check.exit_code == 0 and check.stdout == ""
    fixed = invoke("fix", "-", "--stdin-filename", "legacy/x.py", input=BROKEN)
    assert fixed.exit_code == 0 and fixed.stdout == BROKEN
    # Not excluded: fixed as usual.
    assert invoke("fix", "-", "--stdin-filename", "src/x.py", input=BROKEN).stdout.startswith(FIXED.split("with")[0])


def test_summary_counts_only_files_really_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ro.py").write_text(BROKEN)
    (tmp_path / "rw.py").write_text(BROKEN)
    os.chmod(tmp_path / "ro.py", 0o444)
    result = invoke("fix", "--isolated", "-j", "1", ".")
    assert result.exit_code == 2
    assert "error: ro.py: is read-only; not modified" in result.stderr
    assert "1 file changed, 1 error." in result.stderr
    assert (tmp_path / "ro.py").read_text() == BROKEN and (tmp_path / "rw.py").read_text() == FIXED


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_exit_2_with_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clean.py").write_text("x = 1\n")
    full = invoke("check", "--format", "json", "--output", "/dev/full", "clean.py")
    assert full.exit_code == 2
    assert "error: cannot write the report to /dev/full: No space left on device" in full.stderr.splitlines()
    assert "Traceback" not in full.stderr
    missing = invoke("check", "--format", "sarif", "--exit-zero", "--output", "no/such/dir/x.sarif", "clean.py")
    assert missing.exit_code == 2
    assert missing.stderr.splitlines() == ["error: cannot write the report to no/such/dir/x.sarif: No such file or directory"]


def test_explain_tfd100():
    result = invoke("explain", "TFD100")
    assert result.exit_code == 0
    assert result.stdout.startswith("TFD100 unused-suppression\n")
    assert "--unused-suppressions" in result.stdout


def test_a_named_file_the_prefilter_skips_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain.py").write_text("import tensorflow as tf\nmodel = tf.keras.Sequential()\n")
    named = invoke("check", "--isolated", "plain.py")
    assert named.exit_code == 0
    assert "plain.py: skipped: it does not use tf.distribute" in named.stderr
    assert "skipped" not in invoke("check", "--isolated", ".").stderr  # not for every file of a tree


def test_a_named_fifo_is_an_error_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "train.py")
    result = invoke("check", "train.py")
    assert result.exit_code == 2
    assert "error: train.py: not a regular file" in result.stderr


# --- diffs that apply -----------------------------------------------------------------------

NOTEBOOK_CELLS = ["import tensorflow as tf\n", "strategy = tf.distribute.MirroredStrategy()"]


def _notebook() -> str:
    cells = [NOTEBOOK_CELLS, ["model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n", "model.compile(optimizer='adam', loss='mse')\n", "model.fit(x, y)"]]
    data = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": c} for i, c in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=1) + "\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A tree with every kind of file whose diff used to be refused."""
    files = {
        "bom.py": b"\xef\xbb\xbf" + BROKEN.encode(),
        "cp1252.py": ("# -*- coding: cp1252 -*-\n# modèle\n" + BROKEN).encode("cp1252"),
        "dir with spaces/plain.py": BROKEN.encode(),
        'odd "name".py': BROKEN.encode(),
        "crlf.py": BROKEN.replace("\n", "\r\n").encode(),
        "nb/train.ipynb": _notebook().encode(),
    }
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q", "."], check=True)
    return tmp_path


@pytest.mark.skipif(not shutil.which("git") or not shutil.which("patch"), reason="needs git and patch")
def test_the_diff_applies_with_git_apply_and_patch(tree):
    diff = invoke("diff", "--isolated", "--select", "TFD001", ".")
    assert diff.exit_code == 1
    patch = tree / "fixes.diff"
    patch.write_bytes(diff.stdout_bytes)
    git = subprocess.run(["git", "apply", "--check", str(patch)], capture_output=True, text=True)
    assert git.returncode == 0, git.stderr
    dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch)], capture_output=True, text=True)
    assert dry.returncode == 0 and "FAILED" not in dry.stdout and "fuzz" not in dry.stdout, dry.stdout + dry.stderr
    # Applied, the patch gives exactly what `fix` writes.
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts and p != patch}
    subprocess.run(["git", "apply", str(patch)], check=True)
    applied = {p: p.read_bytes() for p in before}
    for path, data in before.items():
        path.write_bytes(data)
    assert invoke("fix", "--isolated", "--select", "TFD001", ".").exit_code == 0
    assert {p: p.read_bytes() for p in before} == applied
    assert applied[tree / "cp1252.py"].decode("cp1252").startswith("# -*- coding: cp1252 -*-\n# modèle\n")
    assert applied[tree / "bom.py"].startswith(b"\xef\xbb\xbf")


def test_cells_view_names_the_cell(tree):
    result = invoke("diff", "--isolated", "--cells", "--select", "TFD001", "nb/train.ipynb")
    assert result.stdout.startswith("--- a/nb/train.ipynb:cell 2\n+++ b/nb/train.ipynb:cell 2\n")
