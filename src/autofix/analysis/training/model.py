"""The training program: where training happens and what takes part in it
(:class:`TrainingModel`), its sections mixed in from :mod:`.sites`, :mod:`.makers` and
:mod:`.members`; what a model was compiled with and fit on is :mod:`.compiled`'s."""

from __future__ import annotations

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.contexts import Contexts
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.training.makers import Makers
from autofix.analysis.training.members import Members
from autofix.analysis.training.sites import Sites


class TrainingModel(Sites, Makers, Members, Derived):
    """The training program of one file: each training site, and what takes part in it.

    An object takes part in distributed training when it reaches a training site that runs
    under a strategy with more than one replica: the model trained there (with the layers it
    is built from), its ``compile`` and what compile is given (optimizer, metrics), weights
    loaded into it before training, a checkpoint restored into it, and, in a custom step, the
    optimizer applying the gradients and the metrics updated. What is only evaluated,
    predicted with, inspected, or trained before any strategy exists takes no part. Loss
    objects hold no variables and take no part either.

    Limits, on purpose: values are followed through names, tuple-less assignments, function
    parameters and local factories; models kept in attributes are followed only within one
    class (:meth:`attribute_sites`); other modules are not followed.
    """

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.contexts = Contexts.of(program)
        self._returns: dict[cst.FunctionDef, bool] = {}
