"""The trained model's ``evaluate`` on arrays, given a batch that splits evenly over the
replicas by ``autofix migrate`` (analysis/migration/eval_batches.py; fixtures
fixtures/tfd010/fit_evaluate_arrays_batch and fit_evaluate_steps, which test_migrate.py
runs and proves): what is changed, what is left alone and with which note, and, with
TensorFlow, that the migrated fixture evaluates on 3 replicas where the unbatched one fails,
with the loss and metric the same model gives on one device."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from fixturecases import FIXTURES

from autofix.engine import Options, analyse

MIGRATE = Options(migrate="mirrored")
REPLICAS = "strategy.num_replicas_in_sync"

HEAD = textwrap.dedent(
    """\
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(1)
    x = rng.normal(size=(900, 8)).astype("float32")
    y = x.sum(axis=1)
    x_test = rng.normal(size=(250, 8)).astype("float32")
    y_test = x_test.sum(axis=1)
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=32)
    """
)


def _migrated(tail: str) -> str:
    analysis = analyse(HEAD + textwrap.dedent(tail), MIGRATE)
    assert analysis.refused is None
    assert analysis.new_text is not None, [f.reason for f in analysis.findings]
    return analysis.new_text


def _notes(tail: str) -> tuple[str, list[str]]:
    """The migrated text (the training is migrated) and the reasons of its findings."""
    analysis = analyse(HEAD + textwrap.dedent(tail), MIGRATE)
    assert analysis.new_text is not None, [f.reason for f in analysis.findings]
    return analysis.new_text, [f.reason or "" for f in analysis.findings]


def _even(batch: str, size: str, replicas: str = REPLICAS) -> str:
    return f"batch_size=min({batch} * {replicas}, {size} // {replicas} * {replicas})"


def test_the_default_batch_becomes_each_replicas_and_the_set_rounds_down_to_the_replicas():
    text = _migrated("print(model.evaluate(x_test, y_test))\n")
    assert f"print(model.evaluate(x_test, y_test, {_even('32', 'len(x_test)')}))" in text


def test_a_batch_given_keeps_its_value_per_replica_by_keyword_or_by_position():
    text = _migrated(
        """\
        model.evaluate(x_test, y_test, batch_size=50)
        model.evaluate(x_test, y_test, 40, 0)
        model.evaluate(x_test, y_test, batch_size=None)
        """
    )
    assert f"model.evaluate(x_test, y_test, {_even('50', 'len(x_test)')})" in text
    assert f"model.evaluate(x_test, y_test, {_even('40', 'len(x_test)')[len('batch_size='):]}, 0)" in text
    assert f"model.evaluate(x_test, y_test, {_even('32', 'len(x_test)')})" in text


def test_inputs_scaled_cast_listed_or_named_are_sized_by_their_array():
    text = _migrated(
        """\
        model.evaluate(x_test / 255.0, y_test)
        model.evaluate(x_test.astype("float32"), y_test)
        model.evaluate([x_test], y_test)
        model.evaluate({"features": x_test}, y_test)
        model.evaluate(x_test[:200], y_test[:200])
        """
    )
    assert f"model.evaluate(x_test / 255.0, y_test, {_even('32', 'len(x_test)')})" in text
    assert f'model.evaluate(x_test.astype("float32"), y_test, {_even("32", "len(x_test)")})' in text
    assert f"model.evaluate([x_test], y_test, {_even('32', 'len(x_test)')})" in text
    assert f'model.evaluate({{"features": x_test}}, y_test, {_even("32", "len(x_test)")})' in text
    assert f"model.evaluate(x_test[:200], y_test[:200], {_even('32', 'len(x_test[:200])')})" in text


def test_where_the_strategy_is_not_seen_the_model_counts_its_replicas():
    source = textwrap.dedent(
        """\
        import numpy as np
        import tensorflow as tf

        rng = np.random.default_rng(1)
        x_test = rng.normal(size=(250, 8)).astype("float32")
        y_test = x_test.sum(axis=1)


        def report():
            return model.evaluate(x_test, y_test, verbose=0)


        if __name__ == "__main__":
            x = rng.normal(size=(900, 8)).astype("float32")
            model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])
            model.compile(optimizer="adam", loss="mse")
            model.fit(x, x.sum(axis=1), batch_size=32)
            print(report())
        """
    )
    text = analyse(source, MIGRATE).new_text
    assert text is not None
    own = "model.distribute_strategy.num_replicas_in_sync"
    assert f"return model.evaluate(x_test, y_test, verbose=0, {_even('32', 'len(x_test)', own)})" in text


def test_predict_a_dataset_and_a_model_not_trained_here_are_left_as_they_are():
    text = _migrated(
        """\
        predictions = model.predict(x_test)
        model.evaluate(tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32))
        other = tf.keras.models.load_model("other.keras")
        other.evaluate(x_test, y_test)
        """
    )
    assert "predictions = model.predict(x_test)\n" in text
    assert "model.evaluate(tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32))\n" in text
    assert "other.evaluate(x_test, y_test)\n" in text


@pytest.mark.parametrize(
    ("call", "why"),
    [
        ("model.evaluate(x_test, y_test, steps=5)", "it is given steps=, which a larger batch would make cover more examples"),
        ("model.evaluate(x_test, y_test, **options)", "it is given *args or **options, which may hold a batch_size of their own"),
        ("model.evaluate(x_test, y_test, *options)", "it is given *args or **options, which may hold a batch_size of their own"),
        ("model.evaluate(np.concatenate([x_test, x_test]), y_test)", "its inputs (np.concatenate([x_test, x_test])) are not one array"),
        ("model.evaluate(x_test * x_test, y_test)", "its inputs (x_test * x_test) are not one array"),
    ],
)
def test_where_the_size_or_the_examples_cannot_be_kept_the_evaluate_is_left_with_a_note(call, why):
    text, reasons = _notes(f'options = {{"verbose": 0}}\n{call}\n')
    # The training is migrated; the evaluate call is the original's, unchanged.
    assert "strategy.scope()" in text and call in text and "batch_size=min(" not in text
    (reason,) = [r for r in reasons if "evaluate() on line" in r]
    assert reason.startswith("no automatic fix: evaluate() on line 13 evaluates a model made in the strategy's scope")
    assert why in reason and "not over 3" in reason


def test_a_model_with_a_test_step_of_its_own_is_not_given_another_batch_but_is_migrated():
    """Its logs may be the last batch's, or a mean of batch means: not shown the same."""
    source = HEAD.replace("model = tf.keras.Sequential(", "model = Wrapper(tf.keras.Sequential(").replace(
        'tf.keras.layers.Dense(1)])', 'tf.keras.layers.Dense(1)]))'
    ) + "print(model.evaluate(x_test, y_test))\n"
    source = source.replace(
        "rng = ",
        textwrap.dedent(
            """\
            class Wrapper(tf.keras.Model):
                def __init__(self, inner):
                    super().__init__()
                    self.inner = inner

                def call(self, x):
                    return self.inner(x)

                def test_step(self, data):
                    x, y = data
                    return {"loss": tf.reduce_mean(tf.square(self(x) - y))}


            """
        ) + "rng = ",
        1,
    )
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is not None and "print(model.evaluate(x_test, y_test))" in analysis.new_text
    reasons = [f.reason or "" for f in analysis.findings if "evaluate() on line" in (f.reason or "")]
    assert reasons and "its model's class (Wrapper, line 4) has a test_step of its own" in reasons[0]


def test_the_fixture_pairs_differ_only_in_their_evaluate_batches_and_the_migration():
    """The fixture's migration gives each evaluate call a batch and leaves predict alone."""
    fixed = (FIXTURES / "tfd010" / "fit_evaluate_arrays_batch.fixed.py").read_text()
    evaluates = [line for line in fixed.splitlines() if ".evaluate(" in line]
    assert len(evaluates) == 3 and all(f"len(x_test) // {REPLICAS} * {REPLICAS}" in line for line in evaluates)
    assert "predictions = model.predict(x_test)\n" in fixed


# --- with TensorFlow ------------------------------------------------------------------------

_NO_TF = importlib.util.find_spec("tensorflow") is None

# Runs a migrated script on 3 logical CPUs (its MirroredStrategy() spans them), records what
# each evaluate of its trained model returned, and computes the same loss (sparse categorical
# cross-entropy of logits) and accuracy from the model's logits on one device (the model called
# on the whole set, outside the strategy), for the fixture's compiled loss and metric.
_RUNNER = textwrap.dedent(
    """\
    import json, runpy, sys
    import numpy as np
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 3)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    made = tf.distribute.MirroredStrategy
    tf.distribute.MirroredStrategy = lambda *a, **k: made(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
    seen = []
    original = tf.keras.Model.evaluate
    def evaluate(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        seen.append((self, args, result))
        return result
    tf.keras.Model.evaluate = evaluate
    runpy.run_path(sys.argv[1], run_name="__main__")
    out = []
    for model, args, result in seen:
        x, y = np.asarray(args[0]), np.asarray(args[1])
        logits = model(x, training=False).numpy().astype("float64")
        top = logits.max(axis=1, keepdims=True)
        log_softmax = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
        loss = float(-log_softmax[np.arange(len(y)), y].mean())
        accuracy = float((logits.argmax(axis=1) == y).mean())
        out.append({"replicas": model.distribute_strategy.num_replicas_in_sync, "distributed": result, "single": [loss, accuracy]})
    print("RESULTS" + json.dumps(out))
    """
)


def _run_on_three(tmp_path, script):
    runner = tmp_path / "run_on_three.py"
    runner.write_text(_RUNNER)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, str(runner), str(script)], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.tf
@pytest.mark.skipif(_NO_TF, reason="TensorFlow is not installed")
def test_the_migrated_fixture_evaluates_on_three_replicas_as_one_device_does(tmp_path):
    """Run whole (not capped), the migration trains and evaluates on 3 replicas; each evaluate
    gives the loss and accuracy computed from the same model's logits on one device. Without
    the batches it adds, the first evaluate fails (AddN: 32 does not split over 3)."""
    import json

    fixed = FIXTURES / "tfd010" / "fit_evaluate_arrays_batch.fixed.py"
    done = _run_on_three(tmp_path, fixed)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.split("RESULTS", 1)[1])
    assert len(results) == 3
    for result in results:
        assert result["replicas"] == 3
        assert result["distributed"] == pytest.approx(result["single"], rel=1e-5, abs=1e-6)
    text = fixed.read_text()
    start = text.index(", batch_size=min(32 * ")
    unbatched = tmp_path / "unbatched.py"
    unbatched.write_text(text[:start] + text[text.index("\n", start) - 1 :])
    assert "model.evaluate(x_test, y_test)\n" in unbatched.read_text()
    failed = _run_on_three(tmp_path, unbatched)
    assert failed.returncode != 0
    assert "Inputs to operation AddN of type AddN must have the same size and shape" in failed.stderr


@pytest.mark.tf
@pytest.mark.skipif(_NO_TF, reason="TensorFlow is not installed")
def test_plain_smoke_on_three_replicas_runs_past_the_evaluate(tmp_path):
    """``autofix smoke --replicas 3`` (not --compare, which stops at the steps it compares):
    its fit is capped, then the script evaluates; the migration runs to its end, the same file
    without the evaluate batches fails at the first evaluate."""
    from autofix.smoke import run_many
    from autofix.smoke.jobs import SmokeJob

    fixed = FIXTURES / "tfd010" / "fit_evaluate_arrays_batch.fixed.py"
    text = fixed.read_text()
    start = text.index(", batch_size=min(32 * ")
    unbatched = tmp_path / "unbatched.py"
    unbatched.write_text(text[:start] + text[text.index("\n", start) - 1 :])
    runs = run_many([SmokeJob(str(fixed)), SmokeJob(str(unbatched))], replicas=3, steps=2, offline=True)
    assert runs[0].ok, runs[0].failures
    assert not runs[1].ok and "Inputs to operation AddN of type AddN must have the same size and shape" in runs[1].failures[0]
