"""autofix's rules, shipped as ``autofix.codemods``.

In a checkout (and an editable install) the rules live in the repository's top-level
``codemods/`` folder, the layout contributors see and ``python -m libcst.tool codemod`` reads
through ``.libcst.codemod.yaml``; this module makes that folder this package. A wheel does not
contain this file: the build puts ``codemods/`` itself here (see pyproject.toml).
"""

from pathlib import Path as _Path

_checkout = _Path(__file__).resolve().parents[3] / "codemods"
__path__ = [str(_checkout)]
# The package's own module body (ORDER, its docstring) is the checkout's __init__.py.
exec(compile((_checkout / "__init__.py").read_text(encoding="utf-8"), str(_checkout / "__init__.py"), "exec"))
