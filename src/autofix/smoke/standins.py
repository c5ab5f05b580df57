"""Stand-ins for display-only packages a script imports but this Python does not have
(matplotlib, Pillow, imageio, seaborn, tensorflow_docs, IPython, pydot, tqdm).

A smoke test asks whether training is distributed and, with ``--compare``, whether it computes
what the original did: what a script draws or saves as pictures plays no part in that, and a
tutorial that imports matplotlib at its top would otherwise stop before it trains. So such a
package, when it is not installed, is served by a stand-in whose every attribute, call, item
and result is another stand-in (iterating one gives two, so ``fig, ax = plt.subplots()``
works), and the report notes it (``matplotlib is not installed: a stand-in that draws nothing
was used``). tqdm's stand-in is a bar that iterates what it wraps (its other methods are stand-ins). An installed package is always
the real one; nothing else is stood in for (pandas, scipy and other packages that compute are
the script's own business: without them it fails as it would anywhere).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable

DISPLAY_ONLY = ("matplotlib", "PIL", "imageio", "seaborn", "tensorflow_docs", "IPython", "pydot", "tqdm")


class StandIn:
    """Anything a display call may return: every use of it gives another stand-in."""

    def __call__(self, *args, **kwargs):
        return StandIn()

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return StandIn()

    def __getitem__(self, key):
        return StandIn()

    def __setitem__(self, key, value) -> None:
        pass

    def __iter__(self):
        return iter((StandIn(), StandIn()))

    def __len__(self) -> int:
        return 2

    def __bool__(self) -> bool:
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __str__(self) -> str:
        return ""

    def __format__(self, spec: str) -> str:
        return ""

    def __mro_entries__(self, bases):
        # ``class Plotter(SomeStandIn):``: a plain base instead.
        return (StandIn,)

    def _same(self, *args, **kwargs):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _same
    __neg__ = __pos__ = __abs__ = _same


class _Bar(StandIn):
    """A tqdm bar's stand-in: it iterates (and counts) what it wraps; every other use of it
    (``bar.set_description(...)``, ``bar.update()``, ``bar.close()``) is a stand-in."""

    def __init__(self, iterable) -> None:
        self._iterable = iterable

    def __iter__(self):
        return iter(self._iterable)

    def __len__(self) -> int:
        return len(self._iterable)


def _tqdm(iterable=None, *args, **kwargs):
    """tqdm's stand-in: a bar over the iterable it wraps, or a bar that counts nothing."""
    return _Bar(iterable) if iterable is not None else StandIn()


def _trange(*args, **kwargs):
    return range(*args)


class _Module(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        root = self.__name__.split(".")[0]
        if root == "tqdm" and name in ("tqdm", "tqdm_notebook"):
            return _tqdm
        if root == "tqdm" and name in ("trange", "tnrange"):
            return _trange
        return StandIn()


class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Placed last on ``sys.meta_path``: asked only for modules no real finder has."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self.note = note
        self.missing: dict[str, bool] = {}

    def _missing(self, root: str) -> bool:
        known = self.missing.get(root)
        if known is None:
            known = self.missing[root] = importlib.machinery.PathFinder.find_spec(root) is None
        return known

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.split(".")[0]
        if root not in DISPLAY_ONLY or not self._missing(root):
            return None
        if fullname == root:
            self.note(f"{root} is not installed: a stand-in that draws and shows nothing was used")
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []  # a package: its submodules are stand-ins too
        return module

    def exec_module(self, module) -> None:
        pass


def is_stand_in(module: object) -> bool:
    return isinstance(module, _Module)


def install(note: Callable[[str], None]) -> None:
    if not any(isinstance(finder, StandIns) for finder in sys.meta_path):
        sys.meta_path.append(StandIns(note))
