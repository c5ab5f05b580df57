"""A fix never enters the scope of a strategy whose name is bound only on some paths to it.

``analysis.facts.contexts.unbound_on_a_path`` says where a function's local name may be unbound
at a block (bound only in one branch of an ``if`` before it); TFD001 then reports without a
fix (fixtures/tfd001/report_scope_strategy_bound_on_some_paths.py, where it used to wrap the
model in ``with strategy.scope():`` and the single-device path raised UnboundLocalError).
"""

from __future__ import annotations

import libcst as cst
import pytest

from autofix.analysis.facts.contexts import unbound_on_a_path
from autofix.analysis.program import Program


def _last_block(source: str) -> tuple[Program, cst.IndentedBlock]:
    program = Program(cst.parse_module(source), source=source)
    function = next(s for s in program.module.body if isinstance(s, cst.FunctionDef))
    return program, function.body  # type: ignore[return-value]


@pytest.mark.parametrize(
    "before, unbound",
    [
        ("    if gpus:\n        s = make()\n", True),
        ("    if gpus:\n        s = make()\n    else:\n        s = other()\n", False),
        ("    if gpus:\n        s = make()\n    elif cpu:\n        s = other()\n", True),
        ("    if gpus:\n        s = make()\n    elif cpu:\n        s = other()\n    else:\n        return\n", False),
        ("    if gpus:\n        s = make()\n    else:\n        raise SystemExit\n", False),
        ("    try:\n        s = make()\n    except ValueError:\n        s = other()\n", False),
        ("    try:\n        s = make()\n    except ValueError:\n        print('no')\n", True),
        ("    for s in make():\n        pass\n", True),
        ("    s = None\n    if gpus:\n        s = make()\n", False),
        ("    with make() as s:\n        pass\n", False),
        ("    import s\n", False),
    ],
)
def test_a_local_bound_only_on_some_paths_is_found(before, unbound):
    source = "def f(gpus, cpu):\n" + before + "    use(s)\n"
    program, body = _last_block(source)
    found = unbound_on_a_path(program, "s", body, after=len(body.body) - 2)
    assert (found is not None) is unbound


def test_a_parameter_a_global_or_a_block_past_the_binding_is_not_asked():
    program, body = _last_block("def f(s):\n    use(s)\n")
    assert unbound_on_a_path(program, "s", body) is None
    program, body = _last_block("def f():\n    use(s)\n")
    assert unbound_on_a_path(program, "s", body) is None
    # Inside the branch that makes it, the name is bound.
    source = "def f(gpus):\n    if gpus:\n        s = make()\n        use(s)\n"
    program, body = _last_block(source)
    inner = body.body[0].body  # the if's block
    assert unbound_on_a_path(program, "s", inner, after=0) is None


def test_at_the_module_level_a_global_bound_in_one_branch_is_found():
    source = "import sys\nif len(sys.argv) > 1:\n    s = make()\nif True:\n    use(s)\n"
    program = Program(cst.parse_module(source), source=source)
    inner = program.module.body[2].body  # the second if's block
    assert unbound_on_a_path(program, "s", inner) is not None
    source = "import sys\nif len(sys.argv) > 1:\n    s = make()\nelse:\n    s = other()\nif True:\n    use(s)\n"
    program = Program(cst.parse_module(source), source=source)
    assert unbound_on_a_path(program, "s", program.module.body[2].body) is None
