"""Questions about the shape of code alone (no names resolved): a call's arguments, the names
and calls inside an expression, the root of an attribute chain."""

from __future__ import annotations

import dataclasses
import re

import libcst as cst


def argument(call: cst.Call, keyword: str, position: int | None = None) -> cst.Arg | None:
    """The argument ``call`` passes as ``keyword=``, or else at ``position`` (0-based, among
    plain positional arguments), if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    if position is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if position < len(positional):
            return positional[position]
    return None


def argument_value(call: cst.Call, keyword: str, position: int | None = None) -> cst.BaseExpression | None:
    arg = argument(call, keyword, position)
    return arg.value if arg is not None else None


def parameter_for(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg, bound: bool = False) -> cst.Param | None:
    """The parameter of ``function`` that ``arg`` of ``call`` binds (``bound``: a method
    called on its instance, which passes the first parameter, ``self``, itself)."""
    params = list(function.params.params)[1 if bound else 0:]
    if arg.keyword is not None:
        for param in [*params, *function.params.kwonly_params]:
            if param.name.value == arg.keyword.value:
                return param
        return None
    if arg.star:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    position = positional.index(arg)
    return params[position] if position < len(params) else None


def parameter_argument(function: cst.FunctionDef, call: cst.Call, param: cst.Param) -> cst.Arg | None:
    """The argument ``call`` passes for ``param`` (None when it uses the default)."""
    params = list(function.params.params)
    return argument(call, param.name.value, params.index(param) if param in params else None)


def root_name(expr: cst.BaseExpression) -> cst.Name | None:
    """``a`` in ``a.b.c`` (or ``a`` itself); None when the chain starts elsewhere."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr if isinstance(expr, cst.Name) else None


def target_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment target binds (``a``, ``a, (b, c)``, ``*rest``)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


def attribute_path(expr: cst.BaseExpression) -> tuple[str, ...] | None:
    """``("self", "model")`` for ``self.model``; None unless it is names and attributes."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    parts.append(expr.value)
    return tuple(reversed(parts))


class _Collector(cst.CSTVisitor):
    def __init__(self, names: bool, calls: bool) -> None:
        self.names: list[cst.Name] = []
        self.calls: list[cst.Call] = []
        self._want_names = names
        self._want_calls = calls

    def visit_Name(self, node: cst.Name) -> None:
        if self._want_names:
            self.names.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        # ``a.b``: ``b`` is not a name that is read.
        node.value.visit(self)
        return False

    def visit_Call(self, node: cst.Call) -> None:
        if self._want_calls:
            self.calls.append(node)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def names_in(node: cst.CSTNode | None) -> list[cst.Name]:
    """The names read in ``node`` (attribute names left out), in source order."""
    if node is None:
        return []
    collector = _Collector(names=True, calls=False)
    node.visit(collector)
    return collector.names


def nodes_in(root: cst.CSTNode, kind: type | tuple[type, ...], stop: tuple[type, ...] = ()) -> list:
    """The nodes of type ``kind`` in ``root`` (itself included), in source order, not looking
    inside nodes of a type in ``stop`` (other than ``root``: ``stop=(cst.FunctionDef,)`` keeps
    to one function's own body).

    The tree is walked through the nodes' fields, not with a libcst visitor, which rebuilds
    every node it passes (several times slower); the few node types whose fields are not
    declared in source order are read in the order the code is written. Punctuation and
    whitespace nodes may come out of order among their siblings: asked for, they are found by
    libcst's own walk."""
    walked = _WALKABLE.get(kind)
    if walked is None:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        walked = _WALKABLE[kind] = not any(issubclass(p, k) or issubclass(k, p) for p in _PUNCTUATION for k in kinds)
    if not walked:
        return _nodes_in_visited(root, kind, stop)
    found: list = []
    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, kind):
            found.append(node)
        if node is not root and isinstance(node, stop):
            continue
        pending.extend(reversed(_children(node)))
    return found


def _nodes_in_visited(root: cst.CSTNode, kind: type | tuple[type, ...], stop: tuple[type, ...]) -> list:
    found: list = []

    class Visitor(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind):
                found.append(node)
            return node is root or not isinstance(node, stop)

    root.visit(Visitor())
    return found


# Nodes that hold no code of their own: their order among their siblings is not kept by
# _children (a node's parentheses come after its value there).
_PUNCTUATION = (
    cst.BaseParenthesizableWhitespace, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket,
    cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Comma, cst.Dot,
    cst.Semicolon, cst.Colon, cst.AssignEqual, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp,
    cst.BaseUnaryOp, cst.BaseAugOp, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline,
    cst.Comment, cst.Asynchronous, cst.ImportStar,
)
_WALKABLE: dict[object, bool] = {}  # whether what is asked for is never punctuation
# Node types whose fields are declared in another order than the code is written in (a
# keyword argument's name after its value, decorators after the body...): the fields that hold
# code, in the order it is written; their other fields follow.
_SOURCE_ORDER: dict[type, tuple[str, ...]] = {
    cst.Arg: ("keyword", "value"),
    cst.FunctionDef: ("leading_lines", "decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("leading_lines", "decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
    cst.Parameters: ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params", "star_kwarg"),
    cst.MatchCase: ("pattern", "guard", "body"),
}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_order(kind: type) -> tuple[str, ...]:
    declared = tuple(f.name for f in dataclasses.fields(kind))
    first = tuple(name for name in _SOURCE_ORDER.get(kind, ()) if name in declared)
    return first + tuple(name for name in declared if name not in first)


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = _field_order(type(node))
    children: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            children.append(value)
        elif isinstance(value, (list, tuple)):
            children.extend(item for item in value if isinstance(item, cst.CSTNode))
    return children


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    """The calls in ``node`` (itself included, lambdas left out), outermost first."""
    collector = _Collector(names=False, calls=True)
    node.visit(collector)
    return collector.calls


# The statement put between the cells of a notebook analysed as one program: no statement
# may be moved into the same block as one, so that every fix stays inside its cell.
CELL_MARKER = "__autofix_cell__"


def is_wall(statement: cst.CSTNode) -> bool:
    """Whether ``statement`` is a notebook cell boundary (``__autofix_cell__(3)``)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    expr = statement.body[0]
    return (
        isinstance(expr, cst.Expr)
        and isinstance(expr.value, cst.Call)
        and isinstance(expr.value.func, cst.Name)
        and expr.value.func.value == CELL_MARKER
    )

def words(identifier: str) -> set[str]:
    """``numReplicasInSync`` / ``NUM_REPLICAS`` -> {"num", "replicas", ...}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", identifier)
    return {w for w in spaced.lower().split("_") if w}
