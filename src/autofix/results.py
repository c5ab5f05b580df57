"""The values the engine hands back: plain, frozen and picklable, so they cross process pools."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

# The message of a finding of `autofix migrate` that declines a migration (with the reason):
# the file trains on one device and is left as it was.
NOT_MIGRATED = "trains on one device: not migrated"


@dataclass(frozen=True)
class Finding:
    """One problem in one file.

    ``line``/``column`` are 1-based and point into the original text. ``fixable`` says whether
    the fix is applied by ``fix`` with the options given; when it is not, ``reason`` says why
    (for example ``"no automatic fix: the strategy is created twice"``).
    """

    code: str
    name: str
    message: str
    line: int
    column: int
    end_line: int
    end_column: int
    fixable: bool
    reason: str | None = None
    # From a rule whose fix may change what training computes (TFD005): a suggestion. It does
    # not make `check` fail unless --unsafe-fixes was given.
    unsafe: bool = False
    # The notebook cell the finding is in, if any, as the engine keys it: the index into the
    # notebook's ``cells`` list (from 0, markdown cells included). People read
    # :attr:`cell_number`.
    cell: int | None = None
    suppressed: bool = False
    # The line of the ``# autofix: ignore`` comment that suppressed it.
    suppressed_by: int | None = None
    # A finding placed in another file of the project than the one analysed (the file it was
    # found through is then in ``related``); None: the analysed file.
    path: str | None = None
    # Other places that explain the finding: (path, line, message), path None for the file
    # analysed (``("trainer.py", 26, "used by trainer.py:26")``).
    related: tuple[tuple[str | None, int, str], ...] = ()

    @property
    def cell_number(self) -> int | None:
        """The cell as every message, header and report names it: counted from 1, every cell
        of the notebook included (``train.ipynb:cell 5:2:9``)."""
        return None if self.cell is None else self.cell + 1


@dataclass(frozen=True)
class FileResult:
    """Everything the engine learned about one file.

    ``new_text`` is None when nothing changes (or when the fix was refused, with ``refused``
    saying why); ``error`` is set when the file could not be analysed or written, and says why
    (with the line where known); :meth:`describe_error` prefixes the path.
    """

    path: str
    findings: tuple[Finding, ...] = ()
    old_text: str | None = None
    new_text: str | None = None
    error: str | None = None
    # Why a fix that the rules produced is not applied (it did not parse, was not idempotent...).
    refused: str | None = None
    # Set by `fix` after writing: True when the file on disk now holds new_text.
    written: bool = False
    # Notebook files: the cell boundaries, for naming cells in diffs and findings.
    notebook: bool = False
    # Why the file was not analysed although it was found (e.g. `# autofix: ignore-file`).
    skipped: str | None = None
    # How the file's text is written on disk, for diffs that apply to its bytes.
    encoding: str = "utf-8"
    bom: bool = False
    # Digest of the bytes read (set when the file changes): a later write checks that the file
    # on disk is still those bytes.
    digest: str | None = None
    # The project modules the analysis read (path, digest; "" for one looked for and absent):
    # the result holds only while they are unchanged (see :mod:`autofix.cache`).
    read: tuple[tuple[str, str], ...] = ()
    # Other files the fix edits too (a migration that spans files): (path, digest of the bytes
    # read, old text, new text) for each. The fix is written whole or not at all.
    also: tuple[tuple[str, str, str, str], ...] = ()
    # How each of those files is written: (path, encoding, BOM), as read (its own, not this
    # file's); a file not listed is written as this one.
    also_encodings: tuple[tuple[str, str, bool], ...] = ()

    def encoding_of(self, path: str) -> tuple[str, bool]:
        """The encoding and BOM ``path`` (this file or another file its fix edits) is written in."""
        if path == self.path:
            return self.encoding, self.bom
        for other, encoding, bom in self.also_encodings:
            if other == path:
                return encoding, bom
        return self.encoding, False

    def describe_error(self, shown_path: str | None = None) -> str:
        return f"{shown_path or self.path}: {self.error}"

    @property
    def changed(self) -> bool:
        return self.new_text is not None and self.new_text != self.old_text

    @property
    def declined(self) -> bool:
        """Whether ``migrate`` declined to migrate the file: a finding says why it is not
        migrated (not suppressed), or the migration the rules made was refused."""
        return bool(self.refused) or any(f.message.startswith(NOT_MIGRATED) and not f.suppressed for f in self.findings)

    def settled(self, encoding: str, bom: bool, digest: str) -> "FileResult":
        """The result as it is handed out: an unchanged file keeps no text (results stay
        small however many files there are); a changed one says how its bytes are written."""
        if not self.changed:
            return replace(self, old_text=None, new_text=None)
        return replace(self, encoding=encoding, bom=bom, digest=digest)


def merged_elsewhere(results: list[FileResult]) -> list[FileResult]:
    """``results`` with each finding placed in another module (:attr:`Finding.path`) kept once:
    in the first result that has it, naming every file that found it (``related``); two
    trainers using one loss function of a loss module make one finding at its mean there."""
    def key(finding: Finding) -> tuple:
        return (os.path.normpath(finding.path or ""), finding.line, finding.column, finding.code, finding.message)

    related: dict[tuple, list[tuple[str | None, int, str]]] = {}
    for result in results:
        for finding in result.findings:
            if finding.path is not None:
                places = related.setdefault(key(finding), [])
                places.extend(r for r in finding.related if r not in places)
    merged = []
    for result in results:
        findings = []
        for finding in result.findings:
            if finding.path is None:
                findings.append(finding)
                continue
            places = related.pop(key(finding), None)
            if places is not None:  # its first result: the only one that keeps it
                findings.append(replace(finding, related=tuple(places)))
        merged.append(result if tuple(findings) == result.findings else replace(result, findings=tuple(findings)))
    return merged
