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


MODES = '''\
def make(mode="gpu", n=2):
    if mode == "gpu":
        return gpu()
    elif mode in ("tpu", "tpu_pod"):
        return tpu()
    if n != 2:
        return other()
    return last()
'''


def test_a_name_known_to_hold_a_constant_decides_comparisons():
    p = Program(cst.parse_module(MODES), MODES)
    gpu = {"mode": guards.Literal("gpu"), "n": guards.Literal(2)}
    assert not guards.dead(p, call(p, "gpu"), gpu)
    assert all(guards.dead(p, call(p, name), gpu) for name in ("tpu", "other", "last"))
    tpu = {"mode": guards.Literal("tpu_pod"), "n": guards.Literal(2)}
    assert guards.dead(p, call(p, "gpu"), tpu)
    assert not guards.dead(p, call(p, "tpu"), tpu)
    assert guards.dead(p, call(p, "other"), tpu)
    # Unknown mode: its tests are unknown; n = 3 leaves before last().
    assert not any(guards.dead(p, call(p, name), {"n": guards.Literal(3)}) for name in ("gpu", "tpu", "other"))
    assert guards.dead(p, call(p, "last"), {"n": guards.Literal(3)})
    # A string is never equal to a number, the string "None" is not None.
    assert guards.dead(p, call(p, "gpu"), {"mode": guards.Literal(2)})
    assert guards.literal(cst.parse_expression('"None"')) == guards.Literal("None") != guards.NONE


def test_returns_a_call_cannot_reach_are_not_what_it_returns():
    from autofix.analysis.core.value_flow import Values

    source = MODES.replace("gpu()", "Gpu()").replace("tpu()", "Tpu()").replace("other()", "Other()").replace("last()", "Last()") + (
        'a = make()\nb = make("tpu")\nc = make(choice)\nd = make("tpu", n=3)\n\n\ndef remade(mode="gpu"):\n    mode = mode.lower()\n'
        '    if mode == "gpu":\n        return Gpu()\n    return Tpu()\n\n\ne = remade()\n'
    )
    p = Program(cst.parse_module(source), source)
    values = Values.of(p)
    functions = {f.name.value: f for f in nodes_in(p.module, cst.FunctionDef)}

    def returned(target: str) -> set[str]:
        assign = next(a for a in nodes_in(p.module, cst.Assign) if a.targets[0].target.value == target)
        function = functions[assign.value.func.value]
        return {o.node.func.value for o in values.returned(function, assign.value)}

    assert returned("a") == {"Gpu"}
    assert returned("b") == {"Tpu"}
    assert returned("c") == {"Gpu", "Tpu", "Last"}  # the mode is not a constant; n is 2 by default
    assert returned("d") == {"Tpu"}
    assert returned("e") == {"Gpu", "Tpu"}  # the parameter is bound again before the test
