"""Measures, on 2 logical CPUs, what each replica receives when ``model.train_on_batch(x, y)``
is called with a batch of B examples on a model compiled in a MirroredStrategy's scope, and
whether the update is the one device's ``train_on_batch`` of the same batch (``name<TAB>value``;
a failure as ``fails: Error: first line``). Run with ``import keras`` (Keras 3) or, with
TF_USE_LEGACY_KERAS=1 and the argument ``keras2``, with tf_keras. docs/losses.md reports the
numbers; tests/test_loss_facts.py checks them."""

import sys

import numpy as np
import tensorflow as tf

if sys.argv[1:] == ["keras2"]:
    import tf_keras as keras
else:
    import keras

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
rng = np.random.default_rng(0)
seen = []


def record(size, replica):
    seen.append((int(replica), int(size)))
    return size


class Sizes(keras.layers.Layer):
    def compute_output_shape(self, shape):
        return shape

    def call(self, x):
        context = tf.distribute.get_replica_context()
        if context is None or isinstance(x, keras.KerasTensor if hasattr(keras, "KerasTensor") else ()):
            return x
        replica = context.replica_id_in_sync_group
        size = tf.py_function(record, [tf.shape(x)[0], replica], tf.int32)
        with tf.control_dependencies([size]):
            return tf.identity(x)


def build():
    model = keras.Sequential([keras.Input((4,)), Sizes(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


for size in (8, 7, 1):
    x = rng.normal(size=(size, 4)).astype("float32")
    y = rng.normal(size=(size, 1)).astype("float32")
    with strategy.scope():
        model = build()
    reference = build()
    reference.set_weights(model.get_weights())
    seen.clear()
    try:
        loss = model.train_on_batch(x, y)
        shares = sorted(seen)
        print(f"train_on_batch of {size}: each replica's batch\t{[s for _, s in shares]}")
        reference.train_on_batch(x, y)
        same = all(np.allclose(a, b, atol=1e-6) for a, b in zip(model.get_weights(), reference.get_weights()))
        print(f"train_on_batch of {size}: the one device's update\t{same}")
    except Exception as exc:  # noqa: BLE001 - the failure is the measurement
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"train_on_batch of {size}\tfails: {type(exc).__name__}: {first[:160]}")
