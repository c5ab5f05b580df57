"""A custom step that is a method, called on a function's parameter (mnistGANs' form):
``def train(gan, ds, epochs): ... gan.step(real)`` and ``train(model, ds, EPOCHS)`` with
``model = TinyGAN(...)``.

The call is linked to the method through what every call of ``train()`` passes for ``gan``
(:meth:`Callables.passed_arguments`): ``migrate`` runs it per replica with a wrapper made in
``train()`` over the dataset distributed there, or declines with what could not be followed, at
its line (never "nothing in this file calls it"); ``check`` reports the step not run by ``strategy.run`` (TFD003) and the loss of
such a step run by it (TFD004). The trees are fixtures/projects/param_step/ and
fixtures/repo_findings/param_step/; the one-file migration is proven on 2 replicas with
fixtures/tfd010/method_step_parameter (the one test marked tf).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from autofix.cli import main
from autofix.engine import Options, process_path
from fixturecases import FIXTURES

MIGRATE = Options(migrate="mirrored")
SINGLE = FIXTURES / "projects" / "param_step"
DISTRIBUTED = FIXTURES / "repo_findings" / "param_step"


def copy(tmp_path: Path, source: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def migrated(path: Path) -> str:
    result = process_path(str(path), MIGRATE)
    assert result.changed, [f.reason for f in result.findings]
    return result.new_text


def test_a_step_called_on_a_parameter_is_run_per_replica_in_that_function(tmp_path):
    root = copy(tmp_path, SINGLE)
    # (wide.py imports TinyGAN and train(), which the migration would break: see below.)
    (root / "wide.py").unlink()
    gan = root / "gan.py"
    text = migrated(gan)
    # The wrapper is made first in train(), where gan is the object every call passes.
    assert (
        "def train(gan, ds, epochs):\n"
        "    @tf.function\n"
        "    def distributed_step(real):\n"
        "        g_loss, d_loss = strategy.run(gan.step, args=(real,))\n"
        "        return strategy.reduce(tf.distribute.ReduceOp.SUM, g_loss, axis=None), "
        "strategy.reduce(tf.distribute.ReduceOp.SUM, d_loss, axis=None)\n"
    ) in text
    assert "g_loss, d_loss = distributed_step(real)" in text and "gan.step(real)" not in text
    # The one dataset every call passes is distributed in train(), before its loops.
    assert "    dist_ds = strategy.experimental_distribute_dataset(ds)\n    for ep in range(epochs):" in text
    assert "enumerate(dist_ds)" in text
    # Made where the entry trains; the model in the scope; the batch kept per replica.
    assert 'if __name__ == "__main__":\n    strategy = tf.distribute.MirroredStrategy()\n' in text
    assert "    with strategy.scope():\n        model = TinyGAN(LATENT, 4)\n    train(model, ds, EPOCHS)" in text
    assert ".batch(BATCH * strategy.num_replicas_in_sync)" in text
    # The step's losses averaged over the global batch (TFD004), in the method.
    assert text.count("/ strategy.num_replicas_in_sync") == 2
    compile(text, "gan.py", "exec")
    # Idempotent: the migrated file uses the strategy, and nothing is left to fix in it.
    gan.write_text(text)
    assert not process_path(str(gan), MIGRATE).changed
    assert process_path(str(gan), Options()).findings == ()


def test_on_the_command_line_the_migration_is_shown(tmp_path, monkeypatch):
    root = copy(tmp_path, SINGLE)
    (root / ".git").mkdir()
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "."], catch_exceptions=False)
    assert result.exit_code == 1
    # wide.py runs train() and subclasses TinyGAN: migrated, both would read the strategy only
    # gan.py's __main__ block makes, and wide.py would fail with NameError. Refused, named.
    assert "+    def distributed_step(real):" not in result.stdout
    assert "wide.py:10 uses TinyGAN of this module" in result.stdout + result.stderr
    assert "wide.py:24 uses train() of this module" in result.stdout + result.stderr
    (root / "wide.py").unlink()
    result = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "."], catch_exceptions=False)
    assert result.exit_code == 1 and "+    def distributed_step(real):" in result.stdout


def test_a_function_also_called_with_another_dataset_is_not_migrated(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, "    train(model, ds, EPOCHS)\n", "    train(model, ds, EPOCHS)\n    train(model, data, 1)\n")
    result = process_path(str(gan), MIGRATE)
    assert not result.changed
    assert any(f.code == "TFD010" and "not migrated" in f.message for f in result.findings)


def test_a_step_also_called_on_the_object_itself_is_not_migrated(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, "    train(model, ds, EPOCHS)\n", "    train(model, ds, EPOCHS)\n    model.step(data[:8])\n")
    result = process_path(str(gan), MIGRATE)
    assert not result.changed
    [finding] = [f for f in result.findings if f.code == "TFD010"]
    assert "step() is called on several objects (gan, model)" in finding.reason


def test_a_strategy_made_in_a_main_function_is_not_seen_by_train(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, 'if __name__ == "__main__":\n', 'def main():\n')
    gan.write_text(gan.read_text() + "\n\nmain()\n")
    result = process_path(str(gan), MIGRATE)
    assert not result.changed
    assert any("the strategy is made in a function, where train(), which runs the step, does not see it" in f.reason for f in result.findings)


def test_a_call_passing_what_cannot_be_followed_is_named_at_its_line(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, "    train(model, ds, EPOCHS)\n", "    train(model, ds, EPOCHS)\n    train(keras.models.load_model('gan.keras'), ds, 1)\n")
    [finding] = process_path(str(gan), MIGRATE).findings
    loaded = line_of(gan, "train(keras.models.load_model")
    assert f"the call of train() at line {loaded} passes keras.models.load_model('gan.keras')" in finding.reason
    assert "cannot be followed to an object of a class of this file" in finding.reason


def test_calls_passing_objects_of_two_classes_are_named(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, "def train(gan, ds, epochs):", "class WideGAN(TinyGAN):\n    pass\n\n\ndef train(gan, ds, epochs):")
    edit(gan, "    train(model, ds, EPOCHS)\n", "    train(model, ds, EPOCHS)\n    train(WideGAN(LATENT, 4), ds, 1)\n")
    [finding] = process_path(str(gan), MIGRATE).findings
    wide = line_of(gan, "train(WideGAN(")
    assert f"pass objects of several classes (TinyGAN (line {wide - 1}), WideGAN (line {wide}))" in finding.reason


def test_a_parameter_of_a_function_used_otherwise_than_called_says_so(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, "    train(model, ds, EPOCHS)\n", "    runner = train\n    runner(model, ds, EPOCHS)\n")
    [finding] = process_path(str(gan), MIGRATE).findings
    assert f"train() is used otherwise than called (line {line_of(gan, 'runner = train')})" in finding.reason


def test_check_reports_the_step_not_run_by_strategy_run(tmp_path):
    root = copy(tmp_path, DISTRIBUTED)
    trainer = root / "trainer.py"
    result = process_path(str(trainer), Options())
    [finding] = [f for f in result.findings if f.code == "TFD003"]
    assert finding.line == line_of(trainer, "gan.step(real)")
    assert finding.message.startswith("step() applies gradients with an optimizer made in strategy.scope() but is not run by strategy.run")
    # Made outside the scope, the optimizers are one device's: not this finding.
    edit(trainer, "    with strategy.scope():\n        model = TinyGAN(LATENT, 4)\n", "    model = TinyGAN(LATENT, 4)\n")
    assert [f for f in process_path(str(trainer), Options()).findings if f.code == "TFD003" and "not run by strategy.run" in f.message] == []


def test_check_follows_the_loss_of_a_step_run_by_strategy_run_through_a_parameter(tmp_path):
    root = copy(tmp_path, DISTRIBUTED)
    trainer = root / "trainer.py"
    edit(trainer, "g_loss, d_loss = gan.step(real)", "g_loss, d_loss = strategy.run(gan.step, args=(real,))")
    found = process_path(str(trainer), Options()).findings
    assert sorted(f.line for f in found if f.code == "TFD004") == [line_of(trainer, "g_loss = self.bce("), line_of(trainer, "d_loss = self.bce(")]
    assert not any(f.code == "TFD003" and "not run by strategy.run" in f.message for f in found)


def test_a_method_of_that_name_on_objects_of_other_classes_is_not_taken_for_the_step(tmp_path):
    """``tick(counter)`` calls ``counter.step()`` on a Counter or a Timer (classes of this file,
    neither the model's): not the call the refusal names; train()'s call that passes what
    cannot be followed is."""
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    edit(gan, "def train(gan, ds, epochs):", (
        "class Counter:\n    def step(self, x):\n        return x\n\n\n"
        "class Timer:\n    def step(self, x):\n        return x\n\n\n"
        "def tick(counter, x):\n    return counter.step(x)\n\n\n"
        "def train(gan, ds, epochs):"
    ))
    edit(gan, "    train(model, ds, EPOCHS)\n", (
        "    tick(Counter(), 1)\n    tick(Timer(), 2)\n"
        "    train(model, ds, EPOCHS)\n    train(keras.models.load_model('gan.keras'), ds, 1)\n"
    ))
    [finding] = process_path(str(gan), MIGRATE).findings
    assert finding.line == line_of(gan, "gan.step(real)") and "a parameter of train()" in finding.reason
    assert f"the call of train() at line {line_of(gan, 'train(keras.models')} passes" in finding.reason


def test_an_object_handed_to_another_modules_function_is_named_as_what_may_run_the_step(tmp_path):
    root = copy(tmp_path, SINGLE)
    wide = root / "wide.py"
    [finding] = process_path(str(wide), MIGRATE).findings
    call = line_of(wide, "train(WideGAN(8, 6), ds, 1)")
    assert finding.line == call and "nothing in this file calls it, but" in finding.reason
    assert f"WideGAN(8, 6) (an object of WideGAN) is given to train() of gan.py:{line_of(root / 'gan.py', 'def train(')} on line {call}" in finding.reason


def test_batches_a_loop_function_samples_itself_are_not_distributed_there():
    from fixturecases import read

    source = FIXTURES / "tfd010" / "report_method_step_parameter_sampled.py"
    [finding] = process_path(str(source), MIGRATE).findings
    assert finding.line == line_of(source, "model.fit_batch(batch)")
    assert "it is given batch (line" in finding.reason
    assert "not a batch of a for loop over a dataset train() is given as a parameter" in finding.reason
    assert read(source) == source.read_text()


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_the_step_run_per_replica_in_the_loop_function_trains_as_the_original(tmp_path):
    """fixtures/tfd010/method_step_parameter: the wrapper made in train(), the dataset
    distributed there, the model made in the scope where the entry trains. On 2 replicas it
    trains as the original's data-parallel step; a migration that left one loss whole on each
    replica (its gradient summed twice over) is told apart."""
    from fixturecases import read

    from autofix.smoke.compare import ComparePair, compare_many

    original = tmp_path / "method_step_parameter.py"
    original.write_text(read(FIXTURES / "tfd010" / "method_step_parameter.py"))
    right = process_path(str(original), MIGRATE).new_text
    assert right == read(FIXTURES / "tfd010" / "method_step_parameter.fixed.py")
    scaled = "head_loss = tf.reduce_mean(self.loss_fn(y, pred)) / strategy.num_replicas_in_sync"
    assert right.count(scaled) == 1
    (tmp_path / "right.py").write_text(right)
    (tmp_path / "wrong.py").write_text(right.replace(scaled, "head_loss = tf.reduce_mean(self.loss_fn(y, pred))"))
    # The object made in the call itself: the call of train() goes into the scope.
    direct = tmp_path / "direct.py"
    direct.write_text(original.read_text().replace("    net = TwoPart(5)\n    train(net, ds, EPOCHS)", "    train(TwoPart(5), ds, EPOCHS)"))
    direct_migrated = process_path(str(direct), MIGRATE).new_text
    assert "    with strategy.scope():\n        train(TwoPart(5), ds, EPOCHS)\n" in direct_migrated
    (tmp_path / "direct_migrated.py").write_text(direct_migrated)
    proven, told, direct_proven = compare_many(
        [
            ComparePair(str(tmp_path / "right.py"), str(original)),
            ComparePair(str(tmp_path / "wrong.py"), str(original)),
            ComparePair(str(tmp_path / "direct_migrated.py"), str(direct)),
        ],
        replicas=2,
        offline=True,
    )
    assert proven.compare.status == "equivalent", proven.compare.message
    assert told.compare.status == "different", told.compare.message
    assert direct_proven.compare.status == "equivalent", direct_proven.compare.message
