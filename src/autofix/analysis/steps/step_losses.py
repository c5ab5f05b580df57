"""Whether the loss of a single-device step can be scaled for N replicas, for ``autofix migrate``.

Once migrated, each replica computes the step's loss on its share of the global batch and the
optimizer sums the replicas' gradients, so every term of the loss must become its share of the
global loss (TFD004 does that, term by term). TFD004 only rewrites terms whose reduction it
knows; a term it does not know (a loss function from another module, a model's output, a
``tf.compat.v1.losses`` loss, a loss function an object is handed at run time) is reported by
it only when another term of the same loss is a finding. A migration must not rely on that:
a step whose loss has a term of unknown reduction is not migrated, since the gradients it
would make on N replicas cannot be shown to be the original's. That holds for a model's own
``train_step`` that ``fit`` runs too (a loss function handed to a custom ``compile``), except
for the loss Keras computes itself there (``self.compute_loss``). A sum divided by the batch
(``tf.reduce_sum(l) / BATCH``) is not one of those: migrated, it is divided by the global batch,
and :func:`normalizers` names what divides a loss over the batch, which the migrated code must
show to be the global batch (:mod:`.migrated`).
"""

from __future__ import annotations

import libcst as cst

from dataclasses import dataclass

from autofix.analysis.facts.callees import tf_names
from autofix.analysis.steps.losses import loss_terms_of
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import argument_value, nodes_in


# A Keras model's own loss, in its ``train_step``: Keras reduces it and, on Keras 3, scales it
# for the replicas itself (measured: the same first update on 2 replicas as on one device).
KERAS_LOSS_METHODS = frozenset({"compute_loss", "compiled_loss"})
# What averages per-example losses over a batch it is given the size of.
AVERAGES = frozenset({"tensorflow.nn.compute_average_loss"})


def unknown_term(program: Program, function: cst.FunctionDef, fit: bool = False) -> tuple[cst.CSTNode, str] | None:
    """The first term of a loss ``function`` differentiates whose reduction over the replicas
    is not known (at that term, with why it stops a migration), or None. ``fit``: the
    function is a model's ``train_step``, where ``self.compute_loss(...)`` is Keras's."""
    steps = Steps.of(program)
    # Migrating, a sum divided by the batch (``tf.reduce_sum(l) / BATCH``) is divided by the
    # global batch once the batch is global; the migrated code is checked for it.
    migrating = program.migration is not None
    for gradient, target in steps.gradient_targets(function):
        if _of_watched(program, gradient):
            continue
        for term in loss_terms_of(steps, target):
            if term.kind == "unknown" and not (fit and _keras_loss(term.node)) and not (migrating and term.detail == "normalized"):
                return term.node, (
                    f"the loss differentiated on line {program.line(gradient)} has a term, {_short(program, term.node)} "
                    f"(line {program.line(term.node)}), whose reduction over the batch is not known: on N replicas "
                    "each computes it on its share of the batch and the gradients are summed, and how to scale it "
                    "for that cannot be shown"
                )
    return None


@dataclass(frozen=True)
class Normalizer:
    """What divides a step's loss over the batch: the ``global_batch_size=`` of a
    ``tf.nn.compute_average_loss`` term, or what a sum is divided by (``BATCH`` of
    ``tf.reduce_sum(l) / BATCH``). Per replica the loss is its share of the global mean only
    when this is the global batch."""

    node: cst.BaseExpression
    # The differentiating call whose loss it divides.
    gradient: cst.Call


def normalizers(program: Program) -> list[Normalizer]:
    """Every normalizer of the loss of a step ``strategy.run`` runs (or a ``train_step``)."""
    steps = Steps.of(program)
    found: dict[int, Normalizer] = {}
    for root in steps.roots:
        for gradient, target in steps.gradient_targets(root):
            for term in loss_terms_of(steps, target):
                nodes: list[cst.BaseExpression] = []
                if term.kind == "unknown" and term.detail == "normalized":
                    nodes.extend(term.divisors)
                elif term.kind == "global" and isinstance(term.node, cst.Call) and tf_names(steps.facts, term.node.func) & AVERAGES:
                    given = argument_value(term.node, "global_batch_size", 2)
                    if given is not None and not (isinstance(given, cst.Name) and given.value == "None"):
                        nodes.append(given)
                for node in nodes:
                    found.setdefault(id(node), Normalizer(node, gradient))
    return list(found.values())


def _keras_loss(node: cst.CSTNode) -> bool:
    func = node.func if isinstance(node, cst.Call) else None
    return isinstance(func, cst.Attribute) and func.attr.value in KERAS_LOSS_METHODS and isinstance(func.value, cst.Name) and func.value.value == "self"


def _of_watched(program: Program, gradient: cst.Call) -> bool:
    """``tape.gradient(pred, [x])`` after ``tape.watch(x)``: a gradient with respect to
    tensors (a gradient penalty's), each example's own on every replica, not a loss's gradient
    with respect to the variables."""
    func = gradient.func
    sources = argument_value(gradient, "sources", 1)
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)) or sources is None:
        return False
    names = [e.value for e in sources.elements] if isinstance(sources, (cst.List, cst.Tuple)) else [sources]
    if not names or not all(isinstance(n, cst.Name) for n in names):
        return False
    function = program.enclosing_function(gradient)
    watched = {
        call.args[0].value.value
        for call in nodes_in(function.body if function is not None else program.module, cst.Call)
        if isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "watch"
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == func.value.value
        and call.args
        and isinstance(call.args[0].value, cst.Name)
    }
    return all(n.value in watched for n in names)  # type: ignore[union-attr]


def _short(program: Program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 50 else code[:47] + "..."
