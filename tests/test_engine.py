"""The engine's guarantees: every file gives one result, bad files give clear errors, writes
keep encoding, BOM, newlines and mode, and a fix is only kept when it is safe."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from autofix import engine
from autofix.engine import Options, analyse, process_path
from autofix.runner import Runner
from autofix.results import FileResult
from autofix.rule import Outcome
from conftest import BROKEN, FIXED


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_result_is_frozen_and_picklable(tmp_path):
    result = process_path(write(tmp_path, "a.py", BROKEN.encode()), Options())
    assert isinstance(result, FileResult)
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises(AttributeError):
        result.path = "other"  # type: ignore[misc]
    assert result.changed and result.new_text == FIXED
    assert {f.code for f in result.findings if f.fixable} == {"TFD001"}


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.py", b"import tensorflow as tf\ndistribute = (\n")
    result = process_path(path, Options())
    assert result.error.startswith("line 2")
    assert "syntax error" in result.error
    assert not result.findings and not result.changed


def test_python2_file_is_a_syntax_error(tmp_path):
    path = write(tmp_path, "py2.py", b"import tensorflow.distribute\nprint 'hello'\n")
    result = process_path(path, Options())
    assert "line 2" in result.error and "syntax error" in result.error


def test_binary_file(tmp_path):
    path = write(tmp_path, "blob.py", b"\x00\x01distribute\x02" * 10)
    result = process_path(path, Options())
    assert result.error == "binary file (it contains NUL bytes), not Python source"


def test_non_utf8_file_names_the_line(tmp_path):
    path = write(tmp_path, "latin.py", b"# distribute\nname = 'caf\xe9'\n")
    result = process_path(path, Options())
    assert "line 2: not valid utf-8" in result.error
    later = write(tmp_path, "later.py", b"# distribute\n\n\n\nname = 'caf\xe9'\n")
    assert "line 5: not valid utf-8" in process_path(later, Options()).error
    cookie = write(tmp_path, "cookie.py", b"# -*- coding: klingon -*-\nx = 1\n")
    assert "bad coding declaration" in process_path(cookie, Options()).error


def test_latin1_with_coding_cookie_round_trips(tmp_path):
    text = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + BROKEN
    path = write(tmp_path, "latin.py", text.encode("latin-1"))
    result = process_path(path, Options(), write=True)
    assert result.error is None and result.written
    data = open(path, "rb").read()
    assert data == ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXED).encode("latin-1")


def test_bom_is_kept(tmp_path):
    path = write(tmp_path, "bom.py", b"\xef\xbb\xbf" + BROKEN.encode())
    process_path(path, Options(), write=True)
    assert open(path, "rb").read() == b"\xef\xbb\xbf" + FIXED.encode()


def test_crlf_stays_crlf(tmp_path):
    path = write(tmp_path, "crlf.py", BROKEN.replace("\n", "\r\n").encode())
    result = process_path(path, Options(), write=True)
    assert result.written
    assert open(path, "rb").read() == FIXED.replace("\n", "\r\n").encode()


def test_mode_is_kept(tmp_path):
    path = write(tmp_path, "exec.py", BROKEN.encode())
    os.chmod(path, 0o751)
    process_path(path, Options(), write=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o751
    assert open(path).read() == FIXED


def test_no_temporary_file_is_left(tmp_path):
    path = write(tmp_path, "a.py", BROKEN.encode())
    process_path(path, Options(), write=True)
    assert sorted(os.listdir(tmp_path)) == ["a.py"]


def test_symlinked_file_is_written_through_the_link(tmp_path):
    real = write(tmp_path, "real.py", BROKEN.encode())
    link = tmp_path / "link.py"
    link.symlink_to(real)
    process_path(str(link), Options(), write=True)
    assert link.is_symlink()
    assert open(real).read() == FIXED


def test_read_only_file_is_not_replaced(tmp_path):
    path = write(tmp_path, "ro.py", BROKEN.encode())
    os.chmod(path, 0o444)
    result = process_path(path, Options(), write=True)
    assert "read-only" in result.error
    assert open(path).read() == BROKEN


def test_file_changed_on_disk_is_not_overwritten(tmp_path, monkeypatch):
    path = write(tmp_path, "a.py", BROKEN.encode())
    original = engine.process_text

    def edit_meanwhile(text, name, options, *rest):
        result = original(text, name, options, *rest)
        with open(path, "a") as fh:
            fh.write("# edited by someone else\n")
        return result

    monkeypatch.setattr(engine, "process_text", edit_meanwhile)
    result = process_path(path, Options(), write=True)
    assert "changed on disk since it was read" in result.error
    assert not result.written
    assert open(path).read() == BROKEN + "# edited by someone else\n"
    assert sorted(os.listdir(tmp_path)) == ["a.py"]


def test_missing_and_directory_paths(tmp_path):
    assert "no such file" in process_path(str(tmp_path / "nope.py"), Options()).error
    assert "is a directory" in process_path(str(tmp_path), Options()).error


def test_unreadable_file(tmp_path, monkeypatch):
    path = write(tmp_path, "secret.py", BROKEN.encode())
    real_open = os.open

    def denied(file, *args, **kwargs):
        if str(file) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(file, *args, **kwargs)

    # Tests may run as root, who can read a file with mode 000: deny it the way the OS would.
    monkeypatch.setattr(os, "open", denied)
    assert process_path(path, Options()).error == "permission denied while reading"


def test_empty_file(tmp_path):
    result = process_path(write(tmp_path, "empty.py", b""), Options())
    assert result.error is None and not result.findings and not result.changed


def test_files_without_distribute_are_not_parsed(monkeypatch):
    def fail(text):
        raise AssertionError("parsed")

    monkeypatch.setattr(engine, "parse_both", fail)
    assert analyse("import tensorflow as tf\nmodel = tf.keras.Sequential()\n", Options()).findings == []


class _NotIdempotent:
    """A rule whose fix adds a line every time: the engine must refuse it."""

    CODE, NAME, SAFE = "TFD999", "grows", True

    def run(self, program, unsafe_fixes=False):
        import libcst as cst

        module = program.module
        line = cst.parse_statement("x = 1  # distribute\n")
        return Outcome([], module.with_changes(body=[*module.body, line]))


class _Unparsable:
    CODE, NAME, SAFE = "TFD998", "breaks", True

    def run(self, program, unsafe_fixes=False):
        import libcst as cst

        module = program.module
        bad = cst.SimpleStatementLine([cst.Expr(cst.Name("def"))])
        return Outcome([], module.with_changes(body=[*module.body, bad]))


@pytest.mark.parametrize("rule, why", [(_NotIdempotent, "second pass"), (_Unparsable, "does not parse")])
def test_unsafe_fixes_are_refused(monkeypatch, rule, why):
    monkeypatch.setattr(Options, "rules", lambda self: (rule,))
    analysis = analyse("import tensorflow.distribute\n", Options())
    assert analysis.new_text is None
    assert why in analysis.refused


def test_a_crashing_rule_becomes_an_error_result(tmp_path, monkeypatch):
    class Crashes:
        CODE, NAME, SAFE = "TFD997", "crashes", True

        def run(self, program, unsafe_fixes=False):
            raise KeyError("boom")

    monkeypatch.setattr(Options, "rules", lambda self: (Crashes,))
    path = write(tmp_path, "a.py", BROKEN.encode())
    result = process_path(path, Options(), write=True)
    assert "internal error (KeyError" in result.error
    assert open(path).read() == BROKEN


def test_runner_keeps_order_across_processes(tmp_path):
    paths = []
    for i in range(12):
        body = BROKEN if i % 2 else "x = 1\n"
        paths.append(write(tmp_path, f"f{i:02}.py", body.encode()))
    with Runner(Options(), jobs=2) as runner:
        results = list(runner.process(paths))
    assert [r.path for r in results] == paths
    assert [r.changed for r in results] == [bool(i % 2) for i in range(12)]
