"""The values the engine hands back: plain, frozen and picklable, so they cross process pools."""

from __future__ import annotations

from dataclasses import dataclass


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
    # Notebook cell (0-based index among all cells) the finding is in, if any.
    cell: int | None = None
    suppressed: bool = False
    # The line of the ``# autofix: ignore`` comment that suppressed it.
    suppressed_by: int | None = None


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

    def describe_error(self, shown_path: str | None = None) -> str:
        return f"{shown_path or self.path}: {self.error}"

    @property
    def changed(self) -> bool:
        return self.new_text is not None and self.new_text != self.old_text
