"""What a training script does with tf.distribute and Keras, read off one parsed module.

Everything here is resolved through imports and scopes (the one-pass index of
:mod:`autofix.tf.index`), never by matching spellings: ``strategy`` is a strategy because of how it was
assigned, ``keras.Sequential`` is a model constructor whichever way Keras was imported.

Limits, on purpose: attributes (``self.strategy``, ``self.model``) are not followed, nor are
names imported from other files; methods of classes are never treated as scripts.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.core.value_flow import Values
from autofix.analysis.facts.effects import Effects
from autofix.analysis.facts.keras_objects import KerasObjects
from autofix.analysis.facts.scopes import Scopes
from autofix.analysis.facts.strategies import Strategies, Strategy
from autofix.analysis.program import Program
from autofix.tf.symbols import Kind


class Facts(Strategies, Scopes, KerasObjects, Effects, Derived):
    """TF facts about one module. Cheap to build; each fact is computed on first use. Its
    sections are mixed in from :mod:`.strategies`, :mod:`.scopes`, :mod:`.keras_objects` and
    :mod:`.effects`."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self._call_kinds: dict[cst.Call, Kind | str | cst.FunctionDef | None] = {}
        self.values = values = Values.of(program)
        self.calls = program.index.calls
        self.functions = values.functions
        self.classes = values.classes
        self.assigns = values.assigns
        # The name-level questions are the value flow's (one resolution for every rule).
        self.assigned_value = values.assigned_value
        self.bindings = values.bindings
        self.reaching_bindings = values.reaching_bindings
        self.local_definition = values.local_definition
        self.is_module_reference = values.is_module_reference
        self.references = values.references
        self.direct_calls = values.direct_calls
        self.assigned_name = values.assigned_name
        self.unpacked_name = values.unpacked_name
        self.uses = values.uses
        self._strategy_memo: dict[tuple[int, str], Strategy | None] = {}
        self._in_progress: set[object] = set()

    def names_of(self, expr: cst.BaseExpression) -> frozenset[str]:
        return self.program.qualified_names(expr)
