"""Shapes of correct code that autofix once rewrote, and of real bugs it once half fixed or
reported twice, each run through the command line as a user would: ``autofix diff`` must show
nothing for correct code, and a bug that cannot be fixed whole is reported once, with why.
(The inputs are written here; they mirror defects found on real public code.)"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from autofix.cli import main

CORRECT = {
    # The global batch, named so: not multiplied by the replica count again.
    "global_batch_named": (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "GLOBAL_BATCH = 512  # the global batch: 8 GPUs x 64\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([2048, 4]), tf.zeros([2048]))).batch(GLOBAL_BATCH)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss='mse')\n"
        "model.fit(ds, epochs=1)\n"
    ),
    # The batch is divided by the replica count on the next line: it is global.
    "global_batch_divided": (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "TOTAL = 128\n"
        "PER_DEVICE = TOTAL // strategy.num_replicas_in_sync\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([512, 4]), tf.zeros([512]))).batch(TOTAL)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(ds, epochs=1)\n"
    ),
    # Multi-worker: per-worker batch times the number of workers is the global batch
    # (on Keras 2: Keras 3 fit under MultiWorkerMirroredStrategy is TFD006).
    "multi_worker_global": (
        "import tensorflow as tf\n"
        "import tf_keras\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "NUM_WORKERS = 4\n"
        "batch = 32 * NUM_WORKERS\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([512, 4]), tf.zeros([512]))).repeat().batch(batch)\n"
        "with strategy.scope():\n"
        "    model = tf_keras.Sequential([tf_keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(ds, epochs=1, steps_per_epoch=5)\n"
    ),
    # TPU: global batches by convention.
    "tpu_global": (
        "import tensorflow as tf\n"
        "resolver = tf.distribute.cluster_resolver.TPUClusterResolver()\n"
        "strategy = tf.distribute.TPUStrategy(resolver)\n"
        "BATCH = 1024\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([8192, 4]), tf.zeros([8192]))).batch(BATCH, drop_remainder=True)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse', steps_per_execution=32)\n"
        "model.fit(ds, epochs=1)\n"
    ),
    # One replica: nothing to scale.
    "one_device": (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.OneDeviceStrategy('/gpu:0')\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([64, 4]), tf.zeros([64]))).batch(16)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(ds, epochs=1)\n"
    ),
    "default_strategy": (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.get_strategy()\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([64, 4]), tf.zeros([64]))).batch(16)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(ds, epochs=1)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_code_is_not_a_finding_and_diff_is_empty(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(CORRECT[name])
    result = CliRunner().invoke(main, ["diff", "--isolated", "train.py"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert CliRunner().invoke(main, ["check", "--isolated", "train.py"]).exit_code == 0


def test_a_unit_in_a_compound_statement_is_reported_once_per_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "for attempt in range(2):\n"
        "    try:\n"
        "        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "        model.compile(optimizer='adam', loss='mse')\n"
        "        model.fit(tf.zeros([8, 2]), tf.zeros([8, 1]))\n"
        "    finally:\n"
        "        pass\n"
    )
    result = CliRunner().invoke(main, ["check", "--isolated", "--select", "TFD001", "--format", "json", "t.py"])
    places = [(item["line"], item["column"]) for item in json.loads(result.stdout)]
    assert places == [(5, 17), (6, 9)]
    sarif = CliRunner().invoke(main, ["check", "--isolated", "--select", "TFD001", "--format", "sarif", "t.py"])
    assert len(json.loads(sarif.stdout)["runs"][0]["results"]) == 2


def test_a_model_made_in_a_condition_is_reported_not_half_fixed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "if (net := tf.keras.Sequential([tf.keras.layers.Dense(1)])) is not None:\n"
        "    net.compile(optimizer='adam', loss='mse')\n"
        "    net.fit(tf.zeros([8, 2]), tf.zeros([8, 1]))\n"
    )
    (tmp_path / "w.py").write_text(source)
    result = CliRunner().invoke(main, ["check", "--isolated", "--select", "TFD001", "--format", "json", "w.py"])
    items = json.loads(result.stdout)
    assert [(i["line"], i["fixable"]) for i in items] == [(3, False), (4, False)]
    assert "if condition" in items[0]["reason"]
    assert "cannot be fixed whole" in items[1]["reason"]
    fixed = CliRunner().invoke(main, ["fix", "--isolated", "--select", "TFD001", "w.py"])
    assert fixed.exit_code == 0
    assert (tmp_path / "w.py").read_text() == source
