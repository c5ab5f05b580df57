"""A model class with its own train_step and no call() (a distiller), fit under a strategy: what
Keras 3 needs to build it (analysis/migration/wrapper_build.py), and the proof of such a script's
two phases of training, and of a script that evaluates a model between two (smoke/reported.py).
Fixtures: fixtures/tfd010/train_step_compiled_metrics, report_train_step_compiled_metrics_unread
and fit_evaluated_between_phases (test_migrate.py migrates them and proves them with the rest)."""

from __future__ import annotations

import importlib.util

import libcst as cst
import pytest
from fixturecases import FIXTURES, read

from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.wrapper_build import Fed, fed_prediction, optimizer_model
from autofix.analysis.program import Program
from autofix.engine import Options, _parsed, analyse

MIGRATE = Options(migrate="mirrored")
DISTILLER = FIXTURES / "tfd010" / "train_step_compiled_metrics.py"
EVALUATED = FIXTURES / "tfd010" / "fit_evaluated_between_phases.py"


def _migrated(source: str) -> str:
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is not None, [f.reason for f in analysis.findings]
    return analysis.new_text


def test_a_distiller_compiled_with_metrics_gets_the_call_its_metrics_are_fed_from():
    migrated = _migrated(read(DISTILLER))
    assert "    def call(self, inputs, training=False):\n" in migrated
    assert "        return self.student(inputs, training=training)\n" in migrated
    # Not marked built (that does not stop Keras 3 from calling it), and its optimizer built on
    # the student's variables right after Keras's compile, as one device builds it.
    assert "distiller.built = True" not in migrated
    assert (
        "        super().compile(optimizer=optimizer, metrics=metrics)\n"
        "        # Built on the variables train_step applies it to: under a strategy Keras 3 would build it on every variable of the model.\n"
        "        self.optimizer.build(self.student.trainable_variables)\n"
    ) in migrated


def test_compiled_without_metrics_or_loss_it_is_marked_built_and_its_optimizer_built_still():
    source = read(DISTILLER).replace("super().compile(optimizer=optimizer, metrics=metrics)", "super().compile(optimizer=optimizer)")
    migrated = _migrated(source)
    assert "def call(" not in migrated
    assert "    distiller.built = True\n" in migrated
    assert "        self.optimizer.build(self.student.trainable_variables)\n" in migrated
    # metrics=None builds nothing either.
    none = read(DISTILLER).replace("super().compile(optimizer=optimizer, metrics=metrics)", "super().compile(optimizer=optimizer, metrics=None)")
    assert "def call(" not in _migrated(none)


STEP = """
import tensorflow as tf
import keras


class Distiller(keras.Model):
    def __init__(self, student, teacher):
        super().__init__()
        self.student = student
        self.teacher = teacher

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            predictions = self.student(x, training=True)
            loss = tf.reduce_mean(tf.square(predictions - self.teacher(x, training=False)))
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.student.trainable_variables), self.student.trainable_variables))
        FEED
        return {m.name: m.result() for m in self.metrics}
"""


@pytest.mark.parametrize(
    "feed",
    [
        "self.compiled_metrics.update_state(y, predictions)",
        "self.compiled_metrics.update_state(y, y_pred=predictions)",
        "self.compute_metrics(x, y, predictions, sample_weight=None)",
        "self.compute_loss(x, y, predictions)",
        "self.compiled_loss(y, predictions)",
        "for metric in self.metrics:\n            metric.update_state(y, predictions)",
    ],
)
def test_the_prediction_is_read_where_train_steps_hand_it_over(feed):
    """``compiled_metrics``, Keras 3's ``compute_metrics`` / ``compute_loss``, and the loop over
    ``self.metrics`` its guides write: each read as the student's prediction of the batch."""
    program = Program(*_parsed(STEP.replace("FEED", feed)))
    (cls,) = [s for s in program.module.body if isinstance(s, cst.ClassDef)]
    assert fed_prediction(Facts.of(program), cls) == Fed("student")
    assert optimizer_model(Facts.of(program), cls) == "student"


def test_a_distiller_whose_metrics_are_fed_what_is_not_a_model_it_holds_is_refused_at_its_construction():
    analysis = analyse(read(FIXTURES / "tfd010" / "report_train_step_compiled_metrics_unread.py"), MIGRATE)
    assert analysis.new_text is None
    (finding,) = analysis.findings
    assert finding.line == 37 and not finding.fixable
    assert "is compiled with metrics=" in finding.reason
    assert "what its train_step hands its compiled metrics or loss (line 28) is not shown to be a model it holds" in finding.reason


@pytest.mark.parametrize("how", ["the prediction of two models", "a model set again"])
def test_what_cannot_be_followed_to_one_model_set_once_is_refused(how):
    source = read(DISTILLER)
    if how == "the prediction of two models":
        source = source.replace(
            "        self.compiled_metrics.update_state(y, student_predictions)\n",
            "        self.compiled_metrics.update_state(y, student_predictions)\n        self.compiled_metrics.update_state(y, teacher_predictions)\n",
        )
        says = "the predictions of several models (student, teacher)"
    else:
        source = source.replace("        self.temperature = temperature\n", "        self.temperature = temperature\n        self.student = self.teacher\n")
        says = "self.student is not set once, in its __init__, to a model it is given"
    analysis = analyse(source, MIGRATE)
    assert analysis.new_text is None
    assert any(says in (f.reason or "") for f in analysis.findings), [f.reason for f in analysis.findings]


# The distiller as the migration marked it before (built, no call(), its optimizer left to Keras):
# what Keras 3 does with it under a strategy.
MARKED_BUILT = (
    "    def call(self, inputs, training=False):\n"
    "        # What train_step hands its compiled metrics: under a strategy Keras 3 builds them before fit by calling the model.\n"
    "        return self.student(inputs, training=training)\n\n",
    "        # Built on the variables train_step applies it to: under a strategy Keras 3 would build it on every variable of the model.\n"
    "        self.optimizer.build(self.student.trainable_variables)\n",
)


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_the_migrations_are_proven_over_every_phase_and_a_later_phases_metric_is_still_compared(tmp_path):
    from autofix.smoke.compare import ComparePair, compare_many

    distiller_fixed = read(DISTILLER.with_name("train_step_compiled_metrics.fixed.py"))
    call, optimizer = MARKED_BUILT
    assert call in distiller_fixed and optimizer in distiller_fixed
    marked = distiller_fixed.replace(call, "").replace(optimizer, "").replace(
        "    distiller = Distiller(student=student, teacher=teacher)\n",
        "    distiller = Distiller(student=student, teacher=teacher)\n    distiller.built = True\n",
    )
    no_optimizer = distiller_fixed.replace(optimizer, "")
    evaluated_fixed = read(EVALUATED.with_name("fit_evaluated_between_phases.fixed.py"))
    # The second model's metric configured otherwise in the migration: seen in step 4.
    wrong_metric = evaluated_fixed.replace("SparseTopKCategoricalAccuracy(k=2,", "SparseTopKCategoricalAccuracy(k=3,")
    assert wrong_metric != evaluated_fixed
    for name, text in (
        ("distill.py", read(DISTILLER)), ("distill.marked.py", marked), ("distill.no_optimizer.py", no_optimizer),
        ("distill.fixed.py", distiller_fixed), ("evaluated.py", read(EVALUATED)), ("evaluated.fixed.py", evaluated_fixed),
        ("evaluated.wrong_metric.py", wrong_metric),
    ):
        (tmp_path / name).write_text(text)
    cases = {
        "distill.fixed.py": ("equivalent", "the same 6 steps in 2 phases of training"),
        "distill.marked.py": ("migrated-fails", "RuntimeError: Unable to automatically build the model"),
        "distill.no_optimizer.py": ("inconclusive", "the optimizer variables differ from the original's"),
        "evaluated.fixed.py": ("equivalent", "the same 6 steps in 2 phases of training"),
        "evaluated.wrong_metric.py": ("different", "what fit logs differs in step 4 (top2)"),
    }
    pairs = [
        ComparePair(str(tmp_path / name), str(tmp_path / ("distill.py" if name.startswith("distill") else "evaluated.py")))
        for name in cases
    ]
    for (name, (status, says)), report in zip(cases.items(), compare_many(pairs, replicas=2, steps=3, offline=True)):
        assert report.compare.status == status, (name, report.compare.message)
        assert says in report.compare.message, (name, report.compare.message)
