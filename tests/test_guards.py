"""What holds on the path to a line (autofix.analysis.core.guards): facts from enclosing ifs
and earlier ifs that always leave, and the code they make dead."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.core import guards
from autofix.analysis.program import Program
from autofix.analysis.syntax import nodes_in

SOURCE = '''\
def fit(self):
    if self.adaptive and self.dist:
        raise ValueError("no")
    if self.n > 1 and self.dist:
        print("warn")
    if self.dist:
        run(self)
    else:
        local(self)


def loss(self, weights=None):
    if self.adaptive:
        flag = self.table[0]
    else:
        flag = False
    if flag:
        return one()
    if weights is not None:
        return two()
    if not self.adaptive:
        return three()
    return four()
'''


def program() -> Program:
    return Program(cst.parse_module(SOURCE), SOURCE)


def call(p: Program, name: str) -> cst.Call:
    return next(c for c in nodes_in(p.module, cst.Call) if isinstance(c.func, cst.Name) and c.func.value == name)


def test_a_raising_guard_and_an_enclosing_if_make_facts():
    p = program()
    assert guards.known_at(p, call(p, "run")) == {"self.dist": True, "self.adaptive": False}
    # A guard that does not leave says nothing; the else branch knows the test is false.
    assert guards.known_at(p, call(p, "local")) == {"self.dist": False}


def test_dead_code_under_the_facts():
    p = program()
    known = {"self.adaptive": False, "weights": guards.NONE}
    assert guards.dead(p, call(p, "one"), known)  # the flag is False on every live path
    assert guards.dead(p, call(p, "two"), known)
    assert not guards.dead(p, call(p, "three"), known)
    assert guards.dead(p, call(p, "four"), known)  # after `if not self.adaptive: return`
    assert not any(guards.dead(p, call(p, name), {}) for name in ("one", "two", "three", "four"))
    assert not guards.dead(p, call(p, "one"), {"weights": guards.NONE})
