"""What a file says about the environment it runs in, outside its Python code: the packages a
notebook's shell lines install (``!pip install tensorflow==2.9.1``). The notebook reader knows
them (they are masked out of the program the rules see); the engine sets them for the one
file being analysed (:func:`installed`), and the analysis reads them (:func:`current`).

Only what the file itself says counts, so a file's results still depend on its bytes alone.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterable, Iterator


@dataclass(frozen=True)
class Environment:
    # Why the file can only run on Keras 2, when what it installs says so, or None.
    keras2: str | None = None


_CURRENT: ContextVar[Environment] = ContextVar("autofix_environment", default=Environment())

# ``pip install tensorflow==2.9.1`` (also tensorflow-gpu / -cpu, ``~=``, ``<2.16``...).
_PIN = re.compile(r"\bpip3?\s+install\b.*?\btensorflow(?:-gpu|-cpu)?\s*(==|~=|<=?)\s*(\d+)\.(\d+)", re.IGNORECASE)
# ``%tensorflow_version 1.x`` (Colab).
_TF1 = re.compile(r"%tensorflow_version\s+1(\.|\b)")


def from_shell_lines(lines: Iterable[str]) -> Environment:
    """The environment a notebook's shell and magic lines set up."""
    for line in lines:
        if _TF1.search(line):
            return Environment(keras2=f"the notebook selects TensorFlow 1 ({line.strip()})")
        match = _PIN.search(line)
        if match is None:
            continue
        operator, major, minor = match.group(1), int(match.group(2)), int(match.group(3))
        # TensorFlow 2.16 made Keras 3 its Keras; before, tf.keras was Keras 2.
        old = (major, minor) < (2, 16) if operator in ("==", "~=", "<=") else (major, minor) <= (2, 16)
        if old:
            return Environment(keras2=f"the notebook installs an older TensorFlow ({line.strip()}), whose Keras is Keras 2")
    return Environment()


def current() -> Environment:
    return _CURRENT.get()


@contextmanager
def installed(environment: Environment) -> Iterator[None]:
    token = _CURRENT.set(environment)
    try:
        yield
    finally:
        _CURRENT.reset(token)
