"""Custom training steps: the functions ``strategy.run`` runs on every replica (and the local
functions they call), what they differentiate (``tape.gradient``, ``tf.gradients``,
``optimizer.minimize``), which code runs inside a ``tf.function`` (decorated, wrapped at its
call site, or only ever called from such code), and where a value is used as a training loss.

What a call runs is :mod:`.callees`'s answer; the loss itself, term by term, is
:mod:`.losses`'; what ``strategy.run`` is fed, :mod:`.inputs`'.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Callable, Iterator

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.callees import RUN_METHODS, Callables, tf_names
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, attribute_path, nodes_in, target_names, words
from autofix.tf.symbols import SINGLE_REPLICA

__all__ = ["RUN_METHODS", "REPLICA_WORDS", "Steps", "counts_replicas", "inverse_count", "named_for", "replica_share", "tf_names", "words"]

TF_FUNCTION = "tensorflow.function"
GRADIENT_TAPE = "tensorflow.GradientTape"
CLIP_BY_GLOBAL_NORM = "tensorflow.clip_by_global_norm"
# Words in a name that say it counts replicas (``num_replicas_in_sync``, ``NUM_GPUS``...).
REPLICA_WORDS = frozenset({"replica", "replicas", "gpu", "gpus", "ngpu", "ngpus", "worker", "workers", "device", "devices", "cores"})


class Steps(Derived):
    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts: Facts = Facts.of(program)
        self.callables: Callables = Callables.of(program)
        self._graph: dict[cst.FunctionDef, bool] = {}

    # --- strategy.run and the functions it runs ------------------------------------------------

    @cached_property
    def runs(self) -> list[cst.Call]:
        """``strategy.run`` / ``experimental_run_v2`` calls (on a strategy, or on a name or
        ``self`` attribute named for one; or on an attribute named for one of an object given
        to this code, ``obj.strategy.run(step, args=(...))``, when the call passes ``args=``
        as only ``strategy.run`` is called)."""
        found = []
        for call, _owner in self.facts.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in RUN_METHODS and call.args and (
                self.is_strategy(func.value) or self._held_strategy(func.value, call)
            ) and not self._never_run(call):
                found.append(call)
        return found

    @cached_property
    def _entry_script(self) -> bool:
        """Whether the file is a program to run (an ``if __name__ == "__main__":`` block), not
        a module whose functions are there for others (a notebook, a script autofix does not
        read) to call."""
        for statement in self.program.module.body:
            if isinstance(statement, cst.If) and isinstance(statement.test, cst.Comparison):
                sides = [statement.test.left, *(c.comparator for c in statement.test.comparisons)]
                if any(isinstance(x, cst.Name) and x.value == "__name__" for x in sides) and any(
                    isinstance(x, cst.SimpleString) and x.evaluated_value == "__main__" for x in sides
                ):
                    return True
        return False

    def _never_run(self, call: cst.Call) -> bool:
        """Whether ``call`` is in a top-level function that nothing runs: never read in this
        file (not called, not passed on) and, in the file's project, never used by another
        module (``project.callers.users``: an import, a call, a value passed on). Dead code (a
        custom step kept after training moved to ``fit``, its call commented out) trains
        nothing. Only in an entry script (an ``if __name__ == "__main__":`` block) of a project
        (a root marked by pyproject.toml, setup.py, setup.cfg or .git): a module of functions,
        a file checked alone, or one in a bare folder may be used by code not seen."""
        if self.program.path is None or not self._entry_script:
            return False
        function = self.program.outermost_function(call)
        if function is None or function not in self.program.module.body:
            return False
        for decorator in function.decorators:
            if not self.facts.names_of(decorator.decorator) & {"tensorflow.function"}:
                return False  # a decorator may register it (a command, a callback)
        if self.facts.references(function):
            return False
        from autofix.analysis.project import layout
        from autofix.analysis.project.callers import users

        root = layout.project_root(self.program.path)
        if not any(os.path.exists(os.path.join(root, marker)) for marker in layout.MARKERS):
            return False  # a folder, not a project: what else imports the file is not known
        if users(self.program.path, function.name.value) != ():
            return False
        # No other file of the project that could import this module spells the name: a use
        # whose import autofix cannot resolve (``from seed_rl.agents.vtrace import learner`` in
        # a checkout not named seed_rl) is a use still, but a file that never names the module
        # (nor imports with ``*`` or by a computed name) has its own ``train_step``.
        here = os.path.normpath(os.path.abspath(self.program.path))
        module = os.path.splitext(os.path.basename(self.program.path))[0]
        spelled = layout.mentions(root, function.name.value)
        return spelled is not None and all(
            os.path.normpath(os.path.abspath(path)) == here or not layout.may_import(path, module) for path, _key in spelled
        )

    def _held_strategy(self, expr: cst.BaseExpression, call: cst.Call) -> bool:
        """``obj.strategy`` of ``obj.strategy.run(fn, args=(...))``: an attribute named for a
        strategy of an object (a parameter, a module, ``self.policy.mirrored_strategy``),
        asked to run a function with ``args=``."""
        path = attribute_path(expr)
        if path is None or len(path) < 2 or not words(path[-1]) & {"strategy", "strat"}:
            return False
        return any(a.keyword is not None and a.keyword.value == "args" for a in call.args) and argument_value(call, "fn", 0) is not None

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
        """The one function of this module a call of ``func`` runs (see :mod:`.callees`)."""
        callees, complete = self.callables.of_call(func)
        functions = {c.function for c in callees}
        if complete and len(functions) == 1:
            (function,) = functions
            return function if isinstance(function, cst.FunctionDef) else None
        return None

    @cached_property
    def roots(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """Each function run by ``strategy.run`` on a strategy with several replicas (or called
        by the lambda it runs), with the calls that run it; and the ``train_step`` of a Keras model made in the scope of
        such a strategy (``fit`` runs it with ``strategy.run``: no call of this file does)."""
        found: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.runs:
            target = self.run_target(call)
            if isinstance(target, cst.Lambda) and isinstance(target.body, cst.Call):
                # ``strategy.run(lambda: func(self, *args))`` (a decorator's wrapper): each
                # replica runs the one function the lambda calls, and gets what it returns.
                target = target.body.func
            definition = self.definition(target) if target is not None else None
            if definition is not None and not self.single_replica(call):
                found.setdefault(definition, []).append(call)
        for train_step in self.fit_steps:
            found.setdefault(train_step, [])
        return found

    @cached_property
    def fit_steps(self) -> set[cst.FunctionDef]:
        """The ``train_step`` methods of the Keras model classes of this file (or their bases
        here) whose objects are made in the scope of a strategy with several replicas."""
        found: set[cst.FunctionDef] = set()
        for cls in self.facts.keras_classes:
            step = self._own_train_step(cls)
            if step is None:
                continue
            for ref in self.facts.references(cls):
                call = self.program.parent(ref)
                if not (isinstance(call, cst.Call) and call.func is ref) or not self.facts.under_scope(call):
                    continue
                if not self.facts.scope_classes_at(call) <= SINGLE_REPLICA:
                    found.add(step)
        return found

    def _own_train_step(self, cls: cst.ClassDef) -> cst.FunctionDef | None:
        """The ``train_step`` a class defines, or inherits from a class of this file."""
        seen: set[int] = set()
        while cls is not None and id(cls) not in seen:
            seen.add(id(cls))
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            for statement in body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == "train_step":
                    return statement
            bases = [self.facts.local_definition(b.value) for b in cls.bases]
            cls = next((b for b in bases if isinstance(b, cst.ClassDef)), None)  # type: ignore[assignment]
        return None

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
                for callee in self.callables.of_call(call.func)[0]:
                    if isinstance(callee.function, cst.FunctionDef):
                        pending.append(callee.function)
        return found

    def calls(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls made when ``function`` runs (in it and in the local functions it calls)."""
        return [call for f in self.reached(function) for call in self.facts.functions[f].calls]

    def aggregates_itself(self, function: cst.FunctionDef) -> bool:
        """Whether the step combines gradients across replicas itself (``all_reduce`` in the
        replica context, ``apply_gradients(..., experimental_aggregate_gradients=False)`` /
        ``skip_gradients_aggregation=True``): then the optimizer does not sum them. An
        ``all_reduce`` that only gives ``tf.clip_by_global_norm`` the norm to clip by
        (``use_norm=``) aggregates nothing: the optimizer still sums the gradients."""
        for call in self.calls(function):
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            if func.attr.value in ("all_reduce", "batch_reduce_to", "reduce_to") and not self._only_a_norm(call):
                return True
            if func.attr.value == "apply_gradients":
                for keyword, off in (("experimental_aggregate_gradients", "False"), ("skip_gradients_aggregation", "True")):
                    value = argument_value(call, keyword)
                    if isinstance(value, cst.Name) and value.value == off:
                        return True
        return False

    def combined_by_hand(self, function: cst.FunctionDef) -> bool:
        """Whether the gradients ``function`` takes leave the replica to be combined by a
        step that aggregates them itself: ``function`` applies none (no ``apply_gradients``,
        no ``minimize``) and another replica function of this file, which applies them,
        aggregates itself (gradient accumulation over several ``strategy.run`` calls, the
        replicas' sum applied with ``experimental_aggregate_gradients=False``). How that
        step weighs the replicas' shares (a learning rate divided by the replica count, an
        ``all_reduce`` MEAN) is its own: a per-replica mean is not judged here."""
        for call in self.calls(function):
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
            if method == "apply_gradients" or method == "minimize" and self.differentiated(call) is not None:
                return False  # it applies them itself
        return any(
            other is not function and self.trains(other) and self.aggregates_itself(other)
            for other in self.roots
        )

    def _only_a_norm(self, call: cst.Call) -> bool:
        """Whether ``call`` is inside the ``use_norm=`` of a ``tf.clip_by_global_norm``."""
        for ancestor in self.program.ancestors(call):
            if isinstance(ancestor, cst.Arg) and ancestor.keyword is not None and ancestor.keyword.value == "use_norm":
                owner = self.program.parent(ancestor)
                return isinstance(owner, cst.Call) and CLIP_BY_GLOBAL_NORM in tf_names(self.facts, owner.func)
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement)):
                return False
        return False

    def trains(self, function: cst.FunctionDef) -> bool:
        """Whether running ``function`` takes gradients or applies them."""
        return any(
            self.differentiated(call) is not None
            or isinstance(call.func, cst.Attribute) and call.func.attr.value == "apply_gradients"
            for call in self.calls(function)
        )

    def called_only_in_steps(self, function: cst.FunctionDef | cst.Lambda) -> cst.CSTNode | None:
        """None when ``function`` only ever runs inside replica functions (or is a root);
        otherwise the first place it runs, or goes, outside them.

        The function is followed as a value: a call of it must be in a replica function; a
        name or ``self`` attribute it is bound to, a factory returning it, a local function it is
        passed to, are followed on; ``strategy.run(function, ...)`` is fine; anything else
        (``compile(loss=function)``, a container) is a use not in view. A ``__call__`` is
        followed through the instances of its class."""
        if isinstance(function, cst.FunctionDef) and function in self.roots:
            return None
        program, facts, callables = self.program, self.facts, self.callables
        holder = program.parent(function)
        if isinstance(function, cst.Lambda) and isinstance(holder, cst.Arg):
            # ``optimizer.minimize(lambda: loss, ...)``, ``tf.cond(..., lambda: ...)``: run by
            # the call it is given to, where that call is.
            call = program.parent(holder)
            runs_it = isinstance(call, cst.Call) and (
                self.differentiated(call) is function or any(n.startswith("tensorflow.") for n in tf_names(facts, call.func))
            )
            if runs_it:
                return None if program.enclosing_function(call) in self.functions else call
        pending: list[cst.CSTNode] = list(self._references(function))
        if not pending:
            return function  # called by no code in view (Keras, another module)
        seen: set[int] = set()
        while pending:
            ref = pending.pop()
            if id(ref) in seen:
                continue
            seen.add(id(ref))
            parent = program.parent(ref)
            if isinstance(parent, cst.Call) and parent.func is ref:
                if program.enclosing_function(parent) not in self.functions:
                    return parent
            elif isinstance(parent, cst.Return) and parent.value is ref:
                factory = program.enclosing_function(parent)
                if factory is None:
                    return ref
                pending.extend(callables.call_sites(factory))
            elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is ref:
                targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
                for target in targets:
                    if isinstance(target, cst.Name):
                        pending.extend(facts.uses(target))
                    elif attribute_path(target) is not None and attribute_path(target)[0] == "self":  # type: ignore[index]
                        pending.extend(callables.attribute_reads(target))
                    else:
                        return ref
            elif isinstance(parent, cst.Arg) and not self._passed_on(parent, ref, pending):
                return ref
            elif not isinstance(parent, (cst.Call, cst.Return, cst.Assign, cst.AnnAssign, cst.Arg)):
                return ref
        return None

    def _references(self, function: cst.FunctionDef | cst.Lambda) -> list[cst.CSTNode]:
        """Where ``function`` is named: its name, ``self.<method>``, or the lambda itself; for a
        ``__call__``, the constructions of its class (each an instance to follow)."""
        if isinstance(function, cst.Lambda):
            return [function]
        info = self.facts.functions.get(function)
        if info is not None and info.is_method:
            cls = next((a for a in self.program.ancestors(function) if isinstance(a, cst.ClassDef)), None)
            if function.name.value == "__call__" and cls is not None:
                return [self.program.parent(ref) for ref in self.facts.references(cls)]  # type: ignore[misc]
            return list(self.callables.self_attributes(function).get(function.name.value, ([], []))[1])
        return list(self.facts.references(function))

    def _passed_on(self, arg: cst.Arg, ref: cst.CSTNode, pending: list[cst.CSTNode]) -> bool:
        """``strategy.run(ref, ...)``, or ``helper(ref)`` where the helper's parameter is
        followed on (its uses join ``pending``)."""
        call = self.program.parent(arg)
        if not isinstance(call, cst.Call):
            return False
        if call in self.runs and self.run_target(call) is ref:
            return True
        callees, complete = self.callables.of_call(call.func)
        if not callees or not complete:
            return False
        for callee in callees:
            params = callee.function.params
            param = next((p for p in (*params.params, *params.kwonly_params) if callee.argument(call, p) is arg), None)
            if param is None:
                return False
            pending.extend(self.facts.uses(param.name))
        return True

    # --- self.<name> in a class ----------------------------------------------------------------

    def attribute_assignments(self, attr: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
        """The values assigned to ``self.<name>`` (``attr``) in its class, with their targets."""
        return self.callables.attribute_assignments(attr)

    def attribute_reads(self, attr: cst.BaseExpression) -> list[cst.CSTNode]:
        """Every read of ``self.<name>`` (``attr``) in its class."""
        return self.callables.attribute_reads(attr)

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
                    for name in target_names(target.target):
                        for use in self.facts.uses(name):
                            pending.append((use, depth + 1))
                continue
            if isinstance(parent, (cst.Expr, cst.Return, cst.SimpleStatementLine, cst.IndentedBlock, cst.Module)):
                continue
            if isinstance(parent, cst.Call) and parent.func is node and not isinstance(node, cst.Attribute):
                continue  # ``value(...)``: calling it is not computing with it
            pending.append((parent, depth + 1))


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


def counts_replicas(facts: Facts, expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` is (or is made from) the replica count or the global batch size."""
    return named_for(facts, expr, lambda found: bool(found & REPLICA_WORDS) or {"global", "batch"} <= found)


def replica_share(facts: Facts, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether ``expr`` is computed by dividing by the replica count (``BATCH /
    strategy.num_replicas_in_sync``, ``int(B // n_gpus)``, what a local helper returns, or a name every
    assignment of which is): one replica's share of a batch, whatever its name says (``GLOBAL_BATCH_SIZE = 64 /
    replicas``). A loss divided by it is each replica's own mean."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call) and facts.names_of(expr.func) & _NUMBER_CASTS:
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        return bool(positional) and replica_share(facts, positional[0], depth + 1)
    if isinstance(expr, cst.Call):
        # ``GLOBAL = global_batch(BATCH, strategy)`` with a helper returning ``b / s.num_replicas_in_sync``.
        helper = facts.local_definition(expr.func)
        info = facts.functions.get(helper) if isinstance(helper, cst.FunctionDef) else None
        returns = [r.value for r in info.returns] if info is not None else []
        return bool(returns) and all(r is not None and replica_share(facts, r, depth + 1) for r in returns)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Divide, cst.FloorDivide)):
        # (``1 / replicas`` is the inverse of the count, not a share of a batch.)
        return not isinstance(expr.left, (cst.Integer, cst.Float)) and named_for(facts, expr.right, lambda found: bool(found & REPLICA_WORDS))
    if isinstance(expr, cst.Name):
        values = [facts.assigned_value(b) for b in facts.bindings(expr) or []]
        return bool(values) and all(v is not None and replica_share(facts, v, depth + 1) for v in values)
    return False


_NUMBER_CASTS = frozenset({"builtins.int", "builtins.float", "tensorflow.cast", "tensorflow.dtypes.cast"})


def inverse_count(facts: Facts, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether ``expr`` is ``1 / <replica count>`` (or a name bound to it)."""
    if depth > 4:
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return counts_replicas(facts, expr.right)
    if isinstance(expr, cst.Name):
        values = [facts.assigned_value(b) for b in facts.bindings(expr) or []]
        return bool(values) and all(v is not None and inverse_count(facts, v, depth + 1) for v in values)
    return False
