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
  Keras 2 takes ``(784,)``;
- ``model.save_weights(path)`` with a path whose end the code writes and that does not end in
  ``.weights.h5`` (``"ckpt"``, ``"w.h5"``, ``"w.ckpt"``): ``ValueError: The filename must end in
  `.weights.h5```, where tf_keras writes a TensorFlow checkpoint (or HDF5) there;
- a ``keras.Model`` subclass, constructed by the file, whose ``__init__`` calls
  ``super().__init__(self)``: ``TypeError: Layer.__init__() takes 1 positional argument but 2
  were given``, where tf_keras takes it (a ``Layer`` subclass doing so fails on both: it says
  nothing);
- an import, at the top level of the file (not in a ``try``, a branch or a function), of a
  Keras module or name that Keras 3 does not have, under ``keras`` or ``tensorflow.keras``
  (``from keras.utils.vis_utils import plot_model``: ``ModuleNotFoundError``; ``from
  tensorflow.keras.layers.experimental import preprocessing``): the file stops there on Keras 3.
  What Keras 3 has is the table :mod:`autofix.tf.keras3_api`, measured; Keras 3 keeps
  ``tensorflow.keras.preprocessing.image.ImageDataGenerator`` and the other legacy names of its
  ``tf.keras``, so they say nothing. A name only used as an attribute
  (``tf.keras.layers.experimental.preprocessing.Rescaling``) says nothing either: files written
  for Keras 3 keep such remnants in code that may not run (docs/keras-versions.md).

A read guarded where it would fail (``hasattr(opt, "lr")``, ``getattr(opt, "lr", None)``, a
``try`` that catches ``AttributeError``) and a path whose end the code does not show say nothing.
"""

from __future__ import annotations

import re

import libcst as cst

from autofix.analysis.facts.flags import Flags
from autofix.analysis.facts.version_checks import tests_a_version
from autofix.analysis.syntax import argument_value, attribute_path, nodes_in
from autofix.tf import keras3_api
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
    for call, _owner in facts.calls:
        refused = _save_weights_refused(facts, call)
        if refused is not None:
            return f"it saves weights to {refused} (line {facts.program.line(call)}), which Keras 3 refuses (it must end in .weights.h5)"
    given_self = _model_init_given_self(facts)
    if given_self is not None:
        call, name = given_self
        return (
            f"its model class {name} calls super().__init__(self) (line {facts.program.line(call)}), which Keras 3 "
            "refuses (\"Layer.__init__() takes 1 positional argument but 2 were given\")"
        )
    unimportable = _unimportable_import(facts)
    if unimportable is not None:
        node, name = unimportable
        return f"it imports {name} (line {facts.program.line(node)}), which Keras 3 does not have"
    shaped = _integer_input_shape(facts)
    if shaped is not None:
        call, shape = shaped
        return (
            f"its {facts.program.module.code_for_node(call.func)}() is given the shape {facts.program.module.code_for_node(shape)}, "
            f"an integer (line {facts.program.line(call)}), which Keras 3 refuses (\"Cannot convert ... to a shape\")"
        )
    return None


# --- save_weights to a path Keras 3 refuses --------------------------------------------------


def _save_weights_refused(facts, call: cst.Call) -> str | None:
    """The path a model's ``save_weights(path)`` is given, quoted, when its end is written and is
    not ``.weights.h5``; None otherwise (and where a version test guards it)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "save_weights"):
        return None
    if argument_value(call, "save_format") is not None:
        return None  # said by _save_format_refused
    receiver = func.value
    if isinstance(receiver, cst.Name):
        if not facts.is_model_name(receiver):
            return None
    else:
        path = attribute_path(receiver)
        if path is None or len(path) < 2 or "model" not in path[-1].lower().split("_"):
            return None
    path_expr = argument_value(call, "filepath", 0)
    end = _literal_end(path_expr) if path_expr is not None else None
    if end is None or not end.cannot_end(".weights.h5") or _version_guarded(facts, call):
        return None
    return str(end)


# --- super().__init__(self) in a model class ------------------------------------------------


def _model_init_given_self(facts) -> tuple[cst.Call, str] | None:
    """``super().__init__(self)`` (or ``super(C, self).__init__(self, ...)``) in the ``__init__`` of
    a ``keras.Model`` subclass that the file constructs: the call and the class's name."""
    constructed = {c.func.value for c, _owner in facts.calls if isinstance(c.func, cst.Name)}
    for node in facts.program.index.parents:
        if not isinstance(node, cst.ClassDef) or node.name.value not in constructed:
            continue
        if not any(facts.names_of(b.value) & _MODEL_CLASSES for b in node.bases):
            continue
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if not (isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__"):
                continue
            params = statement.params.params
            if not params:
                continue
            this = params[0].name.value
            for call in nodes_in(statement, cst.Call):
                func = call.func
                if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
                    continue
                if not (isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"):
                    continue
                first = call.args[0] if call.args else None
                if first is not None and first.keyword is None and not first.star and isinstance(first.value, cst.Name) and first.value.value == this:
                    return call, node.name.value
    return None


_MODEL_CLASSES = frozenset({"keras.Model", "keras.models.Model"})


# --- an import Keras 3 cannot make -------------------------------------------------------------


def _unimportable_import(facts) -> tuple[cst.CSTNode, str] | None:
    """The first top-level import of a Keras module or name Keras 3 lacks, with its dotted name."""
    for statement in facts.program.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            for name in _imported_names(small):
                if not keras3_importable(name):
                    return small, name
    return None


def _imported_names(small: cst.BaseSmallStatement) -> list[str]:
    """What an import statement names, dotted: ``import a.b`` -> ``a.b``; ``from a import b, c``
    -> ``a.b``, ``a.c``; ``from a import *`` -> ``a``. Relative imports name nothing here."""
    if isinstance(small, cst.Import):
        return [_dotted(alias.name) for alias in small.names]
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        module = _dotted(small.module)
        if isinstance(small.names, cst.ImportStar):
            return [module]
        return [f"{module}.{_dotted(alias.name)}" for alias in small.names]
    return []


def _dotted(expr: cst.BaseExpression) -> str:
    return ".".join(attribute_path(expr) or ())


def keras3_importable(name: str) -> bool:
    """Whether Keras 3 can import ``name`` (``keras.layers.Dense``, ``tensorflow.keras.utils``);
    True for anything that is not a public Keras path (``numpy``, ``keras.src.engine``,
    ``tensorflow.python.keras``, which TensorFlow still ships)."""
    parts = name.split(".")
    if parts[:2] == ["tensorflow", "keras"]:
        parts = parts[2:]
    elif parts[:1] == ["keras"]:
        parts = parts[1:]
    else:
        return True
    if any(p in ("src", "api") or p.startswith("_") for p in parts):
        return True
    if ".".join(parts) in keras3_api.MODULES:
        return True
    module, last = ".".join(parts[:-1]), parts[-1]
    return module in keras3_api.MODULES and last in keras3_api.MODULES[module]


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
    flag = Flags.of(facts.program).get(expr.attr.value)
    return flag is not None and flag.integer


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
    if end is not None and end.ends(".keras", ".h5"):
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
    if weights is True and end.cannot_end(".weights.h5"):
        return str(end)
    if weights is False and end.cannot_end(".keras", ".h5"):
        return str(end)
    if weights is None and end.cannot_end(".weights.h5", ".keras", ".h5"):
        return str(end)
    return None


class _End:
    """The written end of a path: ``tail``, its last characters, and whether the whole path is
    written (``complete``) or only its end, after a value the code does not show
    (``f"{name}.h5"``, ``"%s_train.h5" % name``, ``os.path.join(d, "w.h5")``)."""

    def __init__(self, tail: str, complete: bool) -> None:
        self.tail = tail
        self.complete = complete

    def ends(self, *suffixes: str) -> bool:
        """The path surely ends in one of ``suffixes``."""
        return self.tail.endswith(suffixes)

    def cannot_end(self, *suffixes: str) -> bool:
        """The path surely ends in none of ``suffixes``: what comes before the written tail
        cannot complete one (``"{name}.h5"`` may be ``"w.weights.h5"``, ``"{name}_train.h5"``
        may not)."""
        return not any(self.tail.endswith(s) or not self.complete and s.endswith(self.tail) for s in suffixes)

    def __str__(self) -> str:
        return repr(self.tail) if self.complete else f"a path ending {self.tail.lstrip('/')!r}"


# ``%s``, ``%05d``, ``%(name)s``: a printf conversion; ``{}``, ``{0:.2f}``: a format field.
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
_FIELD = re.compile(r"\{[^{}]*\}")


def _literal_end(expr: cst.BaseExpression) -> _End | None:
    """The end of a path the code spells out: a string, the literal tail of an f-string, of a
    ``%`` or ``.format`` template, of a concatenation, the last part of ``os.path.join(...)``;
    None when its end is not written (a variable, a call) or is empty."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return _End(value, True) if isinstance(value, str) and value else None
    if isinstance(expr, cst.ConcatenatedString):
        return _literal_end(expr.right)
    if isinstance(expr, cst.FormattedString):
        last = expr.parts[-1] if expr.parts else None
        if isinstance(last, cst.FormattedStringText) and "{" not in last.value and "\\" not in last.value and last.value:
            return _End(last.value, len(expr.parts) == 1)
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        end = _literal_end(expr.right)
        return _End(end.tail, False) if end is not None else None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return _template_end(expr.left, _PRINTF)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format":
        return _template_end(expr.func.value, _FIELD)
    if isinstance(expr, cst.Call) and attribute_path(expr.func) in (("os", "path", "join"), ("path", "join")) and expr.args:
        last = expr.args[-1]
        if last.keyword is not None or last.star:
            return None
        end = _literal_end(last.value)
        if end is None or len(expr.args) == 1:
            return end
        # A part joined after others follows a separator.
        return _End(("/" if end.complete else "") + end.tail, False)
    return None


def _template_end(template: cst.BaseExpression, placeholder: re.Pattern) -> _End | None:
    """The literal end of a ``%`` or ``.format`` template: what follows its last placeholder."""
    if not isinstance(template, cst.SimpleString):
        return None
    value = template.evaluated_value
    if not isinstance(value, str):
        return None
    fields = list(placeholder.finditer(value))
    tail = value[fields[-1].end():] if fields else value
    if not tail or "%" in tail or "{" in tail:
        return None
    return _End(tail, not fields)


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
