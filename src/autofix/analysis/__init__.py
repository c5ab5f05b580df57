"""The analysis of one parsed file that every rule reads.

Layers, each importing only those below it: :mod:`autofix.tf` (what TensorFlow and Keras
names mean, and the one-pass index of names and scopes), then :mod:`.program` (a parsed file:
names, tree, positions, suppressions), :mod:`.environment` (what a notebook's shell lines
install), :mod:`.values` (where a value comes from: names, parameters and their callers,
returns, attributes, containers; the one resolution the others share), :mod:`.facts`
(strategies, what calls make or do),
:mod:`.contexts` (where a strategy exists), :mod:`.dataflow` (where data goes),
:mod:`.ordering` (what may move past what), :mod:`.training` (the training program:
which objects and data take part in distributed training, and where), and the custom steps:
:mod:`.steps` (what ``strategy.run`` runs, what its tapes differentiate, what runs in a
``tf.function``), :mod:`.callees` (what a call runs), :mod:`.losses` (a step's loss, term by
term), :mod:`.valueflow` (where a changed value goes), :mod:`.inputs` and :mod:`.distribution`
(what ``strategy.run`` is fed), :mod:`.tracing` (Python side effects), :mod:`.sizes` (how many
examples an array holds); and for ``autofix migrate``, :mod:`.migration` (what a
single-device file trains; :mod:`.keras1`, Keras 1 scripts), :mod:`.migration_models`,
:mod:`.placement` (where the strategy goes) and :mod:`.migrated` (what migrated code must show).

Each analysis is built at most once per program and shared: ``Facts.of(program)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from autofix.analysis.program import Program

D = TypeVar("D", bound="Derived")


class Derived:
    """An analysis computed from one program, built on first use and shared by every rule."""

    def __init__(self, program: "Program") -> None:
        self.program = program

    @classmethod
    def of(cls: type[D], program: "Program") -> D:
        return program.derived(cls)
