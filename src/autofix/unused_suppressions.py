"""TFD100 unused-suppression: ``# autofix: ignore`` comments that suppress nothing.

Reported by ``autofix check --unused-suppressions``. A comment ``# autofix: ignore[TFD001]``
that no longer hides a finding (the code was fixed or moved, or the rule changed) hides the
next real finding on that line without anyone deciding so; this check names such comments so
that they can be removed. A comment is reported only for the rules that ran (``--select`` and
``--ignore`` are taken into account): a bare ``# autofix: ignore`` counts as used when it hides
a finding of any rule. There is no automatic fix: remove the comment, or narrow its codes.

Reported (the model is already built inside the scope, so TFD001 has nothing to hide)::

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()  # autofix: ignore[TFD001]
"""

from __future__ import annotations

from typing import Iterable

from autofix.results import Finding
from autofix.rule import Example
from autofix.suppressions import ALL, Suppressions


class UnusedSuppression:
    """Not a rule (it reads comments, not code): described like one for ``autofix explain``."""

    CODE = "TFD100"
    NAME = "unused-suppression"
    DESCRIPTION = "an `# autofix: ignore` comment that suppresses nothing (check --unused-suppressions)"
    SAFE = True
    EXAMPLES: tuple[Example, ...] = ()


def unused(suppressions: Suppressions, findings: Iterable[Finding], ran: Iterable[str]) -> list[Finding]:
    """Findings for the ``# autofix: ignore`` comments (for the rule codes in ``ran``) that
    suppressed none of ``findings``."""
    ran = set(ran)
    used: dict[int, set[str]] = {}
    for finding in findings:
        if finding.suppressed_by is not None:
            used.setdefault(finding.suppressed_by, set()).add(finding.code)
    out = []
    for line, codes in sorted(suppressions.by_line.items()):
        if ALL in codes:
            idle = [] if used.get(line) or not ran else ["all rules"]
        else:
            idle = sorted(c for c in codes & ran if c not in used.get(line, set()))
        if idle:
            out.append(
                Finding(
                    code=UnusedSuppression.CODE,
                    name=UnusedSuppression.NAME,
                    message=f"autofix: ignore comment suppresses nothing ({', '.join(idle)})",
                    line=line,
                    column=1,
                    end_line=line,
                    end_column=1,
                    fixable=False,
                )
            )
    return out
