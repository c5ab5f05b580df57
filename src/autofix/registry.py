"""Finds the rules: every :class:`~autofix.rule.Rule` subclass defined in a module (or package) of
``autofix.codemods`` (the repository's ``codemods/`` folder).

The engine never names a rule. Adding a rule is adding a module to ``codemods/``.

Importing this module does not import the rules (nor libcst): :func:`all_rules` does.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence, TypeVar

if TYPE_CHECKING:
    from autofix.rule import Rule

R = TypeVar("R")


class UnknownRule(ValueError):
    pass


@dataclass(frozen=True)
class RuleInfo:
    """What is known of a rule without importing it (spelled as the rule's class attributes,
    so that :func:`select` takes either)."""

    CODE: str
    NAME: str
    SAFE: bool
    OPT_IN: bool
    CROSS_FILE: bool
    MIGRATION: bool = False

    @classmethod
    def of(cls, rule: type) -> "RuleInfo":
        return cls(rule.CODE, rule.NAME, rule.SAFE, rule.OPT_IN, rule.CROSS_FILE, rule.MIGRATION)

    def as_json(self) -> dict:
        return asdict(self)


def infos() -> tuple[RuleInfo, ...]:
    """Every rule, described, in the order they run (imports them)."""
    return tuple(RuleInfo.of(rule) for rule in all_rules())


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, in the order they run (``codemods.ORDER``, then by code)."""
    from autofix.rule import Rule

    package = importlib.import_module("autofix.codemods")
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


def select(
    select: tuple[str, ...] | None, ignore: tuple[str, ...] = (), among: Sequence[R] | None = None, migrating: bool = False
) -> tuple[R, ...]:
    """The rules to run, among ``among`` (rule classes or :class:`RuleInfo`; default: every
    rule class). Codes may be prefixes (``TFD00``) or ``ALL``; unknown ones raise. An opt-in
    rule (TFD005) runs only when its own code is selected: no prefix, ``ALL`` or default
    selection includes it. A migration rule (TFD010) runs only when ``migrating`` (``autofix
    migrate``), which selects it unless it is ignored."""
    rules = all_rules() if among is None else among
    codes = [r.CODE for r in rules]
    regular = {r.CODE for r in rules if not r.OPT_IN}

    def matching(prefix: str, selecting: bool = False) -> set[str]:
        prefix = prefix.upper()
        found = {c for c in codes if c.startswith(prefix)} if prefix else set()
        if not found and prefix != "ALL":
            raise UnknownRule(prefix)
        found = set(codes) if prefix == "ALL" else found
        # Selecting by a prefix or ALL leaves opt-in rules out; naming one exactly takes it.
        return {c for c in found if c in regular or c == prefix} if selecting else found

    chosen = set(regular) if not select else set().union(*(matching(s, selecting=True) for s in select))
    migration = {r.CODE for r in rules if getattr(r, "MIGRATION", False)}
    chosen = chosen | migration if migrating else chosen - migration
    for code in ignore:
        chosen -= matching(code)
    return tuple(r for r in rules if r.CODE in chosen)


def rule_doc(rule: type) -> tuple[str, str]:
    """What ``autofix explain`` and SARIF's rule help say about ``rule``: the first paragraph
    after the title line of its module's docstring, and all of it after the title line; RST
    literals (````x````) become Markdown ones (```x```)."""
    doc = (sys.modules[rule.__module__].__doc__ or "").strip()
    body = doc.split("\n", 1)[1].strip() if "\n" in doc else ""
    body = body.replace("``", "`")
    summary = " ".join(body.split("\n\n", 1)[0].split()) if body else ""
    return summary, body


def rule_examples(rule: type) -> list[tuple[str, str]]:
    """``(title, text)`` for each of a rule's examples: "Fix" with a unified diff from before to
    after, or "Left alone" with the code."""
    out = []
    for example in rule.EXAMPLES:
        if example.after is None:
            out.append(("Left alone", example.before))
        else:
            import difflib

            delta = difflib.unified_diff(
                example.before.splitlines(keepends=True), example.after.splitlines(keepends=True), "before", "after"
            )
            out.append(("Fix", "".join(delta)))
    return out
