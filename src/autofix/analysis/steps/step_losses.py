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
for the loss Keras computes itself there (``self.compute_loss``).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.steps.losses import loss_terms_of
from autofix.analysis.program import Program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import argument_value, nodes_in


# A Keras model's own loss, in its ``train_step``: Keras reduces it and, on Keras 3, scales it
# for the replicas itself (measured: the same first update on 2 replicas as on one device).
KERAS_LOSS_METHODS = frozenset({"compute_loss", "compiled_loss"})


def unknown_term(program: Program, function: cst.FunctionDef, fit: bool = False) -> tuple[cst.CSTNode, str] | None:
    """The first term of a loss ``function`` differentiates whose reduction over the replicas
    is not known (at that term, with why it stops a migration), or None. ``fit``: the
    function is a model's ``train_step``, where ``self.compute_loss(...)`` is Keras's."""
    steps = Steps.of(program)
    for gradient, target in steps.gradient_targets(function):
        if _of_watched(program, gradient):
            continue
        for term in loss_terms_of(steps, target):
            if term.kind == "unknown" and not (fit and _keras_loss(term.node)):
                return term.node, (
                    f"the loss differentiated on line {program.line(gradient)} has a term, {_short(program, term.node)} "
                    f"(line {program.line(term.node)}), whose reduction over the batch is not known: on N replicas "
                    "each computes it on its share of the batch and the gradients are summed, and how to scale it "
                    "for that cannot be shown"
                )
    return None


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
