"""TFD005 unscaled-learning-rate (unsafe): a constant learning rate not scaled with the global batch.

When the global batch grows with the number of replicas (TFD002), each step averages over N
times more examples; the common practice, linear scaling, multiplies the learning rate by
the same factor. It is a practice, not a rule (it can hurt with some optimizers and models),
so this fix only runs with ``--unsafe-fixes``; ``check`` shows it as a suggestion.

``Adam(1e-3)`` / ``Adam(learning_rate=LR)`` in a training script under a strategy becomes
``Adam(learning_rate=1e-3 * strategy.num_replicas_in_sync)``.

It is opt-in: it runs only when selected by its own code (``--select TFD005``).

Not fixed (reported, or left alone):
- rates that are schedules, callables or anything else a call makes (the optimizer a
  ``LossScaleOptimizer`` wraps), and rates that already depend on the batch size or
  the replica count, through names and arithmetic (``BASE_LR * GLOBAL_BATCH / 256``,
  ``0.01 * n`` with ``n = strategy.num_replicas_in_sync``, a name that says ``global_batch``);
- every rate of a script that sets it with a ``LearningRateScheduler`` callback, or a callback
  class of its own named for a rate schedule (the schedule decides the rate, and is often scaled
  already);
- rates under a one-replica strategy (``OneDeviceStrategy``, the default strategy);
- string optimizers (``compile(optimizer="adam")``) and optimizers using their default rate:
  reported with the line to write, since the default differs between optimizers and versions;
- optimizers made where the strategy does not exist yet (TFD001 moves them into the scope
  first; they are scaled once they are there);
- optimizers that are not used to train (neither passed to ``compile`` nor applying gradients).
"""

from __future__ import annotations

import re

import libcst as cst

from autofix.analysis.facts.contexts import Contexts
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import REPLICA_WORDS, named_for, words
from autofix.analysis.facts.strategies import may_be_none
from autofix.codegen import on_both_paths, scaled
from autofix.rule import Example, Rule
from autofix.tf.symbols import SINGLE_REPLICA, Kind

_SCHEDULER_CALLBACKS = frozenset({"keras.callbacks.LearningRateScheduler"})
# A callback's code that reads or sets the optimizer's rate.
_OPTIMIZER_RATE = re.compile(r"\boptimizer\.(lr|learning_rate)\b")
# Calls that make a plain number.
_NUMBER_CALLS = frozenset({"builtins.float", "builtins.int"})
_STRING_OPTIMIZERS = {
    "adam": "Adam",
    "sgd": "SGD",
    "rmsprop": "RMSprop",
    "adagrad": "Adagrad",
    "adadelta": "Adadelta",
    "adamax": "Adamax",
    "nadam": "Nadam",
    "adamw": "AdamW",
    "ftrl": "Ftrl",
    "lion": "Lion",
}
MESSAGE = (
    "learning rate is not scaled with the global batch: linear scaling multiplies it by "
    "strategy.num_replicas_in_sync"
)


class UnscaledLearningRate(Rule):
    CODE = "TFD005"
    NAME = "unscaled-learning-rate"
    DESCRIPTION = "Constant learning rate not scaled with the global batch (unsafe, opt-in)"
    SAFE = False
    OPT_IN = True
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=1e-3 * strategy.num_replicas_in_sync), loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "schedule = tf.keras.optimizers.schedules.ExponentialDecay(1e-3, 1000, 0.9)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer=tf.keras.optimizers.Adam(schedule), loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
    )

    def check(self) -> None:
        program, facts = self.program, self.facts
        if any(self._sets_the_rate(call) for call, _ in facts.calls):
            return  # a callback sets the rate as training goes: the optimizer's own rate is not used
        contexts = Contexts.of(program)
        for call, _owner in facts.calls:
            if facts.call_kind(call) is Kind.OPTIMIZER and self._trains(program, call):
                self._optimizer(program, contexts, call)
            elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "compile":
                self._string_optimizer(program, contexts, call)

    def _sets_the_rate(self, call: cst.Call) -> bool:
        """A ``LearningRateScheduler``, or a callback class of this file that is named for a
        rate schedule (``LearningRateBatchScheduler``, ``WarmUpLR``) or sets the optimizer's
        rate (``set_value(self.model.optimizer.lr, ...)``)."""
        facts = self.facts
        if facts.names_of(call.func) & _SCHEDULER_CALLBACKS:
            return True
        local = facts.local_definition(call.func)
        if not isinstance(local, cst.ClassDef):
            return False
        bases = {n for base in local.bases for n in facts.names_of(base.value)}
        if "keras.callbacks.Callback" not in bases:
            return False
        found = words(local.name.value)
        if found & {"lr", "scheduler", "schedule"} or {"learning", "rate"} <= found:
            return True
        return bool(_OPTIMIZER_RATE.search(self.program.module.code_for_node(local)))

    def _optimizer(self, program: Program, contexts: Contexts, call: cst.Call) -> None:
        facts = Facts.of(program)
        if not any(n.rpartition(".")[2][:1].isupper() for n in facts.names_of(call.func)):
            return  # keras.optimizers.get(...) and the like: no rate of its own here
        arg = next((a for a in call.args if a.keyword and a.keyword.value == "learning_rate"), None)
        if arg is None and call.args and call.args[0].keyword is None and not call.args[0].star:
            arg = call.args[0]
        context = _context(contexts, call)
        if context is None or _one_replica(context):
            return
        if arg is None:
            self.report(call, MESSAGE, "it uses the optimizer's default rate; pass learning_rate=<rate> * strategy.num_replicas_in_sync")
            return
        value = arg.value
        if self._schedule_or_scaled(program, value):
            return
        if context.conflict:
            self.report(value, MESSAGE, context.conflict)
            return
        where = contexts.at(call)
        if where is None or where[0].strategy is not context.strategy or (
            where[0].index is not None and where[1] <= where[0].index
        ):
            self.report(value, MESSAGE, "the optimizer is made before the strategy exists; TFD001 moves it into strategy.scope() first, after which it is scaled")
            return
        name = on_both_paths(program, context.strategy.name, context.block, placeholders=False)
        if name is None:
            none = may_be_none(program, context.strategy.name, context.block, False)
            self.report(value, MESSAGE, f"{context.strategy.name} may be None (line {program.line(none)}), and the file does not import tensorflow by name to scale by a replica count that exists without it")
            return
        if not self.report(value, MESSAGE):
            return

        positional = [a for a in call.args if a.keyword is None and not a.star]
        if arg.keyword is None and len(positional) > 1:
            # ``Adam(1e-3, 0.9, ...)``: later positional arguments forbid a keyword here.
            self.edits.replace(arg, lambda node, name=name: node.with_changes(value=scaled(node.value, name)))
            return

        def rewrite(node: cst.Arg, name: str = name) -> cst.Arg:
            return node.with_changes(
                keyword=cst.Name("learning_rate"),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
                value=scaled(node.value, name),
            )

        self.edits.replace(arg, rewrite)

    def _string_optimizer(self, program: Program, contexts: Contexts, call: cst.Call) -> None:
        arg = next((a for a in call.args if a.keyword and a.keyword.value == "optimizer"), None)
        if arg is None and call.args and call.args[0].keyword is None:
            arg = call.args[0]
        if arg is None or not isinstance(arg.value, cst.SimpleString):
            return
        context = _context(contexts, call)
        if Facts.of(program).call_kind(call) != "compile" or context is None or _one_replica(context):
            return
        name = _STRING_OPTIMIZERS.get(arg.value.evaluated_value.lower())
        if name is None:
            return
        self.report(
            arg.value,
            MESSAGE,
            f"a string optimizer uses its default rate; to scale it, pass "
            f"keras.optimizers.{name}(learning_rate=<rate> * strategy.num_replicas_in_sync)",
        )

    def _trains(self, program: Program, call: cst.Call) -> bool:
        """Whether the optimizer made by ``call`` trains a model: passed to compile (directly or
        through a name, or wrapped in a ``LossScaleOptimizer``), or applying gradients."""
        facts = Facts.of(program)
        parent = program.parent(call)
        if isinstance(parent, cst.Arg):
            owner = program.parent(parent)
            if isinstance(owner, cst.Call) and facts.call_kind(owner) is Kind.OPTIMIZER:
                return self._trains(program, owner)
            return isinstance(owner, cst.Call) and facts.call_kind(owner) == "compile"
        target = facts.assigned_name(call)
        if target is None:
            return False
        for use in facts.uses(target):
            holder = program.parent(use)
            if isinstance(holder, cst.Arg):
                owner = program.parent(holder)
                if isinstance(owner, cst.Call) and facts.call_kind(owner) == "compile":
                    return True
            if isinstance(holder, cst.Attribute) and holder.attr.value in ("apply_gradients", "minimize"):
                return True
        return False

    def _schedule_or_scaled(self, program: Program, value: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``value`` is not a plain rate to scale: a schedule, a callable, an optimizer
        (``LossScaleOptimizer(opt)``), anything a call makes, or a rate that already depends
        on the batch size or the replica count."""
        facts = Facts.of(program)
        if depth > 6:
            return True
        if isinstance(value, (cst.Lambda,)):
            return True
        if named_for(facts, value, _scaled_words):
            return True
        if isinstance(value, cst.Call):
            # Schedules (keras.optimizers.schedules.*, keras.experimental.CosineDecay, local
            # classes), optimizers and helpers: a number is not what they make.
            return not facts.names_of(value.func) & _NUMBER_CALLS
        if isinstance(value, cst.Name):
            bindings = facts.bindings(value)
            if bindings is None:
                return False
            for binding in bindings:
                bound = facts.assigned_value(binding)
                if bound is None:
                    return isinstance(binding, (cst.FunctionDef, cst.ClassDef))
                if self._schedule_or_scaled(program, bound, depth + 1):
                    return True
            return False
        return False


def _scaled_words(found: set[str]) -> bool:
    """A name for the batch size or the replica count (``GLOBAL_BATCH``, ``num_replicas_in_sync``)."""
    return bool(found & REPLICA_WORDS) or "batch" in found or "bs" in found


def _one_replica(context) -> bool:
    classes = context.strategy.classes
    return bool(classes) and classes <= SINGLE_REPLICA


def _context(contexts: Contexts, node: cst.CSTNode):
    """The strategy context the node's training happens in: where it is, or, for an object
    made before the strategy in the block that creates it, that block's context."""
    found = contexts.at(node)
    if found is None:
        function = contexts.program.enclosing_function(node)
        context = contexts.function_context(function) if function is not None else None
        return context
    return found[0]
