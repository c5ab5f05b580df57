"""What would change if a function became a ``tf.function``: its Python side effects.

A ``tf.function`` runs the function's Python code once per trace, not once per call: a Python
effect then happens only while tracing (measured: a counter in a dict incremented in a step
counts 1 instead of the number of steps). The effects looked for, each the reason a function
is not safe to trace:

- changing an object from outside the function: assigning (``=``, ``+=``) to or deleting a
  subscript or attribute of it (``stats["steps"] += 1``, ``self.count += 1``), ``global`` and
  ``nonlocal`` names;
- calling anything that is not TensorFlow or Keras (or a known-safe builtin): ``print``,
  ``logging``, Python's and NumPy's random numbers, a time, a method that mutates a list or dict,
  a helper whose body is not looked at, ``.numpy()``; a function of this file (not a method)
  is looked into, and has these effects when its body has them;
- reading a Python value that changes between calls (a name bound again elsewhere: a loop
  variable, a counter): the trace keeps the value it saw first;
- iterating a Python iterator or generator (consumed by the first trace);
- being a generator itself.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import attribute_path, root_name
from autofix.tf.index import Binding
from autofix.tf.symbols import TRAIN_METHODS, Kind

# What a function calling strategy.run may do with the strategy inside a tf.function.
STRATEGY_METHODS = frozenset({"run", "experimental_run_v2", "reduce", "gather", "experimental_local_results"})
# Builtins that compute a value and do nothing else.
TRACEABLE_BUILTINS = frozenset({"builtins.zip", "builtins.len", "builtins.range", "builtins.isinstance", "builtins.float", "builtins.int", "builtins.list", "builtins.tuple", "builtins.dict", "builtins.min", "builtins.max", "builtins.abs", "builtins.sum"})
# Methods of TensorFlow and Keras objects a step calls for their effect on variables.
_VARIABLE_METHODS = frozenset({"gradient", "apply_gradients", "update_state", "reset_state", "result", "assign", "assign_add", "assign_sub", "minimize"})


def python_effect(program: Program, steps: Steps, function: cst.FunctionDef, replaced: tuple[cst.CSTNode, ...] = ()) -> str | None:
    """Why ``function`` would behave differently inside a ``tf.function`` (what it does in
    Python), or None. A function that already runs as a graph has nothing to lose. Calls in
    ``replaced`` (a NumPy draw the migration draws with tf.random) are not looked at."""
    if steps.compiled(function):
        return None
    visitor = _Effects(program, steps, function)
    visitor.replaced = {id(node) for node in replaced}
    function.body.visit(visitor)
    return visitor.why


class _Effects(cst.CSTVisitor):
    def __init__(self, program: Program, steps: Steps, function: cst.FunctionDef, seen: set[int] | None = None) -> None:
        self.program = program
        self.steps = steps
        self.facts: Facts = steps.facts
        self.function = function
        self.why: str | None = None
        # Local functions looked into already (a helper called twice, recursion).
        self.seen = seen if seen is not None else {id(function)}
        # Calls not looked at: code the caller replaces.
        self.replaced: set[int] = set()

    def found(self, why: str) -> None:
        self.why = self.why or why

    def code(self, node: cst.CSTNode) -> str:
        return self.program.module.code_for_node(node)

    def visit_Global(self, node: cst.Global) -> None:
        self.found("assigns a global")

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.found("assigns an outer variable")

    def visit_Yield(self, node: cst.Yield) -> None:
        self.found("is a generator")

    # --- changes to outer objects ------------------------------------------------------------

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node.target)

    def _target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value)
            return
        if isinstance(target, cst.StarredElement):
            self._target(target.value)
            return
        if isinstance(target, (cst.Subscript, cst.Attribute)):
            root: cst.BaseExpression = target
            while isinstance(root, (cst.Subscript, cst.Attribute)):
                root = root.value
            if not isinstance(root, cst.Name) or not self._fresh_local(root):
                self.found(f"changes {self._shown(target)}")

    def _shown(self, target: cst.BaseExpression) -> str:
        if isinstance(target, cst.Subscript):
            return f"{self.code(target.value)}[...]"
        return self.code(target)

    def _fresh_local(self, name: cst.Name) -> bool:
        """A name of this function bound only to containers it makes itself."""
        bindings = self.facts.bindings(name) or []
        if not bindings:
            return False
        for binding in bindings:
            if self.program.enclosing_function(binding) is not self.function:
                return False
            value = self.facts.assigned_value(binding)
            if not isinstance(value, (cst.Dict, cst.List, cst.Set, cst.Tuple, cst.DictComp, cst.ListComp, cst.SetComp)):
                return False
        return True

    # --- calls -------------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> bool | None:
        if self.why:
            return None
        if id(node) in self.replaced:
            return False
        facts = self.facts
        func = node.func
        names = facts.names_of(func)
        if any(n.startswith(("tensorflow.", "keras.")) for n in names) or names & TRACEABLE_BUILTINS:
            return
        if "builtins.print" in names:
            self.found("prints")
            return
        if isinstance(func, cst.Attribute):
            if func.attr.value in ("numpy", "item", "tolist"):
                self.found("converts tensors to Python values")
                return
            if func.attr.value in TRAIN_METHODS:
                self.found(f"calls {self.code(func)}()")
                return
            root = root_name(func)
            if root is not None and (facts.is_model_name(root) or facts.is_layer_name(root) or _keras_value(facts, root)):
                return
            if func.attr.value in _VARIABLE_METHODS:
                return
            if func.attr.value in STRATEGY_METHODS and self.steps.is_strategy(func.value):
                return
            if func.attr.value in _DICT_READS and isinstance(func.value, cst.Name) and (_dict_literal(facts, func.value) or self._run_result(func.value)):
                return  # ``weights.values()`` of a dict of variables, ``logs.items()`` of what strategy.run returned: a read
            if self._own(func):
                return
            self.found(f"calls {self.code(func)}()")
            return
        if isinstance(func, cst.Name) and (facts.is_model_name(func) or facts.is_layer_name(func) or _keras_value(facts, func)):
            return
        if isinstance(func, cst.Name) and self._keras_self(func):
            return
        local = facts.local_definition(func) if isinstance(func, cst.Name) else None
        if isinstance(local, cst.FunctionDef) and not facts.functions[local].is_method:
            # A helper of this file (the model's forward pass, the loss): safe when its body is.
            if id(local) in self.seen:
                return
            self.seen.add(id(local))
            inner = _Effects(self.program, self.steps, local, self.seen)
            local.body.visit(inner)
            if inner.why:
                self.found(f"calls {func.value}(), which {inner.why}")
            return
        self.found(f"calls {self.code(func)}()")

    def _run_result(self, name: cst.Name) -> bool:
        """A name bound only to what ``strategy.run`` returns (a structure of tensors)."""
        values = [self.facts.assigned_value(b) for b in self.facts.bindings(name) or ()]
        return bool(values) and all(
            isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in STRATEGY_METHODS and self.steps.is_strategy(v.func.value)
            for v in values
        )

    def _own(self, func: cst.Attribute) -> bool:
        """``self.helper(x)`` (a method of the class, looked into as a helper is) or
        ``self.encoder(x)`` (an attribute the class only ever sets to Keras objects), in a
        method whose ``self`` it is: what it does is known."""
        callables = self.steps.callables
        if callables.own_method(func) is not None:
            method = callables.own_method(func)
            if id(method) not in self.seen:
                self.seen.add(id(method))
                inner = _Effects(self.program, self.steps, method, self.seen)  # type: ignore[arg-type]
                method.body.visit(inner)  # type: ignore[union-attr]
                if inner.why:
                    self.found(f"calls {self.code(func)}(), which {inner.why}")
            return True
        values = callables.attribute_assignments(func)
        return bool(values) and all(isinstance(v, cst.Call) and isinstance(self.facts.call_kind(v), Kind) for v, _ in values)

    def _keras_self(self, name: cst.Name) -> bool:
        """``self(x)`` in a method of a Keras model or layer of this file: Keras runs its
        ``call``, looked into as a helper is (none of its own: a functional model's)."""
        bindings = self.facts.bindings(name) or []
        if len(bindings) != 1 or not isinstance(bindings[0], cst.Param) or not self.facts.values.is_self(bindings[0]):
            return False
        method = self.program.enclosing_function(bindings[0])
        cls = self.facts.values.class_of(method) if method is not None else None
        if cls is None or cls not in self.facts.keras_classes:
            return False
        call = self.steps.callables.method(cls, "call")
        if call is not None and id(call) not in self.seen:
            self.seen.add(id(call))
            inner = _Effects(self.program, self.steps, call, self.seen)
            call.body.visit(inner)
            if inner.why:
                self.found(f"calls {name.value}(), whose call() {inner.why}")
        return True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """``self.threshold`` read where a method other than ``__init__`` sets it: a Python
        value that may change between calls, kept as the first trace saw it."""
        if self.why or attribute_path(node) is None or len(attribute_path(node)) != 2:  # type: ignore[arg-type]
            return
        for _value, target in self.steps.callables.attribute_assignments(node):
            setter = self.program.enclosing_function(target)
            if setter is not None and setter.name.value != "__init__":
                self.found(f"reads {self.code(node)}, a Python value that changes between calls (line {self.program.line(target)})")
                return

    # --- Python state read, Python iterators ----------------------------------------------------

    def visit_Name(self, node: cst.Name) -> None:
        if self.why:
            return
        access = self.program.access(node)
        if access is None or not access.referents:
            return
        outer = [b for b in access.referents if not self._inside(b)]
        if not outer or any(b.kind in ("import", "builtin", "def", "class") for b in outer):
            return
        changing = self._changes(outer)
        if changing is not None:
            self.found(f"reads {node.value}, a Python value that changes between calls (line {self.program.line(changing)})")

    def _inside(self, binding: Binding) -> bool:
        return any(a is self.function for a in self.program.ancestors(binding.node))

    def _changes(self, bindings: list[Binding]) -> cst.CSTNode | None:
        """Where an outer name read here is bound again: more than one binding, or one made by
        a loop, an augmented assignment or a ``global`` in some function."""
        scope = bindings[0].scope
        every = scope.assignments(bindings[0].name)
        if len(every) > 1:
            return every[-1].node
        node = every[0].node if every else bindings[0].node
        parent = self.program.parent(node)
        if isinstance(parent, (cst.For, cst.AugAssign, cst.CompFor)) or isinstance(parent, cst.AsName):
            return node
        if self.program.enclosing_function(node) is not None and scope.kind == "module":
            return node  # bound by a ``global`` statement in a function
        return None

    def visit_For(self, node: cst.For) -> None:
        if self.why:
            return
        iterable = node.iter
        if isinstance(iterable, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(iterable) or []]
            if any(isinstance(v, (cst.GeneratorExp,)) or isinstance(v, cst.Call) and "builtins.iter" in self.facts.names_of(v.func) for v in values):
                self.found(f"iterates {iterable.value}, a Python iterator the first trace would use up")
        elif isinstance(iterable, cst.GeneratorExp):
            self.found("iterates a generator the first trace would use up")


_DICT_READS = frozenset({"values", "keys", "items", "get"})


def _dict_literal(facts: Facts, name: cst.Name) -> bool:
    """A name bound only to dict literals (a dict of variables)."""
    values = [facts.assigned_value(b) for b in facts.bindings(name) or ()]
    return bool(values) and all(isinstance(v, cst.Dict) for v in values)


def _keras_value(facts: Facts, name: cst.Name) -> bool:
    """A name bound to a Keras loss, metric, optimizer or model object, or a parameter that
    every call of its function gives one (``def loss_fn(model, x, y)`` called with the model)."""
    kinds = facts._value_kinds(name)
    if kinds:
        return all(isinstance(k, Kind) for k in kinds)
    bindings = facts.bindings(name) or []
    if len(bindings) != 1 or not isinstance(bindings[0], cst.Param):
        return False
    origins = facts.values.origins(name)
    return bool(origins) and all(
        o.whole and isinstance(o.node, cst.Call) and isinstance(facts.call_kind(o.node), Kind) for o in origins
    )


def statement_effect(program: Program, steps: Steps, statement: cst.CSTNode, fresh: Callable[[cst.Name], bool]) -> str | None:
    """Why ``statement``, moved into a function that runs per replica (traced, or eagerly on
    each replica), would not do what it does: its Python effects as :func:`python_effect`
    finds them, the names it reads left out (the caller accounts for them). ``fresh`` says
    which names hold containers the moved code makes itself."""
    visitor = _MovedEffects(program, steps, fresh)
    statement.visit(visitor)
    return visitor.why


class _MovedEffects(_Effects):
    def __init__(self, program: Program, steps: Steps, fresh: Callable[[cst.Name], bool]) -> None:
        super().__init__(program, steps, None)  # type: ignore[arg-type]
        self.fresh = fresh

    def _fresh_local(self, name: cst.Name) -> bool:
        return self.fresh(name)

    def visit_Name(self, node: cst.Name) -> None:
        return None


# Random numbers drawn in Python: NumPy's and the standard library's generators.
_HOST_RANDOM = ("numpy.random.", "random.")


def host_random(steps: Steps, function: cst.FunctionDef) -> cst.Call | None:
    """A call in ``function`` (or a local function it calls) that draws random numbers in
    Python (``np.random.normal(size=[batch_size, n])``). Traced, it draws once: the numbers are
    a constant of the graph. Run eagerly on every replica, each replica draws in turn from the
    one generator, which does not split the original's draw among them."""
    for call in steps.calls(function):
        if any(name.startswith(_HOST_RANDOM) for name in steps.facts.names_of(call.func)):
            return call
    return None
