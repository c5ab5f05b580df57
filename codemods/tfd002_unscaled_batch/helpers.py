"""A batch size written as a number inside a data helper that cannot see the strategy
(``def make_datasets(): ... .batch(100)``, called where the strategy exists).

The number becomes a parameter of the helper, with the number as its default, and every call
of the helper whose data is trained on under the strategy passes the global batch
(``make_datasets(batch_size=100 * strategy.num_replicas_in_sync)``). Every other call, and
every other use of the helper, keeps the default: what it computes does not change.

Not done (the batch is reported with the reason): a method, a decorated function, a helper
whose training data is not what it returns, a helper called where the strategy does not
exist or with ``**kwargs`` by a call that would pass the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.facts.dataflow import DataFlow, Flow
from autofix.analysis.facts.script import Facts
from autofix.codegen import fresh_name


@dataclass(eq=False)
class Lifted:
    """``literal`` (in ``function``) becomes the parameter ``name`` with it as default."""

    function: cst.FunctionDef
    literal: cst.Integer
    name: str


class Helpers:
    """Plans lifting batch sizes into helper parameters for a :class:`.planner.BatchPlanner`."""

    def __init__(self, planner) -> None:
        self.planner = planner
        self.program = planner.program
        self.facts: Facts = planner.facts
        self.flows: DataFlow = planner.flows
        self._taken: set[str] | None = None
        # Lifted literals (by id): one parameter each, however many plans name it.
        self._lifted: dict[int, Lifted] = {}

    def plan(self, literal: cst.Integer, site: cst.Call, flow: Flow | None, context, plan) -> str | None:
        """Plan ``literal`` (the batch size of ``site``) as a parameter of its helper, passed
        the global batch by the calls whose data from ``site`` is trained on (None: planned),
        or why it cannot be."""
        function = self.program.enclosing_function(literal)
        if function is None:
            return "the batch is not made in a function"
        name = function.name.value
        info = self.facts.functions.get(function)
        if info is None or info.is_method:
            return f"the batch size is fixed inside the method {name}(); pass it in as a parameter"
        if function.decorators:
            return f"the batch size is fixed inside {name}(), a decorated function; pass it in as a parameter"
        through = [c for c in (flow.through if flow is not None else ()) if self.facts.local_definition(c.func) is function]
        positions = self._returned_at(function, site)
        if not through or positions is None:
            return f"the batch size is fixed inside {name}(), which does not return what it batches as one value; pass it in as a parameter"
        calls = [c for c in dict.fromkeys(through) if self._trained(c, positions)]
        if not calls:
            return f"the batch size is fixed inside {name}(); pass it in as a parameter"
        for call in calls:
            if any(a.star == "**" for a in call.args):
                return f"{name}() is called with **kwargs on line {self.program.line(call)}"
            if self.planner._located(call) is None:
                return (
                    f"the batch size is fixed inside {name}(); {name}() is called on line {self.program.line(call)}, "
                    "where the strategy does not exist, so it cannot be given the global batch"
                )
            why = self.planner.visible(call, context, plan)
            if why:
                return why
        lifted = self._lifted.get(id(literal))
        if lifted is None:
            lifted = Lifted(function, literal, self._fresh("batch_size"))
            self._lifted[id(literal)] = lifted
        plan.lifted.append(lifted)
        default = int(literal.value, 0)
        for call in calls:
            plan.keywords.append((call, lifted.name, default))
        return None

    def _returned_at(self, function: cst.FunctionDef, site: cst.Call) -> frozenset[int | None] | None:
        """Where ``function`` returns the data ``site`` batches: {None} for its whole result,
        else the positions in the tuple it returns; None when its returns disagree or do not
        return it."""
        found: set[frozenset] = set()
        for ret in self.facts.functions[function].returns:
            value = ret.value
            if value is None:
                return None
            if isinstance(value, cst.Tuple):
                found.add(frozenset(i for i, e in enumerate(value.elements) if self._made_by(e.value, site)))
            else:
                found.add(frozenset({None}) if self._made_by(value, site) else frozenset())
        if len(found) != 1:
            return None
        positions = found.pop()
        return positions or None

    def _made_by(self, value: cst.BaseExpression, site: cst.Call) -> bool:
        """Whether ``value`` is the dataset ``site`` makes (or one of its dataset methods')."""
        for origin in self.facts.values.origins(value):
            node = origin.node
            if not origin.whole:
                continue
            while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node is site:
                    return True
                node = node.func.value
        return False

    def _trained(self, call: cst.Call, positions: frozenset) -> bool:
        """Whether the data of ``positions`` in what ``call`` returns is trained on."""
        if None in positions:
            return self.flows.flow(call).trains
        assign = self.program.parent(call)
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
            return False
        target = assign.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return False
        for position in positions:
            if position >= len(target.elements) or not isinstance(target.elements[position].value, cst.Name):
                continue
            if any(self.flows.flow(use).trains for use in self.facts.uses(target.elements[position].value)):
                return True
        return False

    def _fresh(self, base: str) -> str:
        if self._taken is None:
            self._taken = self.facts.names()
        name = fresh_name(self._taken, base)
        self._taken.add(name)
        return name


def with_parameter(function: cst.FunctionDef, name: str, default: cst.Integer) -> cst.FunctionDef:
    """``function`` with one more parameter, ``name=default``: keyword-only after ``*args``
    (where a positional one would take an argument meant for it), else the last positional."""
    params = function.params
    new = cst.Param(
        name=cst.Name(name),
        default=default.with_changes(lpar=[], rpar=[]),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if isinstance(params.star_arg, cst.Param) or params.kwonly_params:
        return function.with_changes(params=params.with_changes(kwonly_params=[*_commas(params.kwonly_params), new]))
    return function.with_changes(params=params.with_changes(params=[*_commas(params.params), new]))


def _commas(params) -> list[cst.Param]:
    """``params`` with a comma after the last one (a new one follows)."""
    params = list(params)
    if params and not isinstance(params[-1].comma, cst.Comma):
        params[-1] = params[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return params
