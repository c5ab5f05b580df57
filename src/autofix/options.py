"""What a run asks of the engine: the rules, their fixes, what to compute.

Light on purpose (no libcst): the rules are only imported when :meth:`Options.rules` is called,
so that a run answered from the result cache does not load them. :meth:`Options.rule_infos`
says which rules run (code, name, flags) without importing them when ``known_rules`` lists
them (the result cache keeps that list for the version of the tool that made it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from autofix import registry
from autofix.discovery import link_chain, relative_to, spec

if TYPE_CHECKING:
    from autofix.rule import Rule


# The strategies ``autofix migrate --strategy`` moves a script to (described in
# :mod:`autofix.analysis.migration.single_device`); the first is the default.
STRATEGIES = ("mirrored", "multiworker")


@dataclass(frozen=True)
class Options:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    # ``(glob, codes)`` pairs: rules not run on files matching the glob (gitignore-style,
    # relative to ``root``, the directory of the configuration that set them).
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    root: str | None = None
    # Report ``# autofix: ignore`` comments that suppress nothing (as TFD100 findings).
    unused_suppressions: bool = False
    # Compute the fixed text. ``check`` in a format that shows no fix skips it (and the
    # second pass that verifies it): whether a fix exists is known without building it.
    build_fixes: bool = True
    # ``check --add-noqa``: the result's new text is the file with an ``# autofix: ignore``
    # comment for each finding, instead of its fix.
    add_noqa: bool = False
    # ``autofix migrate --strategy KIND``: a file that trains on one device is moved to this
    # strategy (``"mirrored"``...); None for check, diff and fix.
    migrate: str | None = None
    # The text is the code a migration wrote, checked before it is shown: its strategy is for
    # several replicas, whatever GPUs the single-device script made visible.
    migrated_check: bool = False
    # The run's exclude globs (relative to ``exclude_root``, or to the folder autofix runs in):
    # a fix that would also edit an excluded file is refused.
    exclude: tuple[str, ...] = ()
    exclude_root: str | None = None
    # Every rule of this autofix, as the result cache recorded them (None: import the rules).
    known_rules: tuple[registry.RuleInfo, ...] | None = field(default=None, compare=False, repr=False)

    def rules(self) -> tuple[type[Rule], ...]:
        return _rules(self.select, self.ignore, self.migrate is not None)

    def rule_infos(self) -> tuple[registry.RuleInfo, ...]:
        """The rules that run, described; raises :class:`registry.UnknownRule` for a code
        that names none."""
        return registry.select(self.select, self.ignore, self.known_rules or registry.infos(), self.migrate is not None)

    def excludes(self, path: str) -> bool:
        """Whether ``path`` (a file another file's fix would edit) is excluded from the run."""
        if not self.exclude:
            return False
        from autofix.discovery import Discovery

        return Discovery(exclude=self.exclude, root=self.exclude_root).excluded_file(path)

    def fixes(self, rule: type[Rule]) -> bool:
        return rule.SAFE or self.unsafe_fixes

    def for_path(self, path: str) -> "Options":
        """These options with the per-file ignores that apply to ``path`` folded in: those
        that match it, and, for a symlink, those that match any path it leads through (the
        file whose code is analysed)."""
        if not self.per_file_ignores:
            return self
        relatives = [relative_to(hop, self.root) for hop in (path, *link_chain(path))]
        extra = [
            code
            for pattern, codes in self.per_file_ignores
            if any(_matches(pattern, relative) for relative in relatives)
            for code in codes
        ]
        if not extra:
            return self
        return replace(self, ignore=tuple(dict.fromkeys((*self.ignore, *extra))), per_file_ignores=())


@lru_cache(maxsize=256)
def _matches(pattern: str, relative: str) -> bool:
    return spec([pattern]).match_file(relative)


@lru_cache(maxsize=None)
def _rules(select, ignore, migrating: bool = False) -> tuple[type[Rule], ...]:
    return registry.select(select, ignore, migrating=migrating)
