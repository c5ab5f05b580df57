"""The names the operators know: Keras's layer, optimizer, loss, schedule and metric classes
(by their last name, however the file imports them), keras.datasets' sizes, and small helpers
over libcst nodes."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

LAYER_WIDTH = {  # layer class -> (width parameter, its position)
    "Dense": ("units", 0),
    "Conv1D": ("filters", 0),
    "Conv2D": ("filters", 0),
    "Conv3D": ("filters", 0),
    "Conv1DTranspose": ("filters", 0),
    "Conv2DTranspose": ("filters", 0),
    "Conv3DTranspose": ("filters", 0),
    "SeparableConv1D": ("filters", 0),
    "SeparableConv2D": ("filters", 0),
    "LSTM": ("units", 0),
    "GRU": ("units", 0),
    "SimpleRNN": ("units", 0),
    "Embedding": ("output_dim", 1),
}
KERNEL_LAYERS = {n for n in LAYER_WIDTH if n != "Embedding"}
ACTIVATION_LAYERS = {"Dense", "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose", "SeparableConv1D", "SeparableConv2D"}
RANDOM_LAYERS = {"Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianDropout", "GaussianNoise", "AlphaDropout"}
WEIGHTED_LAYERS = set(LAYER_WIDTH) | {"DepthwiseConv2D", "BatchNormalization", "LayerNormalization", "PReLU"}
TRAINING_LAYERS = RANDOM_LAYERS | {"BatchNormalization"}
LAYERS = WEIGHTED_LAYERS | RANDOM_LAYERS | {"Flatten", "Reshape", "Activation", "LeakyReLU", "ReLU", "MaxPooling2D", "MaxPooling1D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "UpSampling2D", "ZeroPadding2D", "Concatenate", "Add"}
OPTIMIZERS = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl", "Lion"}
LOSSES = {
    "SparseCategoricalCrossentropy", "CategoricalCrossentropy", "BinaryCrossentropy", "MeanSquaredError",
    "MeanAbsoluteError", "Huber", "KLDivergence", "CategoricalFocalCrossentropy", "BinaryFocalCrossentropy",
}
SCHEDULES = {"ExponentialDecay", "PiecewiseConstantDecay", "PolynomialDecay", "InverseTimeDecay", "CosineDecay", "CosineDecayRestarts"}
METRICS = {"Mean", "Sum", "SparseCategoricalAccuracy", "CategoricalAccuracy", "Accuracy", "BinaryAccuracy", "MeanSquaredError", "MeanAbsoluteError", "AUC", "Precision", "Recall"}
# keras.datasets: the documented number of training examples (what smoke's synthetic ones hold).
DATASET_SIZES = {"mnist": 60000, "fashion_mnist": 60000, "cifar10": 50000, "cifar100": 50000, "imdb": 25000, "reuters": 8982, "boston_housing": 404}
LOADS = {"load_weights", "load_model", "set_weights", "restore", "load_state_dict"}


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from walk(child)


def names_in(node: cst.CSTNode) -> set[str]:
    """The names read in ``node`` (not attribute names, not keywords)."""
    found: set[str] = set()
    for n in walk(node):
        if isinstance(n, cst.Name):
            found.add(n.value)
    return found


def is_replicas(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "num_replicas_in_sync"


def scaled_operand(node: cst.CSTNode) -> cst.BaseExpression | None:
    """``B`` when ``node`` is ``B * <strategy>.num_replicas_in_sync`` (either order)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        if is_replicas(node.right) and not is_replicas(node.left):
            return node.left
        if is_replicas(node.left) and not is_replicas(node.right):
            return node.right
    return None
