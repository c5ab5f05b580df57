"""Functions: whether calling one of the file's functions makes Keras objects outside a scope
of its own, or trains; whether an object is only looked at.
Part of :class:`~autofix.analysis.facts.script.Facts`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis.facts.keras_objects import BUILD, COMPILE, TRAIN
from autofix.tf import symbols
from autofix.tf.symbols import Kind


class Effects:
    """The functions section of :class:`~autofix.analysis.facts.script.Facts`."""

    # --- functions ---------------------------------------------------------------------------

    def scoped_within(self, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
        """Whether ``node`` is inside a strategy ``with`` block that is itself inside ``stop``."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                if any(self.scope_strategy(expr) for expr in self.entered(ancestor, node)):
                    return True
            previous = ancestor
        return False

    @cached_property
    def effects(self) -> dict[cst.FunctionDef, FunctionEffects]:
        """For each plain function: does calling it create Keras objects outside a scope of its
        own, and does it train? Both follow calls to other functions of the module."""
        result: dict[cst.FunctionDef, FunctionEffects] = {}
        callees: dict[cst.FunctionDef, list[cst.FunctionDef]] = {}
        for function, info in self.functions.items():
            effects = FunctionEffects()
            callees[function] = []
            if info.is_method:
                result[function] = effects
                continue
            for call in info.calls:
                kind = self.call_kind(call)
                if kind == TRAIN:
                    effects.trains = True
                elif self.scoped_within(call, function) or self.strategy_none_at(call):  # type: ignore[attr-defined]
                    # In a scope of its own, or on the path where the strategy is known None
                    # (``if strategy is not None: with strategy.scope(): ... else: ...``): one
                    # device by choice, not made outside a scope.
                    continue
                elif kind is Kind.LAYER and self.no_variable_layer(call):
                    # ``Input(shape=...)``, ``Dropout(0.5)(x)``: no variables, wherever made.
                    continue
                elif kind is Kind.LOAD and self._loads_into_parameter(call):
                    # ``model.load_weights(path)`` on a model the caller hands in: restoring
                    # weights makes no model here; where the caller made it is what counts.
                    continue
                elif (isinstance(kind, Kind) or kind in (COMPILE, BUILD)) and not (kind in (Kind.OPTIMIZER, COMPILE, BUILD) and self.needs_keras2):
                    # (On Keras 2, where a file that needs it runs, an optimizer may be made
                    # anywhere.)
                    effects.creates = True
                elif isinstance(kind, cst.FunctionDef) and kind is not function:
                    callees[function].append(kind)
            result[function] = effects
        changed = True
        while changed:
            changed = False
            for function, called in callees.items():
                effects = result[function]
                for callee in called:
                    other = result.get(callee)
                    if other is None:
                        continue
                    if other.creates and not effects.creates:
                        effects.creates = changed = True
                    if other.trains and not effects.trains:
                        effects.trains = changed = True
        return result

    def no_variable_layer(self, call: cst.Call) -> bool:
        """Whether ``call`` makes a layer that holds no variables (``Input``, ``Dropout``), or
        calls one made inline (``Dropout(0.5)(x)``)."""
        made = call.func if isinstance(call.func, cst.Call) else call
        return bool(self.names_of(made.func) & symbols.NO_VARIABLE_LAYERS)

    def _loads_into_parameter(self, call: cst.Call) -> bool:
        """Whether ``call`` is ``p.load_weights(...)`` with ``p`` a parameter of the function."""
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        if not isinstance(receiver, cst.Name):
            return False
        access = self.program.access(receiver)
        return access is not None and bool(access.referents) and all(b.kind == "param" for b in access.referents)

    def inspection_only(self, call: cst.Call) -> bool:
        """Whether ``call`` makes an object that is only ever looked at (``m.summary()``,
        ``print(m)``), or never used: such an object is not trained, so it may stay outside."""
        target = self.assigned_name(call)
        if target is None:
            return self._inspects(call)
        return all(self._inspects(use) for use in self.uses(target))

    def _inspects(self, use: cst.CSTNode) -> bool:
        parent = self.program.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            return parent.attr.value in symbols.INSPECT_METHODS
        if isinstance(parent, cst.Arg):
            call = self.program.parent(parent)
            if isinstance(call, cst.Call):
                return bool(self.names_of(call.func) & symbols.INSPECT_FUNCTIONS)
        return False


@dataclass
class FunctionEffects:
    creates: bool = False
    trains: bool = False
