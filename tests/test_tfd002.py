"""TFD002 unscaled-batch, driven by the fixture pairs in fixtures/tfd002."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from autofix.engine import Options, analyse
from fixturecases import FIXTURES, assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read

# The fixes of the fixtures, as applied where the file does not say whether its batch is meant
# per replica (a bare ``.batch(64)``): only with --unsafe-fixes. ``DEFAULT`` is what a plain run
# does (tests at the end of this file).
TFD002 = Options(select=("TFD002",), unsafe_fixes=True)
DEFAULT = Options(select=("TFD002",))


@pytest.mark.parametrize("case", params("tfd002", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, TFD002)


@pytest.mark.parametrize("case", params("tfd002", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, TFD002)


@pytest.mark.parametrize("case", params("tfd002", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, TFD002)


HEADER = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "x = np.ones((64, 4), 'float32')\n"
)
MODEL = (
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
)


@pytest.mark.parametrize(
    "batch, expected",
    [
        ("32", "32 * strategy.num_replicas_in_sync"),
        ("16 + 16", "(16 + 16) * strategy.num_replicas_in_sync"),
        ("2 ** 5", "2 ** 5 * strategy.num_replicas_in_sync"),
        ("size // 2", "(size // 2) * strategy.num_replicas_in_sync"),
        ("batch_size=32", "batch_size=32 * strategy.num_replicas_in_sync"),
    ],
)
def test_scaling_keeps_precedence(batch, expected):
    source = HEADER + "size = 64\n" + f"ds = tf.data.Dataset.from_tensor_slices((x, x)).batch({batch})\n" + MODEL + "model.fit(ds)\n"
    new = analyse(source, TFD002).new_text
    assert f".batch({expected})" in new


STEP = (
    "optimizer = model.optimizer\n"
    "def step_fn(batch):\n"
    "    features, labels = batch\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.nn.compute_average_loss(tf.reduce_sum(tf.square(model(features) - labels), axis=1))\n"
    "    grads = tape.gradient(loss, model.trainable_variables)\n"
    "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
)


@pytest.mark.parametrize(
    "loop",
    [
        "for batch in dist:\n    strategy.run(step_fn, args=(batch,))\n",
        "it = iter(dist)\nfor _ in range(3):\n    strategy.run(step_fn, args=(next(it),))\n",
        "@tf.function\ndef train(inputs):\n    strategy.run(step_fn, args=(inputs,))\nfor batch in dist:\n    train(batch)\n",
    ],
)
def test_a_distributed_dataset_is_followed_into_the_training_step(loop):
    source = (
        HEADER
        + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\n"
        + "ds = ds.cache().prefetch(2)\n"
        + "dist = strategy.experimental_distribute_dataset(ds)\n"
        + MODEL
        + STEP
        + loop
    )
    analysis = analyse(source, TFD002)
    assert ".batch(8 * strategy.num_replicas_in_sync)" in analysis.new_text


@pytest.mark.parametrize(
    "use",
    [
        "",  # distributed, then never used
        "def eval_fn(batch):\n    return model(batch[0])\nfor batch in dist:\n    strategy.run(eval_fn, args=(batch,))\n",
    ],
)
def test_a_distributed_dataset_that_trains_nothing_is_not_a_finding(use):
    source = (
        HEADER
        + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\n"
        + "dist = strategy.experimental_distribute_dataset(ds)\n"
        + MODEL
        + use
    )
    assert analyse(source, TFD002).findings == []


def test_unused_or_unknown_destinations_are_not_claimed():
    source = HEADER + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\nsave_somewhere(ds)\n"
    assert analyse(source, TFD002).findings == []


@pytest.mark.parametrize(
    "constant, taken, expected",
    [
        # A public module-level name keeps its value; the global batch is a new name.
        ("BATCH_SIZE", "GLOBAL_BATCH_SIZE", "GLOBAL_BATCH_SIZE_2 = BATCH_SIZE * strategy.num_replicas_in_sync\n"),
        # A private one becomes the global batch; its per-replica value gets a new name.
        ("_BATCH_SIZE", "_BATCH_SIZE_PER_REPLICA", "_BATCH_SIZE = _BATCH_SIZE_PER_REPLICA_2 * strategy.num_replicas_in_sync\n"),
    ],
)
def test_collision_free_names(constant, taken, expected):
    source = (
        HEADER.replace("strategy = ", f"{taken} = 'taken'\nstrategy = ")
        + f"{constant} = 16\n"
        + f"ds = tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch({constant})\n"
        + MODEL
        + f"model.fit(ds, steps_per_epoch=64 // {constant})\n"
    )
    new = analyse(source, TFD002).new_text
    assert expected in new
    assert f"{taken} = 'taken'" in new


@pytest.mark.parametrize(
    "keyword",
    [
        # validation inputs that cannot be read again as one array: a call, a dict of inputs
        "validation_data=(np.load('v.npy'), x)",
        "validation_data=({'a': x, 'b': x}, x)",
        "validation_data=(x, x), **options",  # may give a validation_batch_size of its own
    ],
)
def test_array_validation_is_reported_not_scaled(keyword):
    """A validation set of unknown size may be a single, uneven batch once the batch is
    scaled (Keras 3 then fails): report with the reason, change nothing."""
    source = HEADER + "pair = (x, x)\n" + MODEL + f"model.fit(x, x, batch_size=32, {keyword})\n"
    analysis = analyse(source, TFD002)
    (finding,) = analysis.findings
    assert not finding.fixable and analysis.new_text is None
    assert "does not split evenly over the replicas" in finding.reason
    assert keyword.split("=")[0] + "=" in finding.reason


@pytest.mark.parametrize(
    "keyword, size",
    [
        ("validation_data=(x, x)", "len(x)"),
        ("validation_data=[x[:40], x[:40]]", "len(x[:40])"),
        ("validation_data=pair", "len(pair[0])"),  # a name bound only to (inputs, targets)
        ("validation_data=([x, x], x)", "len(x)"),  # several inputs: Keras requires them all as long
        ("validation_split=0.1", "(len(x) - int(len(x) * (1 - 0.1)))"),  # as Keras splits
    ],
)
def test_array_validation_written_in_the_call_gets_a_batch_that_splits_evenly(keyword, size):
    """A validation set whose size an expression reads again at run time is batched by
    min(the global batch, its size rounded down to a multiple of the replica count): an even
    first batch on every count."""
    # (validation_split=: 640 examples, so that what it leaves to train on is more than a global
    # batch on 2, 4 and 8 replicas; 64 would leave 57, one batch that 2 replicas cannot split)
    more = "x = np.ones((640, 4), 'float32')\n" if keyword.startswith("validation_split") else ""
    source = HEADER + more + "pair = (x, x)\n" + MODEL + f"model.fit(x, x, batch_size=32, {keyword})\n"
    analysis = analyse(source, TFD002)
    (finding,) = analysis.findings
    assert finding.fixable
    assert (
        f"model.fit(x, x, batch_size=32 * strategy.num_replicas_in_sync, {keyword}, validation_batch_size=min(32 * strategy.num_replicas_in_sync, "
        f"{size} // strategy.num_replicas_in_sync * strategy.num_replicas_in_sync))\n"
    ) in analysis.new_text
    again = analyse(analysis.new_text, TFD002)
    assert again.new_text is None and again.findings == []


@pytest.mark.parametrize(
    "made, array",
    [
        ("rng = np.random.default_rng(0)\nv = rng.normal(size=(40, 4))\n", True),
        ("rng = np.random.RandomState(0)\nv = rng.rand(40, 4)\n", True),
        ("v = sampler.normal(size=(40, 4))\n", False),  # not known to be NumPy's
    ],
)
def test_draws_of_a_numpy_random_generator_are_arrays(made, array):
    source = HEADER + made + MODEL + "model.fit(x, x, batch_size=32, validation_data=(v, v))\n"
    (finding,) = analyse(source, TFD002).findings
    assert finding.fixable is array


def test_validation_evaluation_and_prediction_batches_are_not_training_batches():
    source = (
        HEADER
        + "val = tf.data.Dataset.from_tensor_slices((x, x)).batch(8)\n"
        + "test = tf.data.Dataset.from_tensor_slices((x, x)).batch(16)\n"
        + MODEL
        + "model.fit(x, x, batch_size=32, validation_data=val)\n"
        + "model.evaluate(test)\n"
        + "model.evaluate(x, x, batch_size=64)\n"
        + "model.predict(x, batch_size=64)\n"
    )
    analysis = analyse(source, TFD002)
    assert [f.line for f in analysis.findings] == [10]
    assert "batch_size=32 * strategy.num_replicas_in_sync" in analysis.new_text
    assert ".batch(8)" in analysis.new_text and ".batch(16)" in analysis.new_text

@pytest.mark.parametrize(
    "data",
    [
        # A fragment: the dataset comes from a name nothing binds.
        "ds = ds.batch(8).prefetch(2)\n" + MODEL + "model.fit(ds)\n",
    ],
)
def test_batches_that_change_nothing_or_come_from_nowhere_are_left_alone(data):
    assert analyse(HEADER + data, TFD002).findings == []


def _default_fit_batches(source: str) -> list[int]:
    """The lines of the ``fit`` calls on arrays that train on Keras's default batch (the
    sites ``autofix migrate`` scales; ``check`` leaves them to Keras)."""
    from autofix.analysis.program import Program
    from autofix.engine import _parsed
    from codemods.tfd002_unscaled_batch.evidence import Evidence
    from codemods.tfd002_unscaled_batch.sites import Sites

    program = Program(*_parsed(source))
    return [program.line(s.call) for s in Sites(program, Evidence(program)).find() if s.kind == "fit" and s.arg is None]


@pytest.mark.parametrize(
    "labels, lines",
    [
        # randint's first argument is a bound, not the number of rows: 64 examples here.
        ("np.random.randint(0, 4, size=(64,))", [9]),
        # Fewer examples than the batch: one batch, whatever its size.
        ("np.random.randint(0, 4, size=(4,))", []),
    ],
)
def test_a_default_batch_site_counts_the_examples_and_a_shape_first_maker_is_not_a_range(labels, lines):
    source = HEADER.replace("(64, 4)", "(64, 4)" if lines else "(4, 4)") + f"labels = {labels}\n" + MODEL + "model.fit(x, labels)\n"
    assert _default_fit_batches(source) == lines


def test_an_imported_helper_given_the_number_of_devices_may_split_the_batch_itself():
    source = (
        "import tensorflow as tf\n"
        "from pipeline import get_data\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "n = len(tf.config.list_logical_devices('GPU'))\n"
        "train = get_data(batch_size=512, num_devices=n)\n"
        + MODEL
        + "model.fit(train)\n"
    )
    assert analyse(source, TFD002).findings == []
    assert analyse(source.replace(", num_devices=n", ""), TFD002).findings


def test_an_in_batch_objective_keeps_its_batch():
    """Retrieval with in-batch negatives: the batch is what is trained, not only how fast."""
    source = (
        "import tensorflow as tf\n"
        "import tensorflow_recommenders as tfrs\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "class Model(tf.keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.task = tfrs.tasks.Retrieval()\n"
        "ds = tf.data.Dataset.from_tensor_slices((tf.zeros([512, 4]), tf.zeros([512]))).batch(256)\n"
        "with strategy.scope():\n"
        "    model = Model()\n"
        "    model.compile(optimizer=tf.keras.optimizers.Adagrad(0.1))\n"
        "model.fit(ds, epochs=1)\n"
    )
    assert analyse(source, TFD002).findings == []
    assert analyse(source.replace("tfrs.tasks.Retrieval()", "None"), TFD002).findings


# --- every read of the value a fix changes is accounted for ------------------------------------


def module_level_assignments(text: str) -> dict[str, list[str]]:
    """The statements that bind each public name at module level, as code; a statement that
    sets constants (``BATCH = 64``, ``BATCH, EPOCHS = 64, 3``, ``BATCH *= 2``) is given whole,
    any other as the name alone (a dataset is what a fix rewrites)."""
    found: dict[str, list[str]] = {}
    for statement in ast.parse(text).body:
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and statement.value is not None:
            targets = [statement.target]
        else:
            continue
        try:
            ast.literal_eval(statement.value)
            code = ast.unparse(statement)
        except ValueError:
            code = None
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and not node.id.startswith("_"):
                    found.setdefault(node.id, []).append(code or node.id)
    return found


@pytest.mark.parametrize("case", params("tfd002", "fixed"))
def test_public_module_level_names_keep_their_name_and_value(case):
    """Another module may import them (``from train import BATCH_SIZE``): a fix adds names,
    it never removes one, nor changes a constant one is set to."""
    before = module_level_assignments(read(case.before))
    after = module_level_assignments(read(case.after))
    for name, statements in before.items():
        assert after.get(name) == statements, name


def test_a_public_constant_imported_by_a_sibling_module_stays_importable():
    """The reproducer's shape: train.py's BATCH_SIZE is imported by evaluate.py."""
    source = read(FIXTURES / "tfd002" / "public_constant_kept.py")
    fixed = analyse(source, TFD002).new_text
    assert "\nBATCH_SIZE = 64\n" in fixed
    assert "    GLOBAL_BATCH_SIZE = BATCH_SIZE * strategy.num_replicas_in_sync\n" in fixed
    assert "make_dataset(GLOBAL_BATCH_SIZE)" in fixed and "1024 // GLOBAL_BATCH_SIZE" in fixed


FORM_PROGRAM = (
    "import tensorflow as tf\n"
    "{form}"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "ds = tf.data.Dataset.range(1024).map(lambda i: (tf.ones([4]), tf.ones([1]))).repeat().batch({name})\n"
    "steps = 1024 // {name}\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(ds, steps_per_epoch=steps)\n"
)


def batch_and_divisor(text: str) -> tuple[str, str]:
    tree = ast.parse(text)
    batch = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "batch")
    divisor = next(n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv))
    return ast.unparse(batch.args[0]), ast.unparse(divisor.right)


@pytest.mark.parametrize(
    "form",
    [
        "BATCH = 64\n",
        "BATCH, EPOCHS = 64, 2\n",
        "[BATCH, EPOCHS] = [64, 2]\n",
        "BATCH = 32\nBATCH *= 2\n",
        "BATCH = 32\nBATCH = BATCH * 2\n",
        "BATCH: int = 64\n",
        "BATCH = EVAL_BATCH = 64\n",
    ],
)
@pytest.mark.parametrize("name", ["BATCH", "_BATCH"])
def test_what_is_derived_from_the_batch_follows_it_whatever_binds_it(form, name):
    """``steps = N // BATCH`` must use the batch the data is made of, however BATCH is bound
    (a tuple, an augmented assignment...), public or private."""
    source = FORM_PROGRAM.format(form=form.replace("BATCH", name), name=name)
    analysis = analyse(source, TFD002)
    fixed = analysis.new_text
    assert fixed is not None, analysis.findings
    batch, divisor = batch_and_divisor(fixed)
    assert batch == divisor
    # ... and that is the global batch, defined once the strategy exists.
    assert f"\n{batch} = " in fixed and f" * strategy.num_replicas_in_sync\n" in fixed.split(f"\n{batch} = ")[1].split("\n")[0] + "\n"
    if not name.startswith("_"):
        assert module_level_assignments(fixed)[name] == module_level_assignments(source)[name]
    assert analyse(fixed, TFD002).new_text is None


@pytest.mark.parametrize(
    "form, batch, why",
    [
        ("", "(BATCH := 64)", "BATCH is set by ':=' (line 3) and also used on line 4"),
        ("BATCH = 64\ndef setup():\n    global BATCH\n    BATCH = 128\nsetup()\n", "BATCH", "BATCH is set in more than one block (lines 2, 5) and also used on line 9"),
        ("import json\nwith open('c.json') as BATCH:\n    pass\n", "BATCH", "BATCH is set by a with or except clause (line 3)"),
    ],
)
def test_bindings_the_global_batch_cannot_follow_are_reported(form, batch, why):
    source = FORM_PROGRAM.format(form=form, name="BATCH").replace(".batch(BATCH)", f".batch({batch})")
    analysis = analyse(source, TFD002)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    assert not finding.fixable and why in finding.reason


def test_a_log_keeps_the_per_replica_value_where_the_global_batch_cannot_be_named():
    """log_config() runs outside main(), where the global batch is made: it keeps printing the
    constant, which still holds the per-replica value; the steps follow the global batch."""
    source = read(FIXTURES / "tfd002" / "module_constant_logged_elsewhere.py")
    fixed = analyse(source, TFD002).new_text
    assert 'print("batch size:", BATCH_SIZE)' in fixed
    assert "steps_per_epoch=256 // GLOBAL_BATCH_SIZE" in fixed


REASON_LINES = [
    (re.compile(r"(?<!and )(?<!which )\b(?P<what>(?!and\b|which\b)[\w.\[\]\"']+) is (?:also )?(?:used|read) on line (?P<line>\d+)"), "what"),
    (re.compile(r"\band (?:is )?(?:also )?used on line (?P<line>\d+)"), "subject"),
    (re.compile(r"\bwhich is also used on line (?P<line>\d+)"), "set from"),
    (re.compile(r"set from (?P<what>\S+) \(line (?P<line>\d+)\)"), "what"),
    (re.compile(r"creates the strategy \(line (?P<line>\d+)\)|the strategy is created \(line (?P<line2>\d+)\)|than the strategy \(line (?P<line3>\d+)\)"), "strategy"),
    (re.compile(r"(?P<what>\w+) = [\w.]+ x replicas on line (?P<line>\d+)"), "what ="),
    (re.compile(r"\((?P<what>[\w.]+) x replicas on line (?P<line>\d+)"), "what"),
    (re.compile(r"is last set \(line (?P<line>\d+)\)"), "setter"),
    (re.compile(r"is set by [^(]+\(line (?P<line>\d+)\)|is set on line (?P<line2>\d+)|the batch size on line (?P<line3>\d+)"), "subject"),
    (re.compile(r"move above (?:tf\.)?(?P<what>[\w.]+)\(\) \(line (?P<line>\d+)\)"), "call"),
    (re.compile(r"(?P<what>[\w.]+)\(\) is called (?:with \*\*kwargs )?on line (?P<line>\d+)"), "call"),
    (re.compile(r"it uses '(?P<what>\w+)', which is only set on line (?P<line>\d+)"), "what"),
    (re.compile(r"a constant global batch \((?P<what>[^,]+), line (?P<line>\d+)\)"), "what"),
    (re.compile(r"without the strategy \((?P<what>[\w.]+), line (?P<line>\d+)\)"), "what"),
]


def assert_lines_attached(source: str, reason: str) -> None:
    """Every ``line N`` in a reason is the line of what the words before it name."""
    lines = source.splitlines()
    reason = reason.removeprefix("no automatic fix: ")
    subject = reason.split(" ", 1)[0]
    checked = 0
    for pattern, kind in REASON_LINES:
        for match in pattern.finditer(reason):
            groups = match.groupdict()
            number = int(groups.get("line") or groups.get("line2") or groups["line3"])
            text = lines[number - 1]
            if kind == "subject":
                assert subject in text, (reason, number, text)
            elif kind == "what":
                assert match.group("what").strip("'") in text, (reason, number, text)
            elif kind == "set from":
                assert reason.split(" is set from ")[1].split(" (line")[0] in text, (reason, number, text)
            elif kind == "strategy":
                assert "Strategy(" in text or "strategy()" in text, (reason, number, text)
            elif kind == "what =":
                assert f"{match.group('what')} =" in text, (reason, number, text)
            elif kind == "call":
                assert match.group("what").rpartition(".")[2] + "(" in text, (reason, number, text)
            else:
                assert text.lstrip().startswith((f"{subject} ", f"{subject},", f"{subject}:")), (reason, number, text)
            checked += 1
    assert checked == len(re.findall(r"\bline \d+", reason)), f"a line number not attached to anything known: {reason}"


@pytest.mark.parametrize("case", [c for c in params("tfd002", "unchanged") if c.id.split("/")[1].startswith("report_")])
def test_every_line_a_reason_names_is_the_line_of_what_it_names(case):
    source = read(case.before)
    findings = analyse(source, TFD002).findings
    assert findings
    for finding in findings:
        assert_lines_attached(source, finding.reason or "")


def test_the_reason_names_the_use_and_the_strategy_each_by_its_own_line():
    source = read(FIXTURES / "tfd002" / "report_constant_derived_elsewhere.py")
    (finding,) = analyse(source, TFD002).findings
    assert "BATCH_SIZE is also used on line 11 in steps_per_epoch(), outside main(), which creates the strategy (line 15)" in finding.reason


@pytest.mark.parametrize(
    "program, expected",
    [
        # Used before the strategy, in a statement the strategy cannot move above.
        (
            HEADER.replace("strategy = tf.distribute.MirroredStrategy()\n", "")
            + "B = 16\nsteps = 64 // B\ntf.config.set_visible_devices([], 'GPU')\n"
            + "strategy = tf.distribute.MirroredStrategy()\n"
            + "ds = tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch(B)\n" + MODEL + "model.fit(ds, steps_per_epoch=steps)\n",
            "cannot move above it",
        ),
        # Set again after its first use, then used again: a helper reading it runs before the
        # new value (line 9) and after it (line 13).
        (
            HEADER + "B = 16\nds = tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch(B)\ndef steps():\n    return 64 // B\n"
            + "print(steps())\nB = 8\n" + MODEL + "model.fit(ds, steps_per_epoch=steps())\n",
            "B is used on line 8, before it is last set (line 10)",
        ),
    ],
)
def test_reasons_for_a_global_batch_that_cannot_come_first(program, expected):
    (finding,) = analyse(program, TFD002).findings
    assert not finding.fixable and expected in finding.reason
    assert_lines_attached(program, finding.reason)


def test_a_helper_run_only_after_the_name_is_set_again_reads_the_new_value_not_the_batch():
    """``steps()`` runs after ``B = 8``: it reads 8, not the batch's 16, so the batch is scaled
    and the steps, which were never derived from it, stay (as a literal would)."""
    program = (
        HEADER + "B = 16\nds = tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch(B)\ndef steps():\n    return 64 // B\nB = 8\n"
        + MODEL + "model.fit(ds, steps_per_epoch=steps())\n"
    )
    analysis = analyse(program, TFD002)
    assert ".batch(B * strategy.num_replicas_in_sync)" in analysis.new_text
    assert "    return 64 // B\nB = 8\n" in analysis.new_text


@pytest.mark.parametrize(
    "setup, name, big",
    [
        ("BATCH = 32\n", "BATCH", "GLOBAL_BATCH * 2"),
        ("_BATCH = 32\n", "_BATCH", "_BATCH * 2"),
    ],
)
def test_a_batch_proportional_to_the_constant_follows_its_global_batch(setup, name, big):
    """A second training set batched with ``BATCH * 2``, beside ``steps = N // BATCH``: both
    batches and the steps follow one global batch, in a single stable fix."""
    source = (
        "import tensorflow as tf\n"
        + setup
        + "strategy = tf.distribute.MirroredStrategy()\n"
        + f"ds = tf.data.Dataset.range(1024).map(lambda i: (tf.ones([4]), tf.ones([1]))).repeat().batch({name})\n"
        + f"big = tf.data.Dataset.range(1024).map(lambda i: (tf.ones([4]), tf.ones([1]))).repeat().batch({name} * 2)\n"
        + f"steps = 1024 // {name}\n"
        + MODEL
        + "model.fit(ds, steps_per_epoch=steps)\nmodel.fit(big, steps_per_epoch=4)\n"
    )
    analysis = analyse(source, TFD002)
    assert [f.fixable for f in analysis.findings] == [True, True]
    fixed = analysis.new_text
    batch, divisor = batch_and_divisor(fixed)
    assert batch == divisor and f".batch({big})" in fixed
    assert analyse(fixed, TFD002).new_text is None


@pytest.mark.parametrize("helper_first", [True, False])
def test_a_default_that_reads_the_constant_is_a_use_that_follows_it(helper_first):
    """``def steps_for(n, b=BATCH)`` reads BATCH when the def runs: the default must hold the
    global batch too, so the def comes after the global batch is defined."""
    helper = "def steps_for(n, b=BATCH):\n    return n // b\n"
    source = (
        "import tensorflow as tf\nBATCH = 64\n"
        + (helper if helper_first else "")
        + "strategy = tf.distribute.MirroredStrategy()\n"
        + (helper if not helper_first else "")
        + "ds = tf.data.Dataset.range(1024).map(lambda i: (tf.ones([4]), tf.ones([1]))).repeat().batch(BATCH)\n"
        + MODEL
        + "model.fit(ds, steps_per_epoch=steps_for(1024))\n"
    )
    fixed = analyse(source, TFD002).new_text
    assert "def steps_for(n, b=GLOBAL_BATCH):" in fixed and ".batch(GLOBAL_BATCH)" in fixed
    # GLOBAL_BATCH is defined before the def that reads it.
    assert fixed.index("GLOBAL_BATCH = BATCH * strategy.num_replicas_in_sync") < fixed.index("def steps_for")


def test_the_files_own_global_batch_is_used_when_the_strategy_is_a_parameter():
    """A library entry point given its strategy: the loss is averaged over the file's own
    global batch while the data is batched per replica; the data gets that global batch."""
    source = (
        "import tensorflow as tf\n"
        "BATCH = 16\n"
        "def train(strategy, x):\n"
        "    global_batch = BATCH * strategy.num_replicas_in_sync\n"
        "    ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH)\n"
        "    dist = strategy.experimental_distribute_dataset(ds)\n"
        "    with strategy.scope():\n"
        "        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
        "        optimizer = tf.keras.optimizers.SGD(0.01)\n"
        "    def step(inputs):\n"
        "        features, labels = inputs\n"
        "        with tf.GradientTape() as tape:\n"
        "            per_example = tf.reduce_sum(tf.square(model(features) - labels), axis=1)\n"
        "            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)\n"
        "        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))\n"
        "    for batch in dist:\n"
        "        strategy.run(step, args=(batch,))\n"
    )
    analysis = analyse(source, TFD002)
    assert [f.fixable for f in analysis.findings] == [True]
    assert ".batch(global_batch)" in analysis.new_text and "\nBATCH = 16\n" in analysis.new_text


def test_a_command_line_batch_is_left_alone_unless_the_file_makes_a_global_batch_of_it():
    """``--batch-size`` is as often the global batch (a paper's 4096) as a per-replica one: it
    is chosen when the script runs, so nothing is reported; but a file that makes its own
    global batch from the flag shows the flag is per replica, and is fixed to use it."""
    source = read(FIXTURES / "tfd002" / "noop_command_line_batch_with_derived_steps.py")
    assert analyse(source, TFD002).findings == []
    flagged = source.replace(
        "strategy = tf.distribute.MirroredStrategy()\n",
        "strategy = tf.distribute.MirroredStrategy()\nGLOBAL = args.batch_size * strategy.num_replicas_in_sync\n",
    ).replace("256 // args.batch_size", "256 // GLOBAL")
    fixed = analyse(flagged, TFD002).new_text
    assert ".batch(GLOBAL)" in fixed


# (Not a fixture pair: the runtime check of the pairs observes fit's and a step's batches, not
# train_on_batch's.)
TRAIN_ON_BATCH = Path(__file__).resolve().parent / "data" / "train_on_batch_tf_keras.py"


def test_a_batch_fed_to_tf_keras_train_on_batch_is_scaled():
    """tf_keras splits what train_on_batch is handed over the replicas (measured,
    docs/losses.md), as fit does."""
    analysis = analyse(TRAIN_ON_BATCH.read_text(), TFD002)
    assert [f.code for f in analysis.findings] == ["TFD002"] and analysis.findings[0].fixable
    assert ".batch(BATCH_SIZE * strategy.num_replicas_in_sync)" in analysis.new_text


def test_a_batch_fed_to_keras3_train_on_batch_is_no_finding():
    """Keras 3 hands the whole batch to every replica: no replica gets a fraction of it."""
    for spelling in ("import keras", "from tensorflow import keras"):
        source = TRAIN_ON_BATCH.read_text().replace("import tf_keras as keras", spelling)
        assert analyse(source, Options(select=("TFD002",))).findings == []


# --- what the code says a batch is (comments, checks, Keras's default, one machine's devices) -----


@pytest.mark.parametrize(
    "text, expected",
    [
        ("double the batch size for the two GPUs", "global"),
        ("64 per GPU x 2", "global"),
        ("32 per replica * 4", "global"),
        ("twice the per-device batch", "global"),
        ("total batch across replicas", "global"),
        ("effective batch", "global"),
        ("summed over every GPU", "global"),
        ("split over all the devices", "global"),
        ("for 8 GPUs", "global"),
        ("batch size per GPU", "per device"),
        ("per-replica batch; the global one is this times the number of replicas", "per device"),
        ("each replica gets this many", "per device"),
        ("on both GPUs", "global"),
        ("split across the replicas", "global"),
        ("fits in memory on our GPUs", None),
        ("x86 host", None),
        ("double the default", None),
        ("Double the batch size", "global"),
        ("batch size doubled", "global"),
        ("twice the batch", "global"),
        ("double the learning rate", None),
        ("64 x 2", None),
        ("tuned on the GPU", None),
        ("batch size", None),
        ("autofix: ignore[TFD002]", None),
    ],
)
def test_a_comment_is_read_for_what_it_says_the_batch_is(text, expected):
    from codemods.tfd002_unscaled_batch.comments import meaning

    assert meaning(text) == expected


CONSTANT_TRAINED = (
    "BATCH = 128\n"
    "{check}\n"
    "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH).repeat()\n" + MODEL + "model.fit(ds, epochs=1, steps_per_epoch={steps})\n"
)


@pytest.mark.parametrize(
    "check, steps, global_",
    [
        ("assert BATCH % strategy.num_replicas_in_sync == 0", "2", True),
        ("if BATCH % strategy.num_replicas_in_sync:\n    raise ValueError('uneven')", "2", True),
        ("print('per replica', BATCH // strategy.num_replicas_in_sync)", "2", True),
        ("PER_REPLICA = int(BATCH / strategy.num_replicas_in_sync)", "2", True),
        # A step count from the batch is what per-replica code computes too: it proves nothing.
        ("steps = len(x) // BATCH", "steps", False),
        # Divisible by a number, or divided by something else, says nothing of the replicas.
        ("assert BATCH % 8 == 0", "2", False),
        ("HALF = BATCH // 2", "2", False),
    ],
)
def test_a_batch_checked_or_divided_over_the_replicas_is_global(check, steps, global_):
    source = HEADER + CONSTANT_TRAINED.format(check=check, steps=steps)
    findings = analyse(source, TFD002).findings
    assert (findings == []) is global_


@pytest.mark.parametrize("fit", ["model.fit(x, x)", "model.fit(x, x, epochs=2)", "model.fit(x=x, y=x, validation_split=0.5)"])
def test_keras_default_batch_under_a_strategy_is_not_a_finding_but_a_written_one_is(fit):
    assert analyse(HEADER + MODEL + fit + "\n", TFD002).findings == []
    written = fit.replace("x, x", "x, x, batch_size=32").replace("y=x,", "y=x, batch_size=32,")
    assert [f.line for f in analyse(HEADER + MODEL + written + "\n", TFD002).findings] == [8]


def test_migrate_still_keeps_each_replica_at_keras_default_batch():
    single = "import numpy as np\nimport tensorflow as tf\nx = np.ones((64, 4), 'float32')\n" + (
        "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, x)\n"
    )
    analysis = analyse(single, Options(migrate="mirrored"))
    assert analysis.new_text is not None
    assert "batch_size=32 * strategy.num_replicas_in_sync" in analysis.new_text


MULTI_WORKER = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "strategy = tf.distribute.{kind}()\n"
    "x = np.ones((64, 4), 'float32')\n"
    "{batch}\n"
    "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH)\n" + MODEL + "model.fit(ds)\n"
)
LOCAL_BATCHES = [
    "BATCH = 64 * len(tf.config.list_physical_devices('GPU'))",
    "gpus = tf.config.list_logical_devices('GPU')\nBATCH = 64 * max(1, len(gpus))",
    "n_gpus = len(tf.config.experimental.list_physical_devices('GPU'))\nBATCH = 64 * n_gpus",
    "gpus = tf.config.list_physical_devices('GPU')\nBATCH = 64\nBATCH *= len(gpus)",
]


@pytest.mark.parametrize("batch", LOCAL_BATCHES)
def test_a_batch_of_this_machines_devices_is_one_workers_under_multi_worker(batch):
    source = MULTI_WORKER.format(kind="MultiWorkerMirroredStrategy", batch=batch)
    analysis = analyse(source, TFD002)
    assert analysis.new_text is None
    [finding] = analysis.findings
    assert not finding.fixable and "number of workers" in finding.reason
    # Under MirroredStrategy this machine's devices are all the replicas: the batch is global.
    assert analyse(MULTI_WORKER.format(kind="MirroredStrategy", batch=batch), TFD002).findings == []


@pytest.mark.parametrize(
    "batch",
    [
        "BATCH = 64 * strategy.num_replicas_in_sync",
        "NUM_WORKERS = 2\nBATCH = 64 * len(tf.config.list_physical_devices('GPU')) * NUM_WORKERS",
        "GLOBAL_BATCH = 64 * len(tf.config.list_physical_devices('GPU'))\nBATCH = GLOBAL_BATCH",
        "BATCH = 64 * len(tf.config.list_physical_devices('GPU'))  # total over all workers",
    ],
)
def test_a_multi_worker_batch_shown_global_otherwise_is_no_finding(batch):
    assert analyse(MULTI_WORKER.format(kind="MultiWorkerMirroredStrategy", batch=batch), TFD002).findings == []


# --- a model built alike and kept on one device: a comparison at one batch -------------------

TWIN = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "x = np.ones((512, 4), 'float32')\n"
    "train_ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(64)\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(train_ds, epochs=1)\n"
    "plain = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense({units})])\n"
    "plain.compile(optimizer='adam', loss='mse')\n"
    "plain.fit({data}, epochs=1)\n"
)


@pytest.mark.parametrize(
    "units, data, reported",
    [
        (4, "train_ds", False),  # the twin is fit on the very dataset: the batch compared
        (8, "train_ds", True),  # another model on the same data compares nothing
        (4, "tf.data.Dataset.from_tensor_slices((x, x)).batch(32)", True),  # the twin at another batch
    ],
)
def test_a_twin_fit_on_the_same_batch_makes_it_the_batch_compared(units, data, reported):
    findings = analyse(TWIN.format(units=units, data=data), TFD002).findings
    assert bool(findings) is reported


# --- what the file says the batch means ---------------------------------------------------


def _fit_on(batch_line: str, batch: str = "BATCH") -> str:
    return HEADER + batch_line + f"ds = tf.data.Dataset.from_tensor_slices((x, x)).batch({batch})\n" + MODEL + "model.fit(ds)\n"


@pytest.mark.parametrize(
    "line",
    [
        "BATCH = 64\n",
        "BATCH = 64  # batch size\n",
        "BATCH = 16 * 4\n",
    ],
)
def test_a_batch_nothing_says_is_per_replica_is_reported_and_left_alone(line):
    """A constant the file does not call per replica may be the global batch its author chose:
    scaling it would change what correct code trains. It is reported with that reason, left
    as it is, and scaled only with --unsafe-fixes."""
    source = _fit_on(line)
    analysis = analyse(source, DEFAULT)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    assert not finding.fixable and "meant per replica or as the global batch" in finding.reason
    assert "--unsafe-fixes" in finding.reason
    # A suggestion: whether it is a bug is not said, so it does not claim one.
    assert finding.unsafe
    unsafe = analyse(source, TFD002)
    assert unsafe.findings[0].fixable and "strategy.num_replicas_in_sync" in unsafe.new_text


def test_a_batch_nothing_says_is_per_replica_does_not_fail_check(tmp_path):
    """``check`` exits 0 on it and counts it as a suggestion; with --unsafe-fixes it is a
    finding (exit 1) whose fix ``fix`` writes; said per replica, it fails ``check``."""
    from click.testing import CliRunner

    from autofix.cli import main

    script = tmp_path / "train.py"
    script.write_text(_fit_on("BATCH = 64\n"))
    plain = CliRunner().invoke(main, ["check", "--no-cache", "--select", "TFD002", str(script)])
    assert plain.exit_code == 0, plain.output
    assert "no findings, 1 suggestion" in plain.output + plain.stderr
    unsafe = CliRunner().invoke(main, ["check", "--no-cache", "--unsafe-fixes", "--select", "TFD002", str(script)])
    assert unsafe.exit_code == 1 and "1 finding (TFD002 1), 1 fixable" in unsafe.output + unsafe.stderr
    script.write_text(_fit_on("BATCH = 64  # per replica\n"))
    said = CliRunner().invoke(main, ["check", "--no-cache", "--select", "TFD002", str(script)])
    assert said.exit_code == 1 and "1 finding (TFD002 1), 1 fixable" in said.output + said.stderr


@pytest.mark.parametrize("comment", ["  # global batch", "  # total batch over all GPUs"])
def test_a_batch_the_file_calls_global_is_no_finding(comment):
    """The reason's advice works: a comment saying the batch is global settles it."""
    assert analyse(_fit_on(f"BATCH = 64{comment}\n"), DEFAULT).findings == []


@pytest.mark.parametrize(
    "line, batch",
    [
        ("BATCH_PER_REPLICA = 64\n", "BATCH_PER_REPLICA"),
        ("per_gpu_batch = 64\n", "per_gpu_batch"),
        ("BATCH = 64  # per GPU\n", "BATCH"),
        ("# the batch of each replica\nBATCH = 64\n", "BATCH"),
    ],
)
def test_a_batch_the_file_calls_per_replica_is_fixed_by_default(line, batch):
    source = _fit_on(line, batch)
    analysis = analyse(source, DEFAULT)
    (finding,) = analysis.findings
    assert not finding.unsafe and finding.fixable
    assert f"{batch} * strategy.num_replicas_in_sync" in analysis.new_text


def test_a_batch_the_file_multiplies_by_the_replicas_elsewhere_is_fixed_by_default():
    """``GLOBAL = BATCH * strategy.num_replicas_in_sync`` beside ``.batch(BATCH)``: the file's code
    says BATCH is each replica's."""
    source = _fit_on("BATCH = 64\nGLOBAL = BATCH * strategy.num_replicas_in_sync\nprint(GLOBAL)\n")
    analysis = analyse(source, DEFAULT)
    assert analysis.findings and not analysis.findings[0].unsafe
    assert analysis.new_text != source


def test_a_per_replica_default_of_a_helper_is_read_through_the_parameter():
    source = (
        HEADER
        + "def make(per_replica_batch=64):\n    return tf.data.Dataset.from_tensor_slices((x, x)).batch(per_replica_batch)\n"
        + MODEL
        + "model.fit(make())\n"
    )
    analysis = analyse(source, DEFAULT)
    assert analysis.findings and not analysis.findings[0].unsafe


@pytest.mark.parametrize(
    "rate",
    [
        "0.001 * strategy.num_replicas_in_sync",
        "0.001 * world_size",
        "base_lr",
    ],
)
def test_a_learning_rate_scaled_with_the_replicas_says_the_batch_is_per_replica(rate):
    """``Adam(learning_rate=0.001 * world_size)`` beside ``.batch(128)``: the file takes its
    global batch to be 128 times that count, so 128 is each replica's."""
    source = (
        HEADER
        + "world_size = strategy.num_replicas_in_sync\nbase_lr = 0.001 * world_size\n"
        + "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(128)\n"
        + "with strategy.scope():\n"
        + "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
        + f"    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate={rate}), loss='mse')\n"
        + "model.fit(ds)\n"
    )
    analysis = analyse(source, DEFAULT)
    (finding,) = analysis.findings
    assert finding.fixable, finding.reason
    assert ".batch(128 * strategy.num_replicas_in_sync)" in analysis.new_text


def test_a_constant_learning_rate_says_nothing_of_the_batch():
    source = _fit_on("BATCH = 64\n").replace("optimizer='adam'", "optimizer=tf.keras.optimizers.Adam(learning_rate=0.001 * 2)")
    (finding,) = analyse(source, DEFAULT).findings
    assert not finding.fixable



_JOB_CONTEXT = read(FIXTURES / "tfd002" / "noop_batch_read_from_a_job_context.py")
_OWN_METHOD = """\
import numpy as np
import tensorflow as tf


class Trainer:
    def get_property(self, name):
        return 64

    def train_entry(self):
        batch_size = int(self.get_property("batch_size"))
        strategy = tf.distribute.MirroredStrategy()
        x = np.random.rand(256, 4).astype("float32")
        train_ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(batch_size)
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])
            model.compile(optimizer="adam", loss="mse")
        model.fit(train_ds, epochs=1)


Trainer().train_entry()
"""


@pytest.mark.parametrize(
    "source, reported",
    [
        (_JOB_CONTEXT, False),  # a method of the entry point's parameter: chosen when the job runs
        (_OWN_METHOD, True),  # the same method asked of self: the file's own class writes the batch
    ],
)
def test_a_batch_a_job_hands_over_is_chosen_at_run_time(source, reported):
    findings = analyse(source, Options(select=("TFD002",))).findings
    assert bool(findings) is reported
