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


# Methods TensorFlow 2.16+ (Keras 3) no longer has (measured on TF 2.21 / Keras 3.15): a file
# that calls one runs on TensorFlow 2.15 or older.
REMOVED_METHODS = frozenset({"experimental_run_v2", "fit_generator", "evaluate_generator", "predict_generator"})


def internal_keras2_class(name: str) -> str | None:
    """The class a raw qualified name (``tensorflow.python.keras.optimizer_v2.adam.Adam``)
    makes when it is one of ``tensorflow.python.keras``, TensorFlow's internal Keras 2, whose
    objects Keras 3 refuses (docs/keras-versions.md); a class by its capitalised name. None
    otherwise (its functions, ``backend.clear_session``, say nothing)."""
    last = name.rsplit(".", 1)[-1]
    return last if name.startswith("tensorflow.python.keras.") and last[:1].isupper() else None

