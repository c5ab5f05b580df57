"""`autofix smoke --workers N`: the script as N worker processes of one MultiWorkerMirroredStrategy
cluster on loopback ports.

Each cluster run starts two TensorFlow processes (~15 s on two cores), so the tests marked
``tf`` are few: the passing Keras 2 script and its Keras 3 rejection through the command line,
one batch of the other fixtures in fixtures/multiworker (custom loop, saving, sharding, a
crashing worker) and one hanging worker. The rest checks the cross-worker checks, the merged
report and the JSON on canned data, without TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixturecases import FIXTURES

from autofix.cli import main
from autofix.results import FileResult
from autofix.smoke import SmokeReport, before_after, checks, cluster, command, run_many, run_smoke
from autofix.smoke.jobs import Settings, SmokeJob
from autofix.smoke.render import report_view, summary
from autofix.smoke.report import Check
from test_smoke_faults import dead

MULTIWORKER = FIXTURES / "multiworker"
STEPS = 2
needs_tf = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]


def _copy(tmp: Path) -> Path:
    folder = tmp / "multiworker"
    shutil.copytree(MULTIWORKER, folder, ignore=shutil.ignore_patterns("measure", "saved", "pids-*"))
    return folder


def tf_test(test):
    for mark in needs_tf:
        test = mark(test)
    return test


# --- the command line: a correct Keras 2 script, and the same script on Keras 3 ---------------


@tf_test
def test_two_workers_on_keras2_train_in_agreement_and_the_json_says_so(tmp_path):
    folder = _copy(tmp_path)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        main, ["smoke", str(folder / "fit_tf_keras.py"), "--workers", "2", "--legacy-keras", "--steps", str(STEPS), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "workers: 2 of 2 trained, in agreement" in result.stdout and "PASSED" in result.stdout
    data = json.loads(out.read_text())
    workers = data["workers"]
    assert (workers["count"], workers["replicas_per_worker"], workers["trained"], workers["agree"]) == (2, 1, 2, True)
    assert workers["shared_writes"] == []
    each = workers["each"]
    assert [(w["index"], w["chief"], w["status"], w["trained"], w["replicas"], w["steps"]) for w in each] == [
        (0, True, "completed", True, 2, STEPS),
        (1, False, "completed", True, 2, STEPS),
    ]
    assert each[0]["weights"] == each[1]["weights"] and len(each[0]["weights"][0]) == 16
    assert each[0]["losses"] == each[1]["losses"] and len(each[0]["losses"]) == STEPS
    assert each[0]["global_batch"] == each[1]["global_batch"] == 16
    assert len({w["address"] for w in each}) == 2 and all(w["address"].startswith("localhost:") for w in each)
    assert data["replicas"] == 2 and data["fits"][0]["keras"].startswith("tf_keras 2.")
    assert {"name": "workers.agree", "passed": True, "message": f"the workers agree: same losses and final weights ({each[0]['weights'][0]})"} in data["checks"]
    assert SmokeReport.from_dict(data).to_dict() == data


@tf_test
def test_the_same_script_on_keras3_is_rejected_in_one_line(tmp_path):
    folder = _copy(tmp_path)
    result = CliRunner().invoke(main, ["smoke", str(folder / "fit_tf_keras.py"), "--workers", "2", "--steps", str(STEPS)])
    assert result.exit_code == 1, result.output
    failures = [line for line in result.stderr.splitlines() if line.startswith(str(folder / "fit_tf_keras.py"))]
    assert len(failures) == 1, result.stderr
    assert "fit failed: Keras 3 cannot train or evaluate under MultiWorkerMirroredStrategy, a known limitation" in failures[0]
    assert "keras-team/keras#20585, tensorflow/tensorflow#72388" in failures[0] and "TF_USE_LEGACY_KERAS=1" in failures[0]
    # Each failed worker's own output is shown.
    assert "--- worker 0 (crashed) ---" in result.stderr and "--- worker 1 (crashed) ---" in result.stderr


# --- the other fixtures, in one batch --------------------------------------------------------

BATCH = ["custom_loop_keras3.py", "save_every_worker.py", "save_chief_tempdir.py", "shard_off.py", "worker_crashes.py"]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = _copy(tmp_path_factory.mktemp("workers"))
    # `import keras` stays Keras 3 with TF_USE_LEGACY_KERAS=1: the custom loop runs on Keras 3.
    reports = run_many([folder / name for name in BATCH], workers=2, replicas=1, steps=STEPS, legacy_keras=True, timeout=120)
    return dict(zip(BATCH, reports)), folder


@tf_test
def test_a_keras3_custom_loop_trains_in_agreement(batch):
    report = batch[0]["custom_loop_keras3.py"]
    assert report.ok, report.failures
    (run,) = report.runs
    assert (run.given, run.num_replicas, run.steps, run.applies_gradients) == ("function", 2, STEPS, True)
    assert report.workers.trained == 2 and report.workers.agree
    first, second = report.workers.each
    assert first.weights == second.weights and first.losses == second.losses and len(first.losses) == STEPS
    assert summary(report).startswith("2 of 2 workers trained, in agreement: custom loop on 2 replicas")


@tf_test
def test_the_run_table_counts_the_replicas_of_every_worker(batch):
    report = batch[0]["custom_loop_keras3.py"]
    assert report.runs[0].replicas == (0,), "the chief sees its own replica run"
    console = command.Console(file=io.StringIO(), width=200)
    console.print(report_view(report, "custom_loop_keras3.py"))
    row = next(line for line in console.file.getvalue().splitlines() if "replica_step" in line and "function" in line)
    assert [cell.strip() for cell in row.split("│")][4] == "2"


@tf_test
def test_every_worker_saving_to_one_path_fails_and_the_tutorial_pattern_passes(batch):
    reports, folder = batch
    shared = reports["save_every_worker.py"]
    assert not shared.ok
    target = str(folder / "saved" / "model.keras")
    assert shared.failures == (
        "workers 0 and 1 both wrote saved/model.keras (model.save at save_every_worker.py:20): on a shared file system "
        "they overwrite each other; only the chief should write there, the others to a temporary folder",
    )
    assert [[(w.api, w.path) for w in worker.writes] for worker in shared.workers.each] == [[("model.save", target)]] * 2
    assert shared.workers.agree and shared.workers.shared_writes == shared.failures
    tutorial = reports["save_chief_tempdir.py"]
    assert tutorial.ok, tutorial.failures
    chief, other = tutorial.workers.each
    assert [(w.api, w.path) for w in chief.writes] == [("model.save", target)]
    assert [(w.api, w.path) for w in other.writes] == [("model.save", str(folder / "saved" / "worker_temp_1" / "model.keras"))]
    assert not (folder / "saved" / "worker_temp_1").exists()


@tf_test
def test_auto_sharding_off_without_shard_fails(batch):
    report = batch[0]["shard_off.py"]
    assert report.failures == ("fit trains every worker on the same examples: the dataset's auto-sharding is OFF and it is not shard()ed",)
    assert (report.fits[0].auto_shard, report.fits[0].sharded) == ("OFF", False)
    assert report.workers.agree, "the workers still agree: they are in sync, on the same data"


@tf_test
def test_a_crashing_worker_fails_the_run_with_its_own_output(batch):
    report = batch[0]["worker_crashes.py"]
    assert not report.ok and report.exit_code == 1
    crashed = report.workers.each[1]
    assert crashed.status == "crashed" and crashed.error == "FileNotFoundError: data/part-1.csv"
    assert "worker 1 cannot find its data" in crashed.output
    assert "worker 1: the script crashed at worker_crashes.py:14: FileNotFoundError: data/part-1.csv" in report.failures
    # The chief, left waiting in a collective, ends too (TensorFlow reports the lost peer, or
    # the harness stops it).
    assert report.workers.each[0].status in ("crashed", "stopped")
    assert report.output == crashed.output
    assert report.failures[0].startswith("worker 1: "), "the first worker to fail comes first"


@tf_test
def test_a_hanging_worker_times_out_and_every_process_is_ended(tmp_path):
    folder = _copy(tmp_path)
    started = time.monotonic()
    report = run_smoke(folder / "worker_hangs.py", workers=2, replicas=1, steps=STEPS, legacy_keras=True, timeout=8)
    assert time.monotonic() - started < 90
    assert not report.ok
    assert report.workers.each[1].status == "timeout" and "worker 1 waits for its data server" in report.workers.each[1].output
    assert "worker 1: timed out after 8 s" in report.failures or "timed out after 8 s" in report.failures
    pids = [int(p) for index in (0, 1) for p in (folder / f"pids-{index}").read_text().split()]
    deadline = time.monotonic() + 10
    while not all(dead(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(dead(p) for p in pids), "every worker and the processes they started must be ended"


@tf_test
def test_a_worker_that_leaves_before_training_is_named_and_the_others_are_stopped(monkeypatch):
    monkeypatch.setattr(cluster, "PEER_GRACE", 3.0)
    started = time.monotonic()
    report = run_smoke(FIXTURES / "smoke" / "worker_leaves.py", workers=2, replicas=1, steps=STEPS, timeout=60)
    assert time.monotonic() - started < 45, "the chief must not wait for its timeout"
    assert report.failures[0] == "worker 1 ended before training: the others were left waiting"
    assert "worker 0: stopped: worker 1 had ended without training and this worker was still waiting for it" in report.failures
    assert not any("timed out" in message for message in report.failures)
    assert [w.status for w in report.workers.each] == ["stopped", "completed"]
    assert "worker 1: no data shard, leaving" in report.workers.each[1].output and report.output == report.workers.each[1].output


# --- without TensorFlow: the checks across workers, the merged report ---------------------------


def _fit(losses, weights, steps=2, **extra):
    return {"method": "fit", "site": "t.py:9", "replicas": 2, "steps": steps, "losses": list(losses), "weights": weights, "all_mirrored": True, "variables": 2, **extra}


def _raw(fit, writes=(), status="completed"):
    return {"status": status, "fits": [fit], "writes": [dict(w) for w in writes]}


def test_cluster_checks_agreement_and_shared_writes():
    same = [_raw(_fit([1.0, 0.5], "aaaa")), _raw(_fit([1.0, 0.5], "aaaa"))]
    assert [(c.name, c.passed) for c in checks.cluster(same, str)] == [("workers.trained", True), ("workers.agree", True)]
    weights = [_raw(_fit([1.0, 0.5], "aaaa")), _raw(_fit([1.0, 0.5], "bbbb"))]
    assert checks.cluster(weights, str)[1].message == "the workers disagree: fit at t.py:9 ends with different weights (worker 0 aaaa, worker 1 bbbb)"
    losses = [_raw(_fit([1.0, 0.5], "aaaa")), _raw(_fit([1.0, 0.7], "aaaa"))]
    assert checks.cluster(losses, str)[1].message == "the workers disagree: fit at t.py:9 losses differ (worker 0 [1, 0.5], worker 1 [1, 0.7])"
    write = {"api": "model.save", "path": "/p/m.keras", "via": "ModelCheckpoint", "site": "t.py:9"}
    other = dict(write, path="/p/tmp_1/m.keras")
    racing = checks.cluster([_raw(_fit([1.0], "a"), [write]), _raw(_fit([1.0], "a"), [write])], lambda p: p.replace("/p/", ""))
    assert racing[-1] == Check(
        "workers.files",
        False,
        "workers 0 and 1 both wrote m.keras (model.save via ModelCheckpoint at t.py:9): on a shared file system they overwrite "
        "each other; only the chief should write there, the others to a temporary folder",
    )
    apart = checks.cluster([_raw(_fit([1.0], "a"), [write]), _raw(_fit([1.0], "a"), [other])], str)
    assert apart[-1] == Check("workers.files", True, "no two workers wrote the same path")


def test_sharding_and_stopped_messages():
    off = checks.evaluate(_raw(_fit([1.0], "a", auto_shard="OFF", sharded=False)), replicas=2, timeout=60, workers=2)
    assert [c.message for c in off if not c.passed] == [
        "fit trains every worker on the same examples: the dataset's auto-sharding is OFF and it is not shard()ed"
    ]
    manual = checks.evaluate(_raw(_fit([1.0], "a", auto_shard="OFF", sharded=True)), replicas=2, timeout=60, workers=2)
    assert all(c.passed for c in manual) and "fit splits its dataset over the workers (shard() in the pipeline)" in [c.message for c in manual]
    stopped = checks.finished({"status": "stopped", "stopped_after": 1}, 60)
    assert stopped.message == "stopped: worker 1 had failed and this worker was still waiting for it"


def test_failures_shared_by_every_worker_are_one_line():
    crash = Check("finished", False, "fit failed: Keras 3 cannot ...")
    merged = cluster._merge([(crash,), (crash,)])
    assert merged == (crash,)
    alone = cluster._merge([(Check("finished", True, "ran"),), (Check("finished", False, "the script crashed"),)])
    assert alone == (Check("finished", True, "ran"), Check("worker 1.finished", False, "worker 1: the script crashed"))


def _worker_report(tmp_path) -> SmokeReport:
    raws = [_raw(_fit([1.0, 0.5], "aaaa"), [{"api": "open", "path": str(tmp_path / "log.csv"), "via": "CSVLogger", "site": "t.py:9"}])] * 2
    settings = Settings(replicas=1, steps=2, timeout=60.0, offline=True, legacy_keras=True, python="python", startup_timeout=60.0, workers=2)
    job = SmokeJob(str(tmp_path / "t.py"))
    return cluster._report(settings, job, ["localhost:1", "localhost:2"], raws, [{"startup_seconds": 5.0}, {"startup_seconds": 6.0}], None)


def test_a_worker_that_left_comes_first_and_replaces_its_no_training(tmp_path):
    trained = _raw(_fit([1.0], "a"), status="stopped")
    trained.update(stopped_after=1, peer_left=True)
    left = {"status": "completed", "fits": [], "ended_at": 1.0}
    settings = Settings(replicas=1, steps=2, timeout=60.0, offline=True, legacy_keras=True, python="python", startup_timeout=60.0, workers=2)
    report = cluster._report(settings, SmokeJob(str(tmp_path / "t.py")), ["localhost:1", "localhost:2"], [trained, left], [{}, {}], None, 1)
    assert report.failures == (
        "worker 1 ended before training: the others were left waiting",
        "worker 0: stopped: worker 1 had ended without training and this worker was still waiting for it",
    )
    assert cluster.left_early([left, left]) == [], "no worker trained or waited: each one's own check says it"
    assert cluster.left_early([_raw(_fit([1.0], "a")), left]) == [1]


def test_the_run_table_shows_a_count_not_the_chief_replica_ids(tmp_path):
    run = {"site": "t.py:9 step", "given": "function", "name": "replica_step", "in_tf_function": True, "num_replicas": 2, "steps": 2,
           "replicas": [0], "replicas_observed": True, "applies_gradients": True, "losses": [1.0, 0.5], "weights": "aa"}
    raws = [{"status": "completed", "runs": [run]}, {"status": "completed", "runs": [dict(run, replicas=[1])]}]
    settings = Settings(replicas=1, steps=2, timeout=60.0, offline=True, legacy_keras=True, python="python", startup_timeout=60.0, workers=2)
    report = cluster._report(settings, SmokeJob(str(tmp_path / "t.py")), ["localhost:1", "localhost:2"], raws, [{}, {}], None)
    console = command.Console(file=io.StringIO(), width=200)
    console.print(report_view(report, "t.py"))
    row = next(line for line in console.file.getvalue().splitlines() if "function replica_step" in line)
    assert [cell.strip() for cell in row.split("│")][4] == "2"
    assert "replica_step ran on 2 replicas" in [c.message for c in report.checks]


def test_multi_worker_report_renders_and_round_trips(tmp_path):
    report = _worker_report(tmp_path)
    assert not report.ok and report.workers.trained == 2 and report.workers.agree is True
    assert report.failures == (
        "workers 0 and 1 both wrote log.csv (open via CSVLogger at t.py:9): on a shared file system they overwrite each other; "
        "only the chief should write there, the others to a temporary folder",
    )
    assert report.startup_seconds == 6.0 and report.replicas == 2
    data = report.to_dict()
    assert [w["chief"] for w in data["workers"]["each"]] == [True, False]
    assert SmokeReport.from_dict(json.loads(report.to_json())) == report
    console = command.Console(file=io.StringIO(), width=200)
    console.print(report_view(report, "t.py"))
    text = console.file.getvalue()
    assert "workers: 2 of 2 trained, in agreement" in text and "0 (chief)" in text and "log.csv" in text


def test_fix_smoke_passes_workers_through(monkeypatch, tmp_path):
    seen = {}

    def compare(results, **options):
        seen.update(options)
        return []

    monkeypatch.setattr(before_after, "compare", compare)
    results = [FileResult(str(tmp_path / "t.py"), old_text="x = 1\n", new_text="x = 2\n", written=True)]
    assert command.smoke_changed(results, command.Console(file=io.StringIO()), workers=3) == 0
    assert seen == {"replicas": 1, "workers": 3}
    assert command.default_replicas(None, 1) == 2 and command.default_replicas(None, 2) == 1 and command.default_replicas(4, 2) == 4


def test_cli_smoke_passes_workers_and_replicas(monkeypatch, tmp_path):
    seen = {}
    script = tmp_path / "t.py"
    script.write_text("x = 1\n")

    def fake(path, **options):
        seen.update(options)
        return dataclasses.replace(_worker_report(tmp_path), script=str(path))

    monkeypatch.setattr(command, "run_smoke", fake)
    result = CliRunner().invoke(main, ["smoke", str(script), "--workers", "2"])
    assert result.exit_code == 1 and (seen["workers"], seen["replicas"]) == (2, 1)
    CliRunner().invoke(main, ["smoke", str(script), "--workers", "2", "--replicas", "3"])
    assert (seen["workers"], seen["replicas"]) == (2, 3)
