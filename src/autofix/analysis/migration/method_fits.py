"""A class of another module of the project (not a Keras model) whose method fits a Keras
model the class builds in another method, called from the migrated file (a fix that spans
files):

    # train.py                              # classes/Model.py
    m = Model()                             class Model:
    m.create_model()                            def create_model(self):
    m.train_network(x, y, xv, yv)                   self.model = keras.Sequential([...])
                                                    self.model.compile(...)
                                                def train_network(self, x, y, xv, yv):
                                                    self.model.fit(x, y, validation_data=(xv, yv))

The migrated file makes the strategy, calls the method that builds the model (and the
construction, when ``__init__`` makes it) in ``strategy.scope()``, and passes the global batch
to the training method: ``m.train_network(..., batch_size=32 * strategy.num_replicas_in_sync)``.
The other module's method gets a keyword parameter ``batch_size=None`` handed to its ``fit``
(None is Keras's default: any other caller keeps its behaviour), or ``batch_size=<B>`` when its
``fit`` had the literal batch ``B``; a ``fit`` whose batch is already a parameter of the method is
left as it is, and the migrated file passes that parameter scaled.

Refused at the call, naming the other module's line, when it cannot be shown right: a ``fit``
on a dataset or generator (no ``y``: the batch is fixed where the data is made), a batch that is
neither a number nor a parameter of the method, a model the training method itself compiles or
builds, the method called more than once, a construction or builder call that is not a
statement of the block the strategy is made in. What is found here is only the plan; the
other module's text is made by :func:`autofix.codemods._companions.method_with_batch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports, Resolved, program_of
from autofix.analysis.syntax import argument, nodes_in

# What Keras batches arrays by when fit is not told.
DEFAULT_BATCH = 32
PARAMETER = "batch_size"
VALIDATION = "validation_batch_size"


def _operand(program: Program, value: cst.BaseExpression) -> str:
    code = program.module.code_for_node(value)
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Integer, cst.Subscript, cst.Call)):
        code = f"({code})"
    return code


@dataclass(eq=False)
class MethodFit:
    """The migration of one training method's call (``m.train_network(...)``)."""

    call: cst.Call
    # The calls of this file that make the model (the builder methods, the construction when
    # ``__init__`` makes it): their statements go into the scope.
    builders: list[cst.Call]
    construction: cst.Call
    path: str
    other: Program
    method: cst.FunctionDef
    fit: cst.Call
    # The keyword the call passes the global batch as, and the per-replica batch it scales
    # (code); ``existing``: the call already passes it (that argument's value is scaled).
    keyword: str
    batch: str
    existing: cst.Arg | None = None
    # The parameters the other module's method is given, each handed to its fit under the same
    # keyword: (name, default code); empty when the other module is left as it is.
    added: list[tuple[str, str]] = field(default_factory=list)
    # The validation arrays' size, read again at run time where the call is (``len(x_test)``),
    # when the fit validates on arrays: the call passes ``validation_batch_size`` too.
    validation: str | None = None
    validation_keyword: str = VALIDATION
    cls: str = ""

    @property
    def edit(self) -> bool:
        return bool(self.added)


class MethodFits(Derived):
    """The training methods of other modules' classes this file calls: migrated in both files
    (``found``), or refused with why (``refusals``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.imports = ProjectImports.of(program)

    @cached_property
    def _analysed(self) -> tuple[list[MethodFit], list[tuple[cst.CSTNode, str]], set[int]]:
        found: list[MethodFit] = []
        refused: list[tuple[cst.CSTNode, str]] = []
        objects: set[int] = set()
        if not self.imports.active:
            return found, refused, objects
        by_object: dict[int, list[tuple[cst.Call, cst.Call, Resolved, str]]] = {}
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or self.facts.is_module_reference(func.value):
                continue
            for origin in self.facts.values.origins(func.value, enter=False):
                made = origin.node
                if not isinstance(made, cst.Call):
                    continue
                resolved = self.imports.resolve(made.func)
                definition = resolved.definition if resolved is not None else None
                if definition is None or definition.kind != "class" or definition.keras_model or resolved.path is None:
                    break
                by_object.setdefault(id(made), []).append((call, made, resolved, func.attr.value))
                break
        for key, calls in by_object.items():
            _call, made, resolved, _name = calls[0]
            training = {m[0]: m for m in resolved.definition.training_methods}
            trained = [(c, n) for c, _m, _r, n in calls if n in training]
            if not trained:
                continue
            plan = self._plan(made, resolved, calls, trained)
            objects.add(key)
            if isinstance(plan, MethodFit):
                found.append(plan)
            else:
                refused.append((trained[0][0], plan))
        return found, refused, objects

    @property
    def found(self) -> list[MethodFit]:
        return self._analysed[0]

    @property
    def refusals(self) -> list[tuple[cst.CSTNode, str]]:
        return self._analysed[1]

    def handles(self, made: cst.Call) -> bool:
        """Whether the object ``made`` makes is judged here (migrated or refused)."""
        return id(made) in self._analysed[2]

    def _plan(self, made: cst.Call, resolved: Resolved, calls, trained) -> MethodFit | str:
        definition = resolved.definition
        assert definition is not None and resolved.path is not None
        name = self.program.module.code_for_node(trained[0][0].func)
        call, method_name = trained[0]
        other = program_of(resolved.path)
        if other is None:
            return f"{resolved.where(self.imports.path)} cannot be read"
        cls = next((s for s in other.module.body if isinstance(s, cst.ClassDef) and s.name.value == definition.name), None)
        methods = {m.name.value: m for m in (cls.body.body if cls is not None and isinstance(cls.body, cst.IndentedBlock) else ()) if isinstance(m, cst.FunctionDef)}
        method = methods.get(method_name)
        if method is None:
            return f"{method_name} is not a method of {definition.name} autofix can read"
        where = resolved.where(self.imports.path, other.line(method))
        why = next(m[2] for m in definition.training_methods if m[0] == method_name)
        prefix = f"{name}() trains in {where} ({definition.name}.{method_name}: {why})"
        if len(trained) != 1:
            lines = ", ".join(str(self.program.line(c)) for c, _n in trained)
            return f"{prefix}, and the object is trained on lines {lines}: autofix migrates one training call of it, not several: migrate it by hand"
        found_fit = _one_fit(other, method, prefix)
        if isinstance(found_fit, str):
            return found_fit
        fit, attr = found_fit
        fit_line = other.line(fit)
        params = method.params
        if params.star_kwarg is not None or not isinstance(params.star_arg, cst.MaybeSentinel) or params.kwonly_params or params.posonly_params:
            return f"{prefix}: its parameters (*args, **options or keyword-only ones) are not followed: migrate it by hand"
        names = [p.name.value for p in params.params]
        builders = self._builders(made, resolved, calls, call, other, methods, method_name, attr, fit_line, prefix)
        if isinstance(builders, str):
            return builders
        # What else keeps the class from being migrated so (its one fit is what this follows).
        problems = [reason for line, reason in definition.problems if line != fit_line]
        if problems:
            return f"{prefix}: " + "; ".join(problems[:3]) + ": migrate it by hand"
        if any(a.star for a in call.args):
            return f"{prefix}: it is called with unpacked arguments (line {self.program.line(call)}): migrate it by hand"
        keywords = {id(a.keyword) for a in nodes_in(method.body, cst.Arg) if a.keyword is not None}
        taken = set(names) | {n.value for n in nodes_in(method.body, cst.Name) if id(n) not in keywords}
        validation = self._validation(call, method, fit, names, prefix)
        validation_keyword = VALIDATION
        if isinstance(validation, tuple) and len(validation) == 1:
            return validation[0]
        added: list[tuple[str, str]] = []
        if isinstance(validation, tuple):
            validation, validation_keyword = validation  # the method's parameter already
        elif validation is not None:
            if VALIDATION in taken:
                return f"{prefix}: the name {VALIDATION} is taken in it: migrate it by hand"
            added.append((VALIDATION, "None"))
        plan = dict(call=call, builders=builders, construction=made, path=resolved.path, other=other, method=method, fit=fit, cls=definition.name, validation=validation, validation_keyword=validation_keyword)
        return self._with_batch(plan, call, method, fit, names, taken, added, prefix)

    def _builders(self, made, resolved: Resolved, calls, call: cst.Call, other: Program, methods: dict, method_name: str, attr: str, fit_line: int, prefix: str) -> list[cst.Call] | str:
        """The calls of this file that make or compile the model the training method fits
        (``self.<attr>``), which go into the scope: the construction when ``__init__`` does it,
        and calls of the other methods that do, each before the training; or why not. What
        the training method itself makes or compiles would stay outside the scope: refused."""
        definition = resolved.definition
        for node in nodes_in(methods[method_name].body, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "compile":
                return f"{prefix}: it compiles the model too (line {other.line(node)}), which would then be outside strategy.scope(): migrate it by hand"
        making = {n for n, m in methods.items() if _assigns(m, attr, real=True) or _compiles(m, attr)}
        reach = {n: _reached(methods, n) for n in methods}
        inside = sorted(reach[method_name] & making)
        if inside:
            line = other.line(methods[inside[0]]) if inside[0] != method_name else fit_line
            return (
                f"{prefix}: it makes or compiles the model it fits (self.{attr}, {definition.name}.{inside[0]}, line {line}) "
                "itself, which would then be outside strategy.scope(): migrate it by hand"
            )
        if not making:
            return f"{prefix}: the model it fits (self.{attr}) is made nowhere in the class autofix can see: migrate it by hand"
        builders: list[cst.Call] = []
        covered: set[str] = set()
        if "__init__" in methods and reach["__init__"] & making:
            builders.append(made)
            covered |= reach["__init__"]
        for builder, _m, _r, name_called in calls:
            if name_called in methods and name_called != method_name and reach[name_called] & making:
                if self.program.line(builder) > self.program.line(call):
                    return f"{prefix}: the model it fits is made or compiled by {name_called}() after the training (line {self.program.line(builder)}): migrate it by hand"
                builders.append(builder)
                covered |= reach[name_called]
        missing = sorted(making - covered)
        if missing:
            return (
                f"{prefix}: the model it fits is made or compiled by {definition.name}.{missing[0]} "
                f"({resolved.where(self.imports.path, other.line(methods[missing[0]]))}), which this file does not call on the object: migrate it by hand"
            )
        return builders

    def _with_batch(self, plan: dict, call: cst.Call, method: cst.FunctionDef, fit: cst.Call, names: list[str], taken: set[str], added: list, prefix: str) -> MethodFit | str:
        """The plan with the batch the call passes: a parameter added for a fit given none (or a
        number, its default), the method's own batch parameter scaled where the call passes it
        or from its default; or why the batch cannot be shown per replica."""
        fit_line, params = plan["other"].line(fit), method.params
        method_name = method.name.value
        batch = argument(fit, "batch_size", 2)
        written_none = batch is not None and isinstance(batch.value, cst.Name) and batch.value.value == "None"
        if batch is None or batch.keyword is not None and (isinstance(batch.value, cst.Integer) or written_none):
            if PARAMETER in taken:
                return f"{prefix}: the name {PARAMETER} is taken in it: migrate it by hand"
            literal = batch.value.value if batch is not None and not written_none else None  # type: ignore[union-attr]
            return MethodFit(keyword=PARAMETER, batch=literal or str(DEFAULT_BATCH), added=[(PARAMETER, literal or "None"), *added], **plan)
        if batch.keyword is None:
            return f"{prefix}: its fit (line {fit_line}) is given its batch by position: migrate it by hand"
        value = batch.value
        if isinstance(value, cst.Name) and value.value in names[1:] and not _assigns_name(method, value.value):
            param = next(p for p in params.params if p.name.value == value.value)
            passed = argument(call, value.value, names.index(value.value) - 1)
            if passed is not None:
                return MethodFit(keyword=value.value, batch=_operand(self.program, passed.value), existing=passed, added=added, **plan)
            default = param.default
            if isinstance(default, cst.Integer):
                return MethodFit(keyword=value.value, batch=default.value, added=added, **plan)
            if isinstance(default, cst.Name) and default.value == "None":
                return MethodFit(keyword=value.value, batch=str(DEFAULT_BATCH), added=added, **plan)
            return f"{prefix}: its fit's batch is its parameter {value.value}, whose default is not a number, and the call does not pass it: migrate it by hand"
        return (
            f"{prefix}: its fit (line {fit_line}) is given a batch that is neither a number nor a parameter of "
            f"{method_name}, which the migration cannot show per replica: migrate it by hand"
        )

    def _validation(self, call: cst.Call, method: cst.FunctionDef, fit: cst.Call, names: list[str], prefix: str):
        """The size of the arrays the fit validates on, as the call can read it again
        (``len(x_test)``; with the method's parameter its fit takes its validation batch from,
        when it has one: (size, name)), None when it does not validate, or (why,) when it
        cannot be shown.
        As a fit of the file itself (``first_batches``): its validation set gets a batch of its
        own, ``min(<global batch>, <its size> // N * N)``, whose first batch splits evenly over
        the replicas (Keras 3 fails on one that does not)."""
        line = self.program.line(call)
        for keyword in ("validation_split", "validation_steps"):
            if argument(fit, keyword) is not None:
                return (f"{prefix}: its fit is given {keyword}, which the migration does not follow through a method: migrate it by hand",)
        given = argument(fit, VALIDATION)
        if given is not None and not (
            isinstance(given.value, cst.Name) and given.value.value in names[1:] and not _assigns_name(method, given.value.value)
            and argument(call, given.value.value, names.index(given.value.value) - 1) is None
        ):
            return (f"{prefix}: its fit is given a {VALIDATION} that is not a parameter of the method the call leaves out: migrate it by hand",)
        data = argument(fit, "validation_data", 8)
        if data is None:
            return None
        value = data.value
        first = value.elements[0].value if isinstance(value, (cst.Tuple, cst.List)) and value.elements else None
        if not (isinstance(first, cst.Name) and first.value in names[1:] and not _assigns_name(method, first.value)):
            return (f"{prefix}: its fit validates on what is not a parameter of the method, whose size the call (line {line}) cannot read: migrate it by hand",)
        passed = argument(call, first.value, names.index(first.value) - 1)
        if passed is None or not isinstance(passed.value, (cst.Name, cst.Attribute)):
            return (f"{prefix}: the validation arrays it is passed (line {line}) are not one name whose size can be read again: migrate it by hand",)
        size = f"len({self.program.module.code_for_node(passed.value)})"
        return (size, given.value.value) if given is not None else size  # type: ignore[union-attr]


def _assigns(function: cst.FunctionDef, attr: str, real: bool = False) -> bool:
    """Whether ``function`` binds ``self.<attr>`` (``real``: to something other than None)."""
    for node in nodes_in(function.body, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" and target.attr.value == attr:
                if real and isinstance(node.value, cst.Name) and node.value.value == "None":
                    continue
                return True
    return False


def _compiles(function: cst.FunctionDef, attr: str) -> bool:
    """Whether ``function`` compiles ``self.<attr>``."""
    return any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == "compile" and _is_self_attribute(c.func.value, attr)
        for c in nodes_in(function.body, cst.Call)
    )


def _is_self_attribute(node: cst.BaseExpression, attr: str) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self" and node.attr.value == attr


def _reached(methods: dict[str, cst.FunctionDef], start: str) -> set[str]:
    """``start`` and the methods it calls on ``self``, followed."""
    seen = {start}
    todo = [start]
    while todo:
        for call in nodes_in(methods[todo.pop()].body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                name = func.attr.value
                if name in methods and name not in seen:
                    seen.add(name)
                    todo.append(name)
    return seen


def _assigns_name(function: cst.FunctionDef, name: str) -> bool:
    for node in nodes_in(function.body, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        if any(name in {n.value for n in nodes_in(t, cst.Name)} for t in targets):
            return True
    return False


def _one_fit(other: Program, method: cst.FunctionDef, prefix: str) -> tuple[cst.Call, str] | str:
    """The training method's one ``self.<attr>.fit(x, y, ...)`` call and ``attr``, or why it
    is not one fit on arrays of a model the object keeps that the migration can follow."""
    fits = [c for c in nodes_in(method.body, cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value in ("fit", "train_on_batch", "fit_generator")]
    if len(fits) != 1 or fits[0].func.attr.value != "fit":  # type: ignore[union-attr]
        return f"{prefix}, not with one fit call: migrate it by hand"
    fit = fits[0]
    receiver = fit.func.value  # type: ignore[union-attr]
    if not (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self"):
        return f"{prefix}: its fit (line {other.line(fit)}) is not on a model the object keeps (self.<name>): migrate it by hand"
    fit_line = other.line(fit)
    if argument(fit, "y", 1) is None:
        return f"{prefix}: its fit (line {fit_line}) is given no y, so it trains on a dataset or generator whose batch is fixed where it is made: migrate it by hand"
    if argument(fit, "steps_per_epoch") is not None:
        return f"{prefix}: its fit (line {fit_line}) is given steps_per_epoch, which would then count global batches: migrate it by hand"
    if any(a.star for a in fit.args):
        return f"{prefix}: its fit (line {fit_line}) is given unpacked arguments: migrate it by hand"
    return fit, receiver.attr.value
