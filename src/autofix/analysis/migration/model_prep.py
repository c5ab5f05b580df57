"""What a single-device script leaves to Keras that a migration must spell out: fit's default
batch on in-memory arrays (written out, so that it becomes each replica's batch), and a model
wrapper Keras 3 cannot build under a strategy (marked built, or given the ``call()`` that builds
what it is compiled with, its optimizer built on what its ``train_step`` applies it to: see
:mod:`autofix.analysis.migration.wrapper_build`; or the file is refused)."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.arrays import Arrays
from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.refusal import Refusal
from autofix.analysis.migration.wrapper_build import compiled_with, fed_prediction, keras_compile, optimizer_model
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.analysis.training.model import TrainingModel
from autofix.analysis.training.multiworker import MultiWorker
from autofix.analysis.training.sites import Site
from autofix.tf.input_shapes import gives_input_shape
from autofix.tf.symbols import Kind


class ModelPrep(Derived):
    """Built once per program (``ModelPrep.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        # For each model marked built (by id of its construction): the attributes holding
        # layers it makes that hold no variables, marked built with it.
        self.weightless: dict[int, list[str]] = {}
        # Classes given a call() (by id): the class, and the model it holds whose prediction
        # its train_step hands its compiled metrics and loss (what the call returns); and the
        # constructions (by id) of those classes, which are not marked built.
        self.calls: dict[int, tuple[cst.ClassDef, str]] = {}
        self.called: set[int] = set()
        # For each class of a model marked built or called (by id): the statement of its own
        # compile() that calls Keras's, after which its optimizer is built, and the model it
        # holds whose trainable variables its train_step applies the optimizer to.
        self.optimizers: dict[int, tuple[cst.SimpleStatementLine, str]] = {}

    @cached_property
    def fits(self) -> list[Site]:
        return [site for site in self.training.sites if site.kind == "fit"]

    # --- fit on arrays with Keras's default batch ---------------------------------------------

    @cached_property
    def default_batches(self) -> list[cst.Call]:
        """``fit`` calls on in-memory arrays that leave the batch to Keras (32): the migration
        writes it out, so that it is kept as each replica's batch and the global batch is made
        from it (Keras 3 with ``steps_per_epoch`` alone splits the arrays instead: left as is)."""
        found = []
        for site in self.fits:
            call = site.call
            if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "fit":
                continue
            x = argument_value(call, "x", 0)
            if x is None or argument_value(call, "batch_size", 2) is not None or argument_value(call, "steps_per_epoch") is not None:
                continue
            if any(a.star for a in call.args) or not self._array_like(x):
                continue
            found.append(call)
        return found

    def _array_like(self, expr: cst.BaseExpression) -> bool:
        """An in-memory array (:mod:`autofix.analysis.facts.arrays`)."""
        return Arrays.of(self.program).is_array(expr)

    # --- models Keras 3 cannot build under a strategy -----------------------------------------

    @cached_property
    def unbuilt(self) -> tuple[list[cst.Call], list[Refusal]]:
        """Models that ``fit`` trains, made from a class of this file that has its own
        ``train_step`` but neither ``call`` nor ``build`` (a GAN or VAE wrapper around built
        models), and that nothing builds: under a strategy Keras 3 builds a model before
        ``fit`` by calling it, which such a model cannot do ("Unable to automatically build the
        model", measured on Keras 3.15; on one device it is not asked). Marking it built is
        right when every model it is given is built where it is made (a functional model, a
        Sequential that starts with its input); otherwise the file is not migrated."""
        marked: list[cst.Call] = []
        refused: list[Refusal] = []
        for site in self.fits:
            for member in site.members:
                cls = self.facts.local_definition(member.func)
                if not isinstance(cls, cst.ClassDef) or cls not in self.facts.keras_classes:
                    continue
                methods = _methods(self.facts, cls)
                if "train_step" not in methods or "call" in methods or "build" in methods or "__init__" not in methods:
                    continue  # (without an __init__ of its own it is made as keras.Model is: functional)
                if member in marked or self._built_later(member):
                    continue
                given = [m for arg in member.args for m in self.training.makers(arg.value) if self.training.is_model_maker(m)]
                own, weightless = self._own_layers(cls)
                unbuilt = [m for m in given if not self._built_where_made(m)] + own
                if unbuilt or not given or self.facts.assigned_name(member) is None:
                    refused.append(Refusal(member, (
                        f"{cls.name.value} has a train_step but no call(): under a strategy Keras 3 builds it before fit "
                        "by calling it, which fails, and not every model and layer it holds is known to be built; build it "
                        "yourself (or give it a call()), then migrate"
                    )))
                    continue
                compiled = compiled_with(self.facts, cls, member)
                if compiled is not None:
                    fed = fed_prediction(self.facts, cls)
                    if isinstance(fed, str):
                        what = "arguments it passes on (**kwargs)" if compiled in ("*", "**") else f"{compiled}="
                        refused.append(Refusal(member, (
                            f"{cls.name.value} has a train_step but no call(), and is compiled with {what}: under a strategy Keras 3 "
                            f"builds its compiled metrics and loss before fit by calling the model, which fails; {fed}, so the "
                            "call() that builds them as the original does is not known; give it a call() returning what train_step "
                            "hands them, then migrate"
                        )))
                        continue
                    self.calls[id(cls)] = (cls, fed.model)
                    self.called.add(id(member))
                marked.append(member)
                self.weightless[id(member)] = weightless
                if len(given) > 1:
                    # (Holding one model, its variables are the model's: Keras builds it on those.)
                    self._optimizer_built(cls)
        return marked, refused

    def _optimizer_built(self, cls: cst.ClassDef) -> None:
        """Keras 3 builds the optimizer of a model it builds under a strategy on all of the
        model's trainable variables (a distiller's teacher's too), where one device builds it on
        what the step applies it to: built on those in the class's own ``compile()``, right
        after Keras's (which runs in the scope), when they are one model the class holds."""
        if id(cls) in self.optimizers or not MultiWorker.of(self.program).keras.keras3:
            return
        model = optimizer_model(self.facts, cls)
        own = next((s for s in _body(cls) if isinstance(s, cst.FunctionDef) and s.name.value == "compile"), None)
        if model is None or own is None or not isinstance(own.body, cst.IndentedBlock):
            return
        calls = [c for c in nodes_in(own.body, cst.Call) if keras_compile(c)]
        built = [c for c in nodes_in(own.body, cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "build"]
        # (An optimizer set by the method itself after Keras's compile is another one.)
        set_here = [t for t in nodes_in(own.body, cst.AssignTarget) if isinstance(t.target, cst.Attribute) and t.target.attr.value == "optimizer"]
        if len(calls) != 1 or built or set_here:
            return
        statement = self.program.statement_of(calls[0])
        if not (
            any(statement is s for s in own.body.body)
            and isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and statement.body[0].value is calls[0]
        ):
            return
        self.optimizers[id(cls)] = (statement, model)

    def _own_layers(self, cls: cst.ClassDef) -> tuple[list[cst.Call], list[str]]:
        """Layers the class makes for itself (``self.dense = Dense(8)`` in ``__init__``):
        built only when called, so marking the model built would not build them, and Keras 3
        builds a model whose layers are not all built by calling it. Those that make no
        variables (``self.sampler = Sampler()``, a layer of this file that only computes) have
        nothing to build: marked built too, by the attribute they are kept in (the second
        list), the model can be."""
        found: list[cst.Call] = []
        weightless: list[str] = []
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for method in body:
            if not isinstance(method, cst.FunctionDef):
                continue
            for call in nodes_in(method.body, cst.Call):
                kind = self.facts.call_kind(call)
                local = self.facts.local_definition(call.func)
                if kind in (Kind.LAYER, Kind.MODEL) or isinstance(local, cst.ClassDef) and local in self.facts.keras_classes:
                    if self._built_where_made(call):
                        continue
                    attribute = _self_attribute(self.program, call) if method.name.value == "__init__" else None
                    if isinstance(local, cst.ClassDef) and attribute is not None and self._weightless(local):
                        weightless.append(attribute)
                    else:
                        found.append(call)
        return found, weightless

    def _weightless(self, cls: cst.ClassDef, depth: int = 0) -> bool:
        """A layer class of this file that makes no variables (``class Sampler(layers.Layer)``
        with only a ``call`` drawing noise): built or not, it has nothing to build. Its bases
        are Keras's ``Layer`` itself or such classes; it defines no ``build``, and nothing in
        it makes a layer, a model, a weight or a variable."""
        if depth > 4:
            return False
        for base in cls.bases:
            local = self.facts.local_definition(base.value)
            if isinstance(local, cst.ClassDef):
                if not self._weightless(local, depth + 1):
                    return False
            elif not any(n in ("keras.layers.Layer", "keras.Layer") or n.endswith(".keras.layers.Layer") for n in self.facts.names_of(base.value)):
                return False
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "build" for s in body):
            return False
        for call in nodes_in(cls.body, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("add_weight", "add_variable"):
                return False
            if "tensorflow.Variable" in self.facts.names_of(call.func) or self.facts.call_kind(call) in (Kind.LAYER, Kind.MODEL, Kind.LOAD):
                return False
            local = self.facts.local_definition(call.func)
            if isinstance(local, cst.ClassDef) or isinstance(local, cst.FunctionDef):
                return False  # what it makes is not looked into
        return True

    def _built_later(self, construction: cst.Call) -> bool:
        """Whether the script builds the object itself (``model.build(...)``, ``model(x)``)."""
        name = self.facts.assigned_name(construction)
        if name is None:
            return False
        for use in self.facts.uses(name):
            parent = self.program.parent(use)
            if isinstance(parent, cst.Call) and parent.func is use:
                return True
            if isinstance(parent, cst.Attribute) and parent.attr.value in ("build", "built"):
                return True
        return False

    def _built_where_made(self, call: cst.Call, depth: int = 0) -> bool:
        """A functional model (``keras.Model(inputs, outputs)``), or a Sequential whose first
        layer is its input (``keras.Input``, ``InputLayer``, ``input_shape=``); or what a local
        factory returns, when that is."""
        kind = self.facts.call_kind(call)
        if isinstance(kind, cst.FunctionDef) and depth < 4:
            made = [o.node for o in self.facts.values.returned(kind, call) if o.whole]
            return bool(made) and all(isinstance(m, cst.Call) and self._built_where_made(m, depth + 1) for m in made)
        names = self.facts.names_of(call.func)
        if any(n.endswith(("keras.Model", "keras.models.Model")) for n in names):
            return len(call.args) >= 2 or argument_value(call, "inputs") is not None
        if not any(n.endswith("Sequential") for n in names):
            return False
        layers = argument_value(call, "layers", 0)
        if not isinstance(layers, (cst.List, cst.Tuple)) or not layers.elements:
            return False
        first = layers.elements[0].value
        if not isinstance(first, cst.Call):
            return False
        return gives_input_shape(self.facts.names_of(first.func), first)


def _self_attribute(program: Program, call: cst.Call) -> str | None:
    """``sampler`` for ``self.sampler = Sampler()`` (the whole value of an assignment to one
    attribute of the method's ``self``)."""
    parent = program.parent(call)
    if not (isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1):
        return None
    target = parent.targets[0].target
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None


def _methods(facts: Facts, cls: cst.ClassDef) -> set[str]:
    """The methods a class of this file defines, with those of its bases in this file."""
    found: set[str] = set()
    seen: set[int] = set()
    pending = [cls]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        body = current.body.body if isinstance(current.body, cst.IndentedBlock) else ()
        found.update(s.name.value for s in body if isinstance(s, cst.FunctionDef))
        pending.extend(b for b in (facts.local_definition(base.value) for base in current.bases) if isinstance(b, cst.ClassDef))
    return found


def _body(cls: cst.ClassDef) -> tuple[cst.BaseStatement, ...]:
    return tuple(cls.body.body) if isinstance(cls.body, cst.IndentedBlock) else ()
