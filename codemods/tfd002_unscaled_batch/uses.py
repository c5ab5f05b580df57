"""Every read of a batch-size value that a fix changes, and what each read means there.

A fix changes the batch the training data is made of. Every other place that reads the same
value must be accounted for: it follows the new (global) value, it keeps the per-replica value
on purpose, or the fix is refused. What holds one value is a *web*:

- a name, with every binding it has in its scope (plain, tuple and augmented assignments,
  ``:=``, loop and ``with`` targets, parameters, a ``global`` store made in another function)
  and every read of any of them, in that scope or a nested one (a default ``def f(b=BATCH)``
  and an f-string are reads too);
- an attribute or subscript path on one object (``args.batch_size``, ``config["batch"]``),
  with every read and store of that path and the key of a dict literal bound to the object.

Each read gets a kind from where it is and what reads it (see the constants below).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from autofix.analysis.facts.dataflow import EVALUATE_SINKS, PREDICT_SINKS, TRAIN_SINKS
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.steps.step_losses import normalizers
from autofix.analysis.steps.custom import Steps

# Part of the web's own definition: ``B *= 2``, ``B = B * 2``.
DEFINITION = "definition"
# Multiplied by the replica count: the file's own global batch is made from it.
PER_REPLICA = "per-replica"
# Only shown: printed, logged, formatted into a message that is.
DISPLAY = "display"
# The batch size of data that is only evaluated or predicted on, or one ``fit`` ignores: the
# same results with either batch.
EVALUATION = "evaluation"
# The batch size of data trained on under the strategy: a finding of its own.
TRAINING = "training"
# The batch size of data trained on otherwise (another model, no strategy), or of data whose
# destination is not known, or of a training batch whose fix is refused: it keeps its value.
KEPT = "kept"
# Read by code that runs on every replica, where it may mean either batch.
REPLICA = "replica"
# Read by an ``assert``: it passes or fails (and says why) as on the one device it was written
# for as long as it keeps the per-replica value.
CHECKED = "checked"
# Anything else: a value computed from the batch (steps per epoch, a buffer, a container).
DERIVED = "derived"

# Calls that only show their arguments.
_DISPLAY_CALLS = frozenset({"builtins.print", "tensorflow.print", "sys.stdout.write", "sys.stderr.write"})
_DISPLAY_PREFIXES = ("logging.", "absl.logging.", "tensorflow.summary.text", "mlflow.log_param")
# Methods of a logger (``logger.info(...)``) or a progress bar.
_LOG_METHODS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "exception", "log", "set_description", "set_postfix_str"})
# Calls whose result carries their first argument's number (``int(args.batch)``).
_NUMERIC = frozenset({"builtins.int", "builtins.float", "builtins.round", "builtins.abs", "builtins.max", "builtins.min"})
_STRINGS = frozenset({"builtins.str", "builtins.repr", "builtins.format"})


@dataclass(eq=False)
class Web:
    """What holds one value: a name's bindings in one scope, or one path on one object."""

    label: str
    reads: list[cst.CSTNode]
    # Where it is set: a name's binding nodes, or a path's store targets.
    sets: list[cst.CSTNode]
    # The values it is set to, where known (what it comes from).
    values: list[cst.BaseExpression] = field(default_factory=list)
    is_name: bool = True
    # Small statements that set it (their reads of the web are its definition).
    setters: set[int] = field(default_factory=set)


class Webs:
    """The webs of one program, and the kind of each read."""

    def __init__(self, program: Program, counts_replicas: Callable[[cst.BaseExpression], bool]) -> None:
        self.program = program
        self.facts = Facts.of(program)
        self.counts_replicas = counts_replicas
        self._names: dict[tuple, Web | None] = {}
        self._paths: dict[tuple, Web | None] = {}
        self._normalizers: set[int] | None = None

    # --- webs ----------------------------------------------------------------------------------

    def of(self, expr: cst.BaseExpression) -> Web | None:
        if isinstance(expr, cst.Name):
            return self.of_name(expr)
        if isinstance(expr, cst.NamedExpr) and isinstance(expr.target, cst.Name):
            return self.of_name(expr.target)
        return self.of_path(expr)

    def of_name(self, name: cst.Name) -> Web | None:
        """The web of the name read or bound at ``name`` (None: a builtin, or unbound).

        Bindings of one scope that no read can see together are separate values (``BATCH =
        64`` used, then ``BATCH = 32`` for something else): the web holds the bindings that
        reach ``name``, those that reach a read together with one of them, and those a setter
        of the web reads (``BATCH *= 2`` reads the binding before it)."""
        binding = self.program.assignment(name)
        if binding is None:
            access = self.program.access(name)
            if access is None or not access.referents:
                return None
            binding = access.referents[0]
            start = set(self._reaching(name))
        else:
            start = {id(binding.node)}
        if binding.kind == "builtin":
            return None
        bindings = binding.scope.assignments(binding.name)
        members = self._close(start, bindings)
        key = (id(binding.scope), binding.name, frozenset(members))
        if key in self._names:
            return self._names[key]
        chosen = [b for b in bindings if id(b.node) in members]
        reads: dict[int, cst.CSTNode] = {}
        for each in chosen:
            for access in each.references:
                if members & set(self._reaching(access.node)):
                    reads.setdefault(id(access.node), access.node)
        web = Web(binding.name, list(reads.values()), [b.node for b in chosen])
        for node in web.sets:
            setter = self._small_statement(node)
            if setter is not None:
                web.setters.add(id(setter))
            value = self._set_value(node)
            if value is not None:
                web.values.append(value)
        self._names[key] = web
        return web

    def _reaching(self, read: cst.CSTNode) -> list[int]:
        """The bindings a read of a name may see (all of them for an imported name, which
        ``Facts`` leaves unresolved)."""
        if not isinstance(read, cst.Name):
            return []
        found = self.facts.reaching_bindings(read)
        if found is None:
            access = self.program.access(read)
            return [id(b.node) for b in access.referents] if access is not None else []
        return [id(n) for n in found]

    def _close(self, members: set[int], bindings: list) -> set[int]:
        members = set(members)
        changed = True
        while changed:
            changed = False
            # A read that may see a member may see its other bindings: one value.
            for each in bindings:
                for access in each.references:
                    reach = set(self._reaching(access.node))
                    if reach & members and not reach <= members:
                        members |= reach
                        changed = True
            # A member's own setter (``B *= 2``) reads the bindings before it.
            for each in bindings:
                setter = self._small_statement(each.node) if id(each.node) in members else None
                if setter is None:
                    continue
                for other in bindings:
                    for access in other.references:
                        if self._small_statement(access.node) is setter:
                            reach = set(self._reaching(access.node))
                            if not reach <= members:
                                members |= reach
                                changed = True
        return members

    def of_path(self, expr: cst.BaseExpression) -> Web | None:
        """The web of ``args.batch_size`` / ``config["batch"]`` / ``settings.BATCH`` (None for
        anything else)."""
        path = _path(expr)
        if path is None:
            return None
        root, parts = path
        owner = self._owner(root)
        if owner is None:
            return None
        key = (owner, parts)
        if key in self._paths:
            return self._paths[key]
        web = Web(self.program.module.code_for_node(expr), [], [], is_name=False)
        for access in self.program.index.accesses.values():
            if access.name != root.value or self._owner(access.node) != owner:
                continue
            node = self._climb(access.node, parts)
            if node is None:
                continue
            parent = self.program.parent(node)
            if isinstance(parent, cst.AssignTarget):
                web.sets.append(node)
                web.values.append(self.program.parent(parent).value)  # type: ignore[union-attr]
                continue
            if isinstance(parent, cst.AugAssign) and parent.target is node:
                web.sets.append(node)
                web.setters.add(id(parent))
                web.values.append(parent.value)
            web.reads.append(node)
        if len(parts) == 1 and parts[0][0] == "[":
            # ``config = {"batch": BATCH}``: the key is set where the dict is made.
            for binding in self.facts.bindings(root) or ():
                value = self.facts.assigned_value(binding)
                found = _dict_value(self.facts, value, parts[0][1:]) if value is not None else None
                if found is not None:
                    web.values.append(found)
        self._paths[key] = web
        return web

    def operands(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """The names and paths whose value ``expr`` carries (through arithmetic, ``int()``,
        ``max()``, conditional expressions); a literal carries none."""
        if isinstance(expr, cst.Name):
            return [expr] if self.program.access(expr) is not None else []
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return [expr] if self.of_path(expr) is not None else []
        if isinstance(expr, cst.BinaryOperation):
            return self.operands(expr.left) + self.operands(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.operands(expr.expression)
        if isinstance(expr, cst.IfExp):
            return self.operands(expr.body) + self.operands(expr.orelse)
        if isinstance(expr, cst.NamedExpr):
            return self.operands(expr.value)
        if isinstance(expr, cst.Call) and self.facts.names_of(expr.func) & _NUMERIC:
            return [o for arg in expr.args for o in self.operands(arg.value)]
        return []

    def factor(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The one name or path ``expr`` is proportional to (``BATCH * 2``, ``args.batch //
        2``): making it global makes ``expr`` global. None for anything else (``BATCH + 8``)."""
        while isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Multiply):
                left, right = self.operands(expr.left), self.operands(expr.right)
                if left and right:
                    return None
                expr = expr.left if left else expr.right
            elif isinstance(expr.operator, (cst.Divide, cst.FloorDivide)) and not self.operands(expr.right):
                expr = expr.left
            else:
                return None
        if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)) and self.operands(expr) == [expr]:
            return expr
        return None

    # --- kinds ---------------------------------------------------------------------------------

    def kind(self, read: cst.CSTNode, web: Web, destinations: dict[int, str]) -> str:
        """What ``read`` does with the web's value. ``destinations`` gives, for the reads that
        are the batch size of some data, where that data goes (TRAINING, EVALUATION, KEPT)."""
        if id(self._small_statement(read)) in web.setters:
            return DEFINITION
        if self.product(read) is not None:
            return PER_REPLICA
        if id(read) in destinations:
            return destinations[id(read)]
        if self.displayed(read):
            return DISPLAY
        parent = self.program.parent(read)
        if isinstance(parent, cst.Arg) and parent.keyword is not None:
            call = self.program.parent(parent)
            method = call.func.attr.value if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) else None
            if parent.keyword.value == "validation_batch_size" or (
                parent.keyword.value == "batch_size" and method in EVALUATE_SINKS | PREDICT_SINKS | TRAIN_SINKS
            ):
                # Evaluation, prediction, or a ``fit`` that ignores it (it is given a dataset:
                # a ``fit`` on arrays is a site, with a destination of its own).
                return EVALUATION
        if self.on_replicas(read) is not None:
            # Migrating, code on the replicas (a GAN's noise) means the per-replica batch, as
            # on the one device it was written for; what divides the loss over the batch
            # (``global_batch_size=BATCH``, ``tf.reduce_sum(l) / BATCH``) means the global
            # one: each replica's loss is then its share of the global mean.
            if self.program.migration is None:
                return REPLICA
            return DERIVED if self.normalizes_loss(read) else KEPT
        if self.asserted(read):
            return CHECKED
        return DERIVED

    def normalizes_loss(self, read: cst.CSTNode) -> bool:
        """Whether ``read`` is (part of) what divides a step's loss over the batch."""
        if self._normalizers is None:
            self._normalizers = {id(n.node) for n in normalizers(self.program)}
        return any(id(a) in self._normalizers for a in (read, *self.program.ancestors(read)))

    def asserted(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is read by an ``assert`` (its test, or the message that describes
        what the test checks)."""
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.Assert):
                return True
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
                return False
        return False

    def product(self, read: cst.CSTNode) -> tuple[cst.Name | None, cst.BaseExpression] | None:
        """``read`` multiplied by the replica count (``GLOBAL = BATCH * n``, ``lr = 0.1 *
        BATCH * n``): the name the product is given when it is exactly ``read`` times the
        count (None when it is used where it is made), and the product."""
        current: cst.CSTNode = read
        factors: list[cst.BaseExpression] = []
        exact = True
        while True:
            parent = self.program.parent(current)
            if not isinstance(parent, cst.BinaryOperation):
                break
            if isinstance(parent.operator, cst.Multiply):
                factors.append(parent.right if parent.left is current else parent.left)
            elif isinstance(parent.operator, (cst.Divide, cst.FloorDivide)) and parent.left is current:
                exact = False
            else:
                break
            current = parent
        if not any(self.counts_replicas(f) for f in factors):
            return None
        target = self.facts.assigned_name(current) if exact and len(factors) == 1 else None  # type: ignore[arg-type]
        return target, current  # type: ignore[return-value]

    def displayed(self, node: cst.CSTNode, depth: int = 0) -> bool:
        """Whether the value read at ``node`` is only shown: printed or logged, directly or
        formatted into a string (an f-string, ``%``, ``.format``, ``str()``) that is."""
        current = node
        for _ in range(12):
            parent = self.program.parent(current)
            if isinstance(parent, (cst.FormattedStringExpression, cst.FormattedString, cst.ConcatenatedString)):
                current = parent
                continue
            if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Modulo) and parent.right is current:
                current = parent
                continue
            if isinstance(parent, cst.Element) and isinstance(self.program.parent(parent), (cst.Tuple, cst.List)):
                current = self.program.parent(parent)
                continue
            if isinstance(parent, cst.Arg):
                call = self.program.parent(parent)
                if not isinstance(call, cst.Call):
                    return False
                names = self.facts.names_of(call.func)
                if names & _DISPLAY_CALLS or any(n.startswith(_DISPLAY_PREFIXES) for n in names):
                    return True
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in _LOG_METHODS and not names:
                    return True
                if names & _STRINGS or (
                    isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString))
                ):
                    current = call
                    continue
                return False
            if isinstance(parent, cst.Assign) and current is parent.value and depth < 2 and current is not node:
                # ``message = f"... {BATCH}"``, then shown.
                target = self.facts.assigned_name(current)  # type: ignore[arg-type]
                uses = self.facts.uses(target) if target is not None else []
                return bool(uses) and all(self.displayed(u, depth + 1) for u in uses)
            return False
        return False

    def on_replicas(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The function running on every replica (under ``strategy.run``) that ``node`` is in."""
        functions = Steps.of(self.program).functions
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef) and ancestor in functions:
                return ancestor
        return None

    # --- helpers -------------------------------------------------------------------------------

    def _small_statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.BaseSmallStatement):
                return ancestor
            if isinstance(ancestor, cst.BaseStatement):
                return None
        return None

    def _set_value(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """What a binding node sets its name to: the assigned value, the matching element of
        an unpacked tuple (``B, E = 64, 3``), the operand of ``B *= 2``."""
        value = self.facts.assigned_value(node)
        if value is not None:
            return value
        parent = self.program.parent(node)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            return parent.value
        if isinstance(parent, cst.Element):
            target = self.program.parent(parent)
            holder = self.program.parent(target)
            assign = self.program.parent(holder) if isinstance(holder, cst.AssignTarget) else None
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(assign, cst.Assign):
                values = assign.value
                position = list(target.elements).index(parent)
                if isinstance(values, (cst.Tuple, cst.List)) and len(values.elements) == len(target.elements):
                    element = values.elements[position]
                    return element.value if not isinstance(element, cst.StarredElement) else None
        return None

    def _owner(self, root: cst.Name) -> object | None:
        """What a path's root name stands for: its bindings, or, for ``self`` in a method,
        the class (so that ``self.batch`` is one path across the methods of a class)."""
        access = self.program.access(root)
        if access is None or not access.referents:
            return None
        if any(b.kind == "builtin" for b in access.referents):
            return None
        nodes = [b.node for b in access.referents]
        if len(nodes) == 1 and isinstance(nodes[0], cst.Param):
            function = self.program.enclosing_function(nodes[0])
            info = self.facts.functions.get(function) if function is not None else None
            params = function.params.params if function is not None else ()
            if info is not None and info.is_method and params and params[0] is nodes[0]:
                for ancestor in self.program.ancestors(function):
                    if isinstance(ancestor, cst.ClassDef):
                        return ("class", id(ancestor))
        return frozenset(id(n) for n in nodes)

    def _climb(self, node: cst.CSTNode, parts: tuple[str, ...]) -> cst.CSTNode | None:
        for part in parts:
            parent = self.program.parent(node)
            if part[0] == "." and isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == part[1:]:
                node = parent
            elif part[0] == "[" and isinstance(parent, cst.Subscript) and parent.value is node and _key(parent) == part[1:]:
                node = parent
            else:
                return None
        return node


def _key(subscript: cst.Subscript) -> str | None:
    """The constant key of ``x["batch"]`` / ``x[0]``, as text."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    value = subscript.slice[0].slice.value
    if isinstance(value, cst.SimpleString):
        return repr(value.evaluated_value)
    if isinstance(value, cst.Integer):
        return value.value
    return None


def _path(expr: cst.BaseExpression) -> tuple[cst.Name, tuple[str, ...]] | None:
    parts: list[str] = []
    while True:
        if isinstance(expr, cst.Attribute):
            parts.append("." + expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            key = _key(expr)
            if key is None:
                return None
            parts.append("[" + key)
            expr = expr.value
        else:
            break
    if not isinstance(expr, cst.Name) or not parts:
        return None
    return expr, tuple(reversed(parts))


def _dict_value(facts: Facts, value: cst.BaseExpression, key: str) -> cst.BaseExpression | None:
    """The value ``{"batch": V}`` or ``dict(batch=V)`` gives ``key``."""
    if isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                if repr(element.key.evaluated_value) == key:
                    return element.value
    elif isinstance(value, cst.Call) and "builtins.dict" in facts.names_of(value.func):
        for arg in value.args:
            if arg.keyword is not None and repr(arg.keyword.value) == key:
                return arg.value
    return None
