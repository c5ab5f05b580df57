"""Input pipelines (synthetic data, so the scripts run anywhere)."""
import tensorflow as tf


def make_dataset(num_examples=2048, features=20, classes=4, batch_size=64):
    x = tf.random.normal([num_examples, features])
    y = tf.random.uniform([num_examples], maxval=classes, dtype=tf.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(num_examples)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
