"""What TensorFlow and Keras names mean, in one place.

Qualified names come from the index (:mod:`autofix.tf.index`: ``import tensorflow as tf`` then
``tf.keras.Sequential`` resolves to ``tensorflow.keras.Sequential``). :func:`canonical` folds
the many spellings of Keras (``keras``, ``tensorflow.keras``, ``tf_keras``,
``tensorflow.compat.v1.keras``, ``tensorflow.python.keras``) into ``keras.*`` and those of
tf.distribute into ``tensorflow.distribute.*``, so the tables below list each symbol once.
"""

from __future__ import annotations

import enum

_KERAS_PREFIXES = (
    "tensorflow.keras.",
    "tensorflow.compat.v1.keras.",
    "tensorflow.compat.v2.keras.",
    "tensorflow.python.keras.",
    "tensorflow.contrib.keras.",
    "tf_keras.",
    "keras.src.",
    "keras.api.",
    "keras._tf_keras.keras.",
    # Keras 3's preview package, the same API under another name.
    "keras_core.",
)
_DISTRIBUTE_PREFIXES = (
    "tensorflow.compat.v1.distribute.",
    "tensorflow.compat.v2.distribute.",
    "tensorflow.contrib.distribute.",
    "tensorflow.python.distribute.",
)


# TensorFlow 2's own aliases of Keras modules (``tf.optimizers`` is ``tf.keras.optimizers``).
_KERAS_ALIASES = (
    ("tensorflow.optimizers.", "keras.optimizers."),
    ("tensorflow.losses.", "keras.losses."),
    ("tensorflow.metrics.", "keras.metrics."),
    ("tensorflow.initializers.", "keras.initializers."),
    ("tensorflow.compat.v2.optimizers.", "keras.optimizers."),
    ("tensorflow.compat.v2.losses.", "keras.losses."),
    ("tensorflow.compat.v2.metrics.", "keras.metrics."),
)


def canonical(name: str) -> str:
    for prefix, keras in _KERAS_ALIASES:
        if name.startswith(prefix):
            return keras + name[len(prefix) :]
    for prefix in _KERAS_PREFIXES:
        if name.startswith(prefix):
            return "keras." + name[len(prefix) :]
    for base in ("tensorflow.keras", "tf_keras", "keras_core"):
        if name == base:
            return "keras"
    for prefix in _DISTRIBUTE_PREFIXES:
        if name.startswith(prefix):
            return "tensorflow.distribute." + name[len(prefix) :]
    return name


STRATEGY_CLASSES = frozenset(
    {
        "MirroredStrategy",
        "MultiWorkerMirroredStrategy",
        "TPUStrategy",
        "OneDeviceStrategy",
        "CentralStorageStrategy",
        "ParameterServerStrategy",
        "CollectiveAllReduceStrategy",
    }
)


# A MirroredStrategy given one device: it has a single replica.
ONE_DEVICE_MIRRORED = "MirroredStrategy(one device)"
# Strategies with one replica: nothing is distributed under them.
SINGLE_REPLICA = frozenset({"OneDeviceStrategy", "get_strategy", ONE_DEVICE_MIRRORED})


def is_strategy_constructor(name: str) -> bool:
    """``tf.distribute.MirroredStrategy`` and friends, ``tf.distribute.get_strategy``."""
    for module in ("tensorflow.distribute.", "tensorflow.distribute.experimental."):
        if name.startswith(module):
            rest = name[len(module) :]
            if rest in STRATEGY_CLASSES or rest == "get_strategy":
                return True
    return False


def is_library_non_strategy(name: str) -> bool:
    """A TensorFlow or Keras API outside ``tf.distribute``: what it returns is known not to be
    a strategy, whatever it is used as (``DeterministicRandomTestTool(...).scope()``)."""
    root, _, rest = name.partition(".")
    return root in ("tensorflow", "keras", "tf_keras") and bool(rest) and ".distribute." not in f".{rest}"


def is_strategy_type(name: str) -> bool:
    """A name usable as an annotation that means "a strategy"."""
    return name in ("tensorflow.distribute.Strategy",) or is_strategy_constructor(name)


class Kind(enum.Enum):
    """What a Keras call creates. All of them must be created inside ``strategy.scope()``."""

    MODEL = "model"
    LAYER = "layer"
    OPTIMIZER = "optimizer"
    METRIC = "metric"
    LOSS = "loss"
    LOAD = "loaded model"


_MODEL_CONSTRUCTORS = frozenset(
    {
        "keras.Sequential",
        "keras.Model",
        "keras.models.Sequential",
        "keras.models.Model",
        "keras.models.clone_model",
        "keras.models.model_from_json",
        "keras.models.model_from_config",
        "keras.models.model_from_yaml",
        "keras.engine.sequential.Sequential",
        "keras.engine.training.Model",
        "keras.engine.functional.Functional",
    }
)
_LOADERS = frozenset(
    {
        "keras.models.load_model",
        "keras.saving.load_model",
        "tensorflow.saved_model.load",
    }
)
# Base classes whose subclasses are models or layers when instantiated.
_MODEL_BASES = frozenset(
    {"keras.Model", "keras.models.Model", "keras.Sequential", "keras.models.Sequential"}
)
_LAYER_BASES = frozenset({"keras.layers.Layer", "keras.Layer", "keras.engine.base_layer.Layer"})


# TensorFlow Hub's Keras layer: a tf_keras (Keras 2) layer, which no Keras 3 model takes
# (measured: docs/keras-versions.md, "What a file builds").
HUB_KERAS_LAYERS = frozenset({"tensorflow_hub.KerasLayer", "tensorflow_hub.keras_layer.KerasLayer"})
# Layers of other libraries that load pretrained variables (a model built from one trains them).
_PRETRAINED_LAYERS = HUB_KERAS_LAYERS


def _is_class_name(last: str) -> bool:
    return last[:1].isupper()


def keras_kind(name: str) -> Kind | None:
    """The kind of object a call of ``name`` (a canonical qualified name) creates, if any."""
    if name in _MODEL_CONSTRUCTORS:
        return Kind.MODEL
    if name in _LOADERS:
        return Kind.LOAD
    head, _, last = name.rpartition(".")
    if head.startswith("keras.applications") and _is_class_name(last):
        return Kind.MODEL
    if name in ("keras.Input", "keras.layers.Input", "keras.Layer"):
        return Kind.LAYER
    if name.startswith("transformers.TF") and last == "from_pretrained" and head.count(".") == 1:
        # ``TFAutoModel.from_pretrained(name)``: a Keras model with its pretrained variables,
        # trained with the model built from it.
        return Kind.LOAD
    if name in _PRETRAINED_LAYERS:
        return Kind.LAYER
    if head.startswith("keras.layers") and _is_class_name(last):
        return Kind.LAYER
    if head.startswith("keras.optimizers"):
        if "schedules" in head:
            return None
        if _is_class_name(last) or last == "get":
            return Kind.OPTIMIZER
    if name in ("keras.mixed_precision.LossScaleOptimizer",):
        return Kind.OPTIMIZER
    if head.startswith("keras.metrics") and (_is_class_name(last) or last == "get"):
        return Kind.METRIC
    if head.startswith("keras.losses") and _is_class_name(last) and last != "Reduction":
        return Kind.LOSS
    return None


# Keras 2's ``multi_gpu_model(template, gpus=N)``: a model that slices every batch it is given
# into N parts, one per GPU, and runs the template on each (its weights the template's, which
# Keras's documentation builds under ``tf.device("/cpu:0")``). The batch fed to it is the
# global batch; the template is not an ingredient to make anywhere else.
PARALLEL_MODEL_FUNCTIONS = frozenset(
    {"keras.utils.multi_gpu_model", "keras.utils.training_utils.multi_gpu_model", "keras.utils.multi_gpu_utils.multi_gpu_model"}
)


def makes_parallel_model(names: frozenset[str]) -> bool:
    """Whether a call of one of ``names`` (canonical qualified names) is ``multi_gpu_model``."""
    return bool(names & PARALLEL_MODEL_FUNCTIONS)


# Layers that hold no variables: ``keras.Input`` makes a symbolic tensor (and its InputLayer),
# so a model built in a scope from an Input made outside it is mirrored all the same.
# and Keras's layers that compute from their inputs alone (dropout and noise, pooling,
# reshaping, merging, activations but PReLU): made outside the scope, a model built from them in
# it holds the same variables, all mirrored (Keras documents none of these with weights).
_STATELESS_LAYERS = (
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianDropout",
    "GaussianNoise", "AlphaDropout", "ActivityRegularization", "Masking", "Identity",
    "Flatten", "Reshape", "Permute", "RepeatVector", "Cropping1D", "Cropping2D", "Cropping3D",
    "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "UpSampling1D", "UpSampling2D", "UpSampling3D",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
    "AveragePooling3D", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
    "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalAvgPool1D",
    "GlobalAvgPool2D", "GlobalAvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
    "Concatenate", "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Dot",
    "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "ThresholdedReLU",
)
NO_VARIABLE_LAYERS = frozenset({"keras.Input", "keras.layers.Input", "keras.layers.InputLayer"} | {f"keras.layers.{name}" for name in _STATELESS_LAYERS})


def is_model_base(name: str) -> bool:
    return name in _MODEL_BASES


def is_layer_base(name: str) -> bool:
    return name in _LAYER_BASES or (name.startswith("keras.layers.") and _is_class_name(name.rpartition(".")[2]))


# Methods on a model. Creating variables: compile builds the optimizer and metrics.
COMPILE_METHODS = frozenset({"compile"})
LOAD_METHODS = frozenset({"load_weights"})
TRAIN_METHODS = frozenset(
    {
        "fit",
        "fit_generator",
        "train_on_batch",
        "evaluate",
        "evaluate_generator",
        "test_on_batch",
        "predict",
        "predict_generator",
        "predict_on_batch",
    }
)
# Uses of a model that only look at it: a model used only like this is not trained.
INSPECT_METHODS = frozenset(
    {
        "summary",
        "count_params",
        "get_config",
        "to_json",
        "to_yaml",
        "name",
        "input_shape",
        "output_shape",
        # Saved or exported, not trained: a model that is only saved needs no scope.
        "save",
        "export",
    }
)
INSPECT_FUNCTIONS = frozenset(
    {
        "builtins.print",
        "builtins.len",
        "builtins.repr",
        "builtins.str",
        "builtins.type",
        "builtins.id",
        "builtins.isinstance",
        "keras.utils.plot_model",
        "keras.utils.model_to_dot",
    }
)

CHECKPOINT = "tensorflow.train.Checkpoint"

# Objectives that compare the examples of a batch with each other (in-batch negatives,
# contrastive losses): the batch size is part of what is trained, not only of its speed.
IN_BATCH_OBJECTIVES = frozenset(
    {
        "tensorflow_recommenders.tasks.Retrieval",
        "tensorflow_recommenders.tasks.retrieval.Retrieval",
        "keras_cv.training.SimCLRTrainer",
        "keras_cv.training.ContrastiveTrainer",
        "keras_cv.losses.SimCLRLoss",
        "tensorflow_addons.losses.ContrastiveLoss",
        "tensorflow_addons.losses.TripletSemiHardLoss",
        "tensorflow_addons.losses.TripletHardLoss",
        "tensorflow_addons.losses.NpairsLoss",
        "tensorflow_similarity.losses.MultiSimilarityLoss",
        "tensorflow_similarity.losses.SimCLRLoss",
    }
)


# Top-level modules whose calls never make a Keras model, layer, optimizer or metric (so a
# result compiled later is not evidence of one): the standard library's usual suspects,
# NumPy and friends, and TensorFlow itself once Keras is told apart (canonical names put
# Keras under ``keras.``).
NO_KERAS_OBJECTS = frozenset(
    {
        "builtins", "os", "sys", "math", "json", "re", "random", "time", "pathlib", "shutil",
        "glob", "itertools", "functools", "collections", "argparse", "logging", "pickle",
        "numpy", "pandas", "matplotlib", "PIL", "cv2", "scipy", "tensorflow",
    }
)


# Keras preprocessing layers (``keras.layers.X``, also spelled
# ``keras.layers.experimental.preprocessing.X``). Measured on TF 2.21 with Keras 3.15 and
# tf_keras 2.21, two replicas (docs/keras-versions.md, "Preprocessing layers (TFD001)"):
# - these hold no weights on either Keras (Keras 3's random layers: a seed generator's state,
#   which training does not need mirrored): made outside the scope, in the input pipeline or in
#   a model built in the scope, they train as made inside it (trained: Rescaling, Resizing,
#   Hashing, CategoryEncoding, RandomFlip, RandomRotation, RandomZoom, RandomContrast; the
#   others checked for weights only);
STATELESS_PREPROCESSING = frozenset(
    {
        "Rescaling", "Resizing", "CenterCrop", "Hashing", "HashedCrossing", "CategoryEncoding",
        "RandomFlip", "RandomRotation", "RandomZoom", "RandomContrast", "RandomTranslation",
        "RandomCrop", "RandomBrightness", "RandomHeight", "RandomWidth",
    }
)
# - these hold what ``adapt()`` computes (a vocabulary, a mean and variance, bin boundaries):
#   Keras 3 keeps it in lookup tables or non-trainable variables that training never updates,
#   and trains with them made outside the scope; tf_keras keeps it in variables that a model
#   built in the scope refuses when they were made outside ("was not created in the
#   distribution strategy scope"), made where ``adapt()`` runs, not where the layer is made.
ADAPTED_PREPROCESSING = frozenset({"TextVectorization", "StringLookup", "IntegerLookup", "Normalization", "Discretization"})
# Of those, the ones whose tf_keras variables ``adapt()`` makes: made in the scope but adapted
# outside it, they still fail (the lookups made in the scope train, adapted anywhere).
ADAPT_MAKES_VARIABLES = frozenset({"Normalization", "Discretization"})
_PREPROCESSING_MODULES = ("keras.layers", "keras.layers.experimental.preprocessing", "keras.layers.preprocessing")


def preprocessing_layer(names: frozenset[str]) -> str | None:
    """The class name when one of ``names`` (canonical qualified names) is a Keras
    preprocessing layer of :data:`STATELESS_PREPROCESSING` or :data:`ADAPTED_PREPROCESSING`."""
    for name in names:
        head, _, last = name.rpartition(".")
        if head in _PREPROCESSING_MODULES and last in STATELESS_PREPROCESSING | ADAPTED_PREPROCESSING:
            return last
    return None
