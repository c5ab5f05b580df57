"""TFD001 variables-outside-scope, driven by the fixture pairs in fixtures/tfd001."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read
from keras2 import to_keras2

TFD001 = Options(select=("TFD001",))


@pytest.mark.parametrize("case", params("tfd001", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, TFD001)
    assert all(f.code == "TFD001" for f in analyse(read(case.before), TFD001).findings)


@pytest.mark.parametrize("case", params("tfd001", "fixed"))
def test_fixed_code_is_clean_and_stable(case):
    assert_fixed_is_clean(case, TFD001)
    assert analyse(read(case.after), TFD001).findings == []


@pytest.mark.parametrize("case", params("tfd001", "unchanged"))
def test_leaves_correct_code_alone(case):
    assert_left_alone(case, TFD001)


def test_finding_points_at_the_construction():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential()\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    findings = analyse(source, TFD001).findings
    assert [(f.line, f.column, f.fixable) for f in findings] == [(3, 9, True), (4, 1, True)]
    assert "model built outside strategy.scope()" in findings[0].message
    assert "compile()" in findings[1].message


@pytest.mark.parametrize(
    "imports, model_expr",
    [
        ("import tensorflow as tf", "tf.keras.Sequential()"),
        ("import keras", "keras.Sequential()"),
        ("from tensorflow import keras", "keras.Sequential()"),
        ("import tf_keras", "tf_keras.Sequential()"),
        ("from tensorflow.keras import Sequential", "Sequential()"),
        ("from tensorflow.keras.models import Sequential as Seq", "Seq()"),
        ("import tensorflow.keras as K", "K.models.Sequential()"),
    ],
)
def test_every_keras_spelling_is_recognised(imports, model_expr):
    source = (
        f"{imports}\n"
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        f"model = {model_expr}\n"
        "model.fit(x, y)\n"
    )
    analysis = analyse(source, TFD001)
    assert [f.line for f in analysis.findings] == [4]
    assert f"with strategy.scope():\n    model = {model_expr}\n" in analysis.new_text


def test_a_name_that_only_looks_like_keras_is_not_a_model():
    source = (
        "import tensorflow as tf\n"
        "from mylib import Sequential\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = Sequential()\n"
        "model.fit(x, y)\n"
    )
    assert analyse(source, TFD001).findings == []


def test_strategy_made_after_the_model_moves_up():
    source = (
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential()\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    assert analyse(source, TFD001).new_text == (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential()\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )


@pytest.mark.parametrize(
    "between, why",
    [
        ("tf.config.experimental.set_memory_growth(gpu, True)", "tf.config.experimental.set_memory_growth()"),
        ("tf.config.set_visible_devices(gpus[:2], 'GPU')", "tf.config.set_visible_devices()"),
        ("tf.keras.mixed_precision.set_global_policy('mixed_float16')", "keras.mixed_precision.set_global_policy()"),
        ("os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'", "the change to os.environ"),
        ("devices = ['/gpu:0', '/gpu:1']", "it uses 'devices'"),
    ],
)
def test_strategy_never_moves_above_runtime_setup_or_its_inputs(between, why):
    source = (
        "import os\n"
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential()\n"
        f"{between}\n"
        "strategy = tf.distribute.MirroredStrategy(devices)\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    analysis = analyse(source, TFD001)
    assert analysis.new_text is None
    assert [f.line for f in analysis.findings] == [3, 6]
    assert why in analysis.findings[0].reason
    assert not any(f.fixable for f in analysis.findings)


def test_reading_the_device_list_is_not_in_the_way():
    source = (
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential()\n"
        "gpus = tf.config.list_physical_devices('GPU')\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    assert analyse(source, TFD001).new_text.startswith(
        "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\nwith strategy.scope():\n"
    )


@pytest.mark.parametrize("case", params("tfd001"))
def test_keras2_spelling_gives_the_same_fix(case):
    """Every fixture again, spelled for Keras 2 (tf_keras): same findings, same fix."""
    before = to_keras2(read(case.before))
    if before is None:
        pytest.skip("already spelled for Keras 2, or no Keras import")
    keras3 = analyse(read(case.before), TFD001)
    keras2 = analyse(before, TFD001)
    crashing = {f.line for f in keras3.findings if f.reason and "fit cannot train under MultiWorkerMirroredStrategy" in f.reason}
    if crashing:
        # Only Keras 3's fit fails under a multi-worker strategy: on Keras 2 the same units
        # are fixed.
        assert {f.line for f in keras2.findings if f.fixable} >= crashing
        assert keras2.new_text is not None
        return
    assert [(f.line, f.column, f.message, f.fixable, f.reason) for f in keras2.findings] == [
        (f.line, f.column, f.message, f.fixable, f.reason) for f in keras3.findings
    ]
    if case.after is None:
        assert keras2.new_text is None
    else:
        assert keras2.new_text == to_keras2(read(case.after))


def test_merging_into_a_scope_leaves_its_lines_as_they_were():
    """A line of spaces closing the scope's body, and one inside it, stay byte for byte where
    they were; only the moved statement changes."""
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    base = tf.keras.applications.MobileNetV2(weights=None)\n"
        "    \n"
        "    model = tf.keras.Sequential([base, tf.keras.layers.Dense(2)])\n"
        "    \n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    expected = source.replace(
        "    \nmodel.compile(optimizer='adam', loss='mse')\n", "    \n    model.compile(optimizer='adam', loss='mse')\n"
    )
    assert analyse(source, TFD001).new_text == expected


@pytest.mark.parametrize(
    "install, keras2",
    [
        ("!pip install tensorflow==2.9.1 tensorflow_datasets", True),
        ("!pip install -q tensorflow-gpu==2.4", True),
        ("%tensorflow_version 1.x", True),
        ("!pip install tensorflow==2.17.0", False),
        ("!pip install tensorflow", False),
        ('%pip install -q "keras<3"', True),
        ("!pip install keras==2.15.0 tensorflow", True),
        ('!pip install "tensorflow>=2.10,<2.16"', True),
        ("!pip install tensorflow<2.17", False),
        ("!pip install -U keras>=3 keras-cv<0.9 tf-keras==2.15", False),
    ],
)
def test_a_notebook_that_installs_keras2_is_not_broken_by_an_optimizer_outside(tmp_path, install, keras2):
    """Keras 2 trains a model made in the scope with an optimizer made outside it; only Keras 3
    refuses it. A notebook that installs a TensorFlow older than 2.16 runs on Keras 2."""
    import json

    from autofix.engine import process_path

    cells = [
        install,
        "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()",
        "optimizer = tf.keras.optimizers.Adam(1e-3)\nwith strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer=optimizer, loss='mse')\n"
        "model.fit(tf.zeros([64, 4]), tf.zeros([64, 1]), batch_size=8 * strategy.num_replicas_in_sync)",
    ]
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c} for c in cells],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 4,
    }
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    findings = [f for f in process_path(str(path), TFD001).findings if f.code == "TFD001"]
    assert (findings == []) is keras2


def _baselines_then_distributed(calls_in_scope: bool, baselines: int = 8) -> str:
    trained = "".join(f"m{i} = build({8 + i})\ncompile_and_fit(m{i})\n" for i in range(baselines))
    last = (
        "with strategy.scope():\n    model = build(8)\n    compile_and_fit(model)\n"
        if calls_in_scope
        else "with strategy.scope():\n    model = build(8)\ncompile_and_fit(model)\n"
    )
    return (
        "import numpy as np\nimport tensorflow as tf\nfrom tensorflow import keras\n"
        "x = np.ones((256, 4), 'float32')\n"
        "def build(units):\n    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(units), keras.layers.Dense(4)])\n"
        "def compile_and_fit(model):\n"
        "    model.compile(optimizer=keras.optimizers.Adam(), loss='mse')\n"
        "    return model.fit(x, x, batch_size=32)\n"
        f"{trained}strategy = tf.distribute.MirroredStrategy()\n{last}"
    )


def test_models_trained_before_any_strategy_exists_are_not_findings():
    """Eight baselines trained by a helper before the strategy exists: no finding, however
    many; the helper's optimizer is made in the scope when it is called there."""
    assert analyse(_baselines_then_distributed(calls_in_scope=True), TFD001).findings == []


def test_the_helper_called_outside_the_scope_is_one_finding():
    """Called outside the scope for the distributed model, the helper makes its optimizer
    outside it: one finding, at the optimizer, not one per baseline."""
    source = _baselines_then_distributed(calls_in_scope=False)
    findings = analyse(source, TFD001).findings
    assert [(f.line, f.fixable) for f in findings] == [(8, False)]
    assert "optimizer" in findings[0].message


def test_an_input_made_outside_the_scope_is_not_a_finding_and_stays_put():
    source = read(FIXTURES / "tfd001" / "functional_model_input_outside.py")
    analysis = analyse(source, TFD001)
    assert all("Input" not in source.splitlines()[f.line - 1] for f in analysis.findings)
    assert "inputs = keras.layers.Input(shape=(4,))\nwith strategy.scope():\n" in analysis.new_text


def test_a_metric_a_models_train_step_updates_takes_part_in_fit():
    """A metric made at the top of the module and updated in the model's own ``train_step``
    (which fit runs on every replica) is made in the scope; nothing else moves. The input is the
    migration of fixtures/tfd010/train_step_global_metric with the metric made outside the
    scope: it trains unfixed on Keras 3 and on tf_keras (each replica reads its own result, and
    fit shows their mean), so it is no fixture of the runtime tests, which want it to fail."""
    metric = '    hits = keras.metrics.SparseCategoricalAccuracy(name="accuracy")\n'
    migrated = read(FIXTURES / "tfd010" / "train_step_global_metric.fixed.py")
    assert metric in migrated
    source = migrated.replace(metric, "").replace("with strategy.scope():\n", metric.lstrip() + "with strategy.scope():\n", 1)
    result = analyse(source, TFD001)
    (finding,) = result.findings
    assert finding.code == "TFD001" and "metric" in finding.message
    assert source.splitlines()[finding.line - 1].startswith("hits = keras.metrics.SparseCategoricalAccuracy")
    fixed = result.new_text
    assert "with strategy.scope():\n    hits = keras.metrics.SparseCategoricalAccuracy" in fixed
    assert analyse(fixed, TFD001).findings == [] and analyse(fixed, TFD001).new_text in (None, fixed)


@pytest.mark.parametrize(
    "imports, made",
    [
        ("from transformers import TFAutoModel", 'TFAutoModel.from_pretrained("bert-base-uncased")'),
        ("import transformers", 'transformers.TFBertModel.from_pretrained("bert-base-uncased")'),
        ("import tensorflow_hub as hub", 'hub.KerasLayer("https://tfhub.dev/x/1", trainable=True)'),
        ("from tensorflow import keras", "keras.models.load_model('encoder.keras')"),
        ("from tensorflow import keras", "keras.applications.ResNet50(weights=None, include_top=False)"),
    ],
)
def test_a_pretrained_layer_passed_to_a_model_built_in_the_scope_moves_with_it(imports, made):
    """What holds the variables the model trains, made by a call outside the scope and passed
    to the helper that builds the model in the fix's scope, moves into the scope with it."""
    source = (
        f"import tensorflow as tf\n{imports}\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "def build(encoder):\n"
        "    x = tf.keras.Input((8,))\n"
        "    model = tf.keras.Model(x, tf.keras.layers.Dense(2)(encoder(x)))\n"
        "    model.compile(tf.keras.optimizers.Adam(1e-5), loss='mse')\n"
        "    return model\n"
        f"encoder = {made}\n"
        "model = build(encoder)\n"
        "model.fit(tf.zeros((8, 8)), tf.zeros((8, 2)))\n"
    )
    analysis = analyse(source, TFD001)
    assert {f.line for f in analysis.findings} == {9, 10}
    assert f"with strategy.scope():\n    encoder = {made}\n    model = build(encoder)\n" in analysis.new_text


@pytest.mark.parametrize(
    "spelling",
    ["keras.layers.Normalization", "tf_keras.layers.experimental.preprocessing.Normalization", "tf.keras.layers.experimental.preprocessing.Normalization"],
)
def test_an_adapted_layer_is_moved_with_its_adapt_only_where_tf_keras_may_run(spelling):
    """docs/keras-versions.md, "Preprocessing layers": Keras 3 trains with it made outside;
    tf_keras needs it made and adapted in the scope."""
    body = (
        "strategy = tf.distribute.MirroredStrategy()\n"
        f"norm = {spelling}()\n"
        "norm.adapt(x)\n"
        "with strategy.scope():\n"
        "    model = keras.Sequential([keras.Input((3,)), norm, keras.layers.Dense(1)])\n"
        '    model.compile(optimizer="adam", loss="mse")\n'
        "model.fit(x, y)\n"
    )
    if not spelling.startswith("tf_keras"):
        keras3 = analyse("import keras\nimport tensorflow as tf\n" + body, TFD001)
        assert keras3.findings == [] and keras3.new_text is None
    legacy = "import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nimport tensorflow as tf\nimport tf_keras\nimport tf_keras as keras\n"
    keras2 = analyse(legacy + body, TFD001)
    assert [f.line for f in keras2.findings] == [7]
    assert "with strategy.scope():\n    norm = " in keras2.new_text
    assert "    norm.adapt(x)\n    model = " in keras2.new_text


def test_a_model_handed_to_fit_only_on_the_branch_without_a_strategy_trains_on_one_device():
    """``if multi_gpu: (strategy, scope, parallel copy) trained = parallel`` / ``else: trained =
    self.model``, then ``trained.fit()``: the model of the single-device branch is not trained
    under the strategy. Made while a strategy exists on that branch too, it is reported."""
    source = read(FIXTURES / "tfd001" / "noop_single_device_branch_trains_the_model_made_before.py")
    options = Options(select=("TFD001",))
    assert analyse(source, options).findings == []
    before = "        if multi_gpu:\n            strategy = tf.distribute.MirroredStrategy()\n"
    assert before in source
    made_first = source.replace(before, "        strategy = tf.distribute.MirroredStrategy()\n        if multi_gpu:\n")
    assert [f.line for f in analyse(made_first, options).findings if f.code == "TFD001"] == [22, 37]


def test_nested_branches_hand_fit_the_single_device_model_only_where_no_strategy_exists():
    """The same with the branches nested (context, then devices): the strategy one path makes
    reaches the fit after them, but not the bindings that hand it ``self.net``. Made before the
    branches, the strategy reaches those bindings too, and the models are reported."""
    source = read(FIXTURES / "tfd001" / "noop_single_device_branch_nested.py")
    options = Options(select=("TFD001",))
    assert analyse(source, options).findings == []
    inner = "                mirrored = tf.distribute.MirroredStrategy()\n"
    branches = "        if context:\n            if multi_gpu:\n"
    assert source.count(inner) == 2 and source.count(branches) == 1
    made_first = source.replace(inner, "").replace(branches, "        mirrored = tf.distribute.MirroredStrategy()\n" + branches)
    assert {f.line for f in analyse(made_first, options).findings} >= {25, 51}



def test_a_function_handed_to_code_not_followed_is_reported_not_changed():
    source = read(FIXTURES / "tfd001" / "report_factory_handed_to_code_not_followed.py")
    options = Options(select=("TFD001",))
    findings = analyse(source, options).findings
    # One note where the function is handed on (a suggestion: whether the code it is handed to
    # trains under the strategy cannot be told here), naming each object it makes.
    assert len(findings) == 1 and not findings[0].fixable and findings[0].unsafe
    (note,) = findings
    assert note.line == 27 and "create_model() makes 2 Keras objects outside strategy.scope() (lines 15-16)" in note.message
    assert "create_model() is never called here but handed to partial() (line 27)" in (note.reason or "")
    assert [line for _path, line, _message in note.related] == [15, 16]
    # Called here, where the strategy exists: the scope goes into its body, as before.
    called = source.replace(
        'environment = CompressionEnvironment(create_model=partial(create_model, train_ds=train_ds, weights_path="lenet.weights.h5"), strategy=strategy)\n',
        'model = create_model(train_ds, "lenet.weights.h5")\n',
    )
    assert "model = create_model(train_ds" in called
    result = analyse(called, options)
    assert result.findings and all(f.fixable for f in result.findings) and "with strategy.scope():" in (result.new_text or "")


def test_a_fit_batch_that_does_not_split_over_the_replicas_the_file_asks_for_blocks_the_fix():
    """Mirroring the model makes fit split its batch over the replicas; Keras 3 fails on a
    batch that does not split evenly. Where the file says how many replicas there are
    (CUDA_VISIBLE_DEVICES, devices=[...]) and fit's batch does not divide by it, the model is
    reported with that reason, not moved."""
    source = read(FIXTURES / "tfd001" / "report_fit_batch_uneven_over_the_visible_gpus.py")
    findings = analyse(source, TFD001).findings
    assert findings and not any(f.fixable for f in findings)
    assert "the strategy has 3 replicas (line 6) and fit's batch of 32 (line 18)" in (findings[0].reason or "")
    # Two GPUs, or a batch of 96 on three: the batch splits, and the fix is made.
    for even in (source.replace('"0,1,2"', '"0,1"'), source.replace("batch_size=32", "batch_size=96")):
        analysis = analyse(even, TFD001)
        assert analysis.new_text is not None and "with strategy.scope():" in analysis.new_text
    # The same count written as the strategy's devices.
    listed = source.replace('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"\n', "").replace(
        "MirroredStrategy()", 'MirroredStrategy(devices=["/gpu:0", "/gpu:1", "/gpu:2"])'
    )
    assert analyse(listed, TFD001).new_text is None
    assert analyse(listed.replace(', "/gpu:2"', ""), TFD001).new_text is not None
    # A count the file does not set: no such reason.
    assert analyse(source.replace('"0,1,2"', 'os.environ["GPUS"]'), TFD001).new_text is not None
    # Hidden GPUs, or one: the strategy has one replica (as with devices=[one device]), whose
    # model trains the same in the scope or outside it: nothing to say.
    for one in (source.replace('"0,1,2"', '"-1"'), source.replace('"0,1,2"', '"0"')):
        assert not analyse(one, TFD001).findings
    # Set after TensorFlow has listed the GPUs, the variable no longer decides: unknown count.
    late = source.replace("strategy = tf.distribute.MirroredStrategy()", 'print(tf.config.list_physical_devices("GPU"))\nstrategy = tf.distribute.MirroredStrategy()')
    late = late.replace('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"\n', "").replace("import tensorflow as tf\n", 'import tensorflow as tf\n\nprint(tf.config.list_physical_devices("GPU"))\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    assert 'os.environ["CUDA_VISIBLE_DEVICES"] = "0"' in late
    assert analyse(late, TFD001).new_text is not None


def test_a_model_handed_to_a_trainer_that_makes_its_strategy_is_reported_where_it_is_kept():
    """A trainer that makes its own strategy and keeps what its caller hands it: those
    objects were made before the strategy existed, so outside its scope; assigning them in the
    scope moves nothing. Reported (no fix: building them is the caller's); a loss function,
    called like a model, is not one."""
    source = read(FIXTURES / "tfd001" / "report_model_handed_to_a_trainer_that_makes_its_strategy.py")
    findings = analyse(source, TFD001).findings
    assert [(f.line, f.fixable) for f in findings] == [(11, False), (12, False)]
    assert "the model handed in as network was made by the caller before this strategy exists (line 9)" in findings[0].message
    assert "is trained under it (line 24)" in findings[0].message
    assert "Mixing different tf.distribute.Strategy objects" in findings[1].message
    # The strategy handed in too: the caller may have built both in its scope.
    handed = source.replace("def __init__(self, network, optimizer, loss_fn):", "def __init__(self, network, optimizer, loss_fn, strategy):").replace(
        "self.strategy = tf.distribute.MirroredStrategy()", "self.strategy = strategy")
    assert analyse(handed, TFD001).findings == []
    # Built here from what is handed in (a function), in the scope: nothing to report.
    built = source.replace("self.network = network", "self.network = network()").replace("self.optimizer = optimizer", "self.optimizer = optimizer()")
    assert analyse(built, TFD001).findings == []
    # A default the function may replace with one it builds: not certain.
    defaulted = source.replace("def __init__(self, network, optimizer, loss_fn):", "def __init__(self, network=None, optimizer=None, loss_fn=None):")
    assert analyse(defaulted, TFD001).findings == []
    # On Keras 2 only (experimental_run_v2), the optimizer trains: the model alone.
    keras2 = source.replace("self.strategy.run(replica", "self.strategy.experimental_run_v2(replica")
    assert [f.line for f in analyse(keras2, TFD001).findings] == [11]
    # A one-replica strategy: nothing is mirrored anyway.
    one = source.replace("MirroredStrategy()", 'OneDeviceStrategy("/cpu:0")')
    assert analyse(one, TFD001).findings == []


def test_a_model_loaded_on_the_branch_that_only_infers_is_not_trained_unless_a_loop_repeats_it():
    """``if args.train: (steps) else: model = tf.saved_model.load(...)`` in a trainer's main():
    the step function reads the name the load binds too, but runs only on the training branch,
    so the loaded model is never trained. Inside a loop whose next pass trains, it is."""
    source = read(FIXTURES / "tfd001" / "noop_saved_model_loaded_on_the_inference_branch.py")
    options = Options(select=("TFD001",))
    assert analyse(source, options).findings == []
    branches = """    if args.train:
        for x, y in dist_data:
            distributed_train_step(x, y)
        tf.saved_model.save(model, args.save_dir)
    else:
        model = tf.saved_model.load(args.save_dir)
"""
    assert branches in source
    looped = source.replace(branches, """    for train in (False, True):
        if train:
            for x, y in dist_data:
                distributed_train_step(x, y)
        else:
            model = tf.saved_model.load(args.save_dir)
""")
    assert [(f.code, f.line) for f in analyse(looped, options).findings] == [("TFD001", 42)]
