"""What training a comparing run has still ahead of it (autofix.smoke.phases): no TensorFlow."""
from __future__ import annotations

import sys
import textwrap

import pytest

from autofix.smoke import phases

DISTILL = textwrap.dedent(
    """\
    import keras
    datagen.fit(x)                                  # 2: not training, before it
    class Distiller(keras.Model):
        def train_step(self, data):
            self.optimizer.apply_gradients(pairs)   # 5: trains when the distiller is fit
    def main():
        teacher.fit(x)                              # 7
        distiller = Distiller()
        distiller.fit(x)                            # 9
        return distiller                            # 10
    main()
    """
)


def test_training_calls_are_read_from_the_text():
    calls = phases.training_calls(DISTILL + "strategy.run(step)\nds.run(x)\nopt.apply(grads)\nds.apply(f)\n")
    assert [(first, what) for first, _, what in calls] == [
        (2, "datagen.fit"), (5, "self.optimizer.apply_gradients"), (7, "teacher.fit"), (9, "distiller.fit"),
        (12, "strategy.run"), (14, "opt.apply"),
    ]


def _run_to(line: int, reached: set[int]):
    """Run DISTILL as a program up to ``line`` of main(), and ask what is ahead there."""
    filename = "<phases-test>"
    phases.start(filename, DISTILL)
    phases._reached.update(reached)
    seen = {}

    def stop_here(frame, event, arg):
        if event == "line" and frame.f_code.co_filename == filename and frame.f_lineno == line and "ahead" not in seen:
            seen["ahead"] = phases.ahead()
        return stop_here

    namespace = {"datagen": _Any(), "teacher": _Any(), "x": 0, "pairs": ()}
    sys.settrace(stop_here)
    try:
        exec(compile(DISTILL.replace("import keras\n", "from types import SimpleNamespace as _n; keras = _n(Model=_Model)\n"), filename, "exec"), namespace | {"_Model": _Model})
    finally:
        sys.settrace(None)
        phases.start(None, None)
    return seen["ahead"]


class _Any:
    def __getattr__(self, name):
        return lambda *a, **k: None


class _Model:
    optimizer = _Any()

    def fit(self, x):
        self.train_step(x)


def test_after_the_teacher_the_distiller_and_its_train_step_are_ahead():
    ahead = _run_to(8, reached={7})
    assert ahead == ["self.optimizer.apply_gradients at line 5", "distiller.fit at line 9"]


def test_once_the_distiller_trained_nothing_is_ahead_and_a_fit_before_training_never_was():
    # (datagen.fit at line 2 ran before training, and never trains: it keeps nothing going)
    assert _run_to(10, reached={5, 7, 9}) == []


def test_nothing_is_ahead_where_the_text_is_not_known():
    phases.start(None, None)
    assert phases.ahead() == []
