"""TFD003, driven by the fixture pairs in fixtures/tfd003."""

from __future__ import annotations

import pytest

from autofix.engine import Options
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params

OPTIONS = Options(select=("TFD003",))


@pytest.mark.parametrize("case", params("tfd003", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd003", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd003", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)


def _check(source: str):
    from autofix.engine import analyse

    return analyse(source, OPTIONS)


INFERENCE = (
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    net = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])\n"
    "    net.compile(optimizer='adam', loss='mse')\n"
    "train = tf.data.Dataset.from_tensor_slices((tf.ones([32, 3]), tf.ones([32, 1]))).batch(8)\n"
    "net.fit(train, epochs=1)\n"
    "queries = tf.data.Dataset.from_tensor_slices(tf.ones([32, 3])).batch(8)\n"
    "for q in strategy.experimental_distribute_dataset(queries):\n"
    "    {call}\n"
    "    print(strategy.gather(out, axis=0).shape)\n"
)


@pytest.mark.parametrize(
    "call",
    ["out = strategy.run(net, args=(q,))", "out = strategy.run(net, kwargs={'inputs': q})", "out = strategy.run(net, (q,))"],
)
def test_distributed_inference_is_never_rewritten(call):
    """Reproducer tfd003_inference_becomes_training: a model given real inputs predicts on
    every replica; turning that into a train step trained the model on every test batch."""
    analysis = _check(INFERENCE.replace("{call}", call))
    assert analysis.findings == [] and analysis.new_text is None


def test_a_model_given_no_inputs_is_reported_as_failing():
    analysis = _check(INFERENCE.replace("{call}", "out = strategy.run(net, args=())"))
    (finding,) = analysis.findings
    assert "no inputs" in finding.message and "raises" in finding.message
    # In a loop the generated step would be defined in the loop body: reported instead.
    assert not finding.fixable and "inside a loop" in finding.reason


EAGER_V2 = (
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    opt = tf.keras.optimizers.SGD()\n"
    "def replica(x):\n"
    "    with tf.GradientTape() as t:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(m(x), axis=1))\n"
    "    opt.apply_gradients(zip(t.gradient(loss, m.trainable_variables), m.trainable_variables))\n"
    "def inner(batches):\n"
    "    for x in batches:\n"
    "        strategy.experimental_run_v2(replica, args=(x,))\n"
    "def outer(batches):\n"
    "    inner(batches)\n"
    "{run}(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4)))\n"
)


def test_eager_loop_inside_a_function_compiled_at_its_call_site_is_not_eager():
    assert _check(EAGER_V2.replace("{run}", "tf.function(outer)")).findings == []
    (finding,) = _check(EAGER_V2.replace("{run}", "outer")).findings
    assert "eagerly" in finding.message and finding.line == 12
