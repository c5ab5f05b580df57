"""TFD006 keras-multi-worker-fit: a finding that fails check; --unsafe-fixes switches the file to tf_keras."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read

UNSAFE = Options(select=("TFD006",), unsafe_fixes=True)
SAFE_ONLY = Options(select=("TFD006",))


@pytest.mark.parametrize("case", params("tfd006", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd006", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd006", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, UNSAFE)


@pytest.mark.parametrize("case", params("tfd006", "fixed"))
def test_without_unsafe_fixes_it_fails_check_and_says_how_to_fix(case):
    analysis = analyse(read(case.before), SAFE_ONLY)
    assert analysis.new_text is None
    assert analysis.findings and all(not f.unsafe and not f.fixable for f in analysis.findings)
    assert all("--unsafe-fixes" in f.reason for f in analysis.findings)


def _script(imports: str, body: str) -> str:
    return (
        f"{imports}\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "with strategy.scope():\n"
        f"{body}"
        "model.fit(dataset, epochs=1)\n"
    )


def test_fit_evaluate_train_on_batch_are_reported_and_predict_is_not():
    source = _script(
        "import keras\nimport tensorflow as tf\n",
        "    model = keras.Sequential([keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    ) + "model.evaluate(dataset)\nmodel.train_on_batch(x, y)\nmodel.test_on_batch(x, y)\nmodel.predict(dataset)\n"
    analysis = analyse(source, UNSAFE)
    assert [f.line for f in analysis.findings] == [8, 9, 10, 11]
    assert "keras-team/keras#20585" in analysis.findings[0].message
    # One switch of the file for all of them.
    assert analysis.new_text.count("tf_keras") == 1


def test_import_keras_is_keras_3_even_when_the_file_names_the_legacy_variable():
    source = _script(
        "import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nimport keras\nimport tensorflow as tf\n",
        "    model = keras.Sequential([keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    )
    analysis = analyse(source, UNSAFE)
    assert [f.code for f in analysis.findings] == ["TFD006"]
    assert "import tf_keras as keras\n" in analysis.new_text


def test_mixed_spellings_switch_both():
    source = _script(
        "import os\nimport keras\nimport tensorflow as tf\nfrom keras.layers import Dense\n",
        "    model = tf.keras.Sequential([Dense(1), keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    )
    analysis = analyse(source, UNSAFE)
    assert analysis.new_text.startswith(
        "import os\n"
        'os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 2 (tf_keras): Keras 3 cannot fit under MultiWorkerMirroredStrategy\n'
        "import tf_keras as keras\nimport tensorflow as tf\nfrom tf_keras.layers import Dense\n"
    )


def test_a_file_mixing_tf_keras_in_is_left_alone():
    source = _script(
        "import keras\nimport tf_keras\nimport tensorflow as tf\n",
        "    model = keras.Sequential([keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    )
    assert analyse(source, UNSAFE).findings == []


def test_keras_imported_in_a_function_is_reported_without_a_fix():
    source = (
        "import tensorflow as tf\n"
        "def main():\n"
        "    import keras\n"
        "    strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "    with strategy.scope():\n"
        "        model = keras.Sequential([keras.layers.Dense(1)])\n"
        "        model.compile(optimizer='sgd', loss='mse')\n"
        "    model.fit(dataset)\n"
    )
    (finding,) = analyse(source, UNSAFE).findings
    assert finding.reason == "no automatic fix: Keras is imported inside a function or block"


def test_a_suppressed_fit_keeps_the_whole_file_as_it_is():
    source = _script(
        "import keras\nimport tensorflow as tf\n",
        "    model = keras.Sequential([keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    ) + "model.evaluate(dataset)  # autofix: ignore[TFD006]\n"
    analysis = analyse(source, UNSAFE)
    assert analysis.new_text is None
    assert [f.suppressed for f in analysis.findings] == [False, True]


def test_a_relative_import_is_named_as_a_module_of_the_files_own():
    source = (
        "from .base import Base\n"
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(dataset)\n"
    )
    (finding,) = analyse(source, UNSAFE).findings
    assert finding.reason == "no automatic fix: the file imports a module of its own, which may make Keras 3 objects; switch it to tf_keras too"


def test_a_hub_layer_outside_any_model_says_nothing_of_keras():
    """hub.KerasLayer is a tf_keras layer, which no Keras 3 model takes (docs/keras-versions.md):
    put in the model, the file runs on Keras 2 (fixtures/tfd006/noop_hub_keras_layer*.py). Called
    eagerly on a tensor, or handed to a helper autofix does not follow, it says nothing: the
    finding stays."""
    from autofix.analysis.facts.script import Facts
    from autofix.analysis.program import Program
    import libcst as cst

    model = (
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.Input((50,)), tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(tf.data.Dataset.from_tensor_slices((vectors, [1.0, 0.0])).batch(2), epochs=1)\n"
    )
    head = "import tensorflow as tf\nimport tensorflow_hub as hub\nstrategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
    eager = head + "embed = hub.KerasLayer('https://tfhub.dev/google/nnlm-en-dim50/2')\nvectors = embed(tf.constant(['good', 'bad']))\n" + model
    assert [f.code for f in analyse(eager, SAFE_ONLY).findings] == ["TFD006"]
    in_model = eager.replace("tf.keras.Input((50,)), ", "embed, ")
    assert analyse(in_model, SAFE_ONLY).findings == []
    added = eager.replace("    model.compile", "    model.add(hub.KerasLayer('https://tfhub.dev/x/1'))\n    model.compile")
    assert analyse(added, SAFE_ONLY).findings == []
    # Given to a subclassed model, which calls it on real tensors: not measured, nothing said.
    subclassed = eager.replace(
        "    model = tf.keras.Sequential([tf.keras.Input((50,)), tf.keras.layers.Dense(1)])\n",
        "    model = Head(embed)\n",
    ).replace("strategy = tf.distribute", "class Head(tf.keras.Model):\n    def __init__(self, body):\n        super().__init__()\n        self.body = body\n\n    def call(self, x):\n        return self.body(x)\n\n\nstrategy = tf.distribute")
    assert [f.code for f in analyse(subclassed, SAFE_ONLY).findings] == ["TFD006"]
    program = Program(cst.parse_module(in_model), in_model)
    assert Facts.of(program).needs_keras2 == "it puts hub.KerasLayer (line 4) in a Keras model, which only Keras 2 (tf_keras) takes"


ENTRY = (
    "import tensorflow as tf\n"
    "from mypkg.models import build_model\n"
    "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = build_model()\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(dataset, epochs=1)\n"
)


def _checked(tmp_path, files: dict[str, str]):
    from autofix.engine import process_path

    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    return process_path(str(tmp_path / "train.py"), SAFE_ONLY)


def test_a_model_from_a_module_of_the_project_it_cannot_find_is_reported_with_why(tmp_path):
    """The question (Keras 3's fit under the strategy) does not depend on where the model is
    made, only on which Keras makes it: a module the file imports as its project's but that
    autofix cannot find is said, and nothing is rewritten."""
    (finding,) = _checked(tmp_path, {"train.py": ENTRY}).findings
    assert finding.code == "TFD006" and finding.line == 7 and not finding.fixable
    assert "the model is made by mypkg.models.build_model() (not found from this file), which autofix cannot read" in finding.reason


def test_a_model_from_a_module_it_cannot_find_is_not_reported_where_keras_2_runs(tmp_path):
    # A tf_keras import, or a pin of the repository, says Keras 2 runs: nothing to say.
    assert not _checked(tmp_path, {"train.py": "import tf_keras\n" + ENTRY}).findings
    assert not _checked(tmp_path, {"train.py": ENTRY, "requirements.txt": "tensorflow==2.12\n"}).findings


def test_a_model_from_a_module_it_finds_that_builds_it_with_keras_3_names_it(tmp_path):
    models = "import keras\n\ndef build_model():\n    return keras.Sequential([keras.layers.Dense(1)])\n"
    (finding,) = _checked(tmp_path, {"train.py": ENTRY, "mypkg/__init__.py": "", "mypkg/models.py": models}).findings
    assert "which autofix cannot read" not in finding.reason


@pytest.mark.parametrize(
    "shape, keras2",
    [("(args.n_hidden)", True), ("(784)", True), ("784", True), ("(args.n_hidden,)", False), ("(784,)", False), ("args.shape", False)],
)
def test_an_integer_input_shape_is_a_file_that_runs_on_keras2(shape, keras2):
    """keras.Input(shape=<an integer>): a number, or a flag declared type=int (measured: Keras
    3.15 raises "Cannot convert '784' to a shape.", tf_keras takes it). A tuple, or a value
    not known to be an integer, says nothing."""
    source = read(FIXTURES / "tfd006" / "noop_integer_input_shape.py").replace("shape=(args.n_hidden)", f"shape={shape}")
    findings = [f.code for f in analyse(source, SAFE_ONLY).findings]
    assert findings == ([] if keras2 else ["TFD006"])


@pytest.mark.parametrize(
    "imports, keras2",
    [
        ("from tensorflow.keras.utils.vis_utils import plot_model", True),
        ("from keras.utils.vis_utils import plot_model", True),
        ("from tensorflow.keras.layers.experimental import preprocessing", True),
        ("import keras.engine.training", True),
        ("from keras.layers.core import Dense", True),
        ("from tensorflow.keras.layers import Dense, CuDNNLSTM", True),
        # Keras 3 has these (its tf.keras keeps the legacy ImageDataGenerator).
        ("from tensorflow.keras.utils import plot_model", False),
        ("from tensorflow.keras.preprocessing.image import ImageDataGenerator", False),
        ("from tensorflow.keras import layers, backend as K", False),
        ("import tensorflow.keras.backend as K", False),
        ("from keras.src.engine import training", False),
        # Not an unconditional import at the top of the file.
        ("try:\n    from keras.utils.vis_utils import plot_model\nexcept ImportError:\n    plot_model = None", False),
        ("def draw(m):\n    from keras.utils.vis_utils import plot_model\n    plot_model(m)", False),
    ],
)
def test_a_top_level_import_keras3_lacks_is_a_file_that_runs_on_keras2(imports, keras2):
    """An import at the top of the file of a Keras module or name Keras 3 does not have stops the
    file there on Keras 3 (measured: ModuleNotFoundError / ImportError on Keras 3.15): it runs on
    Keras 2. What Keras 3 has (``autofix.tf.keras3_api``, either root), internal paths, and an
    import in a ``try`` or a function say nothing."""
    source = _script(
        f"import tensorflow as tf\n{imports}\n",
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    )
    findings = [f.code for f in analyse(source, SAFE_ONLY).findings]
    assert findings == ([] if keras2 else ["TFD006"])
    if keras2:
        import libcst as cst

        from autofix.analysis.facts.script import Facts
        from autofix.analysis.program import Program

        reason = Facts.of(Program(cst.parse_module(source), source=source)).needs_keras2
        assert reason is not None and "which Keras 3 does not have" in reason and "line 2" in reason


def test_what_keras3_can_import():
    from autofix.analysis.facts.keras3_refusals import keras3_importable

    assert keras3_importable("tensorflow.keras.layers.Dense") and keras3_importable("keras.optimizers.schedules.CosineDecay")
    assert keras3_importable("tensorflow.python.keras.layers.Dense")  # TensorFlow still ships it
    assert keras3_importable("numpy.float32") and keras3_importable("keras")
    assert not keras3_importable("keras.utils.vis_utils.plot_model")
    assert not keras3_importable("tensorflow.keras.wrappers.scikit_learn.KerasClassifier")


@pytest.mark.parametrize(
    "save, keras2",
    [
        ('model.save_weights("ckpt")', True),
        ('model.save_weights(os.path.join(out, "weights.h5"))', True),
        ('model.save_weights(f"{out}/epoch_{n}.ckpt")', True),
        ('model.save_weights(os.path.join(out, "final.weights.h5"))', False),
        ("model.save_weights(path)", False),  # its end is not written
        ('helper.save_weights("ckpt")', False),  # not a model
        ('if tf.__version__ < "2.16":\n    model.save_weights("ckpt")', False),
    ],
)
def test_save_weights_to_a_path_keras3_refuses_is_a_file_that_runs_on_keras2(save, keras2):
    """Keras 3's save_weights takes only paths ending in .weights.h5 (measured on Keras 3.15:
    "The filename must end in `.weights.h5`" for "ck", "ck.h5", "ck.ckpt"; tf_keras takes them)."""
    source = _script(
        "import os\nimport tensorflow as tf\nout, n, path, helper = 'out', 1, 'p', object()\n",
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n    model.compile(optimizer='sgd', loss='mse')\n",
    ) + save + "\n"
    findings = [f.code for f in analyse(source, SAFE_ONLY).findings if f.code == "TFD006"]
    assert findings == ([] if keras2 else ["TFD006"])


@pytest.mark.parametrize(
    "base, init, constructed, keras2",
    [
        ("tf.keras.Model", "super().__init__(self)", True, True),
        ("tf.keras.Model", "super(Net, self).__init__(self, name='net')", True, True),
        ("tf.keras.Model", "super().__init__()", True, False),
        ("tf.keras.Model", "super().__init__(self)", False, False),  # never made: never runs
        ("tf.keras.layers.Layer", "super().__init__(self)", True, False),  # fails on both Kerases
    ],
)
def test_a_model_class_that_gives_super_init_self_runs_on_keras2(base, init, constructed, keras2):
    """``super().__init__(self)`` in a Model subclass: Keras 3 raises TypeError ("takes 1
    positional argument but 2 were given"), tf_keras takes it (measured); a Layer subclass
    doing it fails on tf_keras too ("Expected `trainable` argument to be a boolean")."""
    made = "tf.keras.Sequential([tf.keras.layers.Dense(1)])"
    if constructed:
        made = "tf.keras.Sequential([Net()])" if "Layer" in base else "Net()"
    source = (
        "import tensorflow as tf\n\n"
        f"class Net({base}):\n    def __init__(self):\n        {init}\n        self.d = tf.keras.layers.Dense(1)\n\n"
        "    def call(self, x):\n        return self.d(x)\n\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        f"with strategy.scope():\n    model = {made}\n    model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(dataset, epochs=1)\n"
    )
    findings = [f.code for f in analyse(source, SAFE_ONLY).findings if f.code == "TFD006"]
    assert findings == ([] if keras2 else ["TFD006"])
