"""`autofix migrate` on custom loops whose update is written inline in the loop body: the step
moved into a function of its own (analysis/migration/inline_steps.py, inline_names.py), then migrated as
any custom step; or, when the body cannot be split safely, refused with the reason, at the
original's line. The fixtures tfd010/inline_loop*.py are migrated and proven by training in
tests/test_migrate.py; these tests cover each rule of the split.
"""

from __future__ import annotations

import json

import pytest

from autofix.engine import Options, analyse, process_notebook

MIGRATE = Options(migrate="mirrored")

HEAD = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "x = np.random.rand(64, 4).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(8)\n"
    "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "optimizer = tf.keras.optimizers.SGD(0.1)\n"
    "\n"
)
TAPE = (
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
)
UPDATE = "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"


def loop(*lines: str, header: str = "for features, labels in dataset:\n", before: str = "", after: str = "") -> str:
    return HEAD + before + header + "".join(lines) + after


def migrated(source: str) -> str:
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is not None, [f.reason for f in analysis.findings]
    again = analyse(analysis.new_text, MIGRATE)
    assert again.new_text is None  # stable
    assert [f for f in analyse(analysis.new_text, Options()).findings if not f.unsafe] == []
    return analysis.new_text


def refused(source: str) -> list[tuple[int, str]]:
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is None
    assert analysis.findings and not any(f.fixable for f in analysis.findings)
    return [(f.line, f.reason or "") for f in analysis.findings]


def said(found: list[tuple[int, str]], text: str, line: int | None = None) -> bool:
    return any(text in why and (line is None or at == line) for at, why in found)


# --- what the step is, takes and hands back ------------------------------------------------------


def test_the_step_is_defined_before_the_loops_and_the_loop_calls_it_with_the_batch():
    source = HEAD + "for epoch in range(2):\n    for features, labels in dataset:\n" + "".join(
        "    " + line for line in (TAPE + UPDATE + "    print(float(loss))\n").splitlines(keepends=True)
    )
    text = migrated(source)
    assert "def train_step(features, labels):\n    with tf.GradientTape() as tape:\n" in text
    assert "    return loss\n" in text
    assert text.index("def train_step(") < text.index("for epoch in range(2):")
    assert "        loss = distributed_train_step(features, labels)\n        print(float(loss))\n" in text


def test_a_value_an_outer_loop_sets_comes_in_as_a_parameter():
    source = HEAD + (
        "for epoch in range(2):\n"
        "    weight = 1.0 / (epoch + 1)\n"
        "    for features, labels in dataset:\n"
        "        with tf.GradientTape() as tape:\n"
        "            loss = tf.reduce_mean(weight * tf.square(labels - model(features, training=True)))\n"
        "        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
    )
    text = migrated(source)
    assert "def train_step(features, labels, weight):\n" in text
    assert "distributed_train_step(features, labels, weight)\n" in text


def test_a_batch_read_by_a_sampler_in_the_body_comes_in_but_is_not_distributed():
    """Arrays drawn by a Python sampler before the step are the batch it takes; the migration
    then stops where TFD003 cannot distribute NumPy arrays, said at the original line."""
    source = (
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "\n"
        "data = np.random.rand(64, 4).astype('float32')\n"
        "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
        "optimizer = tf.keras.optimizers.SGD(0.1)\n"
        "for i in range(10):\n"
        "    index = np.random.randint(0, 64, 8)\n"
        "    features, labels = data[index], data[index].sum(axis=1, keepdims=True)\n"
        "    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
        "        print('batch %d: loss %f' % (i, loss.numpy()))\n"
        "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
    )
    found = refused(source)
    assert said(found, "NumPy array")


def test_the_name_of_the_step_does_not_take_one_the_file_uses():
    source = HEAD + "def train_step():\n    pass\n\n\n" + "for features, labels in dataset:\n" + TAPE + UPDATE
    assert "def train_step_2(features, labels):\n" in migrated(source)


def test_a_step_handing_back_two_losses_assigns_both():
    source = loop(
        "    with tf.GradientTape() as tape:\n"
        "        prediction = model(features, training=True)\n"
        "        error = tf.reduce_mean(tf.square(labels - prediction))\n"
        "        penalty = tf.reduce_mean(tf.abs(prediction))\n"
        "        loss = error + 0.01 * penalty\n",
        UPDATE,
        "    print(float(error), float(penalty))\n",
    )
    text = migrated(source)
    assert "    return error, penalty\n" in text
    assert "    error, penalty = distributed_train_step(features, labels)\n" in text


def test_comments_of_the_step_go_with_it():
    source = loop("    # the forward pass\n" + TAPE, "    # the update\n" + UPDATE)
    text = migrated(source)
    assert "def train_step(features, labels):\n    # the forward pass\n    with tf.GradientTape()" in text
    assert "    # the update\n    optimizer.apply_gradients(" in text


def test_a_notebook_loop_gets_its_step_in_its_own_cell():
    cells = [
        HEAD,
        "for features, labels in dataset:\n" + TAPE + UPDATE + "    print(float(loss))",
    ]
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": text.splitlines(keepends=True), "outputs": [], "execution_count": None} for text in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    result = process_notebook(json.dumps(notebook, indent=1) + "\n", "train.ipynb", MIGRATE)
    sources = ["".join(c["source"]) for c in json.loads(result.new_text)["cells"]]
    assert sources[1].startswith("def train_step(features, labels):\n")
    assert "for features, labels in dist_dataset:\n    loss = distributed_train_step(features, labels)\n" in sources[1]


# --- refused, with the reason ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "before, lines, text, line",
    [
        pytest.param(
            "",
            ("    if float(tf.reduce_sum(labels)) > 0:\n    " + TAPE.replace("\n    ", "\n        ") + "        " + UPDATE.strip() + "\n",),
            "is made under a condition",
            13,
            id="condition",
        ),
        pytest.param("", (TAPE, "    if float(loss) < 0.01:\n        break\n", UPDATE), "holds a break", 13, id="break"),
        pytest.param("", (TAPE, "    try:\n        pass\n    except ValueError:\n        pass\n", UPDATE), "holds a try statement", 12, id="try"),
        pytest.param("", (TAPE, "    print(model.trainable_variables[0].numpy())\n", UPDATE), "the step prints", 12, id="print-reads-the-model"),
        pytest.param(
            "scale = 1.0\n", (TAPE.replace("loss = ", "loss = scale * "), "    scale = scale * 0.5\n", UPDATE), "scale is carried", 12, id="carried"
        ),
        pytest.param(
            "decay = 1.0\n", (TAPE.replace("loss = ", "loss = decay * "), UPDATE, "    decay = 0.9\n"), "set after it in the loop (line 14)", 12, id="set-after"
        ),
    ],
)
def test_a_body_that_cannot_be_split_is_refused_with_the_reason(before, lines, text, line):
    found = refused(loop(*lines, before=before))
    assert said(found, text, line), found


def test_a_name_the_step_sets_that_a_function_reads_is_refused():
    source = HEAD + "def show():\n    print(float(loss))\n\n\n" + "for features, labels in dataset:\n" + TAPE + UPDATE + "    show()\n"
    found = refused(source)
    assert said(found, "loss, which the step sets (line 15), is also read by show() (line 10)")


def test_a_value_set_on_some_paths_only_and_read_after_is_refused():
    source = loop(
        TAPE,
        "    if labels.shape[0] == 8:\n        extra = loss * 2\n    else:\n        extra = loss\n",
        UPDATE,
        after="print(float(extra))\n",
    )
    assert said(refused(source), "extra is set only on some paths of the step")


def test_what_a_migration_of_the_function_refuses_is_said_at_the_original_lines():
    """Split, but the step's loss has a term of unknown reduction: the next pass refuses it, so
    nothing is written and the finding names the original's line of that term."""
    source = (
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "\n"
        "x = np.random.rand(64, 4).astype('float32')\n"
        "dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(8)\n"
        "w = tf.Variable(tf.zeros((4, 1)))\n"
        "optimizer = tf.keras.optimizers.SGD(0.1)\n"
        "for features, labels in dataset:\n"
        "    with tf.GradientTape() as tape:\n"
        "        loss = tf.compat.v1.losses.mean_squared_error(labels, features @ w)\n"
        "    optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))\n"
    )
    found = refused(source)
    assert said(found, "whose reduction over the batch is not known", 10)
    assert said(found, "could not be migrated", 11)


def test_two_loops_with_the_same_names_each_get_their_step_and_their_dataset():
    """Each loop's batches are its own: the second loop's target is bound again before each
    pass, so its batches come from its dataset only (not from the first loop's too)."""
    source = loop(TAPE, UPDATE, "    print(float(loss))\n") + (
        "\n"
        "other = tf.data.Dataset.from_tensor_slices((x, x.mean(axis=1, keepdims=True))).batch(8)\n"
        "for features, labels in other:\n" + TAPE + UPDATE + "    print(float(loss))\n"
    )
    text = migrated(source)
    assert "def train_step(features, labels):" in text and "def train_step_2(features, labels):" in text
    assert "for features, labels in dist_dataset:\n    loss = distributed_train_step(features, labels)\n" in text
    assert "for features, labels in dist_other:\n    loss = distributed_train_step_2(features, labels)\n" in text


def test_a_step_that_sets_a_global_of_its_function_is_refused():
    source = HEAD + (
        "def train():\n"
        "    global loss\n"
        "    for features, labels in dataset:\n"
        "        with tf.GradientTape() as tape:\n"
        "            loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
        "        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
        "\n"
        "\n"
        "train()\n"
    )
    assert said(refused(source), "the step sets loss (line 13), a global or outer name of the function it is in")


def test_a_loop_in_a_try_whose_step_hands_back_a_value_is_refused():
    """A step that failed half-way would leave what it hands back as it was, where the loop's
    own statements had set part of it (read by the handler)."""
    source = HEAD + "try:\n" + "".join("    " + line for line in ("for features, labels in dataset:\n" + TAPE + UPDATE).splitlines(keepends=True)) + (
        "except KeyboardInterrupt:\n    print(float(loss))\n"
    )
    assert said(refused(source), "the loop is inside a try statement (line 9)")


def test_a_step_that_draws_random_numbers_is_refused():
    """A GAN's noise drawn in the loop: per replica each draws its own rows, which the smoke
    comparison can hold equal to the original's draw only in a tf.function step."""
    source = loop(
        "    noise = tf.random.normal([tf.shape(features)[0], 4])\n",
        "    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_mean(tf.square(labels - model(features + noise, training=True)))\n",
        UPDATE,
    )
    assert said(refused(source), "the step draws random numbers (tf.random.normal, line 10)", 10)


def test_a_step_updating_with_keras3_optimizer_apply_is_migrated_as_one_with_apply_gradients():
    """``optimizer.apply(grads, variables)`` (Keras 3) trains the model as apply_gradients does:
    the model and optimizer go into the scope, the batch is scaled and the dataset distributed."""
    source = loop(
        TAPE,
        "    grads = tape.gradient(loss, model.trainable_variables)\n",
        "    optimizer.apply(grads, model.trainable_variables)\n",
    )
    text = migrated(source)
    assert "with strategy.scope():\n    model = tf.keras.Sequential(" in text
    assert ".batch(8 * strategy.num_replicas_in_sync)" in text
    assert "for features, labels in dist_dataset:\n    distributed_train_step(features, labels)\n" in text


def test_a_print_between_the_statements_of_the_step_runs_after_it():
    source = HEAD + (
        "for epoch in range(2):\n"
        "    for features, labels in dataset:\n"
        "        features = features * 2.0\n"
        "        # shown each step\n"
        "        print('epoch', epoch)\n"
        "        with tf.GradientTape() as tape:\n"
        "            loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
        "        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
    )
    text = migrated(source)
    assert "def train_step(features, labels):\n    features = features * 2.0\n    with tf.GradientTape()" in text
    assert "        distributed_train_step(features, labels)\n        # shown each step\n        print('epoch', epoch)\n" in text


def test_a_sum_or_a_count_the_inline_step_sets_and_the_loop_reads_after_it_is_handed_back_summed():
    from fixturecases import FIXTURES, read

    migrated = analyse(read(FIXTURES / "tfd010" / "inline_loop_returns_counts.py"), MIGRATE).new_text
    assert "    return loss, correct, seen\n" in migrated
    assert (
        "    return strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None), strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None), "
        "strategy.reduce(tf.distribute.ReduceOp.SUM, seen, axis=None)\n"
    ) in migrated


def test_what_the_inline_step_sets_and_no_replica_op_combines_is_not_handed_back():
    from fixturecases import FIXTURES, read

    source = read(FIXTURES / "tfd010" / "inline_loop_returns_counts.py").replace("tf.cast(tf.size(y), tf.float32)", "tf.reduce_max(logits)")
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is None
    assert any(
        "seen, which the step sets (line 21), is read after it (line 25): strategy.run can hand back only the loss (summed over "
        "the replicas), a mean over the batch (averaged), a sum or a count over it (summed) or one row per example of it "
        "(gathered), and it is none of them "
        "(tf.reduce_max(logits), line 21: it is a maximum, minimum or product over the batch" in (f.reason or "")
        for f in analysis.findings
    ), [f.reason for f in analysis.findings]
