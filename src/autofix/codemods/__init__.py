"""autofix's rules, shipped as ``autofix.codemods``.

In a checkout (and an editable install) the rules live in the repository's top-level
``codemods/`` folder, the layout contributors see and ``python -m libcst.tool codemod`` reads
through ``.libcst.codemod.yaml``; this module makes that folder this package. A wheel does not
contain this file: the build puts ``codemods/`` itself here (see pyproject.toml).
"""

import os as _os

# (os.path, not pathlib: the result cache's key imports this package on every run.)
_checkout = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.realpath(__file__))))), "codemods")
__path__ = [_checkout]
# The package's own module body (ORDER, its docstring) is the checkout's __init__.py.
with open(_os.path.join(_checkout, "__init__.py"), encoding="utf-8") as _source:
    exec(compile(_source.read(), _os.path.join(_checkout, "__init__.py"), "exec"))
