"""Gradient clipping in what ``autofix migrate`` moves to N replicas.

A right migration clips what the original clips: the average of the original's gradients on
the replicas' shards. Each replica only has its own share of it, and the optimizer adds the
shares up after the step, so a clip written for one device clips each share instead (measured
on TF 2.21 with 2 logical CPUs, docs/migrate.md: 1.141 x the definition's update for
``tf.clip_by_global_norm`` active at the first step, on Keras 3 and tf_keras):

- ``tf.clip_by_global_norm(grads, C)`` of a step's gradients (a name bound to what the tape
  returns) is given the norm of the all-reduced gradient, ``use_norm=tf.linalg.global_norm(
  tf.distribute.get_replica_context().all_reduce(SUM, grads))``: every replica scales its share
  by the factor the global gradient's norm gives, and the optimizer's sum is the clipped
  average (measured: the definition's update, on both Kerases; all-reducing, clipping and
  applying instead sums twice, 2.000 x, and Keras 3's ``apply_gradients`` takes no
  ``skip_gradients_aggregation``);
- ``tf.clip_by_norm`` / ``tf.clip_by_value`` of a step's gradients clip each tensor, or each
  entry, of each share (``clip_by_norm``: 1.016 x): not rewritten, refused with the reason;
- a clip written as a statement of its own (``tf.clip_by_norm(g, 15)``, its result dropped)
  clips nothing, on one device or on N: left as it is;
- an optimizer given ``clipnorm=``, ``global_clipnorm=`` or ``clipvalue=``: Keras 3 clips in
  ``apply`` before it all-reduces the gradients (keras/src/backend/tensorflow/optimizer.py), so
  each share (1.141 x, 1.016 x, 1.261 x, in ``fit`` and in a custom step alike); tf_keras sums
  first, then clips (the definition's update). Refused where the file may run on Keras 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.callees import tf_names
from autofix.analysis.facts.script import Facts
from autofix.analysis.training.multiworker import MultiWorker
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import CLIP_BY_GLOBAL_NORM, Steps
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.tf.symbols import Kind

# Clips that act on each tensor or entry: no one norm to give them.
PER_TENSOR = {"tensorflow.clip_by_norm": "tf.clip_by_norm", "tensorflow.clip_by_value": "tf.clip_by_value"}
# What an optimizer clips with, and what clipping each replica's share does to the update
# (measured on Keras 3, docs/migrate.md).
OPTIMIZER_CLIPS = ("clipnorm", "global_clipnorm", "clipvalue")


@dataclass(frozen=True)
class GlobalClip:
    """A ``tf.clip_by_global_norm(grads, C)`` of a step's gradients, ``grads`` a name."""

    call: cst.Call
    gradients: cst.Name


class Clipping(Derived):
    """The clips of the steps a migration runs per replica (built once per program)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.steps = Steps.of(program)

    def scan(self, functions: list[cst.FunctionDef]) -> tuple[list[GlobalClip], list[tuple[cst.CSTNode, str]]]:
        """The global-norm clips of the gradients in ``functions`` (steps and what they call)
        that can be rewritten, and why the others cannot: (node, reason)."""
        clips: list[GlobalClip] = []
        refused: list[tuple[cst.CSTNode, str]] = []
        seen: set[int] = set()
        for step in functions:
            for function in self.steps.reached(step):
                for call in nodes_in(function.body, cst.Call):
                    if id(call) in seen:
                        continue
                    seen.add(id(call))
                    names = tf_names(self.facts, call.func)
                    clipped = argument_value(call, "t_list" if CLIP_BY_GLOBAL_NORM in names else "t", 0)
                    if clipped is None or not (CLIP_BY_GLOBAL_NORM in names or names & PER_TENSOR.keys()):
                        continue
                    if not self._of_gradients(clipped, function):
                        continue
                    if isinstance(self.program.parent(call), cst.Expr):
                        # ``tf.clip_by_norm(g, 15)`` as a statement: its result is dropped, nothing
                        # is clipped (on one device or on N).
                        continue
                    line = self.program.line(call)
                    if CLIP_BY_GLOBAL_NORM not in names:
                        (spelled,) = [PER_TENSOR[n] for n in names & PER_TENSOR.keys()][:1]
                        refused.append((call, (
                            f"the step clips its gradients with {spelled} (line {line}): on N replicas each replica "
                            "would clip its own share of the gradient before the optimizer adds the shares up, not "
                            "their sum (measured with tf.clip_by_norm: 1.016 x the update of clipping the averaged "
                            "gradient); clip by the all-reduced gradient (tf.distribute.get_replica_context()"
                            ".all_reduce(SUM, grads)) yourself, or use tf.clip_by_global_norm, then migrate"
                        )))
                    elif argument_value(call, "use_norm", 2) is not None:
                        refused.append((call, (
                            f"the step clips its gradients by a norm of its own (use_norm=, line {line}): on N replicas "
                            "it would be each replica's, not the all-reduced gradient's"
                        )))
                    elif not isinstance(clipped, cst.Name):
                        refused.append((call, (
                            f"the step clips gradients not bound to a name (line {line}): on N replicas the clip must "
                            "be by the norm of the all-reduced gradient, computed from the same list; bind the "
                            "gradients to a name, then migrate"
                        )))
                    else:
                        clips.append(GlobalClip(call, clipped))
        return clips, refused

    def _of_gradients(self, expr: cst.BaseExpression, function: cst.FunctionDef, gradient: cst.Call | None = None) -> bool:
        """Whether ``expr`` reads gradients: a name bound in ``function`` to what a tape
        returns (or to gradients clipped, or a comprehension's target over them); with
        ``gradient``, what that differentiating call returns."""
        return any(self._gradient_name(name, function, 0, gradient) for name in nodes_in(expr, cst.Name))

    def clips_of(self, gradient: cst.Call) -> list[cst.Call]:
        """The clips (``tf.clip_by_global_norm``, ``tf.clip_by_norm``, ``tf.clip_by_value``) of
        what the differentiating call ``gradient`` returns, in the function that makes it."""
        function = self.program.enclosing_function(gradient)
        if function is None:
            return []
        found = []
        for call in nodes_in(function.body, cst.Call):
            names = tf_names(self.facts, call.func)
            clipped = argument_value(call, "t_list" if CLIP_BY_GLOBAL_NORM in names else "t", 0)
            if clipped is not None and (CLIP_BY_GLOBAL_NORM in names or names & PER_TENSOR.keys()):
                if self._of_gradients(clipped, function, gradient):
                    found.append(call)
        return found

    def _gradient_name(self, name: cst.Name, function: cst.FunctionDef, depth: int, gradient: cst.Call | None = None) -> bool:
        if depth > 4:
            return False
        for binding in self.facts.reaching_bindings(name) or []:
            if self.program.enclosing_function(binding) is not function:
                continue
            value = self.facts.assigned_value(binding)
            if value is None:
                value = self._unpacked_from(binding)
            if value is None:
                value = self._iterated_by(binding)
            if value is None:
                continue
            for call in [value, *nodes_in(value, cst.Call)] if isinstance(value, cst.BaseExpression) else []:
                if isinstance(call, cst.Call) and self.steps.differentiated(call) is not None and self._takes_gradient(call):
                    if gradient is None or call is gradient:
                        return True
            if any(self._gradient_name(inner, function, depth + 1, gradient) for inner in nodes_in(value, cst.Name) if inner is not name):
                return True
        return False

    def _takes_gradient(self, call: cst.Call) -> bool:
        func = call.func
        return not (isinstance(func, cst.Attribute) and func.attr.value == "minimize")

    def _unpacked_from(self, binding: cst.CSTNode) -> cst.BaseExpression | None:
        """``grads, _ = tf.clip_by_global_norm(...)``: what a tuple target is assigned."""
        element = self.program.parent(binding)
        holder = self.program.parent(element) if isinstance(element, cst.Element) else None
        target = self.program.parent(holder) if isinstance(holder, (cst.Tuple, cst.List)) else None
        assign = self.program.parent(target) if isinstance(target, cst.AssignTarget) else None
        return assign.value if isinstance(assign, cst.Assign) else None

    def _iterated_by(self, binding: cst.CSTNode) -> cst.BaseExpression | None:
        """``g`` of ``[... for g in grads]`` (or ``for g, v in zip(grads, vs)``): what it iterates."""
        for ancestor in self.program.ancestors(binding):
            if isinstance(ancestor, (cst.CompFor, cst.For)):
                return ancestor.iter
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement)):
                return None
        return None

    @cached_property
    def optimizer_clips(self) -> list[tuple[cst.Call, str]]:
        """Optimizers made in the file with a clip of their own, when the file may run on Keras
        3 (where they clip each replica's share): (the construction, the keyword)."""
        keras = MultiWorker.of(self.program).keras
        if keras.keras2 or self.facts.needs_keras2:
            return []
        found = []
        for call, _owner in self.facts.calls:
            if self.facts.call_kind(call) is not Kind.OPTIMIZER:
                continue
            for keyword in OPTIMIZER_CLIPS:
                value = argument_value(call, keyword)
                if value is not None and not (isinstance(value, cst.Name) and value.value == "None"):
                    found.append((call, keyword))
                    break
        return found


# Keras 3's update with the clip active at the first step, as a multiple of the update of
# clipping the averaged gradient (2 replicas, docs/migrate.md).
MEASURED = {"clipnorm": "1.016", "global_clipnorm": "1.141", "clipvalue": "1.261"}


def optimizer_clip_reason(program: Program, call: cst.Call, keyword: str) -> str:
    return (
        f"the optimizer clips the gradients ({keyword}=, line {program.line(call)}): under a strategy Keras 3 clips "
        "each replica's share of the gradient before it adds the shares up, not their sum (measured with the clip "
        f"active: {MEASURED[keyword]} x the update of clipping the averaged gradient); tf_keras (TF_USE_LEGACY_KERAS=1) "
        "clips the sum, or a custom step can clip with tf.clip_by_global_norm, which the migration makes global"
    )
