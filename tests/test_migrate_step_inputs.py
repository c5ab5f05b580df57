"""A custom step called on values the loop computes from the batch (fixtures/tfd010/
custom_loop_step_on_computed_batch, custom_loop_step_on_augmented_batch and the
report_step_on_batch_* twins): the migration's wrapper takes the distributed batch, each
replica computes the step's arguments from its share (a strategy.run of their expressions),
then runs the step on them, where each example's value depends on that example alone."""

from __future__ import annotations

import pytest
from fixturecases import FIXTURES, read

from autofix.engine import Options, analyse


def _migrate(source: str):
    return analyse(source, Options(migrate="mirrored"))


@pytest.mark.parametrize(
    ("case", "replica", "loop"),
    [
        (
            "custom_loop_step_on_computed_batch",
            "    def train_step_inputs(x, y):\n        return tf.cast(x, tf.float32) * SCALE - 1.0, y\n",
            "        loss = distributed_train_step(x, y)\n",
        ),
        (
            "custom_loop_step_on_augmented_batch",
            "    def train_step_inputs(batch_images, batch_targets):\n        return augment(batch_images), batch_targets\n",
            "        total += float(distributed_train_step(batch_images, batch_targets))\n",
        ),
    ],
)
def test_the_wrapper_takes_the_batch_and_computes_the_steps_arguments_per_replica(case, replica, loop):
    migrated = _migrate(read(FIXTURES / "tfd010" / f"{case}.py")).new_text
    assert migrated is not None
    assert replica in migrated and loop in migrated
    assert "    inputs = strategy.run(train_step_inputs, args=(" in migrated
    assert "strategy.run(train_step, args=inputs)" in migrated
    # Applied twice, nothing changes.
    assert _migrate(migrated).new_text is None


LOOP = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "x_all = np.random.rand(64, 4).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices((x_all, x_all[:, :1])).batch(8)\n"
    "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "optimizer = tf.keras.optimizers.SGD(0.1)\n"
    "{helper}"
    "\n"
    "\n"
    "@tf.function\n"
    "def step(features, labels):\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
    "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
    "    return loss\n"
    "\n"
    "\n"
    "for features, labels in dataset:\n"
    "    print(float(step({argument}, labels)))\n"
)


@pytest.mark.parametrize(
    ("argument", "helper", "why"),
    [
        ("features - tf.reduce_mean(features)", "", "tf.reduce_mean(features) (line 19) reduces over the batch"),
        ("features[:4] * 2", "", "features[:4] (line 19) indexes the batch"),
        ("tf.reshape(features, [-1])", "", "calls tf.reshape, which is not shown to compute each example on its own"),
        ("features + tf.random.normal(tf.shape(features))", "", "draws random numbers: each replica would draw its own"),
        ("center(features)", "\n\ndef center(v):\n    return v - tf.reduce_mean(v, axis=0)\n", "tf.reduce_mean(v, axis=0) (line 11) reduces over the batch"),
        ("features * scale", "scale = np.float32(2)\n", "it reads scale (line 20), which is neither the batch nor a number of the module"),
    ],
)
def test_what_is_not_computed_example_by_example_is_refused_at_its_line(argument, helper, why):
    source = LOOP.format(argument=argument, helper=helper)
    analysis = _migrate(source)
    assert analysis.new_text is None
    reasons = [f.reason or "" for f in analysis.findings]
    assert any(why in r for r in reasons), reasons


@pytest.mark.parametrize(
    "argument",
    ["features / 255.0", "tf.cast(features, tf.float64)", "-features * 2 + 1", "tf.math.log1p(tf.abs(features))"],
)
def test_what_is_computed_example_by_example_is_migrated(argument):
    migrated = _migrate(LOOP.format(argument=argument, helper="")).new_text
    assert migrated is not None
    assert f"        return {argument}, labels\n" in migrated
    assert "strategy.run(step, args=inputs)" in migrated
    assert "print(float(distributed_step(features, labels)))" in migrated


def test_a_step_called_with_different_computations_is_refused():
    source = LOOP.format(argument="features / 2.0", helper="") + "for features, labels in dataset:\n    step(features / 3.0, labels)\n"
    analysis = _migrate(source)
    assert analysis.new_text is None
    assert any("called with different arguments on different lines" in (f.reason or "") for f in analysis.findings)


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("report_step_on_batch_centred", "tf.reduce_mean(x, axis=0) (line 25) reduces over the batch"),
        ("report_step_on_batch_random_flip", "tf.image.random_flip_left_right(x) (line 24) draws random numbers"),
    ],
)
def test_the_report_fixtures_are_refused_with_the_reason(case, why):
    analysis = _migrate(read(FIXTURES / "tfd010" / f"{case}.py"))
    assert analysis.new_text is None
    assert any(why in (f.reason or "") for f in analysis.findings), [f.reason for f in analysis.findings]


@pytest.mark.tf
@pytest.mark.parametrize("case", ["custom_loop_step_on_computed_batch", "custom_loop_step_on_augmented_batch"])
def test_a_step_on_a_computed_batch_is_proven_on_two_replicas(case):
    """The migration computes what the original does (smoke --compare on 2 replicas)."""
    pytest.importorskip("tensorflow")
    from autofix.smoke.compare import ComparePair, compare_many

    original = FIXTURES / "tfd010" / f"{case}.py"
    fixed = FIXTURES / "tfd010" / f"{case}.fixed.py"
    (proven,) = compare_many([ComparePair(str(fixed), str(original))], replicas=2, offline=True)
    assert proven.compare.status == "equivalent", proven.compare.message


@pytest.mark.tf
def test_a_computation_left_out_of_the_replica_is_told_apart(tmp_path):
    """The same migration with the scaling dropped from what each replica computes is not
    equivalent (the comparison sees what the step is fed)."""
    pytest.importorskip("tensorflow")
    from autofix.smoke.compare import ComparePair, compare_many

    original = FIXTURES / "tfd010" / "custom_loop_step_on_computed_batch.py"
    text = read(FIXTURES / "tfd010" / "custom_loop_step_on_computed_batch.fixed.py")
    wrong = tmp_path / "wrong.py"
    wrong.write_text(text.replace("tf.cast(x, tf.float32) * SCALE - 1.0", "tf.cast(x, tf.float32)"))
    assert wrong.read_text() != text
    (told,) = compare_many([ComparePair(str(wrong), str(original))], replicas=2, offline=True)
    assert told.compare.status != "equivalent", told.compare.message


def test_a_step_of_one_argument_whose_result_is_unused_gets_its_input_as_a_tuple_of_one():
    source = (
        LOOP.format(argument="features", helper="")
        .replace("def step(features, labels):", "def step(features):")
        .replace("tf.square(labels - model(", "tf.square(features[:, :1] - model(")
        .replace("    return loss\n", "")
        .replace("for features, labels in dataset:\n    print(float(step(features, labels)))\n", "for features, labels in dataset:\n    step(features * 2.0)\n")
    )
    migrated = _migrate(source).new_text
    assert migrated is not None
    assert "    def step_inputs(features):\n        return (features * 2.0,)\n" in migrated
    assert "    strategy.run(step, args=inputs)\n" in migrated and "    distributed_step(features)\n" in migrated
    assert _migrate(migrated).new_text is None
