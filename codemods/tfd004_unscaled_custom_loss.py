"""TFD004 unscaled-custom-loss: a custom training step whose loss is not reduced correctly
across replicas.

In a step passed to ``strategy.run`` each replica sees 1/N of the global batch and the
gradients of all replicas are summed. The loss must therefore be the per-example loss summed
over the replica's examples and divided by the *global* batch size, which is what
``tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)`` computes, with a loss
object made with ``reduction="none"``. The fix rewrites:

- ``tf.reduce_mean(per_example_loss)`` (a mean over one replica's batch: gradients N times
  too large) into ``tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)``;
- a loss object with the default reduction called in the step (Keras 2 rejects it under a
  strategy; Keras 3 divides by the replica count itself) into a ``reduction="none"`` loss
  averaged with ``tf.nn.compute_average_loss``;
- a manual ``/ strategy.num_replicas_in_sync`` on top of a default-reduction loss (Keras >= 3.8
  divides twice) the same way, which is right on Keras 2 and 3.

The global batch size is that of the dataset the step is fed from, when it can be named in
the step; otherwise ``compute_average_loss`` derives it (per-replica batch x replicas).

Not fixed (reported, or left alone):
- the TensorFlow guide's pattern (``reduction="none"`` + ``compute_average_loss``), a
  ``reduction="sum"`` loss scaled by hand, and losses used only through ``compile``/``fit``;
- ``tf.reduce_mean`` of something that is not a per-example loss (its shape is unknown);
- a default-reduction loss object that is also used outside custom steps (``compile``):
  changing its reduction would change that use too.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts import Facts
from autofix.analysis.program import Program
from autofix.analysis.training import batch_size_of
from autofix.codegen import BlockEdits, NotFound, module_alias, visible_at, with_reduction_none
from autofix.rule import Example, Rule
from autofix.tf.symbols import Kind

_MEANS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean"})
_AVERAGE = "tensorflow.nn.compute_average_loss"
MEAN_MESSAGE = (
    "loss averaged with reduce_mean over one replica's batch: gradients are summed across "
    "replicas, so they come out N times too large; average over the global batch instead"
)
DEFAULT_MESSAGE = (
    "loss object with the default reduction in a custom step: Keras 2 rejects it under a "
    "strategy and Keras 3 divides by the replica count on its own; use reduction='none' and "
    "tf.nn.compute_average_loss"
)
TWICE_MESSAGE = (
    "loss divided by num_replicas_in_sync on top of a default-reduction loss: Keras >= 3.8 "
    "already divides by the replica count, so this divides twice"
)


class UnscaledCustomLoss(Rule):
    CODE = "TFD004"
    NAME = "unscaled-custom-loss"
    DESCRIPTION = "Custom training step whose loss is not averaged over the global batch"
    EXAMPLES = (
        Example(
            before=(
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "\n"
                "\n"
                "def train_step(inputs):\n"
                "    x, y = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x, training=True)))\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
                "\n"
                "\n"
                "strategy.run(train_step, args=(batch,))\n"
            ),
            after=(
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "\n"
                "\n"
                "def train_step(inputs):\n"
                "    x, y = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = tf.nn.compute_average_loss(keras.losses.mean_squared_error(y, model(x, training=True)))\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
                "\n"
                "\n"
                "strategy.run(train_step, args=(batch,))\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                'loss_object = tf.keras.losses.MeanSquaredError(reduction="none")\n'
                "\n"
                "\n"
                "def train_step(inputs):\n"
                "    x, y = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        per_example = loss_object(y, model(x, training=True))\n"
                "        loss = tf.nn.compute_average_loss(per_example, global_batch_size=64)\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
                "\n"
                "\n"
                "strategy.run(train_step, args=(batch,))\n"
            ),
        ),
    )

    def check(self) -> None:
        program, facts = self.program, self.facts
        self.steps = _steps(facts)
        if not self.steps:
            return
        tf = module_alias(program, "tensorflow")
        self.average = f"{tf}.nn.compute_average_loss" if tf else None
        # Loss objects already given reduction="none" by an earlier fix in this file.
        self.reconstructed: set[int] = set()
        for function, root in self.steps.items():
            batch = _global_batch(program, root, function)
            suffix = f", global_batch_size={program.module.code_for_node(batch)}" if batch is not None else ""
            for call in facts.functions[function].calls:
                names = facts.names_of(call.func)
                if names & _MEANS and call.args:
                    self._mean(call, suffix)
                elif facts.call_kind(call) is None and _loss_object(facts, call.func) is not None:
                    self._loss_call(call, suffix)

    def _mean(self, call: cst.Call, suffix: str) -> None:
        inner = call.args[0].value
        if len(call.args) > 1 or call.args[0].keyword is not None:
            self.report(call, MEAN_MESSAGE, "it reduces over given axes, so its shape is not one loss per example")
            return
        kind = _per_example(self.facts, inner)
        message = DEFAULT_MESSAGE if kind == "default" else MEAN_MESSAGE

        def plan(edits: BlockEdits) -> None:
            if kind is None:
                raise NotFound("what it averages is not known to be one loss per example")
            average = self._average()
            if kind == "default":
                self._make_none(inner, edits)
            code = self.program.module.code_for_node(inner)
            edits.replace(call, lambda _node: cst.parse_expression(f"{average}({code}{suffix})"))

        self.fix(call, message, plan)

    def _loss_call(self, call: cst.Call, suffix: str) -> None:
        program, facts = self.program, self.facts
        obj = _loss_object(facts, call.func)
        if obj is None or _reduction(obj) != "default":
            return
        parent = program.parent(call)
        if isinstance(parent, cst.Arg) and program.parent(parent) is not None:
            owner = program.parent(parent)
            if isinstance(owner, cst.Call) and facts.names_of(owner.func) & (_MEANS | {_AVERAGE}):
                return  # handled as the mean it is inside of
        target: cst.CSTNode = call
        message = DEFAULT_MESSAGE
        if (
            isinstance(parent, cst.BinaryOperation)
            and parent.left is call
            and isinstance(parent.operator, cst.Divide)
            and "num_replicas_in_sync" in program.module.code_for_node(parent.right)
        ):
            target, message = parent, TWICE_MESSAGE

        def plan(edits: BlockEdits) -> None:
            average = self._average()
            self._make_none(call, edits)
            code = program.module.code_for_node(call)
            edits.replace(target, lambda _node: cst.parse_expression(f"{average}({code}{suffix})"))

        self.fix(call, message, plan)

    def _average(self) -> str:
        if self.average is None:
            raise NotFound("the script does not import tensorflow as a module")
        return self.average

    def _make_none(self, call: cst.Call, edits: BlockEdits) -> None:
        """Give the loss object ``call`` uses ``reduction="none"``, if nothing else uses it."""
        program, facts = self.program, self.facts
        construction = _loss_object(facts, call.func)
        if construction is None:
            raise NotFound("the loss object is not made in this file")
        if id(construction) in self.reconstructed:
            return
        if isinstance(call.func, cst.Name):
            for binding in facts.bindings(call.func) or []:
                for use in facts.uses(binding) if isinstance(binding, cst.Name) else []:
                    function = program.enclosing_function(use)
                    if function not in self.steps:
                        raise NotFound(
                            f"{call.func.value} is also used outside the training step (line "
                            f"{program.line(use)}); changing its reduction would change that use too"
                        )
        self.reconstructed.add(id(construction))
        edits.replace(construction, with_reduction_none)


def _steps(facts: Facts) -> dict[cst.FunctionDef, cst.FunctionDef]:
    """Functions passed to strategy.run, and the functions they call, each with the step it
    is (or is called from)."""
    found: dict[cst.FunctionDef, cst.FunctionDef] = {}
    pending = [(f, f) for f in facts.replica_functions]
    while pending:
        function, root = pending.pop()
        if function in found:
            continue
        found[function] = root
        for call in facts.functions[function].calls:
            callee = facts.local_definition(call.func)
            if isinstance(callee, cst.FunctionDef) and callee in facts.functions and not facts.functions[callee].is_method:
                pending.append((callee, root))
    return found


def _loss_object(facts: Facts, func: cst.BaseExpression) -> cst.Call | None:
    """The Keras loss construction ``func`` (a name) is bound to."""
    if not isinstance(func, cst.Name):
        return None
    bindings = facts.bindings(func) or []
    values = [facts.assigned_value(b) for b in bindings]
    if len(values) == 1 and isinstance(values[0], cst.Call) and facts.call_kind(values[0]) is Kind.LOSS:
        return values[0]
    return None


def _reduction(construction: cst.Call) -> str:
    for arg in construction.args:
        if arg.keyword is not None and arg.keyword.value == "reduction":
            value = arg.value
            text = value.evaluated_value if isinstance(value, cst.SimpleString) else (
                value.attr.value if isinstance(value, cst.Attribute) else ""
            )
            text = str(text).lower()
            if text in ("none",):
                return "none"
            if text in ("auto", "sum_over_batch_size"):
                return "default"
            return "other"
    return "default"


def _per_example(facts: Facts, expr: cst.BaseExpression) -> str | None:
    """"none" for one loss per example, "default" for a default-reduction loss object's
    scalar, None when unknown."""
    if not isinstance(expr, cst.Call):
        return None
    obj = _loss_object(facts, expr.func)
    if obj is not None:
        reduction = _reduction(obj)
        return reduction if reduction in ("none", "default") else None
    names = facts.names_of(expr.func)
    if any(n.startswith("keras.losses.") and n.rpartition(".")[2][:1].islower() for n in names):
        return "none"
    return None


def _global_batch(program: Program, step: cst.FunctionDef, where: cst.FunctionDef) -> cst.BaseExpression | None:
    """The batch size of the distributed dataset ``step`` is fed from, if it can be named
    inside ``where``."""
    facts = Facts.of(program)
    if not any(c.args and facts.local_definition(c.args[0].value) is step for c in facts.strategy_run_calls()):
        return None
    batches = [batch_size_of(program, source) for source in _distributed_sources(program)]
    codes = {program.module.code_for_node(b) for b in batches if b is not None}
    if len(batches) != 1 or batches[0] is None or len(codes) != 1 or not where.body.body:
        return None  # none, or several distributed datasets: let compute_average_loss work it out
    batch = batches[0]
    # What ``.batch()`` is given is the global batch, whether or not it is scaled.
    return batch if visible_at(program, batch, where.body.body[0]) else None


def _distributed_sources(program: Program) -> list[cst.BaseExpression]:
    """The datasets passed to strategy.experimental_distribute_dataset in this file."""
    facts = Facts.of(program)
    found = []
    for call, _owner in facts.calls:
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "experimental_distribute_dataset"
            and facts.is_strategy_expr(func.value)
            and call.args
        ):
            found.append(call.args[0].value)
    return found
