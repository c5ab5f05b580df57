"""Migrations checked at run time against the definition of a right migration, computed
directly: on N replicas with per-replica batch B, each replica runs the original's step on its
own B examples and the N gradients are averaged. Each test trains a migrated fixture on 2
logical CPUs (``ReductionToOneDevice``), then, in the same process, builds the original's model
with the same initial weights, computes the original's gradients on each replica's shard of
each global batch, averages them, applies the original's optimizer, and compares the weights.
Nothing here goes through ``autofix smoke``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import announce
from fixturecases import FIXTURES, read

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]

REPLICAS = 2
# What runs the migrated script, then the definition's code (``DEFINITION``) with its globals.
HARNESS = r'''
import os
import sys

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
made = tf.distribute.MirroredStrategy
tf.distribute.MirroredStrategy = lambda *args, **kwargs: made(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras
if ONE_FIT_STEP:
    # fit trains one global batch, the first, in order: its update is the definition's first.
    trained = keras.Model.fit

    def fit(self, *args, **kwargs):
        kwargs.update(epochs=1, steps_per_epoch=1, shuffle=False, verbose=0)
        kwargs.pop("validation_data", None), kwargs.pop("validation_split", None), kwargs.pop("callbacks", None)
        fit.batch_size = kwargs.get("batch_size")
        return trained(self, *args, **kwargs)

    keras.Model.fit = fit
keras.utils.set_random_seed(7)
ns = {"__name__": "__main__", "__file__": SCRIPT}
exec(compile(open(SCRIPT).read(), SCRIPT, "exec"), ns)


def definition(build, loss, optimizer, batches, regularized=False, clip=None):
    """The weights before and after the definition's updates: for each global batch, the
    original's gradient on each replica's shard (at batch B), averaged, applied by
    ``optimizer`` (after ``clip``, when the original's step clips the gradient)."""
    keras.utils.set_random_seed(7)
    model = build()
    initial = [np.array(w) for w in model.get_weights()]
    for x, y in batches:
        grads = []
        for shard in range(REPLICAS):
            rows = slice(shard * len(x) // REPLICAS, (shard + 1) * len(x) // REPLICAS)
            with tf.GradientTape() as tape:
                value = loss(tf.constant(y[rows]), model(tf.constant(x[rows]), training=True))
                if regularized:
                    value = value + tf.add_n(model.losses)
            grads.append(tape.gradient(value, model.trainable_variables))
        averaged = [tf.add_n(list(g)) / REPLICAS for g in zip(*grads)]
        if clip is not None:
            averaged = clip(averaged)
        optimizer.apply_gradients(zip(averaged, model.trainable_variables))
    return initial, model.get_weights()


def global_batches(x, y, size, epochs=1):
    return [(x[i:i + size], y[i:i + size]) for _ in range(epochs) for i in range(0, len(x), size)]


def apart(got, want):
    """How far the weights ``got`` are from the definition's (``want``: its weights before and
    after), relative to the definition's change of the weights."""
    initial, final = (np.concatenate([np.ravel(w) for w in ws]) for ws in want)
    got = np.concatenate([np.ravel(g) for g in got])
    return float(np.linalg.norm(got - final) / np.linalg.norm(final - initial))


def show(key, value):
    print(key, value, sep="\t")


exec(compile(DEFINITION, "definition", "exec"))
'''


def trained(tmp_path, script: str, definition: str, one_fit_step: bool = False, keras: int = 3) -> dict[str, str]:
    """Runs the migrated ``script`` on 2 logical CPUs, then ``definition`` (which sees the
    script's globals as ``ns`` and shows values with ``show(key, value)``); returns what it showed."""
    path = tmp_path / "migrated.py"
    path.write_text(script)
    prelude = f"REPLICAS = {REPLICAS}\nSCRIPT = {str(path)!r}\nONE_FIT_STEP = {one_fit_step}\nDEFINITION = {textwrap.dedent(definition)!r}\n"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if keras == 2:
        env["TF_USE_LEGACY_KERAS"] = "1"
    done = subprocess.run([sys.executable, "-c", prelude + HARNESS], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)


def fixed(name: str) -> str:
    return read(FIXTURES / "tfd010" / f"{name}.fixed.py")


# --- training under if __name__ == "__main__": -------------------------------------------------


def test_a_migrated_main_block_trains_as_the_definition(tmp_path):
    announce("training main_guard.fixed.py on 2 replicas")
    printed = trained(tmp_path, fixed("main_guard"), """
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        want = definition(ns["build"], loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32, epochs=2))
        show("replicas", ns["strategy"].num_replicas_in_sync)
        show("apart", apart(ns["model"].get_weights(), want))
    """)
    assert printed["replicas"] == "2"
    assert float(printed["apart"]) < 1e-4


def test_a_step_defined_at_the_top_runs_per_replica_from_the_main_block(tmp_path):
    printed = trained(tmp_path, fixed("main_guard_step_at_top"), """
        loss = lambda y, p: tf.reduce_mean(tf.square(y - p))
        labels = ns["x"].sum(axis=1, keepdims=True)
        want = definition(ns["make_model"], loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], labels, 16))
        show("apart", apart(ns["model"].get_weights(), want))
    """)
    assert float(printed["apart"]) < 1e-4


def test_fit_in_a_main_block_makes_the_definitions_first_update(tmp_path):
    printed = trained(tmp_path, fixed("main_guard_fit"), """
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        show("batch", keras.Model.fit.batch_size)
        want = definition(lambda: ns["build"](), loss, keras.optimizers.SGD(), global_batches(ns["x"], ns["y"], 32)[:1])
        show("apart", apart(ns["model"].get_weights(), want))
    """, one_fit_step=True)
    assert printed["batch"] == "32"
    assert float(printed["apart"]) < 1e-4


IMPORTER = r'''
import sys
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
from train import build

assert not tf.distribute.has_strategy()
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
print(build().count_params())
'''


@pytest.mark.parametrize("name", ["main_guard", "main_guard_fit"])
def test_importing_a_migrated_main_block_script_makes_no_strategy_and_leaves_devices_alone(tmp_path, name):
    """Another script imports the migrated module for its model builder, then sets up its
    devices: that must work as it did before the migration (a strategy made at import time
    would have started the runtime: "Virtual devices cannot be modified after being
    initialized")."""
    (tmp_path / "train.py").write_text(fixed(name))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", IMPORTER, str(tmp_path)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "195"


# --- a loss divided by the batch constant ---------------------------------------------------------


@pytest.mark.parametrize("name, constant", [("custom_loop_global_batch_size", "GLOBAL_BATCH"), ("custom_loop_global_batch_size_named_global", "GLOBAL_BATCH_SIZE_ALL_REPLICAS")])
def test_compute_average_loss_of_the_batch_constant_is_divided_by_the_global_batch(tmp_path, name, constant):
    """``compute_average_loss(..., global_batch_size=BATCH)`` on one device: on 2 replicas each
    divides its share by the global batch (by BATCH it would be 2 x the update)."""
    printed = trained(tmp_path, fixed(name), """
        per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        loss = lambda y, p: tf.nn.compute_average_loss(per_example(y, p), global_batch_size=16)
        want = definition(lambda: keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]),
                          loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32, epochs=2))
        show("global", ns[CONSTANT])
        show("apart", apart(ns["model"].get_weights(), want))
    """.replace("CONSTANT", repr(constant)))
    assert printed["global"] == "32"
    assert float(printed["apart"]) < 1e-4


def test_a_sum_divided_by_the_batch_constant_is_divided_by_the_global_batch(tmp_path):
    printed = trained(tmp_path, fixed("custom_loop_sum_over_batch_constant"), """
        def loss(y, p):
            return tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, p, from_logits=True)) / 16
        want = definition(lambda: keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]),
                          loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32, epochs=2))
        show("apart", apart(ns["model"].get_weights(), want))
    """)
    assert float(printed["apart"]) < 1e-4


# --- a loss summed over the batch ---------------------------------------------------------------


def test_a_loss_summed_over_the_batch_is_averaged_over_the_replicas(tmp_path):
    """The summed cross-entropy of tf.Variable objects: each replica's sum is divided by the
    replica count (its share of the average of the original's gradients; unscaled it would
    be 2 x). Unshuffled, so that the definition sees the batches in the script's order."""
    script = fixed("raw_variables_summed_loss").replace(".shuffle(512)", "")
    printed = trained(tmp_path, script, """
        class Perceptron:
            # The original's variables, made as the script makes them (the same seed and order).
            def __init__(self):
                self.weights = {"h1": tf.Variable(tf.random.normal([16, 8])), "out": tf.Variable(tf.random.normal([8, 4]))}
                self.biases = {"b1": tf.Variable(tf.random.normal([8])), "out": tf.Variable(tf.random.normal([4]))}
                self.trainable_variables = [*self.weights.values(), *self.biases.values()]

            def __call__(self, x, training=False):
                hidden = tf.nn.sigmoid(tf.add(tf.matmul(x, self.weights["h1"]), self.biases["b1"]))
                return tf.nn.softmax(tf.matmul(hidden, self.weights["out"]) + self.biases["out"])

            def get_weights(self):
                return [v.numpy() for v in self.trainable_variables]

        def build():
            np.random.rand(512, 16), np.random.randint(0, 4, size=(512,))  # (the script's draws before)
            return Perceptron()

        def loss(y, p):
            return tf.reduce_mean(-tf.reduce_sum(tf.one_hot(y, depth=4) * tf.math.log(tf.clip_by_value(p, 1e-9, 1.0))))

        want = definition(build, loss, tf.optimizers.SGD(0.001), global_batches(ns["x_train"], ns["y_train"], 64, epochs=3))
        got = [v.numpy() for v in [*ns["weights"].values(), *ns["biases"].values()]]
        show("apart", apart(got, want))
    """)
    assert float(printed["apart"]) < 1e-4


def test_a_loss_object_summing_over_the_batch_is_averaged_over_the_replicas(tmp_path):
    printed = trained(tmp_path, fixed("custom_loop_summed_loss"), """
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
        want = definition(lambda: keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]),
                          loss, keras.optimizers.SGD(0.01), global_batches(ns["x"], ns["y"], 32, epochs=2))
        show("apart", apart(ns["model"].get_weights(), want))
    """)
    assert float(printed["apart"]) < 1e-4


# --- gradient clipping ----------------------------------------------------------------------------

MLP = "lambda: keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation='relu'), keras.layers.Dense(3)])"


def test_a_global_norm_clip_in_a_custom_step_clips_the_averaged_gradient(tmp_path):
    """The clip (0.05) is active from the first step: clipping each replica's share instead
    made 1.141 x the update (docs/migrate.md)."""
    printed = trained(tmp_path, fixed("custom_loop_clip_global_norm"), f"""
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        clip = lambda grads: tf.clip_by_global_norm(grads, 0.05)[0]
        want = definition({MLP}, loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32, epochs=2), clip=clip)
        show("apart", apart(ns["model"].get_weights(), want))
    """)
    assert float(printed["apart"]) < 1e-4


def test_a_global_norm_clip_in_a_models_train_step_clips_the_averaged_gradient(tmp_path):
    printed = trained(tmp_path, fixed("train_step_clip_global_norm"), f"""
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        clip = lambda grads: tf.clip_by_global_norm(grads, 0.05)[0]
        show("batch", keras.Model.fit.batch_size)

        def build():
            # (As the script builds it: the outer Dense is made first.)
            inputs = keras.Input((8,))
            return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(16, activation="relu")(inputs)))

        want = definition(build, loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32)[:1], clip=clip)
        show("apart", apart(ns["model"].get_weights(), want))
    """, one_fit_step=True)
    assert printed["batch"] == "32"
    assert float(printed["apart"]) < 1e-4


def test_an_optimizers_own_clip_is_left_to_tf_keras_which_clips_the_sum(tmp_path):
    printed = trained(tmp_path, fixed("fit_clipnorm_tf_keras"), f"""
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        want = definition({MLP}, loss, keras.optimizers.SGD(0.1, global_clipnorm=0.05), global_batches(ns["x"], ns["y"], 32)[:1])
        show("apart", apart(ns["model"].get_weights(), want))
    """, one_fit_step=True, keras=2)
    assert float(printed["apart"]) < 1e-4


# --- losses compile is given that reduce over the batch themselves --------------------------------


def test_a_compiled_loss_function_averaging_over_the_batch_is_made_per_example(tmp_path):
    """Returned as it was (a scalar), Keras 3 would train at 2 x the update (docs/migrate.md)."""
    printed = trained(tmp_path, fixed("fit_loss_function_mean"), """
        loss = lambda y, p: tf.reduce_mean(tf.square(y - p))
        build = lambda: keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
        show("batch", keras.Model.fit.batch_size)
        want = definition(build, loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32)[:1])
        show("apart", apart(ns["model"].get_weights(), want))
    """, one_fit_step=True)
    assert printed["batch"] == "32"
    assert float(printed["apart"]) < 1e-4


def test_a_compiled_loss_summing_over_the_batch_is_weighed_by_the_replicas(tmp_path):
    printed = trained(tmp_path, fixed("fit_loss_reduction_sum"), f"""
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
        want = definition({MLP}, loss, keras.optimizers.SGD(0.01), global_batches(ns["x"], ns["y"], 32)[:1])
        show("apart", apart(ns["model"].get_weights(), want))
    """, one_fit_step=True)
    assert float(printed["apart"]) < 1e-4


# --- counts of steps ------------------------------------------------------------------------------


def test_a_schedule_computed_from_the_data_size_follows_the_global_batch(tmp_path):
    """Per example, the rate after 3 epochs is the original's (0.1 halved every epoch): on 2
    replicas an epoch is 8 steps, and so is the decay."""
    printed = trained(tmp_path, fixed("fit_schedule_from_data_size"), """
        optimizer = ns["model"].optimizer
        show("steps", int(optimizer.iterations.numpy()))
        show("rate", float(np.array(optimizer.learning_rate)))
    """)
    assert printed["steps"] == "24"
    assert abs(float(printed["rate"]) - 0.1 * 0.5**3) < 1e-7


def test_a_schedule_counted_in_steps_acts_later_in_the_data_as_the_note_says(tmp_path):
    """What the TFD010 note at the boundaries says: after 3 epochs (48 steps on one device, the
    rate 0.025 there), 2 replicas have taken 24 steps and the rate is 0.05."""
    printed = trained(tmp_path, fixed("fit_step_counts"), """
        optimizer = ns["model"].optimizer
        show("steps", int(optimizer.iterations.numpy()))
        show("rate", float(np.array(optimizer.learning_rate)))
    """)
    assert printed["steps"] == "24"
    assert abs(float(printed["rate"]) - 0.05) < 1e-7


# --- what TFD004 writes in a migration ----------------------------------------------------------


def test_a_migrated_steps_regularization_is_each_replicas_share(tmp_path):
    """The mean loss made each replica's share, and model.losses scaled by
    tf.nn.scale_regularization_loss: the average of the original's updates."""
    printed = trained(tmp_path, fixed("custom_loop_regularization"), """
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def build():
            return keras.Sequential([
                keras.Input((8,)),
                keras.layers.Dense(16, activation="relu", kernel_regularizer=keras.regularizers.l2(0.1)),
                keras.layers.Dense(3),
            ])

        want = definition(build, loss, keras.optimizers.SGD(0.1), global_batches(ns["x"], ns["y"], 32, epochs=2), regularized=True)
        show("apart", apart(ns["model"].get_weights(), want))
    """)
    assert float(printed["apart"]) < 1e-4
