"""Property tests: on random programs the engine never raises, every fix parses, fixing twice
changes nothing, code without a strategy is left byte-identical and comments survive.

Two sources of programs: hypothesmith's random valid Python (with a strategy prepended, so
that the rules really run over it), and programs assembled from the statements of the
fixtures (strategies, models, batches, custom loops, aliases), shuffled and nested.
"""

from __future__ import annotations

import json
import re
import tokenize
from functools import lru_cache
from io import StringIO

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autofix import notebooks
from autofix.engine import AnalysisError, Options, analyse, analyse_as_written, process_notebook
from fixturecases import FIXTURES, read

ALL_RULES = Options(unsafe_fixes=True)
HEADER = "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"


@lru_cache(maxsize=None)
def fragments() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(imports, other top-level statements) of every broken fixture."""
    imports: dict[str, None] = {}
    statements: dict[str, None] = {}
    for path in sorted(FIXTURES.glob("tfd00*/*.py")):
        if path.name.endswith(".fixed.py"):
            continue
        module = cst.parse_module(read(path))
        for statement in module.body:
            code = module.code_for_node(statement.with_changes(leading_lines=()))
            if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import, cst.ImportFrom)):
                imports[code] = None
            elif "__name__" not in code:
                statements[code] = None
    return tuple(imports), tuple(statements)


def comments(text: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(StringIO(text).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return []


def check_guarantees(text: str) -> None:
    try:
        analysis = analyse(text, ALL_RULES)
    except AnalysisError:
        # Only for code libcst cannot parse; the engine turns it into a per-file error.
        return
    if analysis.new_text is None:
        return
    cst.parse_module(analysis.new_text)
    again = analyse(analysis.new_text, ALL_RULES)
    assert again.new_text is None, "fixing the fixed code changed it again"
    for comment in comments(text):
        assert comment in analysis.new_text


@st.composite
def assembled(draw) -> str:
    imports, statements = fragments()
    chosen_imports = draw(st.lists(st.sampled_from(imports), min_size=1, max_size=6, unique=True))
    body = draw(st.lists(st.sampled_from(statements), min_size=1, max_size=12))
    if draw(st.booleans()):
        body.insert(draw(st.integers(0, len(body))), "strategy = tf.distribute.MirroredStrategy()\n")
    if draw(st.booleans()):
        body = [f"# step {i}\n{s}" for i, s in enumerate(body)]
    text = "".join(chosen_imports) + "import tensorflow as tf\n" + "".join(body)
    if draw(st.booleans()):
        # The same code as the body of main(), called at the end.
        lines = "".join(body).splitlines(keepends=True)
        nested = "".join("    " + line if line.strip() else line for line in lines)
        text = "".join(chosen_imports) + "import tensorflow as tf\n\n\ndef main():\n" + nested + "\n\nmain()\n"
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assembled())
def test_programs_assembled_from_fixtures(text):
    check_guarantees(text)


# Random programs are valid but odd (``...()``): Python warns about them while compiling.
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar(auto_target=False))
def test_random_valid_python_with_a_strategy(source):
    assume("\r" not in source and "\f" not in source and "\x0c" not in source)
    try:
        compile(source, "<random>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        assume(False)
    check_guarantees(HEADER + source)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assembled())
def test_code_without_a_strategy_is_left_byte_identical(text):
    # Remove every way of making a strategy but keep the word, so the rules do run.
    without = re.sub(r"^.*(Strategy|get_strategy|strategy\s*=).*$", "pass", text, flags=re.M)
    without = "# tf.distribute is mentioned, so the file is analysed\n" + without
    try:
        analysis = analyse(without, ALL_RULES)
    except AnalysisError:
        return
    if "distribute." in without.replace("# tf.distribute", ""):
        return  # some other strategy spelling survived the removal
    assert analysis.new_text is None


# --- notebooks: magics among the code; indentation libcst cannot read -------------------------

MAGIC_LINES = (
    "%matplotlib inline",
    "!nvidia-smi -L",
    "files = !ls",
    "%time x = 1",
    "tf.distribute?",
    "%env TF_CPP_MIN_LOG_LEVEL=2",
    "!pip install a \\\n    b",
)


@st.composite
def notebook_text(draw) -> str:
    text = draw(assembled())
    lines = text.split("\n")
    # Magics only between top-level statements (where a line starts at column 0 after one that
    # ends a statement), then the lines dealt into cells.
    for _ in range(draw(st.integers(0, 4))):
        places = [i for i, line in enumerate(lines) if line[:1].isalpha() and (i == 0 or not lines[i - 1].rstrip().endswith((",", "(", "[", "\\", ":")))]
        if places:
            lines.insert(draw(st.sampled_from(places)), draw(st.sampled_from(MAGIC_LINES)))
    cuts = sorted(draw(st.sets(st.sampled_from([i for i, line in enumerate(lines) if line[:1].isalpha()] or [0]), max_size=4)))
    cells, start = [], 0
    for cut in [*cuts, len(lines)]:
        if cut > start:
            cells.append("\n".join(lines[start:cut]))
            start = cut
    data = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": str(i), "metadata": {}, "outputs": [], "source": c.splitlines(True)} for i, c in enumerate(cells)],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=1, ensure_ascii=draw(st.booleans())) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notebook_text())
def test_notebooks_with_magics_keep_every_magic_and_fix_once(text):
    result = process_notebook(text, "nb.ipynb", ALL_RULES)
    if result.error:
        assert "syntax error" in result.error or "cannot be parsed" in result.error, result.error
        return
    if result.new_text is None:
        return
    before = [line for _, source in notebooks.cell_sources(text) for line in source.split("\n")]
    after = [line.strip() for _, source in notebooks.cell_sources(result.new_text) for line in source.split("\n")]
    for line in before:
        if line.lstrip().startswith(("%", "!")) or "= !" in line or line.endswith("?"):
            assert line.strip() in after, f"{line!r} was lost"
    again = process_notebook(result.new_text, "nb.ipynb", ALL_RULES)
    assert again.error is None and again.new_text is None, "fixing the fixed notebook changed it again"


@st.composite
def tab_indented(draw) -> str:
    """A fixture program nested in blocks indented with tabs and spaces as Python accepts them
    (deeper in columns, a tab counting to the next multiple of 8, and in characters), but not
    always written as the parent block's indentation plus more, which libcst cannot read."""
    text = draw(assembled())
    prefix, header, column, characters = "", "", 0, 0
    for depth in range(draw(st.integers(1, 3))):
        tabs, spaces = draw(
            st.tuples(st.integers(0, 2), st.integers(0, 9)).filter(
                lambda ts: 8 * ts[0] + ts[1] > column and ts[0] + ts[1] > characters
            )
        )
        header += f"{prefix}if x{depth}:\n"
        prefix, column, characters = "\t" * tabs + " " * spaces, 8 * tabs + spaces, tabs + spaces
        header += f"{prefix}pass\n"
    body = "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))
    return header + body


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tab_indented())
def test_indentation_python_accepts_is_analysed_and_kept(text):
    try:
        compile(text, "<tabs>", "exec")
    except SyntaxError:
        assume(False)
    analysis = analyse_as_written(text, ALL_RULES)  # never "syntax error" for code Python runs
    if analysis.new_text is None:
        return
    compile(analysis.new_text, "<fixed>", "exec")
    unchanged = set(text.split("\n")) & set(analysis.new_text.split("\n"))
    assert all(line in text.split("\n") for line in unchanged)
    again = analyse_as_written(analysis.new_text, ALL_RULES)
    assert again.new_text is None, "fixing the fixed code changed it again"
