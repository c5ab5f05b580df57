"""``--format sarif``: a SARIF 2.1.0 log for GitHub code scanning and other SARIF viewers.

One run; ``tool.driver.rules`` lists every rule with its documentation (from the rule module's
docstring and examples); each finding is a result whose ``ruleIndex`` points into that list. A
fixable finding carries its share of the file's fix as ``fixes[0].artifactChanges[0]
.replacements`` (divided as described in :mod:`autofix.output.fixes`). Files that could not be
analysed, and fixes refused by the safety checks, are ``toolExecutionNotifications`` of the
invocation.

Artifact URIs are relative to the source root (``%SRCROOT%``): the git work tree that holds the
working directory, else the working directory, since code scanning resolves relative URIs
against the repository root. Suppressed findings are left out, as in the other formats.
"""

from __future__ import annotations

import json
import os
import re
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

from autofix import __version__, registry
from autofix.output.fixes import Replacement, file_fixes
from autofix.output.formats import Formatter, finding_note
from autofix.output.locations import file_region, notebook_positions, root_relative, source_root
from autofix.results import FileResult, Finding
from autofix.rule import Rule

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
# GitHub truncates longer rule descriptions.
DESCRIPTION_LIMIT = 1024


class SarifFormatter(Formatter):
    name = "sarif"

    def __init__(self, unsafe_fixes: bool = False) -> None:
        super().__init__(unsafe_fixes)
        self.rules = registry.all_rules()
        self.rule_index = {rule.CODE: i for i, rule in enumerate(self.rules)}
        self.root = source_root()
        self.results: list[dict] = []
        self.notifications: list[dict] = []
        self.errors = 0

    def result(self, result: FileResult) -> str:
        location = self._artifact(result.path)
        fixes = file_fixes(result)
        positions = notebook_positions(result)
        for index, finding in enumerate(result.findings):
            if finding.suppressed:
                continue
            replacements = fixes.by_finding.get(index, ()) if fixes is not None else ()
            artifact = location if finding.path is None else self._artifact(finding.path)
            out = self._result(finding, artifact, replacements, positions)
            if finding.related:
                # SARIF's own place for what explains a result: relatedLocations, each with an
                # id, a message and a region of one line.
                # (A place in the notebook analysed is a line of a cell, not of its JSON text:
                # its message names the cell, and it has no region.)
                out["relatedLocations"] = [
                    {
                        "id": number,
                        "physicalLocation": {"artifactLocation": location if path in (None, result.path) else self._artifact(path)}
                        | ({} if result.notebook and path in (None, result.path) else {"region": {"startLine": line}}),
                        "message": {"text": message},
                    }
                    for number, (path, line, message) in enumerate(finding.related)
                ]
            self.results.append(out)
        if result.error:
            self.errors += 1
            self.notifications.append(_notification("error", result.error, location))
        if result.refused:
            self.notifications.append(_notification("warning", f"fix not applied: {result.refused}", location))
        return ""

    def finish(self) -> str:
        invocation = {
            "executionSuccessful": self.errors == 0,
            "workingDirectory": {"uri": _directory_uri(os.getcwd())},
        }
        if self.notifications:
            invocation["toolExecutionNotifications"] = self.notifications
        run = {
            "tool": {"driver": _driver(self.rules)},
            "invocations": [invocation],
            "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(self.root)}},
            "columnKind": "unicodeCodePoints",
            "results": self.results,
        }
        log = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}
        return json.dumps(log, indent=2, ensure_ascii=False) + "\n"

    def _artifact(self, path: str) -> dict:
        if path == "-":
            return {"uri": "-"}
        relative = root_relative(path, self.root)
        if relative is None:
            return {"uri": Path(os.path.abspath(path)).as_uri()}
        return {"uri": quote(relative, safe="/"), "uriBaseId": SRCROOT}

    def _result(self, finding: Finding, artifact: dict, replacements: tuple[Replacement, ...], positions=None) -> dict:
        line, column, end_line, end_column = file_region(finding, positions)
        region = {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}
        physical: dict = {"artifactLocation": artifact, "region": region}
        location: dict = {"physicalLocation": physical}
        if finding.cell is not None:
            # SARIF has no notion of cells: the region is in the notebook's JSON text (where
            # code scanning shows it, and where the fixes apply); the properties give the cell
            # (its number from 1 and its index from 0, as the json format does) and the place
            # in it.
            location["properties"] = {
                "cell": finding.cell_number,
                "cellIndex": finding.cell,
                "cellLine": finding.line,
                "cellColumn": finding.column,
            }
        out: dict = {"ruleId": finding.code}
        if finding.code in self.rule_index:
            out["ruleIndex"] = self.rule_index[finding.code]
        out["level"] = level(finding, self.unsafe_fixes)
        out["message"] = {"text": f"{finding.message}{finding_note(finding)}"}
        out["locations"] = [location]
        if replacements:
            out["fixes"] = [
                {
                    "description": {"text": f"{finding.code}: {finding.message}"},
                    "artifactChanges": [
                        {"artifactLocation": artifact, "replacements": [_replacement(r) for r in replacements]}
                    ],
                }
            ]
        return out


def level(finding: Finding, unsafe_fixes: bool = False) -> str:
    """Suggestions (findings of unsafe rules, unless --unsafe-fixes makes them count) are
    notes; findings, which fail `check`, are warnings."""
    return "note" if finding.unsafe and not unsafe_fixes else "warning"


def _replacement(r: Replacement) -> dict:
    out: dict = {
        "deletedRegion": {
            "startLine": r.start_line,
            "startColumn": r.start_column,
            "endLine": r.end_line,
            "endColumn": r.end_column,
            "charOffset": r.char_offset,
            "charLength": r.char_length,
        }
    }
    if r.content:
        out["insertedContent"] = {"text": r.content}
    return out


def _notification(level_: str, message: str, artifact: dict) -> dict:
    return {
        "level": level_,
        "message": {"text": message},
        "locations": [{"physicalLocation": {"artifactLocation": artifact}}],
    }


def _driver(rules: tuple[type[Rule], ...]) -> dict:
    driver = {
        "name": "autofix",
        "version": __version__,
        "semanticVersion": __version__,
    }
    uri = information_uri()
    if uri:
        driver["informationUri"] = uri
    driver["rules"] = [rule_descriptor(rule) for rule in rules]
    return driver


def rule_descriptor(rule: type[Rule]) -> dict:
    summary, body = registry.rule_doc(rule)
    level_ = "warning" if rule.SAFE else "note"
    fix = "safe" if rule.SAFE else "unsafe (only with --unsafe-fixes)"
    return {
        "id": rule.CODE,
        "name": rule.NAME,
        "shortDescription": {"text": rule.DESCRIPTION},
        "fullDescription": {"text": _limit(summary or rule.DESCRIPTION)},
        "help": {"text": _help_text(rule, body, fix), "markdown": _help_markdown(rule, body, fix)},
        "defaultConfiguration": {"level": level_},
        "properties": {"tags": ["tf.distribute", "keras"], "fix": "safe" if rule.SAFE else "unsafe"},
    }


def _limit(text: str) -> str:
    return text if len(text) <= DESCRIPTION_LIMIT else text[: DESCRIPTION_LIMIT - 1].rstrip() + "…"


def _help_text(rule: type[Rule], body: str, fix: str) -> str:
    parts = [f"{rule.CODE} {rule.NAME}: {rule.DESCRIPTION}. Fix: {fix}."]
    if body:
        parts.append(body)
    for title, text in registry.rule_examples(rule):
        parts.append(f"{title}:\n\n{text.rstrip()}")
    return "\n\n".join(parts) + "\n"


def _help_markdown(rule: type[Rule], body: str, fix: str) -> str:
    parts = [f"**{rule.CODE} {rule.NAME}**: {rule.DESCRIPTION}. Fix: {fix}."]
    if body:
        parts.append(body)
    for title, text in registry.rule_examples(rule):
        lang = "python" if title == "Left alone" else "diff"
        fence = _fence(text)
        parts.append(f"{title}:\n\n{fence}{lang}\n{text.rstrip()}\n{fence}")
    return "\n\n".join(parts) + "\n"


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def information_uri(dist: str = "autofix") -> str | None:
    """The project's home page from the installed package's metadata (``[project.urls]``)."""
    try:
        meta = metadata.metadata(dist)
    except metadata.PackageNotFoundError:
        return None
    urls = {}
    for entry in meta.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        urls[label.strip().lower()] = url.strip()
    for label in ("homepage", "home", "documentation", "source", "repository"):
        if urls.get(label, "").startswith(("https://", "http://")):
            return urls[label]
    home = meta.get("Home-page") or ""
    return home if home.startswith(("https://", "http://")) else None


def _directory_uri(path: str) -> str:
    uri = Path(path).as_uri()
    return uri if uri.endswith("/") else uri + "/"
