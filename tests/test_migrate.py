"""`autofix migrate` and TFD010 (migrate-to-strategy), driven by the fixtures in
fixtures/tfd010: each `<case>.py` trains on one device and `<case>.fixed.py` is its migration
(the strategy, then every rule in the same pass); `noop_` cases are left alone; `report_` ones
are not migrated, with the reason. A migration is stable (migrating it again changes nothing)
and clean (`check` finds nothing in it). The tests marked `tf` train every pair beside each
other in one process (`compare_many`) and require the same first update.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, cases, params, read

from autofix.cli import main
from autofix.engine import Options, analyse, process_notebook

MIGRATE = Options(migrate="mirrored")
CHECK = Options()


@pytest.mark.parametrize("case", params("tfd010", "fixed"))
def test_migrates_to_expected(case):
    assert_fixes_to_expected(case, MIGRATE)


@pytest.mark.parametrize("case", params("tfd010", "fixed"))
def test_a_migration_is_stable_and_check_finds_nothing_in_it(case):
    assert_fixed_is_clean(case, MIGRATE)
    assert [f for f in analyse(read(case.after), CHECK).findings if not f.unsafe] == []


@pytest.mark.parametrize("case", params("tfd010", "unchanged"))
def test_leaves_alone_or_says_why_not(case):
    assert_left_alone(case, MIGRATE)


@pytest.mark.parametrize("case", params("tfd010"))
def test_check_diff_and_fix_never_migrate(case):
    analysis = analyse(read(case.before), Options(select=("TFD010",)))
    assert analysis.new_text is None and analysis.findings == []
    assert all(f.code != "TFD010" for f in analysis.findings)


def test_every_shape_has_a_fixture():
    names = {c.name for c in cases("tfd010")}
    for shape in ("fit_script", "main_function", "custom_loop", "eager_step", "gan", "train_step_mean", "gan_wrapper", "method_step", "raw_variables"):
        assert shape in names
    assert sum(n.startswith("report_") for n in names) >= 8


# --- what migrate says and where --------------------------------------------------------------

def _migrate(source: str, **options):
    return analyse(source, Options(migrate=options.pop("strategy", "mirrored"), **options))


LOOP = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "x = np.random.rand(64, 4).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(8)\n"
    "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "optimizer = tf.keras.optimizers.SGD(0.1)\n"
    "\n"
    "\n"
    "@tf.function\n"
    "def step(features, labels):\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
    "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
    "    return loss\n"
    "\n"
    "\n"
    "for features, labels in dataset:\n"
    "    print(float(step(features, labels)))\n"
)


def test_the_strategy_option_names_the_strategy_made():
    migrated = _migrate(LOOP, strategy="multiworker").new_text
    assert "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n" in migrated
    assert "strategy.run(step, args=(features, labels))" in migrated


def test_keras3_fit_is_not_moved_to_multiworker():
    source = read(FIXTURES / "tfd010" / "fit_script.py")
    analysis = _migrate(source, strategy="multiworker")
    assert analysis.new_text is None
    assert any("Keras 3 fit cannot train under MultiWorkerMirroredStrategy" in (f.reason or "") for f in analysis.findings)


def test_the_finding_is_at_the_training_and_says_what_it_moved_to():
    analysis = _migrate(LOOP)
    (finding,) = analysis.findings
    assert finding.code == "TFD010" and finding.fixable
    assert finding.message == "trains on one device: moved to tf.distribute.MirroredStrategy"
    assert finding.line == 19


def test_what_is_left_in_the_migrated_code_is_named_at_the_original_line():
    """A TFD004 finding the migration would leave (a mean that reaches the gradient both
    divided by the replica count and not) stops it, named at the line of the original, with
    line numbers in the reason mapped back too."""
    source = LOOP.replace(
        "        loss = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n",
        "        part = tf.reduce_mean(tf.square(labels - model(features, training=True)))\n"
        "        loss = part + part / NUM_GPUS\n",
    ).replace("import tensorflow as tf\n", "import tensorflow as tf\nNUM_GPUS = 1\n")
    mean = source.splitlines().index("        part = tf.reduce_mean(tf.square(labels - model(features, training=True)))") + 1
    analysis = _migrate(source)
    assert analysis.new_text is None
    left = [f for f in analysis.findings if "the migrated code would have TFD004" in f.message]
    assert left and left[0].line == mean
    assert f"(line {mean + 1})" in left[0].reason
    summary = [f for f in analysis.findings if f.message == "trains on one device: not migrated" and "would still have" in f.reason]
    assert summary and not any(f.fixable for f in analysis.findings)


def test_a_loss_divided_by_a_number_not_shown_to_be_the_batch_is_named_at_that_number():
    """The refusal names a line of the original that shows what could not be shown: the loss
    divides by 16, which the migration cannot show to be the global batch."""
    source = read(FIXTURES / "tfd010" / "report_loss_divided_by_a_number.py")
    line = source.splitlines().index("        loss = tf.nn.compute_average_loss(loss_fn(yb, logits), global_batch_size=16)") + 1
    analysis = _migrate(source)
    assert analysis.new_text is None
    (named,) = [f for f in analysis.findings if "divided over the batch" in (f.reason or "")]
    assert named.line == line
    assert f"is divided over the batch by 16 (line {line}), which could not be shown to be the global batch" in named.reason
    assert f"the loss differentiated on line {line + 1}" in named.reason


def test_the_batch_constant_a_loss_is_divided_by_becomes_the_global_batch():
    migrated = _migrate(read(FIXTURES / "tfd010" / "custom_loop_global_batch_size.py")).new_text
    assert "GLOBAL_BATCH = BATCH * strategy.num_replicas_in_sync\n" in migrated
    assert ".batch(GLOBAL_BATCH)" in migrated and "global_batch_size=GLOBAL_BATCH)" in migrated


# --- a loss object of Keras's default reduction whose loss the step also shows -----------------

def test_a_loss_object_fed_to_a_metric_keeps_its_value_there_and_the_step_returns_the_share():
    """The step gives its loss to a Mean and returns it (summed over the replicas by the
    wrapper). Migrated, the loss is the replica's mean (reduction="none", averaged), not
    divided: the metric sees the loss; the tape and the return get the share (loss / N), so
    the sum over the replicas is the loss the original returned."""
    migrated = _migrate(read(FIXTURES / "tfd010" / "custom_loop_loss_object_metric.py")).new_text
    assert 'SparseCategoricalCrossentropy(from_logits=True, reduction="none")' in migrated
    assert "        batch_loss = tf.reduce_mean(criterion(targets, scores))\n" in migrated
    assert "        replica_batch_loss = batch_loss / strategy.num_replicas_in_sync\n" in migrated
    assert "tape.gradient(replica_batch_loss, " in migrated
    assert "    mean_loss.update_state(batch_loss)\n" in migrated
    assert "    return replica_batch_loss\n" in migrated
    assert "strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(fit_batch, args=(inputs, targets)), axis=None)" in migrated


def test_the_mutation_suites_metric_fixture_is_what_migrate_writes():
    """fixtures/mutants/metric.migrated.py was written by hand because migrate gave the metric
    loss / N; migrate now writes it as it is."""
    migrated = _migrate(read(FIXTURES / "mutants" / "metric.original.py")).new_text
    assert migrated == read(FIXTURES / "mutants" / "metric.migrated.py")


def test_a_loss_object_fed_to_a_metric_that_cannot_be_scaled_at_the_tape_is_refused_at_the_metric():
    """The loss comes from a helper: the share cannot be taken where it is differentiated, and
    the loss rewritten where it is made would give the metric loss / N. Refused, naming the
    metric's line (the migration made before gave it the share)."""
    source = read(FIXTURES / "tfd010" / "report_loss_object_metric_through_helper.py")
    metric = source.splitlines().index("    mean_loss.update_state(batch_loss)") + 1
    analysis = _migrate(source)
    assert analysis.new_text is None
    reasons = [f.reason for f in analysis.findings if "TFD004" in f.message]
    assert reasons and all(f"also used on line {metric} (mean_loss.update_state(batch_loss))" in r for r in reasons)
    assert "each replica's share of the loss" in reasons[0]


def test_a_loss_object_whose_one_call_cannot_be_migrated_is_rewritten_for_none():
    """A GAN's two losses call one default-reduction object; the generator's loss is also given
    to a metric and returned with the other values (so it cannot be scaled at its tape). Its
    reduction is the object's: the discriminator's loss is not rewritten either (reduction
    "none" for it alone would hand the generator's tape one loss per example)."""
    source = read(FIXTURES / "tfd010" / "gan_returns_images.py").replace(
        "    return g_loss, d_loss, generated\n", "    g_mean.update_state(g_loss)\n    return g_loss, d_loss, generated\n"
    ).replace("\n\n@tf.function\ndef train_step", "\ng_mean = keras.metrics.Mean()\n\n\n@tf.function\ndef train_step", 1)
    assert "g_mean.update_state(g_loss)" in source and "g_mean = keras.metrics.Mean()" in source
    metric = source.splitlines().index("    g_mean.update_state(g_loss)") + 1
    generator = source.splitlines().index("        g_loss = cross_entropy(tf.ones_like(fake_logits), fake_logits)") + 1
    analysis = _migrate(source)
    assert analysis.new_text is None
    reasons = [f.reason for f in analysis.findings if "TFD004" in f.message]
    assert any(f"also used on line {metric} (g_mean.update_state(g_loss))" in r for r in reasons)
    assert any(f"cross_entropy is also called on line {generator}, where it cannot be fixed" in r for r in reasons)


def test_fix_keeps_a_loss_object_fed_to_a_metric_as_keras_3_computes_it():
    """Outside a migration (code written for a strategy), the rewrite where the loss is made
    is the value Keras >= 3.8 already computes under a strategy: unchanged."""
    source = read(FIXTURES / "tfd010" / "custom_loop_loss_object_metric.fixed.py").replace(
        "        batch_loss = tf.reduce_mean(criterion(targets, scores))\n        replica_batch_loss = batch_loss / strategy.num_replicas_in_sync\n",
        "        batch_loss = criterion(targets, scores)\n",
    ).replace("replica_batch_loss", "batch_loss").replace(', reduction="none")', ")")
    fixed = analyse(source, Options(select=("TFD004",))).new_text
    assert "        batch_loss = tf.reduce_mean(criterion(targets, scores)) / strategy.num_replicas_in_sync\n" in fixed


TRAIN_STEP_TF_KERAS = FIXTURES / "tfd010" / "train_step_loss_object_tf_keras.py"


@pytest.mark.parametrize("keras", ["tf_keras", "keras"])
def test_a_loss_object_shared_by_train_step_and_test_step_is_taken_per_example_in_both(keras):
    """The object handed to a custom compile() is called by train_step and test_step: on a file
    that runs on Keras 2 (tf_keras) the migration was refused ("also used outside the training
    step"); now both steps take its losses per example from call(), on Keras 3 too (where
    test_step left alone would show each replica's share of the loss)."""
    source = read(TRAIN_STEP_TF_KERAS)
    if keras == "keras":
        source = source.replace("import tf_keras\n", "import keras\n").replace("tf_keras.", "keras.")
    migrated = _migrate(source).new_text
    assert migrated is not None
    assert "error = tf.reduce_mean(self.objective.call(targets, self(inputs, training=True)))" in migrated
    assert "replica_error = error / self.distribute_strategy.num_replicas_in_sync" in migrated
    assert "self.tracker.update_state(tf.reduce_mean(self.objective.call(targets, self(inputs, training=False))))" in migrated
    assert "self.tracker.update_state(error)" in migrated


def test_a_loss_object_bound_to_a_name_shared_with_test_step_gives_both_steps_its_twin():
    """The same with the object bound to a module name (no custom compile): both steps call the
    twin made with reduction="none" beside it, averaged."""
    source = read(TRAIN_STEP_TF_KERAS).replace("import tf_keras\n", "import keras\n").replace("tf_keras.", "keras.")
    source = source.replace("self.objective(", "objective(").replace(
        "    def compile(self, optimizer, objective):\n        super().compile(optimizer=optimizer)\n        self.objective = objective\n\n", ""
    ).replace(", objective=keras.losses.Huber(delta=0.5))", ")").replace("\n\nclass Scorer", "\nobjective = keras.losses.Huber(delta=0.5)\n\n\nclass Scorer")
    assert "self.objective" not in source and "objective = keras.losses.Huber(delta=0.5)\n" in source
    migrated = _migrate(source).new_text
    assert 'objective_per_example = keras.losses.Huber(delta=0.5, reduction="none")\n' in migrated
    assert "error = tf.reduce_mean(objective_per_example(targets, self(inputs, training=True)))" in migrated
    assert "self.tracker.update_state(tf.reduce_mean(objective_per_example(targets, self(inputs, training=False))))" in migrated


def test_a_loss_object_also_used_by_code_keras_2_runs_outside_the_replicas_is_still_refused_there():
    """On a file that runs on Keras 2, a use of the object that is neither in a step nor in
    the model's test_step (a method of the model's own) is not given the rewrite, and Keras 2
    rejects the object wherever a strategy is current: refused as before."""
    source = read(TRAIN_STEP_TF_KERAS).replace(
        "    def test_step(self, data):\n",
        "    def loss_on(self, inputs, targets):\n        return self.objective(targets, self(inputs))\n\n    def test_step(self, data):\n",
    ).replace(
        "print(scorer.evaluate(train, return_dict=True))\n",
        "print(scorer.evaluate(train, return_dict=True))\nprint(float(scorer.loss_on(features, scores)))\n",
    )
    analysis = _migrate(source)
    assert analysis.new_text is None
    assert any("self.objective is also used outside the training step" in (f.reason or "") for f in analysis.findings)


def test_changed_lines_map_back_line_by_line():
    from autofix.migrating import LineMap

    lines = LineMap("a\nb\nc\nd\n", "a\nB\nC\nnew\nd\n")
    assert [lines.original(n) for n in range(1, 6)] == [1, 2, 3, 3, 4]
    inserted = LineMap("a\nb\n", "a\nnew\nb\n")
    assert inserted.original(2) == 2


def test_a_file_that_trains_nothing_is_skipped():
    from autofix.engine import process_text

    why = "it does not train (no fit, train_on_batch or optimizer update)"
    predicts = "import tensorflow as tf\nmodel = tf.keras.models.load_model('m.keras')\nmodel.predict(x)\n"
    assert process_text(predicts, "p.py", MIGRATE).skipped == why  # (passed over unparsed)
    evaluates = predicts + "model.evaluate(x, y)\nprint(model.fit_to_screen)\n"
    assert process_text(evaluates, "e.py", MIGRATE).skipped == why


def test_a_file_that_distributes_already_is_fixed_as_fix_does():
    from conftest import BROKEN, FIXED

    assert _migrate(BROKEN).new_text == FIXED
    assert analyse(BROKEN, CHECK).findings and all(f.code == "TFD001" for f in _migrate(BROKEN).findings)


def test_tensorflow_is_imported_where_the_strategy_is_made_when_the_file_lacks_it():
    source = (
        "import keras\n"
        "import numpy as np\n"
        "\n"
        "x = np.random.rand(64, 4).astype('float32')\n"
        "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, x.sum(axis=1), batch_size=16, epochs=2)\n"
    )
    migrated = _migrate(source).new_text
    assert migrated.startswith("import keras\nimport numpy as np\n\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n")
    assert "batch_size=16 * strategy.num_replicas_in_sync" in migrated


def test_a_notebook_is_migrated_cell_by_cell():
    cells = [
        ("import tensorflow as tf\nimport numpy as np", "code"),
        ("# Data", "markdown"),
        ("x = np.random.rand(64, 4).astype('float32')\ndataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1))).batch(8)", "code"),
        ("model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\nmodel.compile(optimizer='adam', loss='mse')", "code"),
        ("!nvidia-smi\nmodel.fit(dataset, epochs=2)", "code"),
    ]
    notebook = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True), **({"outputs": [], "execution_count": None} if kind == "code" else {})}
            for text, kind in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(notebook, indent=1) + "\n"
    result = process_notebook(text, "train.ipynb", MIGRATE)
    migrated = json.loads(result.new_text)
    sources = ["".join(c["source"]) for c in migrated["cells"]]
    assert sources[0] == "import tensorflow as tf\nimport numpy as np\nstrategy = tf.distribute.MirroredStrategy()"
    assert sources[2].endswith(".batch(8 * strategy.num_replicas_in_sync)")
    assert sources[3].startswith("with strategy.scope():\n    model = ")
    assert sources[4] == "!nvidia-smi\nmodel.fit(dataset, epochs=2)"
    assert migrated["metadata"] == notebook["metadata"]
    (finding,) = result.findings
    assert finding.cell == 4


# --- the command line ---------------------------------------------------------------------------

@pytest.fixture
def repo(tmp_path, monkeypatch):
    for name in ("custom_loop.py", "report_inline_loop.py", "noop_evaluation_only.py"):
        (tmp_path / name).write_text(read(FIXTURES / "tfd010" / name))
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "train.py").write_text(read(FIXTURES / "tfd010" / "custom_loop.py"))
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_migrate_shows_a_diff_and_exits_1_then_writes_with_write(repo):
    before = (repo / "custom_loop.py").read_text()
    result = run("migrate", "--no-cache", ".")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/custom_loop.py\n+++ b/custom_loop.py\n")
    assert "+strategy = tf.distribute.MirroredStrategy()" in result.stdout
    assert "ignored/train.py" not in result.stdout  # .gitignore is honoured
    assert "report_inline_loop.py:" in result.stderr and "not migrated" in result.stderr
    assert (repo / "custom_loop.py").read_text() == before
    written = run("migrate", "--no-cache", "--write", ".")
    assert "migrated custom_loop.py" in written.stderr
    assert (repo / "custom_loop.py").read_text() == read(FIXTURES / "tfd010" / "custom_loop.fixed.py")
    # report_inline_loop.py is still declined, with its reason: something to read.
    assert written.exit_code == 1 and "report_inline_loop.py:" in written.stderr
    again = run("migrate", "--no-cache", ".")
    assert again.exit_code == 1 and again.stdout == "" and "not migrated" in again.stderr
    assert run("migrate", "--no-cache", "custom_loop.py").exit_code == 0  # nothing left to migrate
    assert run("check", "--no-cache", "custom_loop.py").exit_code == 0


def test_migrate_reports_in_a_format_with_the_fix(repo):
    result = run("migrate", "--no-cache", "--format", "json", "custom_loop.py")
    assert result.exit_code == 1
    (finding,) = json.loads(result.stdout)
    assert finding["code"] == "TFD010" and finding["fix"]["replacements"]


def test_migrate_exits_1_on_a_declined_migration_and_0_when_nothing_is_to_migrate(repo):
    declined = run("migrate", "--no-cache", "report_inline_loop.py")
    assert declined.exit_code == 1 and declined.stdout == ""
    assert "report_inline_loop.py:" in declined.stderr and "not migrated" in declined.stderr
    assert run("migrate", "--no-cache", "--write", "report_inline_loop.py").exit_code == 1
    assert run("migrate", "report_inline_loop.py").exit_code == 1  # cached: the same answer
    report = run("migrate", "--no-cache", "--format", "json", "report_inline_loop.py")
    assert report.exit_code == 1 and json.loads(report.stdout)[0]["fixable"] is False
    nothing = run("migrate", "--no-cache", "noop_evaluation_only.py")
    assert nothing.exit_code == 0 and nothing.stdout == ""
    # A decline silenced by its comment is no longer something to read.
    text = (repo / "report_inline_loop.py").read_text().splitlines(keepends=True)
    line = json.loads(report.stdout)[0]["line"]
    text[line - 1] = text[line - 1].rstrip("\n") + "  # autofix: ignore[TFD010]\n"
    (repo / "report_inline_loop.py").write_text("".join(text))
    assert run("migrate", "--no-cache", "report_inline_loop.py").exit_code == 0


def test_migrate_names_a_skipped_file_and_a_missing_one(repo):
    result = run("migrate", "--no-cache", "noop_evaluation_only.py", "missing.py")
    assert result.exit_code == 2
    assert "noop_evaluation_only.py: skipped: it does not train" in result.stderr


def test_migrate_uses_the_cache_with_its_own_key(repo):
    assert run("migrate", ".").exit_code == 1
    assert run("migrate", ".").exit_code == 1  # from the cache: the same answer
    assert run("check", ".").exit_code == 0  # fix's rules find nothing: single-device code


def test_migrate_rejects_an_unknown_strategy(repo):
    assert run("migrate", "--strategy", "tpu", ".").exit_code == 2


# --- proven by training: every pair in one TensorFlow process -----------------------------------

needs_tf = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]


# Migrations that leave something the proof must not call the same training, said at its line
# by the migration: (status, what the verdict names).
NOT_THE_SAME = {
    # counts of optimizer steps written as numbers (a schedule's boundaries) are left with a
    # note: on N replicas they act N x later in the data, which the proof says
    "fit_step_counts": ("different", "a schedule counted in steps acts 2 x later in the data"),
    # fit fed by a generator function or a PyDataset of the file: the migration asks it for the
    # global batch, but the reference cannot ask the original's for N x its own (the harness
    # scales Dataset.batch, fit's batch_size and ImageDataGenerator.flow): not compared, said
    "fit_generator_function": ("inconclusive", "a Python generator, whose batch the reference cannot ask for 2 x"),
    "fit_pydataset": ("inconclusive", "a keras.utils.PyDataset), whose batch the reference cannot ask for 2 x"),
}


@pytest.fixture(scope="module")
def proven():
    from autofix.smoke.compare import ComparePair, compare_many

    pairs = [c for c in cases("tfd010") if c.after is not None]
    reports = compare_many([ComparePair(str(c.after), str(c.before)) for c in pairs], replicas=2, offline=True)
    return {c.name: r for c, r in zip(pairs, reports)}


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
@pytest.mark.parametrize("case", [c.name for c in cases("tfd010") if c.after is not None])
def test_each_migration_is_proven_to_train_as_its_original(proven, case):
    report = proven[case]
    status, says = NOT_THE_SAME.get(case, ("equivalent", ""))
    assert report.compare.status == status, report.compare.message
    assert says in report.compare.message


# What the proof does not run (evaluation after the steps compared): the migrated test_step
# measured on both Kerases, beside the original's.
EVALUATE = """
import ast, sys
import numpy as np
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
keras_name = sys.argv[3]
keras = __import__(keras_name)

def scorer_class(path):
    text = open(path).read().replace("tf_keras", keras_name)
    tree = ast.parse(text)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    space = {"tf": tf, keras_name: keras}
    exec(compile(ast.Module([cls], []), path, "exec"), space)
    return space[cls.name]

rng = np.random.default_rng(8)
features = rng.uniform(-1, 1, size=(64, 5)).astype("float32")
scores = np.tanh(features @ rng.normal(size=(5, 1))).astype("float32")
data = tf.data.Dataset.from_tensor_slices((features, scores)).batch(16)

def evaluate(cls, strategy):
    with strategy.scope():
        model = cls()
        model(features[:1])
        model.compile(optimizer=keras.optimizers.SGD(0.0), objective=keras.losses.Huber(delta=0.5))
    model.set_weights([np.full(w.shape, 0.1, w.dtype) for w in model.get_weights()])
    return model.evaluate(data, verbose=0, return_dict=True)["loss"]

devices = [d.name for d in tf.config.list_logical_devices("CPU")]
mirrored = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
print(repr((evaluate(scorer_class(sys.argv[1]), tf.distribute.get_strategy()), evaluate(scorer_class(sys.argv[2]), mirrored))))
"""


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
@pytest.mark.parametrize("keras", ["tf_keras", "keras"])
def test_the_migrated_test_step_evaluates_the_loss_the_original_did_on_both_kerases(keras):
    """Evaluated on 2 replicas, the migrated model's test_step shows the loss the original's
    shows on one device, on Keras 2 (which rejects the object left as it was) and Keras 3
    (which would show half of it)."""
    import subprocess
    import sys

    if importlib.util.find_spec(keras) is None:
        pytest.skip(f"{keras} is not installed")
    before, after = TRAIN_STEP_TF_KERAS, TRAIN_STEP_TF_KERAS.with_name("train_step_loss_object_tf_keras.fixed.py")
    result = subprocess.run([sys.executable, "-c", EVALUATE, str(before), str(after), keras], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    original, migrated = eval(result.stdout.strip().splitlines()[-1])
    assert original > 0.01 and abs(migrated - original) <= 1e-6 * max(1.0, original)


def test_migrate_interactively_asks_once_per_file(repo):
    result = CliRunner().invoke(main, ["migrate", "--no-cache", "-i", "custom_loop.py"], input="y\n", catch_exceptions=False)
    assert result.exit_code == 0
    assert "Apply this fix?" in result.stdout
    assert (repo / "custom_loop.py").read_text() == read(FIXTURES / "tfd010" / "custom_loop.fixed.py")


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_migrate_smoke_proves_what_it_shows_and_what_it_writes(repo):
    shown = run("migrate", "--no-cache", "--smoke", "custom_loop.py")
    assert shown.exit_code == 1  # (a migration to show)
    assert "custom_loop.py: equivalent: on 2 replicas" in shown.stderr
    assert (repo / "custom_loop.py").read_text() == read(FIXTURES / "tfd010" / "custom_loop.py")
    written = run("migrate", "--no-cache", "--smoke", "--write", "custom_loop.py")
    assert written.exit_code == 0
    assert "custom_loop.py: equivalent: on 2 replicas" in written.stderr


# --- a decline says where what stops it is ----------------------------------------------------

def _lines_named(reason: str) -> set[int]:
    import re

    found = re.search(r", at lines? ([\d, ]+)\)?$", reason)
    return {int(n) for n in re.findall(r"\d+", found.group(1))} if found else set()


@pytest.mark.parametrize("case", [c.name for c in cases("tfd010") if c.name.startswith("report_")])
def test_a_decline_said_away_from_its_cause_names_the_lines_of_the_cause(case):
    # A migration checked after it is written (the code it would leave, its batches) is
    # refused at the first pass's findings; the reason there names the lines where the
    # findings that say why are, and each of those lines has one.
    findings = [f for f in analyse(read(FIXTURES / "tfd010" / f"{case}.py"), MIGRATE).findings if f.code == "TFD010"]
    lines = {f.line for f in findings}
    for finding in findings:
        named = _lines_named(finding.reason or "")
        assert named <= lines, (finding.line, finding.reason, lines)


def test_a_script_declined_for_a_batch_names_the_line_of_that_batch():
    source = """import numpy as np
import tensorflow as tf

images = np.random.rand(128, 6).astype("float32")
labels = np.random.randint(0, 2, 128)
model = tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.Dense(2)])
optimizer = tf.keras.optimizers.Adam(0.01)

for step in range(10):
    picked = np.random.choice(128, 16)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels[picked], model(images[picked]), from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
"""
    analysis = _migrate(source)
    assert analysis.new_text is None
    findings = [f for f in analysis.findings if f.code == "TFD010"]
    said = [f for f in findings if ", at line" in (f.reason or "")]
    assert said, [(f.line, f.reason) for f in findings]
    for finding in said:
        named = _lines_named(finding.reason)
        assert named and named <= {f.line for f in findings if f is not finding} | {finding.line}
    assert ", at line" in analysis.refused


def test_a_notebook_declined_says_where_in_its_cells():
    cells = [
        "import numpy as np\nimport tensorflow as tf",
        "images = np.random.rand(128, 6).astype('float32')\nlabels = np.random.randint(0, 2, 128)\n"
        "model = tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.Dense(2)])\noptimizer = tf.keras.optimizers.Adam(0.01)",
        "for step in range(10):\n    picked = np.random.choice(128, 16)\n    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels[picked], model(images[picked]), from_logits=True))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n    optimizer.apply_gradients(zip(grads, model.trainable_variables))",
    ]
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": c.splitlines(keepends=True), "outputs": [], "execution_count": None} for c in cells],
        "metadata": {"kernelspec": {"name": "python3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    result = process_notebook(json.dumps(notebook), "train.ipynb", MIGRATE)
    assert result.new_text is None
    # The notebook's lines are its cells' lines, in what the warning says as in the findings.
    assert ", at cell 3, line " in result.refused, result.refused
    assert all(", at line" not in (f.reason or "") for f in result.findings)


# --- where no strategy can be placed --------------------------------------------------------

METHOD_FIT = """import numpy as np
import tensorflow as tf


class Detector:
    def __init__(self, width):
        inputs = tf.keras.Input((width,))
        self.model = tf.keras.Model(inputs, tf.keras.layers.Dense(width)(inputs))
        self.model.compile(optimizer="adam", loss="mse")

    def train(self, x):
        self.model.fit(x, x, batch_size=16, epochs=1)
"""

LIBRARY_MODEL = """import tensorflow as tf
import keras


class Pair(keras.Model):
    def __init__(self):
        super().__init__()
        self.encoder = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.encoder(data)))
        grads = tape.gradient(loss, self.encoder.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.encoder.trainable_variables))
        return {"loss": loss}
"""


def test_a_migration_that_finds_no_place_for_the_strategy_says_not_migrated_and_why():
    # A message that says what the migration does must not stand over one not made.
    method = [f for f in _migrate(METHOD_FIT).findings if f.code == "TFD010"]
    assert [f.message for f in method] == ["trains on one device: not migrated"]
    assert "the training on line 12 is in the method Detector.train()" in method[0].reason
    library = [f for f in _migrate(LIBRARY_MODEL).findings if f.code == "TFD010"]
    assert [f.message for f in library] == ["trains on one device: not migrated"]
    assert "Pair.train_step (line 10) is run by fit wherever a Pair is trained" in library[0].reason


@pytest.mark.parametrize("name", ["custom_loop", "custom_loop_global_batch_size"])
def test_a_script_that_shows_one_gpu_is_migrated_as_for_several_replicas(name):
    """CUDA_VISIBLE_DEVICES pinning one GPU makes a file's MirroredStrategy one replica's for
    the rules; the strategy a migration writes is for several, so the migration (and the check
    of what it wrote) read it so: the same migration, the pin kept."""
    pin = 'import os\n\nos.environ["CUDA_VISIBLE_DEVICES"] = "3"\n'
    source = read(FIXTURES / "tfd010" / f"{name}.py")
    expected = read(FIXTURES / "tfd010" / f"{name}.fixed.py")
    head = source.index("import numpy")
    pinned = source[:head] + pin + source[head:]
    migrated = analyse(pinned, MIGRATE).new_text
    assert migrated is not None
    assert migrated.replace(pin, "", 1) == expected


def test_the_check_of_migrated_code_reads_its_strategy_as_several_replicas():
    from autofix.analysis.facts.script import Facts
    from autofix.analysis.program import Program
    import libcst as cst

    source = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n'
    for program, classes in (
        (Program(cst.parse_module(source)), {"MirroredStrategy(one device)"}),
        (Program(cst.parse_module(source), migrated=True), {"MirroredStrategy"}),
        (Program(cst.parse_module(source), migration="mirrored"), {"MirroredStrategy"}),
    ):
        (strategy,) = Facts.of(program).strategies
        assert strategy.classes == classes
