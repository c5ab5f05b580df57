"""Report formats for ``autofix check``. Each turns results into text; only the CLI prints it."""

from autofix.output.formats import FORMATS, Formatter

__all__ = ["FORMATS", "Formatter"]
