"""Rewrites that keep what is trained (``right``): the same thing spelled otherwise.

Defaults written out (an optimizer's hyper-parameters at their defaults, ``from_logits=False``,
``use_bias=True``, ``optimizer="adam"`` as ``Adam()``), compile's ``steps_per_execution``
(steps grouped per call, the same updates; only where fit has no callbacks that count
batches), comments and formatting.
"""

from __future__ import annotations

import libcst as cst

from mutants import uses
from mutants.core import RIGHT, Edit, callee, expr, keyword, operator, string, with_keyword
from mutants.vocabulary import KERNEL_LAYERS
from mutants.optimizer import DEFAULTS, PARAMETERS, _param, compile_strings, optimizers

FAMILY = "right"
CLASS_OF = {"adam": "Adam", "sgd": "SGD", "rmsprop": "RMSprop", "adagrad": "Adagrad", "adamax": "Adamax", "nadam": "Nadam", "adadelta": "Adadelta"}
LOSS_PARAMETERS = {"SparseCategoricalCrossentropy": "from_logits", "CategoricalCrossentropy": "from_logits", "BinaryCrossentropy": "from_logits"}


def _keras_prefix(p) -> str | None:
    """How the file names Keras: ``keras`` or ``tf.keras``."""
    names = p.facts.module_names
    if "keras" in names:
        return "keras"
    if "tf" in names:
        return "tf.keras"
    return None


def _in_scope(p, node) -> bool:
    return any(isinstance(a, cst.With) and any(callee(i.item) == "scope" for i in a.items if isinstance(i.item, cst.Call)) for a in p.ancestors(node))


@operator("default-spelled-out", RIGHT, FAMILY, "a default written out (an optimizer's defaults, from_logits=False, use_bias=True, 'adam' as Adam())", "nothing (the same values)")
def default_spelled_out(p):
    for call, name in optimizers(p):
        missing = [q for q in PARAMETERS[name] if q in DEFAULTS[name] and _param(call, name, q) is None]
        if not missing:
            continue
        new = call
        for q in missing:
            new = with_keyword(new, q, expr(repr(DEFAULTS[name][q])))
        yield Edit(p.replace_one(call, new), f"{name}(...) with {', '.join(f'{q}={DEFAULTS[name][q]!r}' for q in missing)}", p.line(call))
    for call in uses.used_losses(p):
        parameter = LOSS_PARAMETERS.get(callee(call) or "")
        if parameter and keyword(call, parameter) is None and not (call.args and call.args[0].keyword is None):
            yield Edit(p.replace_one(call, with_keyword(call, parameter, expr("False"))), f"{callee(call)}(..., {parameter}=False)", p.line(call))
    prefix = _keras_prefix(p)
    for arg in compile_strings(p):
        name = CLASS_OF.get(string(arg.value) or "")
        if prefix and name and _in_scope(p, arg):
            yield Edit(p.replace_one(arg, arg.with_changes(value=expr(f"{prefix}.optimizers.{name}()"))), f"compile optimizer {string(arg.value)!r} -> {prefix}.optimizers.{name}()", p.line(arg))
    for call in p.facts.layers(KERNEL_LAYERS)[:2]:
        if keyword(call, "use_bias") is None:
            yield Edit(p.replace_one(call, with_keyword(call, "use_bias", expr("True"))), f"{callee(call)}(..., use_bias=True)", p.line(call))


@operator("steps-per-execution", RIGHT, FAMILY, "compile(steps_per_execution=2): two steps per call, the same updates (fit without callbacks)", "nothing (the same updates, grouped)")
def steps_per_execution(p):
    for call, value in p.facts.compiled_models():
        if keyword(call, "steps_per_execution") is not None or not isinstance(call.func, cst.Attribute):
            continue
        cls = p.facts.classes.get(p.facts.model_class(value) or "")
        if cls is not None and any(isinstance(m, cst.FunctionDef) and m.name.value == "compile" for m in cls.body.body):
            continue  # a compile of the script's own: it may take no steps_per_execution
        receiver = call.func.value
        fits = [n for n in p.nodes(cst.Call) if callee(n) == "fit" and isinstance(n.func, cst.Attribute) and p.code(n.func.value) == p.code(receiver)]
        if not fits or any(keyword(f, "callbacks") is not None or any(a.star for a in f.args) for f in fits):
            continue
        yield Edit(p.replace_one(call, with_keyword(call, "steps_per_execution", expr("2"))), f"{p.code(receiver)}.compile(..., steps_per_execution=2)", p.line(call))


@operator("comments-formatting", RIGHT, FAMILY, "comments and blank lines added, a value put in parentheses", "nothing (the same program)")
def comments_formatting(p):
    body = list(p.module.body)
    targets = [s for s in body if not p.is_wall(s)][:: max(1, len(body) // 4)][:4]
    if not targets:
        return
    changes = {}
    for number, statement in enumerate(targets):
        comment = cst.EmptyLine(comment=cst.Comment(f"# step {number + 1} of the script, as it was"))
        lines = [cst.EmptyLine(), comment, *statement.leading_lines]
        changes[statement] = statement.with_changes(leading_lines=lines)
    for statement in body:
        if statement in changes or p.is_wall(statement):
            continue
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Assign):
            assign = statement.body[0]
            value = assign.value
            if not value.lpar and not isinstance(value, (cst.Tuple, cst.GeneratorExp)):
                wrapped = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                changes[statement] = statement.with_changes(
                    body=[assign.with_changes(value=wrapped)],
                    trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# the same value")),
                ) if statement.trailing_whitespace.comment is None else statement.with_changes(body=[assign.with_changes(value=wrapped)])
                break
    yield Edit(p.replace(changes), f"{len(targets)} comments and blank lines added, one value in parentheses", p.line(targets[0]))
