"""What Keras 3 refuses at run time that Keras 2 takes, read from the code: a file that does one of
these on its way to training runs on Keras 2 (TensorFlow 2.15 or older), and what fails only on
Keras 3 is not its bug.

Measured on TensorFlow 2.21.0 with Keras 3.15.1 (docs/keras-versions.md):

- an optimizer's ``lr`` read (``model.optimizer.lr``, ``K.set_value(opt.lr, ...)``, a callback's
  ``self.model.optimizer.lr``): ``AttributeError: 'Adam' object has no attribute 'lr'`` (Keras 3
  optimizers have ``learning_rate`` only). The optimizer must be a model's (what holds it is
  named a model) or one the file makes: ``cfg.optimizer.lr`` is a configuration's number;
- ``ModelCheckpoint(filepath)`` whose path does not end in ``.keras`` or ``.h5``
  (``ValueError: The filepath provided must end in `.keras` (Keras model format)``), or, with
  ``save_weights_only=True``, does not end in ``.weights.h5`` (``ValueError: When using
  `save_weights_only=True` in `ModelCheckpoint`, the filepath provided must end in
  `.weights.h5```). Both are raised when the callback is made, before ``fit`` runs;
- ``save_format=`` given to ``save_weights`` (``TypeError: Model.save_weights() got an
  unexpected keyword argument 'save_format'``), or ``save_format="tf"`` given to ``save`` /
  ``save_model`` (``ValueError: The `save_format` argument is deprecated in Keras 3. Please
  remove this argument and pass a file path with either `.keras` or `.h5` extension``; with a
  path shown to end in ``.keras`` or ``.h5`` it is only a warning);
- an integer given as an input's shape (``keras.Input(shape=(784))``: the parentheses make no
  tuple; ``InputLayer(input_shape=n)``): ``ValueError: Cannot convert '784' to a shape.``, where
  Keras 2 takes ``(784,)``.

A read guarded where it would fail (``hasattr(opt, "lr")``, ``getattr(opt, "lr", None)``, a
``try`` that catches ``AttributeError``) and a path whose end the code does not show say nothing.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.version_checks import tests_a_version
from autofix.analysis.syntax import argument_value, attribute_path
from autofix.tf.symbols import Kind

CHECKPOINT = "keras.callbacks.ModelCheckpoint"
_CATCHES_ATTRIBUTE_ERROR = frozenset({"AttributeError", "Exception", "BaseException"})


def keras3_refusal(facts) -> str | None:
    """Why the file cannot run on Keras 3 by what it does, if it does one of the above."""
    for call, _owner in facts.calls:
        if facts.names_of(call.func) & {CHECKPOINT}:
            refused = _checkpoint_refused(call)
            if refused is not None:
                return f"its ModelCheckpoint saves to {refused} (line {facts.program.line(call)}), which Keras 3 refuses"
    for call, _owner in facts.calls:
        refused = _save_format_refused(facts, call)
        if refused is not None and not _version_guarded(facts, call):
            return f"it {refused} (line {facts.program.line(call)}), which Keras 3 refuses"
    read = _optimizer_lr_read(facts)
    if read is not None:
        return f"it reads {facts.program.module.code_for_node(read)} (line {facts.program.line(read)}), which Keras 3 optimizers do not have"
    shaped = _integer_input_shape(facts)
    if shaped is not None:
        call, shape = shaped
        return (
            f"its {facts.program.module.code_for_node(call.func)}() is given the shape {facts.program.module.code_for_node(shape)}, "
            f"an integer (line {facts.program.line(call)}), which Keras 3 refuses (\"Cannot convert ... to a shape\")"
        )
    return None


# --- an integer for an input's shape --------------------------------------------------------------

_INPUTS = {"keras.Input": ("shape", 0), "keras.layers.Input": ("shape", 0), "keras.layers.InputLayer": ("input_shape", 0)}


def _integer_input_shape(facts) -> tuple[cst.Call, cst.BaseExpression] | None:
    """``keras.Input(shape=(784))`` (parentheses make no tuple), ``InputLayer(input_shape=n)``
    with ``n`` an integer: a number written, a name bound only to one, or a command-line flag
    declared ``type=int`` / ``DEFINE_integer``. Keras 2 takes it as ``(784,)``; Keras 3 raises
    ``ValueError: Cannot convert '784' to a shape.`` when the input is made (measured, Keras
    3.15.1 / tf_keras 2.21)."""
    from autofix.analysis.facts.sizes import Sizes

    sizes = Sizes.of(facts.program)
    for call, _owner in facts.calls:
        found = next((spec for name, spec in _INPUTS.items() if name in facts.names_of(call.func)), None)
        if found is None:
            continue
        keyword, position = found
        shape = argument_value(call, keyword, position)
        if shape is None and keyword == "input_shape":
            shape = argument_value(call, "shape")
        if shape is None or _version_guarded(facts, call):
            continue
        if isinstance(shape, cst.Integer) or isinstance(sizes.number(shape), int) and not isinstance(sizes.number(shape), bool) or _integer_flag(facts, shape):
            return call, shape
    return None


def _integer_flag(facts, expr: cst.BaseExpression) -> bool:
    """``args.n_hidden`` of ``parser.add_argument("--n_hidden", type=int, ...)``, or
    ``FLAGS.units`` of ``flags.DEFINE_integer("units", ...)``, declared in the file."""
    if not isinstance(expr, cst.Attribute):
        return False
    wanted = expr.attr.value
    for call, _owner in facts.calls:
        func = call.func
        if not isinstance(func, cst.Attribute) or not call.args:
            continue
        if func.attr.value == "DEFINE_integer":
            first = call.args[0].value
            if isinstance(first, cst.SimpleString) and first.evaluated_value == wanted:
                return True
            continue
        if func.attr.value != "add_argument":
            continue
        kind = argument_value(call, "type")
        if not (isinstance(kind, cst.Name) and kind.value == "int"):
            continue
        dest = argument_value(call, "dest")
        names = [dest.evaluated_value] if isinstance(dest, cst.SimpleString) else [
            a.value.evaluated_value.lstrip("-").replace("-", "_") for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)
        ]
        if wanted in names:
            return True
    return False


# --- save_format= -----------------------------------------------------------------------------


def _version_guarded(facts, node: cst.CSTNode) -> bool:
    """Whether ``node`` is in a branch of an ``if`` that tests a version (``if
    tf.__version__ < "2.16":``, ``if keras_version == 2:``): code written for both Kerases."""
    return any(isinstance(a, cst.If) and tests_a_version(facts, a.test) for a in facts.program.ancestors(node))


def _save_format_refused(facts, call: cst.Call) -> str | None:
    """``model.save_weights(path, save_format=...)``, ``model.save(path, save_format="tf")``
    (or ``save_model``) with a path not shown to end in ``.keras`` / ``.h5``: what it does."""
    func = call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    if method not in ("save", "save_weights", "save_model"):
        return None
    if method == "save_model" and not any(n.endswith("models.save_model") or n.endswith("saving.save_model") for n in facts.names_of(func)):
        return None
    if isinstance(func, cst.Attribute) and facts.is_module_reference(func.value) and method != "save_model":
        return None  # ``tf.saved_model.save``, ``np.save``: not a model's
    fmt = argument_value(call, "save_format")
    if fmt is None:
        return None
    if method == "save_weights":
        return "gives save_weights a save_format"
    if not (isinstance(fmt, cst.SimpleString) and fmt.evaluated_value in ("tf", "tensorflow")):
        return None
    path = argument_value(call, "filepath", 1 if method == "save_model" else 0)
    end = _literal_end(path) if path is not None else None
    if end is not None and end.endswith((".keras", ".h5")):
        return None
    return f"saves with save_format={fmt.value}"


# --- ModelCheckpoint --------------------------------------------------------------------------


def _checkpoint_refused(call: cst.Call) -> str | None:
    """The path of ``ModelCheckpoint(...)``, quoted, when Keras 3 refuses it whatever else holds."""
    path = argument_value(call, "filepath", 0)
    end = _literal_end(path) if path is not None else None
    if end is None:
        return None
    weights_only = argument_value(call, "save_weights_only", 4)
    weights = _literal_bool(weights_only) if weights_only is not None else False
    as_weights = end.endswith(".weights.h5")
    as_model = end.endswith((".keras", ".h5"))
    if weights is True and as_weights or weights is False and as_model or weights is None and (as_weights or as_model):
        return None
    return repr(end) if path is not None and isinstance(path, cst.SimpleString) else f"a path ending {end!r}"


def _literal_end(expr: cst.BaseExpression) -> str | None:
    """The last characters of a path the code spells out: a string, the literal tail of an
    f-string or of a concatenation, the last part of ``os.path.join(...)``; None when its end
    is not written (a variable, a call)."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expr, cst.ConcatenatedString):
        return _literal_end(expr.right)
    if isinstance(expr, cst.FormattedString):
        last = expr.parts[-1] if expr.parts else None
        if isinstance(last, cst.FormattedStringText) and "{" not in last.value and "\\" not in last.value:
            return last.value
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _literal_end(expr.right)
    if isinstance(expr, cst.Call) and attribute_path(expr.func) in (("os", "path", "join"), ("path", "join")) and expr.args:
        last = expr.args[-1]
        return _literal_end(last.value) if last.keyword is None and not last.star else None
    return None


def _literal_bool(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


# --- an optimizer's lr ------------------------------------------------------------------------


def _optimizer_lr_read(facts) -> cst.Attribute | None:
    """The first ``<optimizer>.lr`` the file reads unguarded (:func:`_an_optimizer`)."""
    index = facts.program.index
    for node in index.parents:
        if not (isinstance(node, cst.Attribute) and node.attr.value == "lr"):
            continue
        if not _an_optimizer(facts, node.value) or _stored(facts, node) or _guarded(facts, node):
            continue
        return node
    return None


def _an_optimizer(facts, expr: cst.BaseExpression) -> bool:
    """A Keras optimizer: a model's (``model.optimizer``, ``self.model.optimizer``: what holds
    it is named a model; ``cfg.optimizer.lr`` is a configuration's number), or a name every
    binding of which is an optimizer made here."""
    if isinstance(expr, cst.Attribute):
        path = attribute_path(expr)
        return expr.attr.value == "optimizer" and path is not None and len(path) >= 2 and "model" in path[-2].lower().split("_")
    if isinstance(expr, cst.Name):
        values = [facts.assigned_value(b) for b in facts.bindings(expr) or ()]
        return bool(values) and all(isinstance(v, cst.Call) and facts.call_kind(v) is Kind.OPTIMIZER for v in values)
    return False


def _stored(facts, node: cst.Attribute) -> bool:
    """``opt.lr = 0.1`` (or ``del opt.lr``): an attribute set, which Keras 3 takes."""
    parent = facts.program.index.parents.get(node)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node:
        return not isinstance(parent, cst.AugAssign)
    return isinstance(parent, cst.Del)


def _guarded(facts, node: cst.CSTNode) -> bool:
    """Inside ``hasattr``/``getattr``, the branch of an ``if hasattr(..., "lr")``, or a ``try``
    whose handlers catch ``AttributeError``."""
    parents = facts.program.index.parents
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(parent, cst.Call) and isinstance(parent.func, cst.Name) and parent.func.value in ("hasattr", "getattr"):
            return True
        if isinstance(parent, (cst.If, cst.IfExp)) and child is parent.body and _tests_for_lr(parent.test):
            return True
        if isinstance(parent, cst.Try) and child is parent.body:
            for handler in parent.handlers:
                caught = handler.type
                names = [e.value for e in caught.elements] if isinstance(caught, cst.Tuple) else [caught]
                if caught is None or any(isinstance(n, cst.Name) and n.value in _CATCHES_ATTRIBUTE_ERROR for n in names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def _tests_for_lr(test: cst.BaseExpression) -> bool:
    """Whether ``test`` asks ``hasattr(x, "lr")`` somewhere in it."""
    pending: list[cst.CSTNode] = [test]
    while pending:
        node = pending.pop()
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "hasattr":
            if any(isinstance(a.value, cst.SimpleString) and a.value.evaluated_value == "lr" for a in node.args):
                return True
        pending.extend(node.children)
    return False
