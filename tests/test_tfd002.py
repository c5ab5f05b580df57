"""TFD002 unscaled-batch, driven by the fixture pairs in fixtures/tfd002."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params

TFD002 = Options(select=("TFD002",))


@pytest.mark.parametrize("case", params("tfd002", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, TFD002)


@pytest.mark.parametrize("case", params("tfd002", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, TFD002)


@pytest.mark.parametrize("case", params("tfd002", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, TFD002)


HEADER = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "x = np.ones((64, 4), 'float32')\n"
)
MODEL = (
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
)


@pytest.mark.parametrize(
    "batch, expected",
    [
        ("32", "32 * strategy.num_replicas_in_sync"),
        ("16 + 16", "(16 + 16) * strategy.num_replicas_in_sync"),
        ("2 ** 5", "2 ** 5 * strategy.num_replicas_in_sync"),
        ("size // 2", "(size // 2) * strategy.num_replicas_in_sync"),
        ("batch_size=32", "batch_size=32 * strategy.num_replicas_in_sync"),
    ],
)
def test_scaling_keeps_precedence(batch, expected):
    source = HEADER + "size = 64\n" + f"ds = tf.data.Dataset.from_tensor_slices((x, x)).batch({batch})\n" + MODEL + "model.fit(ds)\n"
    new = analyse(source, TFD002).new_text
    assert f".batch({expected})" in new


STEP = (
    "optimizer = model.optimizer\n"
    "def step_fn(batch):\n"
    "    features, labels = batch\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(tf.square(model(features) - labels), axis=1))\n"
    "    grads = tape.gradient(loss, model.trainable_variables)\n"
    "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
)


@pytest.mark.parametrize(
    "loop",
    [
        "for batch in dist:\n    strategy.run(step_fn, args=(batch,))\n",
        "it = iter(dist)\nfor _ in range(3):\n    strategy.run(step_fn, args=(next(it),))\n",
        "@tf.function\ndef train(inputs):\n    strategy.run(step_fn, args=(inputs,))\nfor batch in dist:\n    train(batch)\n",
    ],
)
def test_a_distributed_dataset_is_followed_into_the_training_step(loop):
    source = (
        HEADER
        + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\n"
        + "ds = ds.cache().prefetch(2)\n"
        + "dist = strategy.experimental_distribute_dataset(ds)\n"
        + MODEL
        + STEP
        + loop
    )
    analysis = analyse(source, TFD002)
    assert ".batch(8 * strategy.num_replicas_in_sync)" in analysis.new_text


@pytest.mark.parametrize(
    "use",
    [
        "",  # distributed, then never used
        "def eval_fn(batch):\n    return model(batch[0])\nfor batch in dist:\n    strategy.run(eval_fn, args=(batch,))\n",
    ],
)
def test_a_distributed_dataset_that_trains_nothing_is_not_a_finding(use):
    source = (
        HEADER
        + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\n"
        + "dist = strategy.experimental_distribute_dataset(ds)\n"
        + MODEL
        + use
    )
    assert analyse(source, TFD002).findings == []


def test_unused_or_unknown_destinations_are_not_claimed():
    source = HEADER + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\nsave_somewhere(ds)\n"
    assert analyse(source, TFD002).findings == []


def test_collision_free_names():
    source = (
        HEADER.replace("strategy = ", "BATCH_SIZE_PER_REPLICA = 'taken'\nstrategy = ")
        + "BATCH_SIZE = 16\n"
        + "ds = tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch(BATCH_SIZE)\n"
        + MODEL
        + "model.fit(ds, steps_per_epoch=64 // BATCH_SIZE)\n"
    )
    new = analyse(source, TFD002).new_text
    assert "BATCH_SIZE_PER_REPLICA_2 = 16\n" in new
    assert "BATCH_SIZE = BATCH_SIZE_PER_REPLICA_2 * strategy.num_replicas_in_sync\n" in new
    assert "BATCH_SIZE_PER_REPLICA = 'taken'" in new


@pytest.mark.parametrize("keyword", ["validation_split=0.1", "validation_data=(x, x)", "validation_data=[x, x]"])
def test_array_validation_is_reported_not_scaled(keyword):
    """A validation set of unknown size may be a single, uneven batch once the batch is
    scaled (Keras 3 then fails): report with the reason, change nothing."""
    source = HEADER + MODEL + f"model.fit(x, x, batch_size=32, {keyword})\n"
    analysis = analyse(source, TFD002)
    (finding,) = analysis.findings
    assert not finding.fixable and analysis.new_text is None
    assert "does not split evenly over the replicas" in finding.reason
    assert keyword.split("=")[0] + "=" in finding.reason


def test_validation_evaluation_and_prediction_batches_are_not_training_batches():
    source = (
        HEADER
        + "val = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\n"
        + "test = tf.data.Dataset.from_tensor_slices((x, x)).batch(16)\n"
        + MODEL
        + "model.fit(x, x, batch_size=32, validation_data=val)\n"
        + "model.evaluate(test)\n"
        + "model.evaluate(x, x, batch_size=64)\n"
        + "model.predict(x, batch_size=64)\n"
    )
    analysis = analyse(source, TFD002)
    assert [f.line for f in analysis.findings] == [10]
    assert "batch_size=32 * strategy.num_replicas_in_sync" in analysis.new_text
    assert ".batch(8)" in analysis.new_text and ".batch(16)" in analysis.new_text

@pytest.mark.parametrize(
    "data",
    [
        # A fragment: the dataset comes from a name nothing binds.
        "ds = ds.batch(8).prefetch(2)\n" + MODEL + "model.fit(ds)\n",
        # Fewer examples than the batch: one batch, whatever its size.
        "few = np.random.rand(4, 4)\n" + MODEL + "model.fit(few, few)\n",
    ],
)
def test_batches_that_change_nothing_or_come_from_nowhere_are_left_alone(data):
    assert analyse(HEADER + data, TFD002).findings == []


def test_a_shape_first_maker_is_not_confused_with_a_range():
    # randint's first argument is a bound, not the number of rows: 64 examples here.
    source = HEADER + "labels = np.random.randint(0, 4, size=(64,))\n" + MODEL + "model.fit(x, labels)\n"
    assert [f.line for f in analyse(source, TFD002).findings] == [9]


def test_an_imported_helper_given_the_number_of_devices_may_split_the_batch_itself():
    source = (
        "import tensorflow as tf\n"
        "from pipeline import get_data\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "n = len(tf.config.list_logical_devices('GPU'))\n"
        "train = get_data(batch_size=512, num_devices=n)\n"
        + MODEL
        + "model.fit(train)\n"
    )
    assert analyse(source, TFD002).findings == []
    assert analyse(source.replace(", num_devices=n", ""), TFD002).findings


def test_an_in_batch_objective_keeps_its_batch():
    """Retrieval with in-batch negatives: the batch is what is trained, not only how fast."""
    source = (
        "import tensorflow as tf\n"
        "import tensorflow_recommenders as tfrs\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "class Model(tf.keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.task = tfrs.tasks.Retrieval()\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([512, 4]), tf.zeros([512]))).batch(256)\n"
        "with strategy.scope():\n"
        "    model = Model()\n"
        "    model.compile(optimizer=tf.keras.optimizers.Adagrad(0.1))\n"
        "model.fit(ds, epochs=1)\n"
    )
    assert analyse(source, TFD002).findings == []
    assert analyse(source.replace("tfrs.tasks.Retrieval()", "None"), TFD002).findings
