"""TFD004, driven by the fixture pairs in fixtures/tfd004."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read

OPTIONS = Options(select=("TFD004",))


@pytest.mark.parametrize("case", params("tfd004", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd004", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd004", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)


def _check(source: str):
    from autofix.engine import analyse

    return analyse(source, OPTIONS)


def test_a_mean_that_only_feeds_a_diagnostic_is_not_a_loss():
    """Reproducer tfd004_false_positive_diagnostic_mean: the loss is summed over the global
    batch by hand; a reduce_mean computed after the gradient and returned is a diagnostic."""
    analysis = _check(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "TOTAL = 4 * strategy.num_replicas_in_sync\n"
        "with strategy.scope():\n"
        "    m = tf.keras.Sequential([tf.keras.layers.Dense(2)])\n"
        "    sgd = tf.keras.optimizers.SGD(0.1)\n"
        "def replica(batch):\n"
        "    a, b = batch\n"
        "    with tf.GradientTape() as g:\n"
        "        guess = m(a, training=True)\n"
        "        total = tf.reduce_sum(tf.reduce_sum(tf.abs(b - guess), axis=1)) / TOTAL\n"
        "    sgd.apply_gradients(zip(g.gradient(total, m.trainable_variables), m.trainable_variables))\n"
        "    spread = tf.reduce_mean(tf.square(b - guess))\n"
        "    tf.summary.scalar('spread', spread)\n"
        "    return total, spread\n"
        "@tf.function\n"
        "def step(batch):\n"
        "    total, spread = strategy.run(replica, args=(batch,))\n"
        "    return strategy.reduce('SUM', total, axis=None), strategy.reduce('MEAN', spread, axis=None)\n"
    )
    assert analysis.findings == [] and analysis.new_text is None


def test_a_mean_divided_by_the_replica_count_is_left_alone():
    """Rewriting it to compute_average_loss would make the gradients N times too small."""
    for scaling in (
        "        cost = tf.reduce_mean(keras.losses.mse(b, m(a))) / strategy.num_replicas_in_sync\n",
        "        cost = tf.reduce_mean(keras.losses.mse(b, m(a))) * (1.0 / strategy.num_replicas_in_sync)\n",
        "        cost = tf.reduce_mean(keras.losses.mse(b, m(a)))\n"
        "        cost /= strategy.num_replicas_in_sync\n",
    ):
        analysis = _check(
            "import keras\n"
            "import tensorflow as tf\n"
            "strategy = tf.distribute.MirroredStrategy()\n"
            "with strategy.scope():\n"
            "    m = keras.Sequential([keras.layers.Dense(2)])\n"
            "    opt = keras.optimizers.SGD(0.1)\n"
            "def replica(a, b):\n"
            "    with tf.GradientTape() as g:\n"
            f"{scaling}"
            "    opt.apply_gradients(zip(g.gradient(cost, m.trainable_variables), m.trainable_variables))\n"
            "@tf.function\n"
            "def step(a, b):\n"
            "    strategy.run(replica, args=(a, b))\n"
        )
        assert analysis.findings == [] and analysis.new_text is None, scaling


def test_per_replica_means_in_a_gan_step_are_found():
    """Two tapes, loss helpers, a default-reduction BinaryCrossentropy and a per-replica mean."""
    analysis = _check(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    g = tf.keras.Sequential([tf.keras.layers.Dense(2)])\n"
        "    d = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    g_opt, d_opt = tf.keras.optimizers.Adam(), tf.keras.optimizers.Adam()\n"
        "    bce = tf.keras.losses.BinaryCrossentropy(from_logits=True)\n"
        "def g_loss(fake, restored, original):\n"
        "    return bce(tf.ones_like(fake), fake) + tf.reduce_mean(tf.abs(restored - original))\n"
        "def d_loss(real, fake):\n"
        "    return bce(tf.ones_like(real), real) + bce(tf.zeros_like(fake), fake)\n"
        "def replica(x, z):\n"
        "    with tf.GradientTape() as gt, tf.GradientTape() as dt:\n"
        "        made = g(z, training=True)\n"
        "        real, fake = d(x, training=True), d(made, training=True)\n"
        "        gl, dl = g_loss(fake, made, x), d_loss(real, fake)\n"
        "    g_opt.apply_gradients(zip(gt.gradient(gl, g.trainable_variables), g.trainable_variables))\n"
        "    d_opt.apply_gradients(zip(dt.gradient(dl, d.trainable_variables), d.trainable_variables))\n"
        "@tf.function\n"
        "def step(x, z):\n"
        "    strategy.run(replica, args=(x, z))\n"
    )
    lines = sorted((f.line, f.fixable) for f in analysis.findings)
    # The three bce calls and the mean of |restored - original| (whatever its rank) are fixed.
    assert lines == [(9, True), (9, True), (11, True), (11, True)]
    assert "tf.reduce_mean(bce(tf.zeros_like(fake), fake)) / strategy.num_replicas_in_sync" in analysis.new_text
    assert "tf.reduce_mean(tf.abs(restored - original)) / strategy.num_replicas_in_sync" in analysis.new_text
    assert 'BinaryCrossentropy(from_logits=True, reduction="none")' in analysis.new_text


STEP = (
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    opt = tf.keras.optimizers.SGD(0.1)\n"
    "{helpers}"
    "def replica(x, y):\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = {loss}\n"
    "    opt.apply_gradients(zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables))\n"
    "    return loss\n"
    "@tf.function\n"
    "def step(x, y):\n"
    "    return strategy.reduce('SUM', strategy.run(replica, args=(x, y)), axis=None)\n"
    "for x, y in strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((tf.ones([8, 2]), tf.ones([8, 1]))).batch(4)):\n"
    "    print(float(step(x, y)))\n"
)


def _step(loss: str, helpers: str = ""):
    return _check(STEP.replace("{helpers}", helpers).replace("{loss}", loss))


@pytest.mark.parametrize(
    "helpers, loss, fixed",
    [
        # A helper in the file, a lambda, a factory's closure, a callable object.
        ("def loss_function(y, p):\n    return tf.reduce_mean(tf.square(y - p))\n", "loss_function(y, m(x))",
         "return tf.reduce_mean(tf.square(y - p)) / strategy.num_replicas_in_sync"),
        ("mae = lambda y, p: tf.reduce_mean(tf.abs(y - p))\n", "mae(y, m(x))",
         "mae = lambda y, p: tf.reduce_mean(tf.abs(y - p)) / strategy.num_replicas_in_sync"),
        ("def make():\n    def inner(y, p):\n        return tf.reduce_mean(tf.abs(y - p))\n    return inner\nfn = make()\n", "fn(y, m(x))",
         "return tf.reduce_mean(tf.abs(y - p)) / strategy.num_replicas_in_sync"),
        ("class Criterion:\n    def __call__(self, y, p):\n        return tf.reduce_mean(tf.abs(y - p))\ncriterion = Criterion()\n", "criterion(y, m(x))",
         "return tf.reduce_mean(tf.abs(y - p)) / strategy.num_replicas_in_sync"),
        # An extra term added to a global average.
        ("", "tf.nn.compute_average_loss(tf.square(y - m(x))[:, 0]) + 10 * tf.reduce_mean(tf.abs(m(x)))",
         "10 * tf.reduce_mean(tf.abs(m(x))) / strategy.num_replicas_in_sync"),
    ],
)
def test_per_replica_means_where_the_step_cannot_see_them_are_found_and_fixed(helpers, loss, fixed):
    """Issue 22, pattern 3: a mean returned by code the step calls is a term of its loss."""
    analysis = _step(loss, helpers)
    assert [f.fixable for f in analysis.findings] == [True]
    assert fixed in analysis.new_text


def test_a_lambda_given_to_minimize_is_the_loss():
    analysis = _check(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    opt = tf.keras.optimizers.SGD(0.1)\n"
        "def replica(x, y):\n"
        "    opt.minimize(lambda: tf.reduce_mean(tf.square(y - m(x))), m.trainable_variables)\n"
        "@tf.function\n"
        "def step(x, y):\n"
        "    strategy.run(replica, args=(x, y))\n"
    )
    assert "lambda: tf.reduce_mean(tf.square(y - m(x))) / strategy.num_replicas_in_sync" in analysis.new_text


@pytest.mark.parametrize(
    "helpers, loss, why",
    [
        # A helper also used outside the steps, a product of two losses, an unknown term.
        ("def loss_function(y, p):\n    return tf.reduce_mean(tf.square(y - p))\nloss_function(tf.ones([2, 1]), tf.ones([2, 1]))\n",
         "loss_function(y, m(x))", "also used outside the training step"),
        ("from losses import perceptual\n", "tf.reduce_mean(tf.abs(y - m(x))) + perceptual(y, m(x))", "whose reduction over the replicas is not known"),
        ("", "tf.reduce_mean(tf.abs(y - m(x))) + tf.reduce_mean(tf.abs(m(x))) * tf.reduce_mean(tf.abs(y))", "whose reduction over the replicas is not known"),
    ],
)
def test_a_loss_that_cannot_be_fixed_whole_is_reported(helpers, loss, why):
    analysis = _step(loss, helpers)
    assert analysis.findings and analysis.new_text is None
    assert all(why in f.reason for f in analysis.findings)


def test_a_mean_whose_per_replica_values_are_shown_is_scaled_where_it_is_differentiated():
    """The per-replica losses are printed: dividing them would change what is printed, so the
    tape differentiates the replica's share and the printed mean stays what it was."""
    source = STEP.replace("{helpers}", "").replace("{loss}", "tf.reduce_mean(tf.abs(y - m(x)))")
    source = source.replace("    return strategy.reduce('SUM', strategy.run(replica, args=(x, y)), axis=None)\n", "    return strategy.run(replica, args=(x, y))\n")
    source = source.replace("    print(float(step(x, y)))\n", "    print(strategy.experimental_local_results(step(x, y)))\n")
    analysis = _check(source)
    (finding,) = analysis.findings
    assert finding.fixable
    assert analysis.new_text == source.replace(
        "        loss = tf.reduce_mean(tf.abs(y - m(x)))\n",
        "        loss = tf.reduce_mean(tf.abs(y - m(x)))\n        replica_loss = loss / strategy.num_replicas_in_sync\n",
    ).replace("tape.gradient(loss,", "tape.gradient(replica_loss,")


def test_a_loss_also_added_up_over_the_replicas_is_not_scaled_at_the_tape():
    """The step's loss is also logged and reduced with SUM: the sum wants each replica's share,
    the log the mean, so neither rewrite is right for both."""
    source = STEP.replace("{helpers}", "").replace("{loss}", "tf.reduce_mean(tf.abs(y - m(x)))")
    source = source.replace("    return loss\n", "    tf.print(loss)\n    return loss\n")
    (finding,) = _check(source).findings
    assert not finding.fixable and "its value is also used on line" in finding.reason


def test_a_per_token_loss_is_averaged_over_every_token_not_summed_over_them():
    """Reproducer tfd004_per_token_loss_multiplied: a (batch, T) loss from a default-reduction
    loss object (or a mean of one) handed to compute_average_loss made the loss T times larger;
    the fix divides the mean of every entry by the replica count, whatever the rank."""
    loss_object = _step("loss_object(y, m(x))", "loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n")
    assert "tf.reduce_mean(loss_object(y, m(x))) / strategy.num_replicas_in_sync" in loss_object.new_text
    mean = _step("tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, m(x), from_logits=True))")
    assert "from_logits=True)) / strategy.num_replicas_in_sync" in mean.new_text
    assert "compute_average_loss" not in loss_object.new_text + mean.new_text


def test_regularization_is_scaled_with_the_data_term_or_neither_is_fixed():
    """Reproducer tfd004_regularization_left_unscaled: the data term made a global average and
    tf.add_n(model.losses) left per replica changed their balance N-fold."""
    both = _step("tf.reduce_mean(tf.square(y - m(x))) + tf.add_n(m.losses)")
    assert [f.fixable for f in both.findings] == [True, True]
    assert "tf.reduce_mean(tf.square(y - m(x))) / strategy.num_replicas_in_sync + tf.nn.scale_regularization_loss(tf.add_n(m.losses))" in both.new_text
    neither = _step("tf.reduce_mean(tf.square(y - m(x))) + tf.add_n(m.losses)\n        tf.print(loss)")
    assert len(neither.findings) == 2 and neither.new_text is None


def test_a_loss_object_ignoring_a_class_and_shared_with_test_step_is_reported():
    """``call`` masks the entries of an ignored class, which only ``__call__`` leaves out: the
    step cannot take its losses from ``call``."""
    source = read(FIXTURES / "tfd004" / "loss_object_in_self_shared_with_test_step.py").replace(
        "keras.losses.MeanSquaredError()", "keras.losses.SparseCategoricalCrossentropy(ignore_class=0)"
    )
    analysis = analyse(source, Options(select=("TFD004",)))
    (finding,) = analysis.findings
    assert not finding.fixable and "also used outside the training step" in finding.reason


def test_a_keras2_loss_object_shared_with_test_step_is_reported():
    """Keras 2 rejects a default-reduction loss object under a strategy wherever it is called,
    test_step included: reading it through call() in the step would keep nothing there."""
    source = read(FIXTURES / "tfd004" / "loss_object_in_self_shared_with_test_step.py").replace("import keras\n", "import tf_keras as keras\n")
    analysis = analyse(source, Options(select=("TFD004",)))
    (finding,) = analysis.findings
    assert not finding.fixable and "also used outside the training step" in finding.reason


@pytest.mark.parametrize(
    "case, why",
    [
        ("report_mean_added_to_every_example_and_once", "also added to every example of what tf.nn.compute_average_loss reduces on line 19"),
        ("report_clipped_by_the_optimizer", "the optimizer clips the gradients (global_clipnorm=, line 6)"),
        ("report_clipped_by_a_norm_of_its_own", "by a norm of its own (use_norm=, line 16)"),
    ],
)
def test_a_fix_that_would_change_a_right_use_or_a_clip_is_refused(case, why):
    analysis = _check(read(FIXTURES / "tfd004" / f"{case}.py"))
    assert len(analysis.findings) == 1 and analysis.new_text is None
    assert why in analysis.findings[0].reason


def test_a_clip_by_value_follows_both_bounds():
    source = read(FIXTURES / "tfd004" / "clipped_by_global_norm.py").replace(
        "gradients, _ = tf.clip_by_global_norm(gradients, 5.0)", "gradients = [tf.clip_by_value(g, -1.0, 1.0) for g in gradients]"
    )
    analysis = _check(source)
    assert "tf.clip_by_value(g, -1.0 / strategy.num_replicas_in_sync, 1.0 / strategy.num_replicas_in_sync)" in analysis.new_text


def test_a_default_reduction_loss_keeps_its_clip():
    """Its fix computes what Keras >= 3.8 computes: the clip stays."""
    source = read(FIXTURES / "tfd004" / "clipped_by_global_norm.py").replace(
        "    optimizer = tf.keras.optimizers.Adam(1e-2)\n",
        "    optimizer = tf.keras.optimizers.Adam(1e-2)\n    mse = tf.keras.losses.MeanSquaredError()\n",
    ).replace("tf.reduce_mean(tf.square(targets - predictions))", "mse(targets, predictions)")
    analysis = _check(source)
    assert analysis.new_text is not None and "tf.clip_by_global_norm(gradients, 5.0)" in analysis.new_text


def test_a_loss_share_is_computed_at_the_tape_block_end_only_where_every_path_binds_the_loss():
    """The share of a loss bound only in a branch of the tape's block would read an unbound name
    on the other path (UnboundLocalError): refused. Bound on both paths, the share is added."""
    source = (FIXTURES / "tfd004" / "report_loss_bound_only_in_a_branch.py").read_text()
    assert analyse(source, Options(select=("TFD004",))).new_text is None
    both = source.replace(
        "            scaled_loss = optimizer.scale_loss(loss)\n",
        "            scaled_loss = optimizer.scale_loss(loss)\n        else:\n            scaled_loss = loss\n",
    )
    assert both != source
    fixed = analyse(both, Options(select=("TFD004",))).new_text
    assert fixed is not None and "replica_scaled_loss = scaled_loss / strategy.num_replicas_in_sync" in fixed


def test_a_sum_over_the_replicas_divided_by_hand_keeps_the_loss_as_it_is():
    """The step's loss goes to strategy.reduce(SUM, ...) and the caller divides the sum by the
    device count (an average made by hand): scaling the loss in the step would make that
    average N times too small, so the finding names the division and nothing is fixed. Without
    the division the sum of the shares is the global loss: fixed."""
    source = read(FIXTURES / "tfd004" / "report_step_loss_summed_then_divided_by_hand.py")
    analysis = analyse(source, Options(select=("TFD004",)))
    (finding,) = analysis.findings
    assert analysis.new_text is None and not finding.fixable
    assert "divides the sum on line 38 (loss /= n_gpus)" in finding.reason
    undivided = analyse(source.replace("        loss /= n_gpus\n", ""), Options(select=("TFD004",)))
    assert undivided.findings[0].fixable and "/ strategy.num_replicas_in_sync" in undivided.new_text
    shown = analyse(source.replace("loss /= n_gpus", "shown = loss / n_gpus"), Options(select=("TFD004",)))
    assert not shown.findings[0].fixable and "(loss / n_gpus)" in shown.findings[0].reason
