"""The fixes, run: every broken fixture and its fix train under a real MirroredStrategy on two
logical CPU devices (through the smoke harness), on Keras 3 and on Keras 2.

What makes these tests honest is the pair: the check that the fixed script passes must fail
on the broken one. Scripts share TensorFlow processes (``run_many``), one per group below.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import announce
from fixturecases import FIXTURES, cases
from keras2 import to_keras2

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None,
        reason="TensorFlow is not installed (pip install -e '.[smoke]')",
    ),
]

# Fixtures that cannot run here, and why: they are checked statically only.
NOT_RUNNABLE = {
    "tfd001/imported_factory": "imports a models package that is not part of the fixture",
    "tfd001/pretrained_encoder_passed_in": "downloads a pretrained transformer (transformers is not installed here)",
    "tfd001/strategy_kinds": "TPU, multi-worker and central-storage strategies need hardware or a cluster",
    "tfd001/strategy_known_by_use": "imports its strategy from a module that is not part of the fixture",
    "tfd001/strategy_parameter_of_an_entry_point": "a library function: nothing in the file calls it",
    "tfd002/imported_helper_keyword": "imports a data package that is not part of the fixture",
    "tfd002/loader_default": "reads an image folder that does not exist",
    "tfd002/default_beside_written_batch": "loads arrays from .npy files that do not exist, and keeps one fit at Keras's default (global) batch on purpose",
    "tfd002/other_model_keeps_batch": "trains a baseline on one device on purpose, which the smoke test counts as a failure",
    "tfd002/twin_fit_at_another_batch": "trains a model on one device on purpose, which the smoke test counts as a failure",
    "tfd001/trainer_optional_strategy": "trains a baseline on one device on purpose (tests/test_optional_strategy.py runs it on both paths)",
    "tfd002/optional_strategy_parameter": "trains a baseline on one device on purpose (tests/test_optional_strategy.py runs it on both paths)",
    "tfd003/trainer_optional_strategy": "trains a baseline on one device on purpose (tests/test_optional_strategy.py runs it on both paths)",
    "tfd001/adapted_layer_keras2": "tf_keras only: Keras 3 trains the broken script too (tests/test_preprocessing_at_runtime.py runs it on tf_keras)",
    "tfd001/multi_gpu_model_template_also_trained": "calls Keras 2's multi_gpu_model, which TensorFlow 2.21 does not have",
    "tfd002/multi_gpu_model_other_model_batch": "calls Keras 2's multi_gpu_model, which TensorFlow 2.21 does not have",
}
# Broken on Keras 2 only: Keras 3 trains the broken script too (its fix is checked on both, its
# failure before the fix on Keras 2).
KERAS2_ONLY = {
    "tfd001/compile_metric_made_outside_scope": "a metric made outside the scope and given to compile: tf_keras raises ValueError, Keras 3 trains (docs/keras-versions.md)",
    "tfd001/metric_listed_in_a_name": "the same metric, listed in a name compile is given",
}
# Fixed TFD001 pairs that train on Keras 2 but then fail there for a reason of tf_keras's own,
# which the broken copy never reaches: (why, the failure the fixed copy must end with).
KERAS2_AFTER_TRAINING = {
    "tfd001/weights_restored_into_a_model_made_outside": (
        "tf_keras 2.21 cannot load a .weights.h5 file into a model whose variables a strategy mirrors "
        "(values_util.on_read_assign_cross_replica divides the h5py Dataset it is handed)",
        "TypeError: unsupported operand type(s) for /: 'Dataset' and 'int'",
    ),
}
# Fixed for Keras 3 files only: on Keras 2 what the fix leaves alone fails as it did.
KERAS3_ONLY = {
    "tfd004/loss_object_in_self_shared_with_test_step": (
        "test_step keeps the default-reduction loss object, which Keras 2 rejects under a strategy",
        "loss_object_in_self_shared_with_test_step.fixed.py:37: ValueError",
    ),
}
REPLICAS = 2


def pairs(rule: str) -> list:
    return [c for c in cases(rule) if c.after is not None and c.id not in NOT_RUNNABLE]


@lru_cache(maxsize=None)
def _batch(paths: tuple[str, ...], steps: int, legacy_keras: bool = False) -> dict:
    from autofix.smoke import run_many

    announce(f"training {len(paths)} script{'s' if len(paths) != 1 else ''} in one TensorFlow process, Keras {2 if legacy_keras else 3}")
    reports = run_many(list(paths), replicas=REPLICAS, steps=steps, timeout=180, legacy_keras=legacy_keras)
    return dict(zip(paths, reports))


def _keras3_reports() -> dict:
    """One TensorFlow process for every fit-based pair (two steps per fit)."""
    paths = []
    for rule in ("tfd001", "tfd002", "tfd003"):
        for case in pairs(rule):
            paths += [str(case.before), str(case.after)]
    return _batch(tuple(paths), steps=2)


def report(path: Path):
    return _keras3_reports()[str(path)]


# --- TFD001: variables are mirrored once the fix is applied ------------------------------------


@pytest.mark.parametrize("case", pairs("tfd001"), ids=lambda c: c.id)
def test_tfd001_fixed_script_trains_mirrored_on_every_replica(case):
    fixed, broken = report(case.after), report(case.before)
    assert fixed.ok, fixed.failures
    assert fixed.fits, "the fixed script must train"
    for fit in fixed.fits:
        assert fit.replicas == REPLICAS
        assert fit.all_mirrored, fit.unmirrored
    if case.id in KERAS2_ONLY:
        return  # the broken script fails on Keras 2 only (test_tfd001_fixes_also_work_on_keras2)
    # The same check fails before the fix.
    assert not broken.ok
    assert any(not fit.all_mirrored or fit.replicas != REPLICAS for fit in broken.fits) or broken.status == "crashed"


# --- TFD002: each replica gets the per-replica batch, derived values follow --------------------


@pytest.mark.parametrize("case", pairs("tfd002"), ids=lambda c: c.id)
def test_tfd002_batch_is_per_replica_times_replicas(case):
    fixed, broken = report(case.after), report(case.before)
    assert fixed.ok, fixed.failures
    observed_fixed = [f.global_batch for f in fixed.fits] + [r.global_batch for r in fixed.runs if r.global_batch]
    observed_broken = [f.global_batch for f in broken.fits] + [r.global_batch for r in broken.runs if r.global_batch]
    assert observed_fixed and len(observed_fixed) == len(observed_broken)
    assert observed_fixed == [REPLICAS * b for b in observed_broken]
    chosen = _literal_steps(case.before)
    for before, after in zip(broken.fits, fixed.fits):
        steps = (before.user_args or {}).get("steps_per_epoch")
        if steps is None:
            continue
        if steps in chosen:
            # A number of steps the script wrote as a number is the user's choice: it stays.
            assert (after.user_args or {}).get("steps_per_epoch") == steps
        else:
            # steps_per_epoch = N // BATCH_SIZE now uses the global batch.
            assert (after.user_args or {}).get("steps_per_epoch") == steps // REPLICAS


def _literal_steps(path: Path) -> set:
    """The steps_per_epoch values a script passes as integer literals."""
    return {
        kw.value.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "steps_per_epoch" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int)
    }


# --- TFD003: the generated step trains on both replicas, and agrees with fit --------------------


@pytest.mark.parametrize("case", pairs("tfd003"), ids=lambda c: c.id)
def test_tfd003_generated_step_runs_on_every_replica(case):
    fixed, broken = report(case.after), report(case.before)
    assert fixed.ok, fixed.failures
    assert fixed.runs and all(r.num_replicas == REPLICAS and r.replicas_observed for r in fixed.runs)
    assert all(math.isfinite(loss) for r in fixed.runs for loss in r.losses)
    if "model" in case.name:
        assert not broken.ok
        assert any(r.given in ("model", "layer") for r in broken.runs)


@pytest.mark.parametrize("legacy_keras", [False, True], ids=["keras3", "keras2"])
def test_tfd003_step_loss_matches_fit_on_the_same_batch_and_weights(legacy_keras):
    script = FIXTURES / "tfd003" / "run_model_compare.fixed.py"
    result = _batch((str(script),), steps=3, legacy_keras=legacy_keras)[str(script)]
    assert result.ok, result.failures
    (run,) = result.runs
    (fit,) = result.fits
    assert run.given == "tf.function" and run.num_replicas == REPLICAS
    assert len(run.losses) == 1 and len(fit.losses) == 1
    assert run.losses[0] == pytest.approx(fit.losses[0], rel=1e-5)


def _handed_pairs() -> list:
    return [c for c in pairs("tfd003") if c.name.startswith("step_result_")]


@pytest.mark.parametrize("case", _handed_pairs(), ids=lambda c: c.id)
def test_tfd003_step_handed_itself_runs_on_every_replica(case):
    """``strategy.run(step(batch))`` calls the step outside the replicas, where a distributed
    batch cannot be computed with (the PerReplica value fails to convert); the fix,
    ``strategy.run(step, args=(batch,))``, runs the step on both replicas. These pairs alone, in
    a process of their own."""
    paths = tuple(str(p) for c in _handed_pairs() for p in (c.before, c.after))
    reports = _batch(paths, steps=2)
    broken, fixed = reports[str(case.before)], reports[str(case.after)]
    assert broken.status == "crashed" and "PerReplica" in " ".join(broken.failures)
    assert fixed.ok, fixed.failures
    assert fixed.runs and all(r.num_replicas == REPLICAS and r.replicas_observed for r in fixed.runs)
    assert all(math.isfinite(loss) for r in fixed.runs for loss in r.losses)


# --- TFD004: the loss is finite and falls ---------------------------------------------------------


def _loop_reports(legacy_keras: bool) -> dict:
    """The TFD004 pairs, six steps each; on Keras 2 in their tf_keras spelling (``import
    keras`` stays Keras 3 even with TF_USE_LEGACY_KERAS=1), keyed by the fixture's path."""
    if not legacy_keras:
        paths = tuple(str(p) for c in pairs("tfd004") for p in (c.before, c.after))
        return _batch(paths, steps=6)
    copies = _respelled("tfd004")
    reports = _batch(tuple(p for _, b, a in copies for p in (b, a)), steps=6, legacy_keras=True)
    by_fixture = {}
    for case_id, broken, fixed in copies:
        case = next(c for c in pairs("tfd004") if c.id == case_id)
        by_fixture[str(case.before)], by_fixture[str(case.after)] = reports[broken], reports[fixed]
    return by_fixture


@pytest.mark.parametrize("case", pairs("tfd004"), ids=lambda c: c.id)
def test_tfd004_fixed_step_runs_everywhere_and_learns(case):
    fixed = _loop_reports(False)[str(case.after)]
    assert fixed.ok, fixed.failures
    if fixed.runs:
        # Every strategy.run on every replica; the loss is what the step that returns one
        # gives back (a step that only applies gradients returned by another returns none).
        assert all(r.num_replicas == REPLICAS and r.replicas_observed for r in fixed.runs)
        (run,) = [r for r in fixed.runs if r.losses] or fixed.runs
        losses = run.losses
    else:  # a model's own train_step, which fit runs on every replica
        (fit,) = fixed.fits
        assert fit.replicas == REPLICAS and fit.all_mirrored
        losses = fit.losses
    assert len(losses) >= 4 and all(math.isfinite(loss) for loss in losses)
    assert losses[-1] < losses[0]


def test_tfd004_dividing_by_the_replica_count_again_halves_the_loss_on_keras3():
    """The measured Keras >= 3.8 behaviour the rule exists for: the broken step's loss is the
    fixed step's divided once more by the number of replicas."""
    reports = _loop_reports(False)
    broken = reports[str(FIXTURES / "tfd004" / "divided_twice.py")].runs[0].losses[0]
    fixed = reports[str(FIXTURES / "tfd004" / "divided_twice.fixed.py")].runs[0].losses[0]
    assert broken == pytest.approx(fixed / REPLICAS, rel=1e-4)


def _first_losses(name: str) -> tuple[float, float]:
    """The first loss of the broken fixture and of its fix, on Keras 3 (same seed, same weights)."""
    reports = _loop_reports(False)
    broken = reports[str(FIXTURES / "tfd004" / f"{name}.py")].runs[0].losses[0]
    fixed = reports[str(FIXTURES / "tfd004" / f"{name}.fixed.py")].runs[0].losses[0]
    return broken, fixed


def test_tfd004_per_token_default_loss_keeps_its_keras3_value():
    """Reproducer tfd004_per_token_loss_multiplied: a (batch, T) loss from a default-reduction
    loss object is already each replica's share on Keras 3; the fix must keep that value, not
    make it T times larger (compute_average_loss sums over T)."""
    broken, fixed = _first_losses("per_token_default")
    assert fixed == pytest.approx(broken, rel=1e-4)


def test_tfd004_per_token_mean_is_divided_by_the_replicas_only():
    broken, fixed = _first_losses("per_token_mean")
    assert fixed == pytest.approx(broken / REPLICAS, rel=1e-4)


def test_tfd004_regularization_is_scaled_with_the_data_term():
    """Reproducer tfd004_regularization_left_unscaled: every replica adds model.losses; the fix
    divides both terms by the replica count (the data term alone would not halve the sum)."""
    broken, fixed = _first_losses("regularization")
    assert fixed == pytest.approx(broken / REPLICAS, rel=1e-4)


@pytest.mark.parametrize("case", pairs("tfd004"), ids=lambda c: c.id)
def test_tfd004_fixed_step_also_runs_on_keras2(case):
    reports = _loop_reports(True)
    fixed = reports[str(case.after)]
    if case.id in KERAS3_ONLY:
        # The step trained; evaluation, which the fix leaves as it was, is what Keras 2 rejects.
        assert not fixed.ok and KERAS3_ONLY[case.id][1] in fixed.failures[0], fixed.failures
        return
    assert fixed.ok, fixed.failures
    assert all(math.isfinite(loss) for r in fixed.runs for loss in r.losses)


def test_keras2_rejects_the_default_reduction_loss_that_tfd004_fixes():
    broken = _loop_reports(True)[str(FIXTURES / "tfd004" / "default_reduction.py")]
    assert not broken.ok
    assert "reduction" in " ".join(broken.failures).lower()


# --- Keras 2 spelling of the TFD001 fixtures ------------------------------------------------------


@lru_cache(maxsize=None)
def _respelled(rule: str) -> tuple[tuple[str, str, str], ...]:
    """(case id, broken copy, fixed copy) of a rule's pairs respelled for tf_keras."""
    folder = Path(tempfile.mkdtemp(prefix=f"autofix-keras2-{rule}-"))
    out = []
    for case in pairs(rule):
        before, after = to_keras2(case.before.read_text()), to_keras2(case.after.read_text())
        if before is None or after is None:
            continue
        b, a = folder / f"{case.name}.py", folder / f"{case.name}.fixed.py"
        b.write_text(before)
        a.write_text(after)
        out.append((case.id, str(b), str(a)))
    return tuple(out)


@pytest.fixture(scope="module")
def keras2_reports():
    copies = _respelled("tfd001")
    yield copies, _batch(tuple(p for _, b, a in copies for p in (b, a)), steps=2, legacy_keras=True)
    for _, broken, _fixed in copies:
        shutil.rmtree(Path(broken).parent, ignore_errors=True)
        break


def test_tfd001_fixes_also_work_on_keras2(keras2_reports):
    copies, reports = keras2_reports
    assert len(copies) >= 10
    from autofix.engine import Options, analyse

    for case_id, broken_path, fixed_path in copies:
        fixed, broken = reports[fixed_path], reports[broken_path]
        if case_id in KERAS2_AFTER_TRAINING:
            # Trained mirrored on every replica, then stopped by tf_keras where the broken copy
            # never gets (it fails at compile, as TFD001 says).
            assert not fixed.ok and KERAS2_AFTER_TRAINING[case_id][1] in fixed.failures[0], (case_id, fixed.failures)
            assert fixed.fits and all(f.replicas == REPLICAS and f.all_mirrored for f in fixed.fits), case_id
            assert not broken.ok, case_id
            continue
        assert fixed.ok, (case_id, fixed.failures)
        assert fixed.fits and all(f.replicas == REPLICAS and f.all_mirrored for f in fixed.fits), case_id
        findings = analyse(Path(broken_path).read_text(), Options(select=("TFD001",))).findings
        if not (findings and all("Keras 3 fails" in f.message for f in findings)):
            # (Only an optimizer, or compile's own, outside the scope is what Keras 3 refuses;
            # Keras 2 trains with it, at most with an unmirrored iteration counter.)
            assert not broken.ok, case_id


# --- Multi-worker: the fixes on two worker processes of one MultiWorkerMirroredStrategy ------------
#
# Keras 2 (tf.keras with TF_USE_LEGACY_KERAS=1): Keras 3 cannot fit under MultiWorkerMirroredStrategy.
# strategy_kinds, not runnable as a whole above, has its multi-worker function run here.
# Each script here starts two TensorFlow processes, so only the pairs where the strategy changes
# what the rule is about: the scope (TFD001, the multi-worker function of strategy_kinds), the
# global batch (TFD002) and strategy.run (TFD003).

WORKERS = 2


def _function_as_script(path: Path, name: str) -> str:
    """One function of a fixture, as it is written there, called: strategy_kinds only defines
    functions, and imports a strategy that TensorFlow 2.21 no longer has."""
    text = path.read_text()
    (function,) = [node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef) and node.name == name]
    return f"import tensorflow as tf\n\n\n{ast.get_source_segment(text, function)}\n\n\n{name}()\n"


@lru_cache(maxsize=None)
def _multi_worker_reports() -> dict:
    from autofix.smoke import run_many

    folder = Path(tempfile.mkdtemp(prefix="autofix-multiworker-"))
    jobs = {}
    # The multi-worker function of strategy_kinds, saying it runs on Keras 2: on Keras 3, fit
    # cannot train under this strategy (TFD006), so TFD001 fixes it only for Keras 2.
    from autofix.engine import Options, analyse

    scope = _function_as_script(FIXTURES / "tfd001" / "strategy_kinds.py", "with_multiworker")
    scope = 'import os\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\n' + scope
    scopes = {"broken": scope, "fixed": analyse(scope, Options(select=("TFD001",))).new_text}
    assert scopes["fixed"] is not None
    for kind in ("broken", "fixed"):
        pair = folder / kind
        pair.mkdir()
        suffix = "" if kind == "broken" else ".fixed"
        (pair / "scope.py").write_text(scopes[kind])
        jobs[("tfd001/strategy_kinds", kind)] = pair / "scope.py"
        for case in ("tfd002/fit_batch_size", "tfd003/run_model_test"):
            text = (FIXTURES / f"{case}{suffix}.py").read_text()
            assert "tf.distribute.MirroredStrategy()" in text
            target = pair / f"{case.split('/')[1]}.py"
            target.write_text(text.replace("tf.distribute.MirroredStrategy()", "tf.distribute.MultiWorkerMirroredStrategy()"))
            jobs[(case, kind)] = target
    announce(f"training {len(jobs)} scripts on {WORKERS} worker processes each")
    reports = run_many(list(jobs.values()), workers=WORKERS, replicas=1, steps=2, timeout=180, legacy_keras=True)
    shutil.rmtree(folder, ignore_errors=True)
    return dict(zip(jobs, reports))


def _multi_worker(case: str):
    reports = _multi_worker_reports()
    return reports[(case, "broken")], reports[(case, "fixed")]


def _fixed_trains_on_every_worker(fixed) -> None:
    assert fixed.ok, fixed.failures
    assert fixed.workers.count == WORKERS and fixed.workers.trained == WORKERS and fixed.workers.agree
    assert all(f.replicas == WORKERS and f.all_mirrored for f in fixed.fits if f.steps)


def test_multi_worker_tfd001_scope():
    broken, fixed = _multi_worker("tfd001/strategy_kinds")
    _fixed_trains_on_every_worker(fixed)
    assert fixed.fits[0].strategy == "CollectiveAllReduceStrategy"
    # Before the fix, each worker trains alone, on its own copy of the model: they end apart.
    assert broken.failures[0] == "fit trained on 1 replica: the model was built outside strategy.scope()"
    assert broken.failures[1].startswith("the workers disagree: fit at scope.py:10 ends with different weights")
    assert len(broken.failures) == 2


def test_multi_worker_tfd002_global_batch():
    broken, fixed = _multi_worker("tfd002/fit_batch_size")
    _fixed_trains_on_every_worker(fixed)
    before, after = [f.global_batch for f in broken.fits], [f.global_batch for f in fixed.fits]
    assert after and after == [WORKERS * b for b in before]


def test_multi_worker_tfd003_strategy_run():
    broken, fixed = _multi_worker("tfd003/run_model_test")
    _fixed_trains_on_every_worker(fixed)
    (run,) = fixed.runs
    assert (run.given, run.num_replicas) == ("tf.function", WORKERS)
    assert any(m.startswith("strategy.run was given a model") for m in broken.failures), broken.failures
