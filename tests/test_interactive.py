"""`autofix fix --interactive`: each fix shown and asked about, answers read from standard input.

Two independent fixes: global_strategy_main.py (TFD002 scales its ``.batch(BATCH)``, TFD001
wraps main()'s model); a fix that cannot stand alone: strategy_after_model.py (the strategy moves above the
model: the deletion and the insertion are one fix).

Nothing in global_strategy_main.py says whether ``BATCH = 64`` is each replica's batch or the
global one: TFD002 scales it only with --unsafe-fixes, which the sessions below are given
(test_a_bare_batch_is_not_offered_without_unsafe_fixes is the default).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix import review
from autofix.cli import main
from autofix.engine import Options, process_path, process_text
from autofix.interactive import Review
from fixturecases import FIXTURES

TWO_FIXES = FIXTURES / "tfd001" / "global_strategy_main.py"
MOVED = FIXTURES / "tfd001" / "strategy_after_model.py"
NOTEBOOK = FIXTURES / "notebooks" / "train.ipynb"


UNSAFE = Options(unsafe_fixes=True)


def fixed_text(path: Path) -> str:
    result = process_path(str(path), UNSAFE)
    assert result.changed
    return result.new_text


@pytest.fixture
def repo(tmp_path, monkeypatch):
    shutil.copyfile(TWO_FIXES, tmp_path / "a_two.py")
    shutil.copyfile(MOVED, tmp_path / "b_moved.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def interact(answers: str, *args: str, unsafe_fixes: bool = True):
    unsafe = ["--unsafe-fixes"] if unsafe_fixes else []
    return CliRunner().invoke(main, ["fix", "--interactive", "-j", "1", *unsafe, *args], input=answers, catch_exceptions=False)


def test_each_fix_is_shown_with_its_findings_and_diff(repo):
    result = interact("n\nn\nn\n", ".")
    out = result.stdout
    assert "a_two.py: fix 1 of 2" in out and "a_two.py: fix 2 of 2" in out and "b_moved.py: fix 1 of 1" in out
    assert "a_two.py:12:75: TFD002 batch size is not scaled" in out
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in out
    assert "+    with strategy.scope():" in out
    assert out.count("Apply this fix? [y,n,a,d,q,?] n") == 3
    assert result.exit_code == 0
    assert (repo / "a_two.py").read_bytes() == TWO_FIXES.read_bytes()
    assert (repo / "b_moved.py").read_bytes() == MOVED.read_bytes()
    assert "0 files changed" not in result.stderr and "files changed" not in result.stderr


def test_a_bare_batch_is_not_offered_without_unsafe_fixes(repo):
    """By default the one fix offered in a_two.py is TFD001's; its TFD002 finding is reported
    with the reason, and its batch left as it is."""
    result = interact("y\nn\n", "a_two.py", unsafe_fixes=False)
    assert result.exit_code == 0
    assert "a_two.py: fix 1 of 1" in result.stdout and "fix 1 of 2" not in result.stdout
    assert result.stdout.count("Apply this fix?") == 1
    written = (repo / "a_two.py").read_text()
    assert "with strategy.scope():" in written and ".batch(BATCH)\n" in written
    [batch] = [f for f in process_path(str(repo / "a_two.py"), Options()).findings if f.code == "TFD002"]
    assert not batch.fixable and "--unsafe-fixes" in batch.reason


def test_only_accepted_fixes_are_written_and_what_is_written_is_part_of_the_whole_fix(repo):
    result = interact("n\ny\nn\n", ".")
    assert result.exit_code == 0
    written = (repo / "a_two.py").read_text()
    assert "with strategy.scope():" in written and ".batch(BATCH)\n" in written
    # It parses, and fixing it gives the whole fix: the skipped fix can still be made later.
    again = process_text(written, "a_two.py", UNSAFE)
    assert again.error is None and again.new_text == fixed_text(TWO_FIXES)
    assert (repo / "b_moved.py").read_bytes() == MOVED.read_bytes()
    assert "fixed a_two.py (1 of 2 fixes)" in result.stderr
    assert "1 file changed" in result.stderr


def test_all_in_this_file_then_done_with_the_next(repo):
    (repo / "c_two.py").write_bytes(TWO_FIXES.read_bytes())
    result = interact("a\nd\ny\n", ".")
    assert (repo / "a_two.py").read_text() == fixed_text(TWO_FIXES)
    assert (repo / "b_moved.py").read_bytes() == MOVED.read_bytes()
    assert "c_two.py: fix 1 of 2" in result.stdout
    written = (repo / "c_two.py").read_text()
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in written and "with strategy.scope()" not in written


def test_quit_writes_what_this_file_accepted_and_stops(repo):
    result = interact("y\nq\n", ".")
    assert "b_moved.py" not in result.stdout
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in (repo / "a_two.py").read_text()
    assert "with strategy.scope()" not in (repo / "a_two.py").read_text()
    assert (repo / "b_moved.py").read_bytes() == MOVED.read_bytes()


def test_the_end_of_the_answers_is_quit(repo):
    result = interact("y\n", ".")
    assert result.exit_code == 0
    assert "a_two.py: fix 2 of 2" in result.stdout and "b_moved.py" not in result.stdout
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in (repo / "a_two.py").read_text()


def test_an_unknown_answer_prints_the_help_and_asks_again(repo):
    result = interact("maybe\ny\ny\nn\n", "a_two.py")
    assert "a - apply this fix and every later fix in this file" in result.stdout
    assert (repo / "a_two.py").read_text() == fixed_text(TWO_FIXES)


def test_a_fix_that_cannot_stand_alone_is_offered_with_what_it_needs():
    result = process_path(str(MOVED), Options())
    under_review = Review(result, Options())
    hunks = range(len(under_review.hunks))
    assert len(hunks) >= 2
    # The strategy's deletion alone loses it; its insertion alone makes it twice.
    assert not any(under_review.verified([i]) for i in hunks)
    pieces = under_review.pieces()
    assert [piece.hunks for piece in pieces] == [tuple(hunks)]
    assert {f.code for f in pieces[0].findings} >= {"TFD001"}


def test_independent_fixes_are_offered_one_by_one():
    result = process_path(str(TWO_FIXES), UNSAFE)
    pieces = Review(result, UNSAFE).pieces()
    assert [[f.code for f in piece.findings] for piece in pieces] == [["TFD002"], ["TFD001", "TFD001"]]


def test_a_notebook_fix_by_cell(tmp_path, monkeypatch):
    shutil.copyfile(NOTEBOOK, tmp_path / "train.ipynb")
    monkeypatch.chdir(tmp_path)
    before = json.loads(NOTEBOOK.read_text())
    result = interact("n\ny\n", "train.ipynb")
    assert "--- a/train.ipynb:cell 5" in result.stdout
    after = json.loads((tmp_path / "train.ipynb").read_text())
    changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b]
    assert changed == [4]
    assert after["cells"][4]["outputs"] == before["cells"][4]["outputs"]
    assert "with strategy.scope():" in "".join(after["cells"][4]["source"])
    again = process_path(str(tmp_path / "train.ipynb"), UNSAFE)
    assert again.new_text == fixed_text(NOTEBOOK)


def test_crlf_and_bom_are_kept(tmp_path, monkeypatch):
    data = b"\xef\xbb\xbf" + TWO_FIXES.read_bytes().replace(b"\n", b"\r\n")
    (tmp_path / "w.py").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    interact("y\nn\n", "w.py")
    written = (tmp_path / "w.py").read_bytes()
    assert written.startswith(b"\xef\xbb\xbf") and b"\n" not in written.replace(b"\r\n", b"")
    assert b".batch(BATCH * strategy.num_replicas_in_sync)\r\n" in written


def test_a_file_changed_while_asking_is_not_overwritten(repo, monkeypatch):
    real = review._ask

    def edit_then_answer():
        (repo / "a_two.py").write_text("# edited meanwhile\n")
        return real()

    monkeypatch.setattr(review, "_ask", edit_then_answer)
    result = interact("y\ny\n", "a_two.py")
    assert (repo / "a_two.py").read_text() == "# edited meanwhile\n"
    assert "changed on disk since it was read" in result.stderr
    assert result.exit_code == 2


def test_standard_input_cannot_be_both_code_and_answers(repo):
    result = CliRunner().invoke(main, ["fix", "--interactive", "-"], input="y\n")
    assert result.exit_code == 2 and "--interactive" in result.stderr


def test_show_fixes_lists_what_was_accepted(repo):
    result = interact("y\nn\ny\n", "--show-fixes", ".")
    assert "Fixed 4 findings:" in result.stderr
    assert "- a_two.py:\n    1 × TFD002 (unscaled-batch)" in result.stderr
    assert "- b_moved.py:" in result.stderr


def test_a_real_terminal_session_driven_through_a_pipe(repo):
    """The installed command, answers piped to its standard input."""
    command = [sys.executable, "-m", "autofix", "fix", "--interactive", "--unsafe-fixes", "a_two.py"]
    done = subprocess.run(command, input="n\ny\n", capture_output=True, text=True, cwd=repo, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Apply this fix?") == 2
    written = (repo / "a_two.py").read_text()
    assert "with strategy.scope():" in written and ".batch(BATCH)\n" in written
