"""Respell a Keras 3 script for Keras 2 (tf-keras), so every fixture is also checked with the
spelling legacy repos use: ``import tf_keras``, ``from tf_keras import layers``."""

from __future__ import annotations

import re

_REWRITES = [
    (re.compile(r"^from tensorflow import keras$", re.M), "import tf_keras as keras"),
    (re.compile(r"^import keras$", re.M), "import tf_keras as keras"),
    (re.compile(r"^from (?:tensorflow\.)?keras(\.[\w.]+)? import", re.M), r"from tf_keras\1 import"),
    (re.compile(r"\btf\.keras\."), "tf_keras."),
]


def to_keras2(text: str) -> str | None:
    """The Keras 2 spelling of ``text``, or None when it has no Keras 3 spelling to change."""
    if "tf_keras" in text:
        return None
    new = text
    for pattern, replacement in _REWRITES:
        new = pattern.sub(replacement, new)
    if new == text:
        return None
    if "tf_keras." in new and not re.search(r"^import tf_keras\s*$", new, re.M):
        # On the same line, so that line numbers (in findings and reasons) do not move.
        new = re.sub(r"^import tensorflow as tf$", "import tensorflow as tf; import tf_keras", new, count=1, flags=re.M)
    return new
