"""What a file says about the environment it runs in, outside its Python code: the packages a
notebook's shell lines install (``!pip install tensorflow==2.9.1``). The notebook reader knows
them (they are masked out of the program the rules see): a TensorFlow older than 2.16 or
a Keras older than 3 (``keras<3``, ``"tensorflow>=2.10,<2.16"``) means Keras 2; the engine sets them for the one
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
    # A notebook's ``%env NAME=VALUE`` lines: (the bytes of the literal that stands for the line
    # in the program the rules see, NAME, VALUE), so that a rule can tell where it runs.
    env: tuple[tuple[bytes, str, str], ...] = ()
    # The notebook's own ``pip install`` line of TensorFlow or Keras, whatever version: what it
    # runs is what it installs, not what its repository pins (``project/pins.py``).
    installs: str | None = None
    # Whether the file is a notebook: it runs on the runtime of the day (Colab's), whatever a
    # comment says it was tested with; only what it installs pins it.
    notebook: bool = False


_CURRENT: ContextVar[Environment] = ContextVar("autofix_environment", default=Environment())

# A ``pip install`` line (``!pip install``, ``%pip install``, ``pip3 install``).
_PIP = re.compile(r"\bpip3?\s+install\b(.*)", re.IGNORECASE)
# A requirement on TensorFlow or Keras and its version specifiers: ``tensorflow==2.9.1``,
# ``"tensorflow>=2.10,<2.16"``, ``keras<3``, ``tensorflow-gpu~=2.4``.
_REQUIREMENT = re.compile(
    r"(?<![\w.-])(tensorflow(?:-gpu|-cpu|-macos|-intel)?|keras)((?:\s*(?:==|~=|<=|<|>=|>|!=)\s*[\w.*]+\s*,?)+)",
    re.IGNORECASE,
)
_SPECIFIER = re.compile(r"(==|~=|<=|<|>=|>|!=)\s*(\d+)(?:\.(\d+))?")
# ``%tensorflow_version 1.x`` (Colab).
_TF1 = re.compile(r"%tensorflow_version\s+1(\.|\b)")
# The first version whose Keras is Keras 3: TensorFlow 2.16, Keras 3.0.
_KERAS3_FROM = {"tensorflow": (2, 16), "keras": (3, 0)}


def _older(operator: str, version: tuple[int, int], first: tuple[int, int]) -> bool:
    """Whether a specifier allows only versions older than ``first``."""
    if operator in ("==", "~=", "<="):
        return version < first
    if operator == "<":
        return version <= first
    return False


def _pins_keras2(arguments: str) -> str | None:
    """The requirement in a ``pip install`` line's arguments that keeps Keras 2, if any."""
    for match in _REQUIREMENT.finditer(arguments):
        package = match.group(1).lower()
        first = _KERAS3_FROM["keras" if package == "keras" else "tensorflow"]
        for operator, major, minor in _SPECIFIER.findall(match.group(2)):
            if _older(operator, (int(major), int(minor or 0)), first):
                return f"{match.group(1)}{match.group(2).strip()}"
    return None


def keras2_pin(command: str) -> str | None:
    """The requirement of a ``pip install`` command that keeps Keras 2 (``keras<3``,
    ``tensorflow==2.15.0``), if it is one that does."""
    match = _PIP.search(command)
    return _pins_keras2(match.group(1)) if match is not None else None


def from_shell_lines(lines: Iterable[str], env: tuple[tuple[bytes, str, str], ...] = ()) -> Environment:
    """The environment a notebook's shell and magic lines set up (``env``: its ``%env`` lines,
    see :attr:`Environment.env`)."""
    lines = list(lines)
    found = _keras2(lines)
    return Environment(keras2=found, env=env, installs=_installs(lines), notebook=True)


# TensorFlow or Keras named in a ``pip install`` line (not ``tensorflow-datasets``, ``keras-cv``).
_INSTALLED = re.compile(r"(?<![\w.-])(?:tensorflow(?:-gpu|-cpu|-macos|-intel)?|keras)(?![\w.-])", re.IGNORECASE)


def _installs(lines: Iterable[str]) -> str | None:
    for line in lines:
        match = _PIP.search(line)
        if match is not None and _INSTALLED.search(match.group(1)):
            return line.strip()
    return None


def _keras2(lines: Iterable[str]) -> str | None:
    for line in lines:
        if _TF1.search(line):
            return f"the notebook selects TensorFlow 1 ({line.strip()})"
        match = _PIP.search(line)
        if match is None:
            continue
        pinned = _pins_keras2(match.group(1))
        if pinned is None:
            continue
        if pinned.lower().startswith("keras"):
            return f"the notebook installs Keras 2 ({line.strip()})"
        # TensorFlow 2.16 made Keras 3 its Keras; before, tf.keras was Keras 2.
        return f"the notebook installs an older TensorFlow ({line.strip()}), whose Keras is Keras 2"
    return None


def current() -> Environment:
    return _CURRENT.get()


@contextmanager
def installed(environment: Environment) -> Iterator[None]:
    token = _CURRENT.set(environment)
    try:
        yield
    finally:
        _CURRENT.reset(token)
