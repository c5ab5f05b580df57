"""What makes a value: the Keras constructions, loads and factory calls that make the object an
expression evaluates to, and what a model is built from.
Part of :class:`~autofix.analysis.training.model.TrainingModel`."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.syntax import parameter_argument
from autofix.tf import symbols
from autofix.tf.symbols import Kind

_MODEL_KINDS = (Kind.MODEL, Kind.LOAD)

# What says a value is plain data, never an object with variables: a tensor or array read out
# (``.numpy()``, ``.item()``), a number or text (``int(...)``, ``len(...)``), a shape, a
# configuration or a copy of the weights, a vocabulary's size. A model built with
# ``vocab_size=tokenizer.get_vocab_size().numpy()`` is not built from the tokenizer.
_PLAIN_METHODS = frozenset({"numpy", "item", "tolist", "count_params", "get_config", "get_weights", "get_vocab_size", "vocab_size", "vocabulary_size", "get_vocabulary", "get_shape"})
_PLAIN_BUILTINS = frozenset({"int", "float", "len", "str", "bool", "round"})
_PLAIN_ATTRIBUTES = frozenset({"shape", "dtype", "name", "ndim", "size"})


def _plain_data(node: cst.CSTNode) -> bool:
    """Whether ``node`` says its value is plain data (see ``_PLAIN_METHODS``)."""
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            return func.attr.value in _PLAIN_METHODS
        return isinstance(func, cst.Name) and func.value in _PLAIN_BUILTINS
    return isinstance(node, cst.Attribute) and node.attr.value in _PLAIN_ATTRIBUTES


class Makers:
    """The makers section of :class:`~autofix.analysis.training.model.TrainingModel`."""

    # --- what makes a value ----------------------------------------------------------------------

    def makers(self, expr: cst.BaseExpression | None) -> list[cst.Call]:
        """The calls that make the object ``expr`` evaluates to: Keras constructions and
        loads, and calls of factories (local functions or methods that make Keras objects, or
        imported ones whose result is compiled). Followed through the file's value flow
        (:meth:`Values.origins`: names, parameters, attributes of the file's classes, tuple and
        dict items, ``a if c else b``); an item of what a local factory returns
        (``model, optimizer = build()``) is made by that factory call. An empty list when
        nothing is known."""
        if expr is None:
            return []
        found: list[cst.Call] = []
        for origin in self.facts.values.origins(expr, enter=False):
            node = origin.node
            if not isinstance(node, cst.Call):
                continue
            if origin.whole:
                found.extend(self._call_makers(node))
            elif all(step[0] == "item" for step in origin.path) and isinstance(self.facts.local_definition(node.func), cst.FunctionDef):
                found.extend(self._call_makers(node))
        return list(dict.fromkeys(found))

    def _call_makers(self, call: cst.Call) -> list[cst.Call]:
        kind = self.facts.call_kind(call)
        if isinstance(kind, Kind):
            return [call]
        if isinstance(kind, cst.FunctionDef):
            effects = self.facts.effects.get(kind)
            made = (effects is not None and effects.creates) or self.returns_keras_object(kind)
            return [call] if made else []
        method = self._own_method(call.func)
        if method is not None and self.returns_keras_object(method):
            return [call]
        return []

    def returns_keras_object(self, function: cst.FunctionDef) -> bool:
        """Whether ``function`` returns a Keras object it (or a function it calls) makes."""
        memo = self._returns
        if function not in memo:
            memo[function] = False  # while it is being worked out (recursion)
            info = self.facts.functions.get(function)
            memo[function] = info is not None and any(self.makers(ret.value) for ret in info.returns)
        return memo[function]

    def _arguments_for(self, param: cst.Param) -> list[cst.BaseExpression]:
        """What the calls of the parameter's function pass for it (its default included)."""
        function = self.program.enclosing_function(param)
        if function is None or param not in function.params.params and param not in function.params.kwonly_params:
            return []
        found: list[cst.BaseExpression] = []
        for ref in self.facts.references(function):
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                continue
            arg = parameter_argument(function, call, param)
            if arg is not None:
                found.append(arg.value)
            elif param.default is not None:
                found.append(param.default)
        return found

    def is_model_maker(self, call: cst.Call) -> bool:
        kind = self.facts.call_kind(call)
        if kind in _MODEL_KINDS:
            return True
        if isinstance(kind, cst.FunctionDef):
            return True
        return kind is None and self._own_method(call.func) is not None

    def ingredients(self, call: cst.Call) -> list[cst.Call]:
        """The Keras objects a model is built from: layers (and models) whose results flow into
        the construction, followed back through names and calls."""
        if symbols.makes_parallel_model(self.facts.names_of(call.func)):
            # ``multi_gpu_model(template, gpus=2)``: the template is built where Keras says to
            # build it (on the CPU, ``tf.device("/cpu:0")``), and the parallel model trains its
            # weights on every GPU itself; it is not made again in a scope.
            return []
        found: list[cst.Call] = []
        seen: set[int] = {id(call)}
        pending: list[cst.CSTNode] = [call.func, *(a.value for a in call.args)]
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if _plain_data(node):
                continue
            if isinstance(node, cst.Name):
                for binding in self.facts.reaching_bindings(node) or ():
                    if isinstance(binding, cst.Param):
                        continue
                    value = self.facts.assigned_value(binding)
                    if value is not None:
                        pending.append(value)
                continue
            if isinstance(node, cst.Call):
                if symbols.makes_parallel_model(self.facts.names_of(node.func)):
                    found.append(node)  # a model; what it is made of, below
                    continue
                kind = self.facts.call_kind(node)
                if isinstance(kind, Kind) and kind in (Kind.LAYER, Kind.MODEL, Kind.LOAD):
                    found.append(node)
                elif isinstance(kind, cst.FunctionDef) and self.is_model_maker(node):
                    found.append(node)
                pending.append(node.func)
                pending.extend(a.value for a in node.args)
                continue
            if isinstance(node, cst.Attribute):
                pending.append(node.value)
            elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
                pending.extend(e.value for e in node.elements)
            elif isinstance(node, cst.Dict):
                pending.extend(e.value for e in node.elements if isinstance(e, cst.DictElement))
            elif isinstance(node, cst.BinaryOperation):
                pending.extend((node.left, node.right))
            elif isinstance(node, cst.Subscript):
                pending.append(node.value)
        return found
