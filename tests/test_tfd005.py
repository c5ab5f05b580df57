"""TFD005 unscaled-learning-rate: unsafe, so only fixed with --unsafe-fixes."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read

UNSAFE = Options(select=("TFD005",), unsafe_fixes=True)
SAFE_ONLY = Options(select=("TFD005",))


@pytest.mark.parametrize("case", params("tfd005", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd005", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd005", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd005", "fixed"))
def test_without_unsafe_fixes_it_is_only_a_suggestion(case):
    analysis = analyse(read(case.before), SAFE_ONLY)
    assert analysis.new_text is None
    assert analysis.findings
    assert all(f.unsafe and not f.fixable for f in analysis.findings)


def test_optimizer_made_before_the_strategy_is_scaled_after_tfd001_moves_it():
    source = (
        "import tensorflow as tf\n"
        "optimizer = tf.keras.optimizers.Adam(1e-3)\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "model.compile(optimizer=optimizer, loss='mse')\n"
        "model.fit(x, y)\n"
    )
    analysis = analyse(source, Options(select=("TFD001", "TFD005"), unsafe_fixes=True))
    assert analysis.refused is None
    assert analysis.new_text == (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3 * strategy.num_replicas_in_sync)\n"
        "    model.compile(optimizer=optimizer, loss='mse')\n"
        "model.fit(x, y)\n"
    )
