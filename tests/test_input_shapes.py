"""Which first layer gives a Sequential its input's shape where it is made (read as Keras 3
reads it), and the parts of autofix that ask it."""
from __future__ import annotations

import libcst as cst
import pytest

from autofix.engine import Options, analyse
from autofix.tf.input_shapes import gives_input_shape


def _layer(code: str) -> cst.Call:
    call = cst.parse_expression(code)
    assert isinstance(call, cst.Call)
    return call


@pytest.mark.parametrize(
    "names, code, shaped",
    [
        ({"keras.Input"}, "Input((4,))", True),
        ({"keras.layers.InputLayer"}, "InputLayer(batch_shape=(None, 4))", True),
        ({"keras.layers.Dense"}, "Dense(8, input_shape=(4,))", True),
        ({"keras.layers.Dense"}, "Dense(8, input_dim=4)", True),
        ({"keras.layers.Dense"}, "Dense(8)", False),
        ({"keras.layers.Dense"}, "Dense(8, batch_size=32)", False),
        # An Embedding's input_dim is its vocabulary's size.
        ({"keras.layers.Embedding"}, "Embedding(input_dim=100, output_dim=4)", False),
        ({"keras.layers.Embedding"}, "Embedding(100, 4, input_shape=(10,))", True),
    ],
)
def test_which_first_layer_gives_the_input_shape(names, code, shaped):
    assert gives_input_shape(names, _layer(code)) is shaped


GAN = '''
import numpy as np
import keras
import tensorflow as tf

tokens = np.random.randint(0, 100, size=(64, 10))
labels = np.random.rand(64, 1).astype("float32")


class Wrapper(keras.Model):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.inner(x) - y))
        grads = tape.gradient(loss, self.inner.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.inner.trainable_variables))
        return {"loss": loss}


inner = keras.Sequential([FIRST, keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)])
model = Wrapper(inner)
model.compile(optimizer="sgd")
model.fit(tokens, labels, batch_size=16, epochs=1)
'''


def test_a_wrapper_of_a_model_starting_with_an_embedding_is_not_marked_built():
    # Keras 3 builds a model with a train_step and no call() before fit under a strategy; the
    # models it holds must be built where they are made. An Embedding's input_dim does not build
    # its Sequential there; an Input does.
    with_input = analyse(GAN.replace("FIRST", "keras.Input((10,)), keras.layers.Embedding(100, 4)"), Options(migrate="mirrored"))
    assert with_input.new_text is not None and "model.built = True" in with_input.new_text
    embedding = analyse(GAN.replace("FIRST", "keras.layers.Embedding(input_dim=100, output_dim=4)"), Options(migrate="mirrored"))
    assert embedding.new_text is None
    assert any("has a train_step but no call()" in (f.reason or f.message) for f in embedding.findings)


def test_a_strategy_after_an_unbuilt_embedding_model_is_not_late():
    source = (
        "import keras\nimport tensorflow as tf\n"
        "model = keras.Sequential([keras.layers.Embedding(input_dim=100, output_dim=4), keras.layers.Dense(1)])\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
    )
    assert [f.code for f in analyse(source, Options(select=("TFD011",))).findings] == []
    built = source.replace("keras.layers.Embedding(input_dim=100, output_dim=4)", "keras.Input((3,))")
    assert [f.code for f in analyse(built, Options(select=("TFD011",))).findings] == ["TFD011"]
