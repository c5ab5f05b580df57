"""Finds the rules: every :class:`~autofix.rule.Rule` subclass defined in a ``codemods`` module.

The engine never names a rule. Adding a rule is adding a module to ``codemods/``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

from autofix.rule import Rule


class UnknownRule(ValueError):
    pass


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, in the order they run (``codemods.ORDER``, then by code)."""
    package = importlib.import_module("codemods")
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                found[obj.CODE] = obj
    order = list(getattr(package, "ORDER", ()))
    rank = {code: i for i, code in enumerate(order)}
    return tuple(sorted(found.values(), key=lambda r: (rank.get(r.CODE, len(order)), r.CODE)))


def rule_by_code(code: str) -> type[Rule]:
    for rule in all_rules():
        if rule.CODE == code.upper():
            return rule
    raise UnknownRule(code)


def select(select: tuple[str, ...] | None, ignore: tuple[str, ...] = ()) -> tuple[type[Rule], ...]:
    """The rules to run. Codes may be prefixes (``TFD00`` selects all five); unknown ones raise."""
    rules = all_rules()
    codes = [r.CODE for r in rules]

    def matching(prefix: str) -> set[str]:
        found = {c for c in codes if c.startswith(prefix.upper())} if prefix else set()
        if not found and prefix.upper() != "ALL":
            raise UnknownRule(prefix)
        return set(codes) if prefix.upper() == "ALL" else found

    chosen = set(codes) if not select else set().union(*(matching(s) for s in select))
    for code in ignore:
        chosen -= matching(code)
    return tuple(r for r in rules if r.CODE in chosen)
