"""What TensorFlow and Keras functions do to a loss value: pass it on, divide or multiply it,
average or sum it, compute one loss per example, or scale it for the replicas. Canonical
qualified names (``tf.math.reduce_mean`` and ``tf.reduce_mean`` alike), as
:mod:`autofix.tf.symbols` spells them."""

# Calls whose result is their arguments' values, as far as the loss is concerned.
PASS = frozenset(
    {
        "tensorflow.cast",
        "tensorflow.identity",
        "tensorflow.add_n",
        "tensorflow.math.add_n",
        "tensorflow.add",
        "tensorflow.math.add",
        "tensorflow.convert_to_tensor",
        "builtins.sum",
        "builtins.float",
    }
)
DIVIDE = frozenset({"tensorflow.divide", "tensorflow.math.divide", "tensorflow.truediv", "tensorflow.math.truediv", "tensorflow.math.divide_no_nan"})
MULTIPLY = frozenset({"tensorflow.multiply", "tensorflow.math.multiply"})
MEANS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean", "keras.ops.mean", "keras.backend.mean"})
SUMS = frozenset({"tensorflow.reduce_sum", "tensorflow.math.reduce_sum", "keras.ops.sum", "keras.backend.sum"})
# What sums the regularization losses of ``model.losses``.
AGGREGATES = frozenset({"tensorflow.add_n", "tensorflow.math.add_n", "builtins.sum"}) | SUMS
GLOBAL = frozenset({"tensorflow.nn.compute_average_loss", "tensorflow.nn.scale_regularization_loss"})
# Functions that compute their result entry by entry (broadcasting their arguments): an
# expression of them keeps every axis of ``y_pred``.
ELEMENTWISE = frozenset(
    f"{module}.{name}"
    for module in ("tensorflow", "tensorflow.math", "keras.ops", "keras.backend")
    for name in (
        "square", "abs", "sqrt", "exp", "log", "log1p", "pow", "maximum", "minimum", "squared_difference",
        "sigmoid", "softplus", "cast", "subtract", "add", "multiply", "divide", "negative", "clip_by_value", "clip",
        "where",
    )
) | frozenset({"tensorflow.nn.relu", "tensorflow.nn.sigmoid", "tensorflow.nn.softplus"})
# Keras's loss functions, which average (or sum) over the last axis only (``y_pred``'s classes
# or features) and keep every other: given images, one loss per pixel.
LAST_AXIS_LOSSES = frozenset(
    f"{module}.{name}"
    for module in ("keras.losses", "tensorflow.keras.losses", "keras.metrics", "tensorflow.keras.metrics")
    for name in (
        "binary_crossentropy", "categorical_crossentropy", "mean_squared_error", "mean_absolute_error", "mse", "mae",
    )
)
# Functions that return one loss per example (or per element).
PER_EXAMPLE = frozenset(
    {
        "tensorflow.nn.sparse_softmax_cross_entropy_with_logits",
        "tensorflow.nn.softmax_cross_entropy_with_logits",
        "tensorflow.nn.sigmoid_cross_entropy_with_logits",
    }
)
CONSTANTS = frozenset({"tensorflow.constant", "tensorflow.zeros", "tensorflow.zeros_like"})
GRAD_PASS_THROUGH = "tensorflow.grad_pass_through"
# Loss scaling (mixed precision) multiplies by a constant factor.
PASS_METHODS = frozenset({"get_scaled_loss", "scale_loss"})
