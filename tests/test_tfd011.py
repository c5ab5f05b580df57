"""TFD011 multi-worker-strategy-late: a MultiWorkerMirroredStrategy made after TensorFlow ran ops
(moved up before them) or before TF_CONFIG is set (moved down after it)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from autofix.engine import Options, analyse
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params

OPTIONS = Options(select=("TFD011",))


@pytest.mark.parametrize("case", params("tfd011", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd011", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd011", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)


def _script(before: str, strategy: str = "tf.distribute.MultiWorkerMirroredStrategy()", head: str = "") -> str:
    return f"import keras\nimport tensorflow as tf\n{head}{before}\nstrategy = {strategy}\nwith strategy.scope():\n    model = keras.Sequential([keras.layers.Dense(1)])\n"


def _lines(source: str) -> list[int]:
    return [f.line for f in analyse(source, OPTIONS).findings]


def test_only_a_multi_worker_strategy_of_a_cluster_counts():
    assert _lines(_script("x = tf.constant(1.0)")) == [4]
    assert _lines(_script("x = tf.constant(1.0)", "tf.distribute.MirroredStrategy()")) == []
    # TF_CONFIG removed first: one worker, nothing to join.
    assert _lines(_script("x = tf.constant(1.0)", head="import os\nos.environ.pop('TF_CONFIG', None)\n")) == []


def test_ops_in_a_local_function_count_and_definitions_do_not():
    helper = "def load():\n    return tf.data.Dataset.range(8).batch(2)\n"
    assert _lines(_script(helper + "data = load()")) == [6]
    assert _lines(_script(helper)) == []
    assert _lines(_script("make = lambda: tf.constant(1.0)")) == []


def test_a_strategy_used_before_it_moves_is_not_moved():
    source = _script("opts = tf.distribute.experimental.CommunicationOptions()\nx = tf.constant(1.0)\nopts = None", "tf.distribute.MultiWorkerMirroredStrategy(communication_options=opts)")
    analysis = analyse(source, OPTIONS)
    assert [f.line for f in analysis.findings] == [6]
    assert analysis.new_text is None
    assert "it uses 'opts', which is only set on line 5" in analysis.findings[0].reason


# Calls the rule treats as starting TensorFlow's runtime, or not, checked against TensorFlow.
HARMLESS = (
    "tf.random.set_seed(1)",
    "keras.utils.set_random_seed(1)",
    "tf.config.list_physical_devices('CPU')",
    "tf.data.Options()",
    "keras.mixed_precision.set_global_policy('float32')",
    "keras.layers.Dense(1)",
    "keras.Input((2,))",
    "keras.Sequential([keras.layers.Dense(1)])",
    "tf.test.is_gpu_available()",
)
STARTING = (
    "tf.data.Dataset.range(8)",
    "keras.optimizers.Adam()",
    "keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])",
    "keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])",
    "keras.utils.timeseries_dataset_from_array(__import__('numpy').zeros((8, 2), 'float32'), None, 4)",
    "tf.config.list_logical_devices('CPU')",
)


def test_the_rule_knows_which_calls_start_the_runtime():
    for call in HARMLESS:
        assert _lines(_script(f"_ = {call}")) == [], call
    for call in STARTING:
        assert _lines(_script(f"_ = {call}")) == [4], call
    # Loaders that return tf.data datasets: Keras's folder readers (measured by
    # fixtures/multiworker/measure/starts_runtime.py, which needs a folder of files) and
    # TensorFlow Datasets' (not installed here: kin of the tf.data constructors).
    for call in ("keras.utils.image_dataset_from_directory('photos')", "tf.keras.preprocessing.text_dataset_from_directory('reviews')"):
        assert _lines(_script(f"_ = {call}")) == [4], call
    assert _lines(_script("_ = tfds.load('mnist')", head="import tensorflow_datasets as tfds\n")) == [5]
    # Keras's NumPy loaders make no tensor.
    assert _lines(_script("_ = keras.datasets.mnist.load_data()")) == []


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
@pytest.mark.parametrize("starting", STARTING[:5])
def test_tensorflow_agrees_on_which_calls_start_the_runtime(starting):
    program = textwrap.dedent(
        f"""
        import keras
        import tensorflow as tf
        from tensorflow.python.eager import context

        def started():
            return context.context()._context_handle is not None

        for call in {HARMLESS!r}:
            eval(call)
            assert not started(), call
        eval({starting!r})
        assert started(), {starting!r}
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""})
    assert result.stdout.strip().endswith("ok"), result.stderr[-2000:]


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras is not installed")
def test_the_moved_strategy_joins_its_cluster(tmp_path):
    """after_ops.py on two loopback workers (tf_keras: Keras 3's fit fails there anyway): the
    original fails at the strategy on every worker, its fix trains on both, in agreement."""
    import json

    from click.testing import CliRunner

    from autofix.cli import main
    from fixturecases import FIXTURES, read

    before = read(FIXTURES / "tfd011" / "after_ops.py")
    after = analyse(before, OPTIONS).new_text
    assert after is not None
    for name, text in (("broken.py", before), ("fixed.py", after)):
        (tmp_path / name).write_text(text)
        report = tmp_path / f"{name}.json"
        result = CliRunner().invoke(main, ["smoke", str(tmp_path / name), "--workers", "2", "--legacy-keras", "--steps", "2", "--json", str(report)])
        data = json.loads(report.read_text())
        failed = [c["message"] for c in data["checks"] if not c["passed"]]
        if name == "broken.py":
            assert result.exit_code == 1
            assert any("Collective ops must be configured at program startup" in m for m in failed), failed
        else:
            assert result.exit_code == 0, failed
            workers = data["workers"]
            assert (workers["count"], workers["trained"], workers["agree"]) == (2, 2, True)


def test_the_measurement_probe_is_reported_in_exactly_the_modes_that_failed():
    """fixtures/multiworker/measure/strategy_order.py makes the strategy in one branch per mode;
    docs/multiworker.md has what each did on two workers. The rule must report the branches
    that crashed or ran as clusters of one, and no other."""
    import re

    from fixturecases import FIXTURES, read

    source = read(FIXTURES / "multiworker" / "measure" / "strategy_order.py")
    modes = {}
    for number, line in enumerate(source.splitlines(), 1):
        match = re.match(r'(?:if|elif) mode == "(\w+)":', line)
        if match:
            modes[number] = match.group(1)
    flagged = set()
    for finding in analyse(source, OPTIONS).findings:
        flagged.add(modes[max(line for line in modes if line < finding.line)])
    failed = {"config_after", "op_first", "devices_first", "dataset_first", "variable_first", "keras_model_first"}
    assert flagged == failed
    assert set(modes.values()) - failed == {"config_before", "physical_first"}


# --- a file of several programs one after another ----------------------------------------------

_SETUP = "import json\nimport os\nimport tensorflow as tf\n"
_WRITE = 'os.environ["TF_CONFIG"] = json.dumps(config)\n'
_MWMS = "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
_TRAIN = "with strategy.scope():\n    model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])\nmodel.fit(data, epochs=1)\n"
_DATA = "data = tf.data.Dataset.range(8).batch(2)\n"


def _findings(*parts: str) -> list[tuple[int, str]]:
    """(which multi-worker strategy of the file, counted from 1; "ops" or "config") per finding."""
    source = _SETUP + "".join(parts)
    made = [n for n, line in enumerate(source.splitlines(), 1) if "MultiWorkerMirroredStrategy()" in line]
    return [(made.index(f.line) + 1, "ops" if "after TensorFlow ran ops" in f.message else "config") for f in analyse(source, OPTIONS).findings]


def test_a_tf_config_set_for_a_later_strategy_is_not_an_earlier_ones():
    # One program: the strategy made before TF_CONFIG is set.
    assert _findings(_MWMS, _WRITE, _DATA, _TRAIN) == [(1, "config")]
    # Two programs: the second write is the setup of the second strategy.
    assert _findings(_WRITE, _MWMS, _DATA, _TRAIN, _WRITE, _MWMS, _DATA, _TRAIN) == []
    # The first program relies on the launcher's TF_CONFIG, the second sets its own.
    assert _findings(_MWMS, _DATA, _TRAIN, _WRITE, _MWMS, _DATA, _TRAIN) == []
    # A second program that makes its strategy before its own TF_CONFIG: that one is reported.
    assert _findings(_WRITE, _MWMS, _DATA, _TRAIN, _MWMS, _WRITE, _DATA, _TRAIN) == [(2, "config")]
    # A TF_CONFIG set after everything that uses the strategy (a guide's closing section)...
    assert _findings(_MWMS, _DATA, _TRAIN, _WRITE) == []
    # ... but not when the strategy is used after it.
    assert _findings(_MWMS, _DATA, _WRITE, _TRAIN) == [(1, "config")]


def test_the_ops_of_an_earlier_program_are_not_a_later_strategys():
    # Each program builds its data after its strategy: nothing to report.
    assert _findings(_WRITE, _MWMS, _DATA, _TRAIN, _WRITE, _MWMS, _DATA, _TRAIN) == []
    # The second program builds its data before its strategy, after its own TF_CONFIG: reported.
    assert _findings(_WRITE, _MWMS, _DATA, _TRAIN, _WRITE, _DATA, _MWMS, _TRAIN) == [(2, "ops")]
    # Ops between the first program and the second's TF_CONFIG: the first program's.
    assert _findings(_WRITE, _MWMS, _DATA, _TRAIN, "x = tf.constant(1.0)\n", _WRITE, _MWMS, _TRAIN) == []
    # No TF_CONFIG between them: a second strategy made after the first does not fail on the
    # ops that ran between them (measured: second_strategy.py), nor in a block of its own.
    assert _findings(_MWMS, _DATA, _TRAIN, "x = tf.constant(1.0)\n", _MWMS, _TRAIN) == []
    assert _findings(_MWMS, _DATA, "try:\n    ", _MWMS, "except ValueError:\n    pass\n") == []
    # Inside a function: the multi-worker strategy made after a MirroredStrategy (which started
    # the runtime) is reported, the second multi-worker strategy is not.
    assert _findings("def main():\n    m = tf.distribute.MirroredStrategy()\n    ", _MWMS, "    ", _DATA, "    ", _MWMS) == [(1, "ops")]
    # One program with ops before its only strategy: reported as before.
    assert _findings(_DATA, _WRITE, _MWMS, _TRAIN) == [(1, "ops")]


def test_a_section_of_another_strategy_ends_where_its_uses_end():
    mirrored = "mirrored = tf.distribute.MirroredStrategy()\nwith mirrored.scope():\n    m = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])\nm.fit(data, epochs=1)\n"
    # The dataset made before the section's fit belongs to the section.
    assert _findings(mirrored.replace("m.fit", _DATA + "m.fit"), _MWMS, _TRAIN) == []
    # A dataset made after the MirroredStrategy section, for the multi-worker one: reported.
    assert _findings(mirrored.replace("m.fit(data", "m.fit(d0"), _DATA, _MWMS, _TRAIN) == [(1, "ops")]
    # Inside a function another strategy is no guide's section: it started the runtime.
    body = "def main():\n" + "".join("    " + line + "\n" for line in (mirrored.replace("m.fit(data", "m.fit(d0") + _MWMS + _TRAIN).splitlines())
    findings = analyse(_SETUP + body, OPTIONS).findings
    assert len(findings) == 1 and "after TensorFlow ran ops (tf.distribute.MirroredStrategy()" in findings[0].message


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_a_second_strategy_made_after_ops_does_not_fail_at_startup(tmp_path):
    """Why the ops after an earlier multi-worker strategy do not count against a later one:
    on two workers, a second strategy made after a dataset and a tf.constant is made (2
    replicas); one made after TF_CONFIG changed raises ValueError, never the startup error."""
    from fixturecases import FIXTURES

    measure = FIXTURES / "multiworker" / "measure"
    result = subprocess.run(
        [sys.executable, str(measure / "launch.py"), "--timeout", "240", str(measure / "second_strategy.py"), "other"],
        capture_output=True, text=True, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""},
        cwd=tmp_path,  # the launcher writes worker<N>.log where it runs
    )
    output = result.stdout + result.stderr
    for index in (0, 1):
        assert f"worker {index}: second strategy made after ops, replicas 2" in output, output[-3000:]
        assert f"worker {index}: third (other TF_CONFIG): ValueError: Collective ops are already configured." in output
    assert "must be configured at program startup" not in output
