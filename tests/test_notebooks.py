"""Notebooks: code cells checked and fixed as one program, everything else kept byte for byte."""

from __future__ import annotations

import difflib
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


def test_findings_name_their_cell_in_the_order_of_the_cells(notebook):
    result = process_path(str(notebook), Options(select=("TFD001", "TFD002")))
    assert result.error is None
    # Cell 3 (index) before cell 4, whatever rule found what.
    assert [(f.code, f.cell, f.line, f.column) for f in result.findings] == [
        ("TFD002", 3, 3, 61),
        ("TFD001", 4, 2, 9),
        ("TFD001", 4, 3, 1),
    ]


def test_fix_keeps_outputs_metadata_ids_and_magics(notebook):
    before = json.loads(notebook.read_text())
    # (--unsafe-fixes: cell 3's bare .batch(32) is scaled too; see the next test.)
    result = process_path(str(notebook), Options(select=("TFD001", "TFD002"), unsafe_fixes=True), write=True)
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


def test_a_bare_batch_of_a_notebook_is_reported_and_its_cell_left_by_default(notebook):
    """Cell 3's ``.batch(32)``: nothing says whether it is each replica's batch or the global
    one, so it is reported and its cell left as it is; the model's cell is fixed."""
    before = json.loads(notebook.read_text())
    result = process_path(str(notebook), Options(select=("TFD001", "TFD002")), write=True)
    assert result.written and result.error is None
    [batch] = [f for f in result.findings if f.code == "TFD002"]
    assert batch.cell == 3 and not batch.fixable and "--unsafe-fixes" in batch.reason
    after = json.loads(notebook.read_text())
    assert [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b] == [4]


@pytest.mark.parametrize("unsafe_fixes", [False, True])
def test_fixed_notebook_is_stable_and_unchanged_notebook_is_byte_identical(notebook, unsafe_fixes):
    process_path(str(notebook), Options(unsafe_fixes=unsafe_fixes), write=True)
    fixed = notebook.read_bytes()
    again = process_path(str(notebook), Options(unsafe_fixes=unsafe_fixes), write=True)
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
        # nbformat 3 keeps its cells under "worksheets": the version is what to say.
        ('{"worksheets": [{"cells": []}], "nbformat": 3, "metadata": {"distribute": 1}}', "notebook: nbformat 3 notebooks are not supported (only version 4)"),
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



# --- IPython syntax, masks and walls ---------------------------------------------------------

STRATEGY_CELL = "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()"
MODEL = "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])"
COMPILE = "model.compile(optimizer='adam', loss='mse')"
FIT = "model.fit(x, y)"


def make_notebook(tmp_path, *cells: str, name: str = "nb.ipynb", **dump) -> Path:
    """A notebook whose code cells are ``cells``, sources stored as nbformat does (lines)."""
    data = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": c.splitlines(True)}
            for i, c in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / name
    path.write_text(json.dumps(data, **({"indent": 1} | dump)) + "\n")
    return path


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]


def fix(path: Path, select=("TFD001",)):
    result = process_path(str(path), Options(select=select), write=True)
    assert result.error is None, result.error
    return result


def test_a_comment_that_looks_like_a_mask_is_user_text(tmp_path):
    """The old placeholder was a comment a user could write: it was replaced by a magic from
    another cell (or indexed past the end when there was none)."""
    for first in ("!pip install foo\nimport tensorflow as tf", "import tensorflow as tf"):
        cells = (first, "strategy = tf.distribute.MirroredStrategy()\n# autofix-ipython:0\nx = 1", f"{MODEL}\n{COMPILE}\n{FIT}")
        path = make_notebook(tmp_path, *cells)
        fix(path)
        assert code_cells(path) == [*cells[:2], f"with strategy.scope():\n    {MODEL}\n    {COMPILE}\n{FIT}"]


def test_a_wall_written_by_the_user_is_code_and_walls_stay_walls(tmp_path):
    cells = (STRATEGY_CELL, "__autofix_cell__(0)\n__autofix_cell__(2)", f"{MODEL}\n{COMPILE}\n{FIT}")
    path = make_notebook(tmp_path, *cells)
    fix(path)
    assert code_cells(path) == [*cells[:2], f"with strategy.scope():\n    {MODEL}\n    {COMPILE}\n{FIT}"]
    notebook = notebooks.load(path.read_text())
    token = notebook.masker.token
    assert token not in path.read_text()
    assert notebook.program.count(f'__autofix_cell__(1, b"{token}")') == 1


@pytest.mark.parametrize(
    "cell",
    [
        # A comment ending in "?" inside a call continued over lines.
        f"{MODEL}\nmodel.compile(optimizer='adam',  # or sgd?\n              loss='mse')\n{FIT}",
        # A continuation line starting with the % operator.
        f"n = (10\n     % 3)\n{MODEL}\n{COMPILE}\n{FIT}",
        # Lines of a string that look like help, shell and magic syntax.
        f'doc = """Which optimizer?\n!important\n%done\n"""\n{MODEL}\n{COMPILE}\n{FIT}',
        # A trailing comment ending in "?" (the model line used to vanish from the analysis).
        f"{MODEL}  # bigger?\n{COMPILE}\nmodel.fit(x, y)",
    ],
    ids=["question-continuation", "modulo-continuation", "string-lines", "question-comment"],
)
def test_valid_python_is_never_taken_for_ipython_syntax(tmp_path, cell):
    path = make_notebook(tmp_path, STRATEGY_CELL, cell)
    result = process_path(str(path), Options(select=("TFD001",)))
    assert result.error is None
    assert sorted((f.cell, f.line) for f in result.findings if f.fixable) == sorted(
        (1, number) for number, line in enumerate(cell.split("\n"), 1) if line.startswith(("model =", "model.compile"))
    )
    fix(path)
    fixed = code_cells(path)[1]
    assert "with strategy.scope():\n    model = tf.keras" in fixed
    assert "\n    model.compile(" in fixed


def test_time_magic_runs_a_statement_that_is_analysed_and_kept(tmp_path):
    path = make_notebook(tmp_path, STRATEGY_CELL, f"%time {MODEL}\n!echo built\n{COMPILE}\nmodel?\n{FIT}")
    result = process_path(str(path), Options(select=("TFD001",)))
    assert [(f.cell, f.line, f.column) for f in result.findings] == [(1, 1, 15), (1, 3, 1)]
    fix(path)
    assert code_cells(path)[1] == (
        f"with strategy.scope():\n    %time {MODEL}\n!echo built\nwith strategy.scope():\n    {COMPILE}\nmodel?\n{FIT}"
    )


def test_time_cell_magic_body_is_analysed(tmp_path):
    path = make_notebook(tmp_path, STRATEGY_CELL, f"%%time\n{MODEL}\n{COMPILE}\n{FIT}", "%%bash\necho tf.distribute")
    fix(path)
    assert code_cells(path)[1:] == [f"%%time\nwith strategy.scope():\n    {MODEL}\n    {COMPILE}\n{FIT}", "%%bash\necho tf.distribute"]


def test_indented_magics_and_shell_lines(tmp_path):
    setup = "try:\n    %tensorflow_version 2.x\nexcept Exception:\n    pass\nif True:\n    !pip install foo \\\n        bar\nfiles = !ls"
    path = make_notebook(tmp_path, setup, STRATEGY_CELL, f"{MODEL}\n{COMPILE}\n{FIT}")
    result = fix(path)
    assert result.written
    assert code_cells(path) == [setup, STRATEGY_CELL, f"with strategy.scope():\n    {MODEL}\n    {COMPILE}\n{FIT}"]


def test_a_fix_that_would_lose_or_change_a_masked_line_is_refused(tmp_path):
    path = make_notebook(tmp_path, STRATEGY_CELL, f"{MODEL}\n!echo hi\n{COMPILE}\n{FIT}")
    notebook = notebooks.load(path.read_text())
    masked = next(line for line in notebook.program.split("\n") if notebook.masker.token in line and "echo" not in line and "cell" not in line)
    for tampered in (
        notebook.program.replace(masked + "\n", ""),
        notebook.program.replace(masked, masked + "\n" + masked),
        notebook.program.replace(masked, masked.replace("b", "x = b", 1)),
    ):
        with pytest.raises(notebooks.NotebookError):
            notebooks.rebuild(notebook, tampered)
    assert notebooks.rebuild(notebook, notebook.program) == path.read_text()


def test_colab_escaped_notebook_is_fixed_in_its_own_style(tmp_path):
    """Colab writes <, > and & as \u003c, \u003e, \u0026: such notebooks used to be refused."""
    path = make_notebook(tmp_path, STRATEGY_CELL, f"{MODEL}  # 1 < 2 & 3 > 2, café\n{COMPILE}\n{FIT}", ensure_ascii=False)
    text = path.read_text()
    for ch, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(ch, escape)
    path.write_text(text)
    before = json.loads(text)
    fix(path)
    after_text = path.read_text()
    assert "<" not in after_text and "\\u003c" in after_text and "café" in after_text
    after = json.loads(after_text)
    assert "".join(after["cells"][1]["source"]) == f"with strategy.scope():\n    {MODEL}  # 1 < 2 & 3 > 2, café\n    {COMPILE}\n{FIT}"
    assert [c["id"] for c in after["cells"]] == [c["id"] for c in before["cells"]]
    # Only the changed cell's lines differ, line for line.
    changed = [line for line in difflib.ndiff(text.splitlines(), after_text.splitlines()) if line[:1] in "+-"]
    assert all('strategy.scope' in line or "model" in line for line in changed), changed
    nbformat.validate(nbformat.reads(after_text, as_version=4))


@pytest.mark.parametrize("dump", [{"indent": None}, {"indent": 2, "ensure_ascii": True}, {"indent": 4, "sort_keys": True}])
def test_other_json_layouts_keep_every_other_byte(tmp_path, dump):
    path = make_notebook(tmp_path, STRATEGY_CELL, f"{MODEL}  # é\n{COMPILE}\n{FIT}", **dump)
    text = path.read_text()
    fix(path)
    after = path.read_text()
    source = notebooks.nbjson.locate_sources(text)[1]
    new_source = notebooks.nbjson.locate_sources(after)[1]
    assert after[: source.start] == text[: source.start]
    assert after[new_source.end :] == text[source.end :]
    assert "".join(json.loads(after)["cells"][1]["source"]).startswith("with strategy.scope():\n    model")


# Every form of IPython syntax, each between two lines of code: what IPython's own
# TransformerManager rewrites is what gets masked, nothing more, and it comes back as it was.
MAGIC_FORMS = [
    "%matplotlib inline",
    "%time x = build()",
    "%timeit -n 3 f()",
    "%pip install tensorflow",
    "%env CUDA_VISIBLE_DEVICES=0",
    "!nvidia-smi -L",
    "!pip install a \\\n    b",
    "files = !ls",
    "result = %time f()",
    "obj?",
    "obj??",
    "?obj",
    "tf.distribute?",
    "%load_ext autoreload",
    "if True:\n    %time x = 1",
    "for i in range(2):\n    !echo {i}",
    "def f():\n    out = !ls\n    return out",
    "try:\n    %tensorflow_version 2.x\nexcept Exception:\n    pass",
]


@pytest.mark.parametrize("form", MAGIC_FORMS)
def test_masks_follow_ipython_on_every_magic_form(form):
    from IPython.core.inputtransformer2 import TransformerManager

    from autofix import ipysyntax

    cell = f"a = 1\n{form}\nb = a  # why?"
    masker = ipysyntax.Masker(ipysyntax.new_token(cell))
    lines, _ = masker.cell(cell)
    assert len(lines) == len(cell.split("\n"))
    compile("\n".join(lines), "<masked>", "exec")
    rewritten = TransformerManager().transform_cell(cell).split("\n")
    by_ipython = {i for i, line in enumerate(cell.split("\n")) if i >= len(rewritten) or line != rewritten[i]}
    masked = {i for i, (ours, theirs) in enumerate(zip(lines, cell.split("\n"))) if ours != theirs}
    if "\\\n" in form:  # IPython joins the continued lines into one
        assert masked == {1, 2}
    else:
        assert masked == by_ipython
    assert masker.restore(lines, set(range(len(masker.magics)))) == cell.split("\n")


def test_a_fix_never_moves_the_strategy_into_an_earlier_cell(tmp_path):
    """The model is made in cell 1 and the strategy in cell 2: moving the strategy up would take
    it into another cell, so the unit is reported, and its reasons name cells, not the lines of
    the joined program."""
    cells = [
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n",
        "strategy = tf.distribute.MirroredStrategy()\n",
        "model.compile(optimizer='adam', loss='mse')\nmodel.fit(tf.zeros([8, 2]), tf.zeros([8, 1]))\n",
    ]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "walls.ipynb"
    path.write_text(nbformat.writes(book))
    before = path.read_bytes()
    result = process_path(str(path), Options(select=("TFD001",)))
    assert result.new_text is None
    assert [(f.cell, f.line, f.fixable) for f in result.findings] == [(0, 2, False), (2, 1, False)]
    assert "another notebook cell (above cell 2, line 1)" in result.findings[0].reason
    assert "(cell 1, line 2)" in result.findings[1].reason
    assert path.read_bytes() == before
