"""Hooks that record where a script writes (child side).

Recorded, with the absolute path each was given: Keras ``Model.save`` and ``save_weights``
(Keras 3 and tf-keras), ``tf.train.Checkpoint.save`` / ``write``,
``tf.train.CheckpointManager.save``, ``tf.saved_model.save``, and any file the script's Python
code opens for writing (``sys.addaudithook``'s ``open`` event: ``open(..., "w")``, ``np.save``,
``json.dump`` to a file, ``CSVLogger``...). What a hooked API writes inside itself is not
recorded again. Each write names the Keras callback it came through (``ModelCheckpoint``,
``BackupAndRestore``...), found on the stack, and the line of the script.

In a multi-worker run this tells which paths every worker wrote: two workers writing one path
race on a shared file system. Files written from C++ by other means (TensorBoard event files,
HDF5 files opened by h5py outside ``save_weights``) are not seen.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from autofix.smoke.state import WriteRec, recorder, user_site

_ignored_dirs: tuple[str, ...] = ()
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def install(harness_dir: str) -> None:
    """The TensorFlow hooks, and the audit hook for Python's own opens. ``harness_dir`` (the
    runner's logs and events) is never recorded."""
    global _ignored_dirs
    import tensorflow as tf

    _ignored_dirs = (os.path.realpath(harness_dir) + os.sep, "/dev/", "/proc/", "/sys/")
    _hook(tf.train.Checkpoint, "save", "Checkpoint.save", _first_arg("file_prefix"))
    _hook(tf.train.Checkpoint, "write", "Checkpoint.write", _first_arg("file_prefix"))
    _hook(tf.train.CheckpointManager, "save", "CheckpointManager.save", lambda self, a, k: self.directory)
    module = sys.modules.get("tensorflow.python.saved_model.save")
    if module is not None:
        original = module.save
        wrapped = _writer(original, "tf.saved_model.save", _arg(1, "export_dir"), method=False)
        module.save = wrapped
        tf.saved_model.save = wrapped
    sys.addaudithook(_audit)


def install_keras(module: Any) -> None:
    model = module.Model
    _hook(model, "save", "model.save", _first_arg("filepath"))
    _hook(model, "save_weights", "model.save_weights", _first_arg("filepath"))


def _first_arg(name: str):
    def path(self, args, kwargs):
        return args[0] if args else kwargs.get(name)

    return path


def _arg(index: int, name: str):
    def path(_none, args, kwargs):
        return args[index] if len(args) > index else kwargs.get(name)

    return path


def _hook(cls: type, name: str, api: str, path_of) -> None:
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_autofix_smoke_write", False):
        return
    setattr(cls, name, _writer(original, api, path_of, method=True))


def _writer(original, api: str, path_of, method: bool):
    @functools.wraps(original)
    def call(*args, **kwargs):
        if recorder.write_depth == 0 and recorder.script_dir:
            try:
                owner, rest = (args[0], args[1:]) if method else (None, args)
                path = path_of(owner, rest, kwargs)
                if path is not None:
                    _record(api, path)
            except Exception:  # recording never fails the script
                pass
        recorder.write_depth += 1
        try:
            return original(*args, **kwargs)
        finally:
            recorder.write_depth -= 1

    call._autofix_smoke_write = True
    return call


def _record(api: str, path: Any) -> None:
    path = os.fsdecode(os.fspath(path)) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    if "://" not in path:
        path = os.path.abspath(path)
        if path.startswith(_ignored_dirs) or "__pycache__" in path:
            return
    recorder.wrote(WriteRec(api, path, _via(), user_site(3)))


def _via() -> str | None:
    """The Keras callback on the stack, if the write comes through one."""
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is not None:
            for name in ("keras", "tf_keras"):
                keras = sys.modules.get(name)
                callback = getattr(getattr(keras, "callbacks", None), "Callback", None)
                if callback is not None and isinstance(owner, callback):
                    return type(owner).__name__
        frame = frame.f_back
    return None


def _temporary() -> bool:
    """A write through the tempfile module (autograph's generated code, a library's scratch
    file): a fresh name each time, never a path two workers share."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(os.sep + "tempfile.py"):
            return True
        frame = frame.f_back
    return False


def _audit(event: str, args: tuple) -> None:
    if event != "open" or recorder.write_depth or not recorder.script_dir:
        return
    try:
        path, mode, flags = args
        if isinstance(path, int):
            return
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & WRITE_FLAGS)
        if writes and not _temporary():
            recorder.write_depth += 1  # what _record does must not come back here
            try:
                _record("open", path)
            finally:
                recorder.write_depth -= 1
    except Exception:
        pass
