"""Reading and writing source files without losing their encoding, BOM, newlines or mode.

Newlines are never translated: the text handed to libcst keeps ``\\r\\n`` where the file had it,
and libcst reproduces it, so a CRLF file stays CRLF.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import io
import os
import re
import stat
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be read as Python source; the message is for the user."""


class ChangedOnDisk(SourceError):
    pass


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str
    bom: bool
    digest: str

    def encode(self, text: str) -> bytes:
        return encode(text, self.encoding, self.bom)


def digest(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def decode(raw: bytes) -> Source:
    """Decode file bytes the way Python itself would (BOM, PEP 263 coding cookie, else UTF-8)."""
    if b"\0" in raw[:8192]:
        raise SourceError("binary file (it contains NUL bytes), not Python source")
    encoding = _declared_encoding(raw)
    bom = raw.startswith(codecs.BOM_UTF8)
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = raw[len(codecs.BOM_UTF8) :] if bom else raw
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        raise SourceError(
            f"line {line}: not valid {encoding} (byte {body[exc.start]:#04x}); "
            "add a coding declaration or re-save it as UTF-8"
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r} in its coding declaration") from None
    return Source(text=text, encoding=encoding, bom=bom, digest=digest(raw))


# Where Python looks for a coding declaration: the first two lines (any newline ends one).
_FIRST_LINES = re.compile(rb"^[^\r\n]*(?:\r\n|\r|\n)?[^\r\n]*")


def _declared_encoding(raw: bytes) -> str:
    """The encoding Python reads ``raw`` in: its coding declaration (tokenize's reading of
    it), else UTF-8. Without the word ``coding`` in its first two lines a file has none, and
    tokenize is not needed."""
    if b"coding" not in _FIRST_LINES.match(raw).group():
        return "utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8"
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if "encoding problem" in str(exc.msg) or "unknown encoding" in str(exc.msg):
            raise SourceError(f"bad coding declaration: {exc.msg}") from None
        encoding = "utf-8"  # undecodable first lines: decoding below says where
    return encoding


def encode(text: str, encoding: str, bom: bool) -> bytes:
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"the fixed text cannot be written as {encoding}: {exc.reason}") from None
    return codecs.BOM_UTF8 + data if bom else data


def read_source(path: str) -> Source:
    if os.path.isdir(path):
        raise SourceError("is a directory, not a file")
    try:
        # Not blocking: opening a FIFO for reading would wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SourceError("not a regular file")
            raw = fh.read()
    except FileNotFoundError:
        raise SourceError("no such file") from None
    except PermissionError:
        raise SourceError("permission denied while reading") from None
    except OSError as exc:
        raise SourceError(f"cannot be read: {exc.strerror or exc}") from None
    return decode(raw)


def write_atomic(path: str, data: bytes, expected_digest: str) -> None:
    """Replace ``path`` with ``data`` unless it changed since it was read (``expected_digest``).

    The new content goes to a temporary file in the same directory, which is renamed over the
    original, so a reader (or a crash) sees either the old or the new file, never half of one.
    On Linux the temporary file has no name until the moment before the rename, and a watcher
    process (``tempguard``) removes it if autofix is killed in that moment. Mode and (where
    allowed) owner are kept. Symlinks are followed: the file they point to is replaced, the
    link itself stays.
    """
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except OSError as exc:
        raise SourceError(f"cannot be written: {exc.strerror or exc}") from None
    # Refused even for root, who may write anything: a read-only file is read-only on purpose.
    if not os.access(target, os.W_OK) or not st.st_mode & 0o222:
        raise SourceError("is read-only; not modified")
    from autofix import tempguard

    directory = os.path.dirname(target) or "."
    temp_name = None
    try:
        temp_name = _write_temp(directory, os.path.basename(target), data, st)
        with open(target, "rb") as current:
            if digest(current.read()) != expected_digest:
                raise ChangedOnDisk("changed on disk since it was read; not overwritten")
        os.replace(temp_name, target)
        tempguard.release(temp_name)
        temp_name = None
    except OSError as exc:
        raise SourceError(f"cannot be written: {exc.strerror or exc}") from None
    finally:
        if temp_name is not None:
            try:
                os.unlink(temp_name)
            except OSError:
                pass
            tempguard.release(temp_name)


def _temp_path(directory: str, base: str) -> str:
    import secrets

    return os.path.join(directory, f".{base}.autofix-{secrets.token_hex(4)}.tmp")


def _fill(fd: int, data: bytes, st: os.stat_result) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.fsync(fd)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass


def _link_fd(fd: int, name: str) -> None:
    """Give the anonymous file ``fd`` a name: linkat(fd, "", AT_EMPTY_PATH), else through /proc."""
    libc = _libc()
    if libc is not None:
        if libc.linkat(fd, b"", _AT_FDCWD, os.fsencode(name), _AT_EMPTY_PATH) == 0:
            return
    os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)


_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000


@functools.lru_cache(maxsize=1)
def _libc():
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.linkat  # noqa: B018 - missing on some C libraries
        return libc
    except (OSError, AttributeError, ImportError):
        return None


# Devices where linking an O_TMPFILE file failed once: not tried again in this process.
_NO_ANONYMOUS_LINK: set[int] = set()


def _write_temp(directory: str, base: str, data: bytes, st: os.stat_result) -> str:
    """Write ``data`` to a new file next to the target and return its name.

    Where the system allows it, the file is written without a name (O_TMPFILE) and only
    linked in once complete: a crash while writing leaves nothing behind.
    """
    from autofix import tempguard

    flag = getattr(os, "O_TMPFILE", 0)
    if flag and st.st_dev not in _NO_ANONYMOUS_LINK:
        try:
            fd = os.open(directory, flag | os.O_WRONLY, 0o600)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                _fill(fd, data, st)
                name = _temp_path(directory, base)
                tempguard.guard(name)
                try:
                    _link_fd(fd, name)
                except OSError:
                    tempguard.release(name)
                    raise
                return name
            except OSError:
                # Some file systems (overlayfs) cannot link such files: use a named one.
                _NO_ANONYMOUS_LINK.add(st.st_dev)
            finally:
                os.close(fd)
    name = _temp_path(directory, base)
    tempguard.guard(name)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except BaseException:
        tempguard.release(name)
        raise
    try:
        _fill(fd, data, st)
    except BaseException:
        os.close(fd)
        os.unlink(name)
        tempguard.release(name)
        raise
    os.close(fd)
    return name


def write_all(writes: list[tuple[str, bytes, str]]) -> None:
    """Write every ``(path, data, expected_digest)`` or none: a fix that spans files.

    Each file is checked first (writable, and its bytes still those it was read as); a refusal
    raises :class:`SourceError` naming the file before anything is written. A write that then
    fails puts back the files already written (their old bytes, atomically) and raises."""
    old: list[bytes] = []
    for path, _data, expected in writes:
        target = os.path.realpath(path)
        try:
            with open(target, "rb") as fh:
                current = fh.read()
            mode = os.stat(target).st_mode
        except OSError as exc:
            raise SourceError(f"{path} cannot be written: {exc.strerror or exc}") from None
        if not os.access(target, os.W_OK) or not mode & 0o222:
            raise SourceError(f"{path} is read-only; no file of the fix was modified")
        if digest(current) != expected:
            raise ChangedOnDisk(f"{path} changed on disk since it was read; no file of the fix was modified")
        old.append(current)
    done: list[int] = []
    try:
        for index, (path, data, expected) in enumerate(writes):
            write_atomic(path, data, expected)
            done.append(index)
    except SourceError as exc:
        for index in reversed(done):
            path, data, _ = writes[index]
            try:
                write_atomic(path, old[index], digest(data))
            except SourceError:
                pass
        raise SourceError(f"{exc}; the files of the fix already written were put back") from None
