"""TFD002 unscaled-batch: a training batch written for one device, not scaled with the replicas.

``fit`` (and a distributed dataset) splits each global batch across the replicas, so a script
written for one GPU starves each of N GPUs: ``.batch(64)`` gives every replica 64 / N examples.
Only a batch that feeds training (what ``fit`` trains on, or a distributed dataset that reaches
a step run by ``strategy.run`` that applies gradients) under a strategy with more than one
replica is considered, and only when nothing shows it is already global. A batch handed to
``train_on_batch`` counts only on tf_keras, which splits it over the replicas as ``fit`` does;
Keras 3 hands the whole of it to every replica (measured, docs/losses.md: the update is the one
device's of that batch), so there it is no finding.

A constant batch is fixed by default only where the file says it is one replica's: a name
(``BATCH_SIZE_PER_REPLICA``, ``per_gpu_batch``, through helper parameters and their callers), a
comment (``# per GPU``; for a constant of another module of the project, its name or comment
there), the file's own code multiplying it by the replica count elsewhere
(``GLOBAL = BATCH * strategy.num_replicas_in_sync``), or ``autofix migrate`` (the file trained on
one device). Where nothing says so (a bare ``.batch(64)``), the batch may be the global batch its
author chose (real code does both, about as often on the real-world corpus): it is shown as a
suggestion with that reason (it does not fail ``check``), left as it is, and scaled only with
``--unsafe-fixes``; a comment (``# global batch``) or a name saying which it is
settles it. The fix makes the
batch global where it enters, by ``strategy.num_replicas_in_sync``, and accounts for every
other read of the same value (however it is bound: plain, tuple or augmented assignments,
``:=``, loop targets, ``global``, imports, attributes such as ``args.batch_size``, dict keys):

- a literal in ``.batch(32)``, ``fit(batch_size=32)`` on arrays or a Keras loader's
  ``batch_size=`` is multiplied in place (a loader's default of 32 is written out and scaled);
  so is a value whose other reads may keep the per-replica size (a log, evaluation data, the
  data of a model trained without the strategy);
- a value something is computed from (``steps_per_epoch = N // BATCH_SIZE``, evaluation data
  under the same strategy) gets its global batch defined once, right after the strategy exists,
  and those reads use it. A public module-level name (another module may ``from train import
  BATCH_SIZE``) keeps its name and value, and the global batch is a new name
  (``GLOBAL_BATCH_SIZE = BATCH_SIZE * strategy.num_replicas_in_sync``); any other name becomes
  the global batch, its per-replica value kept under a new name (``BATCH_SIZE_PER_REPLICA``).
  A log outside the reach of the new name keeps printing the per-replica value the name still
  holds. A value read from an attribute or a key (``args.batch_size``, a command-line flag as
  often global as not) is only scaled where it is used, when nothing is computed from it. A
  number written in another module of the project and read as its attribute
  (``config.BATCH_SIZE``, an integer bound once at the top of ``config.py``, with nothing
  there saying it is global) is a per-replica number like one imported by name: scaled where
  this file uses it, the finding naming where it is written; ``config.py`` (which other modules
  may read) is left as it is. A module's attribute this file cannot follow into the project
  (``FLAGS.batch_size``) is chosen at run time: no finding, unless the code says the value is
  one replica's (a comment at its use, ``# per-replica batch size``; the help of the flag it is
  read from, ``help="batch size per GPU"``; the docstring entry of the parameter it comes
  through, ``batch_size: ... (per replica)``): then whoever chooses it chooses each replica's
  batch, a finding fixed as a value read from an attribute is;
- a value the file itself multiplies into its global batch (``GLOBAL = BATCH *
  strategy.num_replicas_in_sync``, or such a product used for the loss or the learning rate) is
  replaced, at the batch, by that global name (or scaled there), and so is what is computed
  from it (``steps = N // BATCH``) where that name can be read; its other reads keep the
  per-replica value the file gave it. This holds under a TPU strategy and whatever names,
  flags or comments say: the loss is N times too small otherwise;
- a helper parameter (``def make_dataset(batch_size=32)``) is scaled at the call sites that
  feed training under the strategy; other callers keep the default; a number a local data
  helper batches with (``def make_dataset(): ... .batch(32)``) becomes such a parameter, the
  number its default;
- a read by an ``assert`` keeps the per-replica value (the assert passes or fails as on one
  device);
- when the batch is made before the strategy exists, the strategy statement moves up (never
  above device setup, a mixed-precision policy or what it reads).

Not findings (already global, or not a training batch):
- an expression involving the replica or device count (``num_replicas_in_sync``, a device
  list's length, ``per_worker * num_workers``), or a name computed from one (also multiplied in
  place, ``BATCH *= n_gpus``, or returned by a local function), or an attribute or key set from
  one before the batch reads it (``CFG["batch"] *= strategy.num_replicas_in_sync``);
- a name or flag saying so (``GLOBAL_BATCH``, ``total_batch_size``, flag help "global batch"),
  a value divided by the replica count or checked to divide evenly by it (``assert BATCH %
  strategy.num_replicas_in_sync == 0``), given as ``global_batch_size=``, or dividing a loss in
  the step run on every replica, a file whose comments say its batch is split across the
  replicas, a comment on the value saying it is the batch of all devices (``# double the batch
  for the two GPUs``, ``# 64 per GPU x 2``, ``# total``/``# effective batch``, ``# across
  replicas``, ``#Double the batch size``; "per GPU" alone says the opposite: :mod:`.comments`)
  (unless its code says otherwise, above); a step count made from the batch (``N // BATCH``)
  is no sign, but the steps of an epoch written out as numbers for it (``50000/391``: the
  training examples over the steps an epoch took at 128) count the epoch in steps of the
  whole batch;
- a batch that a model built by the same code and kept on one device on purpose is fit at
  too (the same number or name, or the same dataset): the file compares one device with
  several at that batch (a course's ``model_normal`` against ``model_distributed``), a
  global batch (:mod:`autofix.analysis.training.comparisons`);
- Keras's default batch, ``fit(x, y)`` with no ``batch_size``: under a strategy the default 32
  is the global batch, which nothing the author wrote asks to scale (``autofix migrate``, which
  converts one-device code, still scales it so each replica keeps 32);
- TPU code (global batches by convention), a strategy made in another module, one-replica
  strategies, two strategies for one block of data;
- validation, evaluation and prediction batches; ``fit(batch_size=...)`` on a dataset or
  generator (it has no effect); a model built for one batch size (``Input(batch_size=32)``);
  an in-batch objective (retrieval, contrastive losses), where the batch is what is trained.

Not fixed (reported with the reason, each line number the line of what it names):
- under ``MultiWorkerMirroredStrategy``, a batch sized only by this machine's device list
  (``64 * len(tf.config.list_physical_devices("GPU"))``): it is one worker's batch, split over
  every worker's replicas; scaling it needs the number of workers (under ``MirroredStrategy``
  the same batch is global: no finding);
- a batch size fixed inside a helper the strategy is not visible in, when the helper cannot
  take it as a parameter (a method, a decorated function, called before the strategy exists
  or with ``**kwargs``, or returning the data in a way not followed);
- a value also read where its global batch cannot be named (in another function than the
  one that makes the strategy, before the strategy can exist), unless that read only shows it,
  evaluates with it or trains another model with it;
- a batch fed to a custom step that divides its loss by a constant global batch
  (``compute_average_loss(..., global_batch_size=128)``): scaled, the batch would grow with the
  replicas and the divisor would not;
- a batch fit beside a model built by the same code without the strategy that is never fit
  here: the comparison is meant, but at which batch is not shown;
- a value also read inside the step run on every replica (where it may mean either batch), or
  used both for the data of a model trained without the strategy and for something computed;
- a value set where a global batch cannot be defined once after it (a loop target, ``:=``, in
  several blocks), or a per-replica value the file multiplies into its global batch that is
  also used for something computed where no global name can be read (the product is written
  inline, or made later): which batch that means is for the author to say;
- ``fit`` on arrays validated with ``validation_split=`` or ``validation_data=(x, y)``: a
  validation set smaller than the scaled batch is one batch, which Keras 3 fails on when it
  does not split evenly over the replicas; fixed where the set's size is known and it holds a
  global batch, or splits evenly, on every replica count up to 16, or where an expression can
  read its size again at run time (``validation_data=(x_val, y_val)``, ``validation_data=val``
  bound to such tuples, ``validation_split=s`` of one array ``x``), which then gets a batch of
  its own, ``min(<global batch>, <its size> // N * N)``, the size ``len(x_val)``,
  ``len(val[0])`` or ``len(x) - int(len(x) * (1 - s))`` (:mod:`.first_batches`); not where the
  inputs are a list of arrays, or made or split by a call in the ``fit`` call;
- ``fit`` on training arrays the file shows to hold fewer examples than the scaled batch
  (what ``validation_split=`` leaves of them): every epoch is that one batch, and 2, 4 or 8
  replicas that do not divide it fail there (19 examples at 32 per replica): reported, not
  scaled; a set that is uneven only on other counts is scaled.
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
                "BATCH_PER_REPLICA = 64\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH_PER_REPLICA)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(train_ds, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "BATCH_PER_REPLICA = 64\n"
                "train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH_PER_REPLICA * strategy.num_replicas_in_sync)\n"
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
