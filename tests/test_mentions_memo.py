"""The project's files that spell a name (project/layout.mentions), memoised per content: an
unchanged file is not read again for the next name, an edited one is, and a file written
within the clock's granularity of its read is read again every time."""

from __future__ import annotations

import os
import time

from autofix.analysis.project import layout


def _counting(monkeypatch) -> list[str]:
    reads: list[str] = []
    original = layout._bytes

    def counted(path: str):
        reads.append(os.path.basename(path))
        return original(path)

    monkeypatch.setattr(layout, "_bytes", counted)
    return reads


def _old(path, seconds: float = 60.0) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_unchanged_files_are_read_once_for_every_name(tmp_path, monkeypatch):
    (tmp_path / "fit.py").write_text("def fit_dist(obj):\n    pass\n")
    (tmp_path / "models.py").write_text("from fit import fit_dist\n\nfit_dist(None)\n")
    for name in ("fit.py", "models.py"):
        _old(tmp_path / name)
    reads = _counting(monkeypatch)
    root = str(tmp_path)
    first = layout.mentions(root, "fit_dist")
    assert [os.path.basename(p) for p, _ in first] == ["fit.py", "models.py"]
    assert layout.mentions(root, "obj") == [first[0]]
    assert layout.mentions(root, "fit") == [first[1]]  # "fit" is a word of models.py only
    assert sorted(reads) == ["fit.py", "models.py"]
    # Edited (an old time again, another size): read again, and its digest is the new one.
    (tmp_path / "models.py").write_text("import fit\n")
    _old(tmp_path / "models.py", 30.0)
    again = layout.mentions(root, "fit_dist")
    assert [os.path.basename(p) for p, _ in again] == ["fit.py"]
    assert sorted(reads) == ["fit.py", "models.py", "models.py"]


def test_a_file_just_written_is_read_every_time(tmp_path, monkeypatch):
    (tmp_path / "fit.py").write_text("def fit_dist(obj):\n    pass\n")
    reads = _counting(monkeypatch)
    layout.mentions(str(tmp_path), "fit_dist")
    layout.mentions(str(tmp_path), "fit_dist")
    assert reads == ["fit.py", "fit.py"]


def test_a_name_that_is_not_an_ascii_word_is_searched_in_the_text(tmp_path):
    (tmp_path / "m.py").write_text("def größe():\n    pass\n", encoding="utf-8")
    _old(tmp_path / "m.py")
    assert [os.path.basename(p) for p, _ in layout.mentions(str(tmp_path), "größe")] == ["m.py"]
    assert layout.mentions(str(tmp_path), "grö") == []
