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


@pytest.mark.parametrize(
    "setup, rate",
    [
        ("TOTAL_BATCH = 32 * strategy.num_replicas_in_sync\nBASE = 0.2\nrate = BASE * TOTAL_BATCH / 256\n", "rate"),
        ("k = strategy.num_replicas_in_sync\n", "0.02 * k"),
        ("", "1e-4 * global_batch_size / 64"),
        ("def warmup(step):\n    return 1e-3 * strategy.num_replicas_in_sync * min(step, 100) / 100\n", "warmup"),
    ],
)
def test_a_rate_that_already_follows_the_batch_or_the_replicas_is_never_scaled_again(setup, rate):
    """Reproducer tfd005_double_scaling: --unsafe-fixes multiplied these by the replica count
    a second time (a rate growing with N squared)."""
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "global_batch_size = 256\n"
        f"{setup}"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        f"    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate={rate}), loss='mse')\n"
    )
    analysis = analyse(source, UNSAFE)
    assert analysis.findings == [] and analysis.new_text is None
    # The same script with a constant rate is a suggestion: the test can fail.
    assert analyse(source.replace(f"learning_rate={rate}", "learning_rate=0.1"), UNSAFE).new_text is not None


def test_scaling_the_batch_and_the_rate_together_scales_the_rate_once():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "BATCH = 64\n"
        "lr = 0.1 * BATCH / 256\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer=tf.keras.optimizers.SGD(lr), loss='mse')\n"
        "model.fit(tf.data.Dataset.from_tensor_slices((tf.ones([256, 2]), tf.ones([256, 1]))).batch(BATCH))\n"
    )
    analysis = analyse(source, Options(select=("TFD002", "TFD005"), unsafe_fixes=True))
    # TFD002 makes the batch global (a new name, as BATCH is public); the rate is computed
    # from it, so it follows the global batch and is not scaled a second time.
    assert "TFD005" not in {f.code for f in analysis.findings}
    assert analysis.new_text is not None and "GLOBAL_BATCH = BATCH * strategy.num_replicas_in_sync\n" in analysis.new_text
    assert "lr = 0.1 * GLOBAL_BATCH / 256\n" in analysis.new_text and "SGD(lr)" in analysis.new_text


def test_a_loss_scale_optimizer_and_a_schedule_are_not_rates():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    outer = tf.keras.mixed_precision.LossScaleOptimizer(tf.keras.optimizers.Adam())\n"
        "    decay = tf.keras.optimizers.SGD(tf.keras.experimental.CosineDecay(0.1, 1000))\n"
        "    model.compile(optimizer=outer, loss='mse')\n"
        "    model.compile(optimizer=decay, loss='mse')\n"
        "    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3, 0.9, 0.999), loss='mse')\n"
    )
    analysis = analyse(source, UNSAFE)
    # The optimizer inside the LossScaleOptimizer is reported (default rate), not the wrapper;
    # the last rate is scaled, kept positional before the other positional arguments.
    assert [(f.line, f.fixable) for f in analysis.findings] == [(5, False), (9, True)]
    assert "Adam(1e-3 * strategy.num_replicas_in_sync, 0.9, 0.999)" in analysis.new_text
    assert "LossScaleOptimizer(tf.keras.optimizers.Adam())" in analysis.new_text
    assert "CosineDecay(0.1, 1000))" in analysis.new_text
