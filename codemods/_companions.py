"""The edits a migration makes in another module of the project (see
:mod:`autofix.analysis.migration.companions`): the loss a model class's own ``train_step``
differentiates divided by ``tf.distribute.get_strategy().num_replicas_in_sync``, the loss it
reports and returns left as it was; and a training method of another module's class given the
parameters its ``fit`` then takes its batches from (:mod:`autofix.analysis.migration.method_fits`)."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.migration.companions import StepPlan
from autofix.analysis.migration.method_fits import MethodFit
from autofix.codegen import add_argument

# What the migration's finding says of the other module's edit.
EXPLAINED = (
    "{module}:{line}: the loss {cls}.train_step differentiates is divided by "
    "tf.distribute.get_strategy().num_replicas_in_sync, which is 1 outside any strategy: other code that "
    "imports {cls} and trains on one device computes what it computed before"
)


def divided_step(plan: StepPlan) -> str:
    """The other module's text with the plan's ``train_step`` differentiating each replica's
    share of its loss."""
    assert plan.assignment is not None and plan.gradient is not None
    taken = {n.value for n in _names(plan.program.module)}
    name = "replica_loss"
    count = 1
    while name in taken:
        count += 1
        name = f"replica_loss_{count}"
    share = cst.parse_statement(f"{name} = {plan.loss} / {plan.tf}.distribute.get_strategy().num_replicas_in_sync\n")
    assignment, gradient = plan.assignment, plan.gradient

    class Edit(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            if original is assignment:
                return cst.FlattenSentinel([updated, share])
            return updated

        def leave_Call(self, original, updated):
            if original is gradient:
                first = updated.args[0]
                return updated.with_changes(args=[first.with_changes(value=cst.Name(name)), *updated.args[1:]])
            return updated

    return plan.program.module.visit(Edit()).code


def method_with_batch(plan: MethodFit) -> str:
    """The other module's text: the method given the parameters of ``added``, each handed
    to its fit (``batch_size=None`` ... ``fit(..., batch_size=batch_size)``)."""
    method, fit, added = plan.method, plan.fit, plan.added

    class Edit(cst.CSTTransformer):
        def leave_FunctionDef(self, original, updated):
            if original is not method:
                return updated
            params = updated.params
            plain = list(params.params)
            for name, default in added:
                equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
                new = cst.Param(cst.Name(name), default=cst.parse_expression(default), equal=equal)
                if plain and plain[-1].comma is cst.MaybeSentinel.DEFAULT:
                    plain[-1] = plain[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                elif plain:
                    new = new.with_changes(comma=plain[-1].comma)
                    plain[-1] = plain[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                plain.append(new)
            return updated.with_changes(params=params.with_changes(params=plain))

        def leave_Call(self, original, updated):
            if original is not fit:
                return updated
            from autofix.codegen import add_argument

            for name, _default in added:
                given = [a for a in updated.args if a.keyword is not None and a.keyword.value == name]
                if given:
                    updated = updated.with_changes(args=[a.with_changes(value=cst.Name(name)) if a in given else a for a in updated.args])
                else:
                    updated = add_argument(updated, name, cst.Name(name))
            return updated

    return plan.other.module.visit(Edit()).code


def _names(module: cst.Module) -> list[cst.Name]:
    from autofix.analysis.syntax import nodes_in

    return nodes_in(module, cst.Name)
