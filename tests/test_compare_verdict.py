"""The verdict of `autofix smoke --compare` on canned records, without TensorFlow: each kind of
difference between a migration and its original's data-parallel reference is named, what the
runs cannot be held equal in makes a pair inconclusive (never different, never proven), and
what a proof did to hold the runs equal is said.

The records are what the child writes (see autofix.smoke.snapshot): an index (``trace``) and
an .npz file of each variable's values before training and after each step, its gradient in
each step, and the optimizer's variables after each step.
"""

from __future__ import annotations

import dataclasses

import pytest

np = pytest.importorskip("numpy")

from compare_records import _report, _trace  # noqa: E402

from autofix.smoke import compare, verdict  # noqa: E402
from autofix.smoke.report import Check, LoopRecord  # noqa: E402


START = [[1.0, 2.0], [0.5]]
STEPS = [[[-0.1, 0.1], [0.05]], [[-0.09, 0.08], [0.04]], [[-0.08, 0.07], [0.03]]]


def _judge(tmp_path, migrated_trace, reference_trace=None, replicas=2):
    reference_trace = reference_trace or _trace(tmp_path / "ref.npz", START, STEPS)
    one = _trace(tmp_path / "one.npz", START, STEPS)
    o1, on = _report(one, 1, 8), _report(reference_trace, 1, 16)
    mn, m1 = _report(migrated_trace, replicas, 16), _report(_trace(tmp_path / "m1.npz", START, STEPS), 1, 8)
    return compare.judge("o.py", o1, on, mn, m1, replicas)


def test_three_equal_steps_are_proven_and_the_proof_says_what_it_did_not_compare(tmp_path):
    result = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS))
    assert result.status == "equivalent" and result.exit_code == 0, result.message
    assert result.steps == 3 and [p.status for p in result.pairs] == ["same", "same"]
    assert result.message.startswith("on 2 replicas: the same 3 steps as the original's data-parallel step")
    assert "not compared: what the scripts do after 3 steps" in result.message


def test_a_difference_from_the_second_step_on_is_found_and_named_by_its_step(tmp_path):
    """A momentum or a schedule that differs changes nothing in the first update: the later
    steps show it."""
    later = [STEPS[0], [[-0.18, 0.16], [0.08]], STEPS[2]]
    result = _judge(tmp_path, _trace(tmp_path / "m.npz", START, later))
    assert result.status == "different" and result.exit_code == 1
    assert result.pairs[0].first_difference["step"] == 2
    assert "in step 2, the gradient of dense/w0 differs" in result.message
    assert "it is 2.00 x the original's (2 x: is the loss averaged per replica, or divided by the per-replica batch" in result.message


def test_the_optimizers_hyper_parameters_rates_and_schedules_are_compared(tmp_path):
    def optimizer(**config):
        return [{"name": "SGD", "config": {"learning_rate": 1.0, "momentum": 0.9, **config}, "learning_rates": [1.0] * 4, "schedule": None}]

    reference = _trace(tmp_path / "r.npz", START, STEPS, optimizers=optimizer())
    momentum = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS, optimizers=optimizer(momentum=0.5)), reference)
    assert momentum.status == "different" and "SGD's momentum is 0.5 in the migration, 0.9 in the original" in momentum.message
    other = [{"name": "Adam", "config": {}, "learning_rates": [1.0] * 4, "schedule": None}]
    assert "the migration's optimizer is Adam, the original's SGD" in _judge(tmp_path, _trace(tmp_path / "a.npz", START, STEPS, optimizers=other), reference).message
    rates = optimizer()
    rates[0]["learning_rates"] = [1.0, 0.5, 0.25, 0.125]
    decayed = _judge(tmp_path, _trace(tmp_path / "d.npz", START, STEPS, optimizers=rates), reference)
    assert decayed.status == "different" and "SGD's learning rate at step 2 is 0.5 in the migration, 1 in the original" in decayed.message
    # A schedule counted in steps: on 2 replicas, read at the same number of examples seen.
    probe = [[0, 0.1], [8, 0.1], [16, 0.05]]
    halved = [[0, 0.1], [8, 0.05], [16, 0.025]]
    sched_ref = _trace(tmp_path / "s1.npz", START, STEPS, optimizers=[dict(optimizer()[0], schedule=halved)])
    late = _judge(tmp_path, _trace(tmp_path / "s2.npz", START, STEPS, optimizers=[dict(optimizer()[0], schedule=probe)]), sched_ref)
    assert late.status == "different"
    assert "schedule gives 0.1 at step 8 of the migration and 0.05 at the same number of examples in the original (its step 16)" in late.message
    assert "acts 2 x later in the data" in late.message


def _feeds(*steps):
    return {str(s): [{str(r): rows for r, rows in enumerate(call)}] for s, call in enumerate(steps)}


def test_what_each_replica_is_fed_must_partition_the_global_batch_and_be_the_originals(tmp_path):
    rows = [f"r{k}" for k in range(8)]
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]))

    def judged(*calls):
        return _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds(list(calls))), reference)

    assert judged(rows[:4], rows[4:]).status == "equivalent"
    whole = judged(rows, rows)
    assert whole.status == "different" and "every replica was fed the same 8 examples: the step is given the whole batch on each replica" in whole.message
    assert "were fed 4, 2 examples" in judged(rows[:4], rows[4:6]).message
    assert "2 examples were fed to more than one replica" in judged(rows[:4], rows[2:6]).message
    smaller = judged(rows[:2], rows[2:4])
    assert smaller.status == "different" and "fed 4 examples in all, the original's step 8" in smaller.message
    swapped = judged(rows[4:], rows[:4])
    assert swapped.status == "inconclusive" and "the original's examples in another order" in swapped.message
    other = judged([f"x{k}" for k in range(4)], [f"y{k}" for k in range(4)])
    assert other.status == "inconclusive" and "fed other examples than the original (the data was not held equal)" in other.message


def test_a_batch_that_does_not_split_evenly_is_shared_as_tf_distribute_shares_it(tmp_path):
    """An epoch's last batch, 7 examples on 3 replicas: tf.distribute gives 3, 3, 1 (measured);
    a migration fed so, as the reference was, is proven; other unequal shares are different."""
    rows = [f"r{k}" for k in range(7)]
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:3], rows[3:6], rows[6:]]))

    def judged(*calls):
        migrated = _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds(list(calls)))
        o1, m1 = (_report(_trace(tmp_path / f"{n}.npz", START, STEPS[:1]), 1, 8) for n in ("one", "m1"))
        return compare.judge("o.py", o1, _report(reference, 1, 24), _report(migrated, 3, 24), m1, 3)

    assert verdict.distributed_shares(7, 3) == [3, 3, 1] and verdict.distributed_shares(32, 3) == [11, 11, 10]
    assert judged(rows[:3], rows[3:6], rows[6:]).status == "equivalent"
    wrong = judged(rows[:2], rows[2:5], rows[5:])
    assert wrong.status == "different"
    assert "the replicas were fed 2, 3, 2 examples: each must get an equal share of the global batch (of a batch that does not split evenly, an epoch's last, tf.distribute's: 3, 3, 1)" in wrong.message


def test_a_global_batch_the_reference_could_not_scale_is_not_compared_never_different(tmp_path):
    """The original's fit fed by a Python generator or a PyDataset, which the reference cannot
    ask for N x its batch: a migration feeding the replicas N x the examples the reference saw
    is inconclusive, said why; the same numbers for a batcher the reference did scale are
    different (the global batch is not N x the original's)."""
    rows = [f"r{k}" for k in range(8)]
    pipeline = {"fits": [{"epochs": 1, "initial_epoch": 0, "unscaled": "a Python generator"}]}
    unscalable = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:2], rows[2:4]]), pipeline=pipeline)
    scaled = _trace(tmp_path / "s.npz", START, STEPS[:1], feeds=_feeds([rows[:2], rows[2:4]]))
    migrated = _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]))
    judged = _judge(tmp_path, migrated, unscalable)
    assert judged.status == "inconclusive", judged.message
    assert "fed by a Python generator, whose batch the reference cannot ask for 2 x" in judged.message
    assert _judge(tmp_path, migrated, scaled).status == "different"


def test_of_several_strategy_runs_in_a_step_the_one_fed_the_originals_examples_is_the_steps(tmp_path):
    """A migration computing on every replica what its step is then given runs strategy.run
    twice a step: the run fed the reference's examples is compared; when none is, the first."""
    rows = [f"r{k}" for k in range(8)]
    raw = [f"u{k}" for k in range(8)]
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]))

    def judged(*calls):
        feeds = {"0": [{str(r): rows for r, rows in enumerate(call)} for call in calls]}
        return _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=feeds), reference)

    assert judged([raw[:4], raw[4:]], [rows[:4], rows[4:]]).status == "equivalent"
    whole = judged([raw[:4], raw[4:]], [rows, rows])
    assert whole.status == "inconclusive" and "fed other examples than the original" in whole.message
    assert judged([rows, rows], [raw[:4], raw[4:]]).status == "different"


def test_identical_examples_do_not_show_which_replica_got_which(tmp_path):
    """A dataset of identical rows (np.ones) cannot show a partition by content: the shards are
    judged by their number and against the reference, not called undistributed."""
    same = ["r"] * 4
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([same, same]))
    split = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds([same, same])), reference)
    assert split.status == "equivalent", split.message
    whole = _judge(tmp_path, _trace(tmp_path / "w.npz", START, STEPS[:1], feeds=_feeds([same * 2, same * 2])), reference)
    assert whole.status == "different" and "fed 16 examples in all, the original's step 8" in whole.message


def test_data_the_original_itself_does_not_reproduce_is_inconclusive_not_different(tmp_path):
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([["a", "b"], ["c", "d"]]))
    one = _trace(tmp_path / "one.npz", START, STEPS[:1], feeds=_feeds([["z", "b"]]))
    migrated = _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds([["p", "q"], ["r", "s"]]))
    judged = verdict.judge_pair(_report(migrated, 2), _report(reference), 2, _report(one))
    assert judged.status == "not-compared" and "the original's own runs were fed different examples" in judged.message


def test_initial_weights_that_differ_are_different_when_loaded_or_initialized_otherwise(tmp_path):
    moved = [[1.5, 2.0], [0.5]]
    loaded = {"dense/w0": {"kind": "loaded", "what": "load_weights at o.py:12"}}
    reference = _trace(tmp_path / "r.npz", START, STEPS, origins=loaded)
    no_load = _judge(tmp_path, _trace(tmp_path / "m.npz", moved, STEPS), reference)
    assert no_load.status == "different"
    assert "starts from other weights than the original (dense/w0): the original loads them (load_weights at o.py:12), the migration does not" in no_load.message
    other_init = _trace(
        tmp_path / "i.npz", moved, STEPS,
        origins={"dense/w0": {"kind": "initializer", "what": "Zeros", "config": {}}},
        transplanted={"dense/w0": "not set: initialized by Zeros() in the migration, by GlorotUniform() in the original"},
    )
    assert "initialized by Zeros() in the migration, by GlorotUniform() in the original" in _judge(tmp_path, other_init).message
    unknown = _trace(tmp_path / "u.npz", moved, STEPS, origins={"dense/w0": {"kind": "value"}})
    result = _judge(tmp_path, unknown)
    assert result.status == "inconclusive" and "they could not be set to the original's" in result.message


def test_initial_values_set_to_the_originals_are_said_in_the_verdict(tmp_path):
    copied = _trace(tmp_path / "m.npz", START, STEPS, transplanted={"dense/w0": "set to the original's initial value (both drawn by the same initializer, in another order)"})
    result = _judge(tmp_path, copied)
    assert result.status == "equivalent"
    assert "the initial values of 1 variable (dense/w0) were set to the original's (both runs draw them from the same Keras initializers" in result.message
    assert result.said and result.runs[2].transplanted == "1 set to the original's"


def test_noise_layers_run_otherwise_are_different(tmp_path):
    reference = _trace(tmp_path / "r.npz", START, STEPS, noise_layers=[["Dropout", {"rate": 0.2}, True]])
    inference = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS, noise_layers=[["Dropout", {"rate": 0.2}, False]]), reference)
    assert inference.status == "different"
    assert "the original's step runs Dropout(rate=0.2) with training=True; the migrated step runs Dropout(rate=0.2) with training=False" in inference.message


@pytest.mark.parametrize(
    ("mine", "theirs", "status", "says"),
    [
        # holding the data equal turns every shuffle off: where the scripts shuffle still shows
        ({"shuffled": ["m.py:13"]}, {}, "different", "the migration shuffles a dataset the original does not (Dataset.shuffle at m.py:13)"),
        ({}, {"shuffled": ["o.py:13"]}, "different", "the original shuffles its data (Dataset.shuffle at o.py:13), the migration does not"),
        ({"shuffled": ["m.py:14"]}, {"shuffled": ["o.py:13"]}, "equivalent", ""),
        # a partial last batch dropped comes after the steps compared
        ({"dropping": ["m.py:13"]}, {}, "different", "the migration drops the partial last batch of an epoch (drop_remainder=True at m.py:13)"),
        ({"dropping": ["m.py:13"]}, {"dropping": ["o.py:12"]}, "equivalent", ""),
        # an original that seeds itself chose its start; one that does not leaves it to chance
        ({"seeds": [["keras.utils.set_random_seed", "8"]]}, {"seeds": [["keras.utils.set_random_seed", "7"]]}, "different",
         "the migration calls keras.utils.set_random_seed(8), the original keras.utils.set_random_seed(7)"),
        ({}, {"seeds": [["np.random.seed", "1"]]}, "different", "the migration calls nothing, the original np.random.seed(1)"),
        ({"seeds": [["keras.utils.set_random_seed", "7"]]}, {}, "equivalent", ""),
        # fit is capped in every run: the epochs it is asked for are compared as written
        ({"fits": [{"epochs": 3, "initial_epoch": 0}]}, {"fits": [{"epochs": 2, "initial_epoch": 0}]}, "different",
         "fit is asked for epochs=3 in the migration, epochs=2 in the original"),
        ({"fits": [{"epochs": 2, "initial_epoch": 0}]}, {"fits": [{"epochs": 2, "initial_epoch": 0}]}, "equivalent", ""),
        # ... and the steps an epoch: the original's, or the original's divided by the replicas
        ({"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 1000}]}, {"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 500}]},
         "different", "fit is asked for steps_per_epoch=1000 in the migration, steps_per_epoch=500 in the original: its epochs end at other steps"),
        ({"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 500}]}, {"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 500}]}, "equivalent", ""),
        ({"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 250}]}, {"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 500}]}, "equivalent", ""),
        ({"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 4}]}, {"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 7}]}, "equivalent", ""),
        ({"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": 500}]}, {"fits": [{"epochs": 2, "initial_epoch": 0, "steps_per_epoch": "None"}]}, "equivalent", ""),
        # ... and what it trains on: its arrays' rows (cut short, the first steps are the same),
        # whether it shuffles them (off in every run), the share kept for validation
        ({"fits": [{"epochs": 2, "examples": 200}]}, {"fits": [{"epochs": 2, "examples": 256}]}, "different",
         "fit trains on 200 examples in the migration, 256 in the original: an epoch holds other examples"),
        ({"fits": [{"epochs": 2, "examples": 256}]}, {"fits": [{"epochs": 2, "examples": 256}]}, "equivalent", ""),
        ({"fits": [{"epochs": 2, "shuffle": False}]}, {"fits": [{"epochs": 2, "shuffle": True}]}, "different",
         "fit is given shuffle=False in the migration, shuffle=True in the original (Keras's default is True)"),
        ({"fits": [{"epochs": 2, "shuffle": "batch"}]}, {"fits": [{"epochs": 2, "shuffle": True}]}, "different", "fit is given shuffle='batch'"),
        ({"fits": [{"epochs": 2, "shuffle": True}]}, {"fits": [{"epochs": 2, "shuffle": True}]}, "equivalent", ""),
        ({"fits": [{"epochs": 2, "validation_split": 0.1}]}, {"fits": [{"epochs": 2, "validation_split": 0.2}]}, "different",
         "fit keeps validation_split=0.1 of its arrays apart in the migration, 0.2 in the original"),
        ({"fits": [{"epochs": 2, "validation_split": 0.0}]}, {"fits": [{"epochs": 2, "validation_split": 0.0}]}, "equivalent", ""),
        # the callbacks it is given (the harness's own is not among them; BackupAndRestore is left out)
        ({"fits": [{"callbacks": []}]}, {"fits": [{"callbacks": ["EarlyStopping", "ReduceLROnPlateau"]}]}, "different",
         "fit is given other callbacks: none in the migration, EarlyStopping, ReduceLROnPlateau in the original"),
        ({"fits": [{"callbacks": ["EarlyStopping"]}]}, {"fits": [{"callbacks": ["EarlyStopping"]}]}, "equivalent", ""),
    ],
)
def test_what_holding_the_data_equal_hides_is_compared_where_the_scripts_do_it(tmp_path, mine, theirs, status, says):
    reference = _trace(tmp_path / "r.npz", START, STEPS, pipeline=theirs)
    result = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS, pipeline=mine), reference)
    assert result.status == status, result.message
    assert says in result.message


def test_what_the_script_reports_is_compared_step_by_step(tmp_path):
    reference = _trace(tmp_path / "r.npz", START, STEPS, reported={"metrics": {"1": [{"name": "train_loss", "class": "Mean", "value": 1.2}]}, "returns": {"0": 1.2}})
    share = _trace(tmp_path / "m.npz", START, STEPS, reported={"metrics": {"1": [{"name": "train_loss", "class": "Mean", "value": 0.6}]}, "returns": {"0": 1.2}})
    result = _judge(tmp_path, share, reference)
    assert result.status == "different"
    assert "the metric train_loss (Mean) reads 0.6 after step 1 in the migration, 1.2 in the original (1/2: each replica's share of the loss, not the loss?)" in result.message
    returned = _trace(tmp_path / "n.npz", START, STEPS, reported={"returns": {"0": 2.4}})
    assert "what its step returns differs in step 1: 2.4 in the migration, 1.2 in the original (2 x" in _judge(tmp_path, returned, reference).message
    logs = _trace(tmp_path / "l.npz", START, STEPS, reported={"logs": {"0": {"loss": 0.5, "accuracy": 0.25}}})
    logs_ref = _trace(tmp_path / "lr.npz", START, STEPS, reported={"logs": {"0": {"loss": 0.5, "accuracy": 0.5}}})
    assert "what fit logs differs in step 1 (accuracy): 0.25 in the migration, 0.5 in the original" in _judge(tmp_path, logs, logs_ref).message


def test_the_loss_a_loop_written_inline_reports_is_compared_with_what_the_migrated_step_returns(tmp_path):
    """An original whose step is written inline returns nothing: what its loop reports is the
    loss its update differentiated (micro-steps averaged). A migrated step returning 1/N of it
    (ReduceOp.MEAN of shares) or N x it is different; one that returns nothing, or more than a
    number, is proven with what was not compared said."""
    inline = _trace(tmp_path / "r.npz", START, STEPS, reported={"losses": {"0": 1.2, "1": 1.1}})
    share = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS, reported={"returns": {"0": 0.6, "1": 0.55}}), inline)
    assert share.status == "different"
    assert "the loss its step returns differs in step 1: 0.6 in the migration, 1.2 in the original (the loss its loop differentiates) (1/2: each replica's share" in share.message
    summed = _judge(tmp_path, _trace(tmp_path / "s.npz", START, STEPS, reported={"returns": {"0": 2.4, "1": 2.2}}), inline)
    assert summed.status == "different" and "(2 x: the replicas' values summed" in summed.message
    right = _judge(tmp_path, _trace(tmp_path / "g.npz", START, STEPS, reported={"returns": {"0": 1.2000001, "1": 1.1}}), inline)
    assert right.status == "equivalent" and "not compared: the loss" not in right.message, right.message
    silent = _judge(tmp_path, _trace(tmp_path / "n.npz", START, STEPS), inline)
    assert silent.status == "equivalent"
    assert "not compared: the loss the loops report (the original's step is written inline and the migrated step returns nothing" in silent.message
    # Another difference may be the original printing another value than it differentiates.
    other = _judge(tmp_path, _trace(tmp_path / "o.npz", START, STEPS, reported={"returns": {"0": 1.0, "1": 1.1}}), inline)
    assert other.status == "inconclusive" and "the original's loop may report another value than the one it differentiates" in other.message
    pair = _judge(tmp_path, _trace(tmp_path / "t.npz", START, STEPS, reported={"returns": {"0": [1.2, 0.5], "1": [1.1, 0.5]}}), inline)
    assert pair.status == "equivalent" and "not compared: what the migrated step returns (not one number" in pair.message
    several = _trace(tmp_path / "v.npz", START, STEPS, reported={"losses": {"0": None, "1": None}})
    unknown = _judge(tmp_path, _trace(tmp_path / "u.npz", START, STEPS, reported={"returns": {"0": 0.6, "1": 0.55}}), several)
    assert unknown.status == "equivalent" and "not compared: what the migrated step returns (the original's step is written inline and makes several updates" in unknown.message


def test_randomness_that_cannot_be_held_equal_is_inconclusive_never_different_nor_proven(tmp_path):
    drawn = _trace(tmp_path / "m.npz", START, [[[-0.2, 0.1], [0.05]], *STEPS[1:]], unheld=["np.random.normal"])
    result = _judge(tmp_path, drawn)
    assert result.status == "inconclusive" and result.exit_code == 2
    assert "np.random.normal in the migrated run's step is random in a way the comparison cannot hold equal, which may explain it" in result.message
    equal = _judge(tmp_path, _trace(tmp_path / "e.npz", START, STEPS, unheld=["tf.random.shuffle"]))
    assert equal.status == "inconclusive" and "but tf.random.shuffle in the migrated run's step" in equal.message


def test_a_reference_that_cannot_be_computed_exactly_is_inconclusive(tmp_path):
    reference = _trace(tmp_path / "r.npz", START, STEPS, inexact=["a gradient is taken after the update of d/kernel in the same step (one model updated after another)"])
    result = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS), reference)
    assert result.status == "inconclusive" and "the original's step cannot be computed as replicas: a gradient is taken after the update" in result.message


def test_a_migration_that_trains_other_steps_than_the_original_is_different(tmp_path):
    fewer = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS[:1], asked=3))
    assert fewer.status == "different" and "the migrated script trained 1 step where the original's data-parallel run trained 3" in fewer.message


def test_a_gradient_at_rounding_level_is_compared_by_its_size_and_said(tmp_path):
    """A bias just before BatchNormalization has an exact gradient of 0: what float32 leaves of
    it is noise, apart in every run; it is compared by its size only, and said."""
    start = [np.ones(100), [0.5]]
    noise = [np.full(100, 0.1), [1e-9]]
    other_noise = [np.full(100, 0.1), [-2e-9]]
    reference = _trace(tmp_path / "r.npz", start, [[-noise[0], -np.asarray(noise[1])]], gradients=[noise])
    migrated = _trace(tmp_path / "m.npz", start, [[-noise[0], -np.asarray(other_noise[1])]], gradients=[other_noise])
    result = verdict.judge_pair(_report(migrated, 2), _report(reference), 2)
    assert result.status == "same" and "1 of them with a gradient at rounding level" in result.message
    real = _trace(tmp_path / "x.npz", start, [[-noise[0], [-0.5]]], gradients=[[noise[0], [0.5]]])
    assert verdict.judge_pair(_report(real, 2), _report(reference), 2).status == "different"


def test_the_original_failing_and_the_reference_diverging_are_not_failures_of_the_migration(tmp_path):
    crashed = _report(None, status="crashed", checks=(Check("finished", False, "the script crashed at o.py:3: AttributeError: x"),))
    result = compare.judge("o.py", crashed, crashed, _report(_trace(tmp_path / "m.npz", START, STEPS), 2), crashed, 2)
    assert result.status == "original-fails" and result.exit_code == 2
    fine = _report(_trace(tmp_path / "o.npz", START, STEPS))
    diverged = _report(None, status="diverged", error="replica 1 ended its step while replica 0 waits to update its weights")
    inconclusive = compare.judge("o.py", fine, diverged, _report(_trace(tmp_path / "m.npz", START, STEPS), 2, 16), fine, 2)
    assert inconclusive.status == "inconclusive" and "could not be computed: replica 1 ended its step" in inconclusive.message


def test_training_the_run_never_reached_is_said_with_the_proof(tmp_path):
    """A comparing run ends once its K steps are recorded: a script that trains a teacher and
    then distills a student has only the teacher's steps compared, and the proof says so
    (knowledge_distillation.py of part B: the student's loss averaged per replica was proven)."""
    script = tmp_path / "distill.py"
    script.write_text(
        "import keras\n"
        "teacher.fit(x, y, batch_size=64)\n"
        "distiller.fit(\n"
        "    x, y, batch_size=64)\n"
        "strategy.run(step, args=(x,))\n"
        "other.run()\n"
    )
    o1, on = _report(_trace(tmp_path / "o1.npz", START, STEPS), 1, 8), _report(_trace(tmp_path / "on.npz", START, STEPS), 1, 16)
    teacher_only = (LoopRecord(site="distill.py:2", name="fit", steps=3, global_batch=16),)
    mn = _report(_trace(tmp_path / "m.npz", START, STEPS), 2, 16, script=str(script), loops=teacher_only)
    m1 = _report(_trace(tmp_path / "m1.npz", START, STEPS), 1, 8)
    result = compare.judge("o.py", o1, on, mn, m1, 2)
    assert result.status == "equivalent", result.message
    said = "not compared: the training the script does after the steps compared (distiller.fit at line 3, strategy.run at line 5)"
    assert said in result.message and any(said in s for s in result.said)
    # every training call reached: nothing more is said
    everything = tuple(LoopRecord(site=f"distill.py:{n}", name="fit", steps=3, global_batch=16) for n in (2, 4, 5))
    reached = compare.judge("o.py", o1, on, dataclasses.replace(mn, loops=everything), m1, 2)
    assert reached.status == "equivalent" and "the training the script does after" not in reached.message


@pytest.mark.parametrize(
    ("mine", "theirs", "status", "says"),
    [
        # fit's dataset: a right migration's epoch makes as many steps as the reference's
        ({"fits": [{"batches": 16}]}, {"fits": [{"batches": 16}]}, "equivalent", ""),
        ({"fits": [{"batches": 6}]}, {"fits": [{"batches": 16}]}, "different", "an epoch of fit's dataset makes 6 steps in the migration, where the original's makes 16"),
        ({"fits": [{"batches": None}]}, {"fits": [{"batches": 16}]}, "equivalent", ""),
        # the dataset a loop iterates; a reference run of micro-steps takes N of its batches a step
        ({"trained": {"site": "m.py:40", "batches": 32}}, {"trained": {"site": "o.py:30", "batches": 16}}, "different",
         "an epoch of the dataset iterated at m.py:40 makes 32 steps in the migration, where the original's makes 16"),
        ({"trained": {"site": "m.py:40", "batches": 8, "micro": 1}}, {"trained": {"site": "o.py:30", "batches": 16, "micro": 2}}, "equivalent", ""),
        ({"trained": {"site": "m.py:40", "batches": 9, "micro": 1}}, {"trained": {"site": "o.py:30", "batches": 17, "micro": 2}}, "equivalent", ""),
        ({"trained": {"site": "m.py:40", "batches": 5, "micro": 1}}, {"trained": {"site": "o.py:30", "batches": 16, "micro": 2}}, "different", "makes 5 steps"),
        ({"trained": None}, {"trained": {"site": "o.py:30", "batches": 16}}, "equivalent", ""),
        # an epoch the script cuts to n batches (ds.take(n)) may keep its steps or its examples
        ({"trained": {"site": "m.py:40", "batches": 5, "limited": True}}, {"trained": {"site": "o.py:30", "batches": 10, "limited": True}}, "equivalent", ""),
        ({"trained": {"site": "m.py:40", "batches": 10, "limited": True}}, {"trained": {"site": "o.py:30", "batches": 10, "limited": True}}, "equivalent", ""),
        ({"trained": {"site": "m.py:40", "batches": 7, "limited": True}}, {"trained": {"site": "o.py:30", "batches": 10, "limited": True}}, "different", "makes 7 steps"),
        # ... also where the reference runs the original's steps as micro-steps (N of them a step)
        ({"trained": {"site": "m.py:40", "batches": 6, "limited": True}}, {"trained": {"site": "o.py:30", "batches": 6, "limited": True, "micro": 2}}, "equivalent", ""),
        ({"trained": {"site": "m.py:40", "batches": 3, "limited": True}}, {"trained": {"site": "o.py:30", "batches": 6, "limited": True, "micro": 2}}, "equivalent", ""),
        ({"trained": {"site": "m.py:40", "batches": 5, "limited": True}}, {"trained": {"site": "o.py:30", "batches": 6, "limited": True, "micro": 2}}, "different", "makes 5 steps"),
        # ... not an epoch of the whole data: half of it is half the examples
        ({"trained": {"site": "m.py:40", "batches": 8}}, {"trained": {"site": "o.py:30", "batches": 16}}, "different", "makes 8 steps"),
        # fit's validation arrays (what it reports at the end of an epoch, what callbacks read)
        ({"fits": [{"validation": "24:ab"}]}, {"fits": [{"validation": "24:ab"}]}, "equivalent", ""),
        ({"fits": [{"validation": "16:cd"}]}, {"fits": [{"validation": "24:ab"}]}, "different",
         "fit validates on other data than the original's (16 examples in the migration, 24 in the original)"),
        ({"fits": [{"validation": "24:cd"}]}, {"fits": [{"validation": "24:ab"}]}, "different", "fit validates on other data than the original's: what it reports"),
        ({"fits": [{"validation": None}]}, {"fits": [{"validation": "24:ab"}]}, "equivalent", ""),
    ],
)
def test_the_steps_an_epoch_of_the_trained_dataset_makes_are_compared_where_both_are_known(tmp_path, mine, theirs, status, says):
    """Every run is capped to the steps compared: a dataset cut short (``take``) or made longer
    (``repeat``) trains the same first steps, and shows only in how many batches an epoch holds."""
    rows = [f"r{k}" for k in range(8)]
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]), pipeline=theirs)
    result = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]), pipeline=mine), reference)
    assert result.status == status, result.message
    assert says in result.message


def test_epochs_of_runs_not_fed_the_same_batches_are_not_compared(tmp_path):
    """Where the runs' first steps were not fed the same examples (data the harness could not
    hold equal), their epochs need not hold as many batches: inconclusive, not different."""
    rows = [f"r{k}" for k in range(8)]
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]), pipeline={"trained": {"site": "o.py:3", "batches": 16}})
    other = [f"x{k}" for k in range(8)]
    migrated = _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds([other[:4], other[4:]]), pipeline={"trained": {"site": "m.py:3", "batches": 5}})
    result = _judge(tmp_path, migrated, reference)
    assert result.status == "inconclusive", result.message
    assert "makes 5 steps" not in result.message


def _loops(*counts, fit=False):
    """A run's loops record: ("range", n) or ("other",) outermost first."""
    return {"loops": {"fit": fit, "loops": [
        {"site": f"s.py:{10 + i}", "kind": c[0], "length": c[1] if c[0] == "range" else None} for i, c in enumerate(counts)
    ]}}


@pytest.mark.parametrize(
    ("mine", "theirs", "status", "says"),
    [
        # an epochs loop around a loop over data runs as often as the original's
        (_loops(("range", 3), ("other",)), _loops(("range", 3), ("other",)), "equivalent", ""),
        (_loops(("range", 2), ("other",)), _loops(("range", 3), ("other",)), "different",
         "the loop at s.py:10 runs 2 times in the migration, where the original's (at s.py:10) runs 3"),
        # an innermost loop of steps may keep the original's or divide them by the replicas
        (_loops(("range", 2), ("range", 16)), _loops(("range", 2), ("range", 32)), "equivalent", ""),
        (_loops(("range", 2), ("range", 32)), _loops(("range", 2), ("range", 32)), "equivalent", ""),
        (_loops(("range", 2), ("range", 17)), _loops(("range", 2), ("range", 33)), "equivalent", ""),
        (_loops(("range", 2), ("range", 8)), _loops(("range", 2), ("range", 32)), "different", "runs 8 times in the migration"),
        # ... but not the epochs around it
        (_loops(("range", 1), ("range", 16)), _loops(("range", 2), ("range", 32)), "different", "runs 1 time in the migration"),
        # a loop around fit counts epochs: as the original's
        (_loops(("range", 2), fit=True), _loops(("range", 4), fit=True), "different", "runs 2 times in the migration"),
        # loops that do not match (another structure, unknown lengths) are not compared
        (_loops(("range", 2)), _loops(("range", 4), ("other",)), "equivalent", ""),
        (_loops(("other",), ("range", 2)), _loops(("range", 4), ("range", 2)), "equivalent", ""),
        ({"loops": None}, _loops(("range", 4)), "equivalent", ""),
    ],
)
def test_the_scripts_own_loops_run_as_often_as_the_originals(tmp_path, mine, theirs, status, says):
    """Every run is capped to the steps compared: a loop of epochs cut short trains the same first
    steps, and shows only in how many times the script's loops would run."""
    rows = [f"r{k}" for k in range(8)]
    reference = _trace(tmp_path / "r.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]), pipeline=theirs)
    result = _judge(tmp_path, _trace(tmp_path / "m.npz", START, STEPS[:1], feeds=_feeds([rows[:4], rows[4:]]), pipeline=mine), reference)
    assert result.status == status, result.message
    assert says in result.message


def test_the_loops_around_a_point_of_the_script_are_read_from_its_source(tmp_path):
    """script_loops reads the for statements around a frame's line, evaluates what a range is
    given in that frame (nothing with side effects), and calls any other loop "other"."""
    from autofix.smoke import script_loops

    script = tmp_path / "train.py"
    script.write_text(
        "import sys\n"
        "from autofix.smoke import script_loops\n"
        "EPOCHS, DATA, BATCH = 3, list(range(100)), 8\n"
        "found = []\n"
        "def step():\n"
        "    found.append(script_loops.around(sys._getframe(1)))\n"
        "class Config:\n"
        "    steps = 5\n"
        "def train(config):\n"
        "    for epoch in range(EPOCHS):\n"
        "        for i, batch in enumerate(range(len(DATA) // BATCH)):\n"
        "            for item in zip(range(2), DATA):\n"
        "                for k in range(config.steps):\n"
        "                    for j in range(DATA.pop()):\n"  # a call with side effects: not evaluated again
        "                        step()\n"
        "                        return\n"
        "train(Config())\n"
    )
    namespace: dict = {"__name__": "train"}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    [loops] = namespace["found"]
    assert [(loop["kind"], loop["length"]) for loop in loops] == [("range", 3), ("range", 12), ("other", None), ("range", 5), ("other", None)]
    assert [loop["site"].rsplit(":", 1)[1] for loop in loops] == ["10", "11", "12", "13", "14"]
    assert len(namespace["DATA"]) == 99  # the script's own pop, once


def _untrained_in_last_step(path, updates):
    """Two models trained in turn (``fit`` of one, then of the other): the first's variable has
    no gradient in the last step (what the harness records: none for a variable not trained)."""
    trace = _trace(path, [[1.0, 2.0], [0.5]], updates, names=["sequential/dense/kernel", "dense_3/kernel"])
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files if key != "g0_3"}
    np.savez(path, **arrays)
    return trace


def test_a_model_no_longer_trained_is_the_same_whatever_rounding_its_own_steps_left(tmp_path):
    """sample-11 of migration part E: one model fitted, then another. In the second fit's step
    the first model's weights stay as they were in both runs; float32's rounding of its own
    steps (within their update) is no difference of the step that does not update it (before:
    a zero update scaled nothing, and the right migration was called different)."""
    first = [[[-0.1, 0.1], [0.0]], [[-0.09, 0.08], [0.0]], [[0.0, 0.0], [0.05]]]
    rounded = [[[-0.1 + 2e-5, 0.1], [0.0]], first[1], first[2]]
    reference = _untrained_in_last_step(tmp_path / "r.npz", first)
    migrated = _untrained_in_last_step(tmp_path / "m.npz", rounded)
    result = verdict.judge_pair(_report(migrated, 2), _report(reference), 2)
    assert result.status == "same", result.message
    # the first model updated again where the original leaves it: different, named
    moved = [*rounded[:2], [[1e-3, 0.0], [0.05]]]
    wrong = verdict.judge_pair(_report(_untrained_in_last_step(tmp_path / "w.npz", moved), 2), _report(reference), 2)
    assert wrong.status == "different", wrong.message
    assert "in step 3, sequential/dense/kernel differs" in wrong.message
