"""The project: a file seen with the modules of its repository that it imports.

:mod:`.layout` finds a file's project (its root: the nearest folder with ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``, else the folder autofix runs in when the file is under
it, else the file's own folder) and the files its imports
of the project's own modules name (the script's folder on ``sys.path``, the root, a ``src/``
layout, relative imports, packages). :mod:`.summary` says what a module defines at its top
level, each definition summarised once per content (a function that returns a Keras model and
whether it only builds it, a model class with its own ``train_step``, an integer constant...).
:mod:`.imports` answers, for a name read in one program, which project file and which
definition it resolves to, or which import autofix could not resolve. :mod:`.callers` answers
the reverse: which other modules of the project call (or use) a top-level function or class of
a file, with what; only the files that spell its name are parsed, and the answer is recorded
for the result cache by the digest of those files.

A program with no path (standard input, a file read alone by tests) has no project: it is
analysed as a single file.
"""
