"""The measured facts TFD003 and TFD004 rest on (docs/losses.md), measured again: each loss form
of a custom step on 2 replicas, as a multiple of the single-device gradient, on Keras 3 and
tf_keras; what each replica is fed; what a Python counter in a tf.function counts; what
strategy.run does with what it is handed, and inside a Keras train_step."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import measure_script

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]
SCRIPT = Path(__file__).resolve().parent / "data" / "loss_forms.py"


@lru_cache(maxsize=None)
def measured(keras: int) -> dict[str, str]:
    return measure_script(SCRIPT, keras, "the loss forms")


# form: (Keras 3, Keras 2); a number is the gradient as a multiple of the single-device one.
FORMS = {
    "reduce_mean": ("2.000", "2.000"),
    "default": ("1.000", "fails: ValueError"),
    "default in a helper": ("1.000", "fails: ValueError"),
    "default / replicas": ("0.500", "fails: ValueError"),
    "compute_average_loss of (batch, T)": ("5.000", "5.000"),
    "compute_average_loss(global_batch_size=B * T)": ("1.000", "1.000"),
    "compute_average_loss(global_batch_size=B * T // replicas)": ("2.000", "2.000"),
    "reduce_mean / replicas": ("1.000", "1.000"),
    "reduce_mean / replica context": ("1.000", "1.000"),
    "Loss subclass __call__ returning a mean": ("2.000", "2.000"),
    "Loss subclass call returning a mean": ("2.000", "fails: ValueError"),
    "Loss subclass call per example": ("1.000", "fails: ValueError"),
    "grad_pass_through(/ replicas)": ("2.000", "2.000"),
    "add_n(model.losses)": ("2.000", "2.000"),
    "scale_regularization_loss(add_n(model.losses))": ("1.000", "1.000"),
}


@pytest.mark.parametrize("keras", [3, 2])
@pytest.mark.parametrize("form", FORMS)
def test_a_loss_form_gives_the_measured_gradient(form, keras):
    assert measured(keras)[form] == FORMS[form][0 if keras == 3 else 1]


def test_a_masked_default_loss_is_not_the_mean_of_its_unreduced_values():
    """Why TFD004 does not change the reduction of a loss whose predictions may be masked."""
    values = measured(3)
    assert abs(float(values["masked default"]) - float(values["masked reduce_mean(none) / replicas"])) > 0.1


@pytest.mark.parametrize("keras", [3, 2])
def test_every_replica_gets_the_whole_of_an_undistributed_batch(keras):
    values = measured(keras)
    assert values["fed plain batch"] == values["fed numpy arrays"] == "[8, 8]"
    assert values["fed distributed batch"] == "[4, 4]"


def test_a_python_counter_in_a_tf_function_counts_traces():
    assert measured(3)["python counter after 5 calls"] == "1"


BROADCAST = Path(__file__).resolve().parent / "data" / "broadcast_forms.py"


@lru_cache(maxsize=None)
def measured_broadcast(keras: int) -> dict[str, str]:
    return measure_script(BROADCAST, keras, "a mean added to every example, and a clip,")


@pytest.mark.parametrize("keras", [3, 2])
@pytest.mark.parametrize("size", [8, 7])
@pytest.mark.parametrize(
    "form", ["compute_average_loss(l + mean)", "(l + mean) / GB, not reduced", "reduce_sum(l + mean) / GB", "compute_average_loss(0 * l + mean)"]
)
def test_a_mean_added_to_every_example_of_a_global_average_is_right(form, size, keras):
    """Why TFD004 takes a per-replica mean added to a per-example loss for a term of the batch's
    sum: each replica adds B_r / GB of it, evenly split batch or not."""
    assert measured_broadcast(keras)[f"{form}, batch {size}"] == "1.000"


@pytest.mark.parametrize("keras", [3, 2])
def test_a_mean_added_once_per_replica_counts_n_times(keras):
    values = measured_broadcast(keras)
    assert values["mean added once per replica, batch 8"] == "2.000"
    assert values["mean / replicas added once per replica, batch 8"] == "1.000"
    # Split 4 and 3, the replicas' means are not weighted by their batches.
    assert values["mean / replicas added once per replica, batch 7"] != "1.000"


@pytest.mark.parametrize("keras", [3, 2])
def test_a_clip_per_replica_follows_the_loss_only_when_its_threshold_is_divided_too(keras):
    """Why TFD004 divides a per-replica clip's threshold with the loss: the update is then the
    step's old update / N exactly; with the threshold kept, the clip acts N times later."""
    values = measured_broadcast(keras)
    assert values["loss / replicas, clip 1.0 / replicas, against the step as written / replicas"] == "1.000"
    assert values["loss / replicas, clip 1.0, against the step as written / replicas"] == "2.000"


FEEDS = Path(__file__).resolve().parent / "data" / "train_on_batch_feeds.py"


@lru_cache(maxsize=None)
def measured_feeds(keras: int) -> dict[str, str]:
    return measure_script(FEEDS, keras, "what train_on_batch hands each replica")


def test_keras3_train_on_batch_hands_the_whole_batch_to_every_replica():
    """Why TFD002 leaves a batch fed to Keras 3's train_on_batch alone."""
    values = measured_feeds(3)
    for size in (8, 7, 1):
        assert values[f"train_on_batch of {size}: each replica's batch"] == f"[{size}, {size}]"
        assert values[f"train_on_batch of {size}: the one device's update"] == "True"


def test_tf_keras_train_on_batch_splits_the_batch_over_the_replicas():
    """Why TFD002 judges a batch fed to tf_keras's train_on_batch as it judges fit's."""
    values = measured_feeds(2)
    assert values["train_on_batch of 8: each replica's batch"] == "[4, 4]"
    assert values["train_on_batch of 8: the one device's update"] == "True"
    assert values["train_on_batch of 7: each replica's batch"] == "[4, 3]"
    assert values["train_on_batch of 1: each replica's batch"] == "[1, 0]"


GIVEN = Path(__file__).resolve().parent / "data" / "run_given_forms.py"


@lru_cache(maxsize=None)
def measured_given(keras: int) -> dict[str, str]:
    return measure_script(GIVEN, keras, "what strategy.run does with what it is handed", timeout=1200)


@pytest.mark.parametrize("keras", [3, 2])
def test_strategy_run_inside_a_keras_train_step_raises(keras):
    """Why TFD003 reports strategy.run in a train_step / test_step that fit / evaluate run."""
    values = measured_given(keras)
    for form in (
        "strategy.run in train_step under fit",
        "self.distribute_strategy.run in train_step under fit",
        "strategy.run in train_step under fit, no reduce",
        "strategy.run in test_step under evaluate",
    ):
        assert values[form].startswith("fails: RuntimeError: Method requires being in cross-replica context"), form
        assert values[form].endswith("(raised by: per_replica = run(fn, args=(data,)))"), form


@pytest.mark.parametrize("keras", [3, 2])
def test_strategy_run_given_a_step_result_raises(keras):
    """Why TFD003 reports strategy.run(step(x)) and hands it the step instead."""
    values = measured_given(keras)
    assert values["strategy.run(step(x))"].startswith("fails: TypeError: 'tensorflow.python.framework.ops.EagerTensor' object is not callable")
    assert values["strategy.run(step(x)) in a tf.function"].startswith("fails: TypeError: 'SymbolicTensor' object is not callable")
    assert values["strategy.run(step(x), args=(x,))"].startswith("fails: TypeError: 'tensorflow.python.framework.ops.EagerTensor' object is not callable")
    assert values["strategy.run(step(x)) of a step returning None"].startswith("fails: TypeError: 'NoneType' object is not callable")
    error = "ValueError" if keras == 3 else "TypeError"
    assert values["strategy.run(step(x)) of a distributed batch in a tf.function"].startswith(f"fails: {error}")
    assert "PerReplica" in values["strategy.run(step(x)) of a distributed batch in a tf.function"]
    assert values["strategy.run(a tensor)"].startswith("fails: TypeError")
    assert values["strategy.run(grads)"].startswith("fails: TypeError: 'list' object is not callable")


@pytest.mark.parametrize("keras", [3, 2])
def test_a_zip_of_gradients_handed_to_every_replica_fails(keras):
    """Why TFD003 reports strategy.run(apply_gradients, args=(zip(...),)), and leaves a list alone."""
    values = measured_given(keras)
    expected = (
        "fails: ValueError: not enough values to unpack (expected 2, got 0)" if keras == 3 else
        "fails: RuntimeError: Some replicas made a different number of replica_context().merge_call() calls."
    )
    assert values["strategy.run(apply_gradients, args=(zip(grads, vars),))"].startswith(expected)
    assert values["strategy.run(apply_gradients, args=(zip(grads, vars),)) in a tf.function"].startswith(expected)
    assert values["strategy.run(apply_gradients, args=(list(zip(grads, vars)),))"] == "runs; update 1.000"


@pytest.mark.parametrize("keras", [3, 2])
def test_next_of_an_iterator_over_a_plain_dataset_goes_whole_to_every_replica(keras):
    values = measured_given(keras)
    assert values["next(iter(ds)) fed to strategy.run"] == "each replica's batch [8, 8]"
    assert values["next(iter(distributed ds)) fed to strategy.run"] == "each replica's batch [4, 4]"
