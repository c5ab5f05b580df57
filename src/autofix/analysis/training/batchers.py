"""Python-side batchers ``fit`` may be fed: what batch each yields, and where it is set.

Under MirroredStrategy every batch a batcher hands ``fit`` is the GLOBAL batch, split over the
replicas (measured, docs/migrate.md), so a migration keeping the original's per-replica batch
asks the batcher for N x its batch. That is only right where the batch each item holds is the
one number the call passes:

- ``datagen.flow(x, y, batch_size=B)`` of a Keras ``ImageDataGenerator`` (``B`` 32 when not
  given); ``flow_from_directory`` / ``flow_from_dataframe`` are given ``batch_size=``;
- a generator function of the file, ``def gen(x, y, b): ... yield x[i:i + b], y[i:i + b]``,
  whose parameter ``b`` is read only as the width of the slices it yields and as the stop or
  step of the ``range`` the slices start from;
- a ``keras.utils.Sequence`` / ``PyDataset`` subclass of the file, ``self.b = b`` in its
  ``__init__``, whose ``__getitem__`` returns ``a[i * self.b:(i + 1) * self.b]`` slices and
  reads ``self.b`` nowhere else but its ``__len__``.

:func:`batcher` says which (the argument that sets the batch, or the keyword and default to
write), or why the batch cannot be followed, or why the proof could not hold the batches equal
(randomness drawn in Python with no seed).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument, nodes_in

IMAGE_DATA_GENERATORS = frozenset(
    {
        "keras.preprocessing.image.ImageDataGenerator",
        "keras.src.legacy.preprocessing.image.ImageDataGenerator",
        "tensorflow.keras.preprocessing.image.ImageDataGenerator",
        "tf_keras.preprocessing.image.ImageDataGenerator",
        "keras._tf_keras.keras.preprocessing.image.ImageDataGenerator",
    }
)
# ImageDataGenerator's methods that batch, and the position of batch_size among their
# positional parameters (flow_from_directory / flow_from_dataframe: only by keyword here).
_FLOWS = {"flow": 2, "flow_from_directory": None, "flow_from_dataframe": None}
FLOW_DEFAULT_BATCH = 32
SEQUENCES = frozenset({"keras.utils.Sequence", "keras.utils.PyDataset", "tensorflow.keras.utils.Sequence", "tensorflow.keras.utils.PyDataset", "tf_keras.utils.Sequence"})
# Randomness drawn in Python: the module-level generators of NumPy and the standard library.
_UNSEEDED = ("numpy.random.", "random.")


@dataclass(frozen=True, eq=False)
class Batcher:
    """A batcher ``fit`` is fed. ``arg``: the argument that sets its batch (None: not given,
    then ``keyword=default`` is what it batches with); ``why``: why its batch cannot be scaled
    (then nothing else is set)."""

    call: cst.Call
    kind: str  # "flow", "generator", "sequence"
    arg: cst.Arg | None = None
    keyword: str = "batch_size"
    default: int | None = None
    why: str | None = None


def batcher(program: Program, call: cst.Call) -> Batcher | None:
    """The batcher ``call`` makes, when it makes one (None: not a batcher autofix knows)."""
    facts = Facts.of(program)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _FLOWS and _is_image_data_generator(facts, func.value):
        position = _FLOWS[func.attr.value]
        arg = argument(call, "batch_size", position)
        if arg is not None and arg.star:
            return Batcher(call, "flow", why="its batch is given through * or **")
        if any(a.star for a in call.args):
            return Batcher(call, "flow", why="it is given * or ** arguments, which may set its batch")
        why = _flow_randomness(program, facts, call, func.value)
        return Batcher(call, "flow", arg, default=FLOW_DEFAULT_BATCH if arg is None else None, why=why)
    definition = facts.local_definition(func)
    if isinstance(definition, cst.FunctionDef) and nodes_in(definition.body, cst.Yield, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return _generator(program, facts, call, definition)
    if isinstance(definition, cst.ClassDef) and any(facts.names_of(b.value) & SEQUENCES for b in definition.bases):
        return _sequence(program, facts, call, definition)
    return None


def _is_image_data_generator(facts: Facts, receiver: cst.BaseExpression) -> bool:
    for origin in facts.values.origins(receiver):
        node = origin.node
        if origin.whole and isinstance(node, cst.Call) and facts.names_of(node.func) & IMAGE_DATA_GENERATORS:
            return True
    return False


def _generator_call(facts: Facts, receiver: cst.BaseExpression) -> cst.Call | None:
    for origin in facts.values.origins(receiver):
        node = origin.node
        if origin.whole and isinstance(node, cst.Call) and facts.names_of(node.func) & IMAGE_DATA_GENERATORS:
            return node
    return None


# ImageDataGenerator options that transform each image at random (NumPy's global generator
# draws them, per image, unless flow is given a seed).
_RANDOM_OPTIONS = frozenset(
    {
        "rotation_range", "width_shift_range", "height_shift_range", "brightness_range", "shear_range",
        "zoom_range", "channel_shift_range", "horizontal_flip", "vertical_flip",
    }
)


def _flow_randomness(program: Program, facts: Facts, call: cst.Call, receiver: cst.BaseExpression) -> str | None:
    """Why the proof cannot hold the flow's batches equal: it augments at random or shuffles
    with no seed given (NumPy's global generator, drawn per image as the batches are made)."""
    seed = argument(call, "seed")
    if seed is not None and not (isinstance(seed.value, cst.Name) and seed.value.value == "None"):
        return None
    made = _generator_call(facts, receiver)
    options = [a.keyword.value for a in made.args if a.keyword is not None and a.keyword.value in _RANDOM_OPTIONS and not _off(a.value)] if made else []
    if made is not None and any(a.star for a in made.args):
        options.append("** options")
    if options:
        return (
            f"it transforms each image at random ({options[0]}=, line {program.line(made)}) with no seed given to "
            f"flow: NumPy's global generator draws them as the batches are made, which the proof cannot hold "
            "equal between the original and the migration; give flow seed= to migrate it"
        )
    return None


def _off(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name):
        return value.value in ("False", "None")
    if isinstance(value, (cst.Integer, cst.Float)):
        return float(value.value) == 0.0
    return False


def _generator(program: Program, facts: Facts, call: cst.Call, function: cst.FunctionDef) -> Batcher:
    name = function.name.value
    line = program.line(function)
    if any(a.star for a in call.args):
        return Batcher(call, "generator", why=f"{name}() (line {line}) is given * or ** arguments")
    random = _draws_unseeded(facts, function)
    if random is not None:
        return Batcher(call, "generator", why=(
            f"{name}() (line {line}) draws {random} with NumPy's or Python's global generator as it yields: the "
            "proof cannot hold its batches equal between the original and the migration (a migration asking it "
            "for N x the batch draws other numbers for other examples); draw them with a seeded generator"
        ))
    yields = nodes_in(function.body, cst.Yield, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda))
    widths: set[str] = set()
    for y in yields:
        parts = _parts(y.value)
        slices = [_slice_width(p) for p in parts] if parts else []
        if not slices or any(w is None for w in slices) or len(set(slices)) != 1:
            return Batcher(call, "generator", why=(
                f"{name}() (line {line}) yields on line {program.line(y)} something other than slices of its arrays "
                "one parameter wide (x[i:i + batch_size]): how many examples each batch holds is not followed"
            ))
        widths.add(slices[0])  # type: ignore[arg-type]
    if len(widths) != 1:
        return Batcher(call, "generator", why=f"{name}() (line {line}) yields slices of several widths")
    width = widths.pop()
    params = [p for p in function.params.params if p.name.value == width]
    if not params:
        return Batcher(call, "generator", why=f"the width of the slices {name}() (line {line}) yields, {width}, is not one of its parameters")
    param = params[0]
    stray = _stray_reads(program, function, width)
    if stray is not None:
        return Batcher(call, "generator", why=(
            f"{name}() (line {line}) reads its batch {width} on line {program.line(stray)} for something other than "
            "the width of the slices it yields and the range they start from: asked for N x the batch, it would change"
        ))
    position = list(function.params.params).index(param)
    arg = argument(call, width, position)
    default = None
    if arg is None:
        if not isinstance(param.default, cst.Integer):
            return Batcher(call, "generator", why=f"{name}() (line {line}) is called without {width}, whose default is not a number")
        default = int(param.default.value, 0)
    return Batcher(call, "generator", arg, keyword=width, default=default)


def _parts(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if isinstance(value, cst.Tuple):
        return [e.value for e in value.elements if not isinstance(e, cst.StarredElement)] if all(
            not isinstance(e, cst.StarredElement) for e in value.elements
        ) else []
    return [value] if value is not None else []


def _slice_width(part: cst.BaseExpression) -> str | None:
    """``a[i:i + b]`` -> ``b`` (a name); None for anything else."""
    if not (isinstance(part, cst.Subscript) and len(part.slice) == 1 and isinstance(part.slice[0].slice, cst.Slice)):
        return None
    s = part.slice[0].slice
    if s.step is not None or s.lower is None or s.upper is None:
        return None
    upper = s.upper
    if (
        isinstance(upper, cst.BinaryOperation)
        and isinstance(upper.operator, cst.Add)
        and isinstance(upper.right, cst.Name)
        and upper.left.deep_equals(s.lower)
        and isinstance(s.lower, cst.Name)
    ):
        return upper.right.value
    return None


def _stray_reads(program: Program, function: cst.FunctionDef, width: str) -> cst.CSTNode | None:
    """A read of ``width`` in ``function`` other than as a slice's width or a ``range``'s
    stop or step (or a binding of it: then it is not the parameter)."""
    for name in nodes_in(function.body, cst.Name):
        holder = program.parent(name)
        if name.value != width or isinstance(holder, cst.Attribute) and holder.attr is name:
            continue
        parent = program.parent(name)
        if isinstance(parent, cst.BinaryOperation) and parent.right is name and isinstance(parent.operator, cst.Add):
            holder = program.parent(parent)
            if isinstance(holder, cst.Slice) and holder.upper is parent:
                continue
        if _in_range(program, name):
            continue
        return name
    return None


def _in_range(program: Program, name: cst.Name) -> bool:
    """``range(0, len(x) - b + 1, b)``, ``range(0, n, b)``: ``b`` in a ``range``'s stop or
    step (the start must be 0, so the slices start at multiples of the batch)."""
    node: cst.CSTNode = name
    while True:
        parent = program.parent(node)
        if isinstance(parent, cst.Arg):
            call = program.parent(parent)
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "range"):
                return False
            args = list(call.args)
            return len(args) == 3 and parent is not args[0] and isinstance(args[0].value, cst.Integer) and args[0].value.value == "0"
        if not isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
            return False
        node = parent


def _draws_unseeded(facts: Facts, function: cst.FunctionDef) -> str | None:
    for inner in nodes_in(function.body, cst.Call):
        names = facts.names_of(inner.func)
        drawn = next((n for n in names if n.startswith(_UNSEEDED) and not n.endswith((".seed", ".default_rng", ".RandomState", ".Random"))), None)
        if drawn is not None:
            return drawn.replace("numpy.", "np.") + "()"
    return None


def _sequence(program: Program, facts: Facts, call: cst.Call, cls: cst.ClassDef) -> Batcher:
    name = cls.name.value
    line = program.line(cls)
    methods = {m.name.value: m for m in nodes_in(cls.body, cst.FunctionDef, stop=(cst.FunctionDef,)) if m is not cls}
    init, getitem = methods.get("__init__"), methods.get("__getitem__")
    if init is None or getitem is None:
        return Batcher(call, "sequence", why=f"{name} (line {line}) has no __init__ or __getitem__ of its own to follow its batch in")
    if any(a.star for a in call.args):
        return Batcher(call, "sequence", why=f"{name} (line {line}) is given * or ** arguments")
    for method in methods.values():
        random = _draws_unseeded(facts, method)
        if random is not None:
            return Batcher(call, "sequence", why=(
                f"{name}.{method.name.value} (line {program.line(method)}) draws {random} with NumPy's or Python's "
                "global generator: the proof cannot hold its batches equal between the original and the migration; "
                "draw them with a seeded generator"
            ))
    returns = nodes_in(getitem.body, cst.Return, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda))
    attrs: set[str] = set()
    for r in returns:
        parts = _parts(r.value)
        found = [_indexed_width(p) for p in parts] if parts else []
        if not found or any(f is None for f in found):
            return Batcher(call, "sequence", why=(
                f"{name}.__getitem__ returns on line {program.line(r)} something other than slices "
                "a[i * self.batch_size:(i + 1) * self.batch_size]: how many examples each batch holds is not followed"
            ))
        attrs.update(f for f in found if f is not None)
    if len(attrs) != 1:
        return Batcher(call, "sequence", why=f"{name}.__getitem__ slices its arrays by several widths")
    attr = attrs.pop()
    # ``self.<attr> = <param>`` once, in __init__, and nowhere else.
    sets = [
        a for a in nodes_in(cls.body, cst.Assign)
        if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == attr for t in a.targets)
    ]
    augmented = [a for a in nodes_in(cls.body, cst.AugAssign) if isinstance(a.target, cst.Attribute) and a.target.attr.value == attr]
    if len(sets) != 1 or augmented or program.enclosing_function(sets[0]) is not init or not isinstance(sets[0].value, cst.Name):
        return Batcher(call, "sequence", why=f"{name}.{attr} is not set once in __init__ from one of its parameters")
    param_name = sets[0].value.value
    params = [p for p in init.params.params if p.name.value == param_name]
    if not params:
        return Batcher(call, "sequence", why=f"{name}.{attr} is not set from a parameter of __init__")
    param = params[0]
    for n in nodes_in(init.body, cst.Name):
        holder = program.parent(n)
        if n.value == param_name and n is not sets[0].value and not (isinstance(holder, cst.Attribute) and holder.attr is n):
            return Batcher(call, "sequence", why=f"{name}.__init__ reads {param_name} on line {program.line(n)} for something else too")
    for method in methods.values():
        if method is getitem or method.name.value == "__len__":
            continue
        for a in nodes_in(method.body, cst.Attribute):
            if a.attr.value == attr and a is not sets[0].targets[0].target:
                return Batcher(call, "sequence", why=f"{name}.{method.name.value} reads self.{attr} on line {program.line(a)} too")
    for a in nodes_in(getitem.body, cst.Attribute):
        if a.attr.value == attr and not _width_read(program, a):
            return Batcher(call, "sequence", why=f"{name}.__getitem__ reads self.{attr} on line {program.line(a)} for something else than its slices")
    position = list(init.params.params).index(param) - 1  # (self)
    arg = argument(call, param_name, position)
    default = None
    if arg is None:
        if not isinstance(param.default, cst.Integer):
            return Batcher(call, "sequence", why=f"{name} is made without {param_name}, whose default is not a number")
        default = int(param.default.value, 0)
    return Batcher(call, "sequence", arg, keyword=param_name, default=default)


def _self_attr(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def _indexed_width(part: cst.BaseExpression) -> str | None:
    """``self.x[i * self.b:(i + 1) * self.b]`` -> ``b``."""
    if not (isinstance(part, cst.Subscript) and len(part.slice) == 1 and isinstance(part.slice[0].slice, cst.Slice)):
        return None
    s = part.slice[0].slice
    if s.step is not None or not isinstance(s.lower, cst.BinaryOperation) or not isinstance(s.upper, cst.BinaryOperation):
        return None
    lower, upper = s.lower, s.upper
    if not (isinstance(lower.operator, cst.Multiply) and isinstance(upper.operator, cst.Multiply)):
        return None
    width = _self_attr(lower.right)
    if width is None or _self_attr(upper.right) != width:
        return None
    index = lower.left
    bumped = upper.left
    if not (
        isinstance(bumped, cst.BinaryOperation)
        and isinstance(bumped.operator, cst.Add)
        and bumped.left.deep_equals(index)
        and isinstance(bumped.right, cst.Integer)
        and bumped.right.value == "1"
    ):
        return None
    return width


def _width_read(program: Program, attribute: cst.Attribute) -> bool:
    parent = program.parent(attribute)
    return isinstance(parent, cst.BinaryOperation) and parent.right is attribute and isinstance(program.parent(parent), cst.Slice)
