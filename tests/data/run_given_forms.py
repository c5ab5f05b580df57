"""Measures, on 2 logical CPUs (Keras 3, or tf_keras with TF_USE_LEGACY_KERAS=1 and the argument
``keras2``), what ``strategy.run`` does with what it is handed in three shapes TFD003 judges
(``name<TAB>value``; a failure as ``fails: Error: first line``):

- ``strategy.run`` called inside a Keras model's ``train_step`` / ``test_step`` that ``fit`` /
  ``evaluate`` run (already once per replica);
- something other than a per-replica function: the result of calling the step
  (``strategy.run(step(x))``, with or without ``args=``), ``optimizer.apply_gradients`` fed a
  zip (or a list) of gradients computed outside, the gradients themselves, a tensor;
- batches of an iterator over a plain dataset (``next(iter(ds))``) against one over the
  distributed dataset.

Each form runs in a process of its own (a form may hang in a collective: it is cut at 120 s).
docs/losses.md reports the values; tests/test_loss_facts.py checks them."""

import os
import subprocess
import sys
import traceback

FORMS = (
    "strategy.run in train_step under fit",
    "self.distribute_strategy.run in train_step under fit",
    "strategy.run in train_step under fit, no reduce",
    "strategy.run in test_step under evaluate",
    "strategy.run(step(x))",
    "strategy.run(step(x)) in a tf.function",
    "strategy.run(step(x), args=(x,))",
    "strategy.run(step(x)) of a step returning None",
    "strategy.run(step(x)) of a distributed batch in a tf.function",
    "strategy.run(apply_gradients, args=(zip(grads, vars),))",
    "strategy.run(apply_gradients, args=(zip(grads, vars),)) in a tf.function",
    "strategy.run(apply_gradients, args=(list(zip(grads, vars)),))",
    "strategy.run(a tensor)",
    "strategy.run(grads)",
    "next(iter(ds)) fed to strategy.run",
    "next(iter(distributed ds)) fed to strategy.run",
)


def main(keras2: bool) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    for form in FORMS:
        args = [sys.executable, __file__, form] + (["keras2"] if keras2 else [])
        try:
            done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
            lines = [line for line in done.stdout.splitlines() if "\t" in line]
            if not lines:
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                lines = [f"{form}\tfails: {tail[:200]}"]
        except subprocess.TimeoutExpired:
            lines = [f"{form}\thangs (cut after 120 s)"]
        print("\n".join(lines), flush=True)


def measure(form: str, keras2: bool) -> None:
    import numpy as np
    import tensorflow as tf

    if keras2:
        import tf_keras as keras
    else:
        import keras

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = rng.normal(size=(16, 1)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    seen = []

    def record(replica, size):
        seen.append((int(replica), int(size)))
        return size

    def note(batch):
        """Records (replica, batch size) each time a replica runs the step."""
        if isinstance(batch, tf.distribute.DistributedValues):
            return tf.constant(0)  # outside the replicas: what the step does with it is measured
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group if context is not None else -1
        return tf.py_function(record, [replica, tf.shape(batch)[0]], tf.int32)

    def say(value):
        print(f"{form}\t{value}", flush=True)

    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(0.1)
    reference = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    reference.set_weights(model.get_weights())
    loss_fn = keras.losses.MeanSquaredError(reduction="none")

    def one_device_delta(xb, yb):
        """The one device's SGD update of the whole batch, per variable."""
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(yb, reference(xb, training=True)))
        return [0.1 * g for g in tape.gradient(loss, reference.trainable_variables)]

    def update_multiple(before, xb, yb):
        """The update made, as a multiple of the one device's update of the whole batch."""
        made = np.concatenate([np.ravel(b - a) for b, a in zip(before, model.get_weights())])
        expected = np.concatenate([np.ravel(np.asarray(d)) for d in one_device_delta(xb, yb)])
        return f"{float(np.dot(made, expected) / np.dot(expected, expected)):.3f}"

    def step(inputs):
        xb, yb = inputs
        with tf.control_dependencies([note(xb)]):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)), global_batch_size=8)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    try:
        if "under fit" in form or "under evaluate" in form:
            held = form.startswith("self.") and "distribute_strategy" or "strategy"

            class Wrapped(keras.Model):
                def __init__(self):
                    super().__init__()
                    self.dense = keras.layers.Dense(1)

                def call(self, inputs):
                    return self.dense(inputs)

                def _fn(self, data, train):
                    def fn(inputs):
                        xb, yb = inputs
                        with tf.control_dependencies([note(xb)]):
                            with tf.GradientTape() as tape:
                                loss = tf.nn.compute_average_loss(loss_fn(yb, self(xb, training=True)), global_batch_size=8)
                        if train:
                            self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
                        return loss

                    run = (self.distribute_strategy if held != "strategy" else strategy).run
                    per_replica = run(fn, args=(data,))
                    if "no reduce" in form:
                        return {"loss": per_replica}
                    return {"loss": strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)}

                def train_step(self, data):
                    return self._fn(data, True)

                def test_step(self, data):
                    return self._fn(data, False)

            with strategy.scope():
                wrapped = Wrapped()
                wrapped.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
                wrapped(x[:1])
            if "test_step" in form:
                wrapped.evaluate(ds, verbose=0)
            else:
                wrapped.fit(ds, epochs=1, verbose=0)
            say(f"runs; the step's (replica, batch) {sorted(seen)}")
        elif form.startswith("strategy.run(step(x))") or form == "strategy.run(step(x), args=(x,))":
            before = model.get_weights()
            batch = next(iter(strategy.experimental_distribute_dataset(ds) if "distributed" in form else ds))
            returned = None if "returning None" in form else True

            def called(inputs):
                loss = step(inputs)
                return loss if returned else None

            if "tf.function" in form:
                tf.function(lambda b: strategy.run(called(b)))(batch)
            elif "args=" in form:
                strategy.run(called(batch), args=(batch,))
            else:
                strategy.run(called(batch))
            say(f"runs; update {update_multiple(before, *batch)}")
        elif form.startswith("strategy.run(apply_gradients"):
            before = model.get_weights()
            xb, yb = next(iter(ds))
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(loss_fn(yb, model(xb, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            if "list(" in form:
                strategy.run(optimizer.apply_gradients, args=(list(zip(grads, model.trainable_variables)),))
            elif "tf.function" in form:
                tf.function(lambda: strategy.run(optimizer.apply_gradients, args=(zip(grads, model.trainable_variables),)))()
            else:
                strategy.run(optimizer.apply_gradients, args=(zip(grads, model.trainable_variables),))
            say(f"runs; update {update_multiple(before, xb, yb)}")
        elif form == "strategy.run(grads)":
            xb, yb = next(iter(ds))
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(loss_fn(yb, model(xb, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            strategy.run(grads)
            say("runs")
        elif form == "strategy.run(a tensor)":
            strategy.run(tf.constant(1.0))
            say("runs")
        else:
            it = iter(strategy.experimental_distribute_dataset(ds) if "distributed" in form else ds)
            tf.function(lambda b: strategy.run(step, args=(b,)))(next(it))
            say(f"each replica's batch {[s for _, s in sorted(seen)]}")
    except Exception as exc:  # noqa: BLE001 - the failure is the measurement
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        # A failure inside a tf.function starts "in user code:" and ends with the error.
        if lines and lines[0] == "in user code:":
            # The error's own first line, after the traced frames.
            named = [i for i, line in enumerate(lines) if line.startswith(f"{type(exc).__name__}: ")]
            lines = [lines[named[-1]].split(": ", 1)[1]] if named else lines[-1:]
        first = lines[0] if lines else ""
        # The line of this script the failure comes from (``run`` or ``reduce``).
        ours = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__]
        where = f" (raised by: {ours[-1].line.strip()})" if ours else ""
        say(f"fails: {type(exc).__name__}: {first[:200]}{where}")


if __name__ == "__main__":
    rest = [a for a in sys.argv[1:] if a != "keras2"]
    if rest:
        measure(rest[0], "keras2" in sys.argv[1:])
    else:
        main("keras2" in sys.argv[1:])
