"""fit(x, y) with no batch_size under MirroredStrategy (2 logical CPUs): how many examples
each replica's layer sees per step, and the number of steps for 256 examples."""
import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
seen = []


class Record(tf.keras.layers.Layer):
    def call(self, inputs):
        tf.py_function(lambda n: seen.append(int(n)), [tf.shape(inputs)[0]], [])
        return inputs


x = np.random.rand(256, 4).astype("float32")
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), Record(), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
history = model.fit(x, x[:, :1], epochs=1, verbose=0)
print("replicas", strategy.num_replicas_in_sync, "per-replica batches seen", sorted(set(seen)), "calls", len(seen))
