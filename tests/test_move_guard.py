"""The general guard on moves: no fix moves a statement across one that can leave the block
(``return``, ``raise``, ``break``, ``continue``, ``assert``, ``sys.exit()``, also inside a local
function it calls) or across a call of a local function that configures devices.

Random programs are assembled from statements that fixes move (the strategy, models,
optimizers, compile, batched datasets) and statements they must never cross (early exits and
device setup, inline or in helpers), in random order; whatever the rules fix, every such
barrier keeps exactly the statements it had before it.
"""

from __future__ import annotations

import re

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autofix.engine import Options, analyse

ALL_RULES = Options(unsafe_fixes=True)

HELPERS = '''import sys
import tensorflow as tf
from tensorflow import keras


def setup_devices():
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def grow_memory():
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)


def give_up(code):
    print("nothing to train")
    sys.exit(code)


'''

# Statements a fix may move or wrap: each binds a name that marks it.
MOVABLE = (
    "strategy = tf.distribute.MirroredStrategy()",
    "m{n} = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])",
    "o{n} = keras.optimizers.Adam(1e-3)",
    "d{n} = tf.data.Dataset.from_tensor_slices((tf.zeros([64, 4]), tf.zeros([64, 1]))).batch(32)",
)
# Statements nothing may cross: each marks itself with a name (``flag{n}``, ``setup{n}``...).
BARRIERS = (
    "if flag{n}:\n        return {n}",
    "if flag{n}:\n        raise SystemExit({n})",
    "assert flag{n}, 'flag{n}'",
    "if flag{n}:\n        give_up({n})",
    "setup{n} = setup_devices()",
    "grow{n} = grow_memory()",
    "sys.exit({n}) if flag{n} else None",
)


@st.composite
def programs(draw) -> str:
    count = draw(st.integers(2, 7))
    lines = []
    models = []
    for n in range(count):
        if draw(st.booleans()):
            template = draw(st.sampled_from(MOVABLE))
            if template.startswith("strategy") and any(line.startswith("strategy") for line in lines):
                continue
            if template.startswith("m"):
                models.append(n)
            lines.append(template.format(n=n))
        else:
            lines.append(draw(st.sampled_from(BARRIERS)).format(n=n))
    if not any(line.startswith("strategy") for line in lines):
        lines.insert(draw(st.integers(0, len(lines))), MOVABLE[0])
    for n in models:
        optimizer = next((line.split(" =")[0] for line in lines if line.startswith("o")), '"adam"')
        dataset = next((line.split(" =")[0] for line in lines if line.startswith("d")), None)
        lines.append(f"m{n}.compile(optimizer={optimizer}, loss='mse')")
        lines.append(f"m{n}.fit({dataset}, epochs=1)" if dataset else f"m{n}.fit(tf.zeros([8, 4]), tf.zeros([8, 1]))")
    flags = ", ".join(f"flag{n}=False" for n in range(count))
    body = "".join(f"    {line}\n" for line in lines)
    return f"{HELPERS}def main({flags}):\n{body}"


_MARK = re.compile(r"\b(strategy|m\d+|o\d+|d\d+)\b\s*=")
_BARRIER = re.compile(r"\b(flag\d+|setup\d+|grow\d+)\b")


def order(text: str) -> list[tuple[str, str]]:
    """The marks of ``main``'s statements in the order they run: ("move", name) for what a
    fix may move, ("barrier", name) for what it must not cross."""
    module = cst.parse_module(text)
    main = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "main")
    found: list[tuple[str, str]] = []

    def walk(statements):
        for statement in statements:
            if isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock):
                walk(statement.body.body)
                continue
            code = module.code_for_node(statement.with_changes(leading_lines=()))
            barrier = _BARRIER.search(code)
            mark = _MARK.match(code.strip())
            if barrier and not code.strip().startswith(("m", "o", "d")):
                found.append(("barrier", barrier.group(1)))
            elif mark:
                found.append(("move", mark.group(1)))

    walk(main.body.body)
    return found


def before_each_barrier(marks: list[tuple[str, str]]) -> dict[str, set[str]]:
    seen: set[str] = set()
    result: dict[str, set[str]] = {}
    for kind, name in marks:
        if kind == "barrier":
            result[name] = set(seen)
        else:
            seen.add(name)
    return result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_no_fix_moves_a_statement_across_an_exit_or_device_setup(text):
    analysis = analyse(text, ALL_RULES)
    if analysis.new_text is None:
        return
    assert before_each_barrier(order(analysis.new_text)) == before_each_barrier(order(text)), analysis.new_text


def test_the_guard_sees_what_it_guards():
    """The property above can fail: without barriers, the same program is fixed by moving the
    strategy up (so a barrier in the way would change what runs before it)."""
    text = (
        f"{HELPERS}def main():\n"
        "    m1 = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "    strategy = tf.distribute.MirroredStrategy()\n"
        "    m1.compile(optimizer='adam', loss='mse')\n"
        "    m1.fit(tf.zeros([8, 4]), tf.zeros([8, 1]))\n"
    )
    fixed = analyse(text, ALL_RULES).new_text
    assert fixed is not None and fixed.index("strategy = tf.distribute") < fixed.index("m1 = keras.Sequential")
    for barrier in ("    if flag:\n        return 1\n", "    setup1 = setup_devices()\n", "    if flag:\n        give_up(1)\n"):
        guarded = text.replace("def main():\n", "def main(flag=False):\n").replace(
            "    strategy = tf.distribute", barrier + "    strategy = tf.distribute"
        )
        analysis = analyse(guarded, ALL_RULES)
        assert analysis.new_text is None
        assert any("no automatic fix" in (f.message + (f.reason or "")) or f.reason for f in analysis.findings if f.code == "TFD001")
