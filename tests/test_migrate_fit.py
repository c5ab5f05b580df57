"""fit scripts whose batch must be shown to be the global batch (the fixtures are
fixtures/tfd010/fit_validation_split, fit_kfold, fit_helper_batch, custom_loop_checked_batch,
report_validation_uneven, report_keras1, and fixtures/tfd002's helper_*, assert_*,
validation_* and fit_concatenated_arrays; test_migrate.py and test_tfd002.py run them, and
prove every migration by training it):

- how many examples an array holds (analysis/facts/sizes.py), and the validation sets it shows
  safe or not (TFD002's first_batches.py);
- a batch size fixed inside a helper, made its parameter (TFD002's helpers.py);
- an assert that reads a batch keeps the per-replica value;
- a read in a ``for`` body sees the loop's target (values.reaching_bindings);
- Keras 1 scripts are not migrated.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import libcst as cst
import pytest
from fixturecases import FIXTURES

from autofix.analysis.facts.keras1 import first_keras
from autofix.analysis.program import Program
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.core.value_flow import Values
from autofix.engine import Options, _parsed, analyse
from codemods.tfd002_unscaled_batch.first_batches import MAX_REPLICAS, uneven

MIGRATE = Options(migrate="mirrored")
TFD002 = Options(select=("TFD002",))
# What says that a batch written as a number is each replica's: TFD002 fixes such a batch by
# default (a bare one is reported and scaled only with --unsafe-fixes, as test_tfd002 checks).
PER_REPLICA = "  # per replica"


def _program(source: str) -> Program:
    return Program(*_parsed(source))


def _rows_of_last(source: str) -> int | None:
    """The examples the value assigned last in ``source`` (``probe = ...``) holds."""
    program = _program(source)
    target = [a for a in program.index.assigns if isinstance(a, cst.Assign) and program.module.code_for_node(a.targets[0].target) == "probe"]
    return Sizes.of(program).rows(target[-1].value)


LOADED = "import numpy as np\nimport tensorflow as tf\nfrom tensorflow import keras\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        # The loaders' documented sizes, through tuple unpacking.
        ("(x, y), (xt, yt) = keras.datasets.mnist.load_data()\nprobe = x\n", 60000),
        ("(x, y), (xt, yt) = keras.datasets.fashion_mnist.load_data()\nprobe = yt\n", 10000),
        ("(x, y), (xt, yt) = tf.keras.datasets.cifar10.load_data()\nprobe = x\n", 50000),
        ("(x, y), _ = keras.datasets.imdb.load_data(num_words=10000)\nprobe = x\n", 25000),
        # maxlen= drops sequences: not known.
        ("(x, y), _ = keras.datasets.imdb.load_data(maxlen=100)\nprobe = x\n", None),
        # test_split= applied as Keras applies it: int(total * (1 - split)).
        ("(x, y), (xt, yt) = keras.datasets.reuters.load_data(num_words=10000)\nprobe = x\n", 8982),
        ("(x, y), (xt, yt) = keras.datasets.reuters.load_data(test_split=0.1)\nprobe = xt\n", 1123),
        ("(x, y), (xt, yt) = keras.datasets.boston_housing.load_data()\nprobe = xt\n", 102),
        ("(x, y), _ = keras.datasets.california_housing.load_data(version='small')\nprobe = x\n", 480),
        # A module bound to a name (the TensorFlow quickstart).
        ("mnist = tf.keras.datasets.mnist\n(x, y), _ = mnist.load_data()\nx, y = x / 255.0, y\nprobe = x\n", 60000),
        # What keeps the first dimension.
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = np.expand_dims(x.astype('float32') / 255, -1)\n", 60000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x.reshape(60000, 28, 28, 1)\n", 60000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x.reshape((x.shape[0], 784))\n", 60000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[..., None]\n", 60000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[:, 0]\n", 60000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = keras.utils.to_categorical(y, 10)\n", 60000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = np.where(x > .5, 1.0, 0.0)\n", 60000),
        ("(x, y), _ = keras.datasets.boston_housing.load_data()\nx -= x.mean(axis=0)\nx /= x.std(axis=0)\nprobe = x\n", 404),
        # Slices of the first dimension.
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[:1000]\n", 1000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[1000:]\n", 59000),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[-500:]\n", 500),
        ("x = np.zeros((300, 4))\nprobe = x[:1000]\n", 300),
        ("x = np.random.rand(1024, 8)\nprobe = x[:103]\n", 103),
        ("rng = np.random.default_rng(0)\nx = rng.random((1024, 8), dtype=np.float32)\nprobe = x\n", 1024),
        ("x = np.random.normal(0, 1, size=(64, 3))\nprobe = x\n", 64),
        # What a local function returns, with the call's own arguments.
        (
            "def vec(seqs, d=10):\n    out = np.zeros((len(seqs), d))\n    return out\n"
            "(a, _), (b, _) = keras.datasets.reuters.load_data()\nva = vec(a)\nvb = vec(b)\nprobe = vb\n",
            2246,
        ),
        # What changes the first dimension, or is not known.
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x.reshape(-1, 28, 28, 1)\n", None),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = np.expand_dims(x, 0)\n", None),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[::2]\n", None),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[None]\n", None),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[y == 1]\n", None),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x[:, [0, 1], :, [2, 3]]\n", None),
        ("(x, y), _ = keras.datasets.mnist.load_data()\nprobe = x - np.ones((5, 60000, 28, 28))\n", None),
        # imdb's sequences are a list: + and * extend and repeat it.
        ("(x, y), _ = keras.datasets.imdb.load_data()\nx += x\nprobe = x\n", None),
        ("(x, y), _ = keras.datasets.imdb.load_data()\nprobe = x * 2\n", None),
        ("x = np.load('x.npy')\nprobe = x[:1000]\n", None),
        ("if flag:\n    x = np.zeros((10, 2))\nelse:\n    x = np.zeros((20, 2))\nprobe = x\n", None),
    ],
)
def test_how_many_examples_an_array_holds(source, expected):
    assert _rows_of_last(LOADED + source) == expected


KFOLD = LOADED + (
    "(data, targets), _ = keras.datasets.boston_housing.load_data()\n"
    "k = 4\n"
    "n = len(data) // k\n"
    "for i in range(k):\n"
    "    probe = data[{start}:{stop}]\n"
)


@pytest.mark.parametrize(
    "start, stop, expected",
    [
        # A fold: 101 examples whatever the counter, every window inside the 404.
        ("i * n", "(i + 1) * n", 101),
        ("n * i", "n * i + n", 101),
        # A window that may run past the end (i = 3: 303 to 505), or varies in width.
        ("i * n", "(i + 2) * n", None),
        ("", "i * n", None),
        ("i * n", "", None),
    ],
)
def test_a_window_moved_by_a_loop_counter_holds_its_width(start, stop, expected):
    assert _rows_of_last(KFOLD.format(start=start, stop=stop)) == expected


def test_a_counter_rebound_in_the_loop_is_not_the_loops():
    source = KFOLD.format(start="i * n", stop="(i + 1) * n").replace("    probe =", "    i = i * 2\n    probe =")
    assert _rows_of_last(source) is None


def test_a_read_in_a_loop_body_sees_the_loop_target_not_what_came_before():
    source = "i = 10\nfor i in range(3):\n    print(i)\n    i = 5\n    print(i)\nprint(i)\n"
    program = _program(source)
    values = Values.of(program)
    reads = [n for n in program.index.accesses if isinstance(n, cst.Name) and n.value == "i"]
    lines = {program.line(r): sorted(program.line(b) for b in values.reaching_bindings(r)) for r in reads}
    # (Not the ``i = 10`` before the loop: the loop binds i before each run of its body.)
    assert lines[3] == [2] and lines[5] == [4]


FILLED = "text = 'the night we met '\nwindow = 5\nseqs = []\n"


@pytest.mark.parametrize(
    "lines, expected",
    [
        # A string's length, a tuple's, a list filled once per turn of a range loop.
        ("probe = np.zeros((len(text), 2))\n", 17),
        ("pair = (text, window)\nprobe = np.zeros((len(pair), 2))\n", 2),
        ("for i in range(len(text) - window):\n    seqs.append(text[i:i + window])\nprobe = np.zeros((len(seqs), 2))\n", 12),
        # Nested loops multiply, items written in the list count, a with block is no branch.
        ("seqs = [1, 2]\nfor i in range(3):\n    for j in range(1, 5):\n        seqs.append(i * j)\nprobe = np.zeros((len(seqs),))\n", 14),
        ("with ctx:\n    for i in range(4):\n        seqs.append(i)\nprobe = np.zeros((len(seqs),))\n", 4),
        # Unpacked from a tuple of lists; read by enumerate and items: still 12.
        ("a, b = [], []\nfor i in range(12):\n    a.append(i)\n    b.append(-i)\nfor k, v in enumerate(a):\n    print(a[k])\nprobe = np.zeros((len(a),))\n", 12),
        # Not known: a conditional append, a break, a loop of unknown length, the list given to
        # a function or extended or changed by item, a read before the loop is over.
        ("for i in range(9):\n    if i % 2:\n        seqs.append(i)\nprobe = np.zeros((len(seqs),))\n", None),
        ("for i in range(9):\n    seqs.append(i)\n    if i > 3:\n        break\nprobe = np.zeros((len(seqs),))\n", None),
        ("for line in open('f.txt'):\n    seqs.append(line)\nprobe = np.zeros((len(seqs),))\n", None),
        ("for i in range(9):\n    seqs.append(i)\nfill(seqs)\nprobe = np.zeros((len(seqs),))\n", None),
        ("for i in range(9):\n    seqs.append(i)\nseqs.extend([1])\nprobe = np.zeros((len(seqs),))\n", None),
        ("for i in range(9):\n    seqs.append(i)\nseqs += [1]\nprobe = np.zeros((len(seqs),))\n", None),
        ("for i in range(9):\n    seqs.append(i)\n    probe = np.zeros((len(seqs),))\n", None),
        # A list given to an array is not an array's examples (a list given to fit may be
        # several inputs): its length is read only through len().
        ("for i in range(9):\n    seqs.append(i)\nprobe = seqs\n", None),
    ],
)
def test_the_length_of_a_string_tuple_or_list_the_file_fills(lines, expected):
    assert _rows_of_last(LOADED + FILLED + lines) == expected


def test_a_training_set_of_one_uneven_batch_is_not_scaled():
    """19 examples at 32 per replica: one batch, which 2 replicas cannot split (Keras 3 fails):
    reported with the counts of 2, 4 and 8 GPUs it fails on, and not scaled; 36 examples
    split on 2 and 4, not on 8."""
    source = LOADED + (
        "strategy = tf.distribute.MirroredStrategy()\n"
        "x = np.zeros(({n}, 4)); y = np.zeros(({n}, 1))\n"
        "with strategy.scope():\n"
        "    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y, batch_size=32{split})" + PER_REPLICA + "\n"
    )
    (finding,) = analyse(source.format(n=19, split=""), TFD002).findings
    assert not finding.fixable
    assert "the training set holds 19 examples, fewer than the global batch (32 x replicas) on 2 or more" in finding.reason
    assert "as 19 does not over 2, 4 or 8 replicas" in finding.reason
    # validation_split=: what is left for training is what is one batch.
    (split,) = analyse(source.format(n=22, split=", validation_split=0.1"), TFD002).findings
    assert "the training set holds 19 examples" in split.reason
    (eight,) = analyse(source.format(n=36, split=""), TFD002).findings
    assert "on 8 or more replicas" in eight.reason and "as 36 does not over 8 replicas" in eight.reason
    # Even on 2, 4 and 8: scaled. 80 examples at 32 are one uneven batch on 3, 6 or 7 replicas,
    # 7982 at 512 on 16: not counts a training set is held to.
    for n in (80, 840, 7982, 60000):
        (fixed,) = analyse(source.format(n=n, split=""), TFD002).findings
        assert fixed.fixable, n


@pytest.mark.tf
def test_a_training_set_of_one_uneven_batch_fails_on_two_replicas_once_scaled(tmp_path):
    """Measured, not assumed: the fixture's training scaled as a migration would scale it
    fails on 2 replicas (its 19 examples are one batch), and trains on one."""
    from autofix.smoke import run_many
    from autofix.smoke.jobs import SmokeJob

    text = (FIXTURES / "tfd010" / "report_fit_training_set_one_uneven_batch.py").read_text()
    scaled = tmp_path / "scaled.py"
    scaled.write_text(
        "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
        + text.replace("model = keras.Sequential", "with strategy.scope():\n    model = keras.Sequential")
        .replace('model.compile(loss="categorical_crossentropy", optimizer="adam")', '    model.compile(loss="categorical_crossentropy", optimizer="adam")')
        .replace("batch_size=32,", "batch_size=32 * strategy.num_replicas_in_sync,")
    )
    two, one = run_many([SmokeJob(str(scaled))], replicas=2, steps=2, offline=True) + run_many([SmokeJob(str(scaled))], replicas=1, steps=2, offline=True)
    assert not two.ok and "Inputs to operation AddN of type AddN must have the same size and shape" in two.failures[0]
    assert one.ok, one.failures


# --- validation sets: when is the scaled batch's first validation batch even? -----------------

def test_uneven_replica_counts_follow_kerass_arithmetic():
    # 1000 examples validated at 512 per replica: one batch from 2 replicas on, even on 2, 4, 5, 8, 10.
    assert uneven(1000, 512) == [3, 6, 7, 9, 11, 12, 13, 14, 15, 16]
    # A global batch fits in every set on up to 16 replicas, or each count divides it.
    assert uneven(6000, 128) == [] and uneven(101, 1) == [] and uneven(720720, 10**9) == []
    assert MAX_REPLICAS == 16


FIT = LOADED + (
    "strategy = tf.distribute.MirroredStrategy()\n"
    "(x, y), _ = keras.datasets.mnist.load_data()\n"
    "with strategy.scope():\n"
    "    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(), keras.layers.Dense(10)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
)


@pytest.mark.parametrize(
    "call, fixed",
    [
        ("model.fit(x, y, batch_size=128, validation_split=0.1)", True),  # 6000
        ("model.fit(x, y, batch_size=32, validation_data=(x[:512], y[:512]))", True),  # 512 >= 32 x 16
        ("val = (x[:1000], y[:1000])\nmodel.fit(x, y, batch_size=32, validation_data=val)", True),
        # One uneven batch on some replica count, or of a size not known here: where an
        # expression reads its size again at run time, the set gets a batch of its own that
        # splits evenly on every count; where none does, it is reported.
        ("model.fit(x, y, batch_size=64, validation_data=(x[:1000], y[:1000]))", True),  # 16 replicas
        ("model.fit(x, y, batch_size=512, validation_data=(x[:1000], y[:1000]))", True),
        ("val = (x[:1000], y[:1000])\nmodel.fit(x, y, batch_size=512, validation_data=val)", True),
        ("model.fit(x, y, batch_size=64, validation_split=0.001)", True),  # 60 examples
        ("model.fit(x, y, batch_size=512, validation_data=(x[:1000] / 255.0, y[:1000]))", False),
        # The validation set has a batch of its own, which the fix does not change.
        ("model.fit(x, y, batch_size=512, validation_data=(x[:1000], y[:1000]), validation_batch_size=8)", True),
        # Not known: the batch, or the set (a name bound to arrays of unknown size).
        ("model.fit(x, y, batch_size=flags.batch, validation_split=0.1)", True),
        ("val = (np.load('v.npy'), np.load('w.npy'))\nmodel.fit(x, y, batch_size=64, validation_data=val)", True),
        # (the tuple holds the arrays made: its first one read again is the inputs)
        ("val = (np.load('v.npy') / 255.0, np.load('w.npy'))\nmodel.fit(x, y, batch_size=64, validation_data=val)", True),
    ],
)
def test_a_validation_set_is_scaled_only_when_it_splits_on_every_replica_count(call, fixed):
    analysis = analyse(FIT + call + PER_REPLICA + "\n", TFD002)
    (finding,) = analysis.findings
    assert finding.fixable is fixed
    assert (analysis.new_text is not None) is fixed
    # The bare batch: reported, fixed (the same way) only with --unsafe-fixes.
    (bare,) = analyse(FIT + call + "\n", TFD002).findings
    assert not bare.fixable and ("--unsafe-fixes" in bare.reason or not fixed)
    unsafe = analyse(FIT + call + "\n", replace(TFD002, unsafe_fixes=True))
    assert unsafe.findings[0].fixable is fixed
    assert unsafe.new_text == (analysis.new_text.replace(PER_REPLICA, "") if fixed else None)


def test_an_uneven_validation_set_is_named_with_the_replica_counts_it_fails_on():
    analysis = analyse(FIT + "model.fit(x, y, batch_size=512, validation_data=(x[:1000] / 255.0, y[:1000]))\n", TFD002)
    (finding,) = analysis.findings
    assert "the validation set (validation_data=) holds 1000 examples" in finding.reason
    assert "on 3 or more replicas" in finding.reason
    assert "as 1000 does not over 3, 6, 7, 9, 11, 12, 13, 14, 15 or 16 replicas" in finding.reason
    unknown = analyse(FIT + "model.fit(np.load('a.npy'), y, batch_size=64, validation_split=0.2)\n", TFD002).findings[0]
    assert "with validation_split=, a validation set smaller than the scaled global batch" in unknown.reason


RUN_TIME = "validation_batch_size=min(64 * strategy.num_replicas_in_sync, {size} // strategy.num_replicas_in_sync * strategy.num_replicas_in_sync)"


@pytest.mark.parametrize(
    "lines, size",
    [
        # validation_split=: the last len(x) - int(len(x) * (1 - s)) examples, as Keras splits
        ("a = np.load('a.npy')\nmodel.fit(a, y, batch_size=64, validation_split=0.2)\n", "(len(a) - int(len(a) * (1 - 0.2)))"),
        ("a = np.load('a.npy')\nSPLIT = 0.1\nmodel.fit(a, y, batch_size=64, validation_split=SPLIT)\n", "(len(a) - int(len(a) * (1 - SPLIT)))"),
        # inputs written as a list of arrays: Keras splits them all at the first one's length
        ("a = np.load('a.npy')\nb = np.load('b.npy')\nmodel.fit([a, b], y, batch_size=64, validation_split=0.2)\n", "(len(a) - int(len(a) * (1 - 0.2)))"),
        ("a = np.load('a.npy')\nmodel.fit(x, y, batch_size=64, validation_data=([a, a[:, :1]], y[:9]))\n", "len(a)"),
        # a name bound only to (inputs, targets) tuples
        ("a = np.load('a.npy')\nheld = (a[:7], y[:7])\nmodel.fit(x, y, batch_size=64, validation_data=held)\n", "len(held[0])"),
        # inputs cast in the call (a boolean array, by the migration): their length is the array's
        ("a = np.load('a.npy')\nmodel.fit(x, y, batch_size=64, validation_data=(a.astype('float32'), y[:9]))\n", "len(a)"),
    ],
)
def test_a_validation_set_of_unknown_size_gets_a_batch_from_its_size_at_run_time(lines, size):
    analysis = analyse(FIT + lines.removesuffix("\n") + PER_REPLICA + "\n", TFD002)  # (on fit's line)
    assert analysis.new_text is not None, [f.reason for f in analysis.findings]
    assert RUN_TIME.format(size=size) in analysis.new_text
    assert analyse(analysis.new_text, TFD002).findings == []


@pytest.mark.parametrize(
    "lines",
    [
        "model.fit(np.load('a.npy'), y, batch_size=64, validation_split=0.2)\n",  # made in the call: read again, made again
        "a = np.load('a.npy')\nmodel.fit({'a': a, 'b': a}, y, batch_size=64, validation_split=0.2)\n",  # a dict's length is not the examples'
        "a = np.load('a.npy')\nmodel.fit(a, y, batch_size=64, validation_split=fraction())\n",  # a split computed in the call
        "a = np.load('a.npy')\nmodel.fit(a, y, batch_size=64, validation_split=0.2, **options)\n",  # may hold its own
    ],
)
def test_a_validation_set_whose_size_no_expression_reads_again_is_reported(lines):
    analysis = analyse(FIT + lines, TFD002)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    assert "a validation set smaller than the scaled global batch is a single batch" in finding.reason


BOOLEAN = (
    "import numpy as np\nimport keras\nimport tensorflow as tf\n\n\ndef helper():\n    return np.ones((100, 4), dtype=bool)\n\n\n"
    "x = {made}\nx_train = x[:80]\n"
    "model = keras.Sequential([{first}, keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss={loss})\n"
    "model.fit(x_train, x_train[:, :1], batch_size=16)\n"
)


def _boolean(made: str, first: str = "keras.Input((4,))", loss: str = "'mse'") -> str:
    return BOOLEAN.format(made=made, first=first, loss=loss)


@pytest.mark.parametrize(
    "made, cast",
    [
        ("np.zeros((100, 4), dtype=bool)", True),
        ("np.zeros((100, 4), dtype='bool')", True),
        ("np.zeros((100, 4), dtype=np.bool_)", True),
        ("(np.random.rand(100, 4) > 0.5).astype(bool)", True),
        ("np.random.rand(100, 4) > 0.5", True),
        ("helper()", True),  # def helper(): return np.ones((100, 4), dtype=bool)
        ("np.zeros((100, 4), dtype=bool).astype('float32')", False),
        ("np.zeros((100, 4), dtype='float32')", False),
    ],
)
def test_boolean_arrays_fit_is_given_are_cast_to_float32_in_the_call(made, cast):
    """Keras 3 fails on boolean arrays under MirroredStrategy; one device converts inputs to
    the dtype of a functional model's input and targets to its Keras loss's: followed through
    names, slices and a helper's return to where the array is made, and cast in the call."""
    migrated = analyse(_boolean(made), MIGRATE).new_text
    assert migrated is not None
    fit = 'model.fit(x_train.astype("float32"), x_train[:, :1].astype("float32"), batch_size=16 * strategy.num_replicas_in_sync)'
    assert (fit in migrated) is cast
    assert "x_train = x[:80]\n" in migrated  # no other read of the array changes
    assert analyse(migrated, MIGRATE).new_text is None  # stable


@pytest.mark.parametrize(
    "source, why",
    [
        (_boolean("np.zeros((100, 4), dtype=bool)", first="keras.layers.Dense(4)"), "the model is not shown to take float inputs"),
        (_boolean("np.zeros((100, 4), dtype=bool)", first="keras.Input((4,), dtype='int32')"), "the model is not shown to take float inputs"),
        (_boolean("np.zeros((100, 4), dtype=bool)", loss="own_loss"), "its loss (own_loss) is not Keras's own"),
        (_boolean("tf.constant(np.zeros((100, 4)), dtype=tf.bool)"), "it is not shown to be only a NumPy boolean array"),
        (_boolean("np.zeros((100, 4), dtype=bool) if helper else np.zeros((100, 4))"), "it is not shown to be only a NumPy boolean array"),
    ],
)
def test_boolean_arrays_are_not_cast_where_the_cast_is_not_shown_to_train_the_same(source, why):
    analysis = analyse(source.replace("\n\n\nx =", "\n\n\ndef own_loss(y_true, y_pred):\n    return keras.ops.mean(y_pred)\n\n\nx ="), MIGRATE)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    assert "is given a boolean array (x_train" in finding.reason  # x_train, or its slice the targets are
    assert "made on line 14: np.zeros((100, 4)" in finding.reason or "made on line 14: tf.constant(" in finding.reason
    assert "Keras 3 fails on boolean inputs under MirroredStrategy" in finding.reason
    assert why in finding.reason


@pytest.mark.tf
def test_a_validation_set_with_a_batch_of_its_own_runs_on_three_replicas(tmp_path):
    """Measured, not assumed: the migrated Reuters shape validates 1000 examples on 3 replicas
    (batches of 999 and 1); without its validation batch, Keras 3 fails on the first."""
    pytest.importorskip("tensorflow")
    from autofix.smoke import run_many
    from autofix.smoke.jobs import SmokeJob

    fixed = FIXTURES / "tfd010" / "fit_validation_uneven.fixed.py"
    text = fixed.read_text()
    added = text[text.index(", validation_batch_size=") : text.index("\n", text.index(", validation_batch_size=")) - 1]
    unbatched = tmp_path / "unbatched.py"
    unbatched.write_text(text.replace(added, ""))
    assert "validation_batch_size" not in unbatched.read_text()
    runs = run_many([SmokeJob(str(fixed)), SmokeJob(str(unbatched))], replicas=3, steps=2, offline=True)
    assert runs[0].ok, runs[0].failures
    assert not runs[1].ok and "Inputs to operation AddN of type AddN must have the same size and shape" in runs[1].failures[0]


def _without_validation_batch(text: str) -> str:
    """The migration without the validation batch it added (the argument and the comma before
    it; the call's closing parenthesis kept, on the argument's line or on its own)."""
    start = text.index("validation_batch_size=")
    comma = text.rindex(",", 0, start)
    end = text.index("\n", start)
    line = text[start:end]
    return text[:comma] + text[end - 1 if line.count(")") > line.count("(") else end :]


@pytest.mark.tf
@pytest.mark.parametrize("replicas", [2, 3, 4])
@pytest.mark.parametrize("case", ["fit_validation_split_run_time", "fit_validation_split_two_inputs", "fit_padded_sequences_validation_split"])
def test_a_validation_batch_from_the_size_at_run_time_is_proven_on_two_three_and_four_replicas(tmp_path, replicas, case):
    """fit_validation_split_run_time validates 101 examples (known only at run time),
    fit_validation_split_two_inputs, a list of two arrays, 89 (the first array's length read),
    and fit_padded_sequences_validation_split (pad_sequences' array, its fit laid out one
    argument per line) 29, which split evenly over none of 2, 3, 4 replicas: the migration is proven equivalent on each
    (smoke --compare), and runs its validation there (plain smoke: the comparison's runs stop at
    the steps they compare, before fit validates), where without its validation batch Keras 3
    fails on the first validation batch (AddN)."""
    pytest.importorskip("tensorflow")
    from autofix.smoke import run_many
    from autofix.smoke.compare import ComparePair, compare_many
    from autofix.smoke.jobs import SmokeJob

    original = FIXTURES / "tfd010" / f"{case}.py"
    fixed = FIXTURES / "tfd010" / f"{case}.fixed.py"
    unbatched = tmp_path / "unbatched.py"
    unbatched.write_text(_without_validation_batch(fixed.read_text()))
    assert "validation_batch_size" not in unbatched.read_text()
    (proven,) = compare_many([ComparePair(str(fixed), str(original))], replicas=replicas, offline=True)
    assert proven.compare.status == "equivalent", proven.compare.message
    runs = run_many([SmokeJob(str(fixed)), SmokeJob(str(unbatched))], replicas=replicas, steps=2, offline=True)
    assert runs[0].ok, runs[0].failures
    assert not runs[1].ok and "Inputs to operation AddN of type AddN must have the same size and shape" in runs[1].failures[0]


@pytest.mark.tf
def test_boolean_arrays_cast_in_the_call_train_on_two_replicas_where_uncast_they_fail(tmp_path):
    """fit_boolean_arrays: the migration is proven equivalent on 2 replicas (smoke --compare),
    and runs its fit to the end there (plain smoke); without the casts Keras 3 fails on the
    boolean arrays (AddN has no bool kernel)."""
    pytest.importorskip("tensorflow")
    from autofix.smoke import run_many
    from autofix.smoke.compare import ComparePair, compare_many
    from autofix.smoke.jobs import SmokeJob

    original = FIXTURES / "tfd010" / "fit_boolean_arrays.py"
    fixed = FIXTURES / "tfd010" / "fit_boolean_arrays.fixed.py"
    uncast = tmp_path / "uncast.py"
    uncast.write_text(fixed.read_text().replace('.astype("float32")', ""))
    assert ".astype" not in uncast.read_text()
    (proven,) = compare_many([ComparePair(str(fixed), str(original))], replicas=2, offline=True)
    assert proven.compare.status == "equivalent", proven.compare.message
    runs = run_many([SmokeJob(str(fixed)), SmokeJob(str(uncast))], replicas=2, steps=2, offline=True)
    assert runs[0].ok, runs[0].failures
    assert not runs[1].ok and "of bool is not in the list of allowed values" in runs[1].failures[0]


# --- a batch size fixed inside a helper ---------------------------------------------------------

HELPER = LOADED + (
    "def load(x, **options):\n"
    "    return tf.data.Dataset.from_tensor_slices(x).batch(64)" + PER_REPLICA + "\n"
    "\n"
    "def main(options):\n"
    "    strategy = tf.distribute.MirroredStrategy()\n"
    "    x = np.random.rand(256, 4).astype('float32')\n"
    "    with strategy.scope():\n"
    "        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
    "        model.compile(optimizer='adam', loss='mse')\n"
    "    model.fit({call}, epochs=1)\n"
)


def test_a_helper_takes_the_global_batch_where_it_is_called():
    analysis = analyse(HELPER.format(call="load(x)"), TFD002)
    assert "def load(x, batch_size=64, **options):" in analysis.new_text
    assert ".batch(batch_size)" in analysis.new_text
    assert "model.fit(load(x, batch_size=64 * strategy.num_replicas_in_sync), epochs=1)" in analysis.new_text
    assert analyse(analysis.new_text, TFD002).findings == []


def test_a_helper_called_with_kwargs_is_not_given_a_keyword_it_may_already_pass():
    analysis = analyse(HELPER.format(call="load(x, **options)"), TFD002)
    (finding,) = analysis.findings
    assert analysis.new_text is None and not finding.fixable
    assert "load() is called with **kwargs on line 13" in finding.reason


def test_a_name_of_the_file_is_not_taken_for_the_new_parameter():
    analysis = analyse(HELPER.format(call="load(x)").replace("x = np.random", "batch_size = 3\n    x = np.random"), TFD002)
    assert "def load(x, batch_size_2=64, **options):" in analysis.new_text


def test_a_dataset_rebound_then_taken_from_is_shown_to_be_batched_globally():
    """``ds = ds.batch(64)`` then ``fit(ds.take(10))`` (Keras's custom train_step guide)."""
    source = LOADED + (
        "x = np.random.rand(256, 4).astype('float32')\n"
        "ds = tf.data.Dataset.from_tensor_slices((x, x))\n"
        "ds = ds.shuffle(256).batch(64)\n"
        "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(ds.take(10), epochs=1)\n"
    )
    migrated = analyse(source, MIGRATE).new_text
    assert "ds = ds.shuffle(256).batch(64 * strategy.num_replicas_in_sync)" in migrated


# --- an assert ----------------------------------------------------------------------------------

def test_an_asserted_batch_keeps_its_value_and_the_training_batch_is_scaled_where_it_is_made():
    source = LOADED + (
        "strategy = tf.distribute.MirroredStrategy()\n"
        "BATCH = 32" + PER_REPLICA + "\n"
        "assert BATCH <= 64, f'{BATCH} is too large'\n"
        "x = np.random.rand(256, 4).astype('float32')\n"
        "ds = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(ds, epochs=1)\n"
    )
    fixed = analyse(source, TFD002).new_text
    # (A global batch of 64 x 4 would fail this assert on 4 replicas: it checks the per-replica one.)
    assert "assert BATCH <= 64, f'{BATCH} is too large'\n" in fixed
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in fixed


# --- Keras 1 ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "source, what",
    [
        ("model.fit(x, y, nb_epoch=12)\n", "nb_epoch="),
        ("from keras.layers import Convolution2D\nConvolution2D(32, 3, 3, border_mode='same')\n", "border_mode="),
        ("from keras import backend as K\nK.image_dim_ordering()\n", "image_dim_ordering()"),
        # What Keras 2 and 3 still have is not Keras 1 API.
        ("from keras.utils import np_utils\nnp_utils.to_categorical(y)\n", None),
        ("from keras.layers import Convolution2D, Embedding\nConvolution2D(32, 3)\nEmbedding(100, output_dim=8)\n", None),
        ("model.fit(x, y, epochs=12)\n", None),
    ],
)
def test_keras1_api_is_recognised(source, what):
    found = first_keras(_program("import keras\n" + source))
    assert (found[1] if found else None) == what


# --- a dataset only predicted on ----------------------------------------------------------------

PREDICTED = (
    "import numpy as np\nimport tensorflow as tf\nimport keras\n\n"
    "batch_size = 32\n"
    "x = np.random.rand(256, 4).astype('float32')\n"
    "train = tf.data.Dataset.from_tensor_slices((x, x)).batch(batch_size)\n"
    "val = tf.data.Dataset.from_tensor_slices((x, x)).batch(batch_size)\n"
    "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])\n"
    "optimizer = keras.optimizers.SGD()\n"
    "mae = keras.metrics.MeanAbsoluteError()\n"
    "\n\n"
    "@tf.function\n"
    "def train_step(a, b):\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.reduce_mean(tf.square(model(a, training=True) - b))\n"
    "    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_weights), model.trainable_weights))\n"
    "    return loss\n"
    "\n\n"
    "for step, (a, b) in enumerate(train):\n"
    "    train_step(a, b)\n"
    "    print('seen', (step + 1) * batch_size)\n"
    "for a, b in val:\n"
    "    mae.update_state(b, {call})\n"
)


@pytest.mark.parametrize(
    "call, migrated",
    [
        ("model(a, training=False)", True),  # predicted on: the same outputs whatever its batch
        ("model(a)", False),  # training not said: not known to be inference (a loop may train so)
        ("model(a, training=True)", False),  # Dropout, BatchNormalization's batch statistics
    ],
)
def test_a_dataset_only_predicted_on_follows_the_global_batch(call, migrated):
    """A dataset batched with the training batch's constant and only predicted on, outside any
    step: its batch changes no output, so the constant may become the global batch for it too
    (a count of the examples seen, computed from the same constant, needs the global batch)."""
    analysis = analyse(PREDICTED.format(call=call), MIGRATE)
    assert (analysis.new_text is not None) is migrated, [f.reason for f in analysis.findings]
    if migrated:
        assert "val = tf.data.Dataset.from_tensor_slices((x, x)).batch(global_batch_size)\n" in analysis.new_text
        assert "print('seen', (step + 1) * global_batch_size)\n" in analysis.new_text
    else:
        assert any("which of its uses mean the global batch is not known" in f.reason for f in analysis.findings)


# --- a trained model asked about fewer examples than there may be replicas ----------------------

FEW = (
    "import numpy as np\nimport tensorflow as tf\n\n"
    "x = np.random.rand(200, 5, 3).astype('float32')\n"
    "y = x.sum(axis=(1, 2))[:, None]\n"
    "i = 7\n"
    "model = tf.keras.Sequential([tf.keras.Input((5, 3)), {layer}, tf.keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, y, batch_size=16, epochs=1)\n"
    "{use}\n"
)


@pytest.mark.parametrize(
    "layer, use, outcome",
    [
        # A Sequential's predict given only its examples: the model is called itself there.
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x[[i]]))", "print(model(x[[i]], training=False).numpy())"),
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x[np.array([i])]))", "print(model(x[np.array([i])], training=False).numpy())"),
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x[i:i + 1], verbose=0))", "print(model(x[i:i + 1], training=False).numpy())"),
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x=np.expand_dims(x[i], 0)))", "print(model(np.expand_dims(x[i], 0), training=False).numpy())"),
        ("tf.keras.layers.LSTM(4)", "one, two = x[[i]], x[[i + 1]]\nprint(model.predict(one))", "print(model(one, training=False).numpy())"),
        ("tf.keras.layers.Conv1D(4, 2), tf.keras.layers.Flatten()", "print(model.predict(x[None, i]))", "print(model(x[None, i], training=False).numpy())"),
        # What the call of the model would drop (a batch, callbacks), and evaluate: refused.
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x[[i]], batch_size=1))", None),
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x[[i]], callbacks=[]))", None),
        ("tf.keras.layers.Flatten()", "print(model.evaluate(x[:3], y[:3]))", None),  # AddN, whatever the layers
        # Dense layers run on an empty batch (measured); enough examples split over 16 replicas
        ("tf.keras.layers.Flatten()", "print(model.predict(x[[i]]))", "print(model.predict(x[[i]]))"),
        ("tf.keras.layers.LSTM(4)", "print(model.predict(x[:64]))", "print(model.predict(x[:64]))"),
        ("tf.keras.layers.LSTM(4)", "print(model(x[[i]], training=False))", "print(model(x[[i]], training=False))"),  # one device
    ],
)
def test_predicting_fewer_examples_than_replicas_is_refused_where_keras_fails_on_it(layer, use, outcome):
    analysis = analyse(FEW.format(layer=layer, use=use), MIGRATE)
    assert (analysis.new_text is None) is (outcome is None), [f.reason for f in analysis.findings]
    if outcome is None:
        (finding,) = analysis.findings
        assert "migrated, the model splits it over the replicas" in finding.reason
        assert "call the model itself there (model(x, training=False)" in finding.reason
    else:
        assert analysis.new_text.endswith(outcome + "\n")


@pytest.mark.parametrize(
    "use, migrated, shown",
    [
        # evaluate of the trained model fails on booleans under the strategy too (measured): cast
        # (and given a batch that splits evenly over the replicas: test_migrate_evaluate.py)
        ("model.evaluate(x_train, x_train[:, :1])", True, 'model.evaluate(x_train.astype("float32"), x_train[:, :1].astype("float32"), '
         "batch_size=min(32 * strategy.num_replicas_in_sync, len(x_train) // strategy.num_replicas_in_sync * strategy.num_replicas_in_sync))"),
        ("held = (x_train, x_train[:, :1])\nmodel.fit(x_train, x_train[:, :1], batch_size=16, validation_data=held)", False,
         "its validation set is given by a name (held) holding one (x_train), which a cast in the call cannot reach"),
    ],
)
def test_boolean_arrays_evaluated_or_validated_by_name(use, migrated, shown):
    analysis = analyse(_boolean("np.zeros((100, 4), dtype=bool)") + use + "\n", MIGRATE)
    assert (analysis.new_text is not None) is migrated, [f.reason for f in analysis.findings]
    if migrated:
        assert shown in analysis.new_text
    else:
        assert any(shown in f.reason for f in analysis.findings)


# --- predict on fewer examples than replicas (analysis/migration/few_examples.py) -----------------


def _migrated(source: str):
    return analyse(source, Options(migrate="mirrored"))


def test_a_sequential_models_predict_on_one_example_becomes_a_call_of_the_model():
    source = (FIXTURES / "tfd010" / "fit_predicts_one_example.py").read_text()
    new = _migrated(source).new_text
    assert new is not None and "model(x_val[[i]], training=False).numpy()[0, 0]" in new and ".predict(" not in new


@pytest.mark.parametrize(
    "change, why",
    [
        # A batch, steps or callbacks: what the model's own call would drop.
        ("model.predict(x_val[[i]], verbose=0)", "model.predict(x_val[[i]], verbose=0, batch_size=1)"),
        # Evaluate has no call of the model that gives what it gives.
        ("model.predict(x_val[[i]], verbose=0)[0, 0]", "model.evaluate(x_val[[i]], y_val[[i]])"),
    ],
)
def test_a_predict_the_call_cannot_stand_for_is_still_refused(change, why):
    source = (FIXTURES / "tfd010" / "fit_predicts_one_example.py").read_text()
    assert change in source
    analysis = _migrated(source.replace(change, why))
    assert analysis.new_text is None
    assert any("is given one example" in (f.reason or "") for f in analysis.findings)


def test_a_model_not_shown_to_have_one_output_is_refused():
    analysis = _migrated((FIXTURES / "tfd010" / "report_fit_predicts_one_example.py").read_text())
    assert analysis.new_text is None
    assert any("predict() on line 23 is given one example" in (f.reason or "") for f in analysis.findings)


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_the_migrated_predicts_run_on_two_replicas_where_predict_fails(tmp_path):
    """``autofix smoke --replicas 2`` (its fit capped, then the script predicts): the migration
    runs to its end, printing what one device predicts; the same file with ``predict`` kept
    fails there."""
    from autofix.smoke import run_many
    from autofix.smoke.jobs import SmokeJob

    fixed = FIXTURES / "tfd010" / "fit_predicts_one_example.fixed.py"
    text = fixed.read_text()
    kept = tmp_path / "kept.py"
    kept.write_text(text.replace("model(x_val[[i]], training=False).numpy()", "model.predict(x_val[[i]], verbose=0)"))
    runs = run_many([SmokeJob(str(fixed)), SmokeJob(str(kept))], replicas=2, steps=2, offline=True)
    assert runs[0].ok, runs[0].failures
    assert not runs[1].ok
