"""Evaluate on one device: no strategy, so autofix leaves this file alone."""
import tensorflow as tf

from data.pipeline import make_dataset

model = tf.keras.models.load_model("mlp.keras")
print(model.evaluate(make_dataset(num_examples=512)))
