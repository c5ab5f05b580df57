"""The mutation suite of ``autofix smoke --compare``: operators that change a migrated training
script in ways a right migration may (``right``) or must not (``wrong``), so that the proof can
be scored on them (see README.md here and ../mutants.py).

Each family of operators is one module of this package; the operators of ``heldout/`` are kept
out of the default run (``--heldout`` selects them), so that the proof can be measured on
mutants its author did not tune it on. A module registers its operators by being here.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Sequence

from mutants.core import REGISTRY, RIGHT, WRONG, Kind, Mutant, Program, Registered, run_operators

__all__ = ["Kind", "Mutant", "Program", "RIGHT", "WRONG", "kinds", "mutants_of", "operators"]

HERE = Path(__file__).resolve().parent
_LOADED = False


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.iter_modules([str(HERE)]):
        if info.name not in ("core", "facts") and not info.ispkg:
            importlib.import_module(f"mutants.{info.name}")
    for info in pkgutil.iter_modules([str(HERE / "heldout")]):
        importlib.import_module(f"mutants.heldout.{info.name}")
    _LOADED = True


def operators(heldout: bool = False, only: Sequence[str] = ()) -> list[Registered]:
    """The registered operators: the main set, or (``heldout``) the held-out one; ``only``
    keeps the kinds named."""
    _load()
    chosen = [r for r in REGISTRY if r.kind.heldout == heldout]
    if only:
        chosen = [r for r in chosen if r.kind.name in only]
    return chosen


def kinds(heldout: bool = False) -> list[Kind]:
    return [r.kind for r in operators(heldout)]


def mutants_of(text: str, path: str = "script.py", *, replicas: int = 2, heldout: bool = False, only: Sequence[str] = (), max_per_kind: int | None = None) -> list[Mutant]:
    """The mutants of a migrated file (a script's text, or a notebook's JSON text: its code
    cells are mutated as one program and written back into their cells)."""
    if path.endswith(".ipynb"):
        return _notebook_mutants(text, replicas, heldout, only, max_per_kind)
    program = Program(text, replicas)
    return run_operators(program, operators(heldout, only), max_per_kind)


def _notebook_mutants(text, replicas, heldout, only, max_per_kind) -> list[Mutant]:
    from autofix import notebooks

    notebook = notebooks.load(text)
    program = Program(notebook.program, replicas)
    found = []
    for mutant in run_operators(program, operators(heldout, only), None):
        try:
            written = notebooks.rebuild(notebook, mutant.text)
        except notebooks.NotebookError:
            continue  # an edit across cells
        found.append(Mutant(mutant.kind, mutant.label, mutant.family, mutant.what, written, mutant.line, notebook.in_cells(f"line {mutant.line}")))
    if max_per_kind is not None:
        counts: dict[str, int] = {}
        kept = []
        for mutant in found:
            counts[mutant.kind] = counts.get(mutant.kind, 0) + 1
            if counts[mutant.kind] <= max_per_kind:
                kept.append(mutant)
        found = kept
    return found
