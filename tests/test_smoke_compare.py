"""What `autofix migrate --smoke` needs from the smoke test: custom loops without strategy.run
recorded and capped, notebooks run as one program, and `autofix smoke MIGRATED --compare
ORIGINAL`, which proves a migration by its first update.

The tests marked ``tf`` run two processes: every compare pair of fixtures/smoke/compare in one
(four runs a pair), the single-device loops and the notebook in another. The rest checks the
verdicts, messages, the notebook refusals and the command line on canned data, without
TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math

import pytest
from click.testing import CliRunner
from fixturecases import FIXTURES

from autofix.cli import main
from autofix.smoke import checks, command, compare, notebook, run_many, run_smoke, tolerance
from autofix.smoke.compare import ComparePair, compare_many
from autofix.smoke.report import Check, CompareReport, CompareRun, LoopRecord, Pair, SmokeReport

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

CASES = {
    "fit": ("fit.migrated.py", "fit.py"),
    "loop": ("loop.migrated.py", "loop.py"),
    "loop_seeded": ("loop_seeded.py", "loop.py"),
    "gan": ("gan.migrated.py", "gan.py"),
    "train_step": ("train_step.migrated.py", "train_step.py"),
    "shared_loss": ("shared_loss.migrated.py", "shared_loss.py"),
    "loop_wrong_mean": ("loop.wrong_mean.py", "loop.py"),
    "loop_wrong_batch": ("loop.wrong_batch.py", "loop.py"),
    "train_step_wrong_mean": ("train_step.wrong_mean.py", "train_step.py"),
    "removed_api": ("removed_api.migrated.py", "removed_api.py"),
}


@pytest.fixture(scope="module")
def compared():
    pairs = [ComparePair(str(PAIRS / migrated), str(PAIRS / original)) for migrated, original in CASES.values()]
    return dict(zip(CASES, compare_many(pairs, replicas=2, steps=1, offline=True)))


@tf_test
@pytest.mark.parametrize("name", ["fit", "loop", "loop_seeded", "gan", "train_step", "shared_loss"])
def test_a_correct_migration_makes_the_same_first_update(compared, name):
    report = compared[name]
    result = report.compare
    assert result.status == "equivalent" and result.exit_code == 0 and report.exit_code == 0, result.message
    assert report.ok and report.replicas == 2
    (on_n, on_one) = result.pairs
    assert (on_n.replicas, on_n.batch_scale, on_n.status) == (2, 2, "same")
    assert (on_one.replicas, on_one.batch_scale, on_one.status) == (1, 1, "same")
    assert on_n.variables >= 4 and on_n.max_relative < tolerance.RELATIVE
    # One replica is the original's own computation: the same numbers.
    assert on_one.max_relative == 0.0
    # The original at B and at 2 x B, the migrated script on 2 replicas (global 2 x B) and on 1.
    assert [(r.role, r.replicas, r.batch_scale, r.global_batch) for r in result.runs] == [
        ("original", 1, 1, 16),
        ("original", 1, 2, 32),
        ("migrated", 2, 1, 32),
        ("migrated", 1, 1, 16),
    ]


@tf_test
def test_what_is_held_equal_is_noted_and_initial_weights_are_set_only_when_needed(compared):
    fit = compared["fit"]
    assert "compare: Dataset.shuffle turned off" in fit.notes and "compare: Dropout run as in inference" in fit.notes
    assert fit.fits[0].all_mirrored and fit.fits[0].replicas == 2
    assert {r.transplanted for r in fit.compare.runs if r.role == "migrated"} == {"not needed: the same initial weights"}
    # The migrated script seeds itself with another seed: its weights are set to the original's.
    seeded = compared["loop_seeded"].compare
    assert {r.transplanted for r in seeded.runs if r.role == "migrated"} == {"yes: set to the original's initial weights"}
    # Noise drawn in the step is drawn as one device draws it for the global batch.
    assert "compare: tf.random.normal drawn as one device draws it for the global batch" in compared["gan"].notes
    assert "compare: keras.random.normal drawn as one device draws it for the global batch" in compared["train_step"].notes


@tf_test
@pytest.mark.parametrize("name", ["loop_wrong_mean", "train_step_wrong_mean"])
def test_a_loss_averaged_per_replica_fails_and_names_the_update(compared, name):
    result = compared[name].compare
    assert result.status == "different" and result.exit_code == 1 and compared[name].exit_code == 1
    on_n, on_one = result.pairs
    assert on_n.status == "different" and on_one.status == "same"
    # The gradients summed over the replicas are twice the original's, whatever the optimizer.
    assert on_n.first_difference["kind"] == "gradient" and math.isclose(on_n.first_difference["ratio"], 2.0, rel_tol=0.01)
    assert result.message.startswith("after one step on 2 replicas, the gradient of ")
    assert "differs from the original at 2 x its batch on one device: it is 2.00 x the original's" in result.message
    assert "(2 x: is the loss averaged per replica, not over the global batch?)" in result.message


@tf_test
def test_an_unscaled_batch_fails_with_the_batch(compared):
    result = compared["loop_wrong_batch"].compare
    assert result.status == "different"
    assert result.message == (
        "the migrated script trains on a global batch of 16 on 2 replicas, the original on 16: "
        "the global batch must be 2 x 16 = 32 (the original's batch per replica)"
    )


@tf_test
def test_an_original_that_fails_on_current_keras_is_not_a_failure_of_the_migration(compared):
    report = compared["removed_api"]
    result = report.compare
    assert result.status == "original-fails" and result.exit_code == 2 and report.exit_code == 2
    assert result.message.startswith(
        "the original fails too: the script crashed at removed_api.py:13: ValueError: Argument(s) not recognized: {'lr': 0.01}"
    )
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


def _snapshot(path, weights, initial, optimizer=(), names=None, gradients=None):
    np = pytest.importorskip("numpy")
    arrays, index = {}, []
    names = names or [f"dense/w{k}" for k in range(len(weights))]
    for k, (after, before) in enumerate(zip(weights, initial)):
        arrays[f"w{k}"], arrays[f"i{k}"], arrays[f"n{k}"] = np.asarray(after, "float32"), np.asarray(before, "float32"), np.array(names[k])
        if gradients is not None:
            arrays[f"g{k}"] = np.asarray(gradients[k], "float32")
        index.append({"key": f"w{k}", "kind": "weight", "name": names[k], "shape": list(np.shape(after)), "initial": True})
    for k, value in enumerate(optimizer):
        arrays[f"o{k}"] = np.asarray(value, "float32")
        index.append({"key": f"o{k}", "kind": "optimizer", "name": f"Adam/m{k}", "shape": list(np.shape(value))})
    np.savez(path, **arrays)
    return {"file": str(path), "variables": index, "optimizers": ["Adam"], "transplanted": None}


def _smoke(first_update, batch, replicas=1, **changes) -> SmokeReport:
    loop = LoopRecord(site="t.py:5", name="step", steps=1, global_batch=batch)
    base = SmokeReport(script="t.py", ok=True, status="step-limit", replicas=replicas, steps=1, loops=(loop,), first_update=first_update,
                       checks=(Check("finished", True, "stopped cleanly at the step cap"), Check("trained", True, "trained 1 step")))
    return dataclasses.replace(base, **changes)


def test_judge_compares_updates_within_the_tolerance_and_names_a_difference(tmp_path):
    start = [[1.0, 2.0], [0.5]]
    original = _snapshot(tmp_path / "o.npz", [[0.9, 2.1], [0.4]], start, optimizer=[[0.01, -0.01]])
    close = _snapshot(tmp_path / "c.npz", [[0.9 + 1e-6, 2.1], [0.4]], start, optimizer=[[0.01, -0.01]])
    double = _snapshot(tmp_path / "d.npz", [[0.8, 2.2], [0.3]], start, optimizer=[[0.02, -0.02]])
    o1, on = _smoke(original, 8), _smoke(original, 16)
    same = compare.judge("o.py", o1, on, _smoke(close, 16, replicas=2), _smoke(close, 8), 2)
    assert same.status == "equivalent" and [p.status for p in same.pairs] == ["same", "same"] and same.pairs[0].variables == 3
    wrong = compare.judge("o.py", o1, on, _smoke(double, 16, replicas=2), _smoke(original, 8), 2)
    assert wrong.status == "different" and wrong.exit_code == 1
    assert wrong.pairs[0].first_difference["name"] == "dense/w0" and math.isclose(wrong.pairs[0].first_difference["ratio"], 2.0, rel_tol=1e-5)
    assert "the update is 2.00 x the original's (2 x: is the loss averaged per replica, not over the global batch?)" in wrong.message
    moved = _snapshot(tmp_path / "m.npz", [[0.9, 2.1], [0.4]], [[1.5, 2.0], [0.5]])
    start_differs = compare.judge("o.py", o1, on, _smoke(moved, 16, replicas=2), _smoke(original, 8), 2)
    assert start_differs.status == "inconclusive" and "the runs start from different weights (dense/w0)" in start_differs.message
    renamed = _snapshot(tmp_path / "r.npz", [[0.9, 2.1]], [[1.0, 2.0]])
    fewer = compare.judge("o.py", o1, on, _smoke(renamed, 16, replicas=2), _smoke(original, 8), 2)
    assert fewer.status == "inconclusive" and "the trainable variables updated differ from the original's (1 against 2" in fewer.message
    unscaled = compare.judge("o.py", o1, on, _smoke(close, 8, replicas=2), _smoke(close, 8), 2)
    assert unscaled.status == "different" and unscaled.message.startswith("the migrated script trains on a global batch of 8 on 2 replicas")


def test_the_largest_difference_shown_leaves_out_values_the_same_only_by_the_absolute_floor(tmp_path):
    """Adam's second moment of a rounding-level gradient is near 0: its relative difference is
    huge and says nothing (it passes by the absolute floor); "within" shows the others'."""
    start = [[1.0, 2.0]]
    original = _snapshot(tmp_path / "o.npz", [[0.9, 2.1]], start, optimizer=[[0.01, -0.01], [1e-12, 0.0]])
    close = _snapshot(tmp_path / "c.npz", [[0.9 + 1e-6, 2.1]], start, optimizer=[[0.01, -0.01], [3e-12, 1e-12]])
    verdict = compare.judge("o.py", _smoke(original, 8), _smoke(original, 16), _smoke(close, 16, replicas=2), _smoke(original, 8), 2)
    assert verdict.status == "equivalent"
    assert 0 < verdict.pairs[0].max_relative < 1e-4 and "within 7e-06" in verdict.pairs[0].message


def test_an_update_apart_in_direction_only_with_every_gradient_the_originals_is_inconclusive(tmp_path):
    """Adam's first update is about lr for any gradient well above eps: the rounding of equal
    gradients can turn an element's update around (here one of 1000). That proves nothing
    either way; a gradient that differs anywhere, or an update of another size, still does."""
    np = pytest.importorskip("numpy")
    start = [np.ones(1000), [0.5]]
    grads = [np.full(1000, 0.1), [0.3]]
    step = np.full(1000, -0.01)
    turned_step = step.copy()
    turned_step[0] = 0.01
    original = _snapshot(tmp_path / "o.npz", [start[0] + step, [0.4]], start, gradients=grads)
    turned = _snapshot(tmp_path / "t.npz", [start[0] + turned_step, [0.4]], start, gradients=grads)
    o1, on = _smoke(original, 8), _smoke(original, 16)
    amplified = compare.judge("o.py", o1, on, _smoke(turned, 16, replicas=2), _smoke(original, 8), 2)
    assert amplified.status == "inconclusive" and "every gradient is the original's" in amplified.message
    later_gradient = _snapshot(tmp_path / "l.npz", [start[0] + turned_step, [0.4]], start, gradients=[grads[0], [0.6]])
    doubled = compare.judge("o.py", o1, on, _smoke(later_gradient, 16, replicas=2), _smoke(original, 8), 2)
    assert doubled.status == "different" and doubled.pairs[0].first_difference["kind"] == "gradient"
    larger = _snapshot(tmp_path / "x.npz", [start[0] + 2 * step, [0.4]], start, gradients=grads)
    assert compare.judge("o.py", o1, on, _smoke(larger, 16, replicas=2), _smoke(original, 8), 2).status == "different"
    without = _snapshot(tmp_path / "w.npz", [start[0] + step, [0.4]], start)
    unknown = _snapshot(tmp_path / "u.npz", [start[0] + turned_step, [0.4]], start)
    no_gradients = compare.judge("o.py", _smoke(without, 8), _smoke(without, 16), _smoke(unknown, 16, replicas=2), _smoke(without, 8), 2)
    assert no_gradients.status == "different"


def test_a_gradient_apart_in_direction_only_through_synchronized_batch_normalization_is_inconclusive(tmp_path):
    """ResNet50's 53 synchronized BatchNormalization layers leave the first convolution's
    gradient 6.5% apart in direction, its norm the same (measured): inconclusive. A norm apart
    (a loss averaged per replica) is still a difference."""
    np = pytest.importorskip("numpy")
    start = [np.ones(1000)]
    grads = np.full(1000, 0.1)
    turned = grads.copy()
    turned[:2] = -0.1  # 9% apart in direction, the same norm
    original = _snapshot(tmp_path / "o.npz", [start[0] - grads], start, gradients=[grads])
    migrated = _snapshot(tmp_path / "m.npz", [start[0] - turned], start, gradients=[turned])
    held = {**migrated, "held": ["BatchNormalization"]}
    o1, on = _smoke(original, 8), _smoke(original, 16)
    apart = compare.judge("o.py", o1, on, _smoke(held, 16, replicas=2), _smoke(original, 8), 2)
    assert apart.status == "inconclusive" and "BatchNormalization" in apart.message
    assert compare.judge("o.py", o1, on, _smoke(migrated, 16, replicas=2), _smoke(original, 8), 2).status == "different"
    doubled = _snapshot(tmp_path / "d.npz", [start[0] - 2 * grads], start, gradients=[2 * grads])
    assert compare.judge("o.py", o1, on, _smoke({**doubled, "held": ["BatchNormalization"]}, 16, replicas=2), _smoke(original, 8), 2).status == "different"


@tf_test
def test_a_float64_comparison_runs_in_float64_and_leaves_the_next_script_in_float32(tmp_path):
    """The runs of a float64 comparison make their variables, data, draws and filled tensors in
    float64 (a GAN's `concat([generated, real])` and `labels + noise` run), prove a correct
    migration far inside the tolerance and still show a loss averaged per replica; a script run
    after them is float32 again (Keras keeps the policy it made at first use)."""
    np = pytest.importorskip("numpy")
    gan = compare._jobs(ComparePair(str(PAIRS / "gan_fit.migrated.py"), str(PAIRS / "gan_fit.py")), 2, str(tmp_path / "gan"), "float64")
    wrong = compare._jobs(ComparePair(str(PAIRS / "loop.wrong_mean.py"), str(PAIRS / "loop.py")), 2, str(tmp_path / "wrong"), "float64")
    after = compare._jobs(ComparePair(str(PAIRS / "loop.migrated.py"), str(PAIRS / "loop.py")), 2, str(tmp_path / "after"))[:1]
    reports = run_many([*gan, *wrong, *after], replicas=2, steps=1, offline=True)
    proven = compare.judge("gan_fit.py", *reports[0:4], 2)
    assert proven.status == "equivalent" and all(p.max_relative < 1e-9 for p in proven.pairs), proven.message
    for held in ("compare: keras's float type set to float64", "compare: float32 data given as float64", "compare: tf.ones made as float64"):
        assert held in reports[2].notes
    differs = compare.judge("loop.py", *reports[4:8], 2)
    assert differs.status == "different" and math.isclose(differs.pairs[0].first_difference["ratio"], 2.0, rel_tol=1e-6)
    for job, report in zip([*gan, *wrong, *after], reports):
        with np.load(job.first_update.snapshot) as data:
            assert data["i0"].dtype == (np.float64 if job.first_update.floatx else np.float32), job.first_update.snapshot
    assert not any("float type" in note for note in reports[8].notes)


def _rounding_runs(tmp_path, float64_outcome):
    """A fake ``run_many`` for ``compare_many``: in float32, the migrated update turned around
    in one element of 1000 with every gradient the original's (Adam's rounding); in float64,
    ``float64_outcome``: ``same``, ``turned`` (the same again) or ``crashed``."""
    np = pytest.importorskip("numpy")
    start = [np.ones(1000)]
    grads = [np.full(1000, 0.1)]
    step = np.full(1000, -0.01)
    turned_step = step.copy()
    turned_step[0] = 0.01
    original = _snapshot(tmp_path / "o.npz", [start[0] + step], start, gradients=grads)
    turned = _snapshot(tmp_path / "t.npz", [start[0] + turned_step], start, gradients=grads)
    calls = []

    def run_many(jobs, **settings):
        floatx = jobs[0].first_update.floatx
        calls.append((floatx, len(jobs)))
        reports = []
        for job in jobs:
            migrated_n = job.replicas == 2
            if floatx == "float64" and float64_outcome == "crashed":
                failed = Check("finished", False, "the script crashed at t.py:3: TypeError: float64 and float32")
                reports.append(_smoke(None, 8, replicas=job.replicas or 1, status="crashed", ok=False, checks=(failed,)))
                continue
            use_turned = migrated_n and (floatx is None or float64_outcome == "turned")
            batch = 16 if (migrated_n or job.first_update.batch_scale == 2) else 8
            reports.append(_smoke(turned if use_turned else original, batch, replicas=job.replicas or 1))
        return reports

    return run_many, calls


@pytest.mark.parametrize(
    ("float64_outcome", "status", "floatx"),
    [("same", "equivalent", "float64"), ("turned", "inconclusive", "float32"), ("crashed", "inconclusive", "float32")],
)
def test_rounding_that_leaves_a_comparison_inconclusive_is_compared_again_in_float64(monkeypatch, tmp_path, float64_outcome, status, floatx):
    """Only a comparison left inconclusive by float32's rounding is run again, in float64: a proof
    there is the verdict; anything else there leaves the float32 verdict, with what float64 said."""
    fake, calls = _rounding_runs(tmp_path, float64_outcome)
    monkeypatch.setattr(compare, "run_many", fake)
    report = compare_many([ComparePair("m.py", "o.py")], replicas=2, steps=1, offline=True)[0]
    assert calls == [(None, 4), ("float64", 4)]
    assert (report.compare.status, report.compare.floatx) == (status, floatx)
    if status == "equivalent":
        assert report.compare.message.startswith(
            "in float64 (in float32, dense/w0 6.3% apart: float32's rounding, magnified by the optimizer's first update): on 2 replicas: the same first update"
        ), report.compare.message
        assert not report.compare.rounding
    else:
        assert "every gradient is the original's" in report.compare.message
        assert f"; in float64: {'inconclusive' if float64_outcome == 'turned' else 'original-fails'}: " in report.compare.message


def test_a_comparison_that_differs_or_is_proven_in_float32_is_not_run_again(monkeypatch, tmp_path):
    np = pytest.importorskip("numpy")
    start = [np.ones(4)]
    original = _snapshot(tmp_path / "o.npz", [start[0] - 0.1], start, gradients=[np.full(4, 0.1)])
    doubled = _snapshot(tmp_path / "d.npz", [start[0] - 0.2], start, gradients=[np.full(4, 0.2)])
    calls = []

    def run_many(jobs, **settings):
        calls.append(jobs[0].first_update.floatx)
        return [_smoke(doubled if (job.replicas == 2 and "wrong" in job.script) else original, 16 if (job.replicas == 2 or job.first_update.batch_scale == 2) else 8, replicas=job.replicas or 1) for job in jobs]

    monkeypatch.setattr(compare, "run_many", run_many)
    reports = compare_many([ComparePair("right.py", "o.py"), ComparePair("wrong.py", "o.py")], replicas=2, steps=1, offline=True)
    assert [r.compare.status for r in reports] == ["equivalent", "different"] and calls == [None]


def test_judge_tells_an_original_that_fails_from_a_migration_that_fails(tmp_path):
    original = _snapshot(tmp_path / "o.npz", [[0.9]], [[1.0]])
    crashed = _smoke(None, None, status="crashed", loops=(), checks=(Check("finished", False, "the script crashed at o.py:3: AttributeError: 'Mean' object has no attribute 'reset_states'"),))
    both = compare.judge("o.py", crashed, crashed, dataclasses.replace(crashed, replicas=2), crashed, 2)
    assert both.status == "original-fails" and both.exit_code == 2
    assert both.message.startswith("the original fails too: the script crashed at o.py:3: AttributeError: 'Mean' object has no attribute 'reset_states'")
    fine = _smoke(original, 8)
    alone = compare.judge("o.py", fine, _smoke(original, 16), dataclasses.replace(crashed, replicas=2), crashed, 2)
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
