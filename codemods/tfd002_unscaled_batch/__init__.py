"""TFD002 unscaled-batch: a training batch written for one device, not scaled with the replicas.

``fit`` (and a distributed dataset) splits each global batch across the replicas, so a script
written for one GPU starves each of N GPUs: ``.batch(64)`` gives every replica 64 / N examples.
Only a batch that feeds training (what ``fit`` trains on, or a distributed dataset that reaches
a step run by ``strategy.run`` that applies gradients) under a strategy with more than one
replica is considered, and only when nothing shows it is already global. The fix scales the
batch size where it enters, by ``strategy.num_replicas_in_sync``:

- a literal in ``.batch(32)``, ``fit(batch_size=32)`` on arrays or a Keras loader's
  ``batch_size=`` is multiplied in place (a loader's default of 32 is written out and scaled);
- a constant used for more than the batch (``BATCH_SIZE = 64`` also used in
  ``steps_per_epoch = N // BATCH_SIZE``) keeps its per-replica value under a new name
  (``BATCH_SIZE_PER_REPLICA = 64``) and is redefined as the global batch right after the
  strategy exists, so everything derived from it uses the global value;
- a constant the file itself multiplies into a global batch (``GLOBAL = BATCH *
  strategy.num_replicas_in_sync``) is replaced, at the batch, by that global name;
- a helper parameter (``def make_dataset(batch_size=32)``) is scaled at the call sites that
  feed training under the strategy; other callers keep the default;
- when the batch is made before the strategy exists, the strategy statement moves up (never
  above device setup, a mixed-precision policy or what it reads).

Not findings (already global, or not a training batch):
- an expression involving the replica or device count (``num_replicas_in_sync``, a device
  list's length, ``per_worker * num_workers``), or a name computed from one;
- a name or flag saying so (``GLOBAL_BATCH``, ``total_batch_size``, flag help "global batch"),
  a value divided by the replica count or given as ``global_batch_size=``, a file whose
  comments say its batch is split across the replicas;
- TPU code (global batches by convention), a strategy made in another module, one-replica
  strategies, two strategies for one block of data;
- validation, evaluation and prediction batches; ``fit(batch_size=...)`` on a dataset or
  generator (it has no effect); a model built for one batch size (``Input(batch_size=32)``);
  an in-batch objective (retrieval, contrastive losses), where the batch is what is trained.

Not fixed (reported with the reason):
- a batch size fixed inside a helper the strategy is not visible in, a constant also used
  before the strategy exists or outside the function that creates it;
- ``fit`` on arrays validated with ``validation_split=`` or ``validation_data=(x, y)``: a
  validation set smaller than the scaled batch is one batch, which Keras 3 fails on when it
  does not split evenly over the replicas, and its size is not known here.
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
