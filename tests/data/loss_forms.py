"""Measures, on 2 logical CPUs, what each way of writing a custom step's loss gives under
MirroredStrategy: the gradient as a multiple of the single-device gradient of the global
batch's mean (printed as ``form<TAB>ratio``, or ``form<TAB>fails: Error``), then what each
replica is fed, and what a Python counter in a tf.function counts. Run with ``import keras``
(Keras 3) or, with TF_USE_LEGACY_KERAS=1 and the argument ``keras2``, with tf_keras.
docs/losses.md reports the numbers; tests/test_loss_facts.py checks them."""

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
N = strategy.num_replicas_in_sync
B, T, C, V = 8, 5, 3, 7
rng = np.random.default_rng(0)
X = rng.normal(size=(B, T, 4)).astype("float32")
Y = rng.integers(0, C, size=(B, T)).astype("int32")


class MeanCall(keras.losses.Loss):
    def __call__(self, y_true, y_pred, sample_weight=None):
        return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True))


class ScalarCall(keras.losses.Loss):
    def call(self, y_true, y_pred):
        return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True))


class PerExampleCall(keras.losses.Loss):
    def call(self, y_true, y_pred):
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)


def dense():
    return keras.Sequential([keras.Input((T, 4)), keras.layers.Dense(C, kernel_regularizer=keras.regularizers.l2(0.1))])


with strategy.scope():
    model = dense()
    default = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    none = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    mean_call, scalar_call, per_example_call = MeanCall(), ScalarCall(), PerExampleCall()
reference = dense()
reference.set_weights(model.get_weights())
reference_none = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def helper(y, p):
    return default(y, p)


FORMS = {
    "reduce_mean": lambda y, p: tf.reduce_mean(none(y, p)),
    "default": lambda y, p: default(y, p),
    "default in a helper": lambda y, p: helper(y, p),
    "default / replicas": lambda y, p: default(y, p) / N,
    "compute_average_loss of (batch, T)": lambda y, p: tf.nn.compute_average_loss(none(y, p)),
    "compute_average_loss(global_batch_size=B * T)": lambda y, p: tf.nn.compute_average_loss(none(y, p), global_batch_size=B * T),
    "compute_average_loss(global_batch_size=B * T // replicas)": lambda y, p: tf.nn.compute_average_loss(none(y, p), global_batch_size=B * T // N),
    "reduce_mean / replicas": lambda y, p: tf.reduce_mean(none(y, p)) / N,
    "reduce_mean / replica context": lambda y, p: tf.reduce_mean(none(y, p)) / tf.distribute.get_replica_context().num_replicas_in_sync,
    "Loss subclass __call__ returning a mean": lambda y, p: mean_call(y, p),
    "Loss subclass call returning a mean": lambda y, p: scalar_call(y, p),
    "Loss subclass call per example": lambda y, p: per_example_call(y, p),
    "grad_pass_through(/ replicas)": lambda y, p: tf.grad_pass_through(lambda v: v / N)(tf.reduce_mean(none(y, p))),
    "add_n(model.losses)": lambda y, p: tf.add_n(model.losses),
    "scale_regularization_loss(add_n(model.losses))": lambda y, p: tf.nn.scale_regularization_loss(tf.add_n(model.losses)),
}


def single_device(form):
    with tf.GradientTape() as tape:
        p = reference(X, training=True)
        loss = tf.add_n(reference.losses) if "model.losses" in form else tf.reduce_mean(reference_none(Y, p))
    return tape.gradient(loss, reference.trainable_variables)[0]


batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((X, Y)).batch(B))))
for form, fn in FORMS.items():
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = fn(y, model(x, training=True))
        gradient = tape.gradient(loss, model.trainable_variables)[0]
        return tf.distribute.get_replica_context().all_reduce("SUM", gradient)

    @tf.function
    def run(x, y):
        return strategy.run(step, args=(x, y))

    try:
        got = strategy.experimental_local_results(run(*batch))[0]
        want = single_device(form)
        print(f"{form}\t{float(tf.reduce_sum(got * want) / tf.reduce_sum(want * want)):.3f}")
    except Exception as exc:  # noqa: BLE001 - the failure is the measurement
        print(f"{form}\tfails: {type(exc).__name__}")

# A per-token loss whose predictions carry a mask: the default reduction averages over the
# unmasked tokens only.
tokens = rng.integers(1, V, size=(B, 6)).astype("int32")
tokens[:, 4:] = 0
tags = rng.integers(0, V, size=(B, 6)).astype("int32")
with strategy.scope():
    tagger = keras.Sequential([keras.Input((6,)), keras.layers.Embedding(V, 4, mask_zero=True), keras.layers.Dense(V)])
masked = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((tokens, tags)).batch(B))))


def summed(fn):
    @tf.function
    def run(x, y):
        return strategy.reduce("SUM", strategy.run(lambda a, b: fn(b, tagger(a)), args=(x, y)), axis=None)

    return float(run(*masked))


try:
    print(f"masked default\t{summed(lambda y, p: default(y, p)):.4f}")
except Exception as exc:  # noqa: BLE001 - Keras 2 rejects the default reduction here
    print(f"masked default\tfails: {type(exc).__name__}")
print(f"masked reduce_mean(none) / replicas\t{summed(lambda y, p: tf.reduce_mean(none(y, p)) / N):.4f}")

# What each replica is fed.
plain = tf.data.Dataset.from_tensor_slices((X, Y)).batch(B)


@tf.function
def sizes(x, y):
    return strategy.run(lambda a, b: tf.shape(a)[0], args=(x, y))


for name, (x, y) in (("plain batch", next(iter(plain))), ("numpy arrays", (X, Y)), ("distributed batch", batch)):
    print(f"fed {name}\t{[int(v) for v in strategy.experimental_local_results(sizes(x, y))]}")

# A Python counter in a tf.function counts traces, not calls.
counter = {"calls": 0}


@tf.function
def counted(x):
    counter["calls"] += 1
    return x + 1


for i in range(5):
    counted(tf.constant(float(i)))
print(f"python counter after 5 calls\t{counter['calls']}")
