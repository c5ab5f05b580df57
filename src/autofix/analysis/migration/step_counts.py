"""Numbers counted in training steps, for ``autofix migrate``: the boundaries, decay and warm-up
steps of a learning-rate schedule, how often a callback saves (``save_freq=<int>``).

On N replicas each step trains on the global batch, N x the examples of the original's step, so
a count of steps written as a number means N x as many examples: a schedule halving the rate
every 16 steps halves it every 16 x N x B examples. Learning rates compared per example, that
schedule acts N x later in the data. A count computed from the data size through the batch
(``decay_steps = EPOCHS * len(x) // BATCH``) follows the global batch (TFD002 makes it so) and is
not one of these. The migration leaves the numbers as they are (whether the schedule was meant
per step or per example is the author's to say) and says so at each (a TFD010 finding).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, nodes_in

SCHEDULES = ("keras.optimizers.schedules.", "keras.experimental.")
SCHEDULE_BASE = "keras.optimizers.schedules.LearningRateSchedule"
# Keras's schedules: the arguments counted in steps, with their positions.
SCHEDULE_STEPS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "PiecewiseConstantDecay": (("boundaries", 0),),
    "ExponentialDecay": (("decay_steps", 1),),
    "InverseTimeDecay": (("decay_steps", 1),),
    "PolynomialDecay": (("decay_steps", 1),),
    "CosineDecay": (("decay_steps", 1), ("warmup_steps", 5)),
    "CosineDecayRestarts": (("first_decay_steps", 1),),
    "LinearCosineDecay": (("decay_steps", 1),),
    "NoisyLinearCosineDecay": (("decay_steps", 1),),
}
# Callbacks that count batches where they are given a number.
CALLBACK_STEPS = {"keras.callbacks.ModelCheckpoint": "save_freq", "keras.callbacks.BackupAndRestore": "save_freq"}
# Words that name a count of steps in a schedule class of the file's own.
_STEP_WORDS = ("step", "warmup", "boundar")


@dataclass(frozen=True)
class StepCount:
    """A number counted in steps: the value written, what takes it, and which argument."""

    node: cst.BaseExpression
    owner: cst.Call
    argument: str
    schedule: bool


class StepCounts(Derived):
    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)

    @cached_property
    def found(self) -> list[StepCount]:
        counts = []
        own = self._own_schedules
        for call, _owner in self.facts.calls:
            names = self.facts.names_of(call.func)
            for name in names:
                if name.startswith(SCHEDULES) and name.rpartition(".")[2] in SCHEDULE_STEPS:
                    for keyword, position in SCHEDULE_STEPS[name.rpartition(".")[2]]:
                        self._add(counts, call, keyword, position, True)
                elif name in CALLBACK_STEPS:
                    self._add(counts, call, CALLBACK_STEPS[name], None, False)
            local = self.facts.local_definition(call.func)
            if isinstance(local, cst.ClassDef) and id(local) in own:
                init = own[id(local)]
                params = list(init.params.params)[1:] if init is not None else []
                for index, param in enumerate(params):
                    if any(w in param.name.value.lower() for w in _STEP_WORDS):
                        self._add(counts, call, param.name.value, index, True)
                for arg in call.args:
                    if arg.keyword is not None and init is None and any(w in arg.keyword.value.lower() for w in _STEP_WORDS):
                        self._add(counts, call, arg.keyword.value, None, True)
        return counts

    def _add(self, counts: list[StepCount], call: cst.Call, keyword: str, position: int | None, schedule: bool) -> None:
        value = argument_value(call, keyword, position)
        if value is not None and self._numbers(value, 0) and not self._zero(value):
            counts.append(StepCount(value, call, keyword, schedule))

    @cached_property
    def _own_schedules(self) -> dict[int, cst.FunctionDef | None]:
        """The file's own ``LearningRateSchedule`` subclasses, with their ``__init__``."""
        found: dict[int, cst.FunctionDef | None] = {}
        for cls in nodes_in(self.program.module, cst.ClassDef):
            if any(SCHEDULE_BASE in self.facts.names_of(base.value) for base in cls.bases):
                body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
                found[id(cls)] = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        return found

    def _numbers(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Whether ``expr`` is made of written numbers only (through names bound once to such),
        a list of them included: a count that nothing in the file scales."""
        if depth > 6:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, (cst.List, cst.Tuple)):
            return bool(expr.elements) and all(isinstance(e, cst.Element) and self._numbers(e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.UnaryOperation):
            return self._numbers(expr.expression, depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            return self._numbers(expr.left, depth + 1) and self._numbers(expr.right, depth + 1)
        if isinstance(expr, cst.Call) and self.facts.names_of(expr.func) & {"builtins.int", "builtins.round"} and len(expr.args) == 1:
            return self._numbers(expr.args[0].value, depth + 1)
        if isinstance(expr, cst.Name):
            bindings = self.facts.bindings(expr) or []
            values = [self.facts.assigned_value(b) for b in bindings]
            return len(values) == 1 and values[0] is not None and self._numbers(values[0], depth + 1)
        return False

    def _zero(self, expr: cst.BaseExpression) -> bool:
        """``warmup_steps=0``: no count at all."""
        return isinstance(expr, cst.Integer) and int(expr.value, 0) == 0


def note(program: Program, count: StepCount) -> str:
    """What the migration says at a count of steps it leaves as it is."""
    code = " ".join(program.module.code_for_node(count.node).split())
    what = "this schedule acts N x later in the data" if count.schedule else "it saves every N x as many examples"
    return (
        f"{count.argument}={code} (line {program.line(count.node)}) is counted in optimizer steps: on N replicas each step "
        f"takes N x the examples, so {what}; divide it by strategy.num_replicas_in_sync to keep it per example"
    )


NOTE_MESSAGE = "counted in optimizer steps, left as it is by the migration: on N replicas it means N x the examples"
