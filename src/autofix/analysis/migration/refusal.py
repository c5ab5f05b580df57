"""Why a script is not migrated, at the place that shows it: what every part of
``analysis/migration`` hands back when it cannot show a rewrite right."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Refusal:
    """Why the script is not migrated, at the place that shows it."""

    node: cst.CSTNode
    reason: str
