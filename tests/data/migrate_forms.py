"""Measures, on 2 logical CPUs, what a migration to MirroredStrategy makes of gradient clipping,
of losses that reduce over the batch themselves and of losses summed over the batch: the first
update (the weights' change) of each form, as a multiple of the update the definition of a right
migration makes (each replica runs the original's step on its own B examples, the N gradients
are averaged, the original's optimizer applies the average), computed directly on one device.
Printed as ``form<TAB>ratio same`` (within 1e-5 of the definition's update), ``form<TAB>ratio
apart`` (the norms' ratio; the update differs), or ``form<TAB>fails: Error``. Run with ``import
keras`` (Keras 3) or, with TF_USE_LEGACY_KERAS=1 and the argument ``keras2``, with tf_keras.
docs/migrate.md reports the numbers; tests/test_migrate_facts.py checks them."""

import sys

import numpy as np
import tensorflow as tf

KERAS2 = sys.argv[1:] == ["keras2"]
if KERAS2:
    import tf_keras as keras
else:
    import keras

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
N = strategy.num_replicas_in_sync
B = 16
rng = np.random.default_rng(0)
X = rng.normal(size=(N * B, 8)).astype("float32")
Y = rng.integers(0, 3, size=(N * B,)).astype("int32")
# Each replica's shard of the global batch, in the order the distributed dataset hands them out.
SHARDS = [(X[i * B:(i + 1) * B], Y[i * B:(i + 1) * B]) for i in range(N)]
# A clip that is active at the first step (the gradient's global norm is about 0.5).
CLIP = 0.05


def build(regularized=False):
    tf.keras.utils.set_random_seed(1) if not KERAS2 else keras.utils.set_random_seed(1)
    regularizer = keras.regularizers.l2(0.1) if regularized else None
    return keras.Sequential([
        keras.Input((8,)),
        keras.layers.Dense(16, activation="relu", kernel_regularizer=regularizer),
        keras.layers.Dense(3),
    ])


INITIAL = [w.copy() for w in build(True).get_weights()]


def per_example(y, p):
    return keras.losses.sparse_categorical_crossentropy(y, p, from_logits=True)


def definition(loss, optimizer, regularized=False):
    """The update a right migration makes: the original's gradient on each shard at batch B,
    averaged, applied by the original's optimizer (on one device)."""
    model = build(regularized)
    model.set_weights(INITIAL)
    grads = []
    for x, y in SHARDS:
        with tf.GradientTape() as tape:
            value = loss(tf.constant(y), model(x, training=True))
            if regularized:
                value = value + tf.add_n(model.losses)
        grads.append(tape.gradient(value, model.trainable_variables))
    averaged = [tf.add_n(list(g)) / N for g in zip(*grads)]
    optimizer.apply_gradients(zip(averaged, model.trainable_variables))
    return [w - w0 for w, w0 in zip(model.get_weights(), INITIAL)]


def compared(got, want):
    flat_got = np.concatenate([g.ravel() for g in got])
    flat_want = np.concatenate([w.ravel() for w in want])
    ratio = np.linalg.norm(flat_got) / np.linalg.norm(flat_want)
    apart = np.linalg.norm(flat_got - flat_want) / np.linalg.norm(flat_want)
    return f"{ratio:.3f} {'same' if apart < 1e-5 else 'apart'}"


def distributed_batch():
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(N * B)
    return next(iter(strategy.experimental_distribute_dataset(dataset)))


def custom_step(step, optimizer):
    """The update of one migrated custom step: ``step(model, optimizer, x, y)`` run per replica."""
    with strategy.scope():
        model = build()
        model.set_weights(INITIAL)
        opt = optimizer()

    @tf.function
    def run(x, y):
        strategy.run(step, args=(model, opt, x, y))

    run(*distributed_batch())
    return [w - w0 for w, w0 in zip(model.get_weights(), INITIAL)]


def replica_grads(model, x, y):
    """The replica's gradients of its share of the global mean (TFD004's migrated loss)."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(per_example(y, model(x, training=True))) / N
    return tape.gradient(loss, model.trainable_variables)


def all_reduced(grads):
    return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)


def clip_per_replica(model, opt, x, y):
    grads, _ = tf.clip_by_global_norm(replica_grads(model, x, y), CLIP)
    opt.apply_gradients(zip(grads, model.trainable_variables))


def all_reduce_clip_apply(model, opt, x, y):
    grads, _ = tf.clip_by_global_norm(all_reduced(replica_grads(model, x, y)), CLIP)
    opt.apply_gradients(zip(grads, model.trainable_variables))


def all_reduce_clip_divide_apply(model, opt, x, y):
    grads, _ = tf.clip_by_global_norm(all_reduced(replica_grads(model, x, y)), CLIP)
    opt.apply_gradients(zip([g / N for g in grads], model.trainable_variables))


def clip_with_global_norm(model, opt, x, y):
    grads = replica_grads(model, x, y)
    grads, _ = tf.clip_by_global_norm(grads, CLIP, use_norm=tf.linalg.global_norm(all_reduced(grads)))
    opt.apply_gradients(zip(grads, model.trainable_variables))


def all_reduce_clip_apply_skip(model, opt, x, y):
    grads, _ = tf.clip_by_global_norm(all_reduced(replica_grads(model, x, y)), CLIP)
    opt.apply_gradients(zip(grads, model.trainable_variables), skip_gradients_aggregation=True)


def all_reduce_clip_apply_unaggregated(model, opt, x, y):
    grads, _ = tf.clip_by_global_norm(all_reduced(replica_grads(model, x, y)), CLIP)
    opt.apply_gradients(zip(grads, model.trainable_variables), experimental_aggregate_gradients=False)


def clip_by_norm_per_replica(model, opt, x, y):
    grads = [tf.clip_by_norm(g, CLIP) for g in replica_grads(model, x, y)]
    opt.apply_gradients(zip(grads, model.trainable_variables))


def clip_by_norm_of_the_sum(model, opt, x, y):
    grads = replica_grads(model, x, y)
    grads = [g * CLIP / tf.maximum(tf.norm(s), CLIP) for g, s in zip(grads, all_reduced(grads))]
    opt.apply_gradients(zip(grads, model.trainable_variables))


def unclipped(model, opt, x, y):
    opt.apply_gradients(zip(replica_grads(model, x, y), model.trainable_variables))


def global_clip(grads):
    return tf.clip_by_global_norm(grads, CLIP)[0]


def clip_by_norm(grads):
    return [tf.clip_by_norm(g, CLIP) for g in grads]


def mean(y, p):
    return tf.reduce_mean(per_example(y, p))


class Clipped(keras.optimizers.SGD):
    """The definition's optimizer for a step that clips its gradients before applying them."""

    def __init__(self, clip):
        super().__init__(0.1)
        self.clip = clip

    def apply_gradients(self, grads_and_vars, **kwargs):
        grads_and_vars = list(grads_and_vars)
        grads = self.clip([g for g, _ in grads_and_vars])
        return super().apply_gradients(zip(grads, [v for _, v in grads_and_vars]), **kwargs)


def sgd():
    return keras.optimizers.SGD(0.1)


STEPS = {
    "step: clip_by_global_norm per replica": (clip_per_replica, sgd, lambda: Clipped(global_clip)),
    "step: all_reduce, clip_by_global_norm, apply_gradients": (all_reduce_clip_apply, sgd, lambda: Clipped(global_clip)),
    "step: all_reduce, clip_by_global_norm, / N, apply_gradients": (all_reduce_clip_divide_apply, sgd, lambda: Clipped(global_clip)),
    "step: clip_by_global_norm(use_norm=global_norm(all_reduce))": (clip_with_global_norm, sgd, lambda: Clipped(global_clip)),
    "step: all_reduce, clip_by_global_norm, apply_gradients(skip_gradients_aggregation=True)": (
        all_reduce_clip_apply_skip, sgd, lambda: Clipped(global_clip)
    ),
    "step: all_reduce, clip_by_global_norm, apply_gradients(experimental_aggregate_gradients=False)": (
        all_reduce_clip_apply_unaggregated, sgd, lambda: Clipped(global_clip)
    ),
    "step: clip_by_norm per replica": (clip_by_norm_per_replica, sgd, lambda: Clipped(clip_by_norm)),
    "step: clip_by_norm by the all-reduced norm": (clip_by_norm_of_the_sum, sgd, lambda: Clipped(clip_by_norm)),
    "step: optimizer global_clipnorm": (unclipped, lambda: keras.optimizers.SGD(0.1, global_clipnorm=CLIP), lambda: keras.optimizers.SGD(0.1, global_clipnorm=CLIP)),
    "step: optimizer clipnorm": (unclipped, lambda: keras.optimizers.SGD(0.1, clipnorm=CLIP), lambda: keras.optimizers.SGD(0.1, clipnorm=CLIP)),
    "step: optimizer clipvalue": (unclipped, lambda: keras.optimizers.SGD(0.1, clipvalue=0.01), lambda: keras.optimizers.SGD(0.1, clipvalue=0.01)),
}

for form, (step, optimizer, original) in STEPS.items():
    try:
        print(f"{form}\t{compared(custom_step(step, optimizer), definition(mean, original()))}")
    except Exception as exc:  # noqa: BLE001 - the failure is the measurement
        print(f"{form}\tfails: {type(exc).__name__}")


# Losses summed over the batch, and divided by the batch constant, in a custom step.
def summed(y, p):
    return tf.reduce_sum(per_example(y, p))


def by_batch(y, p):
    return tf.nn.compute_average_loss(per_example(y, p), global_batch_size=B)


SUMMED = {
    "step: reduce_sum": (lambda y, p: summed(y, p), summed),
    "step: reduce_sum / N": (lambda y, p: summed(y, p) / N, summed),
    "step: compute_average_loss(global_batch_size=B)": (by_batch, by_batch),
    "step: compute_average_loss(global_batch_size=N * B)": (
        lambda y, p: tf.nn.compute_average_loss(per_example(y, p), global_batch_size=N * B), by_batch
    ),
    "step: reduce_sum / B": (lambda y, p: summed(y, p) / B, lambda y, p: summed(y, p) / B),
    "step: reduce_sum / (N * B)": (lambda y, p: summed(y, p) / (N * B), lambda y, p: summed(y, p) / B),
}


def loss_step(loss):
    def step(model, opt, x, y):
        with tf.GradientTape() as tape:
            value = loss(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(value, model.trainable_variables), model.trainable_variables))

    return step


for form, (migrated, original) in SUMMED.items():
    try:
        print(f"{form}\t{compared(custom_step(loss_step(migrated), sgd), definition(original, sgd()))}")
    except Exception as exc:  # noqa: BLE001
        print(f"{form}\tfails: {type(exc).__name__}")


# fit: the same model and data, one step of the global batch on N replicas.
def fitted(loss, optimizer, regularized=False, run_eagerly=False):
    with strategy.scope():
        model = build(regularized)
        model.set_weights(INITIAL)
        model.compile(optimizer=optimizer(), loss=loss)
    model.fit(X, Y, batch_size=N * B, epochs=1, shuffle=False, verbose=0)
    return [w - w0 for w, w0 in zip(model.get_weights(), INITIAL)]


def mean_over_last_axis(y_true, y_pred):
    return tf.reduce_mean(tf.square(tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), "int32"), 3) - y_pred), axis=-1)


def mean_over_everything(y_true, y_pred):
    return tf.reduce_mean(tf.square(tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), "int32"), 3) - y_pred))


def sum_over_everything(y_true, y_pred):
    return tf.reduce_sum(tf.square(tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), "int32"), 3) - y_pred))


def mean_of_each_row(y_true, y_pred):
    """``mean_over_everything`` as the migration rewrites it: one loss per example."""
    squared = tf.square(tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), "int32"), 3) - y_pred)
    return tf.reduce_mean(tf.reshape(squared, [tf.shape(y_pred)[0], -1]), axis=1)


def crossentropy(reduction):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


DEFAULT = "sum_over_batch_size" if not KERAS2 else keras.losses.Reduction.AUTO
FIT = {
    "fit: global_clipnorm": (
        lambda: crossentropy(DEFAULT), lambda: keras.optimizers.SGD(0.1, global_clipnorm=CLIP), mean, lambda: keras.optimizers.SGD(0.1, global_clipnorm=CLIP), False
    ),
    "fit: clipnorm": (
        lambda: crossentropy(DEFAULT), lambda: keras.optimizers.SGD(0.1, clipnorm=CLIP), mean, lambda: keras.optimizers.SGD(0.1, clipnorm=CLIP), False
    ),
    "fit: clipvalue": (
        lambda: crossentropy(DEFAULT), lambda: keras.optimizers.SGD(0.1, clipvalue=0.01), mean, lambda: keras.optimizers.SGD(0.1, clipvalue=0.01), False
    ),
    "fit: default reduction": (lambda: crossentropy(DEFAULT), sgd, mean, sgd, False),
    "fit: a loss function averaging over the last axis": (lambda: mean_over_last_axis, sgd, lambda y, p: tf.reduce_mean(mean_over_last_axis(y, p)), sgd, False),
    "fit: a loss function returning reduce_mean": (lambda: mean_over_everything, sgd, mean_over_everything, sgd, False),
    "fit: a loss function returning reduce_sum": (lambda: sum_over_everything, sgd, sum_over_everything, sgd, False),
    "fit: a loss function averaging each row of its reshape": (lambda: mean_of_each_row, sgd, mean_over_everything, sgd, False),
    'fit: reduction="sum"': (lambda: crossentropy("sum"), sgd, summed, sgd, False),
    "fit: add_loss (a kernel regularizer)": (lambda: crossentropy(DEFAULT), sgd, mean, sgd, True),
}

for form, (loss, optimizer, original, original_optimizer, regularized) in FIT.items():
    try:
        print(f"{form}\t{compared(fitted(loss(), optimizer, regularized), definition(original, original_optimizer(), regularized))}")
    except Exception as exc:  # noqa: BLE001
        print(f"{form}\tfails: {type(exc).__name__}")

# A summed loss weighed by 1 / N in compile: each replica's sum divided by N.
try:
    with strategy.scope():
        weighed = build()
        weighed.set_weights(INITIAL)
        weighed.compile(optimizer=sgd(), loss=crossentropy("sum"), loss_weights=1 / N)
    weighed.fit(X, Y, batch_size=N * B, epochs=1, shuffle=False, verbose=0)
    update = [w - w0 for w, w0 in zip(weighed.get_weights(), INITIAL)]
    print(f'fit: reduction="sum", loss_weights=1 / N\t{compared(update, definition(summed, sgd()))}')
except Exception as exc:  # noqa: BLE001
    print(f'fit: reduction="sum", loss_weights=1 / N\tfails: {type(exc).__name__}')
