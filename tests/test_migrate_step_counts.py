"""`autofix migrate` on counts of optimizer steps written as numbers (a schedule's boundaries,
decay and warm-up steps, ``ModelCheckpoint(save_freq=<int>)``): the migration leaves them and
says so at each, in every output format; a count computed from the data size through the batch
follows the global batch and gets no note. tests/test_migrate_definition.py trains both
fixtures to show what the notes say."""

from __future__ import annotations

import json

from click.testing import CliRunner
from fixturecases import FIXTURES, read

from autofix.cli import main
from autofix.engine import Options, analyse

MIGRATE = Options(migrate="mirrored")
MESSAGE = "counted in optimizer steps, left as it is by the migration: on N replicas it means N x the examples"


def _notes(source: str):
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is not None, "the migration is written all the same"
    return [f for f in analysis.findings if f.message == MESSAGE]


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_each_count_of_steps_gets_a_note_at_its_line():
    source = read(FIXTURES / "tfd010" / "fit_step_counts.py")
    notes = _notes(source)
    assert [(n.line, n.reason.split(" (line")[0]) for n in notes] == [
        (_line(source, "PiecewiseConstantDecay"), "no automatic fix: boundaries=[16, 32]"),
        (_line(source, "CosineDecay"), "no automatic fix: decay_steps=48"),
        (_line(source, "CosineDecay"), "no automatic fix: warmup_steps=WARMUP"),
        (_line(source, "ModelCheckpoint"), "no automatic fix: save_freq=32"),
    ]
    assert not any(n.fixable for n in notes)
    assert notes[0].reason.endswith(
        "is counted in optimizer steps: on N replicas each step takes N x the examples, so this schedule acts N x "
        "later in the data; divide it by strategy.num_replicas_in_sync to keep it per example"
    )
    assert "so it saves every N x as many examples" in notes[3].reason


def test_a_count_computed_from_the_data_size_through_the_batch_gets_no_note():
    assert _notes(read(FIXTURES / "tfd010" / "fit_schedule_from_data_size.py")) == []


SCRIPT = (
    "import numpy as np\n"
    "import tensorflow as tf\n"
    "\n"
    "\n"
    "class WarmUp(tf.keras.optimizers.schedules.LearningRateSchedule):\n"
    "    def __init__(self, rate, warmup_steps):\n"
    "        self.rate, self.warmup_steps = rate, warmup_steps\n"
    "\n"
    "    def __call__(self, step):\n"
    "        return self.rate * tf.minimum(1.0, (tf.cast(step, 'float32') + 1) / self.warmup_steps)\n"
    "\n"
    "\n"
    "x = np.random.rand(64, 4).astype('float32')\n"
    "model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "model.compile(optimizer=tf.keras.optimizers.SGD(WarmUp(0.1, 4000)), loss='mse')\n"
    "model.fit(x, x.sum(axis=1), batch_size=16, epochs=2, callbacks=[tf.keras.callbacks.ModelCheckpoint('m.keras', save_freq='epoch')])\n"
)


def test_a_warm_up_of_a_schedule_of_the_files_own_gets_a_note_and_saving_by_epoch_none():
    (note,) = _notes(SCRIPT)
    assert note.line == 15 and note.reason.startswith("no automatic fix: warmup_steps=4000 (line 15) is counted in optimizer steps")


def test_the_notes_are_in_json_and_sarif(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(read(FIXTURES / "tfd010" / "fit_step_counts.py"))
    monkeypatch.chdir(tmp_path)
    shown = CliRunner().invoke(main, ["migrate", "--no-cache", "--format", "json", "train.py"], catch_exceptions=False)
    found = [f for f in json.loads(shown.stdout) if f["message"] == MESSAGE]
    assert len(found) == 4 and found[0]["line"] == 10 and "boundaries=[16, 32]" in found[0]["reason"]
    sarif = CliRunner().invoke(main, ["migrate", "--no-cache", "--format", "sarif", "train.py"], catch_exceptions=False)
    results = json.loads(sarif.stdout)["runs"][0]["results"]
    assert sum(MESSAGE in r["message"]["text"] for r in results) == 4
    text = CliRunner().invoke(main, ["migrate", "--no-cache", "--write", "train.py"], catch_exceptions=False)
    assert text.exit_code == 0 and "strategy = tf.distribute.MirroredStrategy()" in (tmp_path / "train.py").read_text()
    assert f"train.py:10:62: TFD010 {MESSAGE}" in text.stdout + text.stderr
