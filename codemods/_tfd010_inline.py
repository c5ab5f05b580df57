"""TFD010's first move for a training step written inline in a loop body (see
:mod:`autofix.analysis.migration.inline_steps`): its statements moved into a function of their own,
defined before the loops, which the loop calls with the batch and whose result (the loss) it
assigns to the names it read; a ``print`` that only shows values runs after the call. The code
then trains as before, on one device, and the next pass of the migration runs that function
per replica as it does any custom step.
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from autofix.analysis.migration.inline_steps import InlineStep
from autofix.analysis.program import Program
from autofix.codegen import BlockEdits, fresh_name

STEP_NAME = "train_step"


class Inserts(Protocol):
    def add(self, block, index: int, statements: list[cst.BaseStatement]) -> None: ...


def extract(program: Program, steps: list[InlineStep], taken: set[str], edits: BlockEdits, inserts: Inserts) -> None:
    """Plan, for each step, its function (before the outermost loop around it) and the call
    that replaces its statements."""
    for step in steps:
        name = fresh_name(taken, STEP_NAME)
        statements = step.statements
        moved = {id(s) for s in step.moved}
        body = [s.visit(_Without(moved)) if moved else s for s in statements if id(s) not in moved]
        blank, rest = _split_leading(body[0].leading_lines)
        body[0] = body[0].with_changes(leading_lines=rest)
        if step.returns:
            body.append(cst.parse_statement(f"return {', '.join(step.returns)}\n"))
        header = cst.parse_statement(f"def {name}({', '.join(step.params)}):\n    pass\n")
        function = header.with_changes(body=header.body.with_changes(body=body))  # type: ignore[attr-defined]
        call = f"{name}({', '.join(step.params)})"
        line = cst.parse_statement(f"{', '.join(step.returns)} = {call}\n" if step.returns else f"{call}\n")
        line = line.with_changes(leading_lines=blank)
        after = [line, *step.moved]

        def replace(body, start=step.start, end=step.end, after=after):
            return [*body[:start], *after, *body[end:]]

        edits.add(step.loop.body, replace)  # type: ignore[arg-type]
        block = program.block_of(step.outer)
        inserts.add(block, list(block.body).index(step.outer), [function])  # type: ignore[union-attr]


class _Without(cst.CSTTransformer):
    """A statement with the moved ``print`` lines taken out of it."""

    def __init__(self, moved: set[int]) -> None:
        self.moved = moved

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if id(original_node) in self.moved:
            return cst.RemoveFromParent()
        return updated_node


def _split_leading(lines) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """The blank lines before the first comment (they stay in the loop, before the call) and
    the rest (the comments, which describe the step and go with it)."""
    lines = list(lines)
    for i, line in enumerate(lines):
        if line.comment is not None:
            return lines[:i], lines[i:]
    return lines, []
