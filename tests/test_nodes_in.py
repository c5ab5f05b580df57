"""``nodes_in`` walks the tree through the nodes' fields; it must find what libcst's own walk
finds, in the same order, whatever the code (checked on every fixture and on code that uses
every kind of statement and expression whose fields are not in source order)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from autofix.analysis.syntax import _nodes_in_visited, nodes_in

ROOT = Path(__file__).resolve().parent.parent

EVERY_SHAPE = '''
import os, sys as system
from a.b import (c as d, e)
@decorator(arg=1)
@other
class Model(Base, metaclass=Meta):
    x: int = 3
    @property
    def f(self, a, /, b=2, *args, c, d=lambda q=1, *r, s=2, **t: q + s, e=lambda p, /, q: p, **kw) -> "T":
        y = a if b else (c if d else kw)
        z = {k: v for k, v in kw.items() if v async for w in a}
        w = [i * j for i in range(a) for j in range(i) if j]
        g = {i for i in b}
        h = (i for i in c)
        call(a, b, *args, key=value, **kw)
        s[1:2:3, ::2] = s[a, b]
        del s[0]
        try:
            pass
        except (ValueError, TypeError) as error:
            raise RuntimeError("x") from error
        else:
            pass
        finally:
            pass
        try:
            pass
        except* OSError as group:
            pass
        while (n := next(it)) is not None:
            if not n or n > 3 and n in s:
                continue
            elif -n:
                break
        with open(p) as f, ctx():
            yield from f
        match command:
            case [x, y, *rest] if x > 0:
                return x
            case {"k": v, **others}:
                return v
            case Point(x=0, y=yy) | Other() as whole:
                return whole
            case _:
                return None
        return f"{a!r:>{b}} {c}" + 'b' 'c'
async def main(q):
    async with lock:
        async for item in q:
            await item
    global state
    assert q, "message"
    x += 1; y @= 2
'''

KINDS = [cst.Name, cst.Call, cst.Attribute, cst.Assign, cst.BaseExpression, cst.BaseSmallStatement,
         cst.BaseCompoundStatement, cst.Arg, cst.Param, (cst.FunctionDef, cst.Lambda), cst.SimpleString,
         (cst.Return, cst.Raise, cst.Yield), cst.Decorator, cst.MatchPattern, cst.CSTNode, cst.Comma]
STOPS = [(), (cst.FunctionDef,), (cst.FunctionDef, cst.ClassDef, cst.Lambda)]


def _modules() -> list[tuple[str, cst.Module]]:
    modules = [("every_shape", cst.parse_module(EVERY_SHAPE))]
    for path in sorted((ROOT / "fixtures").rglob("*.py"))[::25]:
        try:
            modules.append((str(path.relative_to(ROOT)), cst.parse_module(path.read_text(encoding="utf-8"))))
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
    return modules


@pytest.mark.parametrize("name, module", _modules(), ids=lambda v: v if isinstance(v, str) else "")
def test_nodes_in_finds_what_libcst_visits(name: str, module: cst.Module) -> None:
    roots = [module, *nodes_in(module, (cst.FunctionDef, cst.ClassDef, cst.For, cst.Call))[:8]]
    for root in roots:
        for kind in KINDS:
            for stop in STOPS:
                assert [id(n) for n in nodes_in(root, kind, stop)] == [id(n) for n in _nodes_in_visited(root, kind, stop)], (name, kind, stop)


def test_every_shape_is_walked_through_fields() -> None:
    module = cst.parse_module(EVERY_SHAPE)
    names = [n.value for n in nodes_in(module, cst.Name)]
    assert names[:4] == ["os", "sys", "system", "a"]
    assert "rest" in names and "group" in names and "state" in names
