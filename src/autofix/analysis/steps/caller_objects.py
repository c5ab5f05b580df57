"""A step's object known only from a caller in another module of the project.

``fit.py`` of a library runs ``strategy.run(train_step, args=(obj, batch))`` where ``obj`` is
the parameter of ``def fit_dist(obj, ...)``, a function nothing in ``fit.py`` calls; the step
applies what ``obj.grad()`` returns. What ``obj`` is, and so what ``grad()`` differentiates,
is known only to the module that calls ``fit_dist(self, ...)`` (``models.py``, in a method of
``CollocationSolverND``). :func:`caller_gradients` asks the project who calls the function
(:mod:`autofix.analysis.project.callers`), and when every caller passes an object of one class
(``self`` in a method of it, or an instance the caller makes of a class of its module or of one
it imports from the project), walks what that class's
method differentiates, there, as a step's loss is walked (:mod:`.losses`): each term becomes a
:class:`~.losses.RemoteTerm` at its place in that module (or deeper, in a module that one
imports), found through the call of the method here.

What the caller's path guarantees about the object (``if self.isAdaptive and self.dist:
raise ...`` before ``if self.dist: fit_dist(self, ...)``: ``self.isAdaptive`` is false; see
:mod:`autofix.analysis.core.guards`) holds in the methods walked, for an attribute none of
them, the caller's method nor this module assigns: a reduction only in a branch that guard
rules out is not a term.

Not followed: a method that is not the class's own or a base's of the same module, a class
subclassed in its module (the object may be of the subclass), a caller that passes anything
else, a function that something in this file calls too, or one the project shows no caller of.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from autofix.analysis.core import guards
from autofix.analysis.core.value_flow import Values
from autofix.analysis.facts.callees import Callables
from autofix.analysis.program import Program
from autofix.analysis.project.callers import Caller, callers
from autofix.analysis.project.imports import ProjectImports, project_program
from autofix.analysis.steps.custom import Steps
from autofix.analysis.steps.losses import _KINDS, RemoteTerm, Term, loss_walk
from autofix.analysis.syntax import parameter_argument


def caller_gradients(steps: Steps, root: cst.FunctionDef) -> list[tuple[cst.Call, list[Term]]]:
    """Each call ``obj.method(...)`` made when the step ``root`` runs whose object is a
    parameter of a top-level function of this file that only other modules of the project call,
    each passing an object of one class of theirs whose ``method`` takes gradients: the call,
    with the terms of what that method differentiates (ending at the call here)."""
    program = steps.program
    if program.path is None:
        return []
    values = Values.of(program)
    found: list[tuple[cst.Call, list[Term]]] = []
    for call in steps.calls(root):
        func = call.func
        if not isinstance(func, cst.Attribute) or steps.facts.is_module_reference(func.value) or steps.callables.of_call(func)[0]:
            continue
        param = _entry_parameter(values, func.value)
        if param is None:
            continue
        function = values.enclosing_function(param)
        assert function is not None
        terms = _method_terms(program, function, param, func.attr.value, call)
        if terms:
            found.append((call, terms))
    return found


def _entry_parameter(values: Values, expr: cst.BaseExpression) -> cst.Param | None:
    """The one parameter ``expr`` comes from, of a top-level function of the file that nothing
    in it calls (its value comes from another module)."""
    origins = values.origins(expr)
    if not origins or any(not o.whole or not isinstance(o.node, cst.Param) for o in origins):
        return None
    params = {id(o.node): o.node for o in origins}
    if len(params) != 1:
        return None
    (param,) = params.values()
    function = values.enclosing_function(param)
    if function is None or not isinstance(values.program.parent(function), cst.Module) or param not in function.params.params:
        return None
    calls, _ = values.calls_of(function)
    return None if calls else param  # type: ignore[return-value]


def _method_terms(here_program: Program, function: cst.FunctionDef, param: cst.Param, method: str, here: cst.Call) -> list[Term]:
    """The terms of what ``method`` of the objects the project's callers of ``function`` pass
    for ``param`` differentiates, each ending at ``here``; empty when a caller passes something
    else or the method takes no gradient."""
    assert here_program.path is not None
    found = callers(here_program.path, function.name.value)
    if not found:
        return []
    terms: list[Term] = []
    for caller in found:
        arg = parameter_argument(function, caller.call, param)
        if arg is None:
            return []
        made = _class_of(caller.program, caller.path, arg.value)
        if made is None:
            return []
        program, where, cls = made
        known = _object_facts(caller, arg.value, here_program)
        walked = _differentiated_terms(program, where, cls, method, here, known)
        if walked is None:
            return []
        terms.extend(walked)
    return terms


def _class_of(program: Program, path: str, expr: cst.BaseExpression) -> tuple[Program, str, cst.ClassDef] | None:
    """The one class whose instance ``expr`` (read in ``program``, the module ``path``) is:
    ``self`` of its method, or an object made there of a class of that module or of one it
    imports from the project; with the class's module (parsed) and path. None when another
    class of that module derives from it (the object may be of either)."""
    values = Values.of(program)
    classes: dict[tuple[str, str], tuple[Program, str, cst.ClassDef]] = {}
    for origin in values.origins(expr):
        if not origin.whole:
            return None
        node = origin.node
        found: tuple[Program, str, cst.ClassDef] | None = None
        if isinstance(node, cst.Param) and values.is_self(node):
            function = values.enclosing_function(node)
            cls = values.class_of(function) if function is not None else None
            found = (program, path, cls) if cls is not None else None
        elif isinstance(node, cst.Call):
            made = values.local_definition(node.func)
            if isinstance(made, cst.ClassDef):
                found = (program, path, made)
            elif made is None:
                found = _imported_class(program, node.func)
        if found is None:
            return None
        classes[(found[1], found[2].name.value)] = found
    if len(classes) != 1:
        return None
    ((owner, where, cls),) = classes.values()
    owner_values = Values.of(owner)
    for other in owner.module.body:
        if isinstance(other, cst.ClassDef) and any(owner_values.local_definition(b.value) is cls for b in other.bases):
            return None
    return owner, where, cls


def _imported_class(program: Program, func: cst.BaseExpression) -> tuple[Program, str, cst.ClassDef] | None:
    """The top-level class of another module of the project that ``func`` (a name ``program``
    imports) is, parsed with its path."""
    resolved = ProjectImports.of(program).resolve(func)
    if resolved is None or resolved.path is None or resolved.definition is None or resolved.definition.kind != "class":
        return None
    owner = project_program(resolved.path)
    if owner is None:
        return None
    name = resolved.definition.name
    found = [s for s in owner.module.body if isinstance(s, cst.ClassDef) and s.name.value == name]
    return (owner, resolved.path, found[0]) if len(found) == 1 else None


def _object_facts(caller: Caller, arg: cst.BaseExpression, here_program: Program) -> guards.Known:
    """What the caller's path guarantees about the attributes of the object it passes
    (``self.isAdaptive`` false after ``if self.isAdaptive and self.dist: raise``, inside ``if
    self.dist:``), as facts of ``self`` in its class's methods; only for an attribute this
    module (``here_program``) never assigns."""
    prefix = guards.key_of(arg)
    if prefix is None:
        return {}
    known = guards.known_at(caller.program, caller.call)
    facts: guards.Known = {}
    assigned = _assigned_attributes(here_program.module)
    for key, value in known.items():
        head, dot, attribute = key.rpartition(".")
        if head == prefix and dot and attribute not in assigned:
            facts["self." + attribute] = value
    if facts:
        facts[_CALLER] = caller.program.enclosing_function(caller.call)  # type: ignore[assignment]
    return facts


# The key under which :func:`_object_facts` keeps the caller's function (its assignments count).
_CALLER = "\0caller"


def _assigned_attributes(node: cst.CSTNode) -> set[str]:
    """Every attribute name assigned (``x.name = ...``, ``x.name += ...``) in ``node``."""
    from autofix.analysis.syntax import nodes_in

    found: set[str] = set()
    for target in nodes_in(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
        expr = target.target
        for element in nodes_in(expr, cst.Attribute) if not isinstance(expr, cst.Attribute) else [expr]:
            found.add(element.attr.value)
    return found


def _differentiated_terms(
    program: Program, path: str, cls: cst.ClassDef, method: str, here: cst.Call, known: guards.Known | None = None,
) -> list[Term] | None:
    """The terms of what ``cls.method`` (and what it calls there) differentiates, each a term
    of another module ending at ``here``; None when it takes no gradient. ``known``: what
    holds of ``self`` when it runs (a term only in code that makes dead is none)."""
    function = Callables.of(program).method(cls, method)
    if function is None:
        return None
    steps = Steps.of(program)
    reached = steps.reached(function)
    known = dict(known or {})
    caller_function = known.pop(_CALLER, None)
    if known:
        assigned: set[str] = set()
        for code in (*reached, *([caller_function] if isinstance(caller_function, cst.FunctionDef) else [])):
            assigned |= _assigned_attributes(code)
        known = {k: v for k, v in known.items() if k.rpartition(".")[2] not in assigned}

    def live(node: cst.CSTNode) -> bool:
        return not guards.dead(program, node, known)

    targets = [
        target
        for function_reached in reached
        for call in steps.facts.functions[function_reached].calls
        if (target := steps.differentiated(call)) is not None and live(call)
    ]
    if not targets:
        return None
    terms: list[Term] = []
    for target in targets:
        for term in loss_walk(steps, target).terms:
            if known and not all(live(n) for n in (term.node, *term.calls, *term.bindings)):
                continue
            terms.append(_here(program, path, f"{cls.name.value}.{method}", term, here))
    return terms


def _here(program: Program, path: str, function: str, term: Term, here: cst.Call) -> Term:
    """``term`` of the other module as a term of this file's step, ending at ``here``."""
    remote = term.remote
    if remote is None:
        if term.kind not in _KINDS or term.bypassed:
            return Term(here, "unknown")
        where = program.position(term.node)
        remote = RemoteTerm(
            term.kind, term.detail, bool(term.scaling), path, function,
            where.start.line, where.start.column + 1, where.end.line, where.end.column + 1, program, term.node,
        )
    elif term.scaling and not remote.scaled:
        remote = replace(remote, scaled=True)
    return Term(here, remote.kind, (here,) if remote.scaled else (), detail=remote.detail, remote=remote)
