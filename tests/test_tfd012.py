"""TFD012 keras-backend-not-tensorflow: KERAS_BACKEND=jax set before Keras is imported, and a
Keras model trained in a tf.distribute scope (which then distributes nothing)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autofix.engine import Options, analyse
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params

OPTIONS = Options(select=("TFD012",))
UNSAFE = Options(select=("TFD012",), unsafe_fixes=True)


@pytest.mark.parametrize("case", params("tfd012", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd012", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd012", "fixed"))
def test_fixed_only_with_unsafe_fixes(case):
    analysis = analyse(case.before.read_text(), OPTIONS)
    assert analysis.findings and analysis.new_text is None


@pytest.mark.parametrize("case", params("tfd012", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, UNSAFE)


def test_no_fix_where_the_file_uses_jax_itself():
    source = (FIXTURES / "tfd012" / "report_jax_imported.py").read_text()
    (finding,) = analyse(source, UNSAFE).findings
    assert "the file imports jax" in finding.reason
    uses_distribution = _script('os.environ["KERAS_BACKEND"] = "jax"\n') + "keras.distribution.set_distribution(keras.distribution.DataParallel())\n"
    (finding,) = analyse(uses_distribution, UNSAFE).findings
    assert "keras.distribution" in finding.reason


def _script(head: str, keras: str = "import keras\n", body: str = "    model = keras.Sequential([keras.layers.Dense(1)])\n") -> str:
    return f"import os\n{head}{keras}import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\nwith strategy.scope():\n{body}"


def _lines(source: str) -> list[int]:
    return [f.line for f in analyse(source, OPTIONS).findings]


def test_which_settings_count():
    assert _lines(_script('os.environ["KERAS_BACKEND"] = "jax"\n')) == [6]
    assert _lines(_script('os.environ["KERAS_BACKEND"] = "torch"\n')) == [6]
    assert _lines(_script('os.environ["KERAS_BACKEND"] = "tensorflow"\n')) == []
    assert _lines(_script('os.environ["KERAS_BACKEND"] = backend_name\n')) == []
    # The last setting before Keras is imported is the one Keras reads.
    assert _lines(_script('os.environ["KERAS_BACKEND"] = "jax"\nos.environ["KERAS_BACKEND"] = name\n')) == []
    # After import tensorflow, which imports Keras (measured): too late.
    assert _lines("import os\nimport tensorflow as tf\n" + _script('os.environ["KERAS_BACKEND"] = "jax"\n')) == []
    # setdefault leaves a backend the environment names.
    assert _lines(_script('os.environ.setdefault("KERAS_BACKEND", "jax")\n')) == []


def test_keras_2_and_scopes_without_keras_are_left_alone():
    jax = 'os.environ["KERAS_BACKEND"] = "jax"\n'
    assert _lines(_script(jax, keras="import tf_keras as keras\n")) == []
    assert _lines(_script(jax, body="    v = tf.Variable(1.0)\n")) == []
    legacy = 'os.environ["TF_USE_LEGACY_KERAS"] = "1"\n' + jax
    assert _lines(_script(legacy, keras="", body="    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n")) == []


JAX = os.environ.get("AUTOFIX_JAX_PATH")


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
@pytest.mark.skipif(importlib.util.find_spec("jax") is None and not JAX, reason="jax is not installed (or named by AUTOFIX_JAX_PATH)")
def test_keras_on_jax_trains_on_one_device_in_the_scope(tmp_path: Path):
    """The reported fixture, measured: in the scope Keras makes no distributed variable."""
    source = (FIXTURES / "tfd012" / "jax_backend.py").read_text()
    assert _lines(source) == [12]
    source = source.replace(
        "model.fit(",
        "print('distributed', any(isinstance(v.value, tf.distribute.DistributedValues) for v in model.variables), "
        "keras.backend.backend(), hasattr(model, 'distribute_strategy'))\nmodel.fit(",
    )
    script = tmp_path / "train.py"
    script.write_text(source)
    env = {"PATH": os.environ.get("PATH", ""), "TF_CPP_MIN_LOG_LEVEL": "3"}
    if JAX:
        env["PYTHONPATH"] = JAX
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "distributed False jax False" in result.stdout


def _notebook(tmp_path: Path, first: str, late: bool = False) -> list:
    import nbformat

    from autofix.engine import process_path

    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_code_cell(first), nbformat.v4.new_code_cell("import keras\nimport tensorflow as tf")]
    nb.cells = [
        *(cells[::-1] if late else cells),
        nbformat.v4.new_code_cell(
            "strategy = tf.distribute.MirroredStrategy()\nwith strategy.scope():\n    model = keras.Sequential([keras.layers.Dense(1)])"
        ),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    before = path.read_bytes()
    result = process_path(str(path), UNSAFE, write=True)
    assert path.read_bytes() == before  # an IPython line is never rewritten
    return list(result.findings)


def test_a_notebooks_env_magic_counts_where_its_cell_runs(tmp_path):
    (finding,) = _notebook(tmp_path, "%env KERAS_BACKEND=jax")
    assert finding.code == "TFD012" and finding.cell_number == 3
    assert "%env" in finding.reason
    assert len(_notebook(tmp_path, "%env KERAS_BACKEND jax")) == 1
    assert _notebook(tmp_path, "%env KERAS_BACKEND=tensorflow") == []
    assert _notebook(tmp_path, "%env TF_CPP_MIN_LOG_LEVEL=2") == []
    # In a cell after Keras is imported: too late to matter.
    assert _notebook(tmp_path, "%env KERAS_BACKEND=jax", late=True) == []
