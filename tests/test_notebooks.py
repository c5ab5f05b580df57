"""Notebooks: code cells checked and fixed as one program, everything else kept byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from autofix import notebooks
from autofix.engine import Options, process_path
from fixturecases import FIXTURES

NOTEBOOK = FIXTURES / "notebooks" / "train.ipynb"


@pytest.fixture
def notebook(tmp_path) -> Path:
    path = tmp_path / "train.ipynb"
    shutil.copyfile(NOTEBOOK, path)
    return path


def test_findings_name_their_cell(notebook):
    result = process_path(str(notebook), Options(select=("TFD001", "TFD002")))
    assert result.error is None
    assert [(f.code, f.cell, f.line, f.column) for f in result.findings] == [
        ("TFD001", 4, 2, 9),
        ("TFD001", 4, 3, 1),
        ("TFD002", 3, 3, 61),
    ]


def test_fix_keeps_outputs_metadata_ids_and_magics(notebook):
    before = json.loads(notebook.read_text())
    result = process_path(str(notebook), Options(select=("TFD001", "TFD002")), write=True)
    assert result.written and result.error is None
    after = json.loads(notebook.read_text())
    nbformat.validate(nbformat.reads(notebook.read_text(), as_version=4))
    assert [c.get("id") for c in after["cells"]] == [c.get("id") for c in before["cells"]]
    assert [c.get("outputs") for c in after["cells"]] == [c.get("outputs") for c in before["cells"]]
    assert after["metadata"] == before["metadata"]
    changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b]
    assert changed == [3, 4]
    assert "".join(after["cells"][4]["source"]) == (
        "# The model\n"
        "with strategy.scope():\n"
        "    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation='relu'), keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.summary()"
    )
    # IPython syntax is back exactly as it was.
    assert after["cells"][1]["source"][:2] == ["%matplotlib inline\n", "!nvidia-smi -L\n"]
    assert after["cells"][6]["source"] == before["cells"][6]["source"]
    # The file keeps nbformat's own layout (indent 1, sorted keys, final newline).
    text = notebook.read_text()
    assert text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n"


def test_fixed_notebook_is_stable_and_unchanged_notebook_is_byte_identical(notebook):
    process_path(str(notebook), Options(), write=True)
    fixed = notebook.read_bytes()
    again = process_path(str(notebook), Options(), write=True)
    assert not again.written and notebook.read_bytes() == fixed


def test_strategy_in_a_later_cell_counts(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import tensorflow as tf"),
        nbformat.v4.new_code_cell("strategy = tf.distribute.MirroredStrategy()"),
        nbformat.v4.new_markdown_cell("Now the model"),
        nbformat.v4.new_code_cell("model = tf.keras.Sequential([tf.keras.layers.Dense(1)])"),
        nbformat.v4.new_code_cell("model.compile(optimizer='sgd', loss='mse')\nmodel.fit(x, y)"),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    process_path(str(path), Options(select=("TFD001",)), write=True)
    cells = nbformat.read(str(path), as_version=4).cells
    # Each cell keeps its own statements: a scope block never spans two cells.
    assert cells[3].source == "with strategy.scope():\n    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])"
    assert cells[4].source == "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\nmodel.fit(x, y)"


@pytest.mark.parametrize(
    "content, error",
    [
        ('{"cells": [ "distribute"', "notebook: not valid JSON"),
        ('{"nbformat": 4, "metadata": {"x": "distribute"}}', "notebook: not a notebook: no list of cells"),
        ('{"cells": [{"cell_type": "code", "source": 3}], "nbformat": 4, "distribute": 1}', "a cell's source"),
    ],
)
def test_broken_notebooks_are_clear_errors_and_untouched(tmp_path, content, error):
    path = tmp_path / "broken.ipynb"
    path.write_text(content)
    result = process_path(str(path), Options(), write=True)
    assert result.error and error in result.error
    assert path.read_text() == content


def test_other_languages_are_skipped(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    nb.cells = [nbformat.v4.new_code_cell("library(tensorflow)\n# tf$distribute$MirroredStrategy()")]
    path = tmp_path / "r.ipynb"
    nbformat.write(nb, str(path))
    result = process_path(str(path), Options())
    assert result.skipped == "not a Python notebook" and not result.findings


def test_notebook_with_a_syntax_error_names_the_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()"),
        nbformat.v4.new_code_cell("x = (1,"),
    ]
    path = tmp_path / "bad.ipynb"
    nbformat.write(nb, str(path))
    result = process_path(str(path), Options())
    assert result.error.startswith("cell 2, line 1: syntax error")


@pytest.mark.parametrize("as_list", [True, False], ids=["source-lines", "source-string"])
@pytest.mark.parametrize("indent, ensure_ascii", [(1, True), (None, False), (2, False)])
def test_cell_places_map_to_the_notebook_text(as_list, indent, ensure_ascii):
    """Code hosts show findings on the notebook's own lines: a place in a cell maps to the
    same code in the JSON text, through escaping (quotes, non-ASCII) and whatever the layout."""
    cells = [
        ["import tensorflow as tf\n", "\n", "model = tf.keras.Sequential()"],
        ["x = 'é\"'; model = build()\n", "model.fit(x)"],
    ]
    data = {
        "cells": [
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["model = tf.keras.Sequential()"]},
            *(
                {
                    "cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                    # An output that repeats a source line must not be mistaken for it.
                    "outputs": [{"name": "stdout", "output_type": "stream", "text": [src[-1]]}],
                    "source": src if as_list else "".join(src),
                }
                for i, src in enumerate(cells)
            ),
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    text = json.dumps(data, indent=indent, ensure_ascii=ensure_ascii) + "\n"
    position = notebooks.file_positions(text)
    lines = text.split("\n")
    for cell, line, column, expected in [(1, 3, 9, "tf.keras.Sequential()"), (2, 1, 11, "model = build()"), (2, 2, 1, "model.fit(x)")]:
        file_line, file_column = position(cell, line, column)
        assert lines[file_line - 1][file_column - 1 :].startswith(expected)
    assert notebooks.file_positions("{not json") is None
