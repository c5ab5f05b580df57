"""Where files are, for reports read by a code host: paths relative to the repository root."""

from __future__ import annotations

import os


def source_root(start: str | None = None) -> str:
    """The git work tree holding ``start`` (default: the working directory), else ``start``.

    Code hosts resolve report paths against the repository root, which is not the working
    directory when autofix runs in a subdirectory.
    """
    here = os.path.abspath(start or os.getcwd())
    directory = here
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return here
        directory = parent


def root_relative(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` with forward slashes; None when it lies outside ``root``
    (or is standard input)."""
    if path == "-":
        return None
    relative = os.path.relpath(os.path.abspath(path), root)
    if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
        return None
    return relative.replace(os.sep, "/")
