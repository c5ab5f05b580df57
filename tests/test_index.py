"""The index (one walk instead of libcst's metadata providers) must agree with libcst's own
ScopeProvider, QualifiedNameProvider and PositionProvider on every fixture and on this
project's own sources."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import (
    MetadataWrapper,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
)
from libcst.metadata.scope_provider import Assignment

from autofix.analysis.program import Program
from autofix.tf.symbols import canonical
from fixturecases import FIXTURES, ROOT, read

# The fixtures, and real code of every shape: comprehensions, closures, classes, globals.
SOURCES = (
    sorted(FIXTURES.rglob("*.py"))
    + sorted((ROOT / "src" / "autofix" / "tf").glob("*.py"))
    + sorted((ROOT / "src" / "autofix" / "analysis").rglob("*.py"))
    + [ROOT / "src" / "autofix" / "output" / "suggestions.py", ROOT / "src" / "autofix" / "smoke" / "harness.py"]
)


def pairs(text: str):
    module = cst.parse_module(text)
    return module, MetadataWrapper(module, unsafe_skip_copy=True), Program(module, text)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_positions_match_libcst(path):
    module, wrapper, program = pairs(read(path))
    expected = wrapper.resolve(PositionProvider)
    for node, where in expected.items():
        if isinstance(node, (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement, cst.Arg)):
            assert program.position(node) == where, node


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_positions_with_other_newlines(newline):
    text = read(FIXTURES / "tfd001" / "strategy_after_model.py").replace("\n", newline)
    module, wrapper, program = pairs(text)
    for node, where in wrapper.resolve(PositionProvider).items():
        if isinstance(node, (cst.Call, cst.BaseStatement)):
            assert program.position(node) == where


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_qualified_names_match_libcst(path):
    module, wrapper, program = pairs(read(path))
    names = wrapper.resolve(QualifiedNameProvider)
    for node, value in names.items():
        if not isinstance(node, (cst.Name, cst.Attribute)):
            continue
        parent = program.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue  # a member name, not a name read
        found = value() if callable(value) else value
        theirs = {canonical(q.name) for q in found if q.source in (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN)}
        access = program.access(node if isinstance(node, cst.Name) else _root(node))
        if access is None:
            continue  # a name being bound, not read
        if isinstance(node, cst.Attribute) and any(b.kind == "builtin" for b in access.referents):
            continue  # libcst stops at the builtin (``builtins.dict`` for ``dict.fromkeys``)
        if any(b.kind == "import" and b.node is access.node for b in access.referents):
            # ``tf`` read in a file whose only source for it is a star import: TensorFlow by
            # convention (tests below), which libcst does not assume.
            assert not theirs and all(n.split(".")[0] in ("tensorflow", "numpy", "keras") for n in program.qualified_names(node))
            continue
        conventional = [b for b in access.referents if b.kind == "import" and b.name in program.index.conventional]
        if conventional:
            # ``from layers.common import tf``: TensorFlow by convention, where libcst reads
            # the project module's name.
            assert all(n.split(".")[0] in ("tensorflow", "numpy", "keras") for n in program.qualified_names(node))
            assert all(not n.startswith(("tensorflow.", "numpy.", "keras.")) for n in theirs)
            continue
        assert program.qualified_names(node) == theirs, program.module.code_for_node(node)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_bindings_match_libcst(path):
    module, wrapper, program = pairs(read(path))
    scopes = wrapper.resolve(ScopeProvider)
    checked = 0
    for scope in {id(s): s for s in scopes.values() if s is not None}.values():
        for access in scope.accesses:
            if not isinstance(access.node, cst.Name):
                continue
            theirs = {a.node for a in access.referents if type(a) is Assignment}
            mine = program.access(access.node)
            assert mine is not None, program.module.code_for_node(access.node)
            ours = {b.node for b in mine.referents if b.kind not in ("import", "builtin")}
            if not theirs and all(b.scope.kind == "comprehension" for b in mine.referents):
                # libcst misses a target of a comprehension's second ``for`` read in its
                # ``if`` ({x for i in a for s in b if s}); the index sees it.
                continue
            if theirs < ours and any(_walrus_in_comprehension(program, n) for n in ours):
                # libcst keeps ``(x := ...)`` inside a comprehension in the comprehension's
                # scope; Python binds it in the containing one (PEP 572), as the index does,
                # so the name's other bindings in that scope reach it too.
                continue
            assert ours == theirs, (access.node.value, program.position(access.node))
            checked += 1
    assert checked or "def " not in read(path)


def _walrus_in_comprehension(program, node) -> bool:
    parent = program.parent(node)
    if not (isinstance(parent, cst.NamedExpr) and parent.target is node):
        return False
    while parent is not None:
        if isinstance(parent, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            return True
        parent = program.parent(parent)
    return False


def test_walrus_in_a_comprehension_binds_in_the_function():
    text = "def f(xs):\n    found = [y for x in xs if (y := x + 1)]\n    return y\n"
    namespace: dict = {}
    exec(text, namespace)
    assert namespace["f"]([1, 2]) == 3  # Python: the walrus binds in f's scope
    module, _, program = pairs(text)
    read_y = module.body[0].body.body[1].body[0].value
    referents = program.access(read_y).referents
    assert [type(program.parent(b.node)).__name__ for b in referents] == ["NamedExpr"]


def _root(node):
    while isinstance(node, cst.Attribute):
        node = node.value
    return node


def test_this_suite_covers_real_code():
    assert len(SOURCES) > 100
    assert all(isinstance(p, Path) and p.exists() for p in SOURCES)


def test_tf_and_np_of_a_star_import_are_tensorflow_and_numpy():
    """A file that star-imports a module and never binds ``tf`` / ``np`` reads TensorFlow and
    NumPy through it (the aliases every script writes); without a star import, or bound in the
    file, they are what the file says."""
    star = "from layers.common import *\nx = tf.keras.layers.Dense(2)\ny = np.zeros(3)\n"
    program = Program(cst.parse_module(star), source=star)
    calls = [n for n in program.index.calls]
    assert {tuple(sorted(program.qualified_names(c.func))) for c, _ in calls} == {("keras.layers.Dense",), ("numpy.zeros",)}
    alone = "x = tf.keras.layers.Dense(2)\n"
    program = Program(cst.parse_module(alone), source=alone)
    assert all(not program.qualified_names(c.func) for c, _ in program.index.calls)
    bound = "from layers.common import *\nimport mytf as tf\nx = tf.keras.layers.Dense(2)\n"
    program = Program(cst.parse_module(bound), source=bound)
    assert {n for c, _ in program.index.calls for n in program.qualified_names(c.func)} == {"mytf.keras.layers.Dense"}
