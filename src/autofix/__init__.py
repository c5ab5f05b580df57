"""autofix: finds and fixes tf.distribute strategy misuse in Keras training scripts."""

__version__ = "0.1.0"
