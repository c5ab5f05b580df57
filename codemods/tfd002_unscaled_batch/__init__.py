"""TFD002 unscaled-batch: a constant batch size not scaled with the number of replicas.

``fit`` splits each global batch across the replicas, so a script written for one GPU starves
each of N GPUs: ``.batch(64)`` gives every replica 64 / N examples. The fix scales the batch
size where it enters, by ``strategy.num_replicas_in_sync``:

- a literal in ``.batch(32)``, ``fit(batch_size=32)`` or a Keras loader's ``batch_size=``
  is multiplied in place (a loader's default of 32 is written out and scaled);
- a constant used for more than the batch (``BATCH_SIZE = 64`` also used in
  ``steps_per_epoch = N // BATCH_SIZE``) keeps its per-replica value under a new name
  (``BATCH_SIZE_PER_REPLICA = 64``) and is redefined as the global batch right after the
  strategy exists, so everything derived from it uses the global value;
- a helper parameter (``def make_dataset(batch_size=32)``) is scaled at the call sites that
  feed training under the strategy; other callers keep the default;
- when the batch is made before the strategy exists, the strategy statement moves up (never
  above device setup, a mixed-precision policy or what it reads).

Not fixed (reported with the reason, or left alone):
- batches already scaled (an expression using ``num_replicas_in_sync``, or a name or
  parameter computed from one, or from the number of devices);
- ``.batch`` on anything that does not reach ``fit``/``evaluate``/
  ``experimental_distribute_dataset`` under a strategy, and scripts with no strategy;
- pipelines only used by ``predict`` (reported, not changed);
- a batch size fixed inside a helper the strategy is not visible in, a constant also used
  before the strategy exists or outside the function that creates it (reported);
- ``fit(x, y)`` without ``batch_size=`` unless ``x`` is clearly an array (Keras' default is 32);
- ``fit`` on arrays validated with ``validation_split=`` or ``validation_data=(x, y)``: a
  validation set smaller than the scaled batch is one batch, which Keras 3 fails on when it
  does not split evenly over the replicas, and its size is not known here (reported).
"""

from __future__ import annotations

from autofix.rule import Example, Rule

from .planner import BatchPlanner


class UnscaledBatch(Rule):
    CODE = "TFD002"
    NAME = "unscaled-batch"
    DESCRIPTION = "Constant .batch(n) / fit(batch_size=n) not scaled by strategy.num_replicas_in_sync"
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(train_ds, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64 * strategy.num_replicas_in_sync)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(train_ds, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "GLOBAL_BATCH_SIZE = 64 * strategy.num_replicas_in_sync\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH_SIZE)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(train_ds, epochs=3)\n"
            ),
        ),
    )

    def check(self) -> None:
        BatchPlanner(self).plan()
