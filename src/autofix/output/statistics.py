"""``autofix check --statistics``: how many findings of each rule, and how many are fixable.

Counts the findings ``check`` shows (suppressed ones are not counted), most frequent rule
first, as Ruff's ``--statistics`` does; in text (an aligned table) or JSON.
"""

from __future__ import annotations

import json
from collections import Counter

from autofix.output.formats import Formatter
from autofix.results import FileResult


class Statistics(Formatter):
    name = "statistics"

    def __init__(self, fmt: str = "text") -> None:
        super().__init__()
        self.fmt = fmt
        self.counts: Counter[str] = Counter()
        self.fixable: Counter[str] = Counter()
        self.names: dict[str, str] = {}

    def result(self, result: FileResult) -> str:
        for finding in result.findings:
            if finding.suppressed:
                continue
            self.counts[finding.code] += 1
            self.fixable[finding.code] += finding.fixable
            self.names[finding.code] = finding.name
        return ""

    def rows(self) -> list[dict]:
        order = sorted(self.counts, key=lambda code: (-self.counts[code], code))
        return [
            {"code": code, "name": self.names[code], "count": self.counts[code], "fixable": self.fixable[code]}
            for code in order
        ]

    def finish(self) -> str:
        rows = self.rows()
        if self.fmt == "json":
            return json.dumps(rows, indent=2) + "\n"
        if not rows:
            return ""
        count = max(len("count"), *(len(str(r["count"])) for r in rows))
        code = max(len("code"), *(len(r["code"]) for r in rows))
        name = max(len("name"), *(len(r["name"]) for r in rows))
        lines = [f"{'count':>{count}}  {'code':<{code}}  {'name':<{name}}  fixable"]
        for r in rows:
            lines.append(f"{r['count']:>{count}}  {r['code']:<{code}}  {r['name']:<{name}}  {r['fixable']:>7}")
        return "\n".join(lines) + "\n"
