"""Measures, on 2 logical CPUs, what a per-replica scalar mean gives when it is added to every
example of a per-example loss that is then averaged over the global batch, against the same
loss computed on one device over the whole batch (the gradient as a multiple of the
single-device gradient: ``form<TAB>ratio``). Each form is measured with the batch split evenly
(8 examples: 4 and 4) and unevenly (7: 4 and 3). Then what ``tf.clip_by_global_norm`` does to a
loss divided by the replica count, against one device. Run with ``import keras`` (Keras 3) or,
with TF_USE_LEGACY_KERAS=1 and the argument ``keras2``, with tf_keras. docs/losses.md reports
the numbers; tests/test_loss_facts.py checks them."""

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
GB = 8
rng = np.random.default_rng(0)
X = rng.normal(size=(GB, 4)).astype("float32")
Y = rng.normal(size=(GB,)).astype("float32")


def dense():
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])


with strategy.scope():
    model = dense()
reference = dense()
reference.set_weights(model.get_weights())


def per_example(y, p):
    return tf.square(y - p[:, 0])


def activity(model, x):
    # A regularizer computed on the replica's batch: the mean of the hidden activations squared.
    return tf.reduce_mean(tf.square(model.layers[0](x)))


FORMS = {
    # The mean added to every example, then averaged over the global batch.
    "compute_average_loss(l + mean)": lambda m, x, y, p: tf.nn.compute_average_loss(per_example(y, p) + 0.1 * activity(m, x), global_batch_size=GB),
    "(l + mean) / GB, not reduced": lambda m, x, y, p: (per_example(y, p) + 0.1 * activity(m, x)) / GB,
    "reduce_sum(l + mean) / GB": lambda m, x, y, p: tf.reduce_sum(per_example(y, p) + 0.1 * activity(m, x)) / GB,
    # The mean alone, broadcast the same way, and added once per replica.
    "compute_average_loss(0 * l + mean)": lambda m, x, y, p: tf.nn.compute_average_loss(0.0 * per_example(y, p) + activity(m, x), global_batch_size=GB),
    "mean added once per replica": lambda m, x, y, p: activity(m, x),
    "mean / replicas added once per replica": lambda m, x, y, p: activity(m, x) / N,
}


def gradient(m, form, x, y):
    with tf.GradientTape() as tape:
        loss = FORMS[form](m, x, y, m(x, training=True))
    return [tf.zeros_like(v) if g is None else g for g, v in zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables)]


def ratio(got, want):
    got = tf.concat([tf.reshape(g, [-1]) for g in got], 0)
    want = tf.concat([tf.reshape(g, [-1]) for g in want], 0)
    return float(tf.reduce_sum(got * want) / tf.reduce_sum(want * want))


for size in (GB, GB - 1):
    data = tf.data.Dataset.from_tensor_slices((X[:size], Y[:size])).batch(size)
    batch = next(iter(strategy.experimental_distribute_dataset(data)))
    for form in FORMS:
        def step(x, y, form=form):
            grads = gradient(model, form, x, y)
            return tf.distribute.get_replica_context().all_reduce("SUM", grads)

        @tf.function
        def run(x, y, step=step):
            return strategy.run(step, args=(x, y))

        got = strategy.experimental_local_results(run(*batch))[0]
        # (The single-device loss of the per-replica forms is the mean of the whole batch.)
        one = form.replace("mean / replicas added once per replica", "mean added once per replica")
        want = gradient(reference, one, X[:size], Y[:size])
        print(f"{form}, batch {size}\t{ratio(got, want):.3f}")


# Clipping by global norm in the step: the loss divided by the replica count, then each
# replica's gradient clipped to 1.0 before the replicas' gradients are summed, against one
# device clipping the gradient of the global mean to 1.0 (the scale of the gradients is made
# large enough that the clip always acts).
def clipped(m, x, y, divisor, clip, scale=100.0):
    with tf.GradientTape() as tape:
        loss = scale * tf.reduce_mean(per_example(y, m(x, training=True))) / divisor
    grads, _ = tf.clip_by_global_norm(tape.gradient(loss, m.trainable_variables), clip)
    return grads


data = tf.data.Dataset.from_tensor_slices((X, Y)).batch(GB)
batch = next(iter(strategy.experimental_distribute_dataset(data)))


def summed(divisor, clip):
    def step(x, y):
        return tf.distribute.get_replica_context().all_reduce("SUM", clipped(model, x, y, divisor, clip))

    @tf.function
    def run(x, y):
        return strategy.run(step, args=(x, y))

    return strategy.experimental_local_results(run(*batch))[0]


# The step as written (a per-replica mean, clipped at 1.0), and the loss divided by the
# replica count with the clip kept or divided too: each against the step as written / N.
written = [g / N for g in summed(1.0, 1.0)]
for name, clip in (("clip 1.0", 1.0), ("clip 1.0 / replicas", 1.0 / N)):
    got = summed(N, clip)
    print(f"loss / replicas, {name}, against the step as written / replicas\t{ratio(got, written):.3f}")
    print(f"loss / replicas, {name}: norm of the summed gradient\t{float(tf.linalg.global_norm(got)):.3f}")
print(f"as written: norm of the summed gradient / replicas\t{float(tf.linalg.global_norm(written)):.3f}")
print(f"one device, clip 1.0: norm of the gradient\t{float(tf.linalg.global_norm(clipped(reference, X, Y, 1.0, 1.0))):.3f}")
