"""What generated training code needs to know about a script: how it spells TensorFlow and
Keras, the loss and optimizer a model was compiled with, the dataset it trains on and that
dataset's global batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.tf.datasets import PASSTHROUGH
from autofix.tf.facts import COMPILE, TRAIN, Facts
from autofix.tf.program import Program
from autofix.tf.symbols import Kind

# Keras loss names accepted by compile(loss="..."), and the class computing each.
LOSS_CLASSES = {
    "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
    "categorical_crossentropy": "CategoricalCrossentropy",
    "binary_crossentropy": "BinaryCrossentropy",
    "binary_focal_crossentropy": "BinaryFocalCrossentropy",
    "mse": "MeanSquaredError",
    "mean_squared_error": "MeanSquaredError",
    "mae": "MeanAbsoluteError",
    "mean_absolute_error": "MeanAbsoluteError",
    "mape": "MeanAbsolutePercentageError",
    "mean_absolute_percentage_error": "MeanAbsolutePercentageError",
    "msle": "MeanSquaredLogarithmicError",
    "mean_squared_logarithmic_error": "MeanSquaredLogarithmicError",
    "huber": "Huber",
    "huber_loss": "Huber",
    "log_cosh": "LogCosh",
    "logcosh": "LogCosh",
    "kld": "KLDivergence",
    "kl_divergence": "KLDivergence",
    "kullback_leibler_divergence": "KLDivergence",
    "poisson": "Poisson",
    "hinge": "Hinge",
    "squared_hinge": "SquaredHinge",
    "categorical_hinge": "CategoricalHinge",
    "cosine_similarity": "CosineSimilarity",
}


class NotFound(Exception):
    """What generated code would need cannot be found; the message says what, for the user."""


def module_alias(program: Program, module: str) -> str | None:
    """The name the script imports ``module`` under (``import tensorflow as tf`` -> ``tf``)."""
    for statement in program.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if program.module.code_for_node(alias.name) == module:
                        return alias.asname.name.value if alias.asname else module  # type: ignore[union-attr]
    return None


def keras_spelling(program: Program, near: list[cst.CSTNode]) -> str:
    """How the script names the Keras module that built its model (``keras``, ``tf.keras``,
    ``tf_keras``): generated losses must come from that same Keras."""
    facts = program.facts
    for node in near:
        for expr in _attribute_chains(node):
            names = facts.names_of(expr)
            if not any(n.startswith("keras.") for n in names):
                continue
            code = program.module.code_for_node(expr)
            for root in ("tf.keras", "tensorflow.keras", "tf_keras", "keras"):
                if code.startswith(root + "."):
                    return root
            parts = code.split(".")
            if len(parts) > 2 and parts[1] == "keras":
                return ".".join(parts[:2])
    tf = module_alias(program, "tensorflow")
    if tf is not None:
        return f"{tf}.keras"
    raise NotFound("could not tell which Keras the model comes from")


def _attribute_chains(node: cst.CSTNode) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class Visitor(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            found.append(attribute)
            return False

    node.visit(Visitor())
    return found


@dataclass
class Compiled:
    """What ``model.compile(...)`` was given."""

    call: cst.Call
    loss: cst.BaseExpression | None
    optimizer: cst.BaseExpression | None


def method_calls(facts: Facts, model: cst.Name, methods: tuple[str, ...], kind: str) -> list[cst.Call]:
    """The calls ``m.<method>(...)`` on the model bound where ``model`` is used, that the
    facts classify as ``kind`` (COMPILE or TRAIN)."""
    found = []
    for binding in facts.bindings(model) or []:
        if not isinstance(binding, cst.Name):
            continue
        for use in facts.uses(binding):
            attribute = facts.program.parent(use)
            call = facts.program.parent(attribute)
            if (
                isinstance(attribute, cst.Attribute)
                and attribute.attr.value in methods
                and isinstance(call, cst.Call)
                and facts.call_kind(call) == kind
            ):
                found.append(call)
    return found


def compile_of(facts: Facts, model: cst.Name) -> Compiled | None:
    """The ``compile`` call of the model bound at ``model``'s use, if there is exactly one."""
    found = method_calls(facts, model, ("compile",), COMPILE)
    if len(found) != 1:
        return None
    call = found[0]
    return Compiled(call, _arg(call, "loss", 1), _arg(call, "optimizer", 0))


def fit_datasets(facts: Facts, model: cst.Name) -> list[cst.BaseExpression]:
    """What the model's ``fit`` calls train on (their first argument)."""
    firsts = (_arg(call, "x", 0) for call in method_calls(facts, model, ("fit", "fit_generator"), TRAIN))
    return [first for first in firsts if first is not None]


def _arg(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if position < len(positional) else None


def per_example_loss(program: Program, loss: cst.BaseExpression | None, keras: str) -> tuple[str | None, str]:
    """``(making, calling)``: code that makes a loss object computing one loss per example
    (``reduction="none"``), or None when none is needed, and the callable to apply to
    ``(labels, predictions)``."""
    facts = program.facts
    if loss is None:
        raise NotFound("the model's compile() has no loss")
    if isinstance(loss, cst.SimpleString):
        name = loss.evaluated_value
        cls = LOSS_CLASSES.get(str(name).lower())
        if cls is None:
            raise NotFound(f"the loss {loss.value} has no Keras loss class autofix knows")
        return f'{keras}.losses.{cls}(reduction="none")', ""
    if isinstance(loss, cst.Name):
        bindings = facts.bindings(loss) or []
        values = [facts.assigned_value(b) for b in bindings]
        if len(values) == 1 and isinstance(values[0], cst.Call):
            return per_example_loss(program, values[0], keras)
    if isinstance(loss, cst.Call) and facts.call_kind(loss) is Kind.LOSS:
        return _with_reduction_none(program, loss), ""
    if isinstance(loss, (cst.Name, cst.Attribute)):
        names = facts.names_of(loss)
        if any(n.startswith("keras.losses.") and n.rpartition(".")[2][:1].islower() for n in names):
            # A loss function (keras.losses.mse): it already returns one loss per example.
            return None, program.module.code_for_node(loss)
    raise NotFound("the compiled loss is not a Keras loss that can be rebuilt with reduction='none'")


def _with_reduction_none(program: Program, call: cst.Call) -> str:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "reduction")]
    func = program.module.code_for_node(call.func)
    rendered = [program.module.code_for_node(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in args]
    return f"{func}({', '.join([*rendered, 'reduction=' + repr('none').replace(chr(39), chr(34))])})"


def batch_size_of(program: Program, dataset: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
    """The expression a dataset was batched with (``ds.batch(E)`` -> ``E``), following names
    and dataset method chains back to where it was made."""
    facts = program.facts
    if depth > 8:
        return None
    if isinstance(dataset, cst.Name):
        bindings = facts.bindings(dataset) or []
        values = [facts.assigned_value(b) for b in bindings]
        if len(values) == 1 and values[0] is not None:
            return batch_size_of(program, values[0], depth + 1)
        return None
    if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Attribute):
        method = dataset.func.attr.value
        if method in ("batch", "padded_batch"):
            return _arg(dataset, "batch_size", 0)
        if method in PASSTHROUGH:
            return batch_size_of(program, dataset.func.value, depth + 1)
    return None


def visible_at(program: Program, expr: cst.BaseExpression, site: cst.CSTNode) -> bool:
    """Whether every name ``expr`` reads means the same at ``site`` (so it can be copied there)."""
    scope = program.scope(site)
    if scope is None:
        return False

    names: list[cst.Name] = []

    class Visitor(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.append(node)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

    expr.visit(Visitor())
    for name in names:
        access = program.access(name)
        if access is None:
            return False
        here = {a for a in scope[name.value]} if name.value in scope else set()
        if not set(access.referents) <= here and not set(access.referents) & here:
            return False
        if not here:
            return False
    return True


def fresh_names(program: Program, wanted: list[str]) -> dict[str, str]:
    """Names for generated code that no name of the module already uses."""
    taken = program.facts.names()
    chosen = {}
    for name in wanted:
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}_{n}", n + 1
        taken.add(candidate)
        chosen[name] = candidate
    return chosen
