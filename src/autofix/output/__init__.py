"""Report formats for ``autofix check``. Each turns results into text; only the CLI prints it.

The SARIF and suggestions formats are imported only when asked for: most runs print text.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from autofix.output.formats import Formatter

_WHERE = {
    "text": ("autofix.output.formats", "TextFormatter"),
    "json": ("autofix.output.formats", "JsonFormatter"),
    "github": ("autofix.output.formats", "GithubFormatter"),
    "sarif": ("autofix.output.sarif", "SarifFormatter"),
    "suggestions": ("autofix.output.suggestions", "SuggestionsFormatter"),
}


class _Formats(Mapping):
    def __getitem__(self, name: str) -> type[Formatter]:
        module, cls = _WHERE[name]
        return getattr(importlib.import_module(module), cls)

    def __iter__(self):
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)


FORMATS: Mapping[str, type[Formatter]] = _Formats()

__all__ = ["FORMATS", "Formatter"]
