"""The layers of the code stay layers: no module imports, directly or through others, a module
that imports it back (lazy imports inside functions count too, and so do imports made only for
type annotations: a circle of types is a circle of ideas)."""

from __future__ import annotations

import ast
from pathlib import Path

from fixturecases import ROOT


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for base, prefix in ((ROOT / "src" / "autofix", "autofix"), (ROOT / "codemods", "autofix.codemods")):
        for path in base.rglob("*.py"):
            parts = [p for p in path.relative_to(base).with_suffix("").parts if p != "__init__"]
            found[".".join([prefix, *parts])] = (path, path.name == "__init__.py")
    return found


def _imports(name: str, path: Path, package: bool, modules) -> set[str]:
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                base = name if package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # ``from package import submodule`` depends on the submodule, not on the package.
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(base)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, package, modules) for name, (path, package) in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lower_layers_do_not_import_the_rules_or_the_engine():
    modules = _modules()
    graph = {name: _imports(name, path, package, modules) for name, (path, package) in modules.items()}
    for name, imported in graph.items():
        if name.startswith(("autofix.tf", "autofix.analysis")):
            assert not {m for m in imported if not m.startswith(("autofix.tf", "autofix.analysis", "autofix.suppressions"))}, name


# The layers of autofix.analysis, bottom first ("" is the package's own modules: program,
# syntax, positions, environment, Derived). A module imports only from its own layer or lower
# ones. project/ (the modules of the repository a file imports) goes between core and facts:
# facts ask it what an imported name is.
ANALYSIS_LAYERS = ("", "core", "project", "facts", "steps", "training", "migration")


def _analysis_layer(name: str) -> int | None:
    """The index in ANALYSIS_LAYERS of an autofix.analysis module's layer (None outside it)."""
    parts = name.split(".")
    if parts[:2] != ["autofix", "analysis"]:
        return None
    sub = parts[2] if len(parts) > 2 and parts[2] in ANALYSIS_LAYERS else ""
    return ANALYSIS_LAYERS.index(sub)


def _upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    found = []
    for name, imported in sorted(graph.items()):
        layer = _analysis_layer(name)
        if layer is None:
            continue
        for other in sorted(imported):
            other_layer = _analysis_layer(other)
            if other_layer is not None and other_layer > layer:
                found.append((name, other))
    return found


def test_every_analysis_sub_package_has_its_layer():
    base = ROOT / "src" / "autofix" / "analysis"
    packages = {path.parent.name for path in base.glob("*/__init__.py")}
    assert packages == set(ANALYSIS_LAYERS) - {""}


def test_analysis_layers_import_only_their_own_or_lower_ones():
    modules = _modules()
    graph = {name: _imports(name, path, package, modules) for name, (path, package) in modules.items()}
    assert _upward_imports(graph) == []


def test_the_layer_check_finds_an_import_up_a_layer():
    graph = {
        "autofix.analysis.program": {"autofix.tf.index"},
        "autofix.analysis.core.origins": {"autofix.analysis.program"},
        "autofix.analysis.facts.script": {"autofix.analysis.core.value_flow", "autofix.analysis.facts.scopes"},
        "autofix.analysis.steps.custom": {"autofix.analysis.training.model"},
        "autofix.analysis.syntax": {"autofix.analysis.core"},
    }
    assert _upward_imports(graph) == [
        ("autofix.analysis.steps.custom", "autofix.analysis.training.model"),
        ("autofix.analysis.syntax", "autofix.analysis.core"),
    ]


def test_the_rule_in_docs_architecture_is_added_by_one_module(tmp_path, monkeypatch):
    """docs/architecture.md's "How to add a rule" holds: its example, saved as one module next
    to the rules, is found, selected and run, with nothing else changed."""
    import re

    import autofix.codemods
    from autofix import engine, registry

    page = (ROOT / "docs" / "architecture.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    folder = tmp_path / "more_rules"
    folder.mkdir()
    (folder / "tfd099_print_under_strategy.py").write_text(code)
    monkeypatch.setattr(autofix.codemods, "__path__", [*autofix.codemods.__path__, str(folder)])
    registry.all_rules.cache_clear()
    engine._rules.cache_clear()
    try:
        assert "TFD099" in [rule.CODE for rule in registry.all_rules()]
        source = "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\nprint(strategy)\n"
        analysis = engine.analyse(source, engine.Options(select=("TFD099",)))
        assert [(f.code, f.line, f.reason) for f in analysis.findings] == [
            ("TFD099", 3, "no automatic fix: it is only an example")
        ]
        (example,) = registry.rule_by_code("TFD099").EXAMPLES
        assert engine.analyse(example.before, engine.Options(select=("TFD099",))).findings == []
    finally:
        monkeypatch.undo()
        registry.all_rules.cache_clear()
        engine._rules.cache_clear()
    assert "TFD099" not in [rule.CODE for rule in registry.all_rules()]
