"""`autofix migrate` on custom steps of other shapes than a function the loop calls: a method of
the model the loop calls on its object (run per replica as ``strategy.run(model.train, ...)``),
and the checks that keep a step from being migrated when that cannot be shown right. The
fixture pairs of fixtures/tfd010 (``method_step*``) are proven by training in test_migrate.py.
"""

from __future__ import annotations

import importlib.util

import libcst as cst
import pytest

from autofix.analysis.migration.single_device import SingleDevice
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.steps.tracing import python_effect
from autofix.analysis.core.value_flow import Values
from autofix.engine import Options, _parsed, analyse

MIGRATE = Options(migrate="mirrored")

MODEL = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "x = np.random.rand(256, 8).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices(x).batch(16)\n"
    "\n"
    "\n"
    "class AutoEncoder(tf.keras.Model):\n"
    "    def __init__(self, optimizer):\n"
    "        super().__init__()\n"
    "        self.net = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(8)])\n"
    "        self.opt = optimizer\n"
    "\n"
    "    def loss_of(self, batch):\n"
    "        return tf.reduce_mean(tf.square(batch - self.net(batch)))\n"
    "\n"
    "    def train(self, batch):\n"
    "        with tf.GradientTape() as tape:\n"
    "            loss = self.loss_of(batch)\n"
    "        self.opt.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))\n"
    "\n"
    "\n"
    "model = AutoEncoder(tf.keras.optimizers.SGD(0.1))\n"
    "for batch in dataset:\n"
    "    model.train(batch)\n"
)


def _program(source: str, migration: str | None = "mirrored") -> Program:
    return Program(*_parsed(source), migration=migration)


def _reasons(source: str) -> list[str]:
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is None
    return [f.reason or "" for f in analysis.findings]


def test_a_method_the_loop_calls_on_its_object_is_run_per_replica():
    migrated = analyse(MODEL, MIGRATE).new_text
    assert "strategy.run(model.train, args=(batch,))" in migrated
    assert "    distributed_train(batch)\n" in migrated and "model.train(batch)" not in migrated.split("args=")[1]
    assert "with strategy.scope():\n    model = AutoEncoder(tf.keras.optimizers.SGD(0.1))\n" in migrated
    # The model's method stays a method; the wrapper is made after the class, at the top level.
    assert "\n\n@tf.function\ndef distributed_train(batch):\n" in migrated


def test_the_step_is_the_method_the_loop_calls_followed_up_through_the_class():
    """The update is in a helper method the step calls on ``self``: the step is the method the
    loop calls."""
    source = MODEL.replace(
        "        self.opt.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))\n",
        "        self.update(tape.gradient(loss, self.trainable_variables))\n"
        "\n"
        "    def update(self, gradients):\n"
        "        self.opt.apply_gradients(zip(gradients, self.trainable_variables))\n",
    )
    (step,) = SingleDevice.of(_program(source)).custom_steps
    assert step.function.name.value == "train" and step.method and step.target == "model.train"
    assert [p.name.value for p in step.params] == ["batch"]


def test_a_method_named_like_an_update_is_not_one():
    """``self.apply_gradients(g, d)`` of a model of this file is its own method: the updates are
    in its body (the GAN notebooks' shape)."""
    source = MODEL.replace("self.opt.apply_gradients(zip(", "self.apply_gradients(zip(").replace(
        "    def train(self, batch):\n",
        "    def apply_gradients(self, pairs):\n        self.opt.apply_gradients(pairs)\n\n    def train(self, batch):\n",
    )
    single = SingleDevice.of(_program(source))
    assert [u.func.value.attr.value for u in single.updates] == ["opt"]  # type: ignore[union-attr]
    assert [s.function.name.value for s in single.custom_steps] == ["train"]


def test_a_method_also_called_by_the_class_itself_is_not_the_step():
    source = MODEL.replace(
        "    def loss_of(self, batch):\n",
        "    def fit_twice(self, batch):\n        self.train(batch)\n        self.train(batch)\n\n    def loss_of(self, batch):\n",
    )
    assert any("is called both by other methods of its class" in r for r in _reasons(source))


def test_an_object_that_is_not_a_name_is_not_followed():
    source = MODEL.replace("model = AutoEncoder(tf.keras.optimizers.SGD(0.1))\n", "").replace(
        "    model.train(batch)\n", "    AutoEncoder(tf.keras.optimizers.SGD(0.1)).train(batch)\n"
    )
    assert any("is not a name: it cannot be followed to where it is made" in r for r in _reasons(source))


def test_an_object_the_file_cannot_follow_is_not_trained_by_a_step():
    source = MODEL.replace("model = AutoEncoder(", "holder = type('H', (), {})()\nholder.model = AutoEncoder(").replace(
        "    model.train(batch)\n", "    holder.model.train(batch)\n"
    )
    assert any("train() applies gradients but nothing in this file calls it" in r for r in _reasons(source))


def test_an_optimizer_that_cannot_be_followed_stops_the_migration():
    """An optimizer made outside the scope fails on Keras 3 ("Mixing different
    tf.distribute.Strategy objects"): one the rules cannot find cannot be moved there."""
    source = MODEL.replace("model = AutoEncoder(tf.keras.optimizers.SGD(0.1))\n", "from optim import make\nmodel = AutoEncoder(make())\n")
    assert any("the optimizer the step applies (self.opt, line 20) cannot be followed" in r for r in _reasons(source))


# --- what the analysis follows ---------------------------------------------------------------------

KWARGS = (
    "import tensorflow as tf\n"
    "\n"
    "class GAN(tf.keras.Model):\n"
    "    def __init__(self, **kwargs):\n"
    "        super(GAN, self).__init__()\n"
    "        self.__dict__.update(kwargs)\n"
    "\n"
    "opt = tf.keras.optimizers.Adam()\n"
    "gan = GAN(gen_optimizer=opt, n_z=4)\n"
)


def _class(program: Program, name: str) -> cst.ClassDef:
    return next(c for c in program.index.classes if c.name.value == name)


def test_attributes_set_from_keywords_are_the_keywords_every_construction_passes():
    program = _program(KWARGS, None)
    values = Values.of(program).attribute_values(_class(program, "GAN"))
    assert program.module.code_for_node(values["gen_optimizer"][0]) == "opt"
    assert program.module.code_for_node(values["n_z"][0]) == "4"


def test_attributes_from_keywords_are_not_known_when_a_construction_passes_a_dict():
    program = _program(KWARGS + "other = GAN(**config)\n", None)
    assert "gen_optimizer" not in Values.of(program).attribute_values(_class(program, "GAN"))


def test_attributes_from_keywords_are_not_known_for_a_subclassed_class():
    program = _program(KWARGS + "class Child(GAN):\n    pass\n\nchild = Child(gen_optimizer=opt)\n", None)
    assert "gen_optimizer" not in Values.of(program).attribute_values(_class(program, "GAN"))


def _effect(source: str, name: str) -> str | None:
    program = _program(source, None)
    function = next(f for f in Values.of(program).functions if f.name.value == name)
    return python_effect(program, Steps.of(program), function)


def test_a_method_calling_its_own_helpers_and_keras_attributes_traces_as_it_runs():
    assert _effect(MODEL, "train") is None


def test_a_method_reading_an_attribute_another_method_sets_would_keep_its_first_value_traced():
    source = MODEL.replace(
        "            loss = self.loss_of(batch)\n", "            loss = self.loss_of(batch) * self.weight\n"
    ).replace("    def loss_of(self, batch):\n", "    def anneal(self):\n        self.weight = 0.5\n\n    def loss_of(self, batch):\n")
    why = _effect(source, "train")
    assert why is not None and why.startswith("reads self.weight, a Python value that changes between calls")


def test_a_method_whose_helper_prints_does_not_trace_as_it_runs():
    source = MODEL.replace(
        "        return tf.reduce_mean(tf.square(batch - self.net(batch)))\n",
        "        print('loss')\n        return tf.reduce_mean(tf.square(batch - self.net(batch)))\n",
    )
    assert _effect(source, "train") == "calls self.loss_of(), which prints"


# --- tf.Variable objects a step trains -------------------------------------------------------------

VARIABLES = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "x = np.random.rand(256, 8).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(32)\n"
    "\n"
    "\n"
    "def init():\n"
    "    return {'w': tf.Variable(tf.zeros([8, 1])), 'b': tf.Variable(tf.zeros([1]))}\n"
    "\n"
    "\n"
    "params = init()\n"
    "optimizer = tf.keras.optimizers.SGD(0.1)\n"
    "\n"
    "\n"
    "def step(features, labels):\n"
    "    variables = [params['w'], params['b']]\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.reduce_mean(tf.square(labels - (tf.matmul(features, params['w']) + params['b'])))\n"
    "    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))\n"
    "\n"
    "\n"
    "for features, labels in dataset:\n"
    "    step(features, labels)\n"
)


def test_variables_a_local_factory_makes_are_made_in_the_scope_where_it_is_called():
    migrated = analyse(VARIABLES, MIGRATE).new_text
    assert "with strategy.scope():\n    params = init()\n    optimizer = tf.keras.optimizers.SGD(0.1)\n" in migrated
    assert analyse(migrated, MIGRATE).new_text is None  # stable


def test_variables_made_at_the_top_for_training_in_main_put_the_strategy_at_the_top():
    """Made at the top of the script, trained in main(): the strategy is made in the block
    both run in (the module), before the variables, which go into its scope there."""
    head, body = VARIABLES.split("optimizer = tf.keras.optimizers.SGD(0.1)\n", 1)
    source = head + "\n\ndef main():\n    optimizer = tf.keras.optimizers.SGD(0.1)\n" + "".join(
        "    " + line if line.strip() else line for line in body.splitlines(True)
    ) + "\n\nmain()\n"
    source = source.replace("dataset = tf.data", "DATA = tf.data").replace(
        "    for features, labels in dataset:", "    dataset = DATA\n    for features, labels in dataset:"
    )
    migrated = analyse(source, MIGRATE).new_text
    assert migrated.index("strategy = tf.distribute.MirroredStrategy()\n") < migrated.index("with strategy.scope():\n    params = init()\n")
    assert "    with strategy.scope():\n        optimizer = tf.keras.optimizers.SGD(0.1)\n" in migrated


# --- what a step returns ---------------------------------------------------------------------------


def test_a_step_returning_its_metrics_results_gets_them_averaged_over_the_replicas():
    from fixturecases import FIXTURES, read

    migrated = analyse(read(FIXTURES / "tfd010" / "step_returns_logs.py"), MIGRATE).new_text
    assert (
        "    logs = strategy.run(train_step, args=(inputs, targets))\n"
        "    return {key: strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None) for key, value in logs.items()}\n"
    ) in migrated
    (step,) = SingleDevice.of(_program(read(FIXTURES / "tfd010" / "step_returns_logs.py"))).custom_steps
    assert step.combined == ["logs"]


def test_a_metric_result_returned_alone_is_averaged_over_the_replicas():
    source = MODEL.replace(
        "        self.opt.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))\n",
        "        self.opt.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))\n"
        "        tracker.update_state(loss)\n"
        "        return tracker.result()\n",
    ).replace("model = AutoEncoder(", "tracker = tf.keras.metrics.Mean()\nmodel = AutoEncoder(").replace(
        "    model.train(batch)\n", "    shown = model.train(batch)\n"
    )
    migrated = analyse(source, MIGRATE).new_text
    assert "    return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(model.train, args=(batch,)), axis=None)\n" in migrated
    assert "replica_loss = loss / strategy.num_replicas_in_sync" in migrated  # the tracker keeps the replica's mean


def test_logs_that_hold_what_is_not_a_metric_result_are_not_combined():
    from fixturecases import FIXTURES, read

    source = read(FIXTURES / "tfd010" / "step_returns_logs.py").replace(
        '    logs["loss"] = loss_tracking_metric.result()\n', '    logs["loss"] = loss_tracking_metric.result()\n    logs["first"] = predictions[0]\n'
    )
    assert any("which is neither the loss it differentiates nor what its metrics show" in r for r in _reasons(source))


def test_logs_passed_on_before_they_are_returned_are_not_combined():
    from fixturecases import FIXTURES, read

    source = read(FIXTURES / "tfd010" / "step_returns_logs.py").replace("    return logs\n", "    history.append(logs)\n    return logs\n")
    source = source.replace("loss_tracking_metric = keras.metrics.Mean()\n", "loss_tracking_metric = keras.metrics.Mean()\nhistory = []\n")
    assert any("which is neither the loss it differentiates nor what its metrics show" in r for r in _reasons(source))


def test_each_value_a_step_returns_is_combined_by_what_it_is_over_the_batch():
    from fixturecases import FIXTURES, read

    def kinds(name):
        (step,) = SingleDevice.of(_program(read(FIXTURES / "tfd010" / f"{name}.py"))).custom_steps
        return step.combined, step.entries

    assert kinds("step_returns_accuracy") == (["loss", "mean"], [])
    assert kinds("step_returns_counts") == (["sum", "sum"], [])
    assert kinds("step_returns_dict") == (["dict"], [('"loss"', "loss"), ('"mae"', "mean"), ('"far"', "sum")])
    assert kinds("step_returns_predictions") == (["loss", "rows"], [])
    migrated = analyse(read(FIXTURES / "tfd010" / "step_returns_counts.py"), MIGRATE).new_text
    assert (
        "    correct, seen = strategy.run(train_step, args=(features, labels))\n"
        "    return strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None), strategy.reduce(tf.distribute.ReduceOp.SUM, seen, axis=None)\n"
    ) in migrated


def test_the_loss_returned_beside_a_mean_is_still_its_share_summed():
    """The loss's uses are followed item by item into the wrapper: its share is summed there,
    the accuracy beside it averaged, so the loss is divided where it is made."""
    from fixturecases import FIXTURES, read

    migrated = analyse(read(FIXTURES / "tfd010" / "step_returns_accuracy.py"), MIGRATE).new_text
    assert "        loss = tf.reduce_mean(per_example) / strategy.num_replicas_in_sync\n" in migrated
    assert "strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None), strategy.reduce(tf.distribute.ReduceOp.MEAN, accuracy, axis=None)" in migrated


RETURNS = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "import keras\n"
    "\n"
    "x = np.random.rand(64, 4).astype('float32')\n"
    "dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(8)\n"
    "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
    "optimizer = keras.optimizers.SGD(0.1)\n"
    "mse = keras.losses.MeanSquaredError()\n"
    "\n"
    "\n"
    "@tf.function\n"
    "def step(features, labels):\n"
    "    with tf.GradientTape() as tape:\n"
    "        predictions = model(features, training=True)\n"
    "        loss = tf.reduce_mean(tf.square(labels - predictions))\n"
    "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
    "    errors = tf.abs(labels - predictions)\n"
    "    shown = RETURNED\n"
    "    return loss, shown\n"
    "\n"
    "\n"
    "for features, labels in dataset:\n"
    "    loss, shown = step(features, labels)\n"
    "    print(float(loss), shown)\n"
)


@pytest.mark.parametrize(
    ("returned", "kind"),
    [
        ("tf.reduce_mean(errors)", "mean"),
        ("1.0 - tf.reduce_mean(tf.cast(errors < 0.5, tf.float32))", "mean"),
        ("100.0 * tf.reduce_mean(errors)", "mean"),
        ("tf.reduce_sum(errors)", "sum"),
        ("tf.reduce_sum(errors) + tf.cast(tf.size(labels), tf.float32)", "sum"),
        ("tf.math.count_nonzero(errors > 1.0)", "sum"),
        ("tf.reduce_mean(loss)", "loss"),
        ("tf.reduce_mean(tf.reduce_sum(tf.square(errors), axis=-1))", "mean"),
        ("tf.reduce_sum(errors[:, 0])", "sum"),
        ("(tracker.result() + tf.reduce_mean(errors)) / 2.0", "mean"),
    ],
)
def test_a_returned_mean_or_sum_over_the_batch_is_known(returned, kind):
    source = RETURNS.replace("RETURNED", returned).replace("mse = keras.losses.MeanSquaredError()\n", "mse = keras.losses.MeanSquaredError()\ntracker = keras.metrics.Mean()\n")
    (step,) = SingleDevice.of(_program(source)).custom_steps
    assert step.combined == ["loss", kind]


@pytest.mark.parametrize(
    ("returned", "line", "why"),
    [
        ("tf.reduce_max(errors)", 19, "it is a maximum, minimum or product over the batch"),
        ("tf.reduce_mean(errors, axis=1)", 19, "it is reduced over given axes"),
        ("errors", 18, "it is not a mean, a sum or a count over the batch"),
        ("tf.reduce_sum(errors) / 8", 19, "it is a sum over the batch multiplied or divided"),
        ("tf.reduce_sum(model.trainable_variables[0])", 19, "it reduces what the step does not compute from its batch: every replica would add it once more"),
        ("tf.reduce_mean(tf.square(errors - tf.reduce_mean(errors)))", 19, "it is computed from a reduction over the batch"),
        ("tf.reduce_sum(tf.reduce_mean(errors, axis=0))", 19, "it is computed from a reduction over the batch"),
        ("tf.reduce_mean(errors[:4])", 19, "it is computed from some of the batch's examples, picked"),
        ("tf.reduce_mean(tf.boolean_mask(errors, errors > 1.0))", 19, "it is computed from some of the batch's examples, picked"),
        ("mse(labels, predictions)", 19, "it is a Keras loss object's value that the step does not differentiate"),
        ("tf.reduce_mean(errors) + tf.reduce_sum(errors)", 19, "it combines values that are not all means, or not all sums"),
    ],
)
def test_a_returned_value_that_is_neither_a_mean_nor_a_sum_is_refused_at_its_line(returned, line, why):
    reasons = _reasons(RETURNS.replace("RETURNED", returned))
    assert any(
        "step() returns shown (line 20), which is neither the loss it differentiates nor what its metrics show, nor a mean or a sum "
        "over the batch" in r and f"(line {line}): {why}" in r
        for r in reasons
    ), reasons


RUN_ON_LOGICAL_CPUS = """
import sys
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * int(sys.argv[2]))
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
made = tf.distribute.MirroredStrategy
tf.distribute.MirroredStrategy = lambda: made(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
import keras
keras.utils.set_random_seed(7)
source = open(sys.argv[1]).read()
exec(compile(source, sys.argv[1], "exec"), {"__name__": "__main__"})
"""


def _printed(tmp_path, name: str, source: str, replicas: int) -> list[str]:
    import subprocess
    import sys

    script = tmp_path / name
    script.write_text(source)
    done = subprocess.run([sys.executable, "-c", RUN_ON_LOGICAL_CPUS, str(script), str(replicas)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if line.startswith("...")]


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_the_logs_a_migrated_step_returns_are_the_originals_at_the_global_batch(tmp_path):
    """Three epochs on 2 replicas show the same accuracy and loss as the original at twice
    its batch on one device (512 examples: every replica sees as many)."""
    from fixturecases import FIXTURES, read

    original = read(FIXTURES / "tfd010" / "step_returns_logs.py").replace(".batch(32)", ".batch(64)")
    migrated = _printed(tmp_path, "migrated.py", read(FIXTURES / "tfd010" / "step_returns_logs.fixed.py"), 2)
    expected = _printed(tmp_path, "original.py", original, 1)
    assert len(migrated) == len(expected) == 6
    for got, want in zip(migrated, expected):
        (key, value), (key_wanted, value_wanted) = got.split(": "), want.split(": ")
        assert key == key_wanted and abs(float(value) - float(value_wanted)) <= 2e-4, (got, want)


def test_calling_the_model_itself_traces_as_its_call_does():
    from fixturecases import FIXTURES, read

    source = read(FIXTURES / "tfd010" / "method_step_compiled.py")
    assert _effect(source, "train") is None
    printing = source.replace("        return self.out(self.hidden(inputs))\n", "        print(inputs)\n        return self.out(self.hidden(inputs))\n")
    assert _effect(printing, "train") == "calls self(), whose call() prints"


def test_an_optimizer_a_method_sets_itself_is_not_taken_for_compiles():
    from fixturecases import FIXTURES, read

    source = read(FIXTURES / "tfd010" / "method_step_compiled.py").replace(
        "    def call(self, inputs):\n", "    def reset(self):\n        self.optimizer = make_optimizer()\n\n    def call(self, inputs):\n"
    ).replace("import keras\n", "import keras\nfrom optim import make_optimizer\n")
    assert any("the optimizer the step applies (self.optimizer" in r for r in _reasons(source))


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_the_proof_holds_returned_sums_and_means_to_the_originals_at_the_global_batch(tmp_path):
    """The counts a step returns are summed over the replicas and its mean averaged, as the
    original returns them at twice its batch; a migration that averages a count, or sums the
    mean, is told apart."""
    from fixturecases import FIXTURES, read

    from autofix.smoke.compare import ComparePair, compare_many

    pairs = []
    for name, wrong in (("step_returns_counts", ("ReduceOp.SUM, seen", "ReduceOp.MEAN, seen")), ("step_returns_dict", ('ReduceOp.MEAN, logs["mae"]', 'ReduceOp.SUM, logs["mae"]'))):
        original = tmp_path / f"{name}.py"
        original.write_text(read(FIXTURES / "tfd010" / f"{name}.py"))
        right = read(FIXTURES / "tfd010" / f"{name}.fixed.py")
        assert wrong[0] in right
        (tmp_path / f"{name}.fixed.py").write_text(right)
        (tmp_path / f"{name}.wrong.py").write_text(right.replace(*wrong))
        pairs += [ComparePair(str(tmp_path / f"{name}.fixed.py"), str(original)), ComparePair(str(tmp_path / f"{name}.wrong.py"), str(original))]
    counts, averaged_count, logs, summed_mean = compare_many(pairs, replicas=2, offline=True)
    assert counts.compare.status == "equivalent", counts.compare.message
    assert logs.compare.status == "equivalent", logs.compare.message
    assert averaged_count.compare.status == "different"
    assert "what its step returns differs in step 1: 16 in the migration, 32 in the original" in averaged_count.compare.message
    assert summed_mean.compare.status == "different"
    assert "what its step returns differs in step 1 (mae)" in summed_mean.compare.message


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_steps_defined_again_part_after_part_each_train_as_the_original(tmp_path):
    """The first part's loop runs the first step, migrated: it trains as the original at twice
    its batch (the steps compared are all the first part's), and a migration that left that
    step's loss whole on each replica (twice the gradient) is told apart."""
    from fixturecases import FIXTURES, read

    from autofix.smoke.compare import ComparePair, compare_many

    original = tmp_path / "steps_redefined.py"
    original.write_text(read(FIXTURES / "tfd010" / "steps_redefined.py"))
    right = read(FIXTURES / "tfd010" / "steps_redefined.fixed.py")
    scaled = "loss = tf.reduce_mean(loss_fn_per_example(labels, model(features, training=True))) / strategy.num_replicas_in_sync"
    assert right.count(scaled) == 1
    wrong = right.replace(scaled, "loss = tf.reduce_mean(loss_fn_per_example(labels, model(features, training=True)))")
    (tmp_path / "right.py").write_text(right)
    (tmp_path / "wrong.py").write_text(wrong)
    proven, told = compare_many([ComparePair(str(tmp_path / "right.py"), str(original)), ComparePair(str(tmp_path / "wrong.py"), str(original))], replicas=2, offline=True)
    assert proven.compare.status == "equivalent", proven.compare.message
    assert told.compare.status == "different", told.compare.message
