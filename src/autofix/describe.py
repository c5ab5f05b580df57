"""What ``autofix rules`` and ``autofix explain`` tell a person about the rules: a listing
wrapped to the terminal, and one rule's description, limits and examples (from the rule
module's docstring and ``EXAMPLES``; see :mod:`autofix.registry`)."""

from __future__ import annotations

import textwrap

from autofix import registry

NOTES = (
    "Unsafe fixes are applied only with --unsafe-fixes; an opt-in rule runs only when "
    "--select names its code; a migration rule runs only under `autofix migrate`. "
    "`autofix explain CODE` says more about a rule."
)


def print_rules(console) -> None:
    """Every rule, one line each (code, name, kind of fix), its description indented below,
    on ``console`` (a rich console)."""
    from rich.text import Text

    # Wrapped to the terminal (80 columns when piped), never cut. One column is left free: a
    # line that fills the terminal exactly makes some terminals add an empty one.
    width = max(40, min(console.width if console.is_terminal else 80, 100)) - 1
    listed = registry.all_rules()
    name_width = max(len(rule.NAME) for rule in listed)
    indent = " " * 8
    for rule in listed:
        fix = "safe fix" if rule.SAFE else "unsafe fix"
        if rule.OPT_IN:
            fix += ", opt-in"
        if rule.MIGRATION:
            fix += ", autofix migrate only"
        head = Text()
        head.append(f"{rule.CODE:<6}", style="bold")
        head.append(f"  {rule.NAME:<{name_width}}  ")
        head.append(fix, style="dim")
        console.print(head)
        for line in textwrap.wrap(rule.DESCRIPTION, width=width - len(indent), break_on_hyphens=False):
            console.print(indent + line)
    console.print()
    for line in textwrap.wrap(NOTES, width=width):
        console.print(Text(line, style="dim"))


def explanation(code: str) -> str:
    """What ``autofix explain CODE`` prints; raises :class:`registry.UnknownRule` for a code
    that names no rule (nor TFD100)."""
    from autofix.unused_suppressions import UnusedSuppression

    try:
        rule = registry.rule_by_code(code)
    except registry.UnknownRule:
        if code.upper() != UnusedSuppression.CODE:
            raise
        rule = UnusedSuppression
    text = f"{rule.CODE} {rule.NAME}{'' if rule.SAFE else ' (unsafe fix: only with --unsafe-fixes)'}\n\n"
    text += f"{rule.DESCRIPTION}.\n\n"
    _, body = registry.rule_doc(rule)
    if body:
        text += body + "\n\n"
    for title, example in registry.rule_examples(rule):
        text += f"{title}:\n\n" + _indent(example) + "\n"
    return text


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))
