"""Training that uses what other modules of the project make, for ``autofix migrate``.

A model made in the migrated file by a call of another module's function, or of its model
class, is migrated as a model made in the file is (the call goes into ``strategy.scope()``,
where whatever the function builds and compiles is made), but only when that function is shown
to *only build* it (:attr:`~autofix.analysis.project.summary.Definition.only_builds`: no
strategy, no training, no loss or optimizer whose behaviour over replicas autofix judges only
where it can see it) and a class has no training of its own. Otherwise, and wherever the file
trains through another module autofix does not follow (a model it cannot see made, a
function or class of the project that trains), the migration is refused at the line, naming
the other file and line: never "it does not train", never a migration made blind. (A method
of a plain class of another module that fits a model the class builds is migrated in both files
when it can be shown right: :mod:`.method_fits`.)
"""

from __future__ import annotations

import os
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.companions import Companions, StepPlan
from autofix.analysis.migration.method_fits import MethodFits
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports, Resolved
from autofix.analysis.syntax import nodes_in
from autofix.analysis.training.model import TrainingModel
from autofix.analysis.training.sites import FIT_METHODS


class ImportedTraining(Derived):
    """Refusals for training that goes through modules of the project autofix does not
    follow: (node, reason) for each, at the line of the file being migrated."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        self.imports = ProjectImports.of(program)

    @cached_property
    def refusals(self) -> list[tuple[cst.CSTNode, str]]:
        if not self.imports.active:
            return []
        return self.factories + self.unfollowed + self.trainers + self.loops + MethodFits.of(self.program).refusals

    @cached_property
    def handled(self) -> set[int]:
        """The ``fit`` calls whose refusal this module words (by id)."""
        return {id(node) for node, _ in self.unfollowed}

    @cached_property
    def factories(self) -> list[tuple[cst.CSTNode, str]]:
        """Models of ``fit`` sites made by the project's functions or classes that cannot be
        shown to only build them."""
        found: list[tuple[cst.CSTNode, str]] = []
        seen: set[int] = set()
        for site in self.training.sites:
            if site.kind != "fit":
                continue
            for member in site.members:
                if id(member) in seen:
                    continue
                seen.add(id(member))
                resolved = self.imports.resolve(member.func)
                if resolved is None or resolved.definition is None:
                    continue
                why = self._not_only_building(resolved)
                if why is not None:
                    found.append((member, self._made_by(member, resolved) + f", which autofix does not follow: {why}"))
        return found

    def _not_only_building(self, resolved: Resolved) -> str | None:
        definition = resolved.definition
        assert definition is not None
        problems = self._problems(resolved)
        if definition.kind == "class":
            if definition.train_step is not None and definition.step_means:
                plan = Companions.of(self.program).step_plan(resolved)
                if isinstance(plan, StepPlan):
                    return None  # migrated in both files (see companions.py)
                return f"the class has its own training (line {definition.train_step}): {plan}; migrate it by hand"
            if definition.train_step is not None:
                module = os.path.basename(resolved.path or "")
                return (
                    f"the class has its own training (line {definition.train_step}); the migration follows a train_step "
                    f"whose loss is a sum of means over the batch, which this is not, into {module}: migrate it by hand"
                )
        elif definition.kind != "function" or definition.returns_model is None or problems:
            if problems:
                return "; ".join(reason for _line, reason in problems[:3])
            return "it returns no Keras model autofix can see made"
        if definition.kind == "class" and problems:
            return "; ".join(reason for _line, reason in problems[:3])
        for qualified, line in definition.calls_out:
            inner = self._resolve_from(resolved.path, qualified)
            if inner is not None and inner.path is not None:
                return (
                    f"it calls {qualified} (line {line}) from {os.path.basename(inner.path)}, "
                    "another module of the project, which autofix does not follow in turn"
                )
        return None

    def _problems(self, resolved: Resolved) -> list[tuple[int, str]]:
        """The definition's problems, but those a number written in another module of the
        project clears (``Adam(config.LEARNING_RATE)``, ``LEARNING_RATE = 1e-3`` in config.py)."""
        definition = resolved.definition
        assert definition is not None
        cleared = set()
        for line, reason, qualified in definition.constant_checks:
            read = self._resolve_from(resolved.path, qualified)
            if read is not None and read.definition is not None and read.definition.kind == "assignment" and read.definition.number is not None:
                cleared.add((line, reason))
        return [problem for problem in definition.problems if problem not in cleared]

    def _resolve_from(self, path: str | None, qualified: str) -> Resolved | None:
        if path is None:
            return None
        from autofix.analysis.project.imports import resolve_from

        return resolve_from(path, qualified)

    def _made_by(self, call: cst.Call, resolved: Resolved) -> str:
        name = self.program.module.code_for_node(call.func)
        return f"the model is made by {name} in {resolved.where(self.imports.path)}"

    @cached_property
    def unfollowed(self) -> list[tuple[cst.CSTNode, str]]:
        """``fit`` on a model that is not a training site, made by a call of an imported
        name: what that name is, or why it is not followed."""
        sites = {id(site.call) for site in self.training.sites}
        found = []
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value not in FIT_METHODS or id(call) in sites:
                continue
            if self.facts.is_module_reference(func.value):
                continue
            for origin in self.facts.values.origins(func.value, enter=False):
                made = origin.node
                if not isinstance(made, cst.Call):
                    continue
                resolved = self.imports.resolve(made.func)
                if resolved is None:
                    continue
                name = self.program.module.code_for_node(made.func)
                line = self.program.line(made)
                if resolved.path is None or resolved.definition is None:
                    found.append((call, (
                        f"the model {func.attr.value}() trains on line {self.program.line(call)} is made by {name} "
                        f"(line {line}), which autofix cannot follow: {resolved.reason or 'it is not found'}"
                    )))
                else:
                    definition = resolved.definition
                    found.append((call, (
                        f"the model {func.attr.value}() trains on line {self.program.line(call)} is made by {name} "
                        f"(line {line}) in {resolved.where(self.imports.path)}, which autofix does not follow: "
                        f"it is {definition.describe()}"
                    )))
                break
        return found

    def _training_method_calls(self) -> dict[int, tuple[cst.Call, Resolved, str, int, str]]:
        """For each object made here from a project class (by the id of the call that makes
        it): the first call of one of its methods that trains, with the method."""
        found: dict[int, tuple[cst.Call, Resolved, str, int, str]] = {}
        for call, _owner in self.facts.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or self.facts.is_module_reference(func.value):
                continue
            for origin in self.facts.values.origins(func.value, enter=False):
                made = origin.node
                if not isinstance(made, cst.Call) or id(made) in found:
                    continue
                resolved = self.imports.resolve(made.func)
                definition = resolved.definition if resolved is not None else None
                if definition is None or definition.kind != "class" or definition.keras_model:
                    continue
                if MethodFits.of(self.program).handles(made):
                    break  # migrated in both files, or refused there (see method_fits.py)
                method = next((m for m in definition.training_methods if m[0] == func.attr.value), None)
                if method is not None:
                    found[id(made)] = (call, resolved, method[0], method[1], method[2])  # type: ignore[assignment]
                break
        return found

    @cached_property
    def trainers(self) -> list[tuple[cst.CSTNode, str]]:
        """Calls of the project's functions that train, and of methods of objects made from
        its classes that train: training autofix does not follow into the other module."""
        found = []
        objects: set[int] = set()
        # Objects of the project's classes one of whose methods is seen called and training:
        # named at that call (the others, whose training is not seen where, at their first call).
        at_methods = self._training_method_calls()
        objects.update(at_methods)
        for made_from, (call, resolved, method, line, why) in at_methods.items():
            name = self.program.module.code_for_node(call.func)
            found.append((call, (
                f"{name}() trains in {resolved.where(self.imports.path, line)} ({resolved.definition.name}.{method}: {why}), "
                "another module of the project, which the migration does not follow; move the training into the "
                "file autofix migrates, or migrate it by hand"
            )))
        for call, _owner in self.facts.calls:
            func = call.func
            resolved = self.imports.resolve(func)
            made_from = None
            if resolved is None and isinstance(func, cst.Attribute) and not self.facts.is_module_reference(func.value):
                for origin in self.facts.values.origins(func.value, enter=False):
                    if isinstance(origin.node, cst.Call):
                        resolved = self.imports.resolve(origin.node.func)
                        if resolved is not None and resolved.definition is not None and resolved.definition.kind != "class":
                            resolved = None  # what a function returns: its own training is judged where it is called
                        if resolved is not None:
                            made_from = origin.node
                            break
            if resolved is None or resolved.definition is None or resolved.definition.trains is None:
                continue
            definition = resolved.definition
            if definition.kind == "class" and (made_from is None or definition.keras_model):
                # The object is made here: its methods train when called (a Keras model's
                # training, through fit, is judged where it is made).
                continue
            if made_from is not None:
                if MethodFits.of(self.program).handles(made_from):
                    continue
                if id(made_from) in objects:
                    continue  # one finding per object
                objects.add(id(made_from))
            name = self.program.module.code_for_node(func)
            found.append((call, (
                f"{name}() trains in {resolved.where(self.imports.path)} ({definition.name}: {definition.trains}), "
                "another module of the project, which the migration does not follow; move the training into the "
                "file autofix migrates, or migrate it by hand"
            )))
        return found

    @cached_property
    def loops(self) -> list[tuple[cst.CSTNode, str]]:
        """Calls that give a function of another module of the project (``train(m, ds,
        epochs)``, ``from dcgan import train``) an object whose training is a project class's:
        made from it, or from a class of this file deriving from it (``class LSGAN(DCGAN)``,
        whose ``step`` calls the ``train_d`` it inherits). That function's loop runs the
        training; the migration would have to make its steps run per replica and distribute
        its dataset there. A class of this file whose own methods apply gradients is named by
        :mod:`~autofix.analysis.steps.method_steps` instead."""
        callables = Callables.of(self.program)
        code = self.program.module.code_for_node
        found = []
        for call, _owner in self.facts.calls:
            loop = self.imports.resolve(call.func)
            if loop is None or loop.path is None or loop.definition is None or loop.definition.kind != "function":
                continue
            for arg in call.args:
                trained = self._trained_through_project(arg.value, callables)
                if trained is None:
                    continue
                found.append((call, (
                    f"{code(arg.value)} is given to {code(call.func)}() of {loop.where(self.imports.path)} on line "
                    f"{self.program.line(call)}, and trains through {trained}: the training loop is in another module of "
                    "the project, which the migration does not follow (its steps would have to run per replica and its "
                    "dataset be distributed there); move the loop into this file, or migrate it by hand"
                )))
                break
        return found

    def _trained_through_project(self, value: cst.BaseExpression, callables: Callables) -> str | None:
        """What in another module trains an object (its class there, and the methods that
        train), or None."""
        if not isinstance(value, (cst.Name, cst.Call)):
            return None
        local = callables.instance_class(value)
        if local is not None:
            if any(
                isinstance(c.func, cst.Attribute) and c.func.attr.value in ("apply_gradients", "minimize")
                for c in nodes_in(local, cst.Call)
            ):
                return None  # trains here: named where its step is looked for
            classes = [self.imports.resolve(base.value) for base in local.bases]
            prefix = f"{local.name.value}'s base class "
        else:
            made = [o.node for o in self.facts.values.origins(value, enter=False)] if isinstance(value, cst.Name) else [value]
            classes = [self.imports.resolve(m.func) for m in made if isinstance(m, cst.Call)]
            prefix = "its class "
        for resolved in classes:
            definition = resolved.definition if resolved is not None else None
            if definition is None or definition.kind != "class" or not definition.training_methods:
                continue
            methods = ", ".join(f"{m}() (line {line})" for m, line, _why in definition.training_methods)
            return f"{prefix}{definition.name} of {resolved.where(self.imports.path)} ({methods} train)"  # type: ignore[union-attr]
        return None
