"""Keras names that only an older TensorFlow has: a file that uses one runs on TensorFlow 2.15
or older, whose Keras is Keras 2, and what fails only on Keras 3 is not its bug.

Measured on TensorFlow 2.21.0 with Keras 3.15.1 and tf_keras 2.21.0: none of these names
exists in Keras 3 nor in tf_keras (TensorFlow removed them before Keras 3 came). The names
that tf_keras has and Keras 3 lacks (249 of them, ``keras.layers.experimental``,
``keras.losses.Reduction``...) are not here: files written for Keras 3 keep such remnants
(part A and B of the real-world corpus hold some, judged as Keras 3 files), so they say
nothing sure about which Keras runs (docs/keras-versions.md).
"""

KERAS2_ONLY = frozenset(
    {
        "keras.mixed_precision.experimental",
        "keras.utils.multi_gpu_model",
        "keras.layers.CuDNNLSTM",
        "keras.layers.CuDNNGRU",
        "keras.experimental.export_saved_model",
        "keras.experimental.load_from_saved_model",
    }
)


def keras2_only(name: str) -> bool:
    """Whether the canonical Keras name ``name`` (``keras.mixed_precision.experimental.Policy``)
    exists only in a TensorFlow whose Keras is Keras 2."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in KERAS2_ONLY for i in range(2, len(parts) + 1))
