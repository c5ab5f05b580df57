"""What a single-device script leaves to Keras that a migration must spell out: fit's default
batch on in-memory arrays (written out, so that it becomes each replica's batch), and a model
wrapper Keras 3 cannot build under a strategy (marked built, or the file is refused)."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts import Facts
from autofix.analysis.migration import Refusal
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, nodes_in
from autofix.analysis.training import Site, TrainingModel
from autofix.tf.symbols import Kind


class ModelPrep(Derived):
    """Built once per program (``ModelPrep.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)

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
            if x is None or argument_value(call, "batch_size") is not None or argument_value(call, "steps_per_epoch") is not None:
                continue
            if any(a.star for a in call.args) or not self._array_like(x):
                continue
            found.append(call)
        return found

    def _array_like(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """An in-memory array: made by NumPy or a ``keras.datasets`` loader (followed through
        names, tuple items, arithmetic, subscripts and array methods)."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if any(n.startswith(("numpy.", "keras.datasets.")) or n == "keras.utils.to_categorical" for n in names):
                return True
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("astype", "reshape", "copy", "squeeze"):
                return self._array_like(expr.func.value, depth + 1)
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "load_data":
                # ``mnist = tf.keras.datasets.mnist; mnist.load_data()``
                receivers = [o.node for o in self.facts.values.origins(expr.func.value) if o.whole]
                return bool(receivers) and all(
                    any(n.startswith("keras.datasets.") for n in self.facts.names_of(r)) for r in receivers if isinstance(r, cst.BaseExpression)
                )
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self._array_like(expr.left, depth + 1) or self._array_like(expr.right, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._array_like(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            origins = self.facts.values.origins(expr)
            return bool(origins) and all(
                isinstance(o.node, cst.BaseExpression) and o.node is not expr and self._array_like(o.node, depth + 1) for o in origins
            )
        return False

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
                unbuilt = [m for m in given if not self._built_where_made(m)] + self._own_layers(cls)
                if unbuilt or not given or self.facts.assigned_name(member) is None:
                    refused.append(Refusal(member, (
                        f"{cls.name.value} has a train_step but no call(): under a strategy Keras 3 builds it before fit "
                        "by calling it, which fails, and not every model and layer it holds is known to be built; build it "
                        "yourself (or give it a call()), then migrate"
                    )))
                    continue
                marked.append(member)
        return marked, refused

    def _own_layers(self, cls: cst.ClassDef) -> list[cst.Call]:
        """Layers the class makes for itself (``self.sampler = Sampler()`` in ``__init__``):
        built only when called, so marking the model built would not build them."""
        found = []
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for method in body:
            if not isinstance(method, cst.FunctionDef):
                continue
            for call in nodes_in(method.body, cst.Call):
                kind = self.facts.call_kind(call)
                local = self.facts.local_definition(call.func)
                if kind in (Kind.LAYER, Kind.MODEL) or isinstance(local, cst.ClassDef) and local in self.facts.keras_classes:
                    if not self._built_where_made(call):
                        found.append(call)
        return found

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
        first_names = self.facts.names_of(first.func)
        return any(n.endswith(("Input", "InputLayer")) for n in first_names) or any(
            a.keyword is not None and a.keyword.value in ("input_shape", "input_dim", "batch_input_shape") for a in first.args
        )


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
