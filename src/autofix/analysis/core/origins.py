"""What the value flow speaks of: an :class:`Origin` (an expression a value may come from, with
the projections of it not looked into), the frame of a call a value is followed into, and what
the file's functions are."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

# A projection still to apply to a value: ("attr", name) or ("item", key).
Projection = tuple[str, object]
# The bindings of a function's parameters for one call of it (when a value is followed into
# the function from that call).
Frame = tuple[tuple[cst.Param, cst.BaseExpression | None], ...]
# The key of ``d[k]`` when ``k`` is not a constant: any item.
ANY = type("AnyItem", (), {"__repr__": lambda self: "ANY"})()


@dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    calls: list[cst.Call] = field(default_factory=list)
    returns: list[cst.Return] = field(default_factory=list)
    is_method: bool = False


@dataclass(frozen=True)
class Origin:
    """An expression a value may come from. ``path``: the attributes or items of it that
    the value is, which could not be looked into (empty: the value is ``node``'s own)."""

    node: cst.CSTNode
    path: tuple[Projection, ...] = ()

    @property
    def whole(self) -> bool:
        return not self.path


def literal_key(expr: cst.BaseExpression) -> object | None:
    """The constant an index or dict key expression stands for (an int or a string), or None."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.value, 0)
    if isinstance(expr, cst.SimpleString):
        try:
            return expr.evaluated_value
        except Exception:  # noqa: BLE001 - a byte string or an odd prefix: not a key we know
            return None
    return None
