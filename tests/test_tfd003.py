"""TFD003, driven by the fixture pairs in fixtures/tfd003."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, cases, params, read

# The eager loops' fix (a tf.function around the step) is made only with --unsafe-fixes: the
# pairs are checked with it; test_an_eager_loop_is_a_suggestion checks the default.
OPTIONS = Options(select=("TFD003",), unsafe_fixes=True)
DEFAULT = Options(select=("TFD003",))


@pytest.mark.parametrize("case", params("tfd003", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd003", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd003", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)


@pytest.mark.parametrize("case", [c for c in cases("tfd003") if c.after is not None and "eager" in c.name], ids=lambda c: c.id)
def test_an_eager_loop_is_a_suggestion(case):
    """A training step run eagerly is correct, only slow: by default it is shown as a
    suggestion (it does not fail check) and the code is left as it is."""
    from autofix.engine import analyse
    from fixturecases import read

    analysis = analyse(read(case.before), DEFAULT)
    eager = [f for f in analysis.findings if "eagerly" in f.message]
    assert eager and all(f.unsafe and not f.fixable and f.reason is None for f in eager)
    if len(eager) == len(analysis.findings):
        assert analysis.new_text is None


def _check(source: str):
    from autofix.engine import analyse

    return analyse(source, OPTIONS)


INFERENCE = (
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    net = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])\n"
    "    net.compile(optimizer='adam', loss='mse')\n"
    "train = tf.data.Dataset.from_tensor_slices((tf.ones([32, 3]), tf.ones([32, 1]))).batch(8)\n"
    "net.fit(train, epochs=1)\n"
    "queries = tf.data.Dataset.from_tensor_slices(tf.ones([32, 3])).batch(8)\n"
    "for q in strategy.experimental_distribute_dataset(queries):\n"
    "    {call}\n"
    "    print(strategy.gather(out, axis=0).shape)\n"
)


@pytest.mark.parametrize(
    "call",
    ["out = strategy.run(net, args=(q,))", "out = strategy.run(net, kwargs={'inputs': q})", "out = strategy.run(net, (q,))"],
)
def test_distributed_inference_is_never_rewritten(call):
    """Reproducer tfd003_inference_becomes_training: a model given real inputs predicts on
    every replica; turning that into a train step trained the model on every test batch."""
    analysis = _check(INFERENCE.replace("{call}", call))
    assert analysis.findings == [] and analysis.new_text is None


def test_a_model_given_no_inputs_is_reported_as_failing():
    analysis = _check(INFERENCE.replace("{call}", "out = strategy.run(net, args=())"))
    (finding,) = analysis.findings
    assert "no inputs" in finding.message and "raises" in finding.message
    # In a loop the generated step would be defined in the loop body: reported instead.
    assert not finding.fixable and "inside a loop" in finding.reason


EAGER_V2 = (
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    opt = tf.keras.optimizers.SGD()\n"
    "def replica(x):\n"
    "    with tf.GradientTape() as t:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(m(x), axis=1))\n"
    "    opt.apply_gradients(zip(t.gradient(loss, m.trainable_variables), m.trainable_variables))\n"
    "def inner(batches):\n"
    "    for x in batches:\n"
    "        strategy.experimental_run_v2(replica, args=(x,))\n"
    "def outer(batches):\n"
    "    inner(batches)\n"
    "{run}(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4)))\n"
)


def test_eager_loop_inside_a_function_compiled_at_its_call_site_is_not_eager():
    assert _check(EAGER_V2.replace("{run}", "tf.function(outer)")).findings == []
    (finding,) = _check(EAGER_V2.replace("{run}", "outer")).findings
    assert "eagerly" in finding.message and finding.line == 12


SIDE_EFFECT = (
    "import tensorflow as tf\n"
    "counts = {'seen': 0}\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    opt = tf.keras.optimizers.SGD()\n"
    "def replica(x):\n"
    "    with tf.GradientTape() as t:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(m(x), axis=1))\n"
    "    opt.apply_gradients(zip(t.gradient(loss, m.trainable_variables), m.trainable_variables))\n"
    "def step(x):\n"
    "    out = strategy.run(replica, args=(x,))\n"
    "    {effect}\n"
    "    return out\n"
    "for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).map(lambda i: tf.ones([2])).batch(2)):\n"
    "    step(x)\n"
)


@pytest.mark.parametrize(
    "effect, why",
    [
        ("counts['seen'] += 1", "changes counts[...]"),  # the reproducer's shape
        ("counts['last'] = out", "changes counts[...]"),
        ("del counts['seen']", "changes counts[...]"),
        ("tf.print(out); counts.update(seen=1)", "calls counts.update()"),
        ("print(out)", "prints"),
        ("import random; random.random()", "calls random.random()"),
    ],
)
def test_a_python_side_effect_keeps_tf_function_off(effect, why):
    """Reproducer tfd003_tf_function_drops_python_side_effect: inside a tf.function a Python
    effect happens only while tracing (a counter incremented once instead of every step)."""
    (finding,) = _check(SIDE_EFFECT.replace("{effect}", effect)).findings
    assert "eagerly" in finding.message and not finding.fixable
    assert f"step() {why}" in finding.reason


def test_a_dict_the_step_makes_itself_is_no_side_effect():
    analysis = _check(SIDE_EFFECT.replace("{effect}", "results = {}; results['out'] = out"))
    (finding,) = analysis.findings
    assert finding.fixable and "@tf.function\ndef step(x):" in analysis.new_text


def test_a_step_reading_a_changing_python_value_is_not_traced():
    """A tf.function keeps the value of a Python name it read while tracing."""
    loop = "for x in strategy.experimental_distribute_dataset("
    source = SIDE_EFFECT.replace("{effect}", "tf.print(epoch)").replace(loop, "for epoch in range(2):\n  " + loop)
    source = source.replace("\n    step(x)\n", "\n      step(x)\n")
    assert "for epoch in range(2):\n  for x in" in source and "\n      step(x)\n" in source
    (finding,) = _check(source).findings
    assert "reads epoch, a Python value that changes between calls" in finding.reason


FED = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    m = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    opt = tf.keras.optimizers.SGD()\n"
    "def replica(x, *rest):\n"
    "    with tf.GradientTape() as t:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(m(x), axis=1))\n"
    "    opt.apply_gradients(zip(t.gradient(loss, m.trainable_variables), m.trainable_variables))\n"
    "@tf.function\n"
    "def step(*args):\n"
    "    return strategy.run(replica, args=args)\n"
    "def make():\n"
    "    return tf.data.Dataset.from_tensor_slices(np.ones([16, 2], 'float32')).batch(4)\n"
    "ds = make()\n"
    "{loop}\n"
)


@pytest.mark.parametrize(
    "loop, what",
    [
        ("for x in ds:\n    strategy.run(replica, args=(x,))", "a batch of ds"),
        ("it = iter(ds)\nfor _ in range(4):\n    strategy.run(replica, args=(next(it),))", "a batch of ds"),
        ("for i, x in enumerate(ds):\n    strategy.run(replica, args=(x, i))", "a batch of ds"),
        ("for x, y in zip(ds, ds):\n    strategy.run(replica, args=(x, y))", "a batch of ds"),
        ("x = np.ones([4, 2], 'float32')\nstrategy.run(replica, args=(x,))", "a NumPy array"),
        ("def feed(batches):\n    for x in batches:\n        strategy.run(replica, args=(x,))\nfeed(ds)", "a batch of ds"),
    ],
)
def test_undistributed_batches_are_followed_to_the_dataset(loop, what):
    (finding,) = [f for f in _check(FED.replace("{loop}", loop)).findings if "not distributed" in f.message]
    assert f"strategy.run is given {what}, which is not distributed" in finding.message


@pytest.mark.parametrize(
    "loop",
    [
        "for x in strategy.experimental_distribute_dataset(ds):\n    strategy.run(replica, args=(x, 3))",
        "for x in strategy.experimental_distribute_dataset(ds):\n    strategy.run(replica, args=(x, tf.constant(0)))",
        "dist = strategy.distribute_datasets_from_function(lambda ctx: make())\nfor i, x in enumerate(dist):\n    strategy.run(replica, args=(x, i))",
        "v = strategy.experimental_distribute_values_from_function(lambda ctx: tf.ones([2, 2]))\nstrategy.run(replica, args=(v,))",
        "strategy.run(replica, args=(tf.ones([4, 2]),))",
    ],
)
def test_distributed_batches_and_values_that_are_not_batches_are_not_findings(loop):
    assert not [f for f in _check(FED.replace("{loop}", loop)).findings if "not distributed" in f.message]


def test_the_dataset_is_distributed_once_before_the_outermost_loop():
    source = FED.replace("{loop}", "for epoch in range(2):\n    for x in ds:\n        step(x)")
    analysis = _check(source)
    (finding,) = analysis.findings
    assert finding.fixable and "a batch of ds" in finding.message
    assert "dist_ds = strategy.experimental_distribute_dataset(ds)\nfor epoch in range(2):\n    for x in dist_ds:\n" in analysis.new_text


def test_a_batch_also_read_in_the_loop_reads_the_global_batch():
    """Distributed, the batch is the replicas' shares: a read of it in the loop that is not fed
    to the step gathers them back (strategy.gather along the batch), the batch the dataset made."""
    source = FED.replace("{loop}", "for x in ds:\n    print(x.shape)\n    step(x)")
    analysis = _check(source)
    (finding,) = analysis.findings
    assert finding.fixable
    assert "for x in dist_ds:\n    print(strategy.gather(x, axis=0).shape)\n    step(x)\n" in analysis.new_text


@pytest.mark.parametrize("given", ["x / 2.0", "x[:, :1]", "(x, x)"])
def test_what_is_computed_from_the_batch_and_given_to_the_step_is_not_gathered(given):
    """Gathered, the global batch would reach every replica whole: the fix is refused."""
    source = FED.replace("{loop}", f"for x in ds:\n    step({given})")
    (finding,) = _check(source).findings
    assert not finding.fixable and "the batch is also used on line 18" in finding.reason


def test_a_batch_used_after_the_loop_reads_the_last_global_batch():
    source = FED.replace("{loop}", "for x in ds:\n    step(x)\nprint(x.shape)")
    analysis = _check(source)
    (finding,) = analysis.findings
    assert finding.fixable
    assert "for x in dist_ds:\n    step(x)\nprint(strategy.gather(x, axis=0).shape)\n" in analysis.new_text


def test_a_batch_used_after_the_loop_that_may_be_another_value_keeps_the_dataset_as_it_is():
    """A loop may draw nothing: after it, ``x`` may still be what it was before."""
    source = FED.replace("{loop}", "x = tf.zeros([4, 2])\nfor x in ds:\n    step(x)\nprint(x.shape)")
    (finding,) = _check(source).findings
    assert not finding.fixable and "the batch is also used on line 20" in finding.reason


def test_a_decorator_that_runs_the_step_with_strategy_run_makes_it_a_replica_step():
    """``@distributed`` whose tf.function calls ``strategy.run(fn, args=args)``: the decorated
    step is what strategy.run runs (Steps.roots), so it is no TFD003 finding and TFD004 reads
    its loss as a per-replica one."""
    from autofix.analysis.program import Program
    from autofix.analysis.steps.custom import Steps
    import libcst as cst

    source = read(FIXTURES / "tfd003" / "noop_decorator_runs_the_step.py")
    program = Program(cst.parse_module(source), source)
    assert {f.name.value for f in Steps.of(program).roots} == {"train_step"}
    assert analyse(source, Options(select=("TFD003",))).findings == []
    mean = source.replace(
        "        per_example = tf.reduce_sum(tf.square(model(x) - y), axis=1)\n"
        "        loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)\n",
        "        loss = tf.reduce_mean(tf.square(model(x) - y))\n",
    )
    assert [f.code for f in analyse(mean, Options(select=("TFD003", "TFD004"))).findings] == ["TFD004"]


def test_a_decorator_that_does_not_run_the_step_leaves_it_reported():
    source = read(FIXTURES / "tfd003" / "report_decorator_calls_the_step_directly.py")
    findings = analyse(source, Options(select=("TFD003",))).findings
    assert [(f.code, f.fixable) for f in findings] == [("TFD003", False)]
    assert "not run by strategy.run" in findings[0].message


PAIRS = FED.replace(
    "from_tensor_slices(np.ones([16, 2], 'float32'))", "from_tensor_slices((np.ones([16, 2], 'float32'), np.zeros([16, 1], 'float32')))"
)


def test_a_part_of_a_batch_of_pairs_read_in_the_loop_reads_that_part_of_the_global_batch():
    """strategy.gather of a tuple of a batch's parts hands back only the first replica's share
    of each (measured on TF 2.21): each part is gathered on its own."""
    analysis = _check(PAIRS.replace("{loop}", "for batch in ds:\n    print(batch[0].shape)\n    step(batch[0], batch[1])"))
    (finding,) = analysis.findings
    assert finding.fixable
    assert "    print(strategy.gather(batch[0], axis=0).shape)\n    step(batch[0], batch[1])\n" in analysis.new_text


def test_a_batch_of_pairs_read_whole_in_the_loop_keeps_the_dataset_as_it_is():
    (finding,) = _check(PAIRS.replace("{loop}", "for batch in ds:\n    print(batch)\n    step(batch[0], batch[1])")).findings
    assert not finding.fixable and "the batch is also used on line 18" in finding.reason


@pytest.mark.parametrize(
    "loop, why",
    [
        ("for epoch in range(2):\n    numbered = enumerate(ds)\n    for i, x in numbered:\n        step(x)", "numbered is enumerate(...) of the dataset, not a dataset"),
        ("batches = zip(ds, ds)\nfor x, y in batches:\n    step(x, y)", "batches is zip(...) of the dataset, not a dataset"),
        ("from tqdm import tqdm\nbar = tqdm(ds)\nprint(len(bar))\nfor x in bar:\n    step(x)", "the progress bar bar is also read on line"),
    ],
)
def test_what_wraps_a_dataset_for_iteration_is_never_distributed(loop, why):
    """A name bound to what wraps the dataset for iteration is not a dataset: distributing it
    fails (measured on TF 2.21: experimental_distribute_dataset of an enumerate, zip or iter
    object, or of a Python object iterating a dataset as a tqdm bar does, raises
    "AttributeError: 'enumerate' object has no attribute '_variant_tensor'")."""
    analysis = _check(FED.replace("{loop}", loop))
    (finding,) = analysis.findings
    assert not finding.fixable and why in finding.reason
    assert "experimental_distribute_dataset" not in (analysis.new_text or "")


def test_a_progress_bar_held_in_a_name_gets_the_distributed_dataset_inside_it():
    source = FED.replace("{loop}", "from tqdm import tqdm\nfor epoch in range(2):\n    bar = tqdm(ds, total=3)\n    for x in bar:\n        step(x)\n        bar.set_description('x')")
    analysis = _check(source)
    (finding,) = analysis.findings
    assert finding.fixable
    assert "dist_ds = strategy.experimental_distribute_dataset(ds)\nfor epoch in range(2):\n    bar = tqdm(dist_ds, total=3)\n" in analysis.new_text


def test_a_step_shaped_by_the_datasets_batch_is_not_distributed():
    """``tf.zeros((BATCH,) + shape)`` in the step: split over the replicas, the batch no longer
    has BATCH examples."""
    source = FED.replace("tf.nn.compute_average_loss(tf.reduce_sum(m(x), axis=1))", "tf.nn.compute_average_loss(tf.reduce_sum(m(x) - tf.zeros((B, 1)), axis=1))")
    source = source.replace(".batch(4)", ".batch(B)").replace("ds = make()", "B = 4\nds = make()")
    analysis = _check(source.replace("{loop}", "for x in ds:\n    step(x)"))
    (finding,) = analysis.findings
    assert not finding.fixable and "the step reads B on line 9" in finding.reason


# --- a traced step must not build a Keras 3 optimizer per replica ------------------------------

SUBCLASSED = read(FIXTURES / "tfd003" / "eager_loop_adam.py").replace(
    '    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n',
    "    model = Head()\n",
).replace(
    "with strategy.scope():\n",
    "class Head(tf.keras.Model):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.out = tf.keras.layers.Dense(1)\n\n"
    "    def call(self, x, training=False):\n"
    "        return self.out(x)\n\n\n"
    "with strategy.scope():\n",
)


def test_tracing_an_eager_step_builds_its_adam_before_the_loop_when_the_model_is_built():
    fixed = analyse(read(FIXTURES / "tfd003" / "eager_loop_adam.py"), OPTIONS).new_text
    assert "    optimizer = tf.keras.optimizers.Adam(0.05)\n    # Keras 3 makes" in fixed
    assert "    optimizer.build(model.trainable_variables)\n    loss_object = " in fixed


def test_tracing_an_eager_step_of_a_model_built_by_its_first_call_builds_adam_in_the_step():
    assert "model = Head()" in SUBCLASSED
    fixed = analyse(SUBCLASSED, OPTIONS).new_text
    assert (
        "    with tf.init_scope():\n"
        "        optimizer.build(model.trainable_variables)\n"
        "    optimizer.apply_gradients(zip(gradients, model.trainable_variables))\n"
    ) in fixed
    assert "@tf.function\ndef distributed_train_step(batch):" in fixed


def test_on_keras_2_a_traced_step_builds_nothing():
    keras2 = "import os\nos.environ[\"TF_USE_LEGACY_KERAS\"] = \"1\"\n" + read(FIXTURES / "tfd003" / "eager_loop_adam.py").split('"""', 2)[2]
    fixed = analyse(keras2, OPTIONS).new_text
    assert fixed is not None and "@tf.function" in fixed and ".build(" not in fixed


@pytest.mark.parametrize(
    "call, reported",
    [
        ("get_dataset(64, GLOBAL_BATCH, strategy=strategy)", False),
        ("get_dataset(64, GLOBAL_BATCH, strategy)", False),
        ("get_dataset(64, GLOBAL_BATCH)", True),  # no strategy given: the plain dataset
        ("get_dataset(64, GLOBAL_BATCH, strategy=None)", True),
    ],
)
def test_a_dataset_distributed_when_its_helper_is_given_a_strategy(call, reported):
    """``if strategy is not None: dataset = strategy.experimental_distribute_dataset(dataset)``:
    the plain dataset reaches the return only when no strategy is given."""
    source = read(FIXTURES / "tfd003" / "noop_distributed_when_given_a_strategy.py")
    assert "get_dataset(64, GLOBAL_BATCH, strategy=strategy)" in source
    source = source.replace("get_dataset(64, GLOBAL_BATCH, strategy=strategy)", call)
    findings = [f for f in analyse(source, Options(select=("TFD003",))).findings]
    assert bool(findings) is reported
    # An else branch, or a test of something else, says nothing about the plain dataset.
    other = source.replace("    if strategy is not None:\n", "    if size > 32:\n")
    assert [f.code for f in analyse(other, Options(select=("TFD003",))).findings] == ["TFD003"]


def test_the_call_whose_dataset_is_trained_on_decides_not_every_call():
    """Another call of the helper without a strategy (a test set only evaluated) leaves the
    training loop's dataset distributed."""
    source = read(FIXTURES / "tfd003" / "noop_distributed_when_given_a_strategy.py")
    source += "\ntest_batches = list(get_dataset(16, GLOBAL_BATCH))\n"
    assert analyse(source, Options(select=("TFD003",))).findings == []
    swapped = source.replace("get_dataset(64, GLOBAL_BATCH, strategy=strategy)", "get_dataset(64, GLOBAL_BATCH)").replace(
        "get_dataset(16, GLOBAL_BATCH))", "get_dataset(16, GLOBAL_BATCH, strategy))"
    )
    assert [f.code for f in analyse(swapped, Options(select=("TFD003",))).findings] == ["TFD003"]


def test_a_random_batch_drawn_on_one_device_is_not_distributed():
    """``tf.random.normal((GLOBAL_BATCH, 8))`` handed to strategy.run: every replica trains on all
    of it. Reported, not fixed (no dataset to distribute); a scalar draw is not a batch."""
    source = (FIXTURES / "tfd003" / "report_undistributed_random_tensor.py").read_text()
    (finding,) = _check(source).findings
    assert finding.line == 24 and not finding.fixable
    assert "strategy.run is given a tensor made on one device (tf.random.normal(...), line 28)" in finding.message
    scalar = source.replace("tf.random.normal((GLOBAL_BATCH, 8))", "tf.random.normal(())").replace(
        "tf.random.uniform(shape=[GLOBAL_BATCH]", "tf.random.uniform(shape=[]"
    )
    assert not _check(scalar).findings


def test_the_values_of_a_distributed_batch_handed_to_strategy_run_are_every_replicas_shards():
    """``batch.values`` of a distributed batch is a tuple of every replica's shard: handed to
    strategy.run, each replica gets all of them. ``frame.values`` of a pandas object is a
    NumPy array (tests: report_undistributed_frame_values)."""
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])\n"
        "    optimizer = tf.keras.optimizers.SGD(0.1)\n"
        "def step(x):\n"
        "    with tf.GradientTape() as tape:\n"
        "        loss = tf.nn.compute_average_loss(tf.reduce_sum(model(x), axis=1))\n"
        "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
        "dataset = tf.data.Dataset.from_tensor_slices(tf.ones([64, 3])).batch(16)\n"
        "for batch in strategy.experimental_distribute_dataset(dataset):\n"
        "    strategy.run(step, args=(batch.values,))\n"
    )
    findings = [f for f in analyse(source, Options(select=("TFD003",))).findings if not f.unsafe]
    assert [f.line for f in findings] == [12]
    assert "the replicas' shards in one tuple (batch.values)" in findings[0].message
    distributed = analyse(source.replace("(batch.values,)", "(batch,)"), Options(select=("TFD003",))).findings
    assert not [f for f in distributed if not f.unsafe]  # (an eager loop is only a suggestion)


def _inline_loops(made_in_scope: bool, strategy: str = "tf.distribute.MirroredStrategy()") -> str:
    optimizer = "    opt = tf.keras.optimizers.SGD(0.1)\n" if made_in_scope else ""
    outside = "" if made_in_scope else "opt = tf.keras.optimizers.SGD(0.1)\n"
    step = (
        "        with tf.GradientTape() as tape:\n"
        "            loss = tf.reduce_mean(tf.square(model(x) - y))\n"
        "        grads = tape.gradient(loss, model.trainable_variables)\n"
        "        opt.apply_gradients(zip(grads, model.trainable_variables))\n"
    )
    return (
        "import tensorflow as tf\n"
        f"strategy = {strategy}\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])\n"
        f"{optimizer}{outside}"
        "ds = tf.data.Dataset.from_tensor_slices((tf.ones((8, 2)), tf.ones((8, 1)))).batch(4)\n"
        "for epoch in range(2):\n"
        "    for x, y in ds:\n"
        f"{step}"
        "        if epoch:\n"
        "            opt.apply_gradients(zip(grads, model.trainable_variables))\n"
        "for x, y in ds.take(1):\n"
        f"{step.replace('        ', '    ', 1).replace(chr(10) + '        ', chr(10) + '    ')}"
    )


def test_a_top_level_training_loop_outside_strategy_run_is_reported_once_per_loop():
    """Two updates in one loop are one finding (at the first); a second loop is another."""
    findings = analyse(_inline_loops(True), DEFAULT).findings
    assert [(f.code, f.line) for f in findings] == [("TFD003", 12), ("TFD003", 19)]
    assert all("this training loop" in f.message and not f.fixable for f in findings)


@pytest.mark.parametrize(
    "made_in_scope, strategy",
    [(False, "tf.distribute.MirroredStrategy()"), (True, "tf.distribute.OneDeviceStrategy('/cpu:0')")],
)
def test_a_top_level_loop_whose_optimizer_has_one_replica_is_left_alone(made_in_scope, strategy):
    """An optimizer made outside any scope (TFD001's question, not this one) or in the scope of a
    single-replica strategy: nothing is left undone by the strategy."""
    assert not [f for f in analyse(_inline_loops(made_in_scope, strategy), DEFAULT).findings if "this training loop" in f.message]
