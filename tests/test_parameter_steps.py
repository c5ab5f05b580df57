"""A custom step that is a method, called on a function's parameter (mnistGANs' form):
``def train(gan, ds, epochs): ... gan.step(real)`` and ``train(model, ds, EPOCHS)`` with
``model = TinyGAN(...)``.

The call is linked to the method through what every call of ``train()`` passes for ``gan``
(:meth:`Callables.passed_arguments`): ``migrate`` names it and declines with what is not
migrated yet, or with what could not be followed, at its line (never "nothing in this file
calls it"); ``check`` reports the step not run by ``strategy.run`` (TFD003) and the loss of
such a step run by it (TFD004). The trees are fixtures/projects/param_step/ and
fixtures/repo_findings/param_step/. No TensorFlow runs here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

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


def test_a_step_called_on_a_parameter_is_linked_and_declined_naming_what_is_left(tmp_path):
    root = copy(tmp_path, SINGLE)
    gan = root / "gan.py"
    result = process_path(str(gan), MIGRATE)
    assert not result.changed
    [finding] = result.findings
    assert finding.code == "TFD010" and finding.message == "trains on one device: not migrated"
    assert finding.line == line_of(gan, "gan.step(real)")
    assert "nothing in this file calls it" not in finding.reason
    assert "step() is called on gan, a parameter of train()" in finding.reason
    assert f"every call of train() passes an object of TinyGAN (line {line_of(gan, 'train(model, ds, EPOCHS)')})" in finding.reason
    assert "not migrated yet" in finding.reason


def test_on_the_command_line_the_decline_exits_1(tmp_path, monkeypatch):
    root = copy(tmp_path, SINGLE)
    (root / ".git").mkdir()
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "."], catch_exceptions=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert f"gan.py:{line_of(root / 'gan.py', 'gan.step(real)')}:" in result.stderr and "a parameter of train()" in result.stderr


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
