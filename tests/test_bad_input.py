"""Bad input: each file gets a clear error (or is handled), the run goes on, nothing is lost.

All categories go through one real ``autofix fix`` run over a folder that also holds a script
that must be fixed: the bad files must come out byte for byte as they went in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix.cli import main
from autofix.engine import Options, process_path
from conftest import BROKEN, FIXED

STRATEGY = "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"


def _nested_ifs(depth: int) -> str:
    return STRATEGY + "".join("    " * i + "if x:\n" for i in range(depth)) + "    " * depth + "pass\n"


# name -> (bytes, what the error must say; None when the file must simply come through)
BAD: dict[str, tuple[bytes, str | None]] = {
    "python2.py": (b"import tensorflow.distribute\nprint 'hello'\n", "line 2, column 1: syntax error: Missing parentheses"),
    "python2_raise.py": (b"import tensorflow.distribute\nraise ValueError, 'old'\n", "line 2"),
    "python2_octal.py": (b"import tensorflow.distribute\nmode = 0777\n", "line 2"),
    "syntax_error.py": (b"import tensorflow.distribute\ndef broken(:\n", "line 2"),
    "unclosed.py": (b"import tensorflow.distribute\nx = (1,\n", "syntax error"),
    "mixed_tabs.py": (STRATEGY.encode() + b"if True:\n\tx = 1\n        y = 2\n", "inconsistent use of tabs and spaces"),
    # Tabs and spaces that Python accepts (columns agree) but libcst cannot represent.
    "libcst_tabs.py": (STRATEGY.encode() + b"if True:\n for q in r:\n\t     y = 2\nz = 3\n", None),
    "form_feed.py": (STRATEGY.encode() + b"\f\nx = 1\n\fy = 2\n", None),
    "binary.py": (b"\x89PNG\r\n\x1a\n\x00\x00distribute", "binary file"),
    "not_utf8.py": (b"# distribute\nname = '\xff\xfe'\n", "line 2: not valid utf-8"),
    "bad_cookie.py": (b"# -*- coding: no-such-codec -*-\nimport tensorflow.distribute\n", "bad coding declaration"),
    "empty.py": (b"", None),
    "only_comments.py": (b"# tf.distribute notes only\n", None),
    "deep_ifs.py": (_nested_ifs(90).encode(), None),
    "deep_parens.py": ((STRATEGY + "x = " + "(" * 199 + "1" + ")" * 199 + "\n").encode(), None),
    # Beyond CPython's own limits: refused before libcst's native parser could overflow its stack.
    "too_many_parens.py": ((STRATEGY + "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n").encode(), "line 3, column 205: syntax error: too many nested parentheses"),
    "long_sum.py": ((STRATEGY + "x = " + "+".join(["1"] * 8000) + "\n").encode(), "nested too deeply: Python itself cannot compile it"),
    "long_and.py": ((STRATEGY + "x = " + " and ".join(["a"] * 30000) + "\n").encode(), "line 3: nested too deeply to be analysed (more than 1000 levels)"),
    "newest_syntax.py": (
        (
            STRATEGY
            + 'name = "x"\n'
            + 's = f"{"nested" + name!r:>{10}}"\n'
            + "type Vector = list[float]\n"
            + "def first[T](items: list[T]) -> T:\n    return items[0]\n"
            + "match s:\n    case {'k': [1, *rest]} if rest:\n        pass\n    case _:\n        pass\n"
        ).encode(),
        None,
    ),
    "latin1.py": (b"# -*- coding: latin-1 -*-\n# caf\xe9 distribute\nx = 1\n", None),
    "bom.py": (b"\xef\xbb\xbf" + STRATEGY.encode(), None),
    "crlf.py": (STRATEGY.replace("\n", "\r\n").encode(), None),
    "huge_5mb.py": ((STRATEGY + 'DATA = """' + "x" * 5_000_000 + '"""\n').encode(), None),
    "broken_json.ipynb": (b'{"cells": [ "distribute"', "notebook: not valid JSON"),
    "no_cells.ipynb": (b'{"nbformat": 4, "metadata": {"distribute": 1}}', "no list of cells"),
}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    for name, (data, _) in BAD.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "train.py").write_text(BROKEN)
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "self").symlink_to(tmp_path / "loop", target_is_directory=True)
    (tmp_path / "outside").symlink_to(Path(sys.prefix), target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_one_run_over_every_kind_of_bad_input(folder):
    result = CliRunner().invoke(main, ["fix", "--isolated", "-j", "2", ".", "does-not-exist.py"])
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    for name, (data, expected) in BAD.items():
        mine = [e for e in errors if e.startswith(f"error: {name}: ")]
        if expected is None:
            assert not mine, mine
        else:
            assert len(mine) == 1 and expected in mine[0], (name, mine)
        if expected is not None or "distribute" not in data.decode("latin-1"):
            assert (folder / name).read_bytes() == data, f"{name} was changed"
    assert "error: does-not-exist.py: no such file or directory" in result.stderr
    # The run went on: the good script is fixed, and the symlink loop ended.
    assert (folder / "train.py").read_text() == FIXED


def test_no_temporary_files_and_no_file_lost(folder):
    before = {p.name for p in folder.iterdir()}
    CliRunner().invoke(main, ["fix", "--isolated", "."])
    assert {p.name for p in folder.iterdir()} == before


def test_newest_syntax_is_analysed_and_fixed(tmp_path):
    path = tmp_path / "new.py"
    source = BAD["newest_syntax.py"][0].decode() + "model = tf.keras.Sequential()\nmodel.fit(x, y)\n"
    path.write_text(source)
    result = process_path(str(path), Options(select=("TFD001",)), write=True)
    assert result.error is None and result.written
    assert "with strategy.scope():\n    model = tf.keras.Sequential()" in path.read_text()
    assert 'f"{"nested" + name!r:>{10}}"' in path.read_text()


def test_deep_nesting_is_an_error_or_a_result_never_a_crash(tmp_path):
    for depth, error in ((150, None), (1000, "syntax error: too many nested parentheses")):
        path = tmp_path / f"deep{depth}.py"
        path.write_text(STRATEGY + "x = " + "[" * depth + "]" * depth + "\n")
        assert process_path(str(path), Options()).error == (error and f"line 3, column 205: {error}")


AUTOFIX = Path(sys.executable).with_name("autofix")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_code_deep_enough_to_crash_the_parser_is_refused_and_the_run_goes_on(tmp_path, jobs):
    """5000 nested brackets and an 8000-term sum crash libcst's native parser (SIGSEGV); with
    a process pool the lost task used to hang the run for ever. In a real process, with a
    timeout: each is an error, and the good file next to them is reported."""
    (tmp_path / "nest.py").write_text(STRATEGY + "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "sum.py").write_text(STRATEGY + "x = " + "+".join(["1"] * 8000) + "\n")
    (tmp_path / "ok.py").write_text(BROKEN)
    for args in (["nest.py"], ["sum.py"], ["."]):
        run = subprocess.run(
            [str(AUTOFIX), "check", "--isolated", "-j", jobs, *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        assert run.returncode == 2, run.stderr
        if "nest.py" in args or "." in args:
            assert "error: nest.py: line 3, column 205: syntax error: too many nested parentheses" in run.stderr
        if "sum.py" in args or "." in args:
            assert "error: sum.py: nested too deeply: Python itself cannot compile it" in run.stderr
        if "." in args:
            assert "ok.py:4:9: TFD001" in run.stdout


def test_a_directory_named_as_a_file(tmp_path):
    (tmp_path / "pkg.py").mkdir()
    assert process_path(str(tmp_path / "pkg.py"), Options()).error == "is a directory, not a file"


def test_notebook_with_a_cell_that_is_not_code_text(tmp_path):
    path = tmp_path / "odd.ipynb"
    data = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": 7, "metadata": {}, "outputs": [], "execution_count": None, "id": "a"}]}
    text = json.dumps(data, indent=1) + "\n# distribute"
    path.write_text(text)
    result = process_path(str(path), Options(), write=True)
    assert result.error and path.read_text() == text


def test_a_file_that_cannot_be_replaced_is_reported_and_kept(tmp_path, monkeypatch):
    """A folder the user may read but not write (simulated: tests may run as root, who can)."""
    path = tmp_path / "train.py"
    path.write_text(BROKEN)

    def refuse(source, target):
        raise PermissionError(13, "Permission denied", target)

    monkeypatch.setattr(os, "replace", refuse)
    result = process_path(str(path), Options(), write=True)
    assert result.error == "cannot be written: Permission denied"
    assert path.read_text() == BROKEN
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_a_named_fifo_among_good_files(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "train.py").write_text(BROKEN)
    run = subprocess.run(
        [str(AUTOFIX), "fix", "--isolated", "-j", "2", "pipe.py", "train.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 2
    assert "error: pipe.py: not a regular file" in run.stderr
    assert (tmp_path / "train.py").read_text() == FIXED


# Python reads these (a tab counts to the next multiple of 8 columns), libcst cannot: the
# inner block's indentation does not start with its parent's.
TABS = STRATEGY + "if True:\n for q in r:\n\t     y = 2\n"


def test_tabs_libcst_cannot_read_are_analysed_and_fixed_keeping_every_other_line(tmp_path):
    path = tmp_path / "tabs.py"
    path.write_text(TABS + BROKEN.split("\n", 3)[3])
    compile(path.read_text(), "tabs.py", "exec")
    result = process_path(str(path), Options(select=("TFD001",)), write=True)
    assert result.error is None and result.written
    fixed = path.read_text()
    compile(fixed, "tabs.py", "exec")
    assert fixed.startswith(TABS)
    assert "with strategy.scope():\n model = tf.keras.Sequential(" in fixed
    again = process_path(str(path), Options(select=("TFD001",)), write=True)
    assert not again.written and not again.findings


def test_tabs_in_the_block_being_fixed_get_its_indentation(tmp_path):
    path = tmp_path / "tabs.py"
    body = "".join("\t     " + line + "\n" for line in BROKEN.splitlines()[2:6])
    path.write_text("import tensorflow as tf\nif True:\n for q in r:\n" + body)
    result = process_path(str(path), Options(select=("TFD001",)), write=True)
    assert result.error is None and result.written, result
    lines = path.read_text().splitlines()
    assert lines[3:] == [
        "\t     strategy = tf.distribute.MirroredStrategy()",
        "\t     with strategy.scope():",
        # One column more: the file's first block is indented by one space, its unit.
        "\t      model = tf.keras.Sequential([tf.keras.layers.Dense(1)])",
        "\t      model.compile(optimizer='adam', loss='mse')",
        "\t     model.fit(x, y)",
    ]
    compile(path.read_text(), "tabs.py", "exec")


def test_tabs_that_cannot_be_kept_refuse_the_fix_naming_the_line(monkeypatch):
    from autofix import indentation
    from autofix.engine import analyse_as_written

    monkeypatch.setattr(indentation, "_means", lambda candidate, fixed: False)
    analysis = analyse_as_written(TABS + BROKEN.split("\n", 3)[3], Options(select=("TFD001",)))
    assert analysis.new_text is None
    assert analysis.refused.startswith("line 5 mixes tabs and spaces in its indentation")
    assert all(not f.fixable and "line 5 mixes tabs" in f.reason for f in analysis.findings)


def test_a_form_feed_on_a_line_the_fix_leaves_alone_is_kept(tmp_path):
    path = tmp_path / "ff.py"
    path.write_text("import tensorflow as tf\n\n\fstrategy = tf.distribute.MirroredStrategy()\n" + "\n".join(BROKEN.splitlines()[3:]) + "\n")
    result = process_path(str(path), Options(select=("TFD001",)), write=True)
    assert result.written
    assert path.read_text() == "import tensorflow as tf\n\n\f" + FIXED.split("\n", 2)[2]
