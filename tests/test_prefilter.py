"""The text prefilter (files without the word "distribute" are not parsed) never hides a
finding: checked on every fixture and on generated spellings of the same scripts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autofix import engine
from autofix.engine import Options, analyse, process_path
from fixturecases import FIXTURES, read

ALL_FIXTURES = sorted(p for p in FIXTURES.rglob("*.py"))
OPTIONS = Options(unsafe_fixes=True, build_fixes=False)


def findings_without_prefilter(text: str, monkeypatch) -> list:
    with monkeypatch.context() as patch:
        patch.setattr(engine, "might_need_analysis", lambda text, migrating=False, project=False: True)
        return analyse(text, OPTIONS).findings


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_prefilter_never_hides_a_finding_in_a_fixture(path, monkeypatch):
    text = read(path)
    full = findings_without_prefilter(text, monkeypatch)
    assert analyse(text, OPTIONS).findings == full
    if full:
        assert engine.might_need_analysis(text)


def test_prefilter_on_the_notebook(monkeypatch, tmp_path):
    notebook = FIXTURES / "notebooks" / "train.ipynb"
    result = process_path(str(notebook), OPTIONS)
    assert result.findings
    assert engine.might_need_analysis(notebook.read_text())


# Ways of naming tf.distribute and Keras that a script may use.
STRATEGY_SPELLINGS = [
    ("import tensorflow as tf", "tf.distribute.MirroredStrategy()"),
    ("import tensorflow as T", "T.distribute.MirroredStrategy()"),
    ("import tensorflow", "tensorflow.distribute.MirroredStrategy()"),
    ("from tensorflow import distribute", "distribute.MirroredStrategy()"),
    ("from tensorflow import distribute as D", "D.MirroredStrategy()"),
    ("import tensorflow.distribute as dist", "dist.MirroredStrategy()"),
    ("from tensorflow.distribute import MirroredStrategy", "MirroredStrategy()"),
    ("from tensorflow.distribute import MirroredStrategy as MS", "MS()"),
    ("from tensorflow.distribute.experimental import MultiWorkerMirroredStrategy as W", "W()"),
    ("import tensorflow.compat.v2 as tf2", "tf2.distribute.MirroredStrategy()"),
    ("import tensorflow as tf", "tf.distribute.TPUStrategy(resolver)"),
]
KERAS_SPELLINGS = [
    ("import tensorflow as tfk", "tfk.keras.Sequential"),
    ("from tensorflow import keras", "keras.Sequential"),
    ("import keras", "keras.Sequential"),
    ("import tf_keras", "tf_keras.Sequential"),
    ("from keras.models import Sequential as Seq", "Seq"),
]


@settings(max_examples=60, deadline=None)
@given(
    strategy=st.sampled_from(STRATEGY_SPELLINGS),
    keras=st.sampled_from(KERAS_SPELLINGS),
    name=st.sampled_from(["strategy", "s", "mirrored", "dist_strategy"]),
    in_function=st.booleans(),
)
def test_prefilter_never_hides_a_finding_in_generated_scripts(strategy, keras, name, in_function):
    body = (
        f"{name} = {strategy[1]}\n"
        f"model = {keras[1]}()\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y, batch_size=64)\n"
    )
    if in_function:
        body = "def main():\n" + "".join("    " + line + "\n" for line in body.splitlines())
    text = f"{strategy[0]}\n{keras[0]}\n{body}"
    full = _findings_unfiltered(text)
    assert full, "every generated script misuses a strategy"
    assert engine.might_need_analysis(text)
    assert analyse(text, OPTIONS).findings == full


def _findings_unfiltered(text: str) -> list:
    original = engine.might_need_analysis
    engine.might_need_analysis = lambda text, migrating=False, project=False: True
    try:
        return analyse(text, OPTIONS).findings
    finally:
        engine.might_need_analysis = original


def test_the_word_is_in_every_strategy_name():
    """Why the prefilter is sound: every qualified name that makes a strategy has to be
    written with the word ``distribute`` somewhere in the file."""
    from autofix.tf.symbols import STRATEGY_CLASSES, is_strategy_constructor

    for cls in STRATEGY_CLASSES:
        for module in ("tensorflow.distribute", "tensorflow.distribute.experimental"):
            assert is_strategy_constructor(f"{module}.{cls}")
            assert re.search(engine.PREFILTER, f"{module}.{cls}")


@pytest.mark.parametrize("path", sorted((FIXTURES / "tfd010").glob("*.py")), ids=lambda p: p.name)
def test_the_migrate_prefilter_never_hides_training(path, monkeypatch):
    """Under `autofix migrate` a file is passed over only when it spells no training (fit,
    train_on_batch, an optimizer's apply_gradients, minimize or apply)."""
    text = read(path)
    migrate = engine.Options(migrate="mirrored")
    with monkeypatch.context() as patch:
        patch.setattr(engine, "might_need_analysis", lambda text, migrating=False, project=False: True)
        full = analyse(text, migrate).findings
    assert analyse(text, migrate).findings == full
    if full:
        assert engine.might_need_analysis(text, migrating=True)
