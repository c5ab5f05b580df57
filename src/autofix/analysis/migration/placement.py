"""Where ``autofix migrate`` makes the strategy: in the innermost block every part of the
training runs in (the module for a script, ``main()``'s body for a script that trains there,
the body of ``if __name__ == "__main__":`` for a script that trains only when it is run: not
when it is imported), after the imports, device setup, mixed-precision policy and seeding that
come before the training, and before the first object it must cover."""

from __future__ import annotations

import os

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.script import Facts
from autofix.analysis.migration.single_device import Refusal, SingleDevice
from autofix.analysis.program import Block, Program
from autofix.analysis.syntax import nodes_in
from autofix.analysis.training.model import TrainingModel
from autofix.tf.numpy_draws import SEEDS as RANDOM_SEEDS

# Calls whose effect the strategy must not precede (what seeds the random generators): the
# strategy is made after them, as a script's reader expects.
SEEDS = RANDOM_SEEDS | {"tensorflow.config.experimental.enable_op_determinism"}


class Placement(Derived):
    """Built once per program (``Placement.of(program)``)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        self.single = SingleDevice.of(program)

    # --- where the strategy goes ---------------------------------------------------------------

    def anchors(self) -> list[cst.CSTNode]:
        """What the strategy must exist before: every call that trains (``fit``, a step's
        call) and everything those take part with (models, optimizers, compile...)."""
        found: list[cst.CSTNode] = []
        for site in self.single.fits:
            found.append(site.call)
            found.extend(site.members)
        for method in self.single.method_fits:
            found.extend([method.construction, *method.builders, method.call])
        for step in self.single.custom_steps:
            found.extend(step.calls)
            for update in step.updates:
                found.extend(self.training.makers(update.func.value))  # type: ignore[union-attr]
            for attribute in nodes_in(step.function.body, cst.Attribute):
                if attribute.attr.value in ("trainable_variables", "trainable_weights", "variables", "weights"):
                    found.extend(m for m in self.training.makers(attribute.value) if self.training.is_model_maker(m))
            if step.variables is not None:
                found.extend(step.variables.calls)
            if step.method:
                # A step called on a parameter (``def train(gan, ds): gan.step(x)``): the calls
                # of that function and the objects they pass train too.
                for site, value in step.passed:
                    found.append(site)
                    found.extend(self.training.makers(value) if isinstance(value, cst.Name) else [value])
        return found

    def chain(self, node: cst.CSTNode) -> list[Block]:
        """The blocks ``node`` runs in, innermost first: the body of its function, then the
        block of the one place that function is called from, up to the module (through the
        body of ``if __name__ == "__main__":`` when it is there). Stops where a function is a
        method, or is called from several blocks (or none)."""
        found: list[Block] = []
        current = node
        for _ in range(20):
            function = self.program.enclosing_function(current)
            if function is None:
                guard = main_guard(self.program, current)
                if guard is not None:
                    found.append(guard)
                found.append(self.program.module)
                return found
            if not isinstance(function.body, cst.IndentedBlock) or self.facts.functions[function].is_method:
                return found
            found.append(function.body)
            calls = [self.program.parent(r) for r in self.facts.references(function)]
            calls = [c for c in calls if isinstance(c, cst.Call)]
            blocks = {id(self._block_of_code(c)) for c in calls}
            if len(blocks) != 1:
                return found
            current = calls[0]
        return found

    def _block_of_code(self, node: cst.CSTNode) -> Block | None:
        function = self.program.enclosing_function(node)
        if function is None:
            return main_guard(self.program, node) or self.program.module
        return function.body if isinstance(function.body, cst.IndentedBlock) else None

    def training_block(self) -> Block | Refusal:
        """The block the strategy is made in: the innermost one every part of the training
        runs in (the module for a script, ``main()``'s body for a script that trains there)."""
        anchors = self.anchors()
        chains = [self.chain(anchor) for anchor in anchors]
        chains = [c for c in chains if c]
        if not chains:
            return Refusal(self.program.module, self._why_nowhere(anchors))
        common = [b for b in chains[0] if all(any(b is other for other in c) for c in chains[1:])]
        if not common:
            return Refusal(self.program.module, (
                "the training is spread over functions that are not called from one place: which function "
                "should make the strategy is for you to decide"
            ))
        return common[0]

    def _why_nowhere(self, anchors: list[cst.CSTNode]) -> str:
        """Why no block holds the training: the function it is in is a method, or is called
        from nowhere in this file (or from more than one place), said for the first call that
        trains."""
        for anchor in anchors:
            function = self.program.enclosing_function(anchor)
            if function is None or function not in self.facts.functions:
                continue
            line = self.program.line(anchor)
            if self.facts.functions[function].is_method:
                cls = next((a for a in self.program.ancestors(function) if isinstance(a, cst.ClassDef)), None)
                owner = f"{cls.name.value}." if cls is not None else ""
                return (
                    f"the training on line {line} is in the method {owner}{function.name.value}(), and where its objects "
                    "are made and trained is not followed from there: make the strategy where they are made, and "
                    "migrate by hand"
                )
            calls = [c for c in (self.program.parent(r) for r in self.facts.references(function)) if isinstance(c, cst.Call)]
            if not calls:
                return (
                    f"the training on line {line} is in {function.name.value}(), which nothing in this file calls: "
                    "the strategy belongs where it is called"
                )
        for function, cls in self._own_train_steps():
            return (
                f"{cls.name.value}.train_step (line {self.program.line(function)}) is run by fit wherever a "
                f"{cls.name.value} is trained, and nothing in this file trains one: migrate the script that does"
            )
        return "no training site was found where a strategy can be made"

    def _own_train_steps(self) -> list[tuple[cst.FunctionDef, cst.ClassDef]]:
        """Each model's own ``train_step`` in this file, with its class."""
        found = []
        for function in [*self.single.train_steps, *(s.function for s in self.single.custom_steps)]:
            cls = next((a for a in self.program.ancestors(function) if isinstance(a, cst.ClassDef)), None)
            if cls is not None and function.name.value == "train_step":
                found.append((function, cls))
        return found

    def trained_elsewhere(self) -> str | None:
        """Why this module is not migrated on its own, when no block of it holds training and
        the training is a model's own ``train_step`` whose class another module of the project
        uses (``from model import VAE`` in ``test.py``, which fits one): that module's
        migration edits this one with it (:mod:`.companions`). None otherwise."""
        if any(self.chain(anchor) for anchor in self.anchors()):
            return None
        path = self.program.path
        if not path:
            return None
        from autofix.analysis.project.callers import users

        for function, cls in self._own_train_steps():
            found = users(path, cls.name.value)
            if not found:
                continue
            use = found[0]
            shown = os.path.relpath(use.path, os.path.dirname(os.path.abspath(path)))
            return (
                f"{cls.name.value}.train_step (line {self.program.line(function)}) is run by fit where {shown}:{use.line} "
                f"uses {cls.name.value}: migrate {shown}, which migrates this module with it"
            )
        return None

    def position(self, block: Block) -> int:
        """The index in ``block`` where the strategy is made: after the imports, device setup,
        mixed-precision policy and seeding that come before the first statement of the
        training, and before that statement."""
        from autofix.analysis.facts.ordering import effects_of

        body = list(block.body)
        anchors = self.anchors()
        first = len(body)
        for anchor in anchors:
            node = anchor
            for ancestor_block in self.chain(anchor):
                if ancestor_block is block:
                    break
                function = self.program.enclosing_function(node)
                calls = [self.program.parent(r) for r in self.facts.references(function)] if function is not None else []
                calls = [c for c in calls if isinstance(c, cst.Call)]
                if not calls:
                    break
                node = calls[0]
            top = self.program.top_statement_in(node, block)
            if top is not None:
                first = min(first, next(i for i, s in enumerate(body) if s is top))
        position = 0
        for index in range(first):
            statement = body[index]
            if _is_docstring(statement, index) or _is_import(statement) or effects_of(self.program, statement).barrier or self._seeds(statement):
                position = index + 1
        return position

    def _seeds(self, statement: cst.CSTNode) -> bool:
        return any(self.facts.names_of(call.func) & SEEDS for call in nodes_in(statement, cst.Call))


def main_guard(program: Program, node: cst.CSTNode) -> cst.IndentedBlock | None:
    """The body of the module-level ``if __name__ == "__main__":`` that holds ``node``: code
    that runs when the script is run, not when it is imported."""
    for ancestor in program.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, cst.If) and program.parent(ancestor) is program.module and _tests_main(ancestor.test):
            body = ancestor.body
            return body if isinstance(body, cst.IndentedBlock) and any(a is body for a in program.ancestors(node)) else None
    return None


def _tests_main(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _is_docstring(statement: cst.CSTNode, index: int) -> bool:
    return (
        index == 0
        and isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
