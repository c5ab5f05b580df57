"""The real-world corpus benchmark's data stays consistent, and its notion of valid IPython holds.

The corpus files themselves are not in the repository (see bench/realworld/README.md); these
checks need only the manifest, the triage and bench/precision.py.
"""

import ast
import hashlib
import importlib.util
import json
import re
import subprocess
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
spec = importlib.util.spec_from_file_location("precision", BENCH / "precision.py")
precision = importlib.util.module_from_spec(spec)
spec.loader.exec_module(precision)

MANIFEST = json.loads((BENCH / "realworld" / "manifest.json").read_text(encoding="utf-8"))
TRIAGE = json.loads((BENCH / "realworld" / "triage.json").read_text(encoding="utf-8"))


def test_manifest_entries_are_complete_and_unique():
    ids = [e["id"] for e in MANIFEST]
    assert len(ids) == len(set(ids))
    for e in MANIFEST:
        assert e["id"] == e["repo"].replace("/", "__") + "__" + e["path"].replace("/", "__").replace(" ", "_")
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]) and re.fullmatch(r"[0-9a-f]{64}", e["sha256"])
        assert e["kind"] == ("notebook" if e["path"].endswith(".ipynb") else "script")


def test_triage_refers_to_manifest_files_once_each():
    ids = {e["id"] for e in MANIFEST}
    keys = [(f["file"], f["cell"], f["line"], f["code"]) for f in TRIAGE["findings"]]
    assert len(keys) == len(set(keys))
    assert {f["verdict"] for f in TRIAGE["findings"]} <= {"true", "false"}
    assert {f["verdict"] for f in TRIAGE["fixes"]} <= {"correct", "wrong"}
    for item in TRIAGE["findings"] + TRIAGE["fixes"] + TRIAGE["misses"]:
        assert item["file"] in ids and item["why"]
    assert set(TRIAGE["notes"]) == ids


def accepted(source):
    python = precision.ipython_to_python(source)
    if python is None:
        return True
    try:
        ast.parse(python)
        return True
    except SyntaxError:
        return False


def test_ipython_syntax_that_jupyter_runs_is_accepted():
    assert accepted("try:\n  %tensorflow_version 2.x\nexcept Exception:\n  pass\n")
    assert accepted("if IS_COLAB:\n    !pip install -q x\n    %pip install y\n")
    assert accepted("print('%d'\n      %(3,))\n")  # `%` at a line start inside brackets is modulo
    assert accepted("!saved_model_cli show --dir x \\\n      --tag_set serve\n")
    assert accepted("files = !ls\n")
    assert accepted("%%writefile mnist.py\nthis is not python(\n")
    assert accepted("%%time\nx = 1\n")


def test_real_syntax_errors_are_not_accepted():
    assert not accepted("print 'python 2'\n")
    assert not accepted("%%time\nmodel = Model(...)\nmodel.fit(x, batch_size=1, ...)\nf(a=1, 2)\n")


# --- --in-repo: a corpus file analysed in a copy of its repository ------------------------------

LOSSES = "import tensorflow as tf\n\n\ndef gan_loss(fake):\n    return tf.reduce_mean(fake)\n"
STEP = (
    "import tensorflow as tf\n"
    "from losses import gan_loss\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "    optimizer = tf.keras.optimizers.Adam()\n"
    "\n"
    "\n"
    "def train_step(x):\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = gan_loss(model(x, training=True))\n"
    "    grads = tape.gradient(loss, model.trainable_variables)\n"
    "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
    "\n"
    "\n"
    "@tf.function\n"
    "def step(x):\n"
    "    strategy.run(train_step, args=(x,))\n"
)


def _clone(tmp_path: Path) -> tuple[Path, dict]:
    """A clone CLONES/owner+name/repo holding train/step.py and train/losses.py (and a large
    data file that the copy leaves out), and the manifest entry of step.py."""
    work = tmp_path / "work"
    (work / "train").mkdir(parents=True)
    (work / "train" / "step.py").write_text(STEP)
    (work / "train" / "losses.py").write_text(LOSSES)
    (work / "requirements.txt").write_text("tensorflow>=2.16\n")
    (work / "weights.bin").write_bytes(b"\0" * 10)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    clones = tmp_path / "clones"
    (clones / "owner+name").mkdir(parents=True)
    (work).rename(clones / "owner+name" / "repo")
    entry = {"id": "owner__name__train__step.py", "repo": "owner/name", "path": "train/step.py", "commit": commit,
             "sha256": hashlib.sha256(STEP.encode()).hexdigest()}
    return clones, entry


def test_a_file_analysed_in_its_repository_sees_its_other_modules(tmp_path):
    clones, entry = _clone(tmp_path)
    results = precision.run_autofix_in_repositories([entry], clones, tmp_path / "trees")
    root = tmp_path / "trees" / "owner+name" / entry["commit"][:12]
    assert (root / ".git").is_dir() and (root / "requirements.txt").is_file() and not (root / "weights.bin").exists()
    # The mean in losses.py, placed at the step's line that uses it (the line the triage records).
    [finding] = [f for f in results[entry["id"]].findings if f.code == "TFD004"]
    assert finding.path is None and finding.line == 12
    # Alone, the file shows no such finding: the loss is out of sight.
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / entry["id"]).write_text(STEP)
    assert not [f for f in precision.run_autofix([alone / entry["id"]])[entry["id"]].findings if f.code == "TFD004"]


def test_a_copy_that_is_not_the_corpus_file_is_an_error(tmp_path):
    clones, entry = _clone(tmp_path)
    entry["sha256"] = "0" * 64
    try:
        precision.run_autofix_in_repositories([entry], clones, tmp_path / "trees")
    except OSError as error:
        assert "is not the corpus file" in str(error)
    else:
        raise AssertionError("a copy that differs from the corpus file was measured")


def test_a_recorded_miss_reported_later_counts_as_true(tmp_path):
    """A finding at the line of a recorded miss is the bug judged before the run: true, found."""
    clones, entry = _clone(tmp_path)
    files = tmp_path / "files"
    files.mkdir()
    (files / entry["id"]).write_text(STEP)
    entry = dict(entry, kind="script")
    triage = {"findings": [], "fixes": [], "notes": {},
              "misses": [{"file": entry["id"], "cell": None, "line": 12, "code": "TFD004", "why": "per-replica mean"}]}
    results = precision.run_autofix_in_repositories([entry], clones, tmp_path / "trees")
    report = precision.evaluate([entry], triage, files, results)
    assert report["rules"]["TFD004"]["true"] == 1 and report["rules"]["TFD004"]["untriaged"] == 0
    assert report["recall"]["TFD004"]["reported"] == 1 and not report["misses"]
