"""A model built the same way as a distributed one, kept on one device on purpose: the file
compares one device with several (a course notebook timing ``model_normal`` against
``model_distributed``), and the batch it gives both is the batch compared, a global batch.

A *twin* of a model trained under a strategy is a model the file makes outside every strategy
scope, trained by no strategy (nothing of it is made in a scope), built by the same code: the
same construction (``Sequential()``, ``create_model()``, ``Sequential([...])`` written alike)
and the same layers added to it (``.add(...)``, in order). Code is compared as Python reads
it (spacing and quotes aside). What the twin is fit with is kept: each of its ``fit`` calls and
the data and batch it gives.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value
from autofix.analysis.training.model import TrainingModel

_FITS = ("fit", "fit_generator")


@dataclass(frozen=True, eq=False)
class Twin:
    """A model made and kept on one device, built like a distributed one."""

    maker: cst.Call
    # Its ``fit`` calls (none: it is built, maybe compiled, and never trained here).
    fits: tuple[cst.Call, ...]


class Comparisons(Derived):
    """The single-device twins of the models trained under a strategy
    (``Comparisons.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        self.sizes = Sizes.of(program)

    def twins(self, fit: cst.Call) -> list[Twin]:
        """The twins of the models a distributed ``fit`` call trains."""
        site = self.training.distributed_site(fit)
        if site is None or site.kind != "fit" or not isinstance(fit.func, cst.Attribute):
            return []
        models = [m for m in self.training.makers(fit.func.value) if self.training.is_model_maker(m)]
        recipes = {self._recipe(m) for m in models}
        recipes.discard(None)
        if not recipes:
            return []
        return [twin for twin in self._plain if twin.maker not in models and self._recipe(twin.maker) in recipes]

    def same_batch(self, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
        """Whether two batch expressions give the same batch: the same number where the file
        shows it, or a read of the same name bound once."""
        number = self.sizes.number(a)
        if number is not None:
            return number == self.sizes.number(b)
        if isinstance(a, cst.Name) and isinstance(b, cst.Name) and a.value == b.value:
            ours, theirs = self.facts.bindings(a) or [], self.facts.bindings(b) or []
            return len(ours) == 1 and len(theirs) == 1 and ours[0] is theirs[0]
        return False

    @staticmethod
    def fit_batch(fit: cst.Call) -> cst.BaseExpression | None:
        """The ``batch_size`` a ``fit`` call is given, if any."""
        return argument_value(fit, "batch_size", 2)

    # --- the plain models ----------------------------------------------------------------------

    @cached_property
    def _plain(self) -> list[Twin]:
        """Every model the file makes and compiles or fits outside every strategy, trained by
        no strategy, with its ``fit`` calls."""
        fits: dict[int, list[cst.Call]] = {}
        makers: dict[int, cst.Call] = {}
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value not in ("compile", *_FITS):
                continue
            if self.facts.is_module_reference(func.value):
                continue
            made = [m for m in self.training.makers(func.value) if self.training.is_model_maker(m)]
            if len(made) != 1:
                continue  # (which model it is, is not one answer)
            maker = made[0]
            if not self._kept_on_one_device(maker) or self.training.distributed_site(call) is not None:
                continue
            makers[id(maker)] = maker
            if func.attr.value in _FITS:
                fits.setdefault(id(maker), []).append(call)
        return [Twin(maker, tuple(fits.get(key, ()))) for key, maker in makers.items()]

    def _kept_on_one_device(self, maker: cst.Call) -> bool:
        if self.facts.under_scope(maker) or self.training.made_under([maker]):
            return False
        return maker not in self.training.participants

    # --- how a model is built ------------------------------------------------------------------

    def _recipe(self, maker: cst.Call) -> tuple[str, ...] | None:
        """The code that builds the model ``maker`` makes, as Python reads it: the
        construction, then each layer ``add``-ed to it in order."""
        made = _normal(self.program.module.code_for_node(maker))
        if made is None:
            return None
        added = []
        for call, factory in self.training.method_calls_on([maker]):
            if factory is not None or not isinstance(call.func, cst.Attribute) or call.func.attr.value != "add":
                continue
            arguments = _normal("f(" + ", ".join(self._argument(a) for a in call.args) + ")")
            if arguments is None:
                return None
            added.append((self.program.position(call).start.line, self.program.position(call).start.column, arguments))
        return (made, *(code for _line, _column, code in sorted(added)))

    def _argument(self, arg: cst.Arg) -> str:
        keyword = f"{arg.keyword.value}=" if arg.keyword is not None else ""
        return f"{keyword}{arg.star}{self.program.module.code_for_node(arg.value)}"


def _normal(code: str) -> str | None:
    try:
        return ast.dump(ast.parse(code.strip(), mode="eval"))
    except SyntaxError:
        return None
