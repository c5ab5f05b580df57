"""What is known to hold on the path to a line, and which code that knowledge makes dead.

A library guards its own paths: ``CollocationSolverND.fit`` raises for ``self.isAdaptive and
self.dist`` before ``if self.dist: fit_dist(self, ...)``, so the code the distributed step runs
never takes the ``if self.isAdaptive:`` branches of the methods it calls; a helper called
without ``weights`` never takes ``if weights is not None: return ...``. A reduction reachable
only there must not be reported as reaching a gradient.

:func:`known_at` collects what holds when a statement runs: the tests of the ``if`` statements
that enclose it (true in the body, false in the ``else``) and of each earlier ``if TEST:``
whose body always leaves (``raise``, ``return``, ``continue``, ``break``, ``sys.exit()``)
without an ``else`` (false after it), within its function; a conjunction known false whose
other operands are known true makes the last one false. Keys are the code of plain names and
attribute chains (``self.isAdaptive``, ``weights``); values are a truth value or :data:`NONE`.
:func:`dead` says whether ``node`` lies where those facts make the code unreachable: in a
branch whose test is known to be the other way, or after an earlier ``if TEST:`` that always
leaves, with ``TEST`` known true. A local name whose every assignment reaching the test (not
in dead code) is a constant has that constant's truth (``flag = False`` in the ``else`` of a
dead branch). Anything else is unknown, and unknown code is live.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autofix.analysis.program import Program
from autofix.analysis.syntax import parameter_argument

# The value ``None`` (a parameter left at its default ``None``): falsy, ``is None``.
NONE = "None"


@dataclass(frozen=True)
class Literal:
    """A constant a name is known to hold (a parameter a call passes ``"gpus_one_machine"``, or
    leaves at that default): compared with ``==``, ``!=`` and ``in`` against constants."""

    value: object


Known = dict[str, object]


def literal(expr: cst.BaseExpression | None) -> object | None:
    """What ``expr`` is known as when it is a constant: :data:`NONE`, a truth value, or a
    :class:`Literal` string or number; None otherwise."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    if isinstance(expr, cst.Name) and expr.value == "None":
        return NONE
    if isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float)):
        return Literal(expr.evaluated_value)
    if isinstance(expr, cst.ConcatenatedString):
        value = expr.evaluated_value
        return Literal(value) if isinstance(value, str) else None
    return None


def constants_passed(program: Program, function: cst.FunctionDef, call: cst.Call) -> Known:
    """The parameters of ``function`` (read in ``program``) that ``call`` binds to a constant,
    written at the call or left at a constant default, among those the function never binds
    again (``mode = mode.lower()``, a loop, ``nonlocal``); nothing when the call unpacks
    ``*args`` or ``**kwargs``. ``call`` may be read in another program (an importer's)."""
    if any(arg.star for arg in call.args):
        return {}
    known: Known = {}
    for param in (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params):
        name = param.name.value
        binding = program.assignment(param)
        if binding is None or len(binding.scope.bindings.get(name, ())) != 1:
            continue
        passed = parameter_argument(function, call, param)
        constant = literal(passed.value if passed is not None else param.default)
        if constant is not None:
            known[name] = constant
    return known


def _constant(expr: cst.BaseExpression) -> object | None:
    """The Python value of a constant written in the code (``_MISSING`` otherwise)."""
    known = literal(expr)
    if known is None:
        return _MISSING
    if known == NONE:
        return None
    return known.value if isinstance(known, Literal) else known


_MISSING = object()


def key_of(expr: cst.BaseExpression) -> str | None:
    """``self.isAdaptive`` / ``weights``: the key of a name or an attribute chain of names."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        inner = key_of(expr.value)
        return None if inner is None else f"{inner}.{expr.attr.value}"
    return None


def truth(program: Program, expr: cst.BaseExpression, known: Known, depth: int = 0) -> bool | None:
    """The truth of ``expr`` given ``known``; None when it is not known."""
    if depth > 8:
        return None
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return expr.value == "True"
    if isinstance(expr, (cst.Integer, cst.Float)):
        return bool(expr.evaluated_value)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        key = key_of(expr)
        if key is not None and key in known:
            value = known[key]
            if isinstance(value, Literal):
                return bool(value.value)
            return False if value == NONE else bool(value)
        if isinstance(expr, cst.Name):
            return _local_truth(program, expr, known, depth)
        return None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = truth(program, expr.expression, known, depth + 1)
        return None if inner is None else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = truth(program, expr.left, known, depth + 1)
        right = truth(program, expr.right, known, depth + 1)
        if isinstance(expr.operator, cst.And):
            if left is False or right is False:
                return False
            return True if left is True and right is True else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if isinstance(target.operator, (cst.Is, cst.IsNot)) and isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            is_none = _is_none(program, expr.left, known)
            if is_none is None:
                return None
            return is_none if isinstance(target.operator, cst.Is) else not is_none
        return _compared(expr.left, target, known)
    return None


def _compared(left: cst.BaseExpression, target: cst.ComparisonTarget, known: Known) -> bool | None:
    """``mode == "tpu"``, ``mode != "gpu"``, ``mode in ("a", "b")`` where ``mode`` is known
    to hold a constant (a :class:`Literal`, a truth value or None)."""
    key = key_of(left)
    if key is None or key not in known:
        return None
    held = known[key]
    value = None if held == NONE else (held.value if isinstance(held, Literal) else held)
    if isinstance(target.operator, (cst.Equal, cst.NotEqual)):
        other = _constant(target.comparator)
        if other is _MISSING:
            return None
        same = value == other and type(value) is type(other) if isinstance(value, str) or isinstance(other, str) else value == other
        return same if isinstance(target.operator, cst.Equal) else not same
    if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(target.comparator, (cst.Tuple, cst.List, cst.Set)):
        members = []
        for element in target.comparator.elements:
            if isinstance(element, (cst.StarredElement,)):
                return None
            member = _constant(element.value)
            if member is _MISSING:
                return None
            members.append(member)
        inside = any(value == m and (not isinstance(value, str) or isinstance(m, str)) for m in members)
        return inside if isinstance(target.operator, cst.In) else not inside
    return None


def _is_none(program: Program, expr: cst.BaseExpression, known: Known) -> bool | None:
    key = key_of(expr)
    if key is None or key not in known:
        return None
    return known[key] == NONE


def _local_truth(program: Program, name: cst.Name, known: Known, depth: int) -> bool | None:
    """A local name every live assignment of which is a constant of one truth."""
    access = program.access(name)
    if access is None or not access.referents:
        return None
    found: set[bool] = set()
    for binding in access.referents:
        if binding.kind != "assign":
            return None
        node = binding.node
        parent = program.parent(node)
        assign = program.parent(parent) if isinstance(parent, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        if dead(program, assign, known, depth + 1):
            continue
        value = assign.value
        if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
            found.add(value.value == "True")
        elif isinstance(value, (cst.Integer, cst.Float)):
            found.add(bool(value.evaluated_value))
        else:
            return None
    return found.pop() if len(found) == 1 else None


def _leaves(block: cst.BaseSuite) -> bool:
    """Whether a block always leaves: its last statement raises, returns, continues, breaks or
    exits the program."""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    if not body:
        return False
    last = body[-1]
    small = last.body if isinstance(last, cst.SimpleStatementLine) else (last.body if isinstance(last, cst.SimpleStatementSuite) else None)
    if not small:
        return False
    final = small[-1]
    if isinstance(final, (cst.Raise, cst.Return, cst.Continue, cst.Break)):
        return True
    if isinstance(final, cst.Expr) and isinstance(final.value, cst.Call):
        func = final.value.func
        return key_of(func) in ("sys.exit", "exit", "quit", "os._exit")
    return False


def _exits_if(statement: cst.CSTNode) -> cst.If | None:
    """``if TEST: ...raise`` with no ``else``: the statement."""
    if isinstance(statement, cst.If) and statement.orelse is None and _leaves(statement.body):
        return statement
    return None


def _enclosing(program: Program, node: cst.CSTNode):
    """From the inside out, up to the function that holds ``node`` (or the module): each
    ``(if_statement, in_body)`` enclosing it, and each earlier statement of the blocks that
    hold it, as ``(statement, None)``."""
    child = node
    for ancestor in program.ancestors(node):
        if isinstance(ancestor, cst.If):
            if child is ancestor.body:
                yield ancestor, True
            elif child is ancestor.orelse:
                yield ancestor, False
        elif isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for statement in ancestor.body:
                if statement is child:
                    break
                yield statement, None
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return
        child = ancestor


def known_at(program: Program, node: cst.CSTNode) -> Known:
    """What holds when ``node`` runs, from the ``if`` statements that enclose it and the
    earlier ones that leave (see the module docstring)."""
    known: Known = {}
    false_conjunctions: list[list[cst.BaseExpression]] = []
    for statement, in_body in _enclosing(program, node):
        if in_body is None:
            guard = _exits_if(statement)
            if guard is not None:
                _assume(guard.test, False, known, false_conjunctions)
        else:
            test = statement.test if isinstance(statement, cst.If) else None
            if test is not None:
                _assume(test, in_body, known, false_conjunctions)
    changed = True
    while changed:
        changed = False
        for operands in false_conjunctions:
            unknown = [o for o in operands if truth(program, o, known) is not True]
            if len(unknown) == 1 and truth(program, unknown[0], known) is None:
                before = len(known)
                _assume(unknown[0], False, known, false_conjunctions)
                changed = changed or len(known) != before
    return known


def _assume(test: cst.BaseExpression, value: bool, known: Known, false_conjunctions: list) -> None:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        _assume(test.expression, not value, known, false_conjunctions)
        return
    if isinstance(test, cst.BooleanOperation):
        conjunction = isinstance(test.operator, cst.And)
        if conjunction == value:  # a and b true / a or b false: each operand so
            _assume(test.left, value, known, false_conjunctions)
            _assume(test.right, value, known, false_conjunctions)
        elif conjunction:  # a and b false: one of them false
            false_conjunctions.append(_operands(test, cst.And))
        return
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        # ``x is None`` true, ``x is not None`` false: x is None there.
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            key = key_of(test.left)
            if key is not None and (isinstance(target.operator, cst.Is) == value) and isinstance(target.operator, (cst.Is, cst.IsNot)):
                known.setdefault(key, NONE)
        return
    key = key_of(test)
    if key is not None:
        known.setdefault(key, value)


def _operands(test: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, operator):
        return _operands(test.left, operator) + _operands(test.right, operator)
    return [test]


def dead(program: Program, node: cst.CSTNode, known: Known, depth: int = 0) -> bool:
    """Whether ``known`` makes ``node`` unreachable: it lies in a branch whose test is known
    the other way, or after an ``if TEST:`` that always leaves with ``TEST`` known true."""
    if not known or depth > 8:
        return False
    for statement, in_body in _enclosing(program, node):
        if in_body is None:
            if isinstance(statement, cst.If) and _taken_branch_leaves(program, statement, known, depth):
                return True
        elif isinstance(statement, cst.If):
            if truth(program, statement.test, known, depth) is (not in_body):
                return True
    return False


def _taken_branch_leaves(program: Program, statement: cst.If, known: Known, depth: int) -> bool:
    """Whether the branch of ``if`` / ``elif`` / ``else`` that ``known`` decides is taken
    always leaves (``if mode == "gpu": return ...`` with ``mode`` known to be ``"gpu"``)."""
    branch: cst.If | cst.Else | None = statement
    while isinstance(branch, cst.If):
        test = truth(program, branch.test, known, depth)
        if test is None:
            return False
        if test:
            return _leaves(branch.body)
        branch = branch.orelse
    return isinstance(branch, cst.Else) and _leaves(branch.body)
