"""The families of single-device code that `autofix migrate` once declined (issue 28), each with
its fixtures: migrations that must appear (fixtures/tfd010/<case>.fixed.py), one shape that must
still be refused, with its reason at its line, and the proof of each migration by training it
beside its original (`smoke --compare` on 2 replicas: tests/test_migrate.py,
test_each_migration_is_proven_to_train_as_its_original[<case>], TensorFlow-marked; the
validation batch computed at run time also on 3 and 4: tests/test_migrate_fit.py).
"""

from __future__ import annotations

import importlib.util

import pytest
from fixturecases import FIXTURES, cases, read
from test_migrate import NOT_THE_SAME

from autofix.engine import Options, analyse

MIGRATE = Options(migrate="mirrored")

# family: (migrations that must appear, the shape refused, its line, what the reason says)
FAMILIES = {
    "a step returning more than its loss (a mean, a sum or count, a dict of them)": (
        ("step_returns_accuracy", "step_returns_counts", "step_returns_dict", "step_returns_logs", "step_returns_predictions"),
        "report_step_returns_max", 21, "it is a maximum, minimum or product over the batch, which strategy.reduce cannot combine",
    ),
    "batches drawn with next() from iter(ds)": (
        ("custom_loop_iterator", "custom_loop_iterator_made_again", "custom_loop_iterator_batch_shown"),
        "report_iterator_batch_mapped_shown", 18, "the batch is also used on line 27, where a distributed batch would not do",
    ),
    "steps counted by zip(range(n), ds)": (
        ("custom_loop_zip_range", "inline_loop_progress_bar_zip"),
        "report_zip_range_listed_batches", 29, "its batches come from list(dataset) (line 28), which is not a tf.data dataset",
    ),
    "a progress bar over the dataset, tqdm(ds)": (
        ("custom_loop_progress_bar",),
        "report_progress_bar_numpy_batches", 30, "its batches come from dataset.as_numpy_iterator() (line 29), which is not a tf.data dataset",
    ),
    "ds.take(n) in the loop header": (
        ("take_and_display",),
        "report_take_unbatched", 36, "train_data is not batched where it is made",
    ),
    "a dataset made anew in each epoch": (
        ("custom_loop_dataset_per_epoch",),
        "report_dataset_per_epoch_batch_grows", 14, "is BATCH_SIZE * (seed + 1) (line 14), which could not be shown to be the global batch",
    ),
    "a batch unpacked in the loop body": (
        ("custom_loop_batch_unpacked", "custom_loop_batch_indexed"),
        "report_batch_unpacked_size_counted", 21, "the batch is also used on line 32, where a distributed batch would not do",
    ),
    "a dataset made by a helper and returned": (
        ("custom_loop_dataset_from_helper", "custom_loop_datasets_from_helper_tuple"),
        "report_dataset_from_helper_generator", 33,
        # as the original writes it: the migration's scaling of the batch it passes is not shown
        "its batches come from make_dataset(features, targets, BATCH_SIZE) (line 16), which is not a tf.data dataset",
    ),
    "fit's validation set (validation_split=, a size known at run time) given a batch of its own": (
        ("fit_validation_split", "fit_validation_split_run_time", "fit_validation_split_two_inputs", "fit_validation_uneven", "fit_validation_data_name", "fit_padded_sequences_validation_split"),
        "report_validation_split_inputs_made_in_call", 14, "with validation_split=, a validation set smaller than the scaled global batch is a single batch",
    ),
    "a loss object of Keras's default reduction in a custom train_step (Keras 2)": (
        ("train_step_loss_object_tf_keras",),
        "report_train_step_loss_from_compile_loaded", 18, "whose reduction over the batch is not known",
    ),
    "random numbers a step draws with NumPy (a GAN's noise), drawn with tf.random per replica": (
        ("step_numpy_noise",),
        "report_step_numpy_noise", 17, "it is drawn in sample(), which the step calls and code outside the step may call too",
    ),
    "a batch reshaped to one row per example in an inline step, and read after the loop": (
        ("inline_batch_reshaped_read_after", "inline_batch_read_after_adam"),
        "report_inline_batch_halves_read_after", 15, "it is the batch reshaped otherwise than to one row per example",
    ),
    "boolean arrays handed to fit": (
        ("fit_boolean_arrays",),
        "report_fit_boolean_labels_metric", 22, "is given a boolean array (picks, made on line 18",
    ),
    "an inline step keeping its loss in a list made before the loop (a loss history)": (
        ("inline_loss_history_appended",),
        "report_inline_history_of_gradient_norms", 19, "the step calls norm_history.append() (line 19)",
    ),
    "training placed by hand on one device (tf.device around fit or the loop); a device block around the data only migrates": (
        ("fit_data_prepared_on_cpu",),
        "report_custom_loop_placed_on_one_device", 22, "the training on line 25 is placed on one device by hand (tf.device(\"/cpu:0\"), line 22)",
    ),
    "a Keras 3 Sequential made without its input's shape, first called by the step (built in the step when it is traced); a loss summed and divided by the batch's static size": (
        ("custom_step_sequential_unbuilt", "inline_loop_sequential_unbuilt", "custom_loop_sum_over_static_batch_size"),
        "report_sequential_unbuilt_input_computed_in_call", 19, "the call is given tf.reshape(batch_images, (-1, 16)), whose shape autofix cannot read again",
    ),
}

PAIRS = {c.name for c in cases("tfd010") if c.after is not None}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_has_migrations_proven_by_training(family):
    """Each migration is a fixture pair whose proof (TensorFlow-marked, in test_migrate.py)
    requires `smoke --compare` to call it equivalent to its original."""
    migrated, _, _, _ = FAMILIES[family]
    for name in migrated:
        assert name in PAIRS, name
        assert name not in NOT_THE_SAME, name


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_has_a_shape_refused_with_its_reason_at_its_line(family):
    _, refused, line, says = FAMILIES[family]
    analysis = analyse(read(FIXTURES / "tfd010" / f"{refused}.py"), MIGRATE)
    assert analysis.new_text is None
    found = [f for f in analysis.findings if f.code == "TFD010" and not f.fixable and f.line == line and says in (f.reason or "")]
    assert found, [(f.line, f.reason) for f in analysis.findings]


def test_a_step_fed_by_a_numpy_sampler_is_refused_naming_the_sampler_at_its_line():
    """issue_34187's family: no migration is written (the sampler's arrays are no dataset that
    can be distributed in place); the reason names the call that draws each batch, and its
    line in the original (the line the migration moved it from)."""
    analysis = analyse(read(FIXTURES / "tfd010" / "report_step_fed_by_numpy_sampler.py"), MIGRATE)
    assert analysis.new_text is None
    reasons = [f.reason or "" for f in analysis.findings if f.code == "TFD010"]
    assert any("it is a NumPy array (y, from loader.get_batch(batch_size), line 25, at every step)" in r for r in reasons), reasons


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_a_numpy_draw_made_a_tf_random_draw_is_held_equal_and_a_moved_mean_is_not(tmp_path):
    """The proof holds the original's NumPy draw and the migration's tf.random draw equal (the
    same stateless numbers for the global batch): the migration is proven; a migration whose
    draw has another mean is called different, not proven."""
    from autofix.smoke.compare import ComparePair, compare_many

    original = FIXTURES / "tfd010" / "step_numpy_noise.py"
    fixed = (FIXTURES / "tfd010" / "step_numpy_noise.fixed.py").read_text()
    assert "tf.random.normal([batch_size, noise_dim], mean=-1., stddev=1.)" in fixed
    moved = tmp_path / "moved_mean.py"
    moved.write_text(fixed.replace("mean=-1.", "mean=3."))
    right, wrong = compare_many(
        [ComparePair(str(FIXTURES / "tfd010" / "step_numpy_noise.fixed.py"), str(original)), ComparePair(str(moved), str(original))],
        replicas=2, offline=True,
    )
    assert right.compare.status == "equivalent", right.compare.message
    assert wrong.compare.status == "different", wrong.compare.message


def test_each_fit_placed_on_one_device_is_refused_at_its_own_block():
    """A notebook timing the CPU against the GPU: one refusal per tf.device block, at the
    block, naming the fit it holds; nothing is written."""
    analysis = analyse(read(FIXTURES / "tfd010" / "report_fit_placed_on_one_device.py"), MIGRATE)
    assert analysis.new_text is None
    placed = sorted((f.line, f.reason) for f in analysis.findings if "placed on one device by hand" in (f.reason or ""))
    assert [line for line, _ in placed] == [18, 22]
    assert "the training on line 19" in placed[0][1] and '"/CPU:0"' in placed[0][1]
    assert "the training on line 23" in placed[1][1] and '"/GPU:0"' in placed[1][1]


UNBUILT = """\
import tensorflow as tf

x = tf.random.normal((64, 3))
y = tf.reduce_sum(x, axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.01)


def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = {loss}
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))


for features, labels in dataset:
    train_step(features, labels)
"""


def test_an_unbuilt_sequential_given_its_input_by_keyword_is_built_on_it():
    analysis = analyse(UNBUILT.format(loss="tf.reduce_mean(tf.square(model(inputs=features) - labels))"), MIGRATE)
    assert analysis.new_text is not None
    assert "            if not model.built:\n                model.build(features.shape)\n" in analysis.new_text


def test_an_unbuilt_sequential_called_in_a_comprehension_is_not_built_where_its_names_are_unbound():
    text = UNBUILT.format(loss="tf.reduce_mean([tf.reduce_mean(tf.square(model(row[None]) - labels)) for row in features])")
    analysis = analyse(text, MIGRATE)
    assert analysis.new_text is None
    (refusal,) = [f for f in analysis.findings if f.code == "TFD010" and "comprehension" in (f.reason or "")]
    assert refusal.line == 12 and "whose names the statement before it does not see" in refusal.reason
    # A plain name the comprehension binds would be unbound before the statement: refused too.
    text = UNBUILT.format(loss="tf.reduce_mean([tf.reduce_mean(tf.square(model(row) - labels)) for row in [features]])")
    assert "is in a comprehension" in next(f.reason for f in analyse(text, MIGRATE).findings if f.code == "TFD010" and f.reason)


def test_a_step_returning_its_loss_as_a_python_number_is_refused_saying_so():
    text = """\
import tensorflow as tf

x = tf.random.normal((64, 3))
y = tf.reduce_sum(x, axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.01)


def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(features) - labels))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return {returned}


for features, labels in dataset:
    print(train_step(features, labels))
"""
    for returned, said in (("float(loss)", "float() makes it a Python number"), ("loss.numpy()", ".numpy() makes it a Python number")):
        analysis = analyse(text.format(returned=returned), MIGRATE)
        assert analysis.new_text is None
        (refusal,) = [f for f in analysis.findings if f.code == "TFD010" and said in (f.reason or "")]
        assert refusal.line == 14 and "return the tensor and convert it where the loop reads it" in refusal.reason
    # A float() of the file's own (rebound) is not the builtin: not said so.
    shadowed = "def float(v):\n    return v\n\n\n" + text.format(returned="float(loss)")
    assert not any("Python number" in (f.reason or "") for f in analyse(shadowed, MIGRATE).findings)
