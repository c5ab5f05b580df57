"""Report formats for ``autofix check``. Each turns results into text; only the CLI prints it."""

from autofix.output.formats import Formatter, GithubFormatter, JsonFormatter, TextFormatter
from autofix.output.sarif import SarifFormatter
from autofix.output.suggestions import SuggestionsFormatter

FORMATS: dict[str, type[Formatter]] = {
    f.name: f for f in (TextFormatter, JsonFormatter, GithubFormatter, SarifFormatter, SuggestionsFormatter)
}

__all__ = ["FORMATS", "Formatter"]
