"""Findings whose evidence lies in another module of the project.

TFD004: a step run by ``strategy.run`` in one module (trainer.py) differentiates what a loss
function of another (losses.py) returns; that function's ``tf.reduce_mean`` is per replica.
The finding is placed at the mean in losses.py and names the step's file and line as its
related place (text "used by trainer.py:26", JSON ``related``, SARIF ``relatedLocations``).
The same function used by an evaluation script outside ``strategy.run`` is no finding there.
The trees are fixtures/repo_findings/<name>/ (its README says what each shows), copied into a
temporary folder for each test. No TensorFlow runs here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix.cli import main
from autofix.engine import Options, process_path
from fixturecases import FIXTURES

TREES = FIXTURES / "repo_findings"


def tree(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(TREES / name, target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` (which must be there) by ``new`` in the file ``path``."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def run(*args: str):
    result = CliRunner().invoke(main, [*args, "-j", "1"], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_per_replica_mean_in_a_loss_module_is_reported_there_naming_the_step(tmp_path):
    root = tree(tmp_path, "loss_module")
    result = process_path(str(root / "trainer.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD004"]
    assert finding.path == str(root / "losses.py")
    assert finding.line == line_of(root / "losses.py", "return tf.reduce_mean(per_example)")
    step_line = line_of(root / "trainer.py", "loss = compute_loss(")
    assert finding.related == ((str(root / "trainer.py"), step_line, f"used by trainer.py:{step_line}"),)
    # Not fixed: neither losses.py (evaluate.py is right with it) nor the rest of the step.
    assert not finding.fixable and "compute_loss()" in finding.reason
    assert not result.changed


def test_the_same_function_used_outside_strategy_run_is_no_finding(tmp_path):
    root = tree(tmp_path, "loss_module")
    assert process_path(str(root / "evaluate.py"), Options()).findings == ()
    assert process_path(str(root / "losses.py"), Options()).findings == ()


def test_a_loss_module_that_is_right_gives_no_finding(tmp_path):
    """The step that divides the imported mean by the replica count, and a loss function that
    averages over the global batch itself, are right."""
    root = tree(tmp_path, "loss_module")
    trainer = root / "trainer.py"
    text = trainer.read_text()
    trainer.write_text(text.replace("loss = compute_loss(y, model(x, training=True))", "loss = compute_loss(y, model(x, training=True)) / strategy.num_replicas_in_sync"))
    assert [f for f in process_path(str(trainer), Options()).findings if f.code == "TFD004"] == []
    trainer.write_text(text.replace("from losses import compute_loss", "from losses import global_loss").replace(
        "compute_loss(y, model(x, training=True))", "global_loss(y, model(x, training=True), GLOBAL_BATCH)"))
    assert [f for f in process_path(str(trainer), Options()).findings if f.code == "TFD004"] == []


def test_without_a_path_the_imported_loss_is_not_followed(tmp_path):
    """Standard input has no project: the call's reduction is unknown, and nothing is reported."""
    root = tree(tmp_path, "loss_module")
    result = CliRunner().invoke(main, ["check", "-"], input=(root / "trainer.py").read_text())
    assert result.exit_code == 0 and "TFD004" not in result.stdout


def test_text_json_sarif_and_github_name_the_related_place(tmp_path, monkeypatch):
    root = tree(tmp_path, "loss_module")
    monkeypatch.chdir(root)
    mean = line_of(root / "losses.py", "return tf.reduce_mean(per_example)")
    step = line_of(root / "trainer.py", "loss = compute_loss(")
    code, text, _ = run("check", "--no-cache", ".")
    assert code == 1
    [line] = [l for l in text.splitlines() if "TFD004" in l]
    assert line.startswith(f"losses.py:{mean}:12: TFD004 ") and f"(used by trainer.py:{step})" in line

    _, out, _ = run("check", "--no-cache", "--format", "json", ".")
    [item] = [i for i in json.loads(out) if i.get("code") == "TFD004"]
    assert (item["path"], item["line"], item["fixable"], item["fix"]) == ("losses.py", mean, False, None)
    assert item["related"] == [{"path": "trainer.py", "line": step, "message": f"used by trainer.py:{step}"}]

    _, out, _ = run("check", "--no-cache", "--format", "sarif", ".")
    [result] = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "TFD004"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "losses.py" and location["region"]["startLine"] == mean
    [related] = result["relatedLocations"]
    assert related["physicalLocation"]["artifactLocation"]["uri"] == "trainer.py"
    assert related["physicalLocation"]["region"] == {"startLine": step}
    assert related["message"]["text"] == f"used by trainer.py:{step}"

    _, out, _ = run("check", "--no-cache", "--format", "github", ".")
    [annotation] = [l for l in out.splitlines() if "TFD004" in l]
    assert annotation.startswith(f"::warning file=losses.py,line={mean},") and f"used by trainer.py%3A{step}" not in annotation
    assert f"(used by trainer.py:{step})" in annotation


def test_an_ignore_comment_at_the_mean_in_the_loss_module_suppresses_it(tmp_path):
    root = tree(tmp_path, "loss_module")
    losses = root / "losses.py"
    losses.write_text(losses.read_text().replace("return tf.reduce_mean(per_example)", "return tf.reduce_mean(per_example)  # autofix: ignore[TFD004]"))
    [finding] = [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"]
    assert finding.suppressed


def test_fix_leaves_both_modules_alone(tmp_path, monkeypatch):
    root = tree(tmp_path, "loss_module")
    before = {p.name: p.read_bytes() for p in root.glob("*.py")}
    monkeypatch.chdir(root)
    run("fix", "--no-cache", ".")
    assert {p.name: p.read_bytes() for p in root.glob("*.py")} == before


def test_the_finding_in_the_loss_module_follows_edits_of_either_module_with_the_cache_on(tmp_path, monkeypatch, cached):
    """The finding at losses.py's mean is found through trainer.py: its answer is kept only
    while both have the bytes they had. Editing trainer.py (the step now divides) or losses.py
    (the function now averages over the global batch) changes it, warm as cold."""
    root = tree(tmp_path, "loss_module")
    monkeypatch.chdir(root)

    def check():
        before = len(cached)
        outcome = run("check", ".")
        return outcome, len(cached) - before

    cold, count = check()
    assert count == 3 and cold == run("check", "--no-cache", ".") and "losses.py:9:12: TFD004" in cold[1]
    warm, count = check()
    assert count == 0 and warm == cold

    trainer = root / "trainer.py"
    original = trainer.read_text()
    trainer.write_text(original.replace("loss = compute_loss(y, model(x, training=True))", "loss = compute_loss(y, model(x, training=True)) / strategy.num_replicas_in_sync"))
    edited, count = check()
    assert count == 1 and "TFD004" not in edited[1] and edited == run("check", "--no-cache", ".")
    trainer.write_text(original)
    back, _count = check()
    assert back == cold

    losses = root / "losses.py"
    losses.write_text(losses.read_text().replace("return tf.reduce_mean(per_example)", "return tf.reduce_sum(per_example) / (64 * 1.0)"))
    edited, count = check()
    # losses.py itself, and the two files that import it.
    assert count == 3 and "losses.py:9:12: TFD004" not in edited[1] and edited == run("check", "--no-cache", ".")


# --- one loss function, several users: one finding ------------------------------------------


def shared_loss_places(root: Path) -> tuple[int, list[tuple[str, int]]]:
    mean = line_of(root / "losses.py", "return tf.reduce_mean(errors)")
    large = [i for i, line in enumerate((root / "train_large.py").read_text().splitlines(), 1) if "regression_loss(y," in line]
    small = line_of(root / "train_small.py", "regression_loss(y,")
    assert len(large) == 2
    return mean, [("train_large.py", large[0]), ("train_large.py", large[1]), ("train_small.py", small)]


def test_two_steps_of_one_file_using_one_loss_make_one_finding_naming_both(tmp_path):
    root = tree(tmp_path, "shared_loss")
    mean, users = shared_loss_places(root)
    result = process_path(str(root / "train_large.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD004"]
    assert (finding.path, finding.line) == (str(root / "losses.py"), mean)
    assert [(Path(p).name, line) for p, line, _ in finding.related] == users[:2]
    assert [m for _, _, m in finding.related] == [f"used by {name}:{line}" for name, line in users[:2]]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_two_trainers_using_one_loss_make_one_finding_in_every_format(tmp_path, monkeypatch, jobs):
    root = tree(tmp_path, "shared_loss")
    monkeypatch.chdir(root)
    mean, users = shared_loss_places(root)
    used = ", ".join(f"{name}:{line}" for name, line in users)

    def check(*args: str):
        result = CliRunner().invoke(main, ["check", "--no-cache", "-j", jobs, *args, "."], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    code, text, err = check()
    assert code == 1 and "1 finding (TFD004 1)" in err
    [line] = [l for l in text.splitlines() if "TFD004" in l]
    assert line.startswith(f"losses.py:{mean}:12: TFD004 ") and f"(used by {used})" in line

    _, out, _ = check("--format", "json")
    [item] = [i for i in json.loads(out) if i.get("code") == "TFD004"]
    assert (item["path"], item["line"]) == ("losses.py", mean)
    assert [(r["path"], r["line"], r["message"]) for r in item["related"]] == [(n, l, f"used by {n}:{l}") for n, l in users]

    _, out, _ = check("--format", "sarif")
    [result] = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "TFD004"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "losses.py"
    related = [(r["physicalLocation"]["artifactLocation"]["uri"], r["physicalLocation"]["region"]["startLine"]) for r in result["relatedLocations"]]
    assert related == users and [r["id"] for r in result["relatedLocations"]] == [0, 1, 2]

    _, out, _ = check("--format", "github")
    [annotation] = [l for l in out.splitlines() if "TFD004" in l]
    assert annotation.startswith(f"::warning file=losses.py,line={mean},") and f"(used by {used})" in annotation


def test_one_finding_for_two_trainers_from_the_cache_too(tmp_path, monkeypatch, cached):
    root = tree(tmp_path, "shared_loss")
    monkeypatch.chdir(root)
    cold = run("check", ".")
    warm = run("check", ".")
    assert warm == cold == run("check", "--no-cache", ".")
    assert cold[1].count("TFD004") == 1 and "1 finding (TFD004 1)" in cold[2]
    # Checked alone, each trainer names only itself.
    _, alone, _ = run("check", "train_small.py")
    small = shared_loss_places(root)[1][2]
    assert alone.count("TFD004") == 1 and f"(used by train_small.py:{small[1]})" in alone


def test_editing_the_loss_module_analyses_it_and_its_importers_again_and_nothing_else(tmp_path, monkeypatch, cached):
    """With the cache on: a change of losses.py re-checks the two trainers that import it (the
    finding moves with it), a change of one trainer re-checks only that trainer, and a file
    that imports neither is never analysed again."""
    root = tree(tmp_path, "shared_loss")
    (root / "other.py").write_text((root / "train_small.py").read_text().replace("from losses import regression_loss\n", "").replace(
        "loss = regression_loss(y, net(x, training=True))", "loss = tf.reduce_mean(keras.losses.mean_squared_error(y, net(x, training=True)))"))
    monkeypatch.chdir(root)

    def check():
        before = len(cached)
        outcome = run("check", ".")
        return outcome, len(cached) - before

    cold, count = check()
    mean = shared_loss_places(root)[0]
    assert count == 4 and f"losses.py:{mean}:12: TFD004" in cold[1] and "other.py" in cold[1]
    assert check() == (cold, 0)

    losses = root / "losses.py"
    losses.write_text(losses.read_text().replace("    return tf.reduce_mean(errors)", "    # Averaged over the global batch.\n    return tf.nn.compute_average_loss(errors)"))
    edited, count = check()
    assert count == 3  # losses.py, train_large.py, train_small.py: not other.py
    assert "losses.py" not in edited[1] and "other.py" in edited[1] and edited == run("check", "--no-cache", ".")
    assert check() == (edited, 0)

    small = root / "train_small.py"
    small.write_text(small.read_text() + "# edited\n")
    again, count = check()
    assert count == 1 and again == edited


# --- TFD006: a model built by another module, fit under MultiWorkerMirroredStrategy -----------


def test_keras3_fit_of_a_model_built_in_another_module_is_reported_naming_it(tmp_path):
    root = tree(tmp_path, "multiworker_model")
    result = process_path(str(root / "train.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD006"]
    assert finding.line == line_of(root / "train.py", "model.fit(")
    assert finding.path is None and not finding.fixable
    assert "imports model" in finding.reason  # the switch to tf_keras would have to change model.py too
    build = line_of(root / "model.py", "def build(")
    assert finding.related == ((str(root / "model.py"), build, f"the model is built by build() in model.py:{build}, with Keras 3"),)


def test_a_model_module_on_keras2_is_no_finding(tmp_path):
    root = tree(tmp_path, "multiworker_model")
    model = root / "model.py"
    model.write_text(model.read_text().replace("import keras\n", "import tf_keras as keras\n"))
    assert [f for f in process_path(str(root / "train.py"), Options()).findings if f.code == "TFD006"] == []


def test_tf_keras_model_module_under_the_legacy_switch_is_no_finding(tmp_path):
    """model.py spells tf.keras, and the entry sets TF_USE_LEGACY_KERAS=1 first: Keras 2."""
    root = tree(tmp_path, "multiworker_model")
    model = root / "model.py"
    model.write_text(model.read_text().replace("import keras\n", "from tensorflow import keras\n"))
    train = root / "train.py"
    # (tf.keras is Keras 3 without the switch.)
    assert [f.code for f in process_path(str(train), Options()).findings] == ["TFD006"]
    train.write_text('import os\n\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\n' + train.read_text())
    assert [f for f in process_path(str(train), Options()).findings if f.code == "TFD006"] == []


# --- TFD002: a batch size written in config.py, batched by the entry under a strategy --------


def test_a_batch_constant_of_a_config_module_is_reported_and_scaled_where_it_is_used(tmp_path):
    root = tree(tmp_path, "config_batch")
    config = (root / "config.py").read_bytes()
    # Nothing says whether config.py's 64 is each replica's batch or the global one: reported,
    # the file left as it is, scaled only with --unsafe-fixes.
    result = process_path(str(root / "train.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD002"]
    assert finding.line == line_of(root / "train.py", ".batch(config.BATCH_SIZE)")
    size = line_of(root / "config.py", "BATCH_SIZE = 64")
    assert finding.related == ((str(root / "config.py"), size, f"BATCH_SIZE = 64 in config.py:{size}"),)
    assert not finding.fixable and "--unsafe-fixes" in finding.reason
    assert result.new_text is None
    result = process_path(str(root / "train.py"), Options(unsafe_fixes=True))
    [finding] = [f for f in result.findings if f.code == "TFD002"]
    assert finding.fixable
    # The fix is the entry's alone: each replica gets config.BATCH_SIZE; config.py, which other
    # modules may read, is not changed.
    assert ".batch(config.BATCH_SIZE * strategy.num_replicas_in_sync)" in result.new_text
    assert (root / "config.py").read_bytes() == config


@pytest.mark.parametrize(
    "old, new",
    [
        ("BATCH_SIZE = 64", "BATCH_SIZE = 64  # the global batch, split across the GPUs"),
        ("BATCH_SIZE = 64", "# Summed over every GPU.\nBATCH_SIZE = 64"),
        ("BATCH_SIZE = 64", "BATCH_SIZE = int('64')"),
    ],
    ids=["comment-global", "comment-gpus", "not-a-literal"],
)
def test_a_config_constant_said_global_or_not_written_is_no_finding(tmp_path, old, new):
    root = tree(tmp_path, "config_batch")
    config = root / "config.py"
    config.write_text(config.read_text().replace(old, new))
    assert [f for f in process_path(str(root / "train.py"), Options()).findings if f.code == "TFD002"] == []
    if "#" in new:
        # The same imported by name.
        train = root / "train.py"
        train.write_text(train.read_text().replace("import config\n", "from config import BATCH_SIZE, EPOCHS, LEARNING_RATE\n").replace("config.", ""))
        assert [f for f in process_path(str(train), Options()).findings if f.code == "TFD002"] == []


@pytest.mark.parametrize(
    "comment, per_device",
    [
        ("  # per GPU", True),
        ("  # batch size per replica", True),
        ("\n# Each GPU gets this many examples a step.", True),
        ("  # tuned on the GPU", False),
    ],
)
def test_a_config_constant_said_per_device_is_a_finding(tmp_path, comment, per_device):
    """Words for one device do not make the value global (the comment is about its device).
    Words saying it is one device's batch make the fix a default one, read by the attribute
    or by a name imported from config.py; "tuned on the GPU" says neither: reported, fixed
    only with --unsafe-fixes."""
    root = tree(tmp_path, "config_batch")
    config = root / "config.py"
    text = config.read_text()
    if comment.startswith("\n"):
        text = text.replace("BATCH_SIZE = 64", comment.lstrip("\n") + "\nBATCH_SIZE = 64")
    else:
        text = text.replace("BATCH_SIZE = 64", "BATCH_SIZE = 64" + comment)
    config.write_text(text)
    train = root / "train.py"
    for _ in ("attribute", "imported by name"):
        findings = [f for f in process_path(str(train), Options()).findings if f.code == "TFD002"]
        assert len(findings) == 1 and findings[0].fixable is per_device
        if not per_device:
            assert "--unsafe-fixes" in findings[0].reason
            findings = [f for f in process_path(str(train), Options(unsafe_fixes=True)).findings if f.code == "TFD002"]
            assert len(findings) == 1 and findings[0].fixable
        train.write_text(train.read_text().replace("import config\n", "from config import BATCH_SIZE as BATCH, EPOCHS, LEARNING_RATE\n")
                         .replace("config.BATCH_SIZE", "BATCH").replace("config.", ""))


def test_a_config_attribute_without_a_project_is_chosen_at_run_time(tmp_path):
    """Standard input: ``config.BATCH_SIZE`` may be anything (as ``FLAGS.batch_size``)."""
    root = tree(tmp_path, "config_batch")
    result = CliRunner().invoke(main, ["check", "-"], input=(root / "train.py").read_text())
    assert result.exit_code == 0 and "TFD002" not in result.stdout


def test_a_notebook_step_names_its_cell_as_the_related_place(tmp_path, monkeypatch):
    """trainer.py's code as a notebook, one cell per block: the finding stays at losses.py's
    line; the related place is the step's line in its cell."""
    root = tree(tmp_path, "loss_module")
    trainer = root / "trainer.py"
    blocks = trainer.read_text().split("\n\n\n")
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": b.strip("\n")} for b in blocks]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (root / "trainer.ipynb").write_text(json.dumps(notebook, indent=1))
    trainer.unlink()
    cell = next(i for i, b in enumerate(blocks, 1) if "compute_loss(y" in b)
    line = next(i for i, l in enumerate(blocks[cell - 1].strip("\n").splitlines(), 1) if "compute_loss(y" in l)
    monkeypatch.chdir(root)
    mean = line_of(root / "losses.py", "return tf.reduce_mean(per_example)")
    code, text, _ = run("check", "--no-cache", ".")
    assert f"losses.py:{mean}:12: TFD004 " in text and f"(used by trainer.ipynb:cell {cell}:{line})" in text
    _, out, _ = run("check", "--no-cache", "--format", "sarif", ".")
    [result] = json.loads(out)["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "losses.py"
    [related] = result["relatedLocations"]
    assert related["physicalLocation"] == {"artifactLocation": {"uri": "trainer.ipynb", "uriBaseId": "%SRCROOT%"}}
    assert related["message"]["text"] == f"used by trainer.ipynb:cell {cell}:{line}"


@pytest.mark.parametrize(
    "body",
    [
        "return scale * tf.reduce_mean(per_example)",  # the caller may pass 1 / replicas
        "return tf.reduce_mean(per_example) / scale",  # or the replica count
        "return tf.reduce_mean(per_example) / SCALE",  # a global of losses.py
    ],
    ids=["weight-parameter", "divisor-parameter", "divisor-global"],
)
def test_a_loss_function_scaled_by_what_its_caller_passes_is_not_judged(tmp_path, body):
    root = tree(tmp_path, "loss_module")
    losses = root / "losses.py"
    losses.write_text(
        losses.read_text()
        .replace("def compute_loss(labels, predictions):", "SCALE = 2\n\n\ndef compute_loss(labels, predictions, scale=1.0):")
        .replace("return tf.reduce_mean(per_example)", body)
    )
    assert [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"] == []


def test_a_loss_function_weighed_by_a_number_of_its_own_is_still_a_mean(tmp_path):
    root = tree(tmp_path, "loss_module")
    losses = root / "losses.py"
    losses.write_text(losses.read_text().replace("return tf.reduce_mean(per_example)", "return 0.5 * tf.reduce_mean(per_example) / 2"))
    [finding] = [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"]
    assert finding.path == str(root / "losses.py")


def test_a_local_mean_beside_an_imported_one_is_not_fixed_alone(tmp_path):
    """Fixing the step's own mean and not losses.py's would change the balance of the loss."""
    root = tree(tmp_path, "loss_module")
    trainer = root / "trainer.py"
    trainer.write_text(trainer.read_text().replace(
        "loss = compute_loss(y, model(x, training=True))",
        "loss = compute_loss(y, model(x, training=True)) + 0.01 * tf.reduce_mean(tf.square(model(x, training=True)))",
    ))
    result = process_path(str(trainer), Options())
    found = sorted((f.path is None, f.fixable) for f in result.findings if f.code == "TFD004")
    assert found == [(False, False), (True, False)]
    assert not result.changed


def test_a_batch_constant_imported_by_name_names_where_it_is_written(tmp_path):
    root = tree(tmp_path, "config_batch")
    train = root / "train.py"
    train.write_text(train.read_text().replace("import config\n", "from config import BATCH_SIZE as BATCH, EPOCHS, LEARNING_RATE\n")
                     .replace("config.BATCH_SIZE", "BATCH").replace("config.", ""))
    size = line_of(root / "config.py", "BATCH_SIZE = 64")
    # Reported by default (nothing says the 64 is per replica), fixed with --unsafe-fixes.
    for options in (Options(), Options(unsafe_fixes=True)):
        result = process_path(str(train), options)
        [finding] = [f for f in result.findings if f.code == "TFD002"]
        assert finding.related == ((str(root / "config.py"), size, f"BATCH_SIZE = 64 in config.py:{size}"),)
        assert finding.fixable is options.unsafe_fixes
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in result.new_text


@pytest.mark.parametrize(
    "name, text",
    [
        ("Dockerfile", "FROM tensorflow/tensorflow:2.17.0\nENV TF_USE_LEGACY_KERAS=1\nCOPY . /app\n"),
        ("Dockerfile", "FROM python:3.11\nENV PYTHONUNBUFFERED=1 TF_USE_LEGACY_KERAS 1\n"),
        (".env", "TF_USE_LEGACY_KERAS=1\n"),
    ],
    ids=["dockerfile", "dockerfile-two-variables", "dotenv"],
)
def test_a_repository_that_runs_its_programs_on_tf_keras_2_is_no_tfd006_finding(tmp_path, monkeypatch, cached, name, text):
    """model.py spells tf.keras; the repository's own way of running it sets
    TF_USE_LEGACY_KERAS=1: Keras 2, where fit works. With the cache on, removing that file
    brings the finding back."""
    root = tree(tmp_path, "multiworker_model")
    model = root / "model.py"
    model.write_text(model.read_text().replace("import keras\n", "from tensorflow import keras\n"))
    monkeypatch.chdir(root)
    code, out, _ = run("check", "train.py")
    assert code == 1 and "TFD006" in out
    (root / name).write_text(text)
    code, out, _ = run("check", "train.py")
    assert code == 0 and "TFD006" not in out
    (root / name).unlink()
    code, out, _ = run("check", "train.py")
    assert code == 1 and "TFD006" in out


def test_a_dockerfile_does_not_make_import_keras_keras_2(tmp_path):
    """TF_USE_LEGACY_KERAS switches tf.keras, never ``import keras``."""
    root = tree(tmp_path, "multiworker_model")
    (root / "Dockerfile").write_text("FROM tensorflow/tensorflow:2.17.0\nENV TF_USE_LEGACY_KERAS=1\n")
    assert [f.code for f in process_path(str(root / "train.py"), Options()).findings] == ["TFD006"]


# --- a layer's loss read from what an instance of another module's class returns -------------


def _tfd004(root: Path, name: str = "trainer.py"):
    return [f for f in process_path(str(root / name), Options()).findings if f.code == "TFD004"]


def test_a_mean_returned_by_a_layer_of_another_module_is_reported_at_the_mean(tmp_path):
    """``out["vq"]["commitment"]``: an entry of the dict ``self.quantizer(encoded)`` returns
    (``Quantizer.call`` of quantizer.py), read through a method of the trainer and through
    ``record()`` of tracking.py, which returns its argument."""
    root = tree(tmp_path, "layer_loss")
    [finding] = _tfd004(root)
    assert finding.path == str(root / "quantizer.py")
    assert finding.line == line_of(root / "quantizer.py", "commitment = self.cost * tf.reduce_mean(")
    used = line_of(root / "trainer.py", '"vq": self.quantizer(encoded)')
    assert finding.related == ((str(root / "trainer.py"), used, f"used by trainer.py:{used}"),)
    assert not finding.fixable and "Quantizer.call()" in finding.reason
    assert process_path(str(root / "quantizer.py"), Options()).findings == ()


@pytest.mark.parametrize("old, new", [
    # Divided by the replica count in the step, or in the layer itself.
    ('loss += record(out["vq"]["commitment"], self.commitment_metric)',
     'loss += record(out["vq"]["commitment"], self.commitment_metric) / self.strategy.num_replicas_in_sync'),
    ("commitment = self.cost * tf.reduce_mean((tf.stop_gradient(quantised) - z) ** 2)",
     "commitment = self.cost * tf.reduce_mean((tf.stop_gradient(quantised) - z) ** 2) / tf.distribute.get_replica_context().num_replicas_in_sync"),
    # Another entry: one value per example, averaged over the global batch in the step.
    ('loss += record(out["vq"]["commitment"], self.commitment_metric)', "pass"),
])
def test_a_layer_loss_divided_by_the_replicas_or_not_used_is_no_finding(tmp_path, old, new):
    root = tree(tmp_path, "layer_loss")
    for name in ("trainer.py", "quantizer.py"):
        path = root / name
        path.write_text(path.read_text().replace(old, new))
    assert new in (root / "trainer.py").read_text() + (root / "quantizer.py").read_text()
    assert _tfd004(root) == []


@pytest.mark.parametrize("old, new", [
    # The attribute may also hold what a function of another module makes: not followed.
    ("            self.quantizer = Quantizer(16, 4)\n",
     "            self.quantizer = Quantizer(16, 4) if strategy else make_quantizer()\n"),
    ("            self.quantizer = Quantizer(16, 4)\n",
     "            self.quantizer = Quantizer(16, 4)\n            if not strategy:\n                self.quantizer = make_quantizer()\n"),
    ("            self.quantizer = Quantizer(16, 4)\n",
     "            self.quantizer, self.spare = Quantizer(16, 4), make_quantizer()\n"),
    # record() returns something else than its argument.
    ("    return value\n", "    return metric.result()\n"),
    # An entry of an entry of what the layer returns is not followed into it.
    ('return {"quantised": quantised, "commitment": commitment}',
     'return {"quantised": quantised, "commitment": {"total": commitment}}'),
])
def test_a_layer_loss_that_cannot_be_followed_is_not_guessed(tmp_path, old, new):
    root = tree(tmp_path, "layer_loss")
    (root / "quantizer.py").write_text((root / "quantizer.py").read_text() + "\n\ndef make_quantizer():\n    return Quantizer(16, 4)\n")
    (root / "trainer.py").write_text((root / "trainer.py").read_text().replace("from quantizer import Quantizer", "from quantizer import Quantizer, make_quantizer"))
    changed = False
    for name in ("trainer.py", "quantizer.py", "tracking.py"):
        path = root / name
        text = path.read_text()
        changed |= old in text
        path.write_text(text.replace(old, new))
    assert changed
    assert _tfd004(root) == []


def test_an_attribute_of_the_layer_set_elsewhere_does_not_hide_it(tmp_path):
    root = tree(tmp_path, "layer_loss")
    trainer = root / "trainer.py"
    trainer.write_text(trainer.read_text().replace(
        "            self.quantizer = Quantizer(16, 4)\n",
        "            self.quantizer = Quantizer(16, 4)\n            self.quantizer.trainable = True\n"))
    [finding] = _tfd004(root)
    assert finding.path == str(root / "quantizer.py")


def test_the_layer_loss_finding_follows_edits_of_the_layer_and_of_record_with_the_cache_on(tmp_path, monkeypatch, cached):
    """The finding at quantizer.py's mean is found through trainer.py, quantizer.py and
    tracking.py: editing either of the other two changes it, warm as cold."""
    root = tree(tmp_path, "layer_loss")
    monkeypatch.chdir(root)
    mean = line_of(root / "quantizer.py", "commitment = self.cost * tf.reduce_mean(")
    cold = run("check", ".")
    assert f"quantizer.py:{mean}:" in cold[1] and cold == run("check", "--no-cache", ".")
    assert run("check", ".") == cold

    tracking = root / "tracking.py"
    original = tracking.read_text()
    tracking.write_text(original.replace("    return value\n", "    return metric.result()\n"))
    edited = run("check", ".")
    assert "TFD004" not in edited[1] and edited == run("check", "--no-cache", ".")
    tracking.write_text(original)
    assert run("check", ".") == cold

    quantizer = root / "quantizer.py"
    quantizer.write_text(quantizer.read_text().replace(
        "(tf.stop_gradient(quantised) - z) ** 2)", "(tf.stop_gradient(quantised) - z) ** 2) / tf.distribute.get_replica_context().num_replicas_in_sync"))
    edited = run("check", ".")
    assert "TFD004" not in edited[1] and edited == run("check", "--no-cache", ".")


# --- a loss function of another module passed to the step as an argument ---------------------


def test_a_loss_function_passed_to_the_step_through_parameters_is_followed_to_its_module(tmp_path):
    """``fit(dataset, compute_loss)`` -> ``distributed_step(batch, loss_fn)`` ->
    ``strategy.run(train_step, args=(inputs, loss_fn))``: the step's ``loss_fn(...)`` is
    losses.py's ``compute_loss``, whose mean is reported there, naming the call in the step."""
    root = tree(tmp_path, "passed_loss")
    [finding] = _tfd004(root)
    assert finding.path == str(root / "losses.py")
    assert finding.line == line_of(root / "losses.py", "return tf.reduce_mean(per_example)")
    used = line_of(root / "trainer.py", "loss = loss_fn(y, model(x, training=True))")
    assert finding.related == ((str(root / "trainer.py"), used, f"used by trainer.py:{used}"),)
    assert not finding.fixable and "compute_loss()" in finding.reason


@pytest.mark.parametrize("old, new", [
    # The function passed averages over the global batch.
    ("from losses import compute_loss", "from losses import global_loss as compute_loss"),
    # The step divides what it is given by the replica count.
    ("loss = loss_fn(y, model(x, training=True))", "loss = loss_fn(y, model(x, training=True)) / strategy.num_replicas_in_sync"),
])
def test_a_passed_loss_function_that_is_right_is_no_finding(tmp_path, old, new):
    root = tree(tmp_path, "passed_loss")
    trainer = root / "trainer.py"
    _edit(trainer, old, new)
    assert _tfd004(root) == []


@pytest.mark.parametrize("old, new", [
    # Another call passes a function this file makes: what loss_fn is, is not one function
    # of another module.
    ("        for batch in strategy.experimental_distribute_dataset(dataset):\n",
     "        distributed_step(next(iter(dataset)), lambda y, p: tf.reduce_sum(p))\n"
     "        for batch in strategy.experimental_distribute_dataset(dataset):\n"),
    # The function holding the parameter is used otherwise than called.
    ("features = np.random.rand", "STEPS = {'fit': fit}\nfeatures = np.random.rand"),
    # What is passed is not known here.
    ("fit(tf.data.Dataset.from_tensor_slices((features, labels)).batch(GLOBAL_BATCH), compute_loss)",
     "fit(tf.data.Dataset.from_tensor_slices((features, labels)).batch(GLOBAL_BATCH), keras.losses.get('mse'))"),
])
def test_a_passed_loss_function_that_cannot_be_followed_is_not_guessed(tmp_path, old, new):
    root = tree(tmp_path, "passed_loss")
    trainer = root / "trainer.py"
    _edit(trainer, old, new)
    assert _tfd004(root) == []


# --- a step's object known only from a caller in another module -------------------------------


def caller_object_places(root: Path) -> tuple[int, int]:
    return line_of(root / "losses.py", "return tf.reduce_mean("), line_of(root / "fit.py", "loss_value, grads = obj.grad()")


def test_a_step_whose_object_comes_from_a_caller_in_another_module_is_reported_at_the_mean(tmp_path):
    """fit.py's step applies what obj.grad() returns; obj is fit_dist's parameter, which only
    solver.py calls, with self (a Solver): Solver.grad differentiates losses.mse's mean."""
    root = tree(tmp_path, "caller_object")
    mean, step = caller_object_places(root)
    result = process_path(str(root / "fit.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD004"]
    assert (finding.path, finding.line) == (str(root / "losses.py"), mean)
    assert finding.related == ((str(root / "fit.py"), step, f"used by fit.py:{step}"),)
    assert not finding.fixable and not result.changed
    for other in ("solver.py", "losses.py", "run.py"):
        assert [f for f in process_path(str(root / other), Options()).findings if f.code == "TFD004"] == []


@pytest.mark.parametrize("path, old, new", [
    # The method divides by the replica count: right.
    ("solver.py", "loss_value = self.update_loss()", "loss_value = self.update_loss() / self.strategy.num_replicas_in_sync"),
    # The method takes no gradient.
    ("solver.py", "grads = tape.gradient(loss_value, self.model.trainable_variables)", "grads = [tf.zeros_like(v) for v in self.model.trainable_variables]"),
    # A class of solver.py derives from Solver: the object may be of either.
    ("solver.py", "    def fit(self, steps):", "    def fit(self, steps):\n        return Solver.fit(self, steps)\n\n\nclass Other(Solver):\n    def grad(self):\n        return 0.0, []\n\n\nclass Third:\n    def fit(self, steps):"),
    # The caller passes what it was given.
    ("solver.py", "fit_dist(self, steps)", "fit_dist(steps.obj, steps)"),
    # fit.py calls fit_dist itself too: its own callers speak for it.
    ("fit.py", "        distributed_train_step(obj, next(batches))", "        distributed_train_step(obj, next(batches))\n\n\nfit_dist(None, 0)"),
])
def test_a_caller_object_that_is_right_or_cannot_be_followed_is_no_finding(tmp_path, path, old, new):
    root = tree(tmp_path, "caller_object")
    target = root / path
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new))
    assert [f for f in process_path(str(root / "fit.py"), Options()).findings if f.code == "TFD004"] == []


def test_an_object_a_caller_makes_of_a_class_it_imports_is_followed_to_that_class(tmp_path):
    """run.py makes the Solver (imported from solver.py) and hands it to fit_dist itself."""
    root = tree(tmp_path, "caller_object")
    solver = root / "solver.py"
    solver.write_text(solver.read_text().replace("        fit_dist(self, steps)", "        pass"))
    run_py = root / "run.py"
    run_py.write_text(run_py.read_text().replace(
        "Solver(x, tf.reduce_sum(x, axis=1, keepdims=True)).fit(4)",
        "from fit import fit_dist\n\nsolver = Solver(x, tf.reduce_sum(x, axis=1, keepdims=True))\nfit_dist(solver, 4)",
    ))
    mean, step = caller_object_places(root)
    [finding] = [f for f in process_path(str(root / "fit.py"), Options()).findings if f.code == "TFD004"]
    assert (finding.path, finding.line) == (str(root / "losses.py"), mean)
    assert finding.related == ((str(root / "fit.py"), step, f"used by fit.py:{step}"),)


def test_another_caller_passing_an_unknown_object_stops_the_finding(tmp_path):
    root = tree(tmp_path, "caller_object")
    (root / "tools").mkdir()
    (root / "tools" / "again.py").write_text("from fit import fit_dist\n\n\ndef again(thing):\n    fit_dist(thing, 1)\n")
    assert [f for f in process_path(str(root / "fit.py"), Options()).findings if f.code == "TFD004"] == []


def test_the_caller_object_finding_follows_the_callers_with_the_cache_on(tmp_path, monkeypatch, cached):
    """fit.py's answer depends on the modules that spell fit_dist (and what they read): editing
    the caller, or adding a module that calls fit_dist, checks fit.py again; a module that does
    not spell it leaves fit.py's answer in the cache."""
    root = tree(tmp_path, "caller_object")
    monkeypatch.chdir(root)
    mean, step = caller_object_places(root)

    def check():
        before = len(cached)
        outcome = run("check", "fit.py")
        return outcome, len(cached) - before

    cold, count = check()
    assert count == 1 and f"losses.py:{mean}:12: TFD004" in cold[1] and f"(used by fit.py:{step})" in cold[1]
    assert check() == (cold, 0)

    (root / "run.py").write_text((root / "run.py").read_text() + "# edited\n")
    (root / "notes.py").write_text("NOTE = 1\n")
    assert check() == (cold, 0)

    solver = root / "solver.py"
    original = solver.read_text()
    solver.write_text(original.replace("loss_value = self.update_loss()", "loss_value = self.update_loss() / self.strategy.num_replicas_in_sync"))
    edited, count = check()
    assert count == 1 and "TFD004" not in edited[1] and edited == run("check", "--no-cache", "fit.py")
    solver.write_text(original)
    assert check()[0] == cold

    (root / "again.py").write_text("from fit import fit_dist\n\n\ndef again(thing):\n    fit_dist(thing, 1)\n")
    added, count = check()
    assert count == 1 and "TFD004" not in added[1] and added == run("check", "--no-cache", "fit.py")
    (root / "again.py").unlink()
    back, _count = check()
    assert back == cold


# --- a loss function passed in by a caller in another module -----------------------------------


def test_a_loss_function_a_caller_in_another_module_passes_is_followed_to_its_module(tmp_path):
    """trainer.py's fit_one_epoch(..., loss_fn) is called only by train.py, which passes
    losses.compute_loss; the step run per replica calls loss_fn: TFD004 at the mean in
    losses.py, naming the step in trainer.py."""
    root = tree(tmp_path, "passed_loss_caller")
    result = process_path(str(root / "trainer.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD004"]
    step = line_of(root / "trainer.py", "loss = loss_fn(")
    assert (finding.path, finding.line) == (str(root / "losses.py"), line_of(root / "losses.py", "return tf.reduce_mean(per_example)"))
    assert finding.related == ((str(root / "trainer.py"), step, f"used by trainer.py:{step}"),)
    assert not finding.fixable and not result.changed


def test_a_loss_function_defined_by_the_caller_is_followed_there(tmp_path):
    root = tree(tmp_path, "passed_loss_caller")
    train = root / "train.py"
    train.write_text(train.read_text().replace("from losses import compute_loss\n", "").replace(
        "GLOBAL_BATCH = 64\n",
        "GLOBAL_BATCH = 64\n\n\ndef compute_loss(labels, predictions):\n"
        "    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, predictions, from_logits=True))\n",
    ))
    [finding] = [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"]
    assert (finding.path, finding.line) == (str(train), line_of(train, "return tf.reduce_mean("))


@pytest.mark.parametrize("old, new", [
    # The caller passes a loss averaged over the global batch: right.
    ("fit_one_epoch(model, optimizer, strategy, dataset, compute_loss)", "fit_one_epoch(model, optimizer, strategy, dataset, global_loss)"),
    # A lambda: not followed.
    ("fit_one_epoch(model, optimizer, strategy, dataset, compute_loss)", "fit_one_epoch(model, optimizer, strategy, dataset, lambda y, p: compute_loss(y, p))"),
    # Another call passes what it was given.
    ("for epoch in range(2):", "def again(fn):\n    fit_one_epoch(model, optimizer, strategy, dataset, fn)\n\n\nfor epoch in range(2):"),
])
def test_a_passed_in_loss_that_is_right_or_cannot_be_followed_is_no_finding(tmp_path, old, new):
    root = tree(tmp_path, "passed_loss_caller")
    train = root / "train.py"
    text = train.read_text()
    assert old in text
    train.write_text(text.replace(old, new).replace("from losses import compute_loss", "from losses import compute_loss, global_loss"))
    assert [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"] == []


def test_the_passed_in_loss_finding_follows_the_caller_with_the_cache_on(tmp_path, monkeypatch, cached):
    root = tree(tmp_path, "passed_loss_caller")
    monkeypatch.chdir(root)
    cold = run("check", "trainer.py")
    assert "losses.py:9:12: TFD004" in cold[1] and run("check", "trainer.py") == cold
    train = root / "train.py"
    train.write_text(train.read_text().replace("import compute_loss", "import global_loss").replace(", compute_loss)", ", global_loss)"))
    edited = run("check", "trainer.py")
    assert "TFD004" not in edited[1] and edited == run("check", "--no-cache", "trainer.py")


# --- a reduction only behind a guard the step's path rules out ---------------------------------


def _tfd004_places(root: Path) -> list[tuple[str, int]]:
    found = process_path(str(root / "fit.py"), Options()).findings
    return sorted((Path(f.path).name, f.line) for f in found if f.code == "TFD004")


def test_a_mean_only_behind_a_raise_the_callers_path_takes_is_not_reported(tmp_path):
    """Solver.fit raises for ``self.adaptive and self.dist`` before ``if self.dist:
    fit_dist(self, ...)``, so the step never runs update_loss's adaptive branches (nor what a
    flag made only there selects), and mse(pred, y) leaves weights at None: only mse's
    unweighted mean reaches the gradient."""
    root = tree(tmp_path, "guarded_branch")
    plain = line_of(root / "losses.py", "return tf.reduce_mean(tf.square(pred - actual))")
    assert _tfd004_places(root) == [("losses.py", plain)]


@pytest.mark.parametrize("path, old, new", [
    # No guard: the adaptive branches may run under the strategy.
    ("solver.py", "        if self.adaptive and self.dist:\n            raise ValueError(\"adaptive solvers do not train distributed\")\n", ""),
    # The step's module sets the attribute: what the guard said no longer holds.
    ("fit.py", "        obj.inputs = inputs\n", "        obj.inputs = inputs\n        obj.adaptive = True\n"),
    # A method the step runs sets it.
    ("solver.py", "        pred = self.model(self.x)\n", "        pred = self.model(self.x)\n        self.adaptive = bool(self.lambdas)\n"),
    # A guard that does not always leave says nothing.
    ("solver.py", "            raise ValueError(\"adaptive solvers do not train distributed\")", "            print(\"adaptive solvers do not train distributed\")"),
])
def test_without_a_guard_that_holds_every_branch_is_reported(tmp_path, path, old, new):
    root = tree(tmp_path, "guarded_branch")
    target = root / path
    _edit(target, old, new)
    lines = root / "losses.py"
    expected = sorted(
        ("losses.py", line_of(lines, text))
        for text in ("return tf.reduce_mean(tf.square(weights", "return tf.reduce_mean(tf.square(pred - actual))", "return tf.reduce_mean(lambdas")
    )
    assert _tfd004_places(root) == expected


def test_an_early_return_guards_as_a_raise_does(tmp_path):
    root = tree(tmp_path, "guarded_branch")
    solver = root / "solver.py"
    solver.write_text(solver.read_text().replace("            raise ValueError(\"adaptive solvers do not train distributed\")", "            return None"))
    plain = line_of(root / "losses.py", "return tf.reduce_mean(tf.square(pred - actual))")
    assert _tfd004_places(root) == [("losses.py", plain)]


def test_a_call_passing_the_parameter_reaches_the_branch_it_guards(tmp_path):
    root = tree(tmp_path, "guarded_branch")
    solver = root / "solver.py"
    solver.write_text(solver.read_text().replace("            loss = mse(pred, self.y)\n", "            loss = mse(pred, self.y, weights=2.0)\n"))
    lines = root / "losses.py"
    assert _tfd004_places(root) == sorted(
        ("losses.py", line_of(lines, text)) for text in ("return tf.reduce_mean(tf.square(weights", "return tf.reduce_mean(tf.square(pred - actual))")
    )


# --- a step a factory returns, given a loss a factory of another module makes --------------------


def test_a_count_normalised_loss_reaching_a_factory_made_step_is_reported_where_it_divides(tmp_path):
    """yolox's shape: trainer.get_train_step_fn returns the step strategy.run runs; the loop
    calls what it returns with the loss_fn train.py passes, made by losses.get_loss (a
    closure); its loss is a sum divided by the replica's own foreground count."""
    root = tree(tmp_path, "factory_step")
    divide = line_of(root / "losses.py", "return loss / num_fg")
    step = line_of(root / "trainer.py", "loss_value = loss_fn([outputs, targets])")
    result = process_path(str(root / "trainer.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD004"]
    assert (finding.path, finding.line) == (str(root / "losses.py"), divide)
    assert finding.related == ((str(root / "trainer.py"), step, f"used by trainer.py:{step}"),)
    assert "count of one replica's own examples" in finding.message
    assert "all_reduce('sum', count)" in finding.reason
    assert not finding.fixable and not result.changed


def test_a_count_a_while_loop_accumulates_is_one_too(tmp_path):
    root = tree(tmp_path, "factory_step")
    losses = root / "losses.py"
    losses.write_text(losses.read_text().replace(
        "    num_fg = tf.maximum(tf.reduce_sum(foreground), 1.0)\n",
        "    num_fg = 0.0\n"
        "\n"
        "    def body(b, num_fg):\n"
        "        return b + 1, num_fg + tf.reduce_sum(foreground[b])\n"
        "\n"
        "    _, num_fg = tf.while_loop(lambda b, *rest: b < tf.shape(labels)[0], body, [0, num_fg])\n"
        "    num_fg = tf.cast(tf.maximum(num_fg, 1), tf.float32)\n",
    ))
    [finding] = [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"]
    assert (finding.path, finding.line) == (str(losses), line_of(losses, "return loss / num_fg"))


@pytest.mark.parametrize("path, old, new", [
    # The count is summed over the replicas: right.
    ("losses.py", "    return loss / num_fg", "    num_fg = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, num_fg)\n    return loss / num_fg"),
    # Divided by what the caller knows (a parameter): not judged.
    ("losses.py", "    return loss / num_fg", "    return loss / num_classes"),
    # The step the factory returns is used otherwise than called.
    ("trainer.py", "    train_step = get_train_step_fn(strategy)\n", "    train_step = get_train_step_fn(strategy)\n    steps = [train_step]\n"),
    # The loss factory returns one of two functions.
    ("losses.py", "    return loss_fn\n", "    if num_classes > 1:\n        return loss_fn\n    return get_losses\n"),
    # The entry passes something else too.
    ("train.py", "fit_one_epoch(model, loss_fn, optimizer, dataset, strategy)", "fit_one_epoch(model, loss_fn, optimizer, dataset, strategy)\nfit_one_epoch(model, lambda args: 0.0, optimizer, dataset, strategy)"),
])
def test_a_factory_step_that_is_right_or_cannot_be_followed_is_no_finding(tmp_path, path, old, new):
    root = tree(tmp_path, "factory_step")
    target = root / path
    _edit(target, old, new)
    assert [f for f in process_path(str(root / "trainer.py"), Options()).findings if f.code == "TFD004"] == []


def test_a_step_loss_divided_by_its_own_batch_in_one_file_is_reported_and_not_fixed(tmp_path):
    """The same division in the step itself: tf.shape(x)[0] is the replica's batch."""
    script = tmp_path / "train.py"
    script.write_text(
        "import tensorflow as tf\n"
        "\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
        "    optimizer = tf.keras.optimizers.Adam()\n"
        "\n"
        "\n"
        "def train_step(x, y):\n"
        "    with tf.GradientTape() as tape:\n"
        "        per_example = tf.square(model(x, training=True) - y)\n"
        "        loss = tf.reduce_sum(per_example) / tf.cast(tf.shape(x)[0], tf.float32)\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
        "\n"
        "\n"
        "@tf.function\n"
        "def step(x, y):\n"
        "    strategy.run(train_step, args=(x, y))\n"
    )
    result = process_path(str(script), Options())
    [finding] = [f for f in result.findings if f.code == "TFD004"]
    assert finding.line == 12 and "count of one replica's own examples" in finding.message
    assert not finding.fixable and not result.changed


# --- caller_scope: a class's training methods called in the scope by another module -----------

def _tfd001(root: Path) -> list:
    return [f for f in process_path(str(root / "configuration.py"), Options()).findings if f.code == "TFD001"]


def test_a_method_that_only_another_module_calls_in_the_scope_builds_in_it(tmp_path):
    """ModelConfiguration.train builds, compiles and fits; only train.py calls it, inside
    ``with config.strategy.scope():`` of the object it made: the model is made in the scope."""
    root = tree(tmp_path, "caller_scope")
    assert _tfd001(root) == []
    code, out, _err = run("check", str(root))
    assert code == 0 and "TFD001" not in out


@pytest.mark.parametrize(
    "old, new",
    [
        # called outside the scope
        ("with config.strategy.scope():\n    config.train(x, y)\n", "config.train(x, y)\n"),
        # once in the scope, once outside it
        ("    config.train(x, y)\n", "    config.train(x, y)\nconfig.train(x, y)\n"),
        # the object handed on: whoever gets it may call train anywhere
        ("    config.train(x, y)\n", "    config.train(x, y)\nprint(config)\n"),
        # the method itself handed on
        ("    config.train(x, y)\n", "    config.train(x, y)\nfit = config.train\n"),
        # another object in the same name, called outside
        ("config = ModelConfiguration(1e-3)\n", "config = ModelConfiguration(1e-3)\nModelConfiguration(0.1).train(x, y)\n"),
    ],
)
def test_a_method_called_outside_the_scope_or_out_of_sight_still_builds_outside(tmp_path, old, new):
    root = tree(tmp_path, "caller_scope")
    script = root / "train.py"
    text = script.read_text()
    assert old in text
    script.write_text(text.replace(old, new, 1))
    found = _tfd001(root)
    assert [f.line for f in found if "model built" in f.message] == [line_of(root / "configuration.py", "self.model = self.configure_model()")]


def test_a_second_module_calling_the_method_outside_the_scope_counts(tmp_path):
    root = tree(tmp_path, "caller_scope")
    (root / "evaluate.py").write_text(
        "import numpy as np\n\nfrom configuration import ModelConfiguration\n\n"
        "config = ModelConfiguration(1e-3)\nconfig.train(np.zeros((8, 8)), np.zeros((8, 2)))\n"
    )
    assert any("model built" in f.message for f in _tfd001(root))


def test_the_class_read_alone_builds_outside_the_scope(tmp_path):
    """Without the project (the module alone in a folder), nothing calls train in a scope."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(TREES / "caller_scope" / "configuration.py", alone / "configuration.py")
    assert any("model built" in f.message for f in _tfd001(alone))


# --- dataset_module: a dataset another module of the project makes, fed to strategy.run ---------

def _tfd003(root: Path) -> list:
    return [f for f in process_path(str(root / "train.py"), Options()).findings if f.code == "TFD003"]


def test_a_plain_dataset_from_another_module_fed_to_strategy_run_is_distributed(tmp_path):
    """data.make_dataset returns a tf.data dataset batched with its parameter: train.py's loop
    hands its batches to strategy.run whole. Fixed where train.py iterates it, with the batch
    train.py passes (GLOBAL_BATCH, what the step divides by)."""
    root = tree(tmp_path, "dataset_module")
    [finding] = _tfd003(root)
    assert finding.line == line_of(root / "train.py", "strategy.run(replica_step") and "batch of train_ds" in finding.message
    code, out, _err = run("fix", str(root))
    text = (root / "train.py").read_text()
    assert code == 0 or code == 1
    assert "dist_train_ds = strategy.experimental_distribute_dataset(train_ds)\n" in text
    assert "    for features, targets in dist_train_ds:\n" in text
    assert (root / "data.py").read_text() == (TREES / "dataset_module" / "data.py").read_text()
    assert _tfd003(root) == []


@pytest.mark.parametrize(
    "made, fixable",
    [
        ("train_ds, test_ds, steps = data.make_datasets(GLOBAL_BATCH)", False),  # an item of a tuple it returns
        ("train_ds = data.make_dataset(GLOBAL_BATCH).repeat(2)", True),
    ],
)
def test_other_shapes_of_a_plain_dataset_from_another_module(tmp_path, made, fixable):
    root = tree(tmp_path, "dataset_module")
    script = root / "train.py"
    script.write_text(script.read_text().replace("train_ds = data.make_dataset(GLOBAL_BATCH)", made))
    [finding] = _tfd003(root)
    assert finding.fixable is fixable


@pytest.mark.parametrize(
    "made",
    [
        "train_ds = data.distributed_dataset(strategy, GLOBAL_BATCH)",  # it distributes what it makes
        "train_ds = data._examples(64, 0)",  # not a dataset
        "train_test = data.make_datasets(GLOBAL_BATCH)\ntrain_ds = train_test[2]",  # the step count
    ],
)
def test_what_another_module_returns_distributed_or_not_a_dataset_is_no_finding(tmp_path, made):
    root = tree(tmp_path, "dataset_module")
    script = root / "train.py"
    script.write_text(script.read_text().replace("train_ds = data.make_dataset(GLOBAL_BATCH)", made))
    assert _tfd003(root) == []


def test_the_trainer_read_without_its_data_module_says_nothing(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(TREES / "dataset_module" / "train.py", alone / "train.py")
    assert _tfd003(alone) == []


def test_a_plain_dataset_from_a_method_of_another_modules_class_is_reported(tmp_path):
    """``data.RecordReader(512).dataset(GLOBAL_BATCH)``: a method the class's summary says
    returns a plain dataset; its iterator's batches go to strategy.run whole (not fixed: the
    iterator is made over an expression, not a dataset named in view)."""
    root = tree(tmp_path, "dataset_module")
    script = root / "train.py"
    old = "train_ds = data.make_dataset(GLOBAL_BATCH)\nfor epoch in range(2):\n    for features, targets in train_ds:\n"
    new = (
        "reader = data.RecordReader(512)\nbatches = iter(reader.dataset(GLOBAL_BATCH).repeat())\nfor epoch in range(2):\n"
        "    for _ in range(512 // GLOBAL_BATCH):\n        features, targets = next(batches)\n"
    )
    _edit(script, old, new)
    [finding] = _tfd003(root)
    assert not finding.fixable and "batch of batches" in finding.message
    # A method that distributes what it makes is no finding.
    module = root / "data.py"
    module.write_text(module.read_text().replace(
        "        return ds.shuffle(len(self.features), seed=0).batch(batch_size)\n",
        "        return tf.distribute.get_strategy().experimental_distribute_dataset(ds.batch(batch_size))\n",
    ))
    assert _tfd003(root) == []


# --- keras2_module: another module of the program says it runs Keras 2 -----------------------

def test_a_module_the_script_imports_says_which_keras_the_program_runs(tmp_path):
    """model.py calls experimental_run_v2 (TensorFlow 2.15 or older): train.py, which imports
    it, runs Keras 2 too, where an optimizer made before the strategy trains. Alone, or with
    model.py written for Keras 3, the optimizer is reported."""
    root = tree(tmp_path, "keras2_module")
    script = root / "train.py"
    assert [f.code for f in process_path(str(script), Options()).findings] == []
    from autofix.engine import analyse

    alone = analyse(script.read_text(), Options(select=("TFD001",)))
    assert [f.line for f in alone.findings] == [line_of(script, "optimizer = tf.keras.optimizers.Adam")]
    model = root / "model.py"
    model.write_text(model.read_text().replace("experimental_run_v2(", "run("))
    assert [f.code for f in process_path(str(script), Options()).findings] == ["TFD001"]


def test_a_script_whose_tensorflow_comes_from_a_star_import_is_fixed_only_where_that_module_is_read(tmp_path):
    """Alone, `from common import *` is a module not read: tf is TensorFlow by convention, the
    model built outside the scope is reported, nothing changed. In its project, with common.py
    read, the same file is fixed."""
    from autofix.engine import analyse

    source = (FIXTURES / "tfd001" / "report_tensorflow_from_an_unread_star_import.py").read_text()
    alone = analyse(source, Options(select=("TFD001",)))
    assert alone.findings and not any(f.fixable for f in alone.findings) and alone.new_text is None
    assert all("from common import *`, which autofix did not read" in (f.reason or "") for f in alone.findings)
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "star"\nversion = "0"\n')
    (root / "common.py").write_text("import numpy as np\nimport tensorflow as tf\n")
    (root / "train.py").write_text(source)
    # A module that does not bind tf itself (it star-imports another): still not seen.
    (root / "common.py").write_text("from more import *\n")
    (root / "more.py").write_text("import numpy as np\nimport tensorflow as tf\n")
    findings = process_path(str(root / "train.py"), Options(select=("TFD001",))).findings
    assert findings and all("whose module does not bind them itself" in (f.reason or "") for f in findings)
    (root / "common.py").write_text("import numpy as np\nimport tensorflow as tf\n")
    code, _out, _err = run("fix", "--select", "TFD001", str(root / "train.py"))
    assert code in (0, 1)
    assert "with strategy.scope():\n    model = tf.keras.Sequential(" in (root / "train.py").read_text()


# --- dead_step: a step nothing in the project runs --------------------------------------------

def _findings(root: Path) -> list:
    found = []
    for path in sorted(root.glob("*.py")):
        found.extend(process_path(str(path), Options()).findings)
    return found


def test_a_step_nothing_in_the_project_runs_is_no_finding(tmp_path):
    root = tree(tmp_path, "dead_step")
    assert [f for f in _findings(root) if f.code in ("TFD003", "TFD004")] == []
    # A module of functions (no __main__ block) is there for others to call: reported.
    script = root / "train.py"
    script.write_text(script.read_text().replace('if __name__ == "__main__":', "if True:"))
    assert "TFD004" in [f.code for f in _findings(root)]


@pytest.mark.parametrize("where", ["train.py", "evaluate.py", "launch.py"])
def test_the_same_step_run_in_the_file_or_imported_by_another_module_is_reported(tmp_path, where):
    root = tree(tmp_path, "dead_step")
    if where == "train.py":
        script = root / "train.py"
        commented = "    # for batch in strategy.experimental_distribute_dataset(data):\n    #     train_step(batch)\n"
        assert commented in script.read_text()
        script.write_text(script.read_text().replace(commented, "    for batch in strategy.experimental_distribute_dataset(data):\n        train_step(batch)\n"))
    elif where == "evaluate.py":
        (root / where).write_text("from train import train_step\n\nrunner = train_step\n")
    else:
        # An import autofix cannot resolve (the package named as installed, not as checked out)
        # still spells the name: a use.
        (root / where).write_text("from dead_step_pkg.train import train_step\n\nrunner = train_step\n")
    assert "TFD004" in [f.code for f in _findings(root)]


def test_another_module_with_its_own_step_of_that_name_does_not_make_the_step_live(tmp_path):
    """A file that spells ``train_step`` but never names the module ``train`` (its own
    ``train_step``) cannot run this one: the step stays dead."""
    root = tree(tmp_path, "dead_step")
    (root / "pretrain.py").write_text("def train_step(batch):\n    return batch\n\n\nprint(train_step(1))\n")
    assert [f for f in _findings(root) if f.code in ("TFD003", "TFD004")] == []


@pytest.mark.parametrize(
    "text",
    [
        # Imports everything of a module autofix does not resolve.
        "from dead_step_pkg.train import *\n\nrunner = train_step\n",
        # Imports a module by a name it computes.
        "import importlib\n\nrunner = importlib.import_module('dead_' + 'step').train_step\n",
    ],
)
def test_a_file_that_may_import_the_module_another_way_makes_the_step_live(tmp_path, text):
    root = tree(tmp_path, "dead_step")
    (root / "launch.py").write_text(text)
    assert "TFD004" in [f.code for f in _findings(root)]


# --- optional_strategy_caller: a trainer class given its strategy by the entry script ---------

def _tfd001(root: Path) -> list:
    return [f for f in process_path(str(root / "configuration.py"), Options()).findings if f.code == "TFD001"]


def test_a_trainer_given_its_strategy_trains_in_the_callers_scope(tmp_path):
    """train() is called in the scope on the object given the strategy, and outside it on one
    made without it (one device by choice); the base class comes from another module of the
    project and never calls train(): the model and optimizer are made in the scope."""
    root = tree(tmp_path, "optional_strategy_caller")
    assert _tfd001(root) == []


@pytest.mark.parametrize(
    "path, old, new",
    [
        # The distributed object's train() called after the scope.
        ("train.py", "        config = ModelConfiguration(1e-3, mirrored_strategy=strategy)\n        config.train()\n",
         "        config = ModelConfiguration(1e-3, mirrored_strategy=strategy)\n    config.train()\n"),
        # The base class may call train() itself.
        ("datasets.py", "        return tf.data.Dataset", "        self.train\n        return tf.data.Dataset"),
    ],
)
def test_a_trainer_whose_train_may_run_outside_the_scope_is_reported(tmp_path, path, old, new):
    root = tree(tmp_path, "optional_strategy_caller")
    changed = root / path
    _edit(changed, old, new)
    assert _tfd001(root)


# --- constructed_in_scope: __init__ runs where another module constructs the object ------------

def test_a_model_made_in_init_is_made_where_another_module_constructs_the_object(tmp_path):
    """train.py imports net.py through its own package (``from app.models.net import``, run from
    server/) and constructs TrainModel in the scope: the model TrainModel.__init__ makes for its
    strategy.run step is made there. Constructed after the scope, it is reported."""
    root = tree(tmp_path, "constructed_in_scope")
    net = root / "server" / "app" / "models" / "net.py"
    assert [f for f in process_path(str(net), Options()).findings if f.code == "TFD001"] == []
    script = root / "server" / "app" / "models" / "train.py"
    inside = "with strategy.scope():\n    model = TrainModel(16, strategy)\n"
    assert inside in script.read_text()
    script.write_text(script.read_text().replace(inside, "model = TrainModel(16, strategy)\nwith strategy.scope():\n"))
    found = [f for f in process_path(str(net), Options()).findings if f.code == "TFD001"]
    assert [f.line for f in found] == [line_of(net, "self.model = Encoder(width)")]


def test_a_module_of_the_importers_own_package_is_found_from_the_folder_it_runs_from(tmp_path):
    from autofix.analysis.project import layout

    root = tree(tmp_path, "constructed_in_scope")
    script = root / "server" / "app" / "models" / "train.py"
    assert layout.resolve_module(str(script), "app.models.net") == str(root / "server" / "app" / "models" / "net.py")
    assert layout.resolve_module(str(script), "models.net") == str(root / "server" / "app" / "models" / "net.py")  # run from app/
    assert layout.resolve_module(str(script), "app.models.missing") is None
    assert layout.resolve_module(str(script), "other.models.net") is None


def test_an_object_made_without_its_optional_strategy_is_the_single_device_path(tmp_path):
    """A second construction, without the strategy (TrainModel's strategy=None), outside the
    scope: one device by choice, which leaves __init__'s models made in the scope where the
    strategy is given. Given the strategy outside the scope, they are reported."""
    root = tree(tmp_path, "constructed_in_scope")
    net = root / "server" / "app" / "models" / "net.py"
    script = root / "server" / "app" / "models" / "train.py"
    script.write_text(script.read_text() + "\nbaseline = TrainModel(16)\nbaseline.compile(optimizer='adam', loss='mse')\n")
    assert [f for f in process_path(str(net), Options()).findings if f.code == "TFD001"] == []
    script.write_text(script.read_text().replace("baseline = TrainModel(16)\n", "baseline = TrainModel(16, strategy)\n"))
    assert [f.line for f in process_path(str(net), Options()).findings if f.code == "TFD001"] == [line_of(net, "self.model = Encoder(width)")]


def test_a_registry_call_whose_constants_reach_no_model_makes_none(tmp_path):
    root = tree(tmp_path, "loss_registry")
    result = process_path(str(root / "train.py"), Options())
    assert [f for f in result.findings if f.code == "TFD001"] == []
    assert not result.changed


@pytest.mark.parametrize(
    "old, new",
    [
        ('cycle_loss = get_loss("l1")', 'cycle_loss = get_loss("perceptual")'),
        ('cycle_loss = get_loss("l1")', 'cycle_loss = get_loss(name="perceptual")'),
        ('cycle_loss = get_loss("l1")', 'cycle_loss = get_loss(os.environ["LOSS"])'),
        ('cycle_loss = get_loss("l1")', 'cycle_loss = get_loss(**{"name": "l1"})'),
    ],
)
def test_a_registry_call_that_may_reach_the_model_is_a_model_made_outside(tmp_path, old, new):
    root = tree(tmp_path, "loss_registry")
    _edit(root / "train.py", old, new)
    _edit(root / "train.py", "import tensorflow as tf\n", "import os\n\nimport tensorflow as tf\n")
    result = process_path(str(root / "train.py"), Options())
    [finding] = [f for f in result.findings if f.code == "TFD001"]
    assert finding.line == line_of(root / "train.py", "cycle_loss = get_loss(")


def test_a_registry_whose_name_is_bound_again_is_not_judged_by_the_constant(tmp_path):
    # ``name = name.lower()``: what the test compares is no longer what the call passed.
    root = tree(tmp_path, "loss_registry")
    _edit(root / "losses.py", 'def get_loss(name="bce"):\n', 'def get_loss(name="bce"):\n    name = name.lower()\n')
    result = process_path(str(root / "train.py"), Options())
    assert len([f for f in result.findings if f.code == "TFD001"]) == 3
