"""The optimizer: its class, its hyper-parameters, and the schedule of its learning rate.

Wrong by the definition: another optimizer or other hyper-parameters than the original's
(several act only from the second step on: momentum, Adam's betas), clipping added (or one
that certainly acts removed), weight decay, or a schedule whose steps are counted from the
per-replica batch (the rate at another point per example seen). Only optimizers a training
step applies are changed.
"""

from __future__ import annotations

import libcst as cst

from mutants import uses
from mutants.core import WRONG, Edit, argument, callee, expr, keyword, literal, number, operator, string, with_keyword, without_arg
from mutants.vocabulary import SCHEDULES, scaled_operand, walk

FAMILY = "optimizer"
SEES_LATER = "updates after the first (optimizer state, the step counter)"
SEES = "the first update"

# Keras's optimizers: their parameters in order, and the defaults of those changed here.
PARAMETERS = {
    "SGD": ["learning_rate", "momentum", "nesterov"],
    "Adam": ["learning_rate", "beta_1", "beta_2", "epsilon", "amsgrad"],
    "AdamW": ["learning_rate", "weight_decay", "beta_1", "beta_2", "epsilon"],
    "Adamax": ["learning_rate", "beta_1", "beta_2", "epsilon"],
    "Nadam": ["learning_rate", "beta_1", "beta_2", "epsilon"],
    "RMSprop": ["learning_rate", "rho", "momentum", "epsilon", "centered"],
    "Adagrad": ["learning_rate", "initial_accumulator_value", "epsilon"],
    "Adadelta": ["learning_rate", "rho", "epsilon"],
    "Lion": ["learning_rate", "beta_1", "beta_2"],
}
DEFAULTS = {
    "SGD": {"learning_rate": 0.01, "momentum": 0.0},
    "Adam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "AdamW": {"learning_rate": 0.001, "weight_decay": 0.004, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "Adamax": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "Nadam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "RMSprop": {"learning_rate": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7},
    "Adagrad": {"learning_rate": 0.001, "epsilon": 1e-7},
    "Adadelta": {"learning_rate": 0.001, "epsilon": 1e-7},
    "Lion": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.99},
}
OTHER_CLASS = {"SGD": "Adam", "Adam": "SGD", "RMSprop": "Adam", "Adagrad": "Adam", "Adamax": "Adam", "Nadam": "Adam", "AdamW": "SGD", "Adadelta": "Adam", "Lion": "SGD"}
OTHER_STRING = {"adam": "sgd", "sgd": "adam", "rmsprop": "adam", "adagrad": "adam", "adamax": "adam", "nadam": "adam", "adadelta": "adam"}


def optimizers(p):
    for call in uses.used_optimizers(p):
        name = callee(call)
        if name in PARAMETERS and not any(a.star for a in call.args):
            yield call, name


def _param(call, name, parameter):
    order = PARAMETERS[name]
    return argument(call, parameter, order.index(parameter) if parameter in order else None)


def _value(p, call, name, parameter):
    """The value of a hyper-parameter: written (a number, or a name bound to one), or the
    default; None when it is something else (a schedule)."""
    arg = _param(call, name, parameter)
    if arg is None:
        return DEFAULTS[name].get(parameter), None
    resolved = p.facts.resolve(arg.value) if isinstance(arg.value, cst.Name) else arg.value
    return number(resolved), arg


def _set(call, name, parameter, arg, value):
    if arg is not None:
        return call.with_changes(args=[a.with_changes(value=value) if a is arg else a for a in call.args])
    return with_keyword(call, parameter, value)


def compile_strings(p):
    """String optimizers given to compile of a model fit trains (``optimizer="adam"``)."""
    for call, _ in p.facts.compiled_models():
        arg = keyword(call, "optimizer") or (call.args[0] if call.args and call.args[0].keyword is None else None)
        if arg is not None and string(arg.value) in OTHER_STRING:
            yield arg


@operator("optimizer-class-changed", WRONG, FAMILY, "the optimizer's class (Adam <-> SGD, RMSprop -> Adam), its learning rate kept", SEES)
def optimizer_class_changed(p):
    for call, name in optimizers(p):
        if not isinstance(call.func, cst.Attribute):
            continue
        other = OTHER_CLASS[name]
        lr = _param(call, name, "learning_rate")
        args = [cst.Arg(lr.value.deep_clone())] if lr is not None else []
        new = cst.Call(func=call.func.with_changes(attr=cst.Name(other)), args=args)
        yield Edit(p.replace_one(call, new), f"{p.code(call)[:60]} -> {other}", p.line(call))
    for arg in compile_strings(p):
        old = string(arg.value)
        yield Edit(p.replace_one(arg, arg.with_changes(value=expr(repr(OTHER_STRING[old])))), f"compile optimizer {old!r} -> {OTHER_STRING[old]!r}", p.line(arg))


@operator("learning-rate-changed", WRONG, FAMILY, "the learning rate doubled (written, named or the default)", SEES)
def learning_rate_changed(p):
    for call, name in optimizers(p):
        value, arg = _value(p, call, name, "learning_rate")
        if value is None:
            continue
        if arg is not None and isinstance(arg.value, cst.Name):
            new = expr(f"{arg.value.value} * 2")
        else:
            new = literal(value * 2)
        yield Edit(p.replace_one(call, _set(call, name, "learning_rate", arg, new)), f"{name} learning_rate {value:g} -> {value * 2:g}", p.line(call))


@operator("momentum-changed", WRONG, FAMILY, "momentum changed (0.9 <-> 0.5; none -> 0.9)", SEES_LATER)
def momentum_changed(p):
    for call, name in optimizers(p):
        if "momentum" not in PARAMETERS[name]:
            continue
        value, arg = _value(p, call, name, "momentum")
        if value is None:
            continue
        new = 0.5 if value == 0.9 else 0.9
        yield Edit(p.replace_one(call, _set(call, name, "momentum", arg, literal(new))), f"{name} momentum {value:g} -> {new:g}", p.line(call))


@operator("beta-changed", WRONG, FAMILY, "Adam's beta_1 or beta_2 changed", SEES_LATER)
def beta_changed(p):
    for call, name in optimizers(p):
        for parameter, usual, other in (("beta_1", 0.9, 0.5), ("beta_2", 0.999, 0.99)):
            if parameter not in PARAMETERS[name]:
                continue
            value, arg = _value(p, call, name, parameter)
            if value is None:
                continue
            new = other if value == usual else usual
            yield Edit(p.replace_one(call, _set(call, name, parameter, arg, literal(new))), f"{name} {parameter} {value:g} -> {new:g}", p.line(call))


@operator("epsilon-changed", WRONG, FAMILY, "the optimizer's epsilon x 1000", SEES)
def epsilon_changed(p):
    for call, name in optimizers(p):
        if "epsilon" not in PARAMETERS[name]:
            continue
        value, arg = _value(p, call, name, "epsilon")
        if value is None or value <= 0:
            continue
        new = value * 1000
        yield Edit(p.replace_one(call, _set(call, name, "epsilon", arg, expr(f"{new:g}"))), f"{name} epsilon {value:g} -> {new:g}", p.line(call))


CLIPS = ("clipnorm", "global_clipnorm", "clipvalue")


@operator("clipnorm-added", WRONG, FAMILY, "clipnorm=1e-6 added (every gradient clipped)", SEES)
def clipnorm_added(p):
    for call, name in optimizers(p):
        if any(keyword(call, c) is not None for c in CLIPS):
            continue
        yield Edit(p.replace_one(call, with_keyword(call, "clipnorm", expr("1e-6"))), f"{name} clipnorm=1e-6 added", p.line(call))


@operator("clipnorm-removed", WRONG, FAMILY, "a clipping of at most 1e-3 removed (one that acts on any real gradient)", SEES)
def clipnorm_removed(p):
    for call, name in optimizers(p):
        for clip in CLIPS:
            arg = keyword(call, clip)
            value = number(arg.value) if arg is not None else None
            if value is not None and 0 < value <= 1e-3:
                yield Edit(p.replace_one(call, without_arg(call, arg)), f"{name} {clip}={value:g} removed", p.line(call))


@operator("weight-decay-added", WRONG, FAMILY, "weight_decay=0.1 added (or the written one doubled)", SEES)
def weight_decay_added(p):
    for call, name in optimizers(p):
        order = PARAMETERS[name]
        arg = argument(call, "weight_decay", order.index("weight_decay") if "weight_decay" in order else None)
        if arg is None:
            value = DEFAULTS[name].get("weight_decay", 0.0)
        elif isinstance(arg.value, cst.Name) and arg.value.value == "None":
            value = 0.0
        else:
            value = number(p.facts.resolve(arg.value) if isinstance(arg.value, cst.Name) else arg.value)
            if value is None:
                continue
        new = value * 2 if value else 0.1
        yield Edit(p.replace_one(call, _set(call, name, "weight_decay", arg, literal(new))), f"{name} weight_decay {value:g} -> {new:g}", p.line(call))


@operator("schedule-per-replica", WRONG, FAMILY, "a learning-rate schedule's steps counted from the per-replica batch (len(x) // B)", SEES_LATER)
def schedule_per_replica(p):
    done = set()
    for call, name in optimizers(p):
        lr = _param(call, name, "learning_rate")
        if lr is None:
            continue
        schedule = p.facts.resolve(lr.value) if isinstance(lr.value, cst.Name) else lr.value
        if not (isinstance(schedule, cst.Call) and callee(schedule) in SCHEDULES):
            continue
        for division in _divisions(p, schedule):
            if id(division) in done:
                continue
            done.add(id(division))
            right = division.right
            operand = scaled_operand(p.facts.resolve(right) if isinstance(right, cst.Name) else right)
            yield Edit(p.replace_one(right, operand.deep_clone()), f"{p.code(division)} -> by {p.code(operand)} (per replica)", p.line(division))


def _divisions(p, node, depth=0):
    """Divisions by a global batch in what ``node`` is computed from (through names)."""
    if depth > 5:
        return
    for n in walk(node):
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.FloorDivide, cst.Divide)):
            right = p.facts.resolve(n.right) if isinstance(n.right, cst.Name) else n.right
            if scaled_operand(right) is not None:
                yield n
        if isinstance(n, cst.Name):
            value = p.facts.value_of(n.value, n)
            if value is not None and value is not node:
                yield from _divisions(p, value, depth + 1)
