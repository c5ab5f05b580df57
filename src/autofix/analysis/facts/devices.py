"""How many replicas a strategy has, where the file says it.

MirroredStrategy has one replica per device it is given, or per GPU the process sees. A file
fixes that number in two ways this module reads:

- ``MirroredStrategy(devices=["/gpu:0", "/gpu:1", "/gpu:2"])``: a list or tuple written out,
  one replica per entry;
- ``os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"`` at the top level of the module (a
  notebook's cells are), the only value the file gives it, for a ``MirroredStrategy()`` made
  without devices: one replica per GPU listed (``"-1"`` or ``""`` hides them all: the CPU, one
  replica).

Anything else (a flag, a variable of the environment the file does not set, several values,
a value set after a TensorFlow call, a GPU split into logical devices, another strategy
class) is unknown: None. The count says what the file asks for; a machine
with fewer GPUs has fewer replicas, which only makes a known count an upper bound for
``CUDA_VISIBLE_DEVICES`` and exact for ``devices=``. Where it is one,
:meth:`.strategies.Strategies.constructed_classes` reads the strategy as one replica's, so no
rule about several replicas (a batch, a step's feeding, a loss's reduction) reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value

_ENVIRONMENT = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class ReplicaCount:
    """A strategy's replica count and the node that says it."""

    replicas: int
    where: cst.CSTNode


def replica_count(program: Program, constructions: list[cst.Call]) -> ReplicaCount | None:
    """The number of replicas every one of ``constructions`` (``MirroredStrategy(...)``
    calls) makes, when the file says it, else None."""
    if not constructions:
        return None
    counts: set[int] = set()
    where: cst.CSTNode | None = None
    for call in constructions:
        if not any(name.endswith("MirroredStrategy") and "MultiWorker" not in name for name in program.qualified_names(call.func)):
            return None
        devices = argument_value(call, "devices", 0)
        if devices is None:
            visible = visible_gpus(program)
            if visible is None:
                return None
            count, node = visible
        elif isinstance(devices, (cst.List, cst.Tuple)) and devices.elements and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.SimpleString) for e in devices.elements
        ):
            count, node = len(devices.elements), devices
        else:
            return None
        counts.add(count)
        where = where or node
    if len(counts) != 1 or where is None:
        return None
    return ReplicaCount(counts.pop(), where)


def visible_gpus(program: Program) -> tuple[int, cst.CSTNode] | None:
    """How many GPUs the module's only ``os.environ["CUDA_VISIBLE_DEVICES"] = "..."`` (at
    its top level) lists, with that string; None when it sets none, several, one read
    from elsewhere, or sets it after a TensorFlow call at the top level (TensorFlow may have
    seen the GPUs by then: the variable is read once, when they are first listed)."""
    values = _environ_writes(program)
    if len(values) != 1:
        return None
    (value,) = values
    if not isinstance(value, cst.SimpleString) or _tensorflow_ran_before(program, value) or _splits_devices(program):
        return None
    text = value.evaluated_value
    if not isinstance(text, str):
        return None
    entries = [e.strip() for e in text.split(",") if e.strip()]
    if not entries or "-1" in entries:
        return 1, value  # no GPU: MirroredStrategy runs on the CPU, one replica
    return len(entries), value


def _tensorflow_ran_before(program: Program, node: cst.CSTNode) -> bool:
    """Whether a call of TensorFlow or Keras at the module's top level comes before ``node``."""
    line = program.line(node)
    for call, _owner in program.index.calls:
        if program.line(call) >= line or program.enclosing_function(call) is not None:
            continue
        if any(name.startswith(("tensorflow", "keras", "tf_keras")) for name in program.qualified_names(call.func)):
            return True
    return False


_SPLITS = ("set_logical_device_configuration", "set_virtual_device_configuration")


def _splits_devices(program: Program) -> bool:
    """Whether the module splits a device into logical ones (``set_logical_device_configuration``):
    a GPU it sees may then be several replicas."""
    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value in _SPLITS for call, _owner in program.index.calls
    )


def _environ_writes(program: Program) -> list[cst.BaseExpression]:
    """The values the module gives CUDA_VISIBLE_DEVICES anywhere (``os.environ[...] = v``,
    ``os.environ.setdefault(..., v)``, ``os.environ.update(...)``: the last read as unknown)."""
    found: list[cst.BaseExpression] = []
    for node in program.index.assigns:
        if not isinstance(node, cst.Assign):
            continue
        for target in node.targets:
            if _names_the_variable(program, target.target):
                found.append(node.value if program.enclosing_function(node) is None else cst.Name("unknown"))
    for call, _owner in program.index.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and "os.environ" in program.qualified_names(func.value):
            if func.attr.value == "setdefault" and _is_the_variable(argument_value(call, "key", 0)):
                found.append(argument_value(call, "default", 1) or cst.Name("unknown"))
            elif func.attr.value == "update":
                found.append(cst.Name("unknown"))
    return found


def _names_the_variable(program: Program, target: cst.BaseExpression) -> bool:
    if not (isinstance(target, cst.Subscript) and "os.environ" in program.qualified_names(target.value)):
        return False
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return False
    return _is_the_variable(target.slice[0].slice.value)


def _is_the_variable(key: cst.BaseExpression | None) -> bool:
    return isinstance(key, cst.SimpleString) and key.evaluated_value == _ENVIRONMENT
