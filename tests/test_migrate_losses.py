"""What `autofix migrate` does to losses that reduce over the batch themselves and to gradient
clipping, statically: the rewrites, the refusals (their message and line), and that `check` on
code already written for N replicas is not changed by them. tests/test_migrate_definition.py
trains the migrations against the definition of a right migration; docs/migrate.md has the
measurements."""

from __future__ import annotations

import importlib.util

import pytest
from fixturecases import FIXTURES, read

from autofix.engine import Options, analyse

MIGRATE = Options(migrate="mirrored")
CHECK = Options()

STEP = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "import keras\n"
    "\n"
    "x = np.random.rand(256, 8).astype('float32')\n"
    "y = np.random.randint(0, 3, size=(256,))\n"
    "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)\n"
    "model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])\n"
    "optimizer = keras.optimizers.SGD(0.01)\n"
    "\n"
    "\n"
    "@tf.function\n"
    "def train_step(xb, yb):\n"
    "    with tf.GradientTape() as tape:\n"
    "        per_example = keras.losses.sparse_categorical_crossentropy(yb, model(xb, training=True), from_logits=True)\n"
    "        loss = tf.reduce_sum(per_example)\n"
    "    grads = tape.gradient(loss, model.trainable_variables)\n"
    "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
    "\n"
    "\n"
    "for xb, yb in ds:\n"
    "    train_step(xb, yb)\n"
)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


# --- a loss summed over the batch in a custom step ---------------------------------------------


def test_a_sum_over_the_batch_is_divided_by_the_replica_count():
    migrated = analyse(STEP, MIGRATE).new_text
    assert "        loss = tf.reduce_sum(per_example) / strategy.num_replicas_in_sync\n" in migrated


def test_check_leaves_a_sum_in_code_written_for_replicas_alone():
    """Code that already distributes and sums its loss means the global sum: check mode's
    judgement of it is not changed by the migration's definition."""
    written = read(FIXTURES / "tfd010" / "custom_loop_summed_loss.fixed.py").replace(" / strategy.num_replicas_in_sync", "")
    assert analyse(written, CHECK).findings == []
    migrated = analyse(STEP, MIGRATE).new_text.replace(" / strategy.num_replicas_in_sync\n", "\n")
    assert [f for f in analyse(migrated, CHECK).findings if f.code == "TFD004"] == []



# --- gradient clipping ---------------------------------------------------------------------------


CLIPPED = STEP.replace(
    "        loss = tf.reduce_sum(per_example)\n", "        loss = tf.reduce_mean(per_example)\n"
).replace(
    "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n",
    "    grads, norm = tf.clip_by_global_norm(grads, 1.0)\n    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n",
)


def test_a_global_norm_clip_is_by_the_norm_of_the_all_reduced_gradient():
    migrated = analyse(CLIPPED, MIGRATE).new_text
    assert (
        "    grads, norm = tf.clip_by_global_norm(grads, 1.0, use_norm=tf.linalg.global_norm("
        "tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)))\n"
    ) in migrated
    # The loss is still each replica's share: the all-reduce only gives the clip its norm.
    assert "        loss = tf.reduce_mean(per_example) / strategy.num_replicas_in_sync\n" in migrated


def test_an_all_reduce_that_only_gives_the_clip_its_norm_does_not_aggregate_the_gradients():
    """Check mode still finds a per-replica mean in a step whose clip is by the all-reduced
    norm: the optimizer sums the gradients all the same."""
    migrated = analyse(CLIPPED, MIGRATE).new_text.replace(" / strategy.num_replicas_in_sync\n", "\n")
    assert [f.code for f in analyse(migrated, CHECK).findings] == ["TFD004"]


def test_a_clip_of_each_gradient_tensor_is_refused_at_its_line():
    source = read(FIXTURES / "tfd010" / "report_clip_by_norm.py")
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    assert finding.line == _line(source, "tf.clip_by_norm(g, 1.0)")
    assert finding.reason.startswith(
        f"no automatic fix: the step clips its gradients with tf.clip_by_norm (line {finding.line}): on N replicas each "
        "replica would clip its own share of the gradient"
    )


def test_a_clip_whose_result_is_dropped_clips_nothing_and_is_left_as_it_is():
    """``tf.clip_by_norm(g, 15)`` as a statement of its own (dragen1860's VAE): nothing is
    clipped on one device or on N, so nothing is refused."""
    source = read(FIXTURES / "tfd010" / "report_clip_by_norm.py")
    line = next(l for l in source.splitlines() if "tf.clip_by_norm(g, 1.0)" in l)
    indent = line[: len(line) - len(line.lstrip())]
    dropped = source.replace(line, f"{indent}for g in grads:\n{indent}    tf.clip_by_norm(g, 1.0)")
    migrated = analyse(dropped, MIGRATE).new_text
    assert migrated is not None
    assert "    for g in grads:\n        tf.clip_by_norm(g, 1.0)\n" in migrated


def test_a_clip_of_something_else_than_gradients_is_not_one():
    """``tf.clip_by_value`` of predictions in a loss helper clips no gradient."""
    source = CLIPPED.replace("tf.clip_by_global_norm(grads, 1.0)", "grads, tf.constant(0.0)").replace(
        "model(xb, training=True)", "tf.clip_by_value(model(xb, training=True), -5.0, 5.0)"
    )
    assert analyse(source, MIGRATE).new_text is not None


def test_an_optimizers_own_clip_is_refused_on_keras_3_in_fit_and_in_a_custom_step():
    fit = read(FIXTURES / "tfd010" / "report_optimizer_clipnorm.py")
    (finding,) = analyse(fit, MIGRATE).findings
    assert finding.line == _line(fit, "global_clipnorm=0.05")
    assert "(global_clipnorm=, line 11): under a strategy Keras 3 clips each replica's share of the gradient" in finding.reason
    assert "measured with the clip active: 1.141 x the update of clipping the averaged gradient" in finding.reason
    step = STEP.replace("keras.optimizers.SGD(0.01)", "keras.optimizers.SGD(0.01, clipnorm=1.0)")
    (finding,) = analyse(step, MIGRATE).findings
    assert "(clipnorm=, line 9)" in finding.reason and "1.016 x" in finding.reason


def test_an_optimizers_own_clip_is_left_on_tf_keras():
    """tf_keras adds the replicas' gradients up, then clips (measured)."""
    assert analyse(read(FIXTURES / "tfd010" / "fit_clipnorm_tf_keras.py"), MIGRATE).new_text is not None


# --- losses compile is given that reduce over the batch themselves -----------------------------


FIT = (
    "import numpy as np\n"
    "import keras\n"
    "import tensorflow as tf\n"
    "\n"
    "\n"
    "def squared_error(y_true, y_pred):\n"
    "    return tf.reduce_mean(tf.square(y_true - y_pred))\n"
    "\n"
    "\n"
    "x = np.random.rand(256, 8).astype('float32')\n"
    "y = np.random.rand(256, 2).astype('float32')\n"
    "model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])\n"
    "model.compile(optimizer='sgd', loss=squared_error)\n"
    "model.fit(x, y, batch_size=16, epochs=2)\n"
)
PER_EXAMPLE = "    return tf.reduce_mean(tf.reshape(tf.square(y_true - y_pred), [tf.shape(y_pred)[0], -1]), axis=1)\n"


def test_a_compiled_loss_function_averaging_over_the_batch_returns_one_loss_per_example():
    assert PER_EXAMPLE in analyse(FIT, MIGRATE).new_text


def test_a_compiled_loss_function_is_left_as_it_is_on_tf_keras():
    """tf_keras divides a scalar loss by the replicas itself (measured)."""
    source = FIT.replace("import keras\n", "import tf_keras as keras\n")
    migrated = analyse(source, MIGRATE).new_text
    assert "    return tf.reduce_mean(tf.square(y_true - y_pred))\n" in migrated


def _reason(source: str) -> tuple[int, str]:
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    return finding.line, finding.reason


def test_a_compiled_loss_function_not_shown_entry_by_entry_is_refused_at_its_mean():
    source = FIT.replace("tf.square(y_true - y_pred)", "tf.square(y_true - tf.reduce_max(y_pred))")
    line, reason = _reason(source)
    assert line == 7
    assert "the loss function squared_error (line 7) returns a mean over the whole batch: Keras 3 does not divide a scalar loss" in reason
    assert "(measured: 2.000 x on 2); what it averages is not shown to be made entry by entry from y_true and y_pred" in reason


def test_a_compiled_loss_function_with_weighed_examples_is_refused():
    line, reason = _reason(FIT.replace("epochs=2)", "epochs=2, sample_weight=np.ones(256))"))
    assert line == 7 and "fit is given sample_weight= (line 14)" in reason


def test_a_compiled_loss_function_summing_over_the_batch_is_refused():
    line, reason = _reason(FIT.replace("tf.reduce_mean(tf.square", "tf.reduce_sum(tf.square"))
    assert line == 7 and "returns a sum over the whole batch: Keras 3 does not divide a scalar loss by the replicas" in reason


def test_a_compiled_sum_is_weighed_by_the_replicas_where_compile_weighs_nothing():
    source = FIT.replace("loss=squared_error", "loss=keras.losses.MeanSquaredError(reduction='sum')")
    assert "loss_weights=1 / strategy.num_replicas_in_sync)" in analyse(source, MIGRATE).new_text
    line, reason = _reason(source.replace("reduction='sum')", "reduction='sum'), loss_weights=2.0"))
    assert line == 13 and "it is not the one loss compile is given unweighed" in reason


@pytest.mark.parametrize(
    "averaged, per_example",
    [
        # A sum or mean over each example's own axes keeps the batch axis.
        ("tf.reduce_sum(tf.square(y_true - y_pred), axis=1)", True),
        ("tf.reduce_mean(tf.square(y_true - y_pred), axis=[1])", True),
        # Keras's loss function reduces the last axis only: what the sum over axis 1 leaves is
        # still one entry per example (y has 2 axes more than the batch's).
        ("tf.reduce_sum(keras.losses.mean_squared_error(y_true, y_pred), axis=1)", True),
        # Over the batch axis, over every axis, over an axis counted from the end, or Keras's
        # loss function alone (its result may have lost the batch axis): not shown.
        ("tf.reduce_sum(tf.square(y_true - y_pred), axis=0)", False),
        ("tf.reduce_sum(tf.square(y_true - y_pred), axis=(0, 1))", False),
        ("tf.reduce_sum(tf.square(y_true - y_pred), axis=-1)", False),
        ("keras.losses.mean_squared_error(y_true, y_pred)", False),
        ("tf.reduce_sum(keras.losses.mean_squared_error(y_true, tf.reduce_max(y_pred)), axis=1)", False),
    ],
)
def test_a_loss_reduced_over_each_examples_axes_then_averaged_returns_one_loss_per_example(averaged, per_example):
    source = FIT.replace("tf.reduce_mean(tf.square(y_true - y_pred))", f"tf.reduce_mean({averaged})").replace(
        "np.random.rand(256, 2)", "np.random.rand(256, 2, 3)"
    ).replace("keras.layers.Dense(2)]", "keras.layers.Dense(6), keras.layers.Reshape((2, 3))]")
    analysis = analyse(source, MIGRATE)
    if per_example:
        assert f"    return tf.reduce_mean(tf.reshape({averaged}, [tf.shape(y_pred)[0], -1]), axis=1)\n" in analysis.new_text
    else:
        assert analysis.new_text is None
        assert any("is not shown to be made entry by entry" in f.reason for f in analysis.findings)


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_a_loss_summed_per_image_trains_as_the_original(tmp_path):
    """The autoencoder whose loss sums each image's pixels then averages: migrated, the same
    update as the original at twice its batch; with the scalar mean left (Keras 3 does not
    divide it), twice the update, told apart."""
    from autofix.smoke.compare import ComparePair, compare_many

    original = tmp_path / "original.py"
    original.write_text(read(FIXTURES / "tfd010" / "fit_loss_summed_per_image.py"))
    right = read(FIXTURES / "tfd010" / "fit_loss_summed_per_image.fixed.py")
    per_example = "tf.reduce_mean(tf.reshape(tf.reduce_sum(keras.losses.binary_crossentropy(real, reconstruction), axis=(1, 2)), [tf.shape(reconstruction)[0], -1]), axis=1)"
    assert per_example in right
    (tmp_path / "right.py").write_text(right)
    (tmp_path / "wrong.py").write_text(right.replace(per_example, "tf.reduce_mean(tf.reduce_sum(keras.losses.binary_crossentropy(real, reconstruction), axis=(1, 2)))"))
    proven, told = compare_many([ComparePair(str(tmp_path / "right.py"), str(original)), ComparePair(str(tmp_path / "wrong.py"), str(original))], replicas=2, offline=True)
    assert proven.compare.status == "equivalent", proven.compare.message
    assert told.compare.status == "different", told.compare.message
