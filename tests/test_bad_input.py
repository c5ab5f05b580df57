"""Bad input: each file gets a clear error (or is handled), the run goes on, nothing is lost.

All categories go through one real ``autofix fix`` run over a folder that also holds a script
that must be fixed: the bad files must come out byte for byte as they went in.
"""

from __future__ import annotations

import json
import os
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
    "binary.py": (b"\x89PNG\r\n\x1a\n\x00\x00distribute", "binary file"),
    "not_utf8.py": (b"# distribute\nname = '\xff\xfe'\n", "line 2: not valid utf-8"),
    "bad_cookie.py": (b"# -*- coding: no-such-codec -*-\nimport tensorflow.distribute\n", "bad coding declaration"),
    "empty.py": (b"", None),
    "only_comments.py": (b"# tf.distribute notes only\n", None),
    "deep_ifs.py": (_nested_ifs(90).encode(), None),
    "deep_parens.py": ((STRATEGY + "x = " + "(" * 400 + "1" + ")" * 400 + "\n").encode(), None),
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
    for depth in (200, 1000):
        path = tmp_path / f"deep{depth}.py"
        path.write_text(STRATEGY + "x = " + "[" * depth + "]" * depth + "\n")
        result = process_path(str(path), Options())
        assert result.error is None or "nested too deeply" in result.error or "cannot be parsed" in result.error


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
