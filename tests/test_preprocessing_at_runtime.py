"""The facts that decide TFD001 on Keras preprocessing layers, run (docs/keras-versions.md,
"Preprocessing layers"): a Normalization adapted outside the scope and built into a model made
in it trains mirrored on Keras 3, fails on tf_keras, and trains on tf_keras once made and
adapted in the scope, with the same statistics."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import announce
from fixturecases import FIXTURES

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None,
        reason="TensorFlow is not installed (pip install -e '.[smoke]')",
    ),
]
REPLICAS = 2
TFD001 = FIXTURES / "tfd001"

# Where adapt() puts the statistics, and whether they are mirrored, made and adapted outside
# the scope, made in it and adapted outside, and both in it.
_STATISTICS = """
import json, sys
import numpy as np
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
if sys.argv[1] == "2":
    import tf_keras as keras
else:
    import keras
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = tf.distribute.MirroredStrategy(devices)
x = np.random.RandomState(0).normal(5.0, 2.0, (64, 3)).astype("float32")
found = {}
for where in ("outside", "made_inside", "inside"):
    if where == "outside":
        norm = keras.layers.Normalization()
        norm.adapt(x)
    elif where == "made_inside":
        with strategy.scope():
            norm = keras.layers.Normalization()
        norm.adapt(x)
    else:
        with strategy.scope():
            norm = keras.layers.Normalization()
            norm.adapt(x)
    mirrored = [isinstance(getattr(w, "value", w) if not isinstance(w, tf.Variable) else w, tf.distribute.DistributedValues) for w in norm.weights]
    found[where] = {"mean": np.asarray(norm.mean).ravel().tolist(), "mirrored": mirrored, "trainable": [bool(w.trainable) for w in norm.weights]}
print("RESULT " + json.dumps(found))
"""


def _statistics(keras: int) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if keras == 2:
        env["TF_USE_LEGACY_KERAS"] = "1"
    done = subprocess.run([sys.executable, "-c", _STATISTICS, str(keras)], capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("keras", [3, 2])
def test_adapt_makes_the_variables_and_the_scope_does_not_change_the_statistics(keras):
    announce(f"adapting Normalization inside and outside the scope, Keras {keras}")
    found = _statistics(keras)
    assert found["inside"]["mean"] == pytest.approx(found["outside"]["mean"])
    assert found["made_inside"]["mean"] == pytest.approx(found["outside"]["mean"])
    for where in found:
        assert not any(found[where]["trainable"])
    assert not any(found["outside"]["mirrored"])
    # Made in the scope but adapted outside it, the variables are made outside: moving the
    # layer alone changes nothing.
    assert not any(found["made_inside"]["mirrored"])
    assert found["inside"]["mirrored"] and all(found["inside"]["mirrored"])


def _run(paths: list, legacy_keras: bool) -> list:
    from autofix.smoke import run_many

    announce(f"training {len(paths)} preprocessing fixtures, Keras {2 if legacy_keras else 3}")
    return run_many([str(p) for p in paths], replicas=REPLICAS, steps=2, timeout=180, legacy_keras=legacy_keras)


def test_keras3_trains_mirrored_with_a_normalization_adapted_outside():
    (report,) = _run([TFD001 / "noop_adapted_layer_in_model_keras3.py"], legacy_keras=False)
    assert report.ok, report.failures
    assert report.fits and all(f.replicas == REPLICAS and f.all_mirrored for f in report.fits)


def test_tf_keras_fails_with_it_and_trains_once_it_is_made_and_adapted_in_the_scope():
    broken, fixed = _run([TFD001 / "adapted_layer_keras2.py", TFD001 / "adapted_layer_keras2.fixed.py"], legacy_keras=True)
    assert not broken.ok
    assert "was not created in the distribution strategy scope" in (broken.error or "")
    assert fixed.ok, fixed.failures
    assert fixed.fits and all(f.replicas == REPLICAS and f.all_mirrored for f in fixed.fits)
