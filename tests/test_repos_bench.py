"""bench/repos.py's bookkeeping, on a tiny synthetic corpus made in a temporary folder.

No network and no TensorFlow: the corpus trees are written here, bench/repos/fetch.py reads them
from a local git repository, and bench/repos.py judges what autofix (its CLI, run as a
subprocess) finds, fixes and migrates in them. The real corpus's manifest and triage are checked
for consistency (they need no trees).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


repos = load("bench_repos", BENCH / "repos.py")
fetch = load("bench_repos_fetch", BENCH / "repos" / "fetch.py")

# A distributed program over two modules: the model factory in model.py, the strategy, the step
# and its per-replica reduce_mean loss in train.py (a same-module TFD004 bug), a loss in
# losses.py that is also averaged per replica (an other-module bug autofix cannot see here).
MODEL = """\
import tensorflow as tf


def build_model():
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
"""
LOSSES = """\
import tensorflow as tf


def penalty(pred):
    return tf.reduce_mean(tf.square(pred))
"""
TRAIN = """\
import tensorflow as tf
from model import build_model
from losses import penalty

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
    optimizer = tf.keras.optimizers.SGD(0.1)

dataset = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(16)  # 16 per replica
dist = strategy.experimental_distribute_dataset(dataset)


def step(x, y):
    with tf.GradientTape() as tape:
        pred = model(x, training=True)
        loss = tf.reduce_mean(tf.square(pred - y)) + penalty(pred)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(x, y):
    return strategy.run(step, args=(x, y))


for x, y in dist:
    train_step(x, y)
"""
TRAIN_BUG_LINE = TRAIN.splitlines().index("        loss = tf.reduce_mean(tf.square(pred - y)) + penalty(pred)") + 1

# A single-device program with nothing it trains: autofix has nothing to migrate nor to say.
QUIET = "import numpy as np\n\nprint(np.zeros(3).sum())\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record(ident: str, kind: str, files: dict[str, str], entry: str, **extra) -> dict:
    return {
        "id": ident, "repo": "someone/project", "commit": "0" * 40, "root": "", "entry": entry,
        "files": [{"path": p, "sha256": sha(t.encode())} for p, t in sorted(files.items())],
        "kind": kind, "origin": "synthetic", "expect": extra.pop("expect", "clean"), "why": "synthetic",
        "data": "generated", "notes": "", "bugs": extra.pop("bugs", []), "correct": extra.pop("correct", []), "part": "A",
    }


def write_tree(folder: Path, ident: str, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = folder / ident / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


DIST_FILES = {"train.py": TRAIN, "model.py": MODEL, "losses.py": LOSSES}
BUGS = [
    {"file": "train.py", "line": TRAIN_BUG_LINE, "lines": [TRAIN_BUG_LINE - 1, TRAIN_BUG_LINE + 1], "code": "TFD004",
     "evidence": "same-module", "why": "reduce_mean over the replica's batch under strategy.run"},
    {"file": "losses.py", "line": 5, "code": "TFD004", "evidence": "other-module",
     "why": "penalty() is a per-replica mean too, added to the loss under strategy.run in train.py"},
]


# --- Pure bookkeeping -----------------------------------------------------------------------

def finding(file, line, code="TFD004", unsafe=False, fixable=False):
    return {"file": file, "line": line, "cell": None, "code": code, "message": "m", "unsafe": unsafe,
            "fixable": fixable, "reason": None}


def test_a_finding_reports_the_bugs_whose_sites_hold_its_line_and_only_those():
    bugs = [{"file": "a.py", "line": 10, "lines": [8, 12], "code": "TFD004", "evidence": "same-module", "why": "w"},
            {"file": "b.py", "line": 3, "code": "TFD001", "evidence": "other-module", "why": "w",
             "sites": [{"file": "c.py", "lines": [20, 30]}]}]
    assert repos.matching_bug(finding("a.py", 8), bugs) == 0
    assert repos.matching_bug(finding("a.py", 13), bugs) is None
    assert repos.matching_bug(finding("a.py", 10, "TFD001"), bugs) is None   # another rule
    assert repos.matching_bug(finding("b.py", 3, "TFD001"), bugs) == 1
    assert repos.matching_bug(finding("b.py", 4, "TFD001"), bugs) is None    # no span: its line only
    assert repos.matching_bug(finding("c.py", 25, "TFD001"), bugs) == 1      # another site of the bug


def test_findings_are_judged_by_bugs_then_triage_and_the_rest_is_untriaged():
    rec = record("r", "distributed", {"a.py": "x"}, "a.py",
                 bugs=[{"file": "a.py", "line": 5, "code": "TFD004", "evidence": "other-module", "why": "w"},
                       {"file": "a.py", "line": 40, "code": "TFD002", "evidence": "same-module", "why": "w"}])
    triage = {"findings": [{"id": "r", "file": "a.py", "line": 9, "code": "TFD001", "verdict": "false", "why": "inference"}],
              "fixes": [{"id": "r", "file": "a.py", "sha256": sha(b"fixed"), "verdict": "wrong", "why": "breaks it"}]}
    findings = [finding("a.py", 5), finding("a.py", 9, "TFD001"), finding("a.py", 11, "TFD001"),
                finding("a.py", 7, "TFD005", unsafe=True)]
    judged = repos.judge_distributed(rec, findings, [], {"a.py": b"fixed", "b.py": b"new"}, triage)
    assert [f["verdict"] for f in judged["findings"]] == ["true", "false", "untriaged", "suggestion"]
    assert [b["reported"] for b in judged["bugs"]] == [True, False]
    assert [(f["file"], f["verdict"]) for f in judged["fixes"]] == [("a.py", "wrong"), ("b.py", "untriaged")]

    summary = repos.summarise([judged])
    d = summary["distributed"]
    assert (d["findings"], d["true"], d["false"], d["untriaged"], d["suggestions"]) == (3, 1, 1, 1, 1)
    assert d["precision"] == 0.5
    assert d["recall"]["other-module"] == {"bugs": 1, "reported": 1, "recall": 1.0}
    assert d["recall"]["same-module"] == {"bugs": 1, "reported": 0, "recall": 0.0}
    assert d["fixes"] == {"files_changed": 2, "correct": 0, "wrong": 1, "untriaged": 1}
    assert [(f["id"], f["line"]) for f in summary["untriaged_findings"]] == [("r", 11)]
    assert [b["line"] for b in summary["missed_bugs"]] == [40]
    assert repos.failed({"missing": [], "corrupted": [], "summary": summary})


def test_migration_outcomes_migrated_declined_silent_and_their_counts():
    migrated = repos.judge_migration({"id": "m", "expect": "migrate"}, {"train.py": b"x"}, [], [])
    said = repos.judge_migration({"id": "d", "expect": "migrate"}, {}, ["train.py:3:1: TFD010 trains on one device (no automatic fix: why)"], [])
    from_json = repos.judge_migration({"id": "j", "expect": "refuse"}, {}, [], [
        {"path": "./model.py", "line": 4, "code": "TFD010", "message": "trains on one device", "fixable": False, "reason": "a reason"}])
    silent = repos.judge_migration({"id": "s", "expect": "migrate"}, {}, [], [])
    assert (migrated["status"], migrated["changed"]) == ("migrated", ["train.py"])
    assert said["status"] == "declined" and "no automatic fix: why" in said["why"][0]
    assert from_json["status"] == "declined" and from_json["why"] == ["model.py:4: TFD010 trains on one device: a reason"]
    assert silent["status"] == "silent"

    migrated.update(proof="proven")
    broken = dict(repos.judge_migration({"id": "b", "expect": "migrate"}, {"a.py": b"y"}, [], []), proof="broken", proof_message="different")
    summary = repos.summarise([migrated, broken, said, from_json, silent], proved=True)
    m = summary["migrate"]
    assert (m["records"], m["expected_to_migrate"], m["expected_to_refuse"]) == (5, 4, 1)
    assert (m["migrated"], m["proven"], m["broken"], m["declined"], m["silent"]) == (2, 1, 1, 2, 1)
    assert (m["silent_misses"], m["expected_migrate_proven"], m["expected_refuse_not_migrated"]) == (1, 1, 1)
    assert [r["id"] for r in summary["broken_migrations"]] == ["b"]
    assert repos.failed({"missing": [], "corrupted": [], "summary": summary})
    ok = repos.summarise([migrated, said, silent], proved=True)
    assert not repos.failed({"missing": [], "corrupted": [], "summary": ok})


def test_missing_and_corrupted_files_are_told_apart_and_a_copy_holds_only_the_listed_files(tmp_path):
    files = {"train.py": TRAIN, "pkg/model.py": MODEL}
    rec = record("r", "distributed", files, "train.py")
    write_tree(tmp_path, "r", files)
    (tmp_path / "r" / "unrelated.py").write_text("x = 1\n")
    copy = repos.copy_tree(rec, tmp_path, tmp_path / "copy")
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.py")) == ["pkg/model.py", "train.py"]
    before = repos.snapshot(copy)
    (copy / "train.py").write_text("changed\n")
    (copy / "new.py").write_text("new\n")
    assert repos.changed_files(before, copy, set(before)) == {"train.py": b"changed\n"}
    assert set(repos.changed_files(before, copy)) == {"train.py", "new.py"}

    assert repos.tree_problems(rec, tmp_path) == ([], [])
    (tmp_path / "r" / "pkg" / "model.py").write_text("tampered\n")
    (tmp_path / "r" / "train.py").unlink()
    assert repos.tree_problems(rec, tmp_path) == (["train.py"], ["pkg/model.py"])


# --- With the CLI ---------------------------------------------------------------------------

@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "files"
    dist = record("someone__dist", "distributed", DIST_FILES, "train.py", expect="findings",
                  bugs=BUGS, correct=["model.py"])
    quiet = record("someone__quiet", "migrate", {"main.py": QUIET}, "main.py", expect="migrate")
    write_tree(folder, dist["id"], DIST_FILES)
    write_tree(folder, quiet["id"], {"main.py": QUIET})
    return folder, [dist, quiet]


def test_measure_runs_the_cli_on_copies_and_judges_what_it_finds_fixes_and_migrates(corpus):
    folder, manifest = corpus
    report = repos.measure(manifest, {}, folder, sys.executable, log=lambda *_: None)
    dist, quiet = report["records"]

    # The per-replica reduce_mean in train.py is found (a true finding: it reports the
    # same-module bug), and so is the per-replica mean in losses.py, seen only from train.py:
    # reported at its line in losses.py, the other module's bug.
    found = [f for f in dist["findings"] if f["code"] == "TFD004"]
    assert found and all(f["verdict"] == "true" for f in found)
    assert {f["file"] for f in found} == {"train.py", "losses.py"}
    assert [b["reported"] for b in dist["bugs"]] == [True, True]
    # autofix fix changed train.py on its own copy: the change is listed, for a person to judge.
    assert [f["file"] for f in dist["fixes"]] == ["train.py"]
    assert dist["fixes"][0]["verdict"] == "untriaged"
    # The corpus tree itself is untouched.
    assert (folder / "someone__dist" / "train.py").read_text() == TRAIN

    assert quiet["status"] == "silent"
    s = report["summary"]
    assert s["migrate"]["silent_misses"] == 1
    assert s["distributed"]["recall"]["same-module"]["reported"] == 1
    assert s["distributed"]["recall"]["other-module"] == {"bugs": 1, "reported": 1, "recall": 1.0}
    assert s["untriaged_fixes"] and repos.failed(report)

    # Judged wrong in the triage: no longer untriaged, but a wrong fix (still a failure).
    triage = {"fixes": [{"id": "someone__dist", "file": "train.py", "sha256": dist["fixes"][0]["sha256"], "verdict": "wrong", "why": "w"}]}
    again = repos.measure(manifest[:1], triage, folder, sys.executable, log=lambda *_: None)
    assert not again["summary"]["untriaged_fixes"] and [f["file"] for f in again["summary"]["wrong_fixes"]] == ["train.py"]
    # Once the fix is judged correct and every other finding is judged (here: false), nothing
    # is left for a person and the run passes.
    triage["fixes"][0]["verdict"] = "correct"
    triage["findings"] = [{"id": f["id"], "file": f["file"], "line": f["line"], "code": f["code"], "verdict": "false", "why": "w"}
                          for f in again["summary"]["untriaged_findings"]]
    right = repos.measure(manifest[:1], triage, folder, sys.executable, log=lambda *_: None)
    assert right["summary"]["distributed"]["fixes"]["correct"] == 1
    assert right["summary"]["distributed"]["false"] == len(triage["findings"])
    assert not repos.failed(right)


def test_main_exit_status_and_json_report(corpus, tmp_path, capsys):
    folder, manifest = corpus
    (tmp_path / "manifest.json").write_text(json.dumps(manifest[1:]))
    out = tmp_path / "out" / "report.json"
    code = repos.main(["--files", str(folder), "--manifest", str(tmp_path / "manifest.json"),
                       "--triage", str(tmp_path / "none.json"), "--json", str(out)])
    assert code == 0  # a silent miss is a figure, not a failure
    assert json.loads(out.read_text())["summary"]["migrate"]["silent"] == 1
    assert "silent" in capsys.readouterr().out
    assert repos.main(["--files", str(tmp_path / "nowhere"), "--manifest", str(tmp_path / "manifest.json")]) == 2


def test_fetch_materialises_trees_from_a_local_clone_and_checks_sha256(tmp_path):
    clone = tmp_path / "clones" / "someone+project" / "repo"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    (clone / "sub" / "pkg").mkdir(parents=True)
    (clone / "sub" / "train.py").write_text(TRAIN)
    (clone / "sub" / "pkg" / "model.py").write_text(MODEL)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    rec = dict(record("someone__project", "distributed", {"train.py": TRAIN, "pkg/model.py": MODEL}, "train.py"),
               commit=commit, root="sub")
    bad = dict(rec, id="someone__bad", files=[{"path": "train.py", "sha256": "0" * 64}])
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps([rec, bad]))
    out = tmp_path / "files"
    assert fetch.main(["--files", str(out), "--from-git", str(tmp_path / "clones"), "--manifest", str(manifest)]) == 1
    assert (out / "someone__project" / "pkg" / "model.py").read_text() == MODEL
    assert not (out / "someone__bad").exists()  # a file whose sha256 differs is not saved
    assert repos.tree_problems(rec, out) == ([], [])
    manifest.write_text(json.dumps([rec]))
    assert fetch.main(["--files", str(out), "--from-git", str(tmp_path / "clones"), "--manifest", str(manifest)]) == 0


# --- The real corpus's data -----------------------------------------------------------------

MANIFEST = json.loads((BENCH / "repos" / "manifest.json").read_text(encoding="utf-8"))
TRIAGE = json.loads((BENCH / "repos" / "triage.json").read_text(encoding="utf-8"))


def test_corpus_manifest_records_are_complete_and_consistent():
    ids = [r["id"] for r in MANIFEST]
    assert len(ids) == len(set(ids))
    for r in MANIFEST:
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]) and r["kind"] in repos.KINDS and r["part"] == "A"
        paths = [f["path"] for f in r["files"]]
        assert r["entry"] in paths and len(paths) == len(set(paths))
        assert all(re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) for f in r["files"])
        assert set(r["correct"]) <= set(paths)
        if r["kind"] == "migrate":
            assert r["expect"] in ("migrate", "refuse") and not r["bugs"]
        else:
            assert r["expect"] == ("findings" if r["bugs"] else "clean")
        for bug in r["bugs"]:
            assert bug["evidence"] in repos.EVIDENCE and bug["why"] and bug["code"].startswith("TFD")
            assert bug["file"] not in r["correct"]
            for file, first, last in repos.bug_sites(bug):
                assert file in paths and first <= last


def test_corpus_triage_refers_to_records_once_each():
    ids = {r["id"] for r in MANIFEST}
    keys = [(f["id"], f["file"], f["line"], f["code"]) for f in TRIAGE["findings"]]
    assert len(keys) == len(set(keys))
    assert {f["verdict"] for f in TRIAGE["findings"]} <= {"true", "false"}
    assert {f["verdict"] for f in TRIAGE["fixes"]} <= {"correct", "wrong"}
    for item in TRIAGE["findings"] + TRIAGE["fixes"]:
        assert item["id"] in ids and item["why"]
