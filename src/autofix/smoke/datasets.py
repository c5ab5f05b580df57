"""Synthetic stand-ins for ``keras.datasets.<name>.load_data()`` (child side, ``--offline``).

Each returns random arrays with the documented shapes, dtypes and value ranges (the sample
counts too, so that slicing and reshaping in the script behave as with the real data); the
labels are random and the pixels repeat every 4 MiB, so only the pipeline is tested, not what
is learnt. ``get_word_index()``
of imdb and reuters returns made-up words. Every dataset served is named in the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autofix.smoke.state import recorder

_SEED = 1234


def _rng() -> np.random.Generator:
    return np.random.default_rng(_SEED)


# Random pixels are repeated with this period: drawing all 150 MB of cifar would take seconds.
_BLOCK = 1 << 22


def _bytes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    block = rng.integers(0, 256, size=_BLOCK, dtype=np.uint8)
    return np.resize(block, int(np.prod(shape))).reshape(shape)


def _images(train: int, test: int, image: tuple[int, ...], classes: int, label_shape: tuple[int, ...]):
    rng = _rng()
    parts = []
    for n in (train, test):
        x = _bytes(rng, (n, *image))
        y = rng.integers(0, classes, size=(n, *label_shape), dtype=np.uint8)
        parts.append((x, y))
    return tuple(parts)


def mnist(path: str = "mnist.npz"):
    return _images(60000, 10000, (28, 28), 10, ())


def fashion_mnist():
    return _images(60000, 10000, (28, 28), 10, ())


def cifar10():
    return _images(50000, 10000, (32, 32, 3), 10, (1,))


def cifar100(label_mode: str = "fine"):
    if label_mode not in ("fine", "coarse"):
        raise ValueError(f'`label_mode` must be one of `"fine"`, `"coarse"`. Received: label_mode={label_mode}.')
    return _images(50000, 10000, (32, 32, 3), 100 if label_mode == "fine" else 20, (1,))


def _sequences(total: int, split: int, vocabulary: int, classes: int, num_words, skip_top, maxlen, start_char, oov_char, index_from):
    rng = _rng()
    top = int(num_words) if num_words else vocabulary
    lengths = rng.integers(20, 240, size=total)
    if maxlen:
        lengths = np.minimum(lengths, max(int(maxlen) - 1, 1))
    words = rng.integers(max(index_from, 1) + int(skip_top), max(top, index_from + int(skip_top) + 2), size=int(lengths.sum()))
    if oov_char is not None:
        words[words >= top] = oov_char
    xs, start = [], 0
    for length in lengths:
        seq = words[start : start + length].tolist()
        start += length
        xs.append(([start_char] if start_char is not None else []) + seq)
    labels = rng.integers(0, classes, size=total).astype(np.int64)
    x = np.empty(total, dtype=object)
    x[:] = xs
    return (x[:split], labels[:split]), (x[split:], labels[split:])


def imdb(path="imdb.npz", num_words=None, skip_top=0, maxlen=None, seed=113, start_char=1, oov_char=2, index_from=3, **kwargs):
    return _sequences(50000, 25000, 88587, 2, num_words, skip_top, maxlen, start_char, oov_char, index_from)


def reuters(path="reuters.npz", num_words=None, skip_top=0, maxlen=None, test_split=0.2, seed=113, start_char=1, oov_char=2, index_from=3, **kwargs):
    split = int(11228 * (1 - test_split))
    return _sequences(11228, split, 30980, 46, num_words, skip_top, maxlen, start_char, oov_char, index_from)


def _regression(total: int, features: int, test_split: float, low: float, high: float, dtype):
    rng = _rng()
    x = rng.random((total, features)).astype(dtype) * 10
    y = (low + rng.random(total) * (high - low)).astype(dtype)
    split = int(total * (1 - test_split))
    return (x[:split], y[:split]), (x[split:], y[split:])


def boston_housing(path="boston_housing.npz", test_split=0.2, seed=113):
    return _regression(506, 13, test_split, 10.0, 50.0, np.float64)


def california_housing(version="large", path="california_housing.npz", test_split=0.2, seed=113):
    if version not in ("small", "large"):
        raise ValueError(f"Argument `version` must be one of 'small', 'large'. Received: version={version}")
    return _regression(600 if version == "small" else 20640, 8, test_split, 25000.0, 500000.0, np.float32)


def _word_index(size: int):
    def get_word_index(path: str = "") -> dict[str, int]:
        return {f"word{i}": i for i in range(1, size)}

    return get_word_index


LOADERS: dict[str, Callable[..., Any]] = {
    "mnist": mnist,
    "fashion_mnist": fashion_mnist,
    "cifar10": cifar10,
    "cifar100": cifar100,
    "imdb": imdb,
    "reuters": reuters,
    "boston_housing": boston_housing,
    "california_housing": california_housing,
}
WORD_INDEX = {"imdb": 88584, "reuters": 30979}


def install(package: str) -> None:
    """Replace ``load_data`` in ``<package>.datasets.<name>`` and in the module it comes from."""
    import importlib

    for name, loader in LOADERS.items():
        served = _served(f"{package}.datasets.{name}", loader)
        for module_name in (f"{package}.datasets.{name}", f"{package}.src.datasets.{name}"):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            module.load_data = served
            if name in WORD_INDEX and hasattr(module, "get_word_index"):
                module.get_word_index = _word_index(WORD_INDEX[name])


def _served(label: str, loader: Callable[..., Any]) -> Callable[..., Any]:
    def load_data(*args, **kwargs):
        if label not in recorder.datasets:
            recorder.datasets.append(label)
        return loader(*args, **kwargs)

    load_data.__doc__ = f"Synthetic {label}.load_data() (autofix smoke --offline)."
    return load_data
