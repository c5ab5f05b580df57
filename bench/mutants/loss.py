"""The loss and every term of it.

Wrong by the definition: the update is no longer the average of the original's gradients over
the replicas' shards (a loss averaged per replica and summed over N, a divisor of the
per-replica batch, a regularization term dropped or added N times), or the loss is another
function (label smoothing, logits read as probabilities, a term's weight, a reduction).
Changes are made only to what a training step differentiates, and to loss objects it uses.
"""

from __future__ import annotations

import libcst as cst

from mutants import uses
from mutants.core import WRONG, Edit, callee, dotted, expr, keyword, number, operator, string, with_keyword
from mutants.uses import differentiated, inside_any
from mutants.vocabulary import is_replicas, scaled_operand, walk

FAMILY = "loss"
SEES = "the first update"
SCALE = "the first update (N x a gradient)"
# Their first positional parameter is from_logits.
CROSSENTROPY = {"CategoricalCrossentropy", "BinaryCrossentropy", "SparseCategoricalCrossentropy"}


def loss_nodes(p):
    """(step, node) for every node of what a step differentiates."""
    for step in p.facts.steps:
        roots = differentiated(p, step)
        seen = set()
        for root in roots:
            for node in walk(root):
                if id(node) not in seen:
                    seen.add(id(node))
                    yield step, node


def _regularized(p) -> bool:
    return any(word in p.text for word in ("regularizer", "add_loss(", "activity_regularizer"))


@operator("mean-per-replica", WRONG, FAMILY, "the loss averaged per replica (compute_average_loss -> reduce_mean; the / num_replicas_in_sync removed)", SCALE)
def mean_per_replica(p):
    for step, node in loss_nodes(p):
        if isinstance(node, cst.Call) and callee(node) == "compute_average_loss" and node.args:
            if "tf" not in p.facts.module_names:
                continue
            new = expr(f"tf.reduce_mean({p.code(node.args[0].value)})")
            yield Edit(p.replace_one(node, new), f"{p.code(node)[:70]} -> tf.reduce_mean(...)", p.line(node))
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide) and is_replicas(node.right):
            yield Edit(p.replace_one(node, node.left.deep_clone()), f"{p.code(node)[:70]}: / {p.code(node.right)} removed", p.line(node))


@operator("divisor-per-replica", WRONG, FAMILY, "the loss divided by the per-replica batch (global_batch_size=B, / B)", SCALE)
def divisor_per_replica(p):
    for step, node in loss_nodes(p):
        target = None
        if isinstance(node, cst.Call) and callee(node) == "compute_average_loss":
            arg = keyword(node, "global_batch_size")
            target = arg.value if arg is not None else None
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide) and not is_replicas(node.right):
            target = node.right
        if target is None:
            continue
        value = p.facts.resolve(target) if isinstance(target, cst.Name) else target
        operand = scaled_operand(value)
        if operand is None:
            continue
        yield Edit(p.replace_one(target, operand.deep_clone()), f"divided by {p.code(operand)} (per replica), not {p.code(target)}", p.line(target))


def _terms(node: cst.BinaryOperation):
    """The operands of a sum, and the sum without each (left, right)."""
    return [(node.right, node.left), (node.left, node.right)]


def _is_regularization(p, node: cst.CSTNode) -> bool:
    text = p.code(node)
    return ".losses" in text or "scale_regularization_loss" in text


@operator("regularization-dropped", WRONG, FAMILY, "the model.losses (regularization) term dropped from the loss", SEES)
def regularization_dropped(p):
    if not _regularized(p):
        return
    for step, node in loss_nodes(p):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            for dropped, kept in _terms(node):
                if _is_regularization(p, dropped) and not _is_regularization(p, kept):
                    yield Edit(p.replace_one(node, kept.deep_clone()), f"+ {p.code(dropped)[:60]} dropped", p.line(node))
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.AugAssign) and isinstance(n.operator, cst.AddAssign) and _is_regularization(p, n.value):
                statement = p.statement_of(n)
                if inside_any(p, n.value, differentiated(p, step)) and len(statement.body) == 1:
                    yield Edit(p.remove_statement(statement), f"{p.code(n)[:70]} removed", p.line(n))


@operator("loss-term-dropped", WRONG, FAMILY, "a named term of the loss dropped (kl_loss, a penalty)", SEES)
def loss_term_dropped(p):
    for step, node in loss_nodes(p):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            for dropped, kept in _terms(node):
                if _is_regularization(p, dropped):
                    continue
                named = isinstance(dropped, cst.Name) and "loss" in dropped.value or _weighted(p, dropped) is not None
                if named:
                    yield Edit(p.replace_one(node, kept.deep_clone()), f"+ {p.code(dropped)[:60]} dropped", p.line(node))


@operator("regularization-unscaled", WRONG, FAMILY, "scale_regularization_loss removed: the regularization added once per replica", SCALE)
def regularization_unscaled(p):
    if not _regularized(p):
        return
    for step, node in loss_nodes(p):
        if isinstance(node, cst.Call) and callee(node) == "scale_regularization_loss" and node.args:
            yield Edit(p.replace_one(node, node.args[0].value.deep_clone()), f"{p.code(node)[:70]} -> its argument", p.line(node))


@operator("label-smoothing-added", WRONG, FAMILY, "label_smoothing=0.2 on a crossentropy the step uses (or another value)", SEES)
def label_smoothing_added(p):
    for call in uses.used_losses(p):
        if callee(call) not in ("CategoricalCrossentropy", "BinaryCrossentropy"):
            continue
        current = keyword(call, "label_smoothing")
        value = number(current.value) if current is not None else 0.0
        if value is None:
            continue
        new = 0.2 if value != 0.2 else 0.1
        yield Edit(p.replace_one(call, with_keyword(call, "label_smoothing", expr(repr(new)))), f"{callee(call)} label_smoothing {value:g} -> {new:g}", p.line(call))


# Keras (3 and tf_keras, TensorFlow backend) computes a crossentropy from the logits of a
# prediction a softmax or sigmoid made, whatever from_logits says (``_get_logits`` in
# keras/src/backend/tensorflow/nn.py: the ``_keras_logits`` its activations attach, or the op's
# input; from_logits=True there only warns): flipping the flag where such an activation may make
# the prediction changes nothing (measured: part D's fashion classifier, softmax output, proven
# equivalent with the flag flipped, 1 replica within 0).
_PROBABILITIES = frozenset({"softmax", "sigmoid", "Softmax", "log_softmax"})


def _makes_probabilities(p) -> bool:
    """Whether a softmax or sigmoid appears anywhere in the program (read conservatively: any
    model's output may be one)."""
    for node in p.nodes((cst.SimpleString, cst.Name)):
        text = node.value.strip("'\"") if isinstance(node, cst.SimpleString) else node.value
        if text in _PROBABILITIES:
            return True
    return False


@operator("from-logits-flipped", WRONG, FAMILY, "from_logits flipped on a crossentropy the step uses", SEES)
def from_logits_flipped(p):
    if _makes_probabilities(p):
        return
    for call in uses.used_losses(p):
        if callee(call) not in CROSSENTROPY:
            continue
        current = keyword(call, "from_logits")
        positional_flag = call.args[0] if call.args and call.args[0].keyword is None else None
        flag = current or positional_flag
        if flag is None:
            old = False
        elif isinstance(flag.value, cst.Name) and flag.value.value in ("True", "False"):
            old = flag.value.value == "True"
        else:
            continue
        new = expr("False" if old else "True")
        if flag is not None and flag.keyword is None:
            changed = call.with_changes(args=[a.with_changes(value=new) if a is flag else a for a in call.args])
        else:
            changed = with_keyword(call, "from_logits", new)
        yield Edit(p.replace_one(call, changed), f"{callee(call)} from_logits {old} -> {not old}", p.line(call))


def _weighted(p, node) -> cst.BaseExpression | None:
    """The weight of a weighted term ``w * term`` (a number, or a name bound to one)."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return None
    for side in (node.left, node.right):
        value = p.facts.resolve(side) if isinstance(side, cst.Name) else side
        n = number(value)
        if n is not None and n not in (0.0, 1.0) and not is_replicas(side):
            return side
    return None


@operator("loss-weight-changed", WRONG, FAMILY, "a loss term's weight doubled (a weighted term of the loss, compile's loss_weights)", SEES)
def loss_weight_changed(p):
    for step, node in loss_nodes(p):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
            for term in (node.left, node.right):
                weight = _weighted(p, term)
                if weight is not None:
                    yield Edit(p.replace_one(weight, expr(f"({p.code(weight)}) * 2")), f"the weight {p.code(weight)} of {p.code(term)[:50]} doubled", p.line(weight))
    for call, _ in p.facts.compiled_models():
        weights = keyword(call, "loss_weights")
        if weights is None:
            continue
        for node in walk(weights.value):
            if number(node) is not None and number(node) != 0 and isinstance(node, (cst.Integer, cst.Float)):
                yield Edit(p.replace_one(node, expr(f"{p.code(node)} * 2")), f"loss_weights {p.code(node)} doubled", p.line(node))
                break


@operator("reduction-changed", WRONG, FAMILY, "a loss object's reduction set to 'sum' (B x the mean)", "the first update (B x the gradient)")
def reduction_changed(p):
    called = _called_through_call(p)
    for call in uses.used_losses(p):
        if _bound_names(p, call) & called:
            continue  # the step reads its per-example losses (.call): the reduction is never applied
        current = keyword(call, "reduction")
        old = string(current.value) if current is not None else "sum_over_batch_size"
        if current is not None and old is None:
            attr = dotted(current.value) or ""
            old = attr.rsplit(".", 1)[-1].lower() if attr else None
        if old in (None, "sum"):
            continue
        yield Edit(p.replace_one(call, with_keyword(call, "reduction", expr('"sum"'))), f"{callee(call)} reduction {old} -> sum", p.line(call))



def _called_through_call(p) -> set[str]:
    """What a training step calls ``.call(...)`` on (``self.loss``, ``loss_fn``): a loss object
    read so gives its per-example losses, whatever its reduction."""
    found = set()
    for step in p.facts.steps:
        for n in walk(step.body):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "call":
                found.add(p.code(n.func.value))
    return found


def _bound_names(p, construction: cst.Call) -> set[str]:
    """The names a step may read a loss object's construction by: a name or ``self.<attr>`` it
    is assigned to, and ``self.<keyword>`` (Keras's ``self.loss``, ``self.compiled_loss``) where
    it is given to ``compile``, directly or through a name."""
    names = set()
    for node in p.nodes(cst.Assign):
        if node.value is construction:
            names |= {p.code(target.target) for target in node.targets}
    for arg in p.nodes(cst.Arg):
        if arg.keyword is not None and (arg.value is construction or p.facts.resolve(arg.value) is construction):
            names |= {f"self.{arg.keyword.value}", "self.loss", "self.compiled_loss"}
    return names
