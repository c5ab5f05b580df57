"""What gives a Keras ``Sequential`` its input's shape where it is made (so that it is built
there, with its variables), read from its first layer.

An ``Input`` / ``InputLayer`` does, and so does a layer given ``input_shape=`` (or
``input_dim=``, ``batch_input_shape=``, ``batch_shape=``). An ``Embedding``'s ``input_dim`` is
the size of its vocabulary, not its input's shape: on Keras 3 a ``Sequential`` that starts
with one is not built where it is made, while tf_keras gives an ``Embedding`` the input shape
``(None,)`` and builds it (measured on Keras 3.15.1 and tf_keras 2.21.0:
``Sequential([Embedding(input_dim=100, output_dim=4), Dense(1)]).built`` is False with no
weights on Keras 3, True with 3 weights on tf_keras; ``Dense(4, input_dim=3)`` first builds it
on both). What asks "is it built" for Keras 3 (a step that would build it per replica, a model
Keras 3 builds before ``fit`` under a strategy) reads it as Keras 3 does.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

INPUT_SHAPE_KEYWORDS = frozenset({"input_shape", "input_dim", "batch_input_shape", "batch_shape"})


def gives_input_shape(names: Iterable[str], layer: cst.Call) -> bool:
    """Whether the layer ``layer`` makes (its callee's canonical ``names``), first in a
    ``Sequential``, gives the model its input's shape on Keras 3."""
    last = {n.rpartition(".")[2] for n in names}
    if last & {"Input", "InputLayer"}:
        return True
    keywords = INPUT_SHAPE_KEYWORDS - {"input_dim"} if any(n.endswith("Embedding") for n in last) else INPUT_SHAPE_KEYWORDS
    return any(a.keyword is not None and a.keyword.value in keywords for a in layer.args)
