"""What `autofix migrate --smoke` needs from the smoke test: custom loops without strategy.run
recorded and capped, notebooks run as one program, and `autofix smoke MIGRATED --compare
ORIGINAL`, which proves a migration against its original's data-parallel steps.

The tests marked ``tf`` run two processes: every compare pair of fixtures/smoke/compare in one
(four runs a pair: right migrations, wrong ones of each kind, pairs that cannot be held equal),
the single-device loops and the notebook in another. The verdict itself is tested on canned
records in tests/test_compare_verdict.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from fixturecases import FIXTURES

from autofix.cli import main
from autofix.smoke import checks, command, compare, notebook, run_many, run_smoke, tolerance
from autofix.smoke.compare import ComparePair, compare_many
from autofix.smoke.report import Check, CompareReport, CompareRun, LoopRecord, Pair, SmokeReport
from compare_records import _report, _trace

SMOKE = FIXTURES / "smoke"
PAIRS = FIXTURES / "smoke" / "compare"
needs_tf = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]


def tf_test(test):
    for mark in needs_tf:
        test = mark(test)
    return test


# --- --compare on real TensorFlow: every pair in one process ------------------------------------

# name: (migrated, original, status, what the message must say)
CASES = {
    "fit": ("fit.migrated.py", "fit.py", "equivalent", "on 2 replicas: the same 3 steps as the original's data-parallel step"),
    "loop": ("loop.migrated.py", "loop.py", "equivalent", "on 1 replica: the same 3 steps as the original"),
    "loop_seeded": ("loop_seeded.py", "loop.py", "equivalent", "were set to the original's (both runs draw them from the same Keras initializers, in another order)"),
    "gan": ("gan.migrated.py", "gan.py", "equivalent", "the same 3 steps"),
    "gan_fit": ("gan_fit.migrated.py", "gan_fit.py", "equivalent", "the same 3 steps"),
    "train_step": ("train_step.migrated.py", "train_step.py", "equivalent", "the same 3 steps"),
    "shared_loss": ("shared_loss.migrated.py", "shared_loss.py", "equivalent", "the same 3 steps"),
    "divided": ("divided.migrated.py", "divided.py", "equivalent", "the same 3 steps"),
    "schedule": ("schedule.migrated.py", "schedule.py", "equivalent", "the same 3 steps"),
    "dropout": ("dropout.migrated.py", "dropout.py", "equivalent", "the same 3 steps"),
    "metric": ("metric.migrated.py", "metric.py", "equivalent", "the same 3 steps"),
    "pretrained": ("pretrained.migrated.py", "pretrained.py", "equivalent", "the same 3 steps"),
    "seeded_layer": ("seeded_layer.migrated.py", "seeded_layer.py", "equivalent", "the same 3 steps"),
    "inline": ("inline.migrated.py", "inline.py", "equivalent", "not compared: the loss the loops report (the original's step is written inline and the migrated step returns nothing"),
    "clipped": ("clipped.migrated.py", "clipped.py", "equivalent", "the same 3 steps"),
    "batchnorm": ("batchnorm.migrated.py", "batchnorm.py", "equivalent", "1 of them with a gradient at rounding level"),
    # noise drawn outside training (a preview of a test batch) before the step's own draws
    # Keras 3's legacy tf.keras.backend.random_normal seeds its draw with np.random.randint
    "legacy_noise": ("legacy_noise.migrated.py", "legacy_noise.py", "equivalent", "on 2 replicas: the same 3 steps as the original's data-parallel step"),
    "noise_before": ("noise_before.migrated.py", "noise_before.py", "equivalent", "on 2 replicas: the same 3 steps as the original's data-parallel step"),
    "loop_wrong_mean": ("loop.wrong_mean.py", "loop.py", "different", "it is 2.00 x the original's (2 x: is the loss averaged per replica"),
    "loop_wrong_batch": ("loop.wrong_batch.py", "loop.py", "different", "the migrated script trains on a global batch of 16 on 2 replicas, the original on 16"),
    "loop_wrong_momentum": ("loop.wrong_momentum.py", "loop.py", "different", "SGD's momentum is 0.5 in the migration, 0.9 in the original"),
    "loop_wrong_unshuffled": ("loop.wrong_unshuffled.py", "loop.py", "different", "the original shuffles its data (Dataset.shuffle at loop.py:"),
    "loop_wrong_undistributed": ("loop.wrong_undistributed.py", "loop.py", "different", "every replica was fed the same 32 examples"),
    "train_step_wrong_mean": ("train_step.wrong_mean.py", "train_step.py", "different", "it is 2.00 x the original's"),
    "train_step_wrong_reported": ("train_step.wrong_reported.py", "train_step.py", "different", "what fit logs differs in step 1 (loss)"),
    "divided_wrong_constant": ("divided.wrong_constant.py", "divided.py", "different", "in step 1, the gradient of sequential/dense/kernel differs"),
    "schedule_wrong_steps": ("schedule.wrong_steps.py", "schedule.py", "different", "SGD's learning rate at step 2 is"),
    "dropout_wrong_inference": ("dropout.wrong_inference.py", "dropout.py", "different", "the migrated step runs Dropout(rate=0.3) with training=False"),
    "dropout_wrong_rate": ("dropout.wrong_rate.py", "dropout.py", "different", "the migrated step runs Dropout(rate=0.6) with training=True"),
    "metric_wrong_share": ("metric.wrong_share.py", "metric.py", "different", "the metric train_loss (Mean) reads"),
    "loss_object": ("loss_object.migrated.py", "loss_object.py", "equivalent", "the same 3 steps"),
    "loss_object_wrong_share": ("loss_object.wrong_share.py", "loss_object.py", "different", "the metric train_loss (Mean) reads"),
    "objective": ("objective.migrated.py", "objective.py", "equivalent", "the same 3 steps"),
    "objective_wrong_share": ("objective.wrong_share.py", "objective.py", "different", "what fit logs differs in step 1 (loss)"),
    "pretrained_wrong_no_load": ("pretrained.wrong_no_load.py", "pretrained.py", "different", "the original loads them (load_weights at pretrained.py:12), the migration does not"),
    "noise_before_wrong_mean": ("noise_before.wrong_mean.py", "noise_before.py", "different", "it is 2.00 x the original's (2 x: is the loss averaged per replica"),
    "legacy_noise_wrong_stddev": ("legacy_noise.wrong_stddev.py", "legacy_noise.py", "different", "in step 1, the gradient of dense/kernel differs"),
    # fit's steps_per_epoch as written (every run is capped): the original's, or divided by the replicas
    "steps_per_epoch": ("steps_per_epoch.migrated.py", "steps_per_epoch.py", "equivalent", "the same 3 steps"),
    "steps_per_epoch_wrong_doubled": ("steps_per_epoch.wrong_doubled.py", "steps_per_epoch.py", "different", "fit is asked for steps_per_epoch=16 in the migration, steps_per_epoch=8 in the original"),
    # every run is capped to the steps compared: what an epoch holds is compared as the
    # scripts give it (fit's arrays and shuffle, the batches of a dataset fit or a loop trains on)
    "pretrained_wrong_cut": ("pretrained.wrong_cut.py", "pretrained.py", "different", "fit trains on 112 examples in the migration, 128 in the original"),
    "pretrained_wrong_shuffled": ("pretrained.wrong_shuffled.py", "pretrained.py", "different", "fit is given shuffle=True in the migration, shuffle=False in the original"),
    "fit_wrong_take": ("fit.wrong_take.py", "fit.py", "different", "an epoch of fit's dataset makes 6 steps in the migration, where the original's makes 16"),
    "loop_wrong_repeat": ("loop.wrong_repeat.py", "loop.py", "different", "makes 32 steps in the migration, where the original's makes 16"),
    "inline_wrong_take": ("inline.wrong_take.py", "inline.py", "different", "makes 5 steps in the migration, where the original's makes 8"),
    "fit_validated": ("fit_validated.migrated.py", "fit_validated.py", "equivalent", "the same 3 steps"),
    "fit_validated_wrong_take": ("fit_validated.wrong_take.py", "fit_validated.py", "different", "an epoch of fit's dataset makes 10 steps in the migration, where the original's makes 16"),
    # the script's own loops around its first update, capped like everything else: how many
    # times each runs (an epochs loop exactly; an innermost loop of steps may keep its steps or
    # divide them by the replicas, the same examples an epoch)
    "loop_wrong_epochs": ("loop.wrong_epochs.py", "loop.py", "different", "the loop at loop.wrong_epochs.py:43 runs 2 times in the migration, where the original's (at loop.py:29) runs 3"),
    "stepped": ("stepped.migrated.py", "stepped.py", "equivalent", "the same 3 steps"),
    "stepped_wrong_epochs": ("stepped.wrong_epochs.py", "stepped.py", "different", "runs 1 time in the migration, where the original's (at stepped.py:32) runs 2"),
    "taken": ("taken.migrated.py", "taken.py", "equivalent", "the same 3 steps"),
    "taken_fewer_steps": ("taken.fewer_steps.py", "taken.py", "equivalent", "the same 3 steps"),
    "taken_wrong_cut": ("taken.wrong_cut.py", "taken.py", "different", "makes 7 steps in the migration, where the original's makes 10"),
    "validated": ("validated.migrated.py", "validated.py", "equivalent", "the same 3 steps"),
    "validated_wrong_validation": ("validated.wrong_validation.py", "validated.py", "different", "fit validates on other data than the original's (16 examples in the migration, 24 in the original)"),
    "validated_wrong_no_scheduler": ("validated.wrong_no_scheduler.py", "validated.py", "different", "fit is given other callbacks: none in the migration, LearningRateScheduler in the original"),
    "validated_wrong_unshuffled": ("validated.wrong_unshuffled.py", "validated.py", "different", "fit is given shuffle=False in the migration, shuffle=True in the original"),
    "clipped_wrong_per_replica": ("clipped.wrong_per_replica.py", "clipped.py", "different", "or are the gradients clipped by each replica's norm, not the all-reduced one"),
    # what the migrated step returns, against an original written inline (the loss its loop
    # differentiates) and one whose step draws its batch itself (micro-steps' returns averaged)
    "inline_reported": ("inline_reported.migrated.py", "inline_reported.py", "equivalent", "the same 3 steps"),
    "inline_reported_wrong_mean": ("inline_reported.wrong_mean.py", "inline_reported.py", "different", "the loss its step returns differs in step 1"),
    "inline_reported_wrong_sum": ("inline_reported.wrong_sum.py", "inline_reported.py", "different", "(2 x: the replicas' values summed where they should be averaged?)"),
    # a step run eagerly (strategy.run outside a tf.function): what the script reduces right after
    # it is what it reports (before, nothing was seen and ReduceOp.MEAN of the shares was proven)
    "eager_reduced": ("eager_reduced.migrated.py", "inline_reported.py", "equivalent", "(6 variables, within"),
    "eager_reduced_wrong_mean": ("eager_reduced.wrong_mean.py", "inline_reported.py", "different", "the loss its step returns differs in step 1"),
    # an eager step whose replicas update a metric: the harness's own read of the metric (a
    # strategy.reduce of its variables) was taken for the script's reduce of the step's return
    "eager_metric": ("eager_metric.migrated.py", "eager_metric.py", "equivalent", "the same 3 steps"),
    "eager_metric_wrong_mean": ("eager_metric.wrong_mean.py", "eager_metric.py", "different", "(1/2: each replica's share of the loss, not the loss?)"),
    "drawn": ("drawn.migrated.py", "drawn.py", "equivalent", "on 1 replica: the same 3 steps as the original"),
    "drawn_wrong_mean": ("drawn.wrong_mean.py", "drawn.py", "different", "(1/2: each replica's share of the loss, not the loss?)"),
    "drawn_wrong_sum": ("drawn.wrong_sum.py", "drawn.py", "different", "(2 x: the replicas' values summed where they should be averaged?)"),
    # a tf.function helper drawing noise inside the step, traced twice (the optimizer's slots
    # are made by the first call): the draw's replica and batch are numbers, not tensors of the
    # first trace, which the helper's trace kept ("out of scope" in the second)
    "nested_draw": ("nested_draw.migrated.py", "nested_draw.py", "equivalent", "on 1 replica: the same 3 steps as the original"),
    "nested_draw_wrong_mean": ("nested_draw.wrong_mean.py", "nested_draw.py", "different", "2.00 x the original's"),
    "unheld": ("unheld.migrated.py", "unheld.py", "inconclusive", "np.random.normal in the migrated run's step is random in a way the comparison cannot hold equal"),
    "generated": ("generated.migrated.py", "generated.py", "inconclusive", "were fed"),
    "sequential_gan": ("sequential_gan.migrated.py", "sequential_gan.py", "inconclusive", "the original's step cannot be computed as replicas: a gradient is taken after the update"),
    "removed_api": ("removed_api.migrated.py", "removed_api.py", "original-fails", "the original fails too: the script crashed at removed_api.py:13"),
}


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    for path in PAIRS.iterdir():
        shutil.copy(path, folder / path.name)
    subprocess.run([sys.executable, "pretrained_weights.py"], cwd=folder, check=True, capture_output=True)
    pairs = [ComparePair(str(folder / migrated), str(folder / original)) for migrated, original, _, _ in CASES.values()]
    return dict(zip(CASES, compare_many(pairs, replicas=2, steps=3, offline=True)))


@tf_test
@pytest.mark.parametrize("name", list(CASES))
def test_each_pair_gets_the_verdict_it_deserves_and_says_why(compared, name):
    """Right migrations are proven; wrong ones of every kind are rejected, naming what differs;
    what cannot be held equal is inconclusive; an original that does not run is said."""
    _, _, status, says = CASES[name]
    result = compared[name].compare
    assert result.status == status, result.message
    assert says in result.message, result.message
    assert result.exit_code == {"equivalent": 0, "different": 1, "inconclusive": 2, "original-fails": 2}[status]


# Other variables updated than the original's (a bias dropped, a variable left out of the update):
# different (before: inconclusive, "they cannot be compared"); loop.migrated.py itself is proven (CASES).
OTHER_VARIABLES = {
    "loop_wrong_no_bias": ("loop.wrong_no_bias.py", "the migrated step updates other variables than the original's (3 against 4, or other shapes)"),
    "loop_wrong_frozen": ("loop.wrong_frozen.py", "the migrated step updates other variables than the original's (3 against 4, or other shapes)"),
}


@pytest.fixture(scope="module")
def other_variables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("other_variables")
    for name in ("loop.py", *(migrated for migrated, _ in OTHER_VARIABLES.values())):
        shutil.copy(PAIRS / name, folder / name)
    pairs = [ComparePair(str(folder / migrated), str(folder / "loop.py")) for migrated, _ in OTHER_VARIABLES.values()]
    return dict(zip(OTHER_VARIABLES, compare_many(pairs, replicas=2, steps=3, offline=True)))


@tf_test
@pytest.mark.parametrize("name", list(OTHER_VARIABLES))
def test_a_migration_updating_other_variables_is_different(other_variables, name):
    _, says = OTHER_VARIABLES[name]
    result = other_variables[name].compare
    assert result.status == "different", result.message
    assert says in result.message, result.message
    assert result.exit_code == 1


# Every phase of training compared, K steps each: a teacher's fit, then its student distilled by a
# Distiller's own train_step (before, only the teacher's steps were compared, and a wrong student
# loss was proven); a phase missing is different.
PHASES = {
    "distill": ("distill.migrated.py", "equivalent", "the same 6 steps in 2 phases of training (fit at distill.migrated.py:55, fit at distill.migrated.py:60)"),
    "distill_wrong_student_mean": ("distill.wrong_student_mean.py", "different", "in step 4, the gradient of student/dense_2/kernel differs"),
    "distill_wrong_no_student": (
        "distill.wrong_no_student.py", "different", "the original trains in 2 (fit at distill.py:52: 3 steps, fit at distill.py:56: 3 steps): "
        "the original's fit at distill.py:56 has no counterpart in the migration",
    ),
    # a fit called again (a loop of epochs) ends the run at its second call, said
    "refit": (
        "refit.migrated.py", "equivalent", "not compared: the training after both scripts stopped: the migrated script called fit at "
        "refit.migrated.py:20 again: only its first call is compared; the original called fit at refit.py:18 again",
    ),
    # one model fitted, then another with its own Adam (migration part E's sample-11): the first
    # model's weights, left as they were by the second's steps, are not a difference there
    # (float32's rounding of its own steps was taken for one: a zero update scales nothing)
    "two_models": ("two_models.migrated.py", "equivalent", "the same 6 steps in 2 phases of training"),
    "two_models_wrong_second_batch": ("two_models.wrong_second_batch.py", "different", "in step 4, the replicas were fed 32 examples in all, the original's step 64"),
}
ORIGINALS = {"refit": "refit.py", "two_models": "two_models.py", "two_models_wrong_second_batch": "two_models.py"}


@tf_test
def test_every_phase_of_training_is_compared_in_order():
    pairs = [ComparePair(str(PAIRS / migrated), str(PAIRS / ORIGINALS.get(name, "distill.py"))) for name, (migrated, _, _) in PHASES.items()]
    for (name, (_, status, says)), report in zip(PHASES.items(), compare_many(pairs, replicas=2, steps=3, offline=True)):
        assert report.compare.status == status, (name, report.compare.message)
        assert says in report.compare.message, (name, report.compare.message)


@tf_test
def test_an_epochs_last_batch_that_does_not_split_evenly_is_compared_only_as_fit_computes_it():
    """On 3 replicas an epoch of 80 examples is a global batch of 48, then one of 32 that
    tf.distribute shares 11, 11, 10 (before, every reference refused to split it, and ran the
    original as micro-steps: a right migration was called DIFFERENT, its last step missing).
    Keras's own train_step scales each replica's loss itself: the reference splits the batch so
    (fit_padded_sequences_validation_split, in test_migrate_fit, is proven on 3 replicas); a
    model's own train_step may average unequal shares either way: not compared, said."""
    (report,) = compare_many([ComparePair(str(PAIRS / "train_step_uneven.migrated.py"), str(PAIRS / "train_step_uneven.py"))], replicas=3, offline=True)
    assert report.compare.status == "inconclusive", report.compare.message
    assert "ends its epoch within a step of 3 of the original's batches: its last global batch does not split evenly" in report.compare.message


@tf_test
@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf_keras is not installed")
def test_on_keras_2_a_metric_fed_the_share_of_a_loss_object_is_different(tmp_path):
    """loss_object_tf_keras.py (tf.keras) run on Keras 2: autofix migrate's migration is proven,
    the one that gives the metric loss / N is not (tf_keras binds update_state to each metric
    object: the proof must see those updates too)."""
    for name in ("loss_object_tf_keras.py", "loss_object_tf_keras.migrated.py", "loss_object_tf_keras.wrong_share.py"):
        shutil.copy(PAIRS / name, tmp_path / name)
    original = str(tmp_path / "loss_object_tf_keras.py")
    right, wrong = compare_many(
        [ComparePair(str(tmp_path / "loss_object_tf_keras.migrated.py"), original), ComparePair(str(tmp_path / "loss_object_tf_keras.wrong_share.py"), original)],
        replicas=2, steps=3, offline=True, legacy_keras=True,
    )
    assert right.compare.status == "equivalent", right.compare.message
    assert wrong.compare.status == "different", wrong.compare.message
    assert "the metric train_loss (Mean) reads" in wrong.compare.message
    assert "1/2: each replica's share of the loss" in wrong.compare.message


@tf_test
def test_a_proof_compares_three_steps_on_two_replicas_and_on_one(compared):
    report = compared["fit"]
    result = report.compare
    assert report.ok and report.replicas == 2 and result.steps == 3
    on_n, on_one = result.pairs
    assert (on_n.replicas, on_n.status) == (2, "same") and (on_one.replicas, on_one.status) == (1, "same")
    assert on_n.variables >= 4 and on_n.max_relative < tolerance.RELATIVE
    # One replica is the original's own computation: the same numbers.
    assert on_one.max_relative == 0.0
    # The original as written, its data-parallel reference (2 virtual replicas of its batch), the
    # migrated script on 2 replicas (global 2 x B) and on 1.
    assert [(r.role, r.replicas, r.batch_scale, r.global_batch, r.mode) for r in result.runs] == [
        ("original", 1, 1, 16, "as written"),
        ("original", 1, 2, 32, "2 virtual replicas"),
        ("migrated", 2, 1, 32, "as written"),
        ("migrated", 1, 1, 16, "as written"),
    ]
    inline = compared["inline"].compare
    assert inline.runs[1].mode == "2 micro-steps a step"


@tf_test
def test_what_is_held_equal_is_noted(compared):
    fit = compared["fit"]
    assert "compare: Dataset.shuffle turned off" in fit.notes
    assert "compare: Keras dropout in a step masks drawn as one device draws them for the global batch" in fit.notes
    assert fit.fits[0].all_mirrored and fit.fits[0].replicas == 2
    assert "compare: tf.random.normal in a step drawn as one device draws it for the global batch" in compared["gan"].notes
    assert "compare: keras.random.normal in a step drawn as one device draws it for the global batch" in compared["train_step"].notes
    # The NumPy seed of Keras 3's legacy backend.random_normal only seeds a draw that is held.
    assert "compare: the seed Keras's legacy random_normal draws with np.random.randint in a step is not drawn (the draw it seeds is held)" in compared["legacy_noise"].notes
    # What each replica was fed, every step: the shards of the original's batches.
    trace = compared["loop"].trace
    assert sorted(trace["feeds"]) == ["0", "1", "2"] and [len(trace["feeds"]["0"][0][r]) for r in ("0", "1")] == [16, 16]


@tf_test
def test_a_json_report_round_trips(compared):
    report = compared["removed_api"]
    data = json.loads(report.to_json())
    assert (data["compare"]["status"], data["compare"]["ok"], data["compare"]["exit_code"]) == ("original-fails", False, 2)
    assert SmokeReport.from_dict(data).to_dict() == data


# --- single-device loops and a notebook, in one process ------------------------------------------

LOOPS = ["eager_gan.py", "compare/loop.py", "notebook.ipynb"]


@pytest.fixture(scope="module")
def loops():
    return dict(zip(LOOPS, run_many([SMOKE / name for name in LOOPS], replicas=2, steps=2, offline=True)))


@tf_test
def test_an_eager_loop_with_two_optimizers_is_recorded_and_capped(loops):
    report = loops["eager_gan.py"]
    assert report.status == "step-limit" and report.trained
    assert [(r.name, r.in_tf_function, r.strategy, r.replicas, r.steps, len(r.losses)) for r in report.loops] == [
        ("Adam.apply_gradients", False, "_DefaultDistributionStrategy", 1, 2, 2),
        ("Adam.apply_gradients", False, "_DefaultDistributionStrategy", 1, 2, 2),
    ]
    assert [r.site for r in report.loops] == ["eager_gan.py:23", "eager_gan.py:27"]
    assert "stopped after 2 steps (Adam.apply_gradients called 2 times at eager_gan.py:23)" in report.notes
    assert report.failures == (
        "custom loop Adam.apply_gradients at eager_gan.py:23 trained on 1 replica: no MirroredStrategy was created",
        "custom loop Adam.apply_gradients at eager_gan.py:27 trained on 1 replica: no MirroredStrategy was created",
    )


@tf_test
def test_a_tf_function_loop_without_strategy_is_one_step_a_call(loops):
    report = loops["compare/loop.py"]
    (loop,) = report.loops
    assert (loop.name, loop.site, loop.in_tf_function, loop.optimizers) == ("train_step", "loop.py:20", True, ("SGD",))
    assert (loop.steps, len(loop.losses), loop.global_batch, loop.replicas) == (2, 2, 16, 1)
    assert report.status == "step-limit" and not report.runs and not report.fits
    assert checks.steps_trained(json.loads(report.to_json())) == 2


@tf_test
def test_a_notebook_runs_as_one_program_with_its_magics_skipped(loops):
    report = loops["notebook.ipynb"]
    assert report.ok, report.failures
    (fit,) = report.fits
    assert fit.site == "notebook.ipynb:cell 6:2" and fit.replicas == 2 and fit.all_mirrored and fit.global_batch == 32
    assert report.notes[:4] == (
        "cell 2, line 1: skipped `!pip install -q tensorflow` (shell command)",
        "cell 2, line 2: skipped `%matplotlib inline` (magic)",
        "cell 4: skipped a `%%bash` cell (not Python)",
        "cell 7, line 1: skipped `model.evaluate?` (help)",
    )


@tf_test
def test_minimize_on_keras2_is_a_custom_loop():
    report = run_smoke(SMOKE / "minimize_keras2.py", steps=2, legacy_keras=True, offline=True)
    (loop,) = report.loops
    assert (loop.name, loop.steps, loop.optimizers, loop.site) == ("SGD.apply_gradients", 2, ("SGD",), "minimize_keras2.py:13")
    assert report.status == "step-limit"


# --- without TensorFlow ----------------------------------------------------------------------


def test_a_notebook_that_cannot_run_as_one_program_is_refused_in_one_line(tmp_path):
    report = run_smoke(SMOKE / "notebook_uses_shell_output.ipynb")
    assert (report.status, report.exit_code) == ("refused", 2)
    assert report.failures == (
        "cannot be run as a script: cell 6, line 3: `files = !ls` uses what a shell command returns, which the smoke test does not run",
    )
    cells = json.loads((SMOKE / "notebook.ipynb").read_text())
    for source, reason in (
        ("%cd data", "cell 2, line 1: `%cd data` changes the working folder, which the smoke test does not do"),
        ("%env KERAS_BACKEND=jax", "cell 2, line 1: `%env KERAS_BACKEND=jax` sets environment variables"),
        ("def f(:\n    pass", "cell 2, line 1: neither Python nor IPython can read it"),
    ):
        cells["cells"][1]["source"] = source
        path = tmp_path / "nb.ipynb"
        path.write_text(json.dumps(cells))
        with pytest.raises(notebook.Refused) as refused:
            notebook.program(str(path))
        assert str(refused.value).startswith(reason)
    path.write_text("{not json")
    with pytest.raises(notebook.Refused, match="not a notebook that can be run: not valid JSON"):
        notebook.program(str(path))


def test_a_notebook_program_keeps_its_lines_and_runs_time_as_its_statement():
    program = notebook.program(str(SMOKE / "notebook.ipynb"))
    lines = program.text.split("\n")
    line = next(i for i, text in enumerate(lines) if text.startswith("x = np.random"))
    assert program.cells[line] == (2, 3)  # cell index 2 (the third), its line 3: the %time line
    assert "%" not in program.text and "!" not in program.text
    compile(program.text, "nb.ipynb", "exec")


def _loop(**changes) -> dict:
    loop = {"site": "t.py:5", "name": "train_step", "in_tf_function": True, "strategy": "_DefaultDistributionStrategy", "replicas": 1, "steps": 3, "losses": [1.0, 0.5, 0.25]}
    return dict(loop, **changes)


@tf_test
def test_a_legacy_numpy_seed_is_left_undrawn_only_where_it_only_seeds_the_draw(tmp_path):
    """Keras 3's legacy random_normal and its kin read their np.random.randint only as the seed
    of a tf.random draw (which the comparison holds); a function that reads it otherwise is not
    taken for one of them."""
    from keras.src.legacy import backend as legacy

    from autofix.smoke import noise

    assert all(noise._only_seeds(getattr(legacy, name).__code__) for name in noise.SEEDING)
    module = tmp_path / "variant.py"
    module.write_text(
        "import numpy as np\nimport tensorflow as tf\n\n\n"
        "def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):\n"
        '    """DEPRECATED."""\n'
        "    if seed is None:\n"
        "        seed = np.random.randint(10e6)\n"
        "    return tf.random.normal(shape, mean=mean, stddev=stddev, dtype=dtype, seed=seed) + seed\n"
    )
    spec = importlib.util.spec_from_file_location("variant", module)
    variant = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(variant)
    assert not noise._only_seeds(variant.random_normal.__code__)


def test_loop_checks_say_why_a_loop_trains_on_one_replica():
    raw = {"status": "step-limit", "loops": [_loop()]}
    assert [(c.name, c.passed, c.message) for c in checks.evaluate(raw, replicas=2, timeout=60)] == [
        ("finished", True, "stopped cleanly at the step cap"),
        ("trained", True, "trained 3 steps"),
        ("loop[0].replicas", False, "custom loop train_step at t.py:5 trained on 1 replica: no MirroredStrategy was created"),
    ]
    raw = {"status": "completed", "loops": [_loop(losses=[float("nan")])], "strategies": ["MirroredStrategy (2 replicas)"]}
    assert [c.message for c in checks.evaluate(raw, replicas=2, timeout=60) if not c.passed] == [
        "custom loop train_step at t.py:5 trained on 1 replica: its step does not run through strategy.run",
        "the loss of custom loop train_step at t.py:5 is not finite (nan)",
    ]
    # The original of a --compare run asks for one replica: a single-device loop passes.
    assert all(c.passed for c in checks.evaluate({"status": "completed", "loops": [_loop()]}, replicas=1, timeout=60))
    assert SmokeReport(script="t.py", ok=True, status="completed", replicas=1, steps=3, loops=(LoopRecord(steps=1),)).trained


@tf_test
def test_a_float64_comparison_runs_in_float64_and_leaves_the_next_script_in_float32(tmp_path):
    """The runs of a float64 comparison make their variables, data, draws and filled tensors in
    float64 (a GAN's `concat([generated, real])` and `labels + noise` run), prove a correct
    migration far inside the tolerance and still show a loss averaged per replica; a script run
    after them is float32 again (Keras keeps the policy it made at first use)."""
    np = pytest.importorskip("numpy")
    gan = compare._jobs(ComparePair(str(PAIRS / "gan_fit.migrated.py"), str(PAIRS / "gan_fit.py")), 2, 2, str(tmp_path / "gan"), "float64")
    wrong = compare._jobs(ComparePair(str(PAIRS / "loop.wrong_mean.py"), str(PAIRS / "loop.py")), 2, 2, str(tmp_path / "wrong"), "float64")
    after = compare._jobs(ComparePair(str(PAIRS / "loop.migrated.py"), str(PAIRS / "loop.py")), 2, 2, str(tmp_path / "after"))[:1]
    reports = run_many([*gan, *wrong, *after], replicas=2, steps=2, offline=True)
    proven = compare.judge("gan_fit.py", *reports[0:4], 2)
    assert proven.status == "equivalent" and all(p.max_relative < 1e-9 for p in proven.pairs), proven.message
    for held in ("compare: keras's float type set to float64", "compare: float32 data given as float64", "compare: tf.ones made as float64"):
        assert held in reports[2].notes
    differs = compare.judge("loop.py", *reports[4:8], 2)
    assert differs.status == "different" and math.isclose(differs.pairs[0].first_difference["ratio"], 2.0, rel_tol=1e-6)
    for job, report in zip([*gan, *wrong, *after], reports):
        with np.load(job.recording.snapshot) as data:
            assert data["i0"].dtype == (np.float64 if job.recording.floatx else np.float32), job.recording.snapshot
    assert not any("float type" in note for note in reports[8].notes)


def _rounding_runs(tmp_path, float64_outcome):
    """A fake ``run_many`` for ``compare_many``: in float32, the migrated update turned around
    in one element of 1000 with every gradient the original's (Adam's rounding); in float64,
    ``float64_outcome``: ``same``, ``turned`` (the same again), ``doubled`` (twice the step: a
    real difference that float32's rounding hid) or ``crashed``."""
    np = pytest.importorskip("numpy")
    start = [np.ones(1000)]
    grads = [[np.full(1000, 0.1)]]
    step = np.full(1000, -0.01)
    turned_step = step.copy()
    turned_step[0] = 0.01
    original = _trace(tmp_path / "o.npz", start, [[step]], grads)
    turned = _trace(tmp_path / "t.npz", start, [[turned_step]], grads)
    doubled = _trace(tmp_path / "d.npz", start, [[2 * step]], [[2 * grads[0][0]]])
    calls = []

    def run_many(jobs, **settings):
        floatx = jobs[0].recording.floatx
        calls.append((floatx, len(jobs)))
        reports = []
        for job in jobs:
            migrated_n = job.replicas == 2
            if floatx == "float64" and float64_outcome == "crashed":
                failed = Check("finished", False, "the script crashed at t.py:3: TypeError: float64 and float32")
                reports.append(_report(None, job.replicas or 1, 8, status="crashed", ok=False, checks=(failed,)))
                continue
            use_turned = migrated_n and (floatx is None or float64_outcome == "turned")
            use_doubled = migrated_n and floatx == "float64" and float64_outcome == "doubled"
            batch = 16 if (migrated_n or job.recording.batch_scale == 2) else 8
            reports.append(_report(doubled if use_doubled else turned if use_turned else original, job.replicas or 1, batch))
        return reports

    return run_many, calls


@pytest.mark.parametrize(
    ("float64_outcome", "status", "floatx"),
    [
        ("same", "equivalent", "float64"),
        ("doubled", "different", "float64"),
        ("turned", "inconclusive", "float32"),
        ("crashed", "inconclusive", "float32"),
    ],
)
def test_rounding_that_leaves_a_comparison_inconclusive_is_compared_again_in_float64(monkeypatch, tmp_path, float64_outcome, status, floatx):
    """Only a comparison left inconclusive by float32's rounding is run again, in float64: a proof
    or a difference there is the verdict; anything else there leaves the float32 verdict (not
    proven), with what float64 said."""
    fake, calls = _rounding_runs(tmp_path, float64_outcome)
    monkeypatch.setattr(compare, "run_many", fake)
    report = compare_many([ComparePair("m.py", "o.py")], replicas=2, steps=1, offline=True)[0]
    assert calls == [(None, 4), ("float64", 4)]
    assert (report.compare.status, report.compare.floatx) == (status, floatx)
    if status == "equivalent":
        assert report.compare.message.startswith(
            "in float64 (in float32, dense/w0 6.3% apart: float32's rounding, magnified over the steps): on 2 replicas: the same 1 step"
        ), report.compare.message
        assert not report.compare.rounding
    elif status == "different":
        assert report.compare.message.startswith("in float64 (in float32, dense/w0 6.3% apart: not float32's rounding): on 2 replicas, in step 1"), report.compare.message
        assert "2.00 x" in report.compare.message and not report.compare.rounding
    else:
        assert "it cannot be proven or disproven in float32" in report.compare.message and report.compare.rounding
        assert f"; in float64: {'inconclusive' if float64_outcome == 'turned' else 'original-fails'}: " in report.compare.message


def test_a_comparison_that_differs_or_is_proven_in_float32_is_not_run_again(monkeypatch, tmp_path):
    np = pytest.importorskip("numpy")
    start = [np.ones(4)]
    original = _trace(tmp_path / "o.npz", start, [[np.full(4, -0.1)]])
    doubled = _trace(tmp_path / "d.npz", start, [[np.full(4, -0.2)]])
    calls = []

    def run_many(jobs, **settings):
        calls.append(jobs[0].recording.floatx)
        return [
            _report(doubled if (job.replicas == 2 and "wrong" in job.script) else original, job.replicas or 1, 16 if (job.replicas == 2 or job.recording.batch_scale == 2) else 8)
            for job in jobs
        ]

    monkeypatch.setattr(compare, "run_many", run_many)
    reports = compare_many([ComparePair("right.py", "o.py"), ComparePair("wrong.py", "o.py")], replicas=2, steps=1, offline=True)
    assert [r.compare.status for r in reports] == ["equivalent", "different"] and calls == [None]


def test_an_original_whose_steps_cannot_be_split_is_run_again_as_micro_steps(monkeypatch, tmp_path):
    """A step written inline cannot be given shards: its reference is made again, as N
    micro-steps of the original at its batch, and the migration compared with that."""
    np = pytest.importorskip("numpy")
    start = [np.ones(4)]
    original = _trace(tmp_path / "o.npz", start, [[np.full(4, -0.1)]])
    calls = []

    def run_many(jobs, **settings):
        calls.append([(job.recording.virtual, job.recording.accumulate) for job in jobs])
        reports = []
        for job in jobs:
            if job.recording.virtual:
                reports.append(_report(None, 1, 16, status="unsplittable", error="its update at o.py:9 is not made in a step function given its batch"))
            else:
                reports.append(_report(original, job.replicas or 1, 16 if (job.replicas == 2 or job.recording.accumulate) else 8))
        return reports

    monkeypatch.setattr(compare, "run_many", run_many)
    report = compare_many([ComparePair("m.py", "o.py")], replicas=2, steps=1, offline=True)[0]
    assert calls == [[(0, 0), (2, 0), (0, 0), (0, 0)], [(0, 2)]]
    assert report.compare.status == "equivalent" and report.compare.runs[1].mode == "2 micro-steps a step"


def test_judge_tells_an_original_that_fails_from_a_migration_that_fails(tmp_path):
    original = _trace(tmp_path / "o.npz", [[1.0]], [[[-0.1]]])
    crashed = _report(None, 1, None, status="crashed", loops=(), checks=(Check("finished", False, "the script crashed at o.py:3: AttributeError: 'Mean' object has no attribute 'reset_states'"),))
    both = compare.judge("o.py", crashed, crashed, dataclasses.replace(crashed, replicas=2), crashed, 2)
    assert both.status == "original-fails" and both.exit_code == 2
    assert both.message.startswith("the original fails too: the script crashed at o.py:3: AttributeError: 'Mean' object has no attribute 'reset_states'")
    fine = _report(original, 1, 8)
    alone = compare.judge("o.py", fine, _report(original, 1, 16), dataclasses.replace(crashed, replicas=2), crashed, 2)
    assert alone.status == "migrated-fails" and alone.exit_code == 1
    assert alone.message.startswith("the migrated script fails on 2 replicas where the original runs: the script crashed")
    # The original's own single-device checks are not asked of it as the reference.
    one_replica = dataclasses.replace(fine, checks=(*fine.checks, Check("loop[0].replicas", False, "custom loop ... trained on 1 replica")))
    assert compare.reference_failure(one_replica) is None


def test_compare_report_round_trips_and_sets_the_exit_code():
    result = CompareReport("o.py", "different", "why", (Pair(2, 2, "different", "why", 3, 1.0, {"name": "w", "ratio": 2.0}),), (CompareRun("original", "o.py", 1, 1, "completed", True, 16),), 1e-3, 1e-6)
    report = SmokeReport(script="m.py", ok=True, status="completed", replicas=2, steps=1, compare=result)
    assert report.exit_code == 1
    data = json.loads(report.to_json())
    assert (data["compare"]["status"], data["compare"]["exit_code"], data["exit_code"]) == ("different", 1, 1)
    assert SmokeReport.from_dict(data) == report
    codes = {status: dataclasses.replace(result, status=status).exit_code for status in ("equivalent", "different", "migrated-fails", "original-fails", "inconclusive", "harness-error")}
    assert codes == {"equivalent": 0, "different": 1, "migrated-fails": 1, "original-fails": 2, "inconclusive": 2, "harness-error": 2}


def test_cli_compare_passes_its_options_and_exits_with_the_verdict(monkeypatch, tmp_path):
    seen = {}
    result = CompareReport("o.py", "original-fails", "the original fails too: x", (), (), 1e-3, 1e-6)

    def fake(script, original, **options):
        seen.update(options, script=script, original=original)
        return SmokeReport(script=str(script), ok=False, status="crashed", replicas=2, steps=1, compare=result,
                           checks=(Check("finished", False, "the script crashed: x"),))

    monkeypatch.setattr(compare, "run_compare", fake)
    migrated, original = tmp_path / "m.py", tmp_path / "o.py"
    migrated.write_text("x = 1\n")
    original.write_text("x = 1\n")
    out = tmp_path / "r.json"
    ran = CliRunner().invoke(main, ["smoke", str(migrated), "--compare", str(original), "--json", str(out), "--", "--epochs", "1"])
    assert ran.exit_code == 2, ran.output
    assert (seen["replicas"], seen["steps"], tuple(seen["args"])) == (2, command.COMPARE_STEPS, ("--epochs", "1"))
    assert "compare: ORIGINAL-FAILS" in ran.stdout and "NO VERDICT" in ran.stdout
    assert f"{migrated}: compare: original-fails: the original fails too: x" in ran.stderr
    assert json.loads(out.read_text())["compare"]["status"] == "original-fails"
    refused = CliRunner().invoke(main, ["smoke", str(migrated), "--compare", str(original), "--workers", "2"])
    assert refused.exit_code == 2 and "--compare runs on one machine" in refused.output
