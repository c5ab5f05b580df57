"""TFD004 unscaled-custom-loss: a custom step's loss not reduced correctly across replicas.

In a step passed to ``strategy.run`` each replica sees 1/N of the global batch and the
gradients of all replicas are summed. The loss must therefore be the per-example loss summed
over the replica's examples and divided by the *global* batch size, which is what
``tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)`` computes, with a loss
object made with ``reduction="none"``.

Only the loss counts: the value a step (or a local helper it calls, such as a GAN's
``generator_loss``) differentiates with ``tape.gradient``, ``tf.gradients`` or
``optimizer.minimize``, followed backwards through names, arithmetic and helper returns. A
``reduce_mean`` that only feeds a metric, a log, a summary or a returned diagnostic is not a
finding. The fix rewrites:

- ``tf.reduce_mean(per_example_loss)`` (a mean over one replica's batch: gradients N times
  too large) into ``tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)``;
- a loss object with the default reduction called in the step (Keras 2 rejects it under a
  strategy; Keras 3 divides by the replica count on its own) into a ``reduction="none"`` loss
  averaged with ``tf.nn.compute_average_loss``;
- a manual ``/ strategy.num_replicas_in_sync`` on top of a default-reduction loss (Keras >= 3.8
  divides twice) the same way, which is right on Keras 2 and 3.

The global batch size is that of the dataset the step is fed from, when it can be named in
the step; otherwise ``compute_average_loss`` derives it (per-replica batch x replicas).

Not fixed (reported, or left alone):
- correct code: the TensorFlow guide's pattern (``reduction="none"`` + ``compute_average_loss``),
  a ``reduction="sum"`` loss divided by the global batch, a per-replica ``reduce_mean`` divided
  by ``num_replicas_in_sync`` (or multiplied by its inverse) before the gradient, losses used
  only through ``compile``/``fit``, any step under a one-replica strategy
  (``OneDeviceStrategy``, the default strategy), and a step that averages its gradients across
  replicas itself (``all_reduce``, ``experimental_aggregate_gradients=False``);
- ``tf.reduce_mean`` of something that is not a per-example loss (its shape is unknown);
- a default-reduction loss object, or a helper computing the loss, that is also used outside
  custom steps (``compile``, evaluation): changing it would change that use too;
- a division by the replica count on top of a default-reduction loss made away from the loss;
- a step whose returned loss the caller averages with ``ReduceOp.MEAN`` (it must become SUM
  together with the fix).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts import Facts
from autofix.analysis.program import Program
from autofix.analysis.steps import Steps, Term, tf_names
from autofix.analysis.syntax import argument_value, calls_in, names_in
from autofix.analysis.training import batch_size_of
from autofix.codegen import BlockEdits, NotFound, module_alias, visible_at, with_reduction_none
from autofix.rule import Example, Rule
from autofix.tf.symbols import Kind

_MEANS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean"})
# Functions that return one loss per example.
_PER_EXAMPLE = frozenset(
    {
        "tensorflow.nn.sparse_softmax_cross_entropy_with_logits",
        "tensorflow.nn.softmax_cross_entropy_with_logits",
    }
)
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
        program = self.program
        self.steps = Steps.of(program)
        if not self.steps.roots:
            return
        tf = module_alias(program, "tensorflow")
        self.average = f"{tf}.nn.compute_average_loss" if tf else None
        # Loss objects already given reduction="none" by an earlier fix in this file.
        self.reconstructed: set[int] = set()
        terms: dict[cst.CSTNode, list[tuple[cst.FunctionDef, Term]]] = {}
        for root in self.steps.roots:
            if self.steps.aggregates_itself(root):
                continue  # gradients averaged by hand: a per-replica mean is what that wants
            for term in self.steps.loss_terms(root):
                terms.setdefault(term.node, []).append((root, term))
        for node, reached in terms.items():
            if isinstance(node, cst.Call):
                self._term(node, reached)

    def _term(self, call: cst.Call, reached: list[tuple[cst.FunctionDef, Term]]) -> None:
        """One place where the loss is made, reached from one or more gradients."""
        facts = self.facts
        root, term = reached[0]
        averaged = argument_value(call, "input_tensor", 0) if tf_names(facts, call.func) & _MEANS else None
        mean = averaged is not None
        if averaged is not None:
            kind = _per_example(facts, self._resolved(averaged), self.steps)
        else:
            obj = _loss_object(facts, self.steps, call.func)
            if obj is None or _reduction(obj) != "default":
                return
            kind = "default"
        scaled = [t for _, t in reached if t.scaling]
        if scaled and len(scaled) != len(reached):
            self.report(call, DEFAULT_MESSAGE if kind == "default" else MEAN_MESSAGE, _mixed(self.program, scaled[0]))
            return
        if scaled and kind != "default":
            return  # a per-replica mean divided by the replica count: right as it is
        message = TWICE_MESSAGE if scaled else (DEFAULT_MESSAGE if kind == "default" else MEAN_MESSAGE)
        why = self._unsafe(call, root, [t for _, t in reached])
        if why is not None:
            self.report(call, message, why)
            return
        function = self.program.enclosing_function(call)
        batch = _global_batch(self.program, self.steps, root, function) if function is not None else None
        suffix = f", global_batch_size={self.program.module.code_for_node(batch)}" if batch is not None else ""
        target = self._rewritten(call, term, message)
        if target is None:
            return
        if mean:
            self._mean(call, target, kind, message, suffix)
        else:
            self._loss_call(call, target, message, suffix)

    def _rewritten(self, call: cst.Call, term: Term, message: str) -> cst.CSTNode | None:
        """What the fix replaces: the loss, or ``loss / n`` when the division by the replica
        count is applied to it right there (it must go too). None, after reporting, when that
        division is made elsewhere."""
        if not term.scaling:
            return call
        scaling = term.scaling[-1]
        if _operand_of(scaling, call):
            return scaling
        self.report(
            call,
            message,
            f"the division by the replica count is on line {self.program.line(scaling)}, away from "
            "the loss; remove it when switching to reduction='none' and tf.nn.compute_average_loss",
        )
        return None

    def _unsafe(self, call: cst.Call, root: cst.FunctionDef, terms: list[Term]) -> str | None:
        """Why rewriting the loss at ``call`` would change more than the gradient, if it would."""
        program = self.program
        function = program.enclosing_function(call)
        if function is not None:
            outside = self.steps.called_only_in_steps(function)
            if outside is not None:
                return (
                    f"{function.name.value}() is also used outside the training step (line "
                    f"{program.line(outside)}); changing its loss would change that use too"
                )
        averaged = _averaged_by_caller(program, self.steps, root, terms)
        if averaged is not None:
            return (
                f"the step returns this loss and its caller averages it over the replicas with "
                f"ReduceOp.MEAN (line {program.line(averaged)}); once each replica's loss is its "
                "share of the global average that must be SUM: change both together"
            )
        return None

    def _resolved(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """``per_example`` -> what it was assigned, when exactly one assignment reaches it."""
        if isinstance(expr, cst.Name):
            bindings = self.facts.bindings(expr) or []
            values = [self.facts.assigned_value(b) for b in bindings]
            if len(values) == 1 and values[0] is not None:
                return values[0]
        return expr

    def _mean(self, call: cst.Call, target: cst.CSTNode, kind: str | None, message: str, suffix: str) -> None:
        inner = argument_value(call, "input_tensor", 0)
        if argument_value(call, "axis", 1) is not None or inner is None:
            self.report(
                call,
                message,
                "it reduces over given axes, so what it averages is not known to be one loss per "
                "example; if it averages over the batch, divide it by strategy.num_replicas_in_sync",
            )
            return

        def plan(edits: BlockEdits) -> None:
            if kind is None:
                raise NotFound(
                    "what it averages is not known to be one loss per example; average it over all "
                    "but the batch axis and pass that to tf.nn.compute_average_loss, or divide this "
                    "mean by strategy.num_replicas_in_sync"
                )
            average = self._average()
            if kind == "default":
                made = self._resolved(inner)
                if not isinstance(made, cst.Call):
                    raise NotFound("the loss object's call is not in this step")
                self._make_none(made, edits)
            code = self.program.module.code_for_node(inner)
            edits.replace(target, lambda _node: cst.parse_expression(f"{average}({code}{suffix})"))

        self.fix(call, message, plan)

    def _loss_call(self, call: cst.Call, target: cst.CSTNode, message: str, suffix: str) -> None:
        program = self.program

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
        construction = _loss_object(facts, self.steps, call.func)
        if construction is None:
            raise NotFound("the loss object is not made in this file")
        if id(construction) in self.reconstructed:
            return
        for use in _object_uses(facts, self.steps, call.func):
            if program.enclosing_function(use) not in self.steps.functions:
                raise NotFound(
                    f"{program.module.code_for_node(call.func)} is also used outside the training step (line "
                    f"{program.line(use)}); changing its reduction would change that use too"
                )
        self.reconstructed.add(id(construction))
        edits.replace(construction, with_reduction_none)


def _mixed(program: Program, scaled: Term) -> str:
    return (
        f"it reaches the gradients both divided by the replica count (line "
        f"{program.line(scaled.scaling[-1])}) and not, so no one rewrite is right for both"
    )


def _operand_of(scaling: cst.CSTNode, call: cst.Call) -> bool:
    """Whether ``call`` is the scaled operand of ``scaling`` (``call / n``, ``call * (1/n)``)."""
    if isinstance(scaling, cst.BinaryOperation):
        return scaling.left is call or (isinstance(scaling.operator, cst.Multiply) and scaling.right is call)
    return False


def _loss_object(facts: Facts, steps: Steps, func: cst.BaseExpression) -> cst.Call | None:
    """The Keras loss construction ``func`` is: made right there, bound to a name, or assigned
    to ``self.<name>`` once in the step's class."""
    if isinstance(func, cst.Call):
        return func if facts.call_kind(func) is Kind.LOSS else None
    values: list[cst.BaseExpression | None]
    if isinstance(func, cst.Name):
        values = [facts.assigned_value(b) for b in facts.bindings(func) or []]
    else:
        values = [v for v, _ in steps.attribute_assignments(func)]
    if len(values) == 1 and isinstance(values[0], cst.Call) and facts.call_kind(values[0]) is Kind.LOSS:
        return values[0]
    return None


def _object_uses(facts: Facts, steps: Steps, func: cst.BaseExpression) -> list[cst.CSTNode]:
    """Every read of the loss object ``func`` names."""
    if isinstance(func, cst.Name):
        return [use for binding in facts.bindings(func) or [] if isinstance(binding, cst.Name) for use in facts.uses(binding)]
    return steps.attribute_reads(func)


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


def _per_example(facts: Facts, expr: cst.BaseExpression, steps: Steps) -> str | None:
    """"none" for one loss per example, "default" for a default-reduction loss object's
    scalar, None when unknown."""
    if not isinstance(expr, cst.Call):
        return None
    obj = _loss_object(facts, steps, expr.func)
    if obj is not None:
        reduction = _reduction(obj)
        return reduction if reduction in ("none", "default") else None
    names = tf_names(facts, expr.func)
    if names & _PER_EXAMPLE or any(n.startswith("keras.losses.") and n.rpartition(".")[2][:1].islower() for n in names):
        return "none"
    return None


def _global_batch(program: Program, steps: Steps, step: cst.FunctionDef, where: cst.FunctionDef) -> cst.BaseExpression | None:
    """The batch size of the distributed dataset ``step`` is fed from, if it can be named
    inside ``where``."""
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


def _averaged_by_caller(program: Program, steps: Steps, root: cst.FunctionDef, terms: list[Term]) -> cst.Call | None:
    """The ``strategy.reduce(MEAN, ...)`` that averages what ``root`` returns, when the loss
    at these terms is part of what it returns."""
    bound = {b.value for t in terms for b in t.bindings if isinstance(b, cst.Name)}
    helpers = {id(t.calls[0]) for t in terms if t.calls}
    returned = False
    for ret in Facts.of(program).functions[root].returns:
        if ret.value is None:
            continue
        if {n.value for n in names_in(ret.value)} & bound or any(id(c) in helpers for c in calls_in(ret.value)):
            returned = True
    if not returned:
        return None
    for run in steps.roots[root]:
        for node in steps.forward(run):
            parent = program.parent(node)
            holder = program.parent(parent) if isinstance(parent, cst.Arg) else None
            if (
                isinstance(holder, cst.Call)
                and isinstance(holder.func, cst.Attribute)
                and holder.func.attr.value == "reduce"
                and holder.args
                and holder.args[0] is not parent
            ):
                op = argument_value(holder, "reduce_op", 0)
                if op is not None and "MEAN" in program.module.code_for_node(op).upper():
                    return holder
    return None
