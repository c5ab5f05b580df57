"""How many examples ``keras.datasets.<name>.load_data()`` returns, as Keras documents and
computes it (keras/src/datasets/*.py): fixed sizes for MNIST, Fashion-MNIST, CIFAR-10/100 and
IMDB; ``int(total * (1 - test_split))`` training examples for Reuters, Boston and California
housing (the small California set holds 600). ``maxlen=`` drops the longer sequences of IMDB
and Reuters: how many is not known, so neither is the size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import libcst as cst

from autofix.analysis.syntax import argument_value

# (train, test) examples, whatever the arguments.
_FIXED = {
    "mnist": (60000, 10000),
    "fashion_mnist": (60000, 10000),
    "cifar10": (50000, 10000),
    "cifar100": (50000, 10000),
    "imdb": (25000, 25000),
}
# Split by ``test_split=``: its position among the arguments, its default, the examples split
# (None: California housing, whose ``version=`` says).
_SPLIT = {
    "reuters": (4, 0.2, 11228),
    "boston_housing": (1, 0.2, 506),
    "california_housing": (2, 0.2, None),
}
# The position of ``maxlen=``.
_MAXLEN = {"imdb": 3, "reuters": 3}
_LOADER = re.compile(r"^keras\.datasets\.(\w+)\.load_data$")


def dataset(names: Iterable[str]) -> str | None:
    """``mnist`` for ``keras.datasets.mnist.load_data`` among ``names``."""
    return next((m.group(1) for n in names if (m := _LOADER.match(n))), None)


def sizes(name: str, call: cst.Call, number: Callable[[cst.BaseExpression], object]) -> tuple[int, int] | None:
    """The (train, test) examples ``call`` (``load_data`` of dataset ``name``) returns, or
    None when not known; ``number`` gives the value of an argument (None: not known)."""
    position = _MAXLEN.get(name)
    if position is not None:
        value = argument_value(call, "maxlen", position)
        if value is not None and not (isinstance(value, cst.Name) and value.value == "None"):
            return None
    if name in _FIXED:
        return _FIXED[name]
    if name not in _SPLIT:
        return None
    position, default, total = _SPLIT[name]
    if total is None:
        version = argument_value(call, "version", 0)
        label = "large" if version is None else version.evaluated_value if isinstance(version, cst.SimpleString) else None
        total = {"large": 20640, "small": 600}.get(label)  # type: ignore[arg-type]
        if total is None:
            return None
    split = argument_value(call, "test_split", position)
    fraction = default if split is None else number(split)
    if not isinstance(fraction, (int, float)):
        return None
    train = int(total * (1 - fraction))
    return train, total - train
