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


SIDE_EFFECT = (
    "import tensorflow as tf\n"
    "counts = {'seen': 0}\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    opt = tf.keras.optimizers.SGD()\n"
    "def replica(x):\n"
    "    with tf.GradientTape() as t:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(m(x), axis=1))\n"
    "    opt.apply_gradients(zip(t.gradient(loss, m.trainable_variables), m.trainable_variables))\n"
    "def step(x):\n"
    "    out = strategy.run(replica, args=(x,))\n"
    "    {effect}\n"
    "    return out\n"
    "for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).map(lambda i: tf.ones([2])).batch(2)):\n"
    "    step(x)\n"
)


@pytest.mark.parametrize(
    "effect, why",
    [
        ("counts['seen'] += 1", "changes counts[...]"),  # the reproducer's shape
        ("counts['last'] = out", "changes counts[...]"),
        ("del counts['seen']", "changes counts[...]"),
        ("tf.print(out); counts.update(seen=1)", "calls counts.update()"),
        ("print(out)", "prints"),
        ("import random; random.random()", "calls random.random()"),
    ],
)
def test_a_python_side_effect_keeps_tf_function_off(effect, why):
    """Reproducer tfd003_tf_function_drops_python_side_effect: inside a tf.function a Python
    effect happens only while tracing (a counter incremented once instead of every step)."""
    (finding,) = _check(SIDE_EFFECT.replace("{effect}", effect)).findings
    assert "eagerly" in finding.message and not finding.fixable
    assert f"step() {why}" in finding.reason


def test_a_dict_the_step_makes_itself_is_no_side_effect():
    analysis = _check(SIDE_EFFECT.replace("{effect}", "results = {}; results['out'] = out"))
    (finding,) = analysis.findings
    assert finding.fixable and "@tf.function\ndef step(x):" in analysis.new_text


def test_a_step_reading_a_changing_python_value_is_not_traced():
    """A tf.function keeps the value of a Python name it read while tracing."""
    loop = "for x in strategy.experimental_distribute_dataset("
    source = SIDE_EFFECT.replace("{effect}", "tf.print(epoch)").replace(loop, "for epoch in range(2):\n  " + loop)
    source = source.replace("\n    step(x)\n", "\n      step(x)\n")
    assert "for epoch in range(2):\n  for x in" in source and "\n      step(x)\n" in source
    (finding,) = _check(source).findings
    assert "reads epoch, a Python value that changes between calls" in finding.reason
