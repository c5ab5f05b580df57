"""Keras objects: what a call makes or does (a Keras kind, ``COMPILE``, ``BUILD``, ``TRAIN``, a local
function it calls), the file's Keras subclasses, the calls a statement makes, and which Keras
the file can run on. Part of :class:`~autofix.analysis.facts.script.Facts`."""

from __future__ import annotations

import os
from functools import cached_property

import libcst as cst

from autofix.analysis import environment
from autofix.analysis.project import pins
from autofix.analysis.facts.keras3_refusals import keras3_refusal
from autofix.analysis.facts.version_checks import stated_version, version_check
from autofix.analysis.project.imports import ProjectImports
from autofix.tf import symbols
from autofix.tf.keras2_only import REMOVED_METHODS, internal_keras2_class, keras2_only
from autofix.tf.symbols import Kind

# Keras's Sequential, which refuses a layer that is not a Keras 3 layer.
_SEQUENTIAL = frozenset({"keras.Sequential", "keras.models.Sequential"})

# What a call does, beyond the Keras kinds: compile a model, train it, call a local function.
COMPILE = "compile"
TRAIN = "train"
# ``optimizer.build(variables)``: makes an optimizer's variables (not a construction).
BUILD = "build"


class KerasObjects:
    """The Keras sections of :class:`~autofix.analysis.facts.script.Facts`."""

    # --- Keras objects -----------------------------------------------------------------------

    @cached_property
    def keras_classes(self) -> dict[cst.ClassDef, Kind]:
        """Classes of this module that subclass a Keras model or layer."""
        result: dict[cst.ClassDef, Kind] = {}
        changed = True
        while changed:
            changed = False
            for cls in self.classes:
                if cls in result:
                    continue
                kind = self._base_kind(cls, result)
                if kind is not None:
                    result[cls] = kind
                    changed = True
        return result

    def _base_kind(self, cls: cst.ClassDef, known: dict[cst.ClassDef, Kind]) -> Kind | None:
        kind = None
        for base in cls.bases:
            names = self.names_of(base.value)
            if any(symbols.is_model_base(n) for n in names):
                return Kind.MODEL
            if any(symbols.is_layer_base(n) for n in names):
                kind = Kind.LAYER
            local = self.local_definition(base.value)
            if isinstance(local, cst.ClassDef) and local in known:
                if known[local] is Kind.MODEL:
                    return Kind.MODEL
                kind = known[local]
        return kind

    def call_kind(self, call: cst.Call) -> Kind | str | cst.FunctionDef | None:
        """What a call does: a Keras :class:`Kind`, ``COMPILE``, ``TRAIN``, a local function
        it calls (a :class:`cst.FunctionDef`), or None."""
        memo = self._call_kinds
        if call not in memo:
            memo[call] = self._call_kind(call)
        return memo[call]

    def _run_here(self, call: cst.Call) -> bool:
        """Whether ``call`` is code this file runs: at its top level, or in functions it calls
        (not one another module may call, under a strategy scope the file cannot see: a
        ``train_setup(strategy)`` that the entry script calls in ``strategy.scope()``)."""
        function = self.program.outermost_function(call)
        if function is None:
            return not any(isinstance(a, cst.ClassDef) for a in self.program.ancestors(call))
        if self.functions.get(function) is None or self.functions[function].is_method:
            return False
        return bool(self.references(function))

    def _project_model(self, call: cst.Call) -> bool:
        """Whether ``call`` calls an imported function of the project that returns a Keras
        model, or a Keras model class of the project (:mod:`autofix.analysis.project`)."""
        imports = ProjectImports.of(self.program)
        resolved = imports.resolve(call.func)
        definition = resolved.definition if resolved is not None else None
        if definition is None:
            return False
        if definition.kind == "class":
            return definition.keras_model
        return imports.may_return_model(call, resolved)  # type: ignore[arg-type]

    def _call_kind(self, call: cst.Call) -> Kind | str | cst.FunctionDef | None:
        func = call.func
        names = self.names_of(func)
        for name in names:
            kind = symbols.keras_kind(name)
            if kind is not None:
                return kind
        if names and all(n.split(".", 1)[0] in symbols.NO_KERAS_OBJECTS for n in names):
            # ``np.zeros(...)``, ``tf.constant(...)``, ``os.path.join(...)``: libraries whose
            # calls make no Keras object, whatever is done with the result.
            return None
        local = self.local_definition(func)
        if isinstance(local, cst.ClassDef):
            kind = self.keras_classes.get(local)
            if kind is None and self._result_is_compiled(call):
                # A subclass of a model class from elsewhere (``tfrs.models.Model``): it is
                # compiled, so it is a Keras model.
                return Kind.MODEL
            return kind
        if isinstance(local, cst.FunctionDef):
            return local
        if local is None and self._project_model(call) and (self.program.migration is not None or self._run_here(call)):
            # ``model = build()`` with ``build`` a function of another module of the project
            # that returns a Keras model, or a Keras model class of one.
            return Kind.MODEL
        if self._result_is_compiled(call):
            # ``model = build_cnn()`` (imported) then ``model.compile(...)``: whatever built
            # it made a Keras model, with its variables.
            return Kind.MODEL
        if self.is_module_reference(func) and self._compiled_with(call):
            # ``model.compile(optimizer=get_optimizer("adam"))`` (imported): it made the
            # optimizer.
            return Kind.OPTIMIZER
        if isinstance(func, cst.Call):
            # ``layers.Dense(8)(x)``: calling a freshly made layer builds it.
            inner = self.call_kind(func)
            return Kind.LAYER if inner is Kind.LAYER else None
        if isinstance(func, cst.Name):
            return Kind.LAYER if self.is_layer_name(func) else None
        if not isinstance(func, cst.Attribute):
            return None
        attr = func.attr.value
        receiver = func.value
        if self.is_module_reference(receiver):
            return None
        if attr in symbols.COMPILE_METHODS and self._compiles_a_model(call):
            return COMPILE
        if attr in symbols.LOAD_METHODS:
            return Kind.LOAD
        if attr == "restore" and self._is_checkpoint(receiver):
            return Kind.LOAD
        if attr in symbols.TRAIN_METHODS or attr == "apply_gradients":
            return TRAIN
        if attr == "build" and (
            isinstance(receiver, cst.Name) and Kind.OPTIMIZER in self._value_kinds(receiver)
            or isinstance(receiver, cst.Attribute) and receiver.attr.value == "optimizer" and isinstance(receiver.value, cst.Name)
        ):
            # ``optimizer.build(model.trainable_variables)`` (or ``model.optimizer``, what compile
            # gave it): makes the optimizer's variables
            # (Keras 3 fails outside the scope of the strategy it was made under: "Need to be
            # inside `with strategy.scope()`").
            return BUILD
        if attr in ("run", "experimental_run_v2") and self.is_strategy_expr(receiver):
            return TRAIN
        return None

    def _result_is_compiled(self, call: cst.Call) -> bool:
        """Whether what ``call`` returns is compiled (or loaded into) as a Keras model is:
        the evidence that a call made elsewhere built a model. Not for a builtin's result
        (``str(args["model"])``), and not for a ``compile`` given models (a trainer's
        ``compile(gen_model=..., dis_model=...)``: Keras's compile never takes one)."""
        target = self.assigned_name(call)
        if target is None or any(n.startswith("builtins.") for n in self.names_of(call.func)):
            return False
        for use in self.uses(target):
            attribute = self.program.parent(use)
            if not (isinstance(attribute, cst.Attribute) and attribute.value is use):
                continue
            method = self.program.parent(attribute)
            if not (isinstance(method, cst.Call) and method.func is attribute):
                continue
            if attribute.attr.value in symbols.COMPILE_METHODS and method.args:
                if any(a.keyword is not None and "model" in _words(a.keyword.value) for a in method.args):
                    continue
                return True
            if attribute.attr.value in symbols.LOAD_METHODS:
                return True
        return False

    def _compiled_with(self, call: cst.Call) -> bool:
        """Whether what ``call`` returns is the ``optimizer`` a model is compiled with (given
        to ``compile`` directly, or through a name)."""
        target = self.assigned_name(call)
        places = [call] if target is None else [u for u in self.uses(target) if isinstance(u, cst.Name)]
        for place in places:
            arg = self.program.parent(place)
            holder = self.program.parent(arg) if isinstance(arg, cst.Arg) else None
            if not (isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and holder.func.attr.value in symbols.COMPILE_METHODS):
                continue
            positional = [a for a in holder.args if a.keyword is None and not a.star]
            if (arg.keyword is not None and arg.keyword.value == "optimizer") or (arg.keyword is None and positional[:1] == [arg]):  # type: ignore[union-attr]
                return True
        return False

    def _compiles_a_model(self, call: cst.Call) -> bool:
        keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
        if keywords & {"optimizer", "loss", "metrics", "loss_weights", "weighted_metrics",
                       "run_eagerly", "steps_per_execution", "jit_compile"}:
            return True
        receiver = call.func.value  # type: ignore[union-attr]
        return isinstance(receiver, cst.Name) and self.is_model_name(receiver)

    def _is_checkpoint(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return symbols.CHECKPOINT in self.names_of(expr.func)
        if isinstance(expr, cst.Name):
            nodes = self.bindings(expr)
            values = [self.assigned_value(n) for n in nodes or ()]
            return bool(values) and all(v is not None and self._is_checkpoint(v) for v in values)
        return False

    def _value_kinds(self, name: cst.Name) -> set:
        nodes = self.bindings(name)
        kinds = set()
        for node in nodes or ():
            value = self.assigned_value(node)
            if isinstance(value, cst.Call):
                kinds.add(self.call_kind(value))
        return kinds

    def is_layer_name(self, name: cst.Name) -> bool:
        kinds = self._value_kinds(name)
        return bool(kinds) and kinds <= {Kind.LAYER}

    def is_model_name(self, name: cst.Name) -> bool:
        kinds = self._value_kinds(name)
        return any(k in (Kind.MODEL, Kind.LOAD) or isinstance(k, cst.FunctionDef) for k in kinds)

    def calls_in(self, statement: cst.CSTNode) -> list[cst.Call]:
        """The calls made by running ``statement`` (not those inside functions, classes or
        lambdas it defines), in source order."""
        return self._calls_by_statement.get(statement, [])

    @cached_property
    def _calls_by_statement(self) -> dict[cst.CSTNode, list[cst.Call]]:
        found: dict[cst.CSTNode, list[cst.Call]] = {}
        parents = self.program.index.parents
        for call, owner in self.calls:
            node = parents.get(call)
            while node is not None and node is not owner:
                kind = type(node)
                # (Concrete types: isinstance on libcst's abstract bases is slow in this loop.)
                if kind in _STATEMENT_TYPES:
                    found.setdefault(node, []).append(call)
                if kind in _SCOPE_TYPES:
                    break
                node = parents.get(node)
        return found

    def names(self) -> set[str]:
        """Every name bound or read in the module."""
        index = self.program.index
        return {b.name for b in index.bindings.values()} | {a.name for a in index.accesses.values()}

    # --- which Keras the file can run on ------------------------------------------------------

    @cached_property
    def needs_keras2(self) -> str | None:
        """What makes the file unable to run on Keras 3 (TensorFlow 2.16 and later), if
        anything: a method Keras 3 or TensorFlow no longer has (``strategy.experimental_run_v2``,
        ``model.fit_generator``), an optimizer given ``lr=`` or a ``fit`` given ``workers=`` /
        ``use_multiprocessing=`` / ``max_queue_size=`` (Keras 3 rejects the arguments), or
        TensorFlow Addons (which needs Keras 2), a TensorFlow Hub layer put in a model (a
        tf_keras layer, which Keras 3 models refuse), or a notebook that installs a TensorFlow
        older than 2.16 (:mod:`autofix.analysis.environment`), or a file that checks its own
        TensorFlow for an older one (``assert tf.__version__.startswith("2.3")``:
        :mod:`.version_checks`), or that does what Keras 3 refuses at run time (reads an
        optimizer's ``lr``, saves with a ``ModelCheckpoint`` path Keras 3 rejects:
        :mod:`.keras3_refusals`), or whose repository pins Keras 2 outside it (a requirements file, a Dockerfile...: :mod:`autofix.analysis.project.pins`).
        Where a file can only run on
        Keras 2, what fails only on Keras 3 is not a bug of it."""
        pinned = environment.current().keras2
        if pinned is not None:
            return pinned
        for call, _owner in self.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in REMOVED_METHODS:
                return f"it calls {func.attr.value}() (line {self.program.line(call)}), which TensorFlow 2.16+ no longer has"
            if any(a.keyword is not None and a.keyword.value == "lr" for a in call.args) and self.call_kind(call) is Kind.OPTIMIZER:
                return f"its optimizer takes lr= (line {self.program.line(call)}), which Keras 3 rejects"
            removed = self._removed_keyword(call)
            if removed is not None:
                return f"its {func.attr.value}() takes {removed}= (line {self.program.line(call)}), which Keras 3 rejects"  # type: ignore[union-attr]
        for binding in self.program.index.bindings.values():
            if binding.kind == "import" and binding.path is not None and binding.path.split(".")[0] == "tensorflow_addons":
                return "it imports tensorflow_addons, which needs Keras 2"
        installed = self._installs_keras2()
        if installed is not None:
            return installed
        hub = self._hub_layer_in_a_model()
        if hub is not None:
            return f"it puts hub.KerasLayer (line {self.program.line(hub)}) in a Keras model, which only Keras 2 (tf_keras) takes"
        internal = self._internal_keras2_object()
        if internal is not None:
            call, name = internal
            return (
                f"it makes {name}() of tensorflow.python.keras (line {self.program.line(call)}), TensorFlow's "
                "internal Keras 2, whose objects Keras 3 refuses"
            )
        used = self._keras2_only_use()
        if used is not None:
            node, name = used
            return f"it uses {name} (line {self.program.line(node)}), which only TensorFlow 2.15 and older (Keras 2) has"
        refused = keras3_refusal(self)
        if refused is not None:
            return refused
        imported = ProjectImports.of(self.program).keras2_module()
        if imported is not None:
            line, path, where, what = imported
            shown = os.path.relpath(path, os.path.dirname(os.path.abspath(self.program.path))) if self.program.path else path
            return f"it imports {shown} (line {line}), whose line {where} {what}: one program runs one Keras, here Keras 2"
        check = version_check(self, self.program.module)
        if check is not None and check.keras == 2:
            package = "TensorFlow" if check.subject == "tensorflow" else "Keras"
            return f"it checks that it runs on an older {package} (line {self.program.line(check.node)}), whose Keras is Keras 2"
        stated = None if environment.current().notebook else stated_version(self.program.source)
        if stated is not None:
            line, package, version = stated
            return f"its header says it was made with {package} {version} (line {line}), whose Keras is Keras 2"
        # (A notebook that installs TensorFlow or Keras itself runs what it installs.)
        pin = pins.keras2_pin(self.program.path) if environment.current().installs is None else None
        if pin is not None:
            return pin.reason(self.program.path)
        return None

    # What Keras 2's fit, evaluate and predict take for their Python data feeders and Keras 3's
    # do not (measured on Keras 3.15: fit and predict raise "TypeError: TensorFlowTrainer.fit()
    # got an unexpected keyword argument 'workers'", evaluate "ValueError: Arguments not
    # recognized"; tf_keras 2.21 takes them).
    _REMOVED_KEYWORDS = ("workers", "use_multiprocessing", "max_queue_size")

    def _removed_keyword(self, call: cst.Call) -> str | None:
        """The keyword of ``model.fit(..., workers=4)`` (or evaluate / predict) that Keras 3
        no longer takes, if any."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("fit", "evaluate", "predict")) or self.call_kind(call) != TRAIN:
            return None
        return next((a.keyword.value for a in call.args if a.keyword is not None and a.keyword.value in self._REMOVED_KEYWORDS), None)

    def _hub_layer_in_a_model(self) -> cst.Call | None:
        """A ``hub.KerasLayer(...)`` (TensorFlow Hub) put in a Keras model: in the layers given
        to ``Sequential(...)``, to ``model.add(...)``, or called on a Keras tensor (the
        functional API); itself or through the name it is assigned to. (Given to a subclassed
        model, which calls it on real tensors, it was not measured: nothing is said.) Hub's layer is a tf_keras layer: Keras 3 refuses it
        (``Only instances of `keras.Layer` can be added to a Sequential model``, ``A KerasTensor
        cannot be used as input to a TensorFlow function``), so such a file runs on Keras 2."""
        index = self.program.index
        for call, _owner in self.calls:
            if not self.names_of(call.func) & symbols.HUB_KERAS_LAYERS:
                continue
            uses: list[cst.CSTNode] = [call]
            parent = index.parents.get(call)
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                binding = index.bindings.get(parent.targets[0].target)
                uses.extend(access.node for access in (binding.references if binding is not None else ()))
            if any(self._in_a_model(use) for use in uses):
                return call
        return None

    def _in_a_model(self, node: cst.CSTNode) -> bool:
        index = self.program.index
        parent = index.parents.get(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            # ``hub.KerasLayer(...)(x)`` of a Keras tensor: a layer of a functional model.
            return any(self._symbolic(arg.value) for arg in parent.args)
        child = node
        while parent is not None and not isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            if isinstance(parent, cst.Call) and child is not parent.func:
                func = parent.func
                if self.names_of(func) & _SEQUENTIAL or (isinstance(func, cst.Attribute) and func.attr.value == "add"):
                    return True
            child, parent = parent, index.parents.get(parent)
        return False

    def _symbolic(self, expr: cst.BaseExpression, _depth: int = 0) -> bool:
        """Whether ``expr`` is a Keras tensor of a functional model: ``keras.Input(...)``, what a
        layer returns when called (``Dense(4)(x)``), or a name bound to one of them."""
        if isinstance(expr, cst.Call):
            return bool(self.names_of(expr.func) & {"keras.Input", "keras.layers.Input"}) or isinstance(expr.func, cst.Call)
        if isinstance(expr, cst.Name) and _depth < 4:
            values = [self.assigned_value(b) for b in self.bindings(expr) or ()]
            return bool(values) and all(v is not None and self._symbolic(v, _depth + 1) for v in values)
        return False

    def _installs_keras2(self) -> str | None:
        """A ``pip install`` the file runs itself (``os.system``, ``subprocess``, an exported
        notebook's ``get_ipython().system``) that pins Keras 2 or a TensorFlow older than 2.16."""
        for call, _owner in self.calls:
            func = call.func
            names = self.names_of(func)
            if not (names & _RUNS_COMMANDS or (isinstance(func, cst.Attribute) and func.attr.value in ("system", "run_line_magic"))):
                continue
            words: list[str] = []
            for arg in call.args:
                values = arg.value.elements if isinstance(arg.value, (cst.List, cst.Tuple)) else [arg.value]
                for value in values:
                    value = value.value if isinstance(value, cst.BaseElement) else value
                    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                        words.append(value.evaluated_value)
            pinned = environment.keras2_pin(" ".join(words))
            if pinned is not None:
                return f"it installs {pinned} (line {self.program.line(call)}), whose Keras is Keras 2"
        return None

    def _internal_keras2_object(self) -> tuple[cst.Call, str] | None:
        """The first object the file makes from ``tensorflow.python.keras`` (an optimizer of
        ``optimizer_v2``, a layer, a model: a class, by its capitalised name), with the class's
        name. TensorFlow 2.21 still ships that internal copy of Keras 2, but Keras 3 refuses what
        it makes (measured: ``compile`` raises "Could not interpret optimizer identifier", a
        ``Sequential`` "Only instances of `keras.Layer` can be added"), so such a file runs on
        Keras 2. Its functions (``backend.clear_session``) say nothing."""
        for call, _owner in self.calls:
            for name in self.program.index.qualified_names(call.func):
                made = internal_keras2_class(name)
                if made is not None:
                    return call, made
        return None

    def _keras2_only_use(self) -> tuple[cst.CSTNode, str] | None:
        """The first use of a Keras name that Keras 3 does not have
        (``tf.keras.mixed_precision.experimental.set_policy``), with that name."""
        index = self.program.index
        for node, access in index.accesses.items():
            if not any(b.kind == "import" and b.path and b.path.split(".")[0] in _KERAS_ROOTS for b in access.referents):
                continue
            top: cst.CSTNode = node
            while True:
                parent = index.parents.get(top)
                if not (isinstance(parent, cst.Attribute) and parent.value is top):
                    break
                top = parent
            for name in self.names_of(top):
                if name.startswith("keras.") and keras2_only(name):
                    return top, name
        return None


_KERAS_ROOTS = frozenset({"tensorflow", "keras", "tf_keras"})
# Calls that run a shell command given as a string or a list of words.
_RUNS_COMMANDS = frozenset(
    {"os.system", "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen"}
)


def _words(identifier: str) -> set[str]:
    """``gen_model`` -> {"gen", "model"}."""
    return {w for w in identifier.lower().split("_") if w}


def _subclasses(base: type) -> frozenset[type]:
    found: set[type] = set()
    pending = [base]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return frozenset(found)


_STATEMENT_TYPES = _subclasses(cst.BaseStatement) | _subclasses(cst.BaseSmallStatement)
_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
