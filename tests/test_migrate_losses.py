"""What `autofix migrate` does to losses that reduce over the batch themselves and to gradient
clipping, statically: the rewrites, the refusals (their message and line), and that `check` on
code already written for N replicas is not changed by them. tests/test_migrate_definition.py
trains the migrations against the definition of a right migration; docs/migrate.md has the
measurements."""

from __future__ import annotations

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

