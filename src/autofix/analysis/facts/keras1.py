"""Code written for Keras 1 (before Keras 2.0, 2017): API that Keras 2 renamed, whose
compatibility shims neither TensorFlow's Keras (``tf.keras``, tf_keras) nor Keras 3 kept, so
the script runs on neither, before or after a migration. ``autofix migrate`` says so instead
of moving it to a strategy.

What counts: ``nb_epoch=``, ``samples_per_epoch=`` and ``nb_val_samples=`` of the training
methods; ``border_mode=``, ``subsample=``, ``dim_ordering=``, ``nb_filter=``,
``W_regularizer=`` and ``b_regularizer=`` of Keras layers; ``Deconvolution2D``,
``AtrousConvolution2D``, ``backend.image_dim_ordering()``. Not what Keras 2 kept
(``keras.utils.np_utils``; ``Convolution2D``, still an alias of ``Conv2D`` in Keras 3).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.tf.symbols import canonical

_TRAINING_KEYWORDS = frozenset({"nb_epoch", "samples_per_epoch", "nb_val_samples"})
_TRAINING_METHODS = frozenset({"fit", "fit_generator", "evaluate", "evaluate_generator", "predict", "predict_generator"})
_LAYER_KEYWORDS = frozenset({"border_mode", "subsample", "dim_ordering", "nb_filter", "W_regularizer", "b_regularizer"})
_NAMES = frozenset(
    {
        "keras.backend.image_dim_ordering",
        "keras.backend.set_image_dim_ordering",
        "keras.layers.Deconvolution2D",
        "keras.layers.AtrousConvolution2D",
    }
)


def first_keras(program: Program) -> tuple[cst.CSTNode, str] | None:
    """Where the file first uses Keras 1 API, and what it uses; None when it does
    not."""
    facts = Facts.of(program)
    found: list[tuple[cst.CSTNode, str]] = []
    for binding in program.index.bindings.values():
        path = canonical(binding.path) if binding.kind == "import" and binding.path else ""
        if any(path == n or path.startswith(n + ".") for n in _NAMES):
            found.append((binding.node, path.rpartition(".")[2]))
    for call, _owner in facts.calls:
        names = facts.names_of(call.func)
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        for arg in call.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword in _TRAINING_KEYWORDS and method in _TRAINING_METHODS:
                found.append((call, f"{keyword}="))
            elif keyword in _LAYER_KEYWORDS and any(n.startswith("keras.layers.") for n in names):
                found.append((call, f"{keyword}="))
        for name in names & _NAMES:
            found.append((call, name.rpartition(".")[2] + "()"))
    if not found:
        return None
    return min(found, key=lambda f: program.line(f[0]))
