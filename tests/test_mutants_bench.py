"""The mutation suite of the proof (bench/mutants/, bench/mutants.py): each operator makes the
mutants it documents and none where its pattern is absent or its label would not be certain;
every mutant parses; right variants keep the program's meaning where that can be checked here;
the driver scores and exits as documented. No TensorFlow."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
FIXTURES = ROOT / "fixtures" / "mutants"
sys.path.insert(0, str(BENCH))

import mutants  # noqa: E402

spec = importlib.util.spec_from_file_location("mutants_bench", BENCH / "mutants.py")
driver = importlib.util.module_from_spec(spec)
sys.modules["mutants_bench"] = driver  # its dataclasses look their module up
spec.loader.exec_module(driver)

NAMES = sorted(p.name.replace(".migrated.py", "") for p in FIXTURES.glob("*.migrated.py"))


def migrated(name: str) -> str:
    return (FIXTURES / f"{name}.migrated.py").read_text(encoding="utf-8")


def of(text: str, kind: str, **options) -> list[mutants.Mutant]:
    return mutants.mutants_of(text, "script.py", only=[kind], **options)


@functools.lru_cache(maxsize=None)
def every(name: str, heldout: bool = False) -> tuple[mutants.Mutant, ...]:
    """All the mutants of a fixture's migration (made once)."""
    return tuple(mutants.mutants_of(migrated(name), "script.py", heldout=heldout))


def of_fixture(name: str, kind: str, heldout: bool = False) -> list[mutants.Mutant]:
    return [m for m in every(name, heldout) if m.kind == kind]


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    import difflib

    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    removed = [line[1:].strip() for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff if line.startswith("+") and not line.startswith("+++")]
    return removed, added


# --- every kind, on the fixtures ------------------------------------------------------------
# (fixture, kind, how many mutants, a line one of them has)
EXPECTED = [
    ("loop", "undistributed-dataset", 1, "dist_dataset = dataset"),
    ("loop", "batch-per-replica", 1, "GLOBAL_BATCH_SIZE = BATCH_SIZE"),
    ("loop", "batch-doubled", 1, "GLOBAL_BATCH_SIZE = BATCH_SIZE * strategy.num_replicas_in_sync * 2"),
    ("loop", "take-added", 1, "dist_dataset = strategy.experimental_distribute_dataset(dataset.take(2))"),
    ("loop", "skip-added", 1, "dist_dataset = strategy.experimental_distribute_dataset(dataset.skip(1))"),
    ("loop", "shuffle-added", 1, "dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(1024, seed=3).batch(GLOBAL_BATCH_SIZE)"),
    ("loop", "example-dropped", 1, "dataset = tf.data.Dataset.from_tensor_slices((features, labels)).skip(1).batch(GLOBAL_BATCH_SIZE)"),
    ("dropout", "drop-remainder-flipped", 1, "dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH_SIZE * strategy.num_replicas_in_sync, drop_remainder=True)"),
    ("fit", "validation-swapped", 1, "history = model.fit(x_val, y_val, batch_size=BATCH_SIZE * strategy.num_replicas_in_sync, epochs=EPOCHS, validation_data=(x_train, y_train),"),
    ("loop", "mean-per-replica", 1, "loss = tf.reduce_mean(per_example_loss)"),
    ("metric", "mean-per-replica", 1, "replica_loss = loss"),
    ("loop", "divisor-per-replica", 1, "loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=BATCH_SIZE)"),
    ("loop", "regularization-dropped", 1, None),
    ("loop", "regularization-unscaled", 1, "loss += tf.add_n(model.losses)"),
    ("train_step", "loss-term-dropped", 1, "loss = tf.reduce_mean(self.loss_fn(y, y_pred))"),
    ("train_step", "loss-weight-changed", 1, "loss = tf.reduce_mean(self.loss_fn(y, y_pred)) + (PENALTY) * 2 * tf.reduce_mean(tf.square(y_pred))"),
    ("dropout", "label-smoothing-added", 1, 'loss_fn = keras.losses.BinaryCrossentropy(from_logits=True, reduction="none", label_smoothing=0.2)'),
    ("loop", "from-logits-flipped", 1, 'loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=False, reduction="none")'),
    ("train_step", "reduction-changed", 1, 'self.loss_fn = keras.losses.MeanSquaredError(reduction="sum")'),
    ("fit", "initializer-changed", 2, "keras.layers.Dense(3, kernel_initializer='he_uniform'),"),
    ("fit", "width-changed", 2, 'keras.layers.Dense(17, activation="relu"),'),
    ("fit", "activation-changed", 2, "keras.layers.Dense(16, activation='tanh'),"),
    ("fit", "layer-removed", 2, None),
    ("load_weights", "load-dropped", 1, None),
    ("load_weights", "load-other-file", 1, "model.load_weights(WARMUP)"),
    ("fit", "seed-changed", 1, "keras.utils.set_random_seed(8)"),
    ("loop", "optimizer-class-changed", 1, "optimizer = keras.optimizers.Adam(0.1)"),
    ("loop", "learning-rate-changed", 1, "optimizer = keras.optimizers.SGD(learning_rate=0.2, momentum=0.9)"),
    ("loop", "momentum-changed", 1, "optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.5)"),
    ("gan", "beta-changed", 4, "d_optimizer = keras.optimizers.Adam(learning_rate=0.002, beta_1=0.9)"),
    ("metric", "epsilon-changed", 1, "optimizer = keras.optimizers.Adam(learning_rate=0.01, epsilon=0.0001)"),
    ("loop", "clipnorm-added", 1, "optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, clipnorm=1e-6)"),
    ("loop", "weight-decay-added", 1, "optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, weight_decay=0.1)"),
    ("schedule", "schedule-per-replica", 1, "steps_per_epoch = len(x) // BATCH_SIZE"),
    ("dropout", "training-flag-false", 1, "logits = model(x, training=False)"),
    ("dropout", "dropout-rate-changed", 2, "keras.layers.Dropout(0.7),"),
    ("fit", "class-weight-added", 1, None),
    ("fit", "sample-weight-added", 1, None),
    ("fit", "steps-per-epoch-changed", 1, None),
    ("gan", "gan-order-swapped", 1, None),
    ("metric", "metric-fed-replica-share", 1, "train_loss.update_state(replica_loss)"),
    ("train_step", "metric-fed-replica-share", 1, "self.loss_tracker.update_state(replica_loss)"),
    ("loop", "reduce-op-flipped", 1, "return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica_losses, axis=None)"),
    ("loop", "loss-not-reduced", 1, "return strategy.experimental_local_results(per_replica_losses)[0]"),
    ("metric", "metric-reset-each-step", 2, "train_loss.reset_state()"),
    ("gan", "independent-reordered", 3, None),
    ("loop", "renamed-consistently", 2, "logits_renamed = model(x, training=True)"),
    ("metric", "scopes-merged", 1, None),
    ("loop", "default-spelled-out", 2, None),
    ("fit", "steps-per-execution", 1, None),
    ("loop", "tf-function-toggled", 1, None),
    ("loop", "distribute-from-function", 1, "dist_dataset = strategy.distribute_datasets_from_function(lambda input_context: dataset.rebatch(input_context.get_per_replica_batch_size(GLOBAL_BATCH_SIZE)))"),
    ("loop", "comments-formatting", 1, None),
    ("unbuilt", "in-step-build-dropped", 2, None),
    ("loop", "epoch-cut", 1, "dist_dataset = strategy.experimental_distribute_dataset(dataset.take(15))"),
    ("fit", "epoch-cut", 1, "x_train[:-1], y_train[:-1]"),
    ("fit", "fit-shuffle-flipped", 1, "shuffle=False"),
    ("fit", "validation-cut", 1, "validation_data=(x_val[:-1], y_val[:-1])"),
    ("loop", "loop-epochs-changed", 1, "for epoch in range(1):"),
    ("drawn", "loop-epochs-changed", 1, "for step in range(31):"),
]


@pytest.mark.parametrize("name, kind, count, line", EXPECTED, ids=[f"{k}-{n}" for n, k, _, _ in EXPECTED])
def test_each_kind_makes_its_mutants_on_the_fixtures(name, kind, count, line):
    text = migrated(name)
    found = of_fixture(name, kind)
    assert len(found) == count, [m.what for m in found]
    registered = {k.name: k for k in mutants.kinds()}[kind]
    for mutant in found:
        assert mutant.kind == kind and mutant.label == registered.label and mutant.family == registered.family
        assert mutant.text != text and mutant.what and mutant.where.startswith("line ")
        ast.parse(mutant.text)
    if line is not None:
        assert any(line in added for m in found for added in changed_lines(text, m.text)[1]), [changed_lines(text, m.text) for m in found]


def test_every_main_kind_is_tested_above_and_made_by_the_fixtures_but_clipnorm_removed():
    tested = {kind for _, kind, _, _ in EXPECTED}
    made = {m.kind for name in NAMES for m in every(name)}
    kinds = {k.name for k in mutants.kinds()}
    # A clipping that certainly acts is clipped per replica by Keras's optimizers: no right
    # migration holds one, so no fixture can (the operator is for files that clip by hand).
    assert kinds - tested == {"clipnorm-removed"}
    assert kinds - made == {"clipnorm-removed"}


def test_the_reproducers_kinds_are_in_the_main_set():
    kinds = {k.name: k.label for k in mutants.kinds()}
    for kind in ("undistributed-dataset", "training-flag-false", "dropout-rate-changed", "divisor-per-replica", "metric-fed-replica-share", "load-dropped", "momentum-changed", "schedule-per-replica"):
        assert kinds[kind] == mutants.WRONG


def test_clipnorm_removed_only_where_the_clip_certainly_acts():
    small = migrated("loop").replace("SGD(learning_rate=0.1, momentum=0.9)", "SGD(learning_rate=0.1, momentum=0.9, clipnorm=1e-4)")
    large = migrated("loop").replace("SGD(learning_rate=0.1, momentum=0.9)", "SGD(learning_rate=0.1, momentum=0.9, clipnorm=1.0)")
    (mutant,) = of(small, "clipnorm-removed")
    assert "optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)" in mutant.text
    assert of(large, "clipnorm-removed") == []
    assert of(small, "clipnorm-added") == []


# --- nothing where the pattern is absent, or where the label would not be certain ---------------
@pytest.mark.parametrize(
    "name, kind",
    [
        ("fit", "divisor-per-replica"),  # no compute_average_loss
        ("fit", "undistributed-dataset"),  # fit: no distributed dataset
        ("fit", "gan-order-swapped"),
        ("metric", "regularization-dropped"),  # no regularizer
        ("loop", "training-flag-false"),  # no Dropout or BatchNormalization: the flag changes nothing
        ("loop", "drop-remainder-flipped"),  # 512 examples split into whole global batches of 32
        ("load_weights", "initializer-changed"),  # weights loaded over the initializers
        ("load_weights", "seed-changed"),
        ("train_step", "class-weight-added"),  # its own train_step
        ("dropout", "distribute-from-function"),  # a partial last batch is split otherwise
        ("loop", "metric-fed-replica-share"),  # no metric
        ("loop", "fit-shuffle-flipped"),  # no fit
        ("train_step", "validation-cut"),  # no validation data
    ],
)
def test_no_mutant_where_the_pattern_is_absent(name, kind):
    assert of_fixture(name, kind) == []


UNTRAINED = '''
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dropout(0.5), keras.layers.Dense(2)])
    probe = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    probe.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
probe.summary()
model.fit(tf.zeros((64, 4)), tf.zeros((64, 2)), batch_size=8 * strategy.num_replicas_in_sync)
'''


def test_layers_and_optimizers_of_a_model_that_is_never_trained_are_left_alone():
    for kind in ("width-changed", "activation-changed", "initializer-changed"):
        for mutant in of(UNTRAINED, kind):
            removed, added = changed_lines(UNTRAINED, mutant.text)
            assert all("probe" not in line for line in removed), kind
    assert len(of(UNTRAINED, "width-changed")) == 2
    assert of(UNTRAINED, "learning-rate-changed") == []  # only the untrained probe has an optimizer object
    (string_optimizer,) = of(UNTRAINED, "optimizer-class-changed")
    assert "optimizer='sgd'" in string_optimizer.text


FIT_ON_A_DATASET = '''
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
dataset = tf.data.Dataset.from_tensor_slices((tf.zeros((64, 4)), tf.zeros((64, 2)))).batch(8 * strategy.num_replicas_in_sync)
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
model.fit(dataset, epochs=2, shuffle=True)
'''


def test_fit_shuffle_is_flipped_only_on_arrays_and_an_epoch_cut_only_past_the_steps_compared():
    """fit ignores shuffle for a dataset; a dataset of 4 batches cut to 3 would change nothing
    a proof of 3 steps compares but its end, which is what the kind is for, so it needs 5."""
    assert of(FIT_ON_A_DATASET, "fit-shuffle-flipped") == []
    assert of(FIT_ON_A_DATASET, "epoch-cut") == []
    (cut,) = of(FIT_ON_A_DATASET.replace("(64, ", "(80, "), "epoch-cut")
    assert ".take(4)" in cut.text


INFERENCE_STEP = '''
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dropout(0.5), keras.layers.Dense(2)])
    optimizer = keras.optimizers.SGD(0.1)


def step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y)) / strategy.num_replicas_in_sync
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
'''


def test_dropout_is_only_changed_where_the_step_runs_it_in_training():
    # model(x) without training=True: Dropout does nothing, so its rate does not matter.
    assert of(INFERENCE_STEP, "dropout-rate-changed") == []
    assert of(INFERENCE_STEP, "training-flag-false") == []
    assert [m.what for m in of(INFERENCE_STEP, "layer-removed")] == ["Dense removed from the list of layers"]
    trained = INFERENCE_STEP.replace("model(x)", "model(x, training=True)")
    assert len(of(trained, "dropout-rate-changed")) == 1 and len(of(trained, "training-flag-false")) == 1


SIMULTANEOUS_GAN = '''
import tensorflow as tf

def train_step(images):
    noise = tf.zeros([4, 2])
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        fake = generator(noise, training=True)
        gen_loss = tf.reduce_mean(discriminator(fake, training=True))
        disc_loss = -gen_loss
    gen_grads = gen_tape.gradient(gen_loss, generator.trainable_variables)
    disc_grads = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
    gen_optimizer.apply_gradients(zip(gen_grads, generator.trainable_variables))
    disc_optimizer.apply_gradients(zip(disc_grads, discriminator.trainable_variables))
'''


def test_two_updates_whose_gradients_are_both_taken_are_independent():
    assert of(SIMULTANEOUS_GAN, "gan-order-swapped") == []
    (swap,) = of(SIMULTANEOUS_GAN, "independent-reordered")
    assert swap.label == mutants.RIGHT and "generator and discriminator" in swap.what or "discriminator" in swap.what
    lines = swap.text.splitlines()
    assert lines.index("    disc_optimizer.apply_gradients(zip(disc_grads, discriminator.trainable_variables))") < lines.index("    gen_optimizer.apply_gradients(zip(gen_grads, generator.trainable_variables))")
    shared = SIMULTANEOUS_GAN.replace("disc_optimizer.apply", "gen_optimizer.apply")  # one optimizer: its step count orders them
    assert [m for m in of(shared, "independent-reordered") if "updates" in m.what] == []


def test_a_gan_whose_second_update_reads_the_first_model_is_swapped_wrong():
    text = migrated("gan")
    (swap,) = of(text, "gan-order-swapped")
    lines = swap.text.splitlines()
    g, d = (lines.index(f"    {n}_optimizer.apply_gradients(zip({n}_gradients, {m}.trainable_variables))") for n, m in (("g", "generator"), ("d", "discriminator")))
    assert g < d
    assert sorted(swap.text.splitlines()) == sorted(text.splitlines())  # the same statements, reordered


def test_steps_per_execution_only_where_fit_has_no_callbacks():
    text = migrated("fit").replace("validation_data=(x_val, y_val),", "callbacks=[keras.callbacks.TerminateOnNaN()], validation_data=(x_val, y_val),")
    assert of(text, "steps-per-execution") == []


def test_steps_per_execution_not_where_the_model_class_has_a_compile_of_its_own():
    # AlexNdungu's trainer (part B): compile(self, optimizer, loss) takes no steps_per_execution.
    text = migrated("train_step").replace("    def train_step(self, data):", "    def compile(self, optimizer):\n        super().compile(optimizer=optimizer)\n\n    def train_step(self, data):")
    assert len(of(migrated("train_step"), "steps-per-execution")) == 1
    assert of(text, "steps-per-execution") == []


def test_reduction_not_changed_where_the_step_reads_per_example_losses_through_call():
    # A migration that reads self.loss.call(y, y_pred) never applies the object's reduction.
    base = migrated("train_step")
    assert len(of(base, "reduction-changed")) == 1
    assert of(base.replace("self.loss_fn(y, y_pred)", "self.loss_fn.call(y, y_pred)"), "reduction-changed") == []


def test_take_and_shuffle_need_a_known_size():
    text = migrated("loop").replace("features = rng.random((512, 8), dtype=np.float32)", "features = load_features()").replace("labels = rng.integers(0, 4, size=(512,))", "labels = load_labels()")
    for kind in ("take-added", "shuffle-added", "drop-remainder-flipped", "distribute-from-function"):
        assert of(text, kind) == [], kind
    assert len(of(text, "skip-added")) == 1  # wrong whatever the size: a batch fewer, or none


# --- right variants keep the program ----------------------------------------------------------
def _dump(text: str) -> str:
    return ast.dump(ast.parse(text))


@pytest.mark.parametrize("name", NAMES)
def test_renames_are_consistent(name):
    text = migrated(name)
    for mutant in of_fixture(name, "renamed-consistently"):
        new = re.search(r"-> (\w+)_renamed", mutant.what).group(1)
        assert f"{new}_renamed" in mutant.text
        # Renamed back, the program is the original's, node for node.
        assert _dump(re.sub(rf"\b{new}_renamed\b", new, mutant.text)) == _dump(text)


@pytest.mark.parametrize("name", NAMES)
def test_comments_and_formatting_keep_the_syntax_tree(name):
    text = migrated(name)
    (mutant,) = of_fixture(name, "comments-formatting")
    assert _dump(mutant.text) == _dump(text)
    assert mutant.text.count("\n#") + mutant.text.count("\n    #") > text.count("\n#") + text.count("\n    #")


@pytest.mark.parametrize("name", NAMES)
def test_reorders_keep_the_statements(name):
    text = migrated(name)
    def simple_statements(source):
        return sorted(ast.dump(n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt) and not hasattr(n, "body"))

    for mutant in of_fixture(name, "independent-reordered"):
        assert simple_statements(mutant.text) == simple_statements(text)
        assert _dump(mutant.text) != _dump(text)


def test_merged_scopes_hold_the_same_statements_in_one_block():
    text = migrated("metric")
    (mutant,) = of(text, "scopes-merged")
    assert text.count("with strategy.scope():") == 2 and mutant.text.count("with strategy.scope():") == 1
    removed, added = changed_lines(text, mutant.text)
    assert sorted(s for s in removed if s != "with strategy.scope():") == sorted(added)


def test_defaults_spelled_out_are_keras_defaults():
    text = migrated("train_step")
    found = {m.what for m in of(text, "default-spelled-out")}
    assert "RMSprop(...) with rho=0.9, momentum=0.0, epsilon=1e-07" in found
    loop = of(migrated("loop"), "default-spelled-out")
    assert all("momentum" not in m.what for m in loop)  # written already
    adam = of('import keras\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\nwith strategy.scope():\n    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])\n    model.compile(optimizer="adam", loss="mse")\nmodel.fit(x, y, batch_size=4 * strategy.num_replicas_in_sync)\n', "default-spelled-out")
    assert any("optimizer=keras.optimizers.Adam()" in m.text for m in adam)


def test_tf_function_toggled_only_on_an_outer_step_without_side_effects():
    text = migrated("loop")
    (mutant,) = of(text, "tf-function-toggled")
    assert "@tf.function" not in mutant.text
    (back,) = of(mutant.text, "tf-function-toggled")
    assert _dump(back.text) == _dump(text)
    noisy = text.replace("    return strategy.reduce(", "    print('step')\n    return strategy.reduce(")
    assert of(noisy, "tf-function-toggled") == []


# --- the held-out set -------------------------------------------------------------------------
def test_the_heldout_operators_are_kept_out_of_the_default_run():
    main = {k.name for k in mutants.kinds()}
    heldout = {k.name for k in mutants.kinds(heldout=True)}
    assert heldout and not main & heldout
    assert all(k.heldout for k in mutants.kinds(heldout=True)) and not any(k.heldout for k in mutants.kinds())
    assert {k.label for k in mutants.kinds(heldout=True)} == {mutants.WRONG, mutants.RIGHT}
    for name in NAMES:
        assert {m.kind for m in every(name)} <= main
        for m in every(name, True):
            assert m.kind in heldout
            ast.parse(m.text)


HELDOUT = [
    ("fit", "use-bias-dropped", 2, 'keras.layers.Dense(3, use_bias=False),'),
    ("train_step", "loss-function-changed", 1, 'self.loss_fn = keras.losses.MeanAbsoluteError(reduction="none")'),
    ("fit", "epochs-changed", 1, "epochs=EPOCHS + 1"),
    ("loop", "variable-frozen", 1, "optimizer.apply_gradients(zip(gradients[:-1], model.trainable_variables[:-1]))"),
    ("loop", "strategy-replaced", 1, "strategy = tf.distribute.get_strategy()"),
    ("gan", "loss-summed", 3, "g_loss = tf.reduce_sum(cross_entropy(tf.ones_like(fake_logits), fake_logits)) / strategy.num_replicas_in_sync"),
    ("gan", "noise-scaled", 1, "noise = tf.random.normal([batch, LATENT_DIM], stddev=2.0)"),
    ("loop", "gradients-scaled", 1, "gradients = [g * 0.5 for g in gradients]"),
    ("loop", "tape-persistent", 1, "with tf.GradientTape(persistent=True) as tape:"),
    ("loop", "prefetch-added", 1, "dist_dataset = strategy.experimental_distribute_dataset(dataset.prefetch(2))"),
    ("loop", "zip-listed", 1, "optimizer.apply_gradients(list(zip(gradients, model.trainable_variables)))"),
    ("loop", "keyword-arguments", 2, "keras.layers.Dense(units=4),"),
    ("schedule", "keyword-arguments", 3, "model.compile(optimizer=keras.optimizers.SGD(learning_rate=schedule), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))"),
    ("fit", "replicas-named", 1, "NUM_REPLICAS = strategy.num_replicas_in_sync"),
]


@pytest.mark.parametrize("name, kind, count, line", HELDOUT, ids=[f"{k}-{n}" for n, k, _, _ in HELDOUT])
def test_each_heldout_kind_makes_its_mutants(name, kind, count, line):
    text = migrated(name)
    found = of_fixture(name, kind, heldout=True)
    assert len(found) == count, [m.what for m in found]
    assert {m.label for m in found} == {{k.name: k.label for k in mutants.kinds(heldout=True)}[kind]}
    assert any(line in added for m in found for added in changed_lines(text, m.text)[1])
    assert of_fixture(name, kind) == []  # not in the default run


def test_every_heldout_kind_is_tested():
    assert {k for _, k, _, _ in HELDOUT} == {k.name for k in mutants.kinds(heldout=True)}


def test_the_replica_count_named_is_read_from_the_name_everywhere_after():
    (mutant,) = of(migrated("fit"), "replicas-named", heldout=True)
    assert "strategy.num_replicas_in_sync" not in mutant.text.split("NUM_REPLICAS = strategy.num_replicas_in_sync", 1)[1]
    assert _dump(mutant.text.replace("NUM_REPLICAS = strategy.num_replicas_in_sync\n", "").replace("NUM_REPLICAS", "strategy.num_replicas_in_sync")) == _dump(migrated("fit"))


# --- the README's table is the registry ----------------------------------------------------------
def test_the_readme_table_lists_every_kind_with_its_label():
    readme = (BENCH / "mutants" / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (wrong|right) \|", readme, re.M))
    registered = {k.name: k.label for k in [*mutants.kinds(), *mutants.kinds(heldout=True)]}
    assert rows == registered


# --- notebooks ----------------------------------------------------------------------------------
def test_a_notebooks_cells_are_mutated_in_place():
    cells = [
        "import tensorflow as tf\nimport keras\nstrategy = tf.distribute.MirroredStrategy()",
        "%matplotlib inline\nBATCH = 16",
        "with strategy.scope():\n    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation='relu'), keras.layers.Dense(1)])\n    model.compile(optimizer=keras.optimizers.SGD(0.1), loss='mse')",
        "model.fit(x, y, batch_size=BATCH * strategy.num_replicas_in_sync, epochs=2)",
    ]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None} for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(notebook, indent=1)
    found = mutants.mutants_of(text, "train.ipynb")
    assert {"batch-per-replica", "learning-rate-changed", "width-changed"} <= {m.kind for m in found}
    for mutant in found:
        data = json.loads(mutant.text)
        sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in data["cells"]]
        if mutant.kind != "comments-formatting":
            assert sum(a != b for a, b in zip(sources, cells)) == 1, mutant.kind
        assert sources[1].startswith("%matplotlib inline")
        assert mutant.where.startswith("cell ")
    (per_replica,) = [m for m in found if m.kind == "batch-per-replica"]
    assert per_replica.where == "cell 4, line 1"


# --- the driver's bookkeeping ---------------------------------------------------------------------
def outcome(kind, label, status, message="why"):
    return driver.Outcome("a.py", kind, label, "loss", f"{kind} here", "line 3", status, message)


def test_score_false_alarms_and_exit_status():
    outcomes = [
        outcome("mean-per-replica", "wrong", "different"),
        outcome("mean-per-replica", "wrong", "migrated-fails"),
        outcome("momentum-changed", "wrong", "equivalent", "on 2 replicas: the same first update"),
        outcome("take-added", "wrong", "inconclusive"),
        outcome("take-added", "wrong", "harness-error"),
        outcome("renamed-consistently", "right", "equivalent"),
        outcome("tf-function-toggled", "right", "different", "the gradient differs"),
    ]
    summary = driver.summarize(outcomes)
    assert (summary.wrong, summary.rejected, summary.right, summary.proven) == (5, 4, 2, 1)
    assert summary.score == 0.8 and summary.false_alarm_count == 1
    assert [o.kind for o in summary.survivors] == ["momentum-changed"]
    assert [o.kind for o in summary.false_alarms] == ["tf-function-toggled"]
    assert summary.kinds["mean-per-replica"] == {"label": "wrong", "family": "loss", "total": 2, "held": 2}
    assert driver.exit_status(summary) == 1
    text = driver.render(summary)
    assert "mutation score: 4 of 5 wrong mutants rejected (80%)" in text
    assert "false alarms: 1 of 2 right variants not proven" in text
    assert "a.py line 3: momentum-changed: momentum-changed here\n      equivalent: on 2 replicas: the same first update" in text
    assert "a.py line 3: tf-function-toggled: tf-function-toggled here\n      different: the gradient differs" in text
    assert re.search(r"^momentum-changed +loss +1 +0 +0%$", text, re.M)
    assert "of the survivors" not in text
    unseen = outcome("mean-per-replica", "wrong", "equivalent", "the same 3 steps; not compared: the training the script does after the steps compared (distiller.fit at line 9)")
    assert "of the survivors, 1 changed training the proof says it did not compare" in driver.render(driver.summarize([unseen]))


def test_exit_status_is_0_only_for_a_full_score_and_no_false_alarm():
    assert driver.exit_status(driver.summarize([outcome("a", "wrong", "different"), outcome("b", "right", "equivalent")])) == 0
    assert driver.exit_status(driver.summarize([outcome("a", "wrong", "different"), outcome("b", "right", "inconclusive")])) == 1
    assert driver.exit_status(driver.summarize([outcome("a", "wrong", "equivalent")])) == 1
    assert driver.exit_status(driver.summarize([])) == 2


def test_the_dry_run_makes_and_parses_the_fixtures_mutants(capsys):
    assert driver.main(["--fixtures", "--dry", "--only", "loop", "--kind", "mean-per-replica", "--kind", "renamed-consistently"]) == 0
    out = capsys.readouterr().out
    assert "3 mutants of 1 files: 1 wrong, 2 right" in out and "all 3 parse" in out
    assert driver.main(["--fixtures", "--dry", "--kind", "no-such-kind"]) == 2


def test_the_driver_proves_each_mutant_against_its_original(monkeypatch, capsys):
    seen = []

    def fake_prove(pairs, args):
        seen.extend(pairs)
        results = []
        for migrated_path, original_path in pairs:
            text = Path(migrated_path).read_text()
            assert Path(original_path).read_text() == (FIXTURES / "loop.original.py").read_text()
            wrong = "reduce_mean(per_example_loss)" in text
            results.append(("different" if wrong else "equivalent", "2 x" if wrong else "same"))
        return results

    monkeypatch.setattr(driver, "prove", fake_prove)
    code = driver.main(["--fixtures", "--only", "loop", "--kind", "mean-per-replica", "--kind", "divisor-per-replica", "--kind", "renamed-consistently"])
    out = capsys.readouterr().out
    assert len(seen) == 1 + 4  # the migration itself first, then its 4 mutants
    assert "mutation score: 1 of 2 wrong mutants rejected (50%)" in out
    assert "false alarms: 0 of 2 right variants not proven" in out
    assert "loop.py line 38: divisor-per-replica: divided by BATCH_SIZE (per replica), not GLOBAL_BATCH_SIZE\n      equivalent: same" in out
    assert code == 1


def test_a_runs_json_is_read_back_by_report(tmp_path, capsys):
    outcomes = [outcome("mean-per-replica", "wrong", "different"), outcome("momentum-changed", "wrong", "equivalent"), outcome("renamed-consistently", "right", "equivalent")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"mutants": [driver.asdict(o) | {"verdict": o.verdict} for o in outcomes]}))
    assert driver.main(["--report", str(path), "--markdown"]) == 1
    out = capsys.readouterr().out
    assert "mutation score: 1 of 2 wrong mutants rejected (50%)" in out
    assert "| `momentum-changed` | wrong | 1 | 0 | 0% |" in out
    assert "| `renamed-consistently` | right | 1 | 1 | 0 |" in out
    assert "| **all** | wrong | 2 | 1 | **50%** |" in out


def test_a_batch_the_harness_fails_on_is_harness_errors(monkeypatch):
    import autofix.smoke

    def broken(*args, **kwargs):
        raise RuntimeError("no TensorFlow here")

    monkeypatch.setattr(autofix.smoke, "compare_many", broken)
    args = driver.argparse.Namespace(batch=2, replicas=2, steps=3, timeout=10)
    assert driver.prove([("a", "b"), ("c", "d"), ("e", "f")], args) == [("harness-error", "RuntimeError: no TensorFlow here")] * 3


def test_a_sample_takes_each_kinds_mutants_from_the_files_in_turn():
    def made(name: str, kind: str, n: int):
        return (driver.Subject(name, "", ""), mutants.Mutant(kind, "wrong", "loss", f"{name} {n}", "", n))

    items = [made("a.py", "k", 1), made("a.py", "k", 2), made("a.py", "j", 3), made("b.py", "k", 4), made("c.py", "k", 5)]
    assert [m.what for _, m in driver.sampled(items, 2)] == ["a.py 1", "a.py 3", "b.py 4"]
    assert [m.what for _, m in driver.sampled(items, 1)] == ["a.py 1", "a.py 3"]
    # the second kind starts at the second file that has it
    items.append(made("b.py", "j", 6))
    assert [m.what for _, m in driver.sampled(items, 1)] == ["a.py 1", "b.py 6"]
    assert driver.sampled(items, 10) == items


def test_assume_proven_skips_the_proof_of_the_migrations(monkeypatch, capsys):
    seen = []

    def fake_prove(pairs, args):
        seen.extend(pairs)
        return [("different", "2 x")] * len(pairs)

    monkeypatch.setattr(driver, "prove", fake_prove)
    code = driver.main(["--fixtures", "--only", "loop", "--kind", "mean-per-replica", "--assume-proven"])
    out = capsys.readouterr().out
    assert len(seen) == 1 and "the migrations are taken as proven" in out
    assert code == 0


SOFTMAX_FIT = '''
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
x = np.random.rand(64, 4).astype("float32")
y = np.random.randint(0, 3, 64)
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation=ACTIVATION)])
    model.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=False))
model.fit(x, y, batch_size=8 * strategy.num_replicas_in_sync, epochs=1)
'''


def test_from_logits_is_not_flipped_where_a_softmax_or_sigmoid_makes_the_prediction():
    # Keras computes the crossentropy from the softmax's logits whatever from_logits says (the
    # flag flipped there was proven equivalent: a label that was wrong, not the proof).
    assert of(SOFTMAX_FIT.replace("ACTIVATION", '"softmax"'), "from-logits-flipped") == []
    assert of(SOFTMAX_FIT.replace("ACTIVATION", "tf.nn.sigmoid"), "from-logits-flipped") == []
    (flipped,) = of(SOFTMAX_FIT.replace("ACTIVATION", "None"), "from-logits-flipped")
    assert "from_logits=True" in flipped.text


DEAD_BRANCH = '''
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
x = np.random.rand(64, 4).astype("float32")
y = np.random.rand(64, 1).astype("float32")
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    if True:
        model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    else:
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mae")
model.fit(x, y, batch_size=8 * strategy.num_replicas_in_sync, epochs=1)
'''


def test_code_behind_a_constant_test_that_never_runs_is_not_mutated():
    # A tutorial keeping a second variant in the else of `if True:`: changing it changes nothing.
    for kind in ("clipnorm-added", "learning-rate-changed", "optimizer-class-changed", "epsilon-changed"):
        for mutant in of(DEAD_BRANCH, kind):
            removed, _added = changed_lines(DEAD_BRANCH, mutant.text)
            assert all("SGD" not in line for line in removed), (kind, mutant.what)
    assert any("Adam" in changed_lines(DEAD_BRANCH, m.text)[0][0] for m in of(DEAD_BRANCH, "clipnorm-added"))
    flipped = DEAD_BRANCH.replace("if True:", "if False:")
    for mutant in of(flipped, "clipnorm-added"):
        removed, _added = changed_lines(flipped, mutant.text)
        assert all("Adam" not in line for line in removed)


def test_a_build_the_step_makes_when_traced_is_dropped_as_a_wrong_mutant():
    text = migrated("unbuilt")
    found = of(text, "in-step-build-dropped")
    assert len(found) == 2  # the model's build and the optimizer's, one mutant each
    removed = [changed_lines(text, m.text)[0] for m in found]
    assert "model.build(flat.shape)" in removed[0] and "optimizer.build(model.trainable_variables)" in removed[1]
    for mutant, lines in zip(found, removed):
        assert mutant.label == "wrong" and "with tf.init_scope():" in lines
        assert not [a for a in changed_lines(text, mutant.text)[1] if a]
    # Outside a function (a build at the top of a script) nothing is made.
    assert of("import tensorflow as tf\nwith tf.init_scope():\n    model.build((None, 3))\n", "in-step-build-dropped") == []
