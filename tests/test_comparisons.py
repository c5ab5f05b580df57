"""Single-device twins (analysis/training/comparisons.py): a model built like a distributed one
and kept on one device on purpose, with what it is fit at."""

from __future__ import annotations

import libcst as cst
import pytest

from autofix.analysis.program import Program
from autofix.analysis.syntax import nodes_in
from autofix.analysis.training.comparisons import Comparisons
from autofix.engine import _parsed

HEADER = "import numpy as np\nimport tensorflow as tf\nx = np.ones((64, 4), 'float32')\n"
DISTRIBUTED = (
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = {build}\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, x, batch_size=16)\n"
)
SEQUENTIAL = "tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])"


def _twins(source: str) -> list[tuple[str, list[str]]]:
    """For the fit of ``model``: each twin's construction and the batches its fits get."""
    program = Program(*_parsed(source))
    comparisons = Comparisons.of(program)
    fit = next(
        c
        for c in nodes_in(program.module, cst.Call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "fit" and program.module.code_for_node(c.func.value) == "model"
    )
    found = []
    for twin in comparisons.twins(fit):
        batches = [comparisons.fit_batch(f) for f in twin.fits]
        found.append((program.module.code_for_node(twin.maker), [program.module.code_for_node(b) if b is not None else "" for b in batches]))
    return found


@pytest.mark.parametrize(
    "plain, twins",
    [
        # Built alike (quotes and spacing aside), fit at its own batch.
        (
            'plain = tf.keras.Sequential([tf.keras.Input((4,)),  tf.keras.layers.Dense(4)])\n'
            "plain.compile(optimizer='adam', loss='mse')\nplain.fit(x, x, batch_size=16)\n",
            [("tf.keras.Sequential([tf.keras.Input((4,)),  tf.keras.layers.Dense(4)])", ["16"])],
        ),
        # Built and compiled, never fit.
        ("plain = " + SEQUENTIAL + "\nplain.compile(optimizer='adam', loss='mse')\n", [(SEQUENTIAL, [])]),
        # Built otherwise: no twin.
        ("plain = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8)])\nplain.fit(x, x, batch_size=16)\n", []),
        # Made in a strategy's scope too: no twin.
        ("with strategy.scope():\n    plain = " + SEQUENTIAL + "\nplain.fit(x, x, batch_size=16)\n", []),
    ],
)
def test_a_twin_is_a_model_built_alike_and_kept_on_one_device(plain, twins):
    assert _twins(HEADER + DISTRIBUTED.format(build=SEQUENTIAL) + plain) == twins


def test_layers_added_one_by_one_are_compared_in_order():
    distributed = (
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential()\n"
        "    model.add(tf.keras.layers.Dense(8, input_shape=(4,)))\n"
        "    model.add(tf.keras.layers.Dense(4))\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, x, batch_size=16)\n"
    )
    alike = "plain = tf.keras.Sequential()\nplain.add(tf.keras.layers.Dense(8, input_shape=(4,)))\nplain.add(tf.keras.layers.Dense(4))\nplain.fit(x, x, batch_size=16)\n"
    swapped = "plain = tf.keras.Sequential()\nplain.add(tf.keras.layers.Dense(4))\nplain.add(tf.keras.layers.Dense(8, input_shape=(4,)))\nplain.fit(x, x, batch_size=16)\n"
    assert _twins(HEADER + distributed + alike) == [("tf.keras.Sequential()", ["16"])]
    assert _twins(HEADER + distributed + swapped) == []


def test_one_builder_makes_twins():
    builder = "def create_model():\n    return " + SEQUENTIAL + "\n"
    plain = "plain = create_model()\nplain.compile(optimizer='adam', loss='mse')\nplain.fit(x, x, batch_size=16)\n"
    assert _twins(HEADER + builder + DISTRIBUTED.format(build="create_model()") + plain) == [("create_model()", ["16"])]
