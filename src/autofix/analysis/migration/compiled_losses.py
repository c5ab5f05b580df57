"""Losses handed to ``compile`` that reduce over the batch themselves, for ``autofix migrate``.

Under a strategy ``fit`` runs the loss on every replica's share and adds the replicas' gradients
up; Keras divides what it reduces itself by the replica count, so that the sum is the average
of the replicas' gradients. What it does not reduce itself it does not divide (measured on TF
2.21, 2 logical CPUs, docs/migrate.md, as a multiple of the update that averages the original's
gradients over the replicas' shards):

- a loss function returning a scalar (``tf.reduce_mean`` over the whole batch): Keras 3 passes
  a scalar through unscaled, 2.000 x; tf_keras divides it, 1.000. Where the function is handed
  only to ``compile`` as a loss, its mean is of an expression made entry by entry from
  ``y_true`` and ``y_pred`` (so every example has as many entries), and ``fit`` is given no
  sample or class weights, it returns one loss per example instead: the mean of each row of
  that expression, ``tf.reduce_mean(tf.reshape(E, [tf.shape(y_pred)[0], -1]), axis=1)``, whose
  mean is the scalar it returned (Keras then averages and divides it: 1.000). Otherwise the
  migration is refused where the file may run on Keras 3, with the reason;
- a loss object with ``reduction="sum"``: Keras divides neither, 2.000 x on Keras 3 and on
  tf_keras (the sum over the global batch is N x the average of the replicas' sums). Where it
  is the one loss compiled and ``compile`` weighs no loss, it is weighed by ``1 /
  num_replicas_in_sync`` (``loss_weights=``: measured 1.000 on both; the loss ``fit`` shows is
  then each replica's sum, averaged, as the original's at its batch); otherwise refused;
- a loss summed by the function itself (``tf.reduce_sum`` over everything): 2.000 x on Keras 3,
  1.000 on tf_keras: refused where the file may run on Keras 3.

A default-reduction loss (``"sum_over_batch_size"``, a name such as ``"mse"``) and
``add_loss`` terms are divided by Keras itself (measured 1.000).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.callees import tf_names
from autofix.analysis.facts.script import Facts
from autofix.analysis.steps.lossobjects import loss_objects, reduction
from autofix.analysis.training.multiworker import MultiWorker
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value
from autofix.analysis.training.model import TrainingModel
from autofix.tf.losses import ELEMENTWISE, LAST_AXIS_LOSSES, MEANS, SUMS



@dataclass(frozen=True)
class Weighed:
    """A ``compile`` whose one loss sums over the batch: given ``loss_weights=1 / N``."""

    compile: cst.Call


@dataclass(frozen=True)
class PerExample:
    """A ``return tf.reduce_mean(E)`` of a compiled loss function, to return one loss per
    example: ``E`` averaged over each row of ``y_pred``'s batch."""

    mean: cst.Call
    # What is averaged, and the name of the function's ``y_pred`` parameter.
    averaged: cst.BaseExpression
    predictions: str


class CompiledLosses(Derived):
    """What the compiled losses of a file that trains with ``fit`` need under a strategy."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)

    @cached_property
    def keras3(self) -> bool:
        """Whether the file may run on Keras 3 (it does not need tf_keras)."""
        return not (MultiWorker.of(self.program).keras.keras2 or self.facts.needs_keras2)

    def judged(self, fits: list) -> tuple[list[PerExample | Weighed], list[tuple[cst.CSTNode, str]]]:
        """For the ``fit`` sites ``fits``: the loss functions to make per example and the
        compiles to weigh, and why the others cannot be migrated (node, reason)."""
        rewrites: dict[int, PerExample | Weighed] = {}
        refused: list[tuple[cst.CSTNode, str]] = []
        for site in fits:
            for member in site.members:
                func = member.func
                if not (isinstance(func, cst.Attribute) and func.attr.value == "compile"):
                    continue
                loss = argument_value(member, "loss", 1)
                for value in _losses(loss) if loss is not None else ():
                    found = self._judge(value, site.call)
                    if isinstance(found, PerExample):
                        rewrites.setdefault(id(found.mean), found)
                    elif found == "sum" and value is loss and argument_value(member, "loss_weights") is None:
                        rewrites.setdefault(id(member), Weighed(member))
                    elif found == "sum":
                        refused.append((value, (
                            f"the loss compiled on line {self.program.line(value)} sums over the batch (reduction=\"sum\"): "
                            "fit does not divide such a loss by the replicas, so on N replicas it trains at N x the average "
                            "of the original's gradients over the replicas' shares (measured: 2.000 x on 2, Keras 3 and "
                            "tf_keras), and it is not the one loss compile is given unweighed, which loss_weights=1 / "
                            "num_replicas_in_sync would make right; weigh it so yourself, then migrate"
                        )))
                    elif found is not None:
                        refused.append(found)
        return list(rewrites.values()), refused

    def _judge(self, value: cst.BaseExpression, fit: cst.Call) -> PerExample | tuple[cst.CSTNode, str] | None:
        constructions = loss_objects(self.facts, value)
        if constructions and all(reduction(c) == "sum" for c in constructions):
            return "sum"
        for construction in constructions:
            if reduction(construction) == "sum":
                return construction, (
                    f"the loss compiled on line {self.program.line(value)} may sum over the batch (reduction=\"sum\", line "
                    f"{self.program.line(construction)}) or not: fit does not divide a sum by the replicas, so on N replicas "
                    "it would train at N x the average of the original's gradients over the replicas' shares (measured: "
                    "2.000 x on 2, Keras 3 and tf_keras)"
                )
        if constructions or not self.keras3:
            return None
        function = self._function(value)
        if function is None:
            return None
        return self._function_loss(function, value, fit)

    def _function(self, value: cst.BaseExpression) -> cst.FunctionDef | cst.Lambda | None:
        if isinstance(value, cst.Lambda):
            return value
        definition = self.facts.local_definition(value) if isinstance(value, cst.Name) else None
        return definition if isinstance(definition, cst.FunctionDef) else None

    def _function_loss(self, function: cst.FunctionDef | cst.Lambda, value: cst.BaseExpression, fit: cst.Call):
        name = function.name.value if isinstance(function, cst.FunctionDef) else "the lambda"
        if isinstance(function, cst.Lambda):
            returned = [function.body]
        else:
            info = self.facts.functions.get(function)
            returned = [r.value for r in info.returns if r.value is not None] if info is not None else []
        kinds = [self._over_everything(v) for v in returned]
        reduced = [(v, k) for v, k in zip(returned, kinds) if k is not None]
        if not reduced:
            return None
        node, kind = reduced[0]
        line = self.program.line(node)
        if kind == "sum":
            return node, (
                f"the loss function {name} (line {line}) returns a sum over the whole batch: Keras 3 does not divide "
                "a scalar loss by the replicas, so on N replicas fit trains at N x the average of the original's "
                "gradients over the replicas' shares (measured: 2.000 x on 2); return one loss per example, then migrate"
            )
        why = self._not_per_example(function, returned, value, fit)
        if why is None:
            mean = node
            params = function.params.params
            return PerExample(mean, argument_value(mean, "input_tensor", 0), params[1].name.value)  # type: ignore[arg-type]
        return node, (
            f"the loss function {name} (line {line}) returns a mean over the whole batch: Keras 3 does not divide a "
            "scalar loss by the replicas (it divides one loss per example), so on N replicas fit trains at N x the "
            f"average of the original's gradients over the replicas' shares (measured: 2.000 x on 2); {why}: return "
            "one loss per example (a mean over all but the batch axis), then migrate"
        )

    def _over_everything(self, value: cst.BaseExpression) -> str | None:
        """"mean" / "sum" when ``value`` is a mean or sum over every axis, else None."""
        if not isinstance(value, cst.Call):
            return None
        names = tf_names(self.facts, value.func)
        if not names & (MEANS | SUMS):
            return None
        axis = argument_value(value, "axis", 1)
        if axis is not None and not (isinstance(axis, cst.Name) and axis.value == "None"):
            return None
        return "mean" if names & MEANS else "sum"

    def _not_per_example(self, function, returned: list[cst.BaseExpression], value: cst.BaseExpression, fit: cst.Call) -> str | None:
        """Why the function's mean cannot be made one loss per example, or None."""
        params = function.params
        if len(params.params) != 2 or params.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or params.kwonly_params or params.star_kwarg:
            return "it does not take just (y_true, y_pred)"
        if len(returned) != 1:
            return "it returns on more than one path"
        mean = returned[0]
        if any(a.keyword is not None and a.keyword.value not in ("input_tensor",) for a in mean.args) or len(mean.args) != 1:  # type: ignore[union-attr]
            return "its mean is given more than what it averages"
        names = {p.name.value for p in params.params}
        averaged = argument_value(mean, "input_tensor", 0)  # type: ignore[arg-type]
        reads = self._entrywise(averaged, names, function, 0) if averaged is not None else None
        if reads is None or params.params[1].name.value not in reads:
            return "what it averages is not shown to be made entry by entry from y_true and y_pred"
        if isinstance(function, cst.FunctionDef):
            for ref in self.facts.references(function):
                if not self._compiled_loss(ref):
                    return f"it is also used on line {self.program.line(ref)}, where one loss per example would change what it gives"
        for keyword in ("sample_weight", "class_weight"):
            if argument_value(fit, keyword) is not None:
                return f"fit is given {keyword}= (line {self.program.line(fit)}), which weighs one loss per example otherwise than a mean"
        return None

    def _entrywise(self, expr: cst.BaseExpression, params: set[str], function, depth: int) -> set[str] | None:
        """The parameters ``expr`` reads when it is computed entry by entry from the
        function's parameters and numbers (through names bound once in the function), else
        None."""
        if depth > 12:
            return None
        if isinstance(expr, (cst.Integer, cst.Float)):
            return set()
        if isinstance(expr, cst.Name):
            if expr.value in params:
                bindings = self.facts.reaching_bindings(expr) or []
                return {expr.value} if all(isinstance(self.program.parent(b), cst.Param) or isinstance(b, cst.Param) for b in bindings) else None
            bindings = self.facts.reaching_bindings(expr) or []
            if len(bindings) != 1 or self.program.enclosing_function(bindings[0]) is not function:
                return None
            assigned = self.facts.assigned_value(bindings[0])
            return self._entrywise(assigned, params, function, depth + 1) if assigned is not None else None
        if isinstance(expr, cst.Attribute) and expr.attr.value == "dtype":
            return set()
        if isinstance(expr, cst.UnaryOperation):
            return self._entrywise(expr.expression, params, function, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)):
            left = self._entrywise(expr.left, params, function, depth + 1)
            right = self._entrywise(expr.right, params, function, depth + 1)
            return None if left is None or right is None else left | right
        if isinstance(expr, cst.Call) and tf_names(self.facts, expr.func) & ELEMENTWISE:
            found: set[str] = set()
            for arg in expr.args:
                if arg.star:
                    return None
                if arg.keyword is not None and arg.keyword.value in ("dtype", "name"):
                    continue
                inner = self._entrywise(arg.value, params, function, depth + 1)
                if inner is None:
                    return None
                found |= inner
            return found
        if isinstance(expr, cst.SimpleString):
            return set()  # a dtype spelled as text
        if isinstance(expr, cst.Call) and tf_names(self.facts, expr.func) & (MEANS | SUMS):
            return self._reduced_within_examples(expr, params, function, depth)
        return None

    def _reduced_within_examples(self, call: cst.Call, params: set[str], function, depth: int) -> set[str] | None:
        """``tf.reduce_sum(E, axis=(1, 2))``: a sum or mean over axes of each example only
        (numbers above 0: the batch axis, the first, is kept, and every example has as many
        entries left), of an expression made entry by entry, or of a Keras loss function
        (``keras.losses.binary_crossentropy(y_true, y_pred)``, which reduces the last axis only:
        the reduction's axes show it keeps more than one). The parameters it reads, else None."""
        keywords = [a.keyword.value for a in call.args if a.keyword is not None]
        if any(a.star for a in call.args) or len(call.args) != 2 or any(k not in ("input_tensor", "axis") for k in keywords):
            return None
        axis = argument_value(call, "axis", 1)
        items = [e.value for e in axis.elements] if isinstance(axis, (cst.Tuple, cst.List)) else [axis]
        if not items or not all(isinstance(i, cst.Integer) and isinstance(i.evaluated_value, int) and i.evaluated_value > 0 for i in items):
            return None
        reduced = argument_value(call, "input_tensor", 0)
        if reduced is None:
            return None
        if isinstance(reduced, cst.Call) and tf_names(self.facts, reduced.func) & LAST_AXIS_LOSSES:
            if len(reduced.args) != 2 or any(a.star or a.keyword is not None for a in reduced.args):
                return None
            found: set[str] = set()
            for arg in reduced.args:
                inner = self._entrywise(arg.value, params, function, depth + 1)
                if inner is None:
                    return None
                found |= inner
            return found
        return self._entrywise(reduced, params, function, depth + 1)

    def _compiled_loss(self, ref: cst.CSTNode) -> bool:
        """Whether ``ref`` is given to ``compile`` as (one of) its loss."""
        node = ref
        for ancestor in self.program.ancestors(ref):
            if isinstance(ancestor, (cst.Element, cst.DictElement, cst.List, cst.Tuple, cst.Dict)):
                node = ancestor
                continue
            if isinstance(ancestor, cst.Arg):
                call = self.program.parent(ancestor)
                return (
                    isinstance(call, cst.Call)
                    and isinstance(call.func, cst.Attribute)
                    and call.func.attr.value == "compile"
                    and argument_value(call, "loss", 1) is ancestor.value
                )
            return False
        return False


def _losses(loss: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The losses ``compile(loss=...)`` is given: one, or those of a list or dict."""
    if isinstance(loss, (cst.List, cst.Tuple)):
        return [e.value for e in loss.elements if isinstance(e, cst.Element)]
    if isinstance(loss, cst.Dict):
        return [e.value for e in loss.elements if isinstance(e, cst.DictElement)]
    return [loss]
