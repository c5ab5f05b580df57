"""Custom training steps: the functions ``strategy.run`` runs on every replica (and the local
functions they call), what they differentiate (``tape.gradient``, ``tf.gradients``,
``optimizer.minimize``), and which values make up that loss.

The loss is followed backwards from what is differentiated, through names (the assignments
that reach the read), arithmetic, ``tf.add_n`` / ``sum`` / ``tf.cast``, loss scaling, and the
``return`` of local helper functions (a helper's parameters map back to the arguments of the
call that was entered). It stops at anything else: a ``reduce_mean``, a loss object's call, a
model call. Only values on such a path are the loss; a ``reduce_mean`` that feeds a metric, a
log or a returned diagnostic is not on it. Divisions by the replica count (or multiplications by
its inverse) met on the way are recorded: they are manual scaling.

Also here: whether code runs inside a ``tf.function`` (decorated, wrapped at its call site, or
only ever called from such code), and whether a value is used as a training loss.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterator

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, attribute_path, nodes_in, parameter_argument
from autofix.tf.index import Binding
from autofix.tf.symbols import SINGLE_REPLICA

RUN_METHODS = ("run", "experimental_run_v2")
TF_FUNCTION = "tensorflow.function"
GRADIENT_TAPE = "tensorflow.GradientTape"
# Calls whose result is their arguments' values, as far as the loss is concerned.
_PASS = frozenset(
    {
        "tensorflow.cast",
        "tensorflow.identity",
        "tensorflow.add_n",
        "tensorflow.math.add_n",
        "tensorflow.add",
        "tensorflow.math.add",
        "tensorflow.convert_to_tensor",
        "builtins.sum",
        "builtins.float",
    }
)
_DIVIDE = frozenset({"tensorflow.divide", "tensorflow.math.divide", "tensorflow.truediv", "tensorflow.math.truediv", "tensorflow.math.divide_no_nan"})
_MULTIPLY = frozenset({"tensorflow.multiply", "tensorflow.math.multiply"})
# Loss scaling (mixed precision) multiplies by a constant factor.
_PASS_METHODS = frozenset({"get_scaled_loss", "scale_loss"})
# Words in a name that say it counts replicas (``num_replicas_in_sync``, ``NUM_GPUS``...).
REPLICA_WORDS = frozenset({"replica", "replicas", "gpu", "gpus", "ngpu", "ngpus", "worker", "workers", "device", "devices", "cores"})
_DEPTH = 6


def tf_names(facts: Facts, expr: cst.BaseExpression) -> frozenset[str]:
    """The qualified names of ``expr``, with ``tensorflow.compat.v1`` / ``v2`` read as
    ``tensorflow`` (``import tensorflow.compat.v2 as tf`` is common in research code)."""
    names = facts.names_of(expr)
    if not any(n.startswith("tensorflow.compat.") for n in names):
        return names
    return frozenset(_COMPAT.sub("tensorflow.", n) for n in names)


_COMPAT = re.compile(r"^tensorflow\.compat\.v[12]\.")


def words(identifier: str) -> set[str]:
    """``numReplicasInSync`` / ``NUM_REPLICAS`` -> {"num", "replicas", ...}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", identifier)
    return {w for w in spaced.lower().split("_") if w}


@dataclass(frozen=True)
class Term:
    """Where a path backwards from a differentiated value ends."""

    node: cst.BaseExpression
    # Divisions by the replica count (or products with its inverse) on the way, nearest the
    # gradient first.
    scaling: tuple[cst.CSTNode, ...] = ()
    # Calls of local helpers entered on the way (the innermost last).
    calls: tuple[cst.Call, ...] = ()
    # Bindings passed on the way (``loss = ...``).
    bindings: tuple[cst.CSTNode, ...] = ()


class Steps(Derived):
    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts: Facts = Facts.of(program)
        self._graph: dict[cst.FunctionDef, bool] = {}
        self._classes: dict[cst.ClassDef, dict[str, tuple[list, list]]] = {}

    # --- strategy.run and the functions it runs ------------------------------------------------

    @cached_property
    def runs(self) -> list[cst.Call]:
        """``strategy.run`` / ``experimental_run_v2`` calls (on a strategy, or on a name or
        ``self`` attribute named for one)."""
        found = []
        for call, _owner in self.facts.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in RUN_METHODS and call.args and self.is_strategy(func.value):
                found.append(call)
        return found

    def is_strategy(self, expr: cst.BaseExpression) -> bool:
        """A strategy, or a name or ``self`` attribute named for one (a strategy passed in from
        another file: ``self.strategy.run(self.step, ...)``, ``def loop(strategy): ...``)."""
        if self.facts.is_strategy_expr(expr):
            return True
        path = attribute_path(expr)
        return path is not None and len(path) <= 2 and path[0] in ("self", path[-1]) and bool(words(path[-1]) & {"strategy", "strat"})

    def run_target(self, call: cst.Call) -> cst.BaseExpression | None:
        """What ``strategy.run`` is asked to run (its first argument)."""
        return argument_value(call, "fn", 0)

    def single_replica(self, call: cst.Call) -> bool:
        """Whether the strategy ``call`` runs on has one replica (OneDeviceStrategy, the
        default strategy)."""
        classes = self.facts.strategy_classes(call.func.value)  # type: ignore[union-attr]
        return bool(classes) and classes <= SINGLE_REPLICA

    def definition(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The function of this module ``func`` names: a local name, or ``self.<method>`` of
        the enclosing class."""
        local = self.facts.local_definition(func)
        if isinstance(local, cst.FunctionDef):
            return local
        if isinstance(func, cst.Name):
            return self._passed_function(func)
        path = attribute_path(func)
        if path is None or len(path) != 2 or path[0] != "self":
            return None
        for ancestor in self.program.ancestors(func):
            if isinstance(ancestor, cst.ClassDef):
                for statement in ancestor.body.body:
                    if isinstance(statement, cst.FunctionDef) and statement.name.value == path[1]:
                        return statement
                return None
        return None

    def _passed_function(self, name: cst.Name) -> cst.FunctionDef | None:
        """``def run_step(step, x): strategy.run(step, ...)``: the one local function every
        call of ``run_step`` passes for ``step``."""
        bindings = self.facts.bindings(name) or []
        if len(bindings) != 1 or not isinstance(bindings[0], cst.Param):
            return None
        param = bindings[0]
        function = self.program.parent(self.program.parent(param))
        if not isinstance(function, cst.FunctionDef) or function not in self.facts.functions or self.facts.functions[function].is_method:
            return None
        found = set()
        for ref in self.facts.references(function):
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                return None
            arg = parameter_argument(function, call, param)
            local = self.facts.local_definition(arg.value) if arg is not None else None
            if not isinstance(local, cst.FunctionDef):
                return None
            found.add(local)
        return found.pop() if len(found) == 1 else None

    @cached_property
    def roots(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """Each function run by ``strategy.run`` on a strategy with several replicas, with
        the calls that run it."""
        found: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.runs:
            target = self.run_target(call)
            definition = self.definition(target) if target is not None else None
            if definition is not None and not self.single_replica(call):
                found.setdefault(definition, []).append(call)
        return found

    @cached_property
    def functions(self) -> dict[cst.FunctionDef, cst.FunctionDef]:
        """Every function that runs in a replica: the roots and the local functions they
        call, each with the (first) root it is reached from."""
        found: dict[cst.FunctionDef, cst.FunctionDef] = {}
        for root in self.roots:
            for function in self.reached(root):
                found.setdefault(function, root)
        return found

    def reached(self, function: cst.FunctionDef) -> list[cst.FunctionDef]:
        """``function`` and the local functions it calls, directly or not."""
        found: list[cst.FunctionDef] = []
        pending = [function]
        while pending:
            current = pending.pop()
            if current in found or current not in self.facts.functions:
                continue
            found.append(current)
            for call in self.facts.functions[current].calls:
                callee = self.definition(call.func)
                if callee is not None:
                    pending.append(callee)
        return found

    def calls(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls made when ``function`` runs (in it and in the local functions it calls)."""
        return [call for f in self.reached(function) for call in self.facts.functions[f].calls]

    def aggregates_itself(self, function: cst.FunctionDef) -> bool:
        """Whether the step combines gradients across replicas itself (``all_reduce`` in the
        replica context, ``apply_gradients(..., experimental_aggregate_gradients=False)`` /
        ``skip_gradients_aggregation=True``): then the optimizer does not sum them."""
        for call in self.calls(function):
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            if func.attr.value in ("all_reduce", "batch_reduce_to", "reduce_to"):
                return True
            if func.attr.value == "apply_gradients":
                for keyword, off in (("experimental_aggregate_gradients", "False"), ("skip_gradients_aggregation", "True")):
                    value = argument_value(call, keyword)
                    if isinstance(value, cst.Name) and value.value == off:
                        return True
        return False

    def trains(self, function: cst.FunctionDef) -> bool:
        """Whether running ``function`` takes gradients or applies them."""
        return any(
            self.differentiated(call) is not None
            or isinstance(call.func, cst.Attribute) and call.func.attr.value == "apply_gradients"
            for call in self.calls(function)
        )

    def called_only_in_steps(self, function: cst.FunctionDef) -> cst.CSTNode | None:
        """None when every use of ``function`` is inside a replica function (or it is a
        root); otherwise the first use outside."""
        if function in self.roots:
            return None
        info = self.facts.functions.get(function)
        if info is not None and info.is_method:
            uses = self._self_attributes(function).get(function.name.value, ([], []))[1]
        else:
            uses = self.facts.references(function)
        for ref in uses:
            if self.program.enclosing_function(ref) not in self.functions:
                return ref
        return None

    # --- self.<name> in a class ----------------------------------------------------------------

    def attribute_assignments(self, attr: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
        """The values assigned to ``self.<name>`` (``attr``) in its class, with their targets."""
        return self._self_attribute(attr)[0]

    def attribute_reads(self, attr: cst.BaseExpression) -> list[cst.CSTNode]:
        """Every read of ``self.<name>`` (``attr``) in its class."""
        return self._self_attribute(attr)[1]

    def _self_attribute(self, attr: cst.BaseExpression) -> tuple[list, list]:
        path = attribute_path(attr)
        if path is None or len(path) != 2 or path[0] != "self":
            return [], []
        return self._self_attributes(attr).get(path[1], ([], []))

    def _self_attributes(self, node: cst.CSTNode) -> dict[str, tuple[list, list]]:
        cls = next((a for a in self.program.ancestors(node) if isinstance(a, cst.ClassDef)), None)
        if cls is None:
            return {}
        found = self._classes.get(cls)
        if found is None:
            found = self._classes[cls] = _SelfAttributes.of(cls)
        return found

    # --- what is differentiated ---------------------------------------------------------------

    def differentiated(self, call: cst.Call) -> cst.BaseExpression | None:
        """The value ``call`` differentiates: ``tape.gradient(target, ...)``,
        ``tf.gradients(ys, ...)``, ``optimizer.minimize(loss, ...)``."""
        func = call.func
        if isinstance(func, cst.Attribute):
            if func.attr.value == "gradient" and self._is_tape(func.value):
                return argument_value(call, "target", 0)
            if func.attr.value == "minimize" and not self.facts.is_module_reference(func.value):
                return argument_value(call, "loss", 0)
        if "tensorflow.gradients" in tf_names(self.facts, func):
            return argument_value(call, "ys", 0)
        return None

    def _is_tape(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            for binding in self.facts.bindings(expr) or []:
                parent = self.program.parent(binding)
                holder = self.program.parent(parent) if isinstance(parent, cst.AsName) else None
                made = holder.item if isinstance(holder, cst.WithItem) else self.facts.assigned_value(binding)
                if isinstance(made, cst.Call) and GRADIENT_TAPE in tf_names(self.facts, made.func):
                    return True
        path = attribute_path(expr)
        return path is not None and "tape" in words(path[-1])

    def gradient_targets(self, root: cst.FunctionDef) -> list[tuple[cst.Call, cst.BaseExpression]]:
        """What the replica function ``root`` (and the helpers it calls) differentiates."""
        found = []
        for call in self.calls(root):
            target = self.differentiated(call)
            if target is not None:
                found.append((call, target))
        return found

    def loss_terms(self, root: cst.FunctionDef) -> list[Term]:
        """Where the paths backwards from everything ``root`` differentiates end."""
        walk = _Backward(self)
        for _call, target in self.gradient_targets(root):
            walk.value(target, _State())
        return walk.terms

    # --- graphs and eager code ----------------------------------------------------------------

    def compiled(self, function: cst.FunctionDef) -> bool:
        """Whether ``function`` only ever runs as a graph: decorated with ``tf.function``,
        wrapped by it where it is used, or only called from code that is."""
        known = self._graph.get(function)
        if known is not None:
            return known
        self._graph[function] = False  # a cycle of calls proves nothing
        result = self._compiled(function)
        self._graph[function] = result
        return result

    def _is_tf_function(self, expr: cst.BaseExpression) -> bool:
        if TF_FUNCTION in tf_names(self.facts, expr):
            return True
        # ``tf.function`` read where no import binds ``tf`` (a notebook or a pasted snippet).
        return attribute_path(expr) == ("tf", "function") and not self.facts.names_of(expr)

    def _compiled(self, function: cst.FunctionDef) -> bool:
        for decorator in function.decorators:
            expr = decorator.decorator
            if self._is_tf_function(expr.func if isinstance(expr, cst.Call) else expr):
                return True
        references = self.facts.references(function)
        for ref in references:
            arg = self.program.parent(ref)
            holder = self.program.parent(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(holder, cst.Call) and self._is_tf_function(holder.func):
                return True
        if not references:
            return False
        for ref in references:
            parent = self.program.parent(ref)
            if isinstance(parent, cst.Call) and parent.func is ref:
                if not self.in_graph(parent):
                    return False
            elif isinstance(parent, cst.Arg) and isinstance(self.program.parent(parent), cst.Call):
                holder = self.program.parent(parent)
                # Run by strategy.run: it runs where that call runs.
                if not (holder in self.runs and self.run_target(holder) is ref and self.in_graph(holder)):  # type: ignore[comparison-overlap]
                    return False
            else:
                return False
        return True

    def in_graph(self, node: cst.CSTNode) -> bool:
        """Whether the code at ``node`` runs inside a ``tf.function``."""
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef) and self.compiled(ancestor):
                return True
        return False

    # --- is a value a training loss? -----------------------------------------------------------

    @cached_property
    def _differentiated(self) -> dict[cst.CSTNode, cst.Call]:
        found = {}
        for call, _owner in self.facts.calls:
            target = self.differentiated(call)
            if target is not None:
                found[target] = call
        return found

    def feeds_gradient(self, expr: cst.BaseExpression) -> cst.Call | None:
        """The ``tape.gradient`` / ``minimize`` call whose loss ``expr``'s value is used to
        compute, if any."""
        sinks = self._differentiated
        for node in self.forward(expr):
            if node in sinks:
                return sinks[node]
        return None

    def forward(self, expr: cst.BaseExpression) -> Iterator[cst.CSTNode]:
        """The expressions computed from ``expr``'s value: through operations, calls (their
        result depends on their arguments), names it is assigned to, and the calls of a local
        function that returns it."""
        seen: set[int] = set()
        pending: list[tuple[cst.CSTNode, int]] = [(expr, 0)]
        while pending:
            node, depth = pending.pop()
            if id(node) in seen or depth > 40:
                continue
            seen.add(id(node))
            yield node
            parent = self.program.parent(node)
            if isinstance(parent, cst.Return) and parent.value is node:
                function = self.program.enclosing_function(parent)
                for ref in self.facts.references(function) if function is not None else ():
                    call = self.program.parent(ref)
                    if isinstance(call, cst.Call) and call.func is ref:
                        pending.append((call, depth + 1))
                continue
            if parent is None or isinstance(parent, cst.BaseStatement) and not isinstance(parent, cst.SimpleStatementLine):
                continue
            if isinstance(parent, (cst.AssignTarget,)):
                continue
            if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and getattr(parent, "value", None) is node:
                targets = parent.targets if isinstance(parent, cst.Assign) else [parent]
                for target in targets:
                    for name in _target_names(target.target):
                        for use in self.facts.uses(name):
                            pending.append((use, depth + 1))
                continue
            if isinstance(parent, (cst.Expr, cst.Return, cst.SimpleStatementLine, cst.IndentedBlock, cst.Module)):
                continue
            if isinstance(parent, cst.Call) and parent.func is node and not isinstance(node, cst.Attribute):
                continue  # ``value(...)``: calling it is not computing with it
            pending.append((parent, depth + 1))


class _SelfAttributes(cst.CSTVisitor):
    """``self.<name>`` in a class: the values assigned to each name, and its reads."""

    def __init__(self) -> None:
        self.found: dict[str, tuple[list, list]] = {}

    @classmethod
    def of(cls, node: cst.ClassDef) -> dict[str, tuple[list, list]]:
        visitor = cls()
        node.body.visit(visitor)
        return visitor.found

    def _entry(self, attr: cst.BaseExpression) -> tuple[list, list] | None:
        if isinstance(attr, cst.Attribute) and isinstance(attr.value, cst.Name) and attr.value.value == "self":
            return self.found.setdefault(attr.attr.value, ([], []))
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            entry = self._entry(target.target)
            if entry is not None:
                entry[0].append((node.value, target.target))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return not isinstance(node.target, cst.Attribute)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        entry = self._entry(node)
        if entry is not None:
            entry[1].append(node)


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


@dataclass(frozen=True)
class _State:
    scaling: tuple[cst.CSTNode, ...] = ()
    calls: tuple[cst.Call, ...] = ()
    bindings: tuple[cst.CSTNode, ...] = ()

    def key(self, node: cst.CSTNode) -> tuple:
        return (id(node), tuple(id(c) for c in self.calls), bool(self.scaling))


class _Backward:
    """Follows a differentiated value back to where it is made (see the module docstring)."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.program = steps.program
        self.facts = steps.facts
        self.terms: list[Term] = []
        self._seen: set[tuple] = set()

    def end(self, node: cst.BaseExpression, state: _State) -> None:
        self.terms.append(Term(node, state.scaling, state.calls, state.bindings))

    def value(self, node: cst.BaseExpression, state: _State) -> None:
        key = state.key(node)
        if key in self._seen or len(self._seen) > 5000:
            return
        self._seen.add(key)
        if isinstance(node, cst.Name):
            self.name(node, state)
        elif isinstance(node, cst.BinaryOperation):
            self.operation(node, node.left, node.operator, node.right, state)
        elif isinstance(node, cst.UnaryOperation):
            self.value(node.expression, state)
        elif isinstance(node, cst.IfExp):
            self.value(node.body, state)
            self.value(node.orelse, state)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self.value(element.value, state)
        elif isinstance(node, cst.Subscript):
            self.value(node.value, state)
        elif isinstance(node, cst.Call):
            self.call(node, state)
        elif isinstance(node, cst.Lambda):
            self.value(node.body, state)
        else:
            self.end(node, state)

    def operation(self, node: cst.CSTNode, left: cst.BaseExpression, operator: object, right: cst.BaseExpression, state: _State) -> None:
        if isinstance(operator, (cst.Add, cst.Subtract)):
            self.value(left, state)
            self.value(right, state)
        elif isinstance(operator, cst.Divide):
            if self.counts_replicas(right):
                state = _State((*state.scaling, node), state.calls, state.bindings)
            self.value(left, state)
        elif isinstance(operator, cst.Multiply):
            for factor, other in ((left, right), (right, left)):
                if self.inverse_count(factor):
                    self.value(other, _State((*state.scaling, node), state.calls, state.bindings))
                    return
            self.value(left, state)
            self.value(right, state)
        else:
            self.end(node, state)  # type: ignore[arg-type]

    def call(self, call: cst.Call, state: _State) -> None:
        names = tf_names(self.facts, call.func)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if names & _PASS:
            for arg in positional[:1] if "tensorflow.cast" in names else positional:
                self.value(arg, state)
            return
        if names & (_DIVIDE | _MULTIPLY) and len(positional) == 2:
            operator = cst.Divide() if names & _DIVIDE else cst.Multiply()
            self.operation(call, positional[0], operator, positional[1], state)
            return
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PASS_METHODS and positional:
            self.value(positional[0], state)
            return
        definition = self.steps.definition(func)
        if definition is not None and call not in state.calls and len(state.calls) < _DEPTH:
            inner = _State(state.scaling, (*state.calls, call), state.bindings)
            for ret in self.facts.functions[definition].returns if definition in self.facts.functions else ():
                if ret.value is not None:
                    self.value(ret.value, inner)
            return
        self.end(call, state)

    def name(self, name: cst.Name, state: _State) -> None:
        bindings = self.reaching(name)
        if not bindings:
            self.end(name, state)
        for binding in bindings:
            self.binding(binding, name, state)

    def binding(self, binding: Binding, read: cst.Name, state: _State) -> None:
        node = binding.node
        state = _State(state.scaling, state.calls, (*state.bindings, node))
        if binding.kind == "param":
            self.parameter(node, read, state)  # type: ignore[arg-type]
            return
        if binding.kind == "def" and isinstance(node, cst.FunctionDef):
            # A function given to minimize: its returns are the loss.
            for ret in self.facts.functions[node].returns if node in self.facts.functions else ():
                if ret.value is not None:
                    self.value(ret.value, state)
            return
        parent = self.program.parent(node)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            self.operation(parent, node, _augmented(parent.operator), parent.value, state)
            return
        if isinstance(parent, cst.AssignTarget):
            assign = self.program.parent(parent)
            if isinstance(assign, cst.Assign):
                self.value(assign.value, state)
                return
        if isinstance(parent, (cst.AnnAssign, cst.NamedExpr)) and parent.value is not None:
            self.value(parent.value, state)
            return
        if isinstance(parent, cst.Element):
            self.unpacked(parent, state)
            return
        self.end(read, state)

    def unpacked(self, element: cst.Element, state: _State) -> None:
        """``loss, logits = helper(...)``: the element's share of the value."""
        holder = self.program.parent(element)
        target = self.program.parent(holder) if holder is not None else None
        assign = self.program.parent(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(holder, (cst.Tuple, cst.List)) or not isinstance(assign, cst.Assign):
            return
        position = list(holder.elements).index(element)
        self.element(assign.value, position, state)

    def element(self, value: cst.BaseExpression, position: int, state: _State) -> None:
        if isinstance(value, (cst.Tuple, cst.List)):
            if position < len(value.elements):
                self.value(value.elements[position].value, state)
            return
        if isinstance(value, cst.Call):
            definition = self.steps.definition(value.func)
            if definition is not None and definition in self.facts.functions and value not in state.calls and len(state.calls) < _DEPTH:
                inner = _State(state.scaling, (*state.calls, value), state.bindings)
                for ret in self.facts.functions[definition].returns:
                    if ret.value is not None:
                        self.element(ret.value, position, inner)
                return
        if isinstance(value, cst.Name):
            for binding in self.reaching(value):
                parent = self.program.parent(binding.node)
                if isinstance(parent, cst.AssignTarget) and isinstance(self.program.parent(parent), cst.Assign):
                    self.element(self.program.parent(parent).value, position, state)  # type: ignore[union-attr]
            return
        self.end(value, state)

    def parameter(self, param: cst.Param, read: cst.Name, state: _State) -> None:
        """A helper's parameter is the argument of the call it was entered through."""
        params = self.program.parent(param)
        function = self.program.parent(params) if params is not None else None
        if state.calls and isinstance(function, cst.FunctionDef):
            call = state.calls[-1]
            if self.steps.definition(call.func) is function:
                arg = parameter_argument(function, call, param)
                if arg is not None:
                    self.value(arg.value, _State(state.scaling, state.calls[:-1], state.bindings))
                    return
        self.end(read, state)

    # --- names and what reaches a read -------------------------------------------------------

    def reaching(self, name: cst.Name) -> list[Binding]:
        """The bindings whose value a read of ``name`` may see: the latest one made earlier in
        a block that holds the read, and those after it (in branches and loops)."""
        access = self.program.access(name)
        if access is None:
            return []
        found: list[Binding] = []
        for binding in sorted(access.referents, key=lambda b: b.index, reverse=True):
            if binding.kind in ("import", "builtin", "class"):
                return []
            found.append(binding)
            if binding.scope is access.scope and self._dominates(binding, name):
                break
        return found

    def _dominates(self, binding: Binding, read: cst.Name) -> bool:
        if binding.kind in ("param", "def"):
            return True
        statement = self.program.statement_of(binding.node)
        if statement is None or isinstance(statement, (cst.For, cst.While)):
            return False
        block = self.program.block_of(statement)
        ancestors = set(map(id, self.program.ancestors(read)))
        while block is not None and id(block) not in ancestors:
            # The body of a ``with`` (or ``try``) always runs: what it binds is bound after it.
            owner = self.program.parent(block)
            if not isinstance(owner, (cst.With, cst.Try)) or owner.body is not block:
                return False
            block = self.program.block_of(owner)
        return block is not None

    def counts_replicas(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is (or is made from) the replica count or the global batch size."""
        return named_for(self.facts, expr, lambda found: bool(found & REPLICA_WORDS) or {"global", "batch"} <= found)

    def inverse_count(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``expr`` is ``1 / <replica count>`` (or a name bound to it)."""
        if depth > 4:
            return False
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
            return self.counts_replicas(expr.right)
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(expr) or []]
            return bool(values) and all(v is not None and self.inverse_count(v, depth + 1) for v in values)
        return False


def named_for(facts: Facts, expr: cst.BaseExpression, test: Callable[[set[str]], bool], depth: int = 0) -> bool:
    """Whether a name or attribute in ``expr``, or in what its names were assigned (followed a
    few steps back), passes ``test`` on its :func:`words`."""
    if depth > 4:
        return False
    for node in nodes_in(expr, cst.Name):  # names and attribute names
        if test(words(node.value)):
            return True
        if isinstance(node, cst.Name) and facts.program.access(node) is not None:
            for binding in facts.bindings(node) or []:
                value = facts.assigned_value(binding)
                if value is not None and named_for(facts, value, test, depth + 1):
                    return True
    return False


def _augmented(operator: cst.BaseAugOp) -> object:
    return {
        cst.AddAssign: cst.Add(),
        cst.SubtractAssign: cst.Subtract(),
        cst.MultiplyAssign: cst.Multiply(),
        cst.DivideAssign: cst.Divide(),
    }.get(type(operator), operator)
