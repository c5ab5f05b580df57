"""`autofix migrate` on how a custom loop feeds its step: the batches are followed from the step's
arguments back to the dataset (through a helper that returns it, ``iter`` / ``next``, ``zip``,
``enumerate``, a progress bar, a batch unpacked in the loop body, a dataset made anew in each
epoch), and that dataset is distributed where the loop or the iterator takes it; what cannot be
followed is refused with the reason at its line. The fixture pairs of fixtures/tfd010
(``custom_loop_*``) are proven by training in test_migrate.py.
"""

from __future__ import annotations

from autofix.engine import Options, analyse

MIGRATE = Options(migrate="mirrored")

HEAD = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "x = np.random.rand(64, 4).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n"
    "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "optimizer = tf.keras.optimizers.SGD(0.1)\n"
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
)


def _migrate(loop: str, head: str = HEAD):
    return analyse(head + loop, MIGRATE)


def _reasons(analysis) -> str:
    return "\n".join(f"{f.line}: {f.message} | {f.reason}" for f in analysis.findings)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_a_fresh_iterator_drawn_once_per_step_is_made_of_the_distributed_dataset():
    loop = "for i in range(3):\n    features, labels = next(iter(dataset))\n    step(features, labels)\n"
    migrated = _migrate(loop).new_text
    assert migrated is not None
    assert "dist_dataset = strategy.experimental_distribute_dataset(dataset)\nfor i in range(3):\n" in migrated
    assert "    features, labels = next(iter(dist_dataset))\n" in migrated


def test_an_iterator_also_read_otherwise_is_refused_at_that_line():
    loop = "batches = iter(dataset)\nfor i in range(3):\n    features, labels = next(batches)\n    step(features, labels)\nprint(next(batches, None))\n"
    analysis = _migrate(loop)
    assert analysis.new_text is None
    line = _line(HEAD + loop, "print(next(batches, None))")
    assert f"the iterator batches is also read on line {line}, where it would give distributed batches" in _reasons(analysis)


def test_an_iterator_made_again_when_it_runs_out_is_made_of_the_same_distributed_dataset():
    loop = (
        "batches = iter(dataset)\n"
        "for i in range(3):\n"
        "    try:\n"
        "        features, labels = next(batches)\n"
        "    except StopIteration:\n"
        "        batches = iter(dataset)\n"
        "        features, labels = next(batches)\n"
        "    step(features, labels)\n"
    )
    migrated = _migrate(loop).new_text
    assert migrated is not None
    assert "dist_dataset = strategy.experimental_distribute_dataset(dataset)\nbatches = iter(dist_dataset)\n" in migrated
    assert "        batches = iter(dist_dataset)\n" in migrated


def test_an_iterator_made_again_of_another_dataset_is_refused():
    head = HEAD.replace(
        "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n",
        "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8)\nextra = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8)\n",
    )
    loop = (
        "batches = iter(dataset)\n"
        "for i in range(3):\n"
        "    try:\n"
        "        features, labels = next(batches)\n"
        "    except StopIteration:\n"
        "        batches = iter(extra)\n"
        "        features, labels = next(batches)\n"
        "    step(features, labels)\n"
    )
    analysis = _migrate(loop, head)
    assert analysis.new_text is None
    assert "the iterator batches is made of more than one dataset" in _reasons(analysis)


def test_a_batch_drawn_by_next_and_also_shown_reads_the_global_batch():
    loop = "batches = iter(dataset)\nfor i in range(3):\n    features, labels = next(batches)\n    print(features.shape)\n    step(features, labels)\n"
    migrated = _migrate(loop).new_text
    assert migrated is not None
    assert "    print(strategy.gather(features, axis=0).shape)\n    distributed_step(features, labels)\n" in migrated


def test_a_batch_drawn_by_next_whose_parts_are_not_known_and_also_shown_is_refused_at_that_line():
    """The dataset's items made by map(): strategy.gather of a tuple of parts hands back the
    first replica's share of each, so a part read outside the step cannot be gathered."""
    head = HEAD.replace(
        "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n",
        "dataset = tf.data.Dataset.from_tensor_slices(x).map(lambda row: (row, row[:1])).batch(8).repeat()\n",
    )
    loop = "batches = iter(dataset)\nfor i in range(3):\n    features, labels = next(batches)\n    print(features.shape)\n    step(features, labels)\n"
    analysis = _migrate(loop, head)
    assert analysis.new_text is None
    line = _line(head + loop, "print(features.shape)")
    assert f"the batch is also used on line {line}, where a distributed batch would not do" in _reasons(analysis)


def test_two_datasets_zipped_into_one_step_are_refused():
    head = HEAD.replace(
        "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n",
        "features_ds = tf.data.Dataset.from_tensor_slices(x).batch(8)\nlabels_ds = tf.data.Dataset.from_tensor_slices(x[:, :1]).batch(8)\n",
    )
    analysis = _migrate("for features, labels in zip(features_ds, labels_ds):\n    step(features, labels)\n", head)
    assert analysis.new_text is None
    assert "the data comes from more than one place" in _reasons(analysis)


def test_a_progress_bar_over_a_zipped_range_wraps_the_distributed_dataset_and_keeps_its_total():
    """The shape of tensorflow2-generative-models' notebooks: ``tqdm(zip(range(n), ds), total=n)``."""
    head = "from tqdm.autonotebook import tqdm\n" + HEAD
    loop = "for epoch in range(2):\n    for i, (features, labels) in tqdm(zip(range(4), dataset), total=4):\n        step(features, labels)\n"
    migrated = _migrate(loop, head).new_text
    assert migrated is not None
    assert "dist_dataset = strategy.experimental_distribute_dataset(dataset)\nfor epoch in range(2):\n" in migrated
    assert "    for i, (features, labels) in tqdm(zip(range(4), dist_dataset), total=4):\n" in migrated


def test_a_dataset_made_in_each_epoch_is_distributed_in_that_epoch_and_not_before_it():
    head = HEAD.replace("dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n", "")
    loop = (
        "for epoch in range(2):\n"
        "    for part in range(2):\n"
        "        dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).shuffle(64, seed=epoch).batch(8)\n"
        "        for features, labels in dataset:\n"
        "            step(features, labels)\n"
    )
    migrated = _migrate(loop, head).new_text
    assert migrated is not None
    assert (
        "        dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).shuffle(64, seed=epoch).batch(8 * strategy.num_replicas_in_sync)\n"
        "        dist_dataset = strategy.experimental_distribute_dataset(dataset)\n"
        "        for features, labels in dist_dataset:\n"
    ) in migrated


def test_a_step_fed_by_a_python_generator_is_refused_naming_what_the_loop_iterates():
    head = HEAD.replace(
        "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n",
        "def batches():\n    for i in range(0, 64, 8):\n        yield x[i:i + 8], x[i:i + 8, :1]\n",
    )
    loop = "for features, labels in batches():\n    step(features, labels)\n"
    analysis = _migrate(loop, head)
    assert analysis.new_text is None
    line = _line(head + loop, "for features, labels in batches():")
    assert f"its batches come from batches() (line {line}), which is not a tf.data dataset that can be distributed" in _reasons(analysis)


def test_the_last_batch_read_after_the_loop_reads_the_global_batch():
    """A batch read after the loop (a score on the last batch drawn) is the replicas' shares put
    back together, ``strategy.gather``, as a read in the loop's body is."""
    loop = (
        "for features, labels in dataset.take(4):\n"
        "    step(features, labels)\n"
        "print(float(tf.reduce_mean(tf.square(labels - model(features)))))\n"
    )
    migrated = _migrate(loop).new_text
    assert migrated is not None
    assert "print(float(tf.reduce_mean(tf.square(strategy.gather(labels, axis=0) - model(strategy.gather(features, axis=0))))))\n" in migrated


def test_a_batch_read_after_the_loop_where_another_value_may_reach_it_is_refused():
    loop = (
        "features = x\n"
        "for features, labels in dataset.take(4):\n"
        "    step(features, labels)\n"
        "print(model(features))\n"
    )
    analysis = _migrate(loop)
    assert analysis.new_text is None
    line = _line(HEAD + loop, "print(model(features))")
    assert f"the batch is also used on line {line}, where a distributed batch would not do" in _reasons(analysis)


def test_parts_of_a_batch_of_tuples_given_to_the_step_by_index_are_distributed_with_it():
    loop = "for batch in dataset.take(3):\n    step(batch[0], batch[1])\n"
    migrated = _migrate(loop).new_text
    assert migrated is not None
    assert "for batch in dist_dataset:\n    distributed_step(batch[0], batch[1])\n" in migrated


def test_a_batch_of_one_tensor_indexed_on_its_way_to_the_step_is_refused():
    """A distributed batch of one tensor cannot be indexed (measured: TypeError), and the index
    of a plain one is an example, not a part."""
    head = HEAD.replace(
        "dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8).repeat()\n",
        "dataset = tf.data.Dataset.from_tensor_slices(np.concatenate([x, x[:, :1]], axis=1)).batch(8)\n",
    )
    loop = "for batch in dataset:\n    step(batch[0], batch[1])\n"
    analysis = _migrate(loop, head)
    assert analysis.new_text is None
    line = _line(head + loop, "step(batch[0], batch[1])")
    assert f"the batch is indexed on line {line} on its way to the step" in _reasons(analysis)
