"""TFD001 variables-outside-scope, driven by the fixture pairs in fixtures/tfd001."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import params, read

TFD001 = Options(select=("TFD001",))


@pytest.mark.parametrize("case", params("tfd001", "fixed"))
def test_fixes_to_expected(case):
    analysis = analyse(read(case.before), TFD001)
    assert analysis.refused is None
    assert analysis.findings, "a broken fixture must be reported"
    assert all(f.code == "TFD001" for f in analysis.findings)
    assert analysis.new_text == read(case.after)


@pytest.mark.parametrize("case", params("tfd001", "fixed"))
def test_fixed_code_is_clean_and_stable(case):
    analysis = analyse(read(case.after), TFD001)
    assert analysis.findings == []
    assert analysis.new_text is None


@pytest.mark.parametrize("case", params("tfd001", "unchanged"))
def test_leaves_correct_code_alone(case):
    analysis = analyse(read(case.before), TFD001)
    assert analysis.new_text is None
    if case.name.startswith("noop_"):
        assert analysis.findings == []
    else:
        assert analysis.findings and not any(f.fixable for f in analysis.findings)


def test_finding_points_at_the_construction():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential()\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    findings = analyse(source, TFD001).findings
    assert [(f.line, f.column, f.fixable) for f in findings] == [(3, 9, True), (4, 1, True)]
    assert "model built outside strategy.scope()" in findings[0].message
    assert "compile()" in findings[1].message


@pytest.mark.parametrize(
    "imports, model_expr",
    [
        ("import tensorflow as tf", "tf.keras.Sequential()"),
        ("import keras", "keras.Sequential()"),
        ("from tensorflow import keras", "keras.Sequential()"),
        ("import tf_keras", "tf_keras.Sequential()"),
        ("from tensorflow.keras import Sequential", "Sequential()"),
        ("from tensorflow.keras.models import Sequential as Seq", "Seq()"),
        ("import tensorflow.keras as K", "K.models.Sequential()"),
    ],
)
def test_every_keras_spelling_is_recognised(imports, model_expr):
    source = (
        f"{imports}\n"
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        f"model = {model_expr}\n"
        "model.fit(x, y)\n"
    )
    analysis = analyse(source, TFD001)
    assert [f.line for f in analysis.findings] == [4]
    assert f"with strategy.scope():\n    model = {model_expr}\n" in analysis.new_text


def test_a_name_that_only_looks_like_keras_is_not_a_model():
    source = (
        "import tensorflow as tf\n"
        "from mylib import Sequential\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = Sequential()\n"
        "model.fit(x, y)\n"
    )
    assert analyse(source, TFD001).findings == []


def test_keras_objects_made_before_the_strategy_are_reported_not_moved():
    source = (
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential()\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    analysis = analyse(source, TFD001)
    # compile after the strategy is moved; the model made before it cannot be.
    assert "with strategy.scope():\n    model.compile" in analysis.new_text
