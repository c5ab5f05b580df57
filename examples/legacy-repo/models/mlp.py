"""Model definitions. No strategy here: these are called from the training scripts."""
from tensorflow import keras


def build_mlp(features=20, classes=4, hidden=64):
    inputs = keras.Input(shape=(features,))
    x = keras.layers.Dense(hidden, activation="relu")(inputs)
    x = keras.layers.Dropout(0.2)(x)
    outputs = keras.layers.Dense(classes)(x)
    return keras.Model(inputs, outputs, name="mlp")
