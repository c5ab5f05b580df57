"""The analysis of one parsed file that every rule reads.

Layers, each importing only those below it (``ANALYSIS_LAYERS`` in tests/test_architecture.py):
:mod:`autofix.tf` (what TensorFlow and Keras names mean, and the one-pass index of names and
scopes); this package's own modules, :mod:`.program` (a parsed file: names, tree, positions,
suppressions), :mod:`.syntax` (shapes of code), :mod:`.positions` and :mod:`.environment`
(what a notebook's shell lines install); then one sub-package per question: :mod:`.core`
(where a value comes from: names, parameters and their callers, returns, attributes,
containers; the one resolution the others share), :mod:`.project` (the modules of the repository a file read from disk
imports: which file and definition an imported name is, each module summarised once per
content), :mod:`.facts` (what the script does with
tf.distribute and Keras: strategies, scopes, what calls make or do, where data goes, what may
move past what), :mod:`.steps` (custom training steps and their losses), :mod:`.training`
(the training program: where training happens, what feeds it, several workers) and
:mod:`.migration` (what ``autofix migrate`` needs). docs/architecture.md maps their modules.

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
