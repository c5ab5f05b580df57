"""Which Keras a file runs on, from what it says: a notebook's ``pip install`` pins, and Keras
names that only a TensorFlow older than 2.16 (Keras 2) has. TFD006 (Keras 3 fit under
MultiWorkerMirroredStrategy) does not apply to a file that runs on Keras 2."""

from __future__ import annotations

import pytest

from autofix.analysis.environment import from_shell_lines
from autofix.engine import Options, analyse, process_path
from autofix.tf.keras2_only import keras2_only
from fixturecases import FIXTURES, read

TFD006 = Options(select=("TFD006",))


@pytest.mark.parametrize(
    "line, keras2",
    [
        ("!pip install tensorflow==2.9.1", True),
        ('%pip install -q "keras<3"', True),
        ("!pip install keras~=2.13", True),
        ("!pip install keras==2.15.0 tensorflow", True),
        ('!pip install "tensorflow>=2.10,<2.16"', True),
        ("!pip3 install tensorflow-gpu~=2.4", True),
        ("!pip install tensorflow<=2.15.1", True),
        ("!pip install tensorflow>=2.16", False),
        ("!pip install tensorflow<2.17", False),
        ("!pip install tensorflow==2.16.1", False),
        ("!pip install -U keras>=3", False),
        ("!pip install keras-cv<0.9 keras-nlp==0.5", False),
        ("!pip install tf-keras==2.15", False),
        ("!pip install tensorflow_datasets==4.0 tensorflow-addons==0.16", False),
        ("!echo keras<3", False),
    ],
)
def test_pins_in_pip_install_lines(line, keras2):
    assert (from_shell_lines([line]).keras2 is not None) is keras2


def test_a_pin_names_its_line():
    why = from_shell_lines(["!nvidia-smi", '%pip install -q "keras<3"']).keras2
    assert why is not None and "keras<3" in why and "Keras 2" in why


@pytest.mark.parametrize(
    "name, only",
    [
        ("keras.mixed_precision.experimental.Policy", True),
        ("keras.mixed_precision.experimental", True),
        ("keras.utils.multi_gpu_model", True),
        ("keras.mixed_precision.Policy", False),
        ("keras.layers.experimental.preprocessing.Rescaling", False),
        ("keras.losses.Reduction.NONE", False),
        ("keras.utils", False),
    ],
)
def test_names_only_an_older_tensorflow_has(name, only):
    assert keras2_only(name) is only


def _tfd006_lines(path):
    return [f.line for f in process_path(str(path), TFD006).findings if f.code == "TFD006"]


def test_a_notebook_that_pins_keras2_is_not_reported():
    assert _tfd006_lines(FIXTURES / "notebooks" / "multiworker_keras2_pinned.ipynb") == []


def test_the_same_notebook_without_the_pin_is_reported():
    assert _tfd006_lines(FIXTURES / "notebooks" / "multiworker_keras3.ipynb") == [2]


def test_a_removed_api_means_keras2_for_tfd006():
    source = read(FIXTURES / "tfd006" / "noop_tensorflow_removed_api.py")
    assert analyse(source, TFD006).findings == []
    without = "\n".join(line for line in source.splitlines() if not line.startswith(("policy", "tf.keras.mixed_precision"))) + "\n"
    findings = analyse(without, TFD006).findings
    assert [f.code for f in findings] == ["TFD006"]


def test_keras2_from_a_removed_api_keeps_an_optimizer_outside_the_scope_unreported():
    """Keras 2 trains with an optimizer made outside the scope (TFD001 leaves it)."""
    source = (
        "import tensorflow as tf\n"
        "from tensorflow.keras.mixed_precision import experimental as mixed_precision\n"
        "mixed_precision.set_policy('mixed_float16')\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "optimizer = tf.keras.optimizers.Adam(1e-3)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer=optimizer, loss='mse')\n"
        "model.fit(tf.zeros([64, 4]), tf.zeros([64, 1]), batch_size=8 * strategy.num_replicas_in_sync)\n"
    )
    tfd001 = Options(select=("TFD001",))
    assert analyse(source, tfd001).findings == []
    spelled_for_keras3 = source.replace("from tensorflow.keras.mixed_precision import experimental as mixed_precision\n", "").replace(
        "mixed_precision.set_policy('mixed_float16')\n", ""
    )
    assert [f.code for f in analyse(spelled_for_keras3, tfd001).findings] == ["TFD001"]


@pytest.mark.parametrize(
    "command, keras2",
    [
        ('os.system("pip install -q keras==2.15.0")', True),
        ('subprocess.check_call([sys.executable, "-m", "pip", "install", "tensorflow==2.15.1"])', True),
        ("get_ipython().system('pip install \"tensorflow<2.16\"')", True),
        ('get_ipython().run_line_magic("pip", "install keras<3")', True),
        ('os.system("pip install tensorflow")', False),
        ('print("pip install keras<3")', False),
    ],
)
def test_a_script_that_installs_keras2_itself(command, keras2):
    source = read(FIXTURES / "tfd006" / "noop_script_installs_keras2.py").replace(
        'subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "tensorflow==2.15.1"])', "import os\n" + command
    )
    assert bool(analyse(source, TFD006).findings) is not keras2


@pytest.mark.parametrize("given", ["workers=-1", "use_multiprocessing=True", "max_queue_size=20"])
def test_fit_given_a_keras2_feeder_argument_runs_on_keras2(given):
    """Keras 3's fit, evaluate and predict reject workers=, use_multiprocessing= and
    max_queue_size= (measured on Keras 3.15: TypeError / ValueError); a file that passes one
    runs on Keras 2, which trains with an optimizer made outside the scope."""
    source = read(FIXTURES / "tfd001" / "noop_keras2_fit_feeder_arguments.py").replace("workers=-1, use_multiprocessing=True", given)
    tfd001 = Options(select=("TFD001",))
    assert analyse(source, tfd001).findings == []
    without = source.replace(f", {given}", "")
    assert [f.code for f in analyse(without, tfd001).findings] == ["TFD001"]
    # A model built outside the scope is a bug on Keras 2 too: still reported and fixed.
    outside = source.replace("with strategy.scope():\n    encoder", "if True:\n    encoder")
    findings = analyse(outside, tfd001).findings
    assert findings and all(f.fixable for f in findings)


def test_a_keras2_feeder_argument_means_keras2_for_tfd006():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(tf.zeros([64, 4]), tf.zeros([64, 1]), batch_size=8 * strategy.num_replicas_in_sync{given})\n"
    )
    assert analyse(source.format(given=", workers=4"), TFD006).findings == []
    assert [f.code for f in analyse(source.format(given=""), TFD006).findings] == ["TFD006"]


# --- the version a file checks for itself ------------------------------------------------------

_CHECKED = (
    "import sys\n"
    "import tensorflow as tf\n"
    "from packaging import version\n"
    "{check}\n"
    "\n"
    "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    '    model.compile(optimizer="adam", loss="mse")\n'
    "model.fit(tf.zeros((8, 4)), tf.zeros((8, 1)), epochs=1)\n"
)


@pytest.mark.parametrize(
    "check, keras2",
    [
        ('assert tf.__version__.startswith("2.3")', True),
        ('assert tf.__version__.startswith("2.1")', True),  # 2.1.x, by whole parts
        ('assert tf.__version__.startswith(("2.14", "2.15"))', True),
        ('assert tf.version.VERSION.startswith("2.15.")', True),
        ('assert version.parse(tf.__version__) < version.parse("2.4")', True),
        ('assert version.parse("2.4") > version.parse(tf.__version__)', True),
        ('assert tf.__version__ == "2.3.0"', True),
        ('assert tf.keras.__version__.startswith("2.")', True),  # Keras's own version
        ('if version.parse(tf.__version__) >= version.parse("2.16"):\n    raise RuntimeError("TF < 2.16")', True),
        ('if not tf.__version__.startswith("2.15"):\n    sys.exit("TF 2.15 only")', True),
        ('assert tf.__version__.startswith("2.15") and tf.executing_eagerly()', True),
        # What allows a Keras 3 TensorFlow too says nothing.
        ('assert tf.__version__.startswith("2.")', False),
        ('assert version.parse(tf.__version__) >= version.parse("2.0")', False),
        ('assert tf.__version__ < "2.4"', False),  # as text, "2.16.0" < "2.4" holds
        ('assert version.parse(tf.__version__) >= version.parse("2.16")', False),
        ('if version.parse(tf.__version__) < version.parse("2.16"):\n    print("old")', False),  # not a stop
        ('if tf.__version__.startswith("2.3"):\n    raise RuntimeError("not 2.3")', False),  # 2.3 excluded
        ('def check():\n    assert tf.__version__.startswith("2.3")', False),  # may never run
        ('assert tf.__version__.startswith("2.3") or tf.__version__ >= "2"', False),
    ],
)
def test_a_file_that_checks_for_an_older_tensorflow_runs_on_keras2(check, keras2):
    result = analyse(_CHECKED.format(check=check), TFD006)
    assert (not [f for f in result.findings if f.code == "TFD006"]) is keras2


def test_the_version_check_is_named_as_the_reason():
    from autofix.analysis.facts.script import Facts
    from autofix.analysis.program import Program
    import libcst as cst

    source = _CHECKED.format(check='assert tf.__version__.startswith("2.3")')
    program = Program(cst.parse_module(source), source=source)
    assert Facts.of(program).needs_keras2 == "it checks that it runs on an older TensorFlow (line 4), whose Keras is Keras 2"


# --- what Keras 3 refuses at run time ----------------------------------------------------------

_CHECKPOINTED = read(FIXTURES / "tfd006" / "noop_keras2_checkpoint_path.py")
_CHECKPOINT_CALL = 'tf.keras.callbacks.ModelCheckpoint(\n    os.path.join("ckpt", "weights_{epoch:02d}.hdf5"),\n    save_weights_only=True,\n)'


@pytest.mark.parametrize(
    "checkpoint, keras2",
    [
        ('tf.keras.callbacks.ModelCheckpoint("./checkpoints/ckpt", save_freq=1000)', True),  # no extension
        ('tf.keras.callbacks.ModelCheckpoint("ckpt/model_{epoch:02d}.hdf5")', True),  # .hdf5 is refused too
        ('tf.keras.callbacks.ModelCheckpoint("ckpt_{epoch}", save_weights_only=True)', True),
        ('tf.keras.callbacks.ModelCheckpoint("w.h5", "val_loss", 0, False, True)', True),  # weights, positionally
        ('tf.keras.callbacks.ModelCheckpoint(f"{out}/model", save_best_only=True)', True),
        ('tf.keras.callbacks.ModelCheckpoint(out + "/ckpt.tf")', True),
        # A template's written end: what follows its last placeholder.
        ('tf.keras.callbacks.ModelCheckpoint(os.path.join(out, "%s_train.h5" % name), save_weights_only=True)', True),
        ('tf.keras.callbacks.ModelCheckpoint("{}_{:02d}_train.h5".format(name, 3), save_weights_only=True)', True),
        ('tf.keras.callbacks.ModelCheckpoint("%s.weights.h5" % name, save_weights_only=True)', False),
        # An end the value before it may complete: "{name}.h5" is "m.weights.h5" for name "m.weights".
        ('tf.keras.callbacks.ModelCheckpoint(f"{name}.h5", save_weights_only=True)', False),
        ('tf.keras.callbacks.ModelCheckpoint("%s" % name, save_weights_only=True)', False),
        # What Keras 3 takes, or a path whose end the code does not show: nothing said.
        ('tf.keras.callbacks.ModelCheckpoint("model.keras")', False),
        ('tf.keras.callbacks.ModelCheckpoint("model_{epoch:02d}.h5")', False),
        ('tf.keras.callbacks.ModelCheckpoint("w.weights.h5", save_weights_only=True)', False),
        ('tf.keras.callbacks.ModelCheckpoint(f"{out}/best.keras", save_best_only=True)', False),
        ('tf.keras.callbacks.ModelCheckpoint("w.h5", save_weights_only=weights_only)', False),  # .h5 fits one of the two
        ("tf.keras.callbacks.ModelCheckpoint(out)", False),
        ('tf.keras.callbacks.ModelCheckpoint(f"{out}/{name}")', False),
    ],
)
def test_a_checkpoint_path_keras3_refuses_means_keras2(checkpoint, keras2):
    source = _CHECKPOINTED.replace(_CHECKPOINT_CALL, checkpoint).replace("import os\n", 'import os\nout, name, weights_only = "runs", "m.keras", False\n')
    assert checkpoint in source
    assert (not analyse(source, TFD006).findings) is keras2


_SAVED = read(FIXTURES / "tfd006" / "noop_keras2_save_format.py")
_SAVE_CALL = 'model.save(os.path.join(out, "model"), save_format="tf")'


@pytest.mark.parametrize(
    "save, keras2",
    [
        (_SAVE_CALL, True),  # ValueError on Keras 3 (measured)
        ('model.save_weights(os.path.join(out, "w"), save_format="tf")', True),  # TypeError
        ('model.save_weights("w.weights.h5", save_format="h5")', True),  # any save_format
        ('tf.keras.models.save_model(model, os.path.join(out, "model"), save_format="tf")', True),
        # What Keras 3 takes (a warning at most), or no save_format: nothing said.
        ('model.save("model.h5", save_format="tf")', False),
        ('model.save(f"{out}/model.keras", save_format="tf")', False),
        ('model.save(os.path.join(out, "model.h5"), save_format="h5")', False),
        ('model.save(os.path.join(out, "model.keras"))', False),
        ('tf.saved_model.save(model, os.path.join(out, "model"))', False),
        ('np.save(os.path.join(out, "x"), np.zeros(3))', False),
        # Written for both Kerases: the branch tests the version.
        ('if tf.__version__ < "2.16":\n        model.save(os.path.join(out, "model"), save_format="tf")\n    else:\n        model.save(os.path.join(out, "model.keras"))', False),
    ],
)
def test_a_save_format_keras3_refuses_means_keras2(save, keras2):
    source = _SAVED.replace(_SAVE_CALL, save)
    assert save in source
    assert (not analyse(source, TFD006).findings) is keras2


_LOGS_RATE = read(FIXTURES / "tfd001" / "noop_keras2_callback_reads_optimizer_lr.py")
_READ = "tf.keras.backend.get_value(self.model.optimizer.lr)"


@pytest.mark.parametrize(
    "read_rate, keras2",
    [
        (_READ, True),
        ("float(optimizer.lr)", True),  # an optimizer made here
        ("self.model.optimizer.lr.numpy()", True),
        ("self.model.optimizer.learning_rate", False),  # Keras 3 has it
        ('getattr(self.model.optimizer, "lr", 0.0)', False),  # guarded
        ('self.model.optimizer.lr if hasattr(self.model.optimizer, "lr") else 0.0', False),
        ("self.model.lr", False),  # not an optimizer
        ("self.cfg.optimizer.lr", False),  # a configuration's number, not a Keras optimizer
        ("self.trainer.optimizer.lr", False),
        ("self.keras_model.optimizer.lr", True),
    ],
)
def test_an_optimizer_lr_read_means_keras2(read_rate, keras2):
    source = _LOGS_RATE.replace(_READ, read_rate)
    findings = analyse(source, Options(select=("TFD001",))).findings
    assert (not findings) is keras2


def test_an_optimizer_lr_read_in_a_try_that_catches_attribute_error_says_nothing():
    source = _LOGS_RATE.replace(
        f"        rate = {_READ}\n",
        "        try:\n            rate = self.model.optimizer.lr\n        except AttributeError:\n            rate = self.model.optimizer.learning_rate\n",
    )
    assert "except AttributeError" in source
    assert [f.code for f in analyse(source, Options(select=("TFD001",))).findings] == ["TFD001"]


def test_setting_lr_is_not_a_read():
    source = _LOGS_RATE.replace(f"        rate = {_READ}\n", "        self.model.optimizer.lr = 0.001\n        rate = 0.001\n")
    assert [f.code for f in analyse(source, Options(select=("TFD001",))).findings] == ["TFD001"]


def test_the_refusal_is_named_as_the_reason():
    from autofix.analysis.facts.script import Facts
    from autofix.analysis.program import Program
    import libcst as cst

    program = Program(cst.parse_module(_LOGS_RATE), source=_LOGS_RATE)
    assert Facts.of(program).needs_keras2 == "it reads self.model.optimizer.lr (line 9), which Keras 3 optimizers do not have"
    program = Program(cst.parse_module(_CHECKPOINTED), source=_CHECKPOINTED)
    assert Facts.of(program).needs_keras2 == "its ModelCheckpoint saves to a path ending 'weights_{epoch:02d}.hdf5' (line 13), which Keras 3 refuses"


@pytest.mark.parametrize(
    "header, keras2",
    [
        ("#########\n# Worker code\n#\n# tested with TensorFlow 2.0.0-rc0\n#########\nimport os\n", True),
        ("# tested with TensorFlow 2.0.1 and 2.0.1-gpu\n", True),
        ('"""Trainer.\n\nTested with tensorflow 2.4.1.\n"""\nimport tensorflow as tf\n', True),
        ("# written for Keras 2.2.4\n", True),
        ("# works with TensorFlow 2.4+\n", False),  # and with any later one
        ("# tested with TensorFlow 2.4 or later\n", False),
        ("# tested with TensorFlow 2.17\n", False),  # Keras 3
        ("import tensorflow as tf\nx = 1  # tested with tf 2.3\n", False),  # not the header
    ],
)
def test_the_tensorflow_a_header_says_the_file_was_made_with(header, keras2):
    from autofix.analysis.facts.version_checks import stated_version

    assert (stated_version(header) is not None) is keras2


def test_a_header_naming_an_older_tensorflow_makes_the_file_keras2():
    source = read(FIXTURES / "tfd006" / "noop_header_tested_with_old_tensorflow.py")
    options = Options(select=("TFD006",))
    assert analyse(source, options).findings == []
    newer = source.replace("tested with TensorFlow 2.3.1", "tested with TensorFlow 2.16.1")
    assert [f.code for f in analyse(newer, options).findings] == ["TFD006"]


def test_a_notebooks_tested_with_comment_does_not_pin_it(tmp_path):
    """A notebook runs on the runtime of the day (Colab's): "# Tested with TensorFlow 2.1.0" in
    a cell says nothing of the Keras it runs; the same header in a script does."""
    import json

    source = read(FIXTURES / "tfd006" / "noop_header_tested_with_old_tensorflow.py")
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source.splitlines(keepends=True)}]
    notebook = tmp_path / "train.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert [f.code for f in process_path(str(notebook), Options(select=("TFD006",))).findings] == ["TFD006"]
    script = tmp_path / "train.py"
    script.write_text(source)
    assert not process_path(str(script), Options(select=("TFD006",))).findings
