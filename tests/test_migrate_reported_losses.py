"""What a migrated Keras 3 ``train_step`` reports of ``self.compute_loss``: Keras 3 divides that
loss by the replica count inside each replica, so the tracker it is given and the logs it is
returned in get it times the replica count (the gradient is left alone). Proven by training in
tests/test_migrate.py (train_step_compute_loss, train_step_clip_global_norm)."""

from __future__ import annotations

import libcst as cst
import pytest

from autofix.engine import Options, analyse

MIGRATE = Options(migrate="mirrored")
SHARE = " * tf.distribute.get_strategy().num_replicas_in_sync"


def script(step_body: str, keras_import: str = "import keras") -> str:
    return (
        "import numpy as np\n"
        "import tensorflow as tf\n"
        f"{keras_import}\n"
        "\n"
        "\n"
        "class Model(keras.Model):\n"
        "    def train_step(self, data):\n"
        "        x, y = data\n"
        f"{step_body}"
        "\n"
        "\n"
        "x = np.random.rand(64, 4).astype('float32')\n"
        "y = np.random.rand(64, 1).astype('float32')\n"
        "inputs = keras.Input((4,))\n"
        "model = Model(inputs, keras.layers.Dense(1)(inputs))\n"
        "model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(x, y, batch_size=16)\n"
    )


STEP = (
    "        with tf.GradientTape() as tape:\n"
    "            loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))\n"
    "        grads = tape.gradient(loss, self.trainable_variables)\n"
    "        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))\n"
    "        self.tracker.update_state(loss)\n"
    "        return {'loss': loss, 'seen': self.tracker.result()}\n"
)


def test_the_tracker_and_the_logs_get_the_loss_not_each_replicas_share():
    migrated = analyse(script(STEP), MIGRATE).new_text
    assert f"self.tracker.update_state(loss{SHARE})" in migrated
    assert f"return {{'loss': loss{SHARE}, 'seen': self.tracker.result()}}" in migrated
    # The gradient is Keras's: the shares add up to the loss.
    assert "grads = tape.gradient(loss, self.trainable_variables)" in migrated
    cst.parse_module(migrated)


@pytest.mark.parametrize(
    "body",
    [
        # rebound in the step: what it holds at the report is not followed
        STEP.replace("        self.tracker.update_state(loss)\n", "        loss = loss + 0.0\n        self.tracker.update_state(loss)\n"),
        # a value the step computed itself is not Keras's share
        STEP.replace("self.compute_loss(x=x, y=y, y_pred=self(x, training=True))", "tf.reduce_mean(tf.square(self(x, training=True) - y))"),
    ],
    ids=["rebound", "own_mean"],
)
def test_what_is_not_certainly_keras_share_is_left_as_it_is(body):
    migrated = analyse(script(body), MIGRATE).new_text
    assert SHARE not in migrated


def test_keras_2_is_left_as_it_is():
    """tf_keras's compute_loss is not divided inside the replica as Keras 3's is."""
    migrated = analyse(script(STEP, "import tf_keras as keras"), MIGRATE).new_text
    assert migrated is None or SHARE not in migrated
