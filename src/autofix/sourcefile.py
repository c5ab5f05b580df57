"""Reading and writing source files without losing their encoding, BOM, newlines or mode.

Newlines are never translated: the text handed to libcst keeps ``\\r\\n`` where the file had it,
and libcst reproduces it, so a CRLF file stays CRLF.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import secrets
import stat
import tokenize
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
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(f"cannot tell its encoding: {exc.msg}") from None
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
        with open(path, "rb") as fh:
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
    On Linux the temporary file has no name until the moment before the rename, so even a
    SIGKILL leaves nothing behind. Mode and (where allowed) owner are kept. Symlinks are
    followed: the file they point to is replaced, the link itself stays.
    """
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except OSError as exc:
        raise SourceError(f"cannot be written: {exc.strerror or exc}") from None
    if not os.access(target, os.W_OK):
        raise SourceError("is read-only; not modified")
    directory = os.path.dirname(target) or "."
    fd, temp_name = _open_temp(directory, os.path.basename(target))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            try:
                os.fchown(fh.fileno(), st.st_uid, st.st_gid)
            except OSError:
                pass
            with open(target, "rb") as current:
                if digest(current.read()) != expected_digest:
                    raise ChangedOnDisk("changed on disk since it was read; not overwritten")
            if temp_name is None:
                temp_name = _link_anonymous(fh.fileno(), directory, os.path.basename(target))
        os.replace(temp_name, target)
        temp_name = None
    except OSError as exc:
        raise SourceError(f"cannot be written: {exc.strerror or exc}") from None
    finally:
        if temp_name is not None:
            try:
                os.unlink(temp_name)
            except OSError:
                pass


def _temp_path(directory: str, base: str) -> str:
    return os.path.join(directory, f".{base}.autofix-{secrets.token_hex(4)}.tmp")


def _open_temp(directory: str, base: str) -> tuple[int, str | None]:
    """An anonymous file (O_TMPFILE) where the system has them, else a named temporary file."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            return os.open(directory, flag | os.O_WRONLY, 0o600), None
        except OSError:
            pass
    name = _temp_path(directory, base)
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), name


def _link_anonymous(fd: int, directory: str, base: str) -> str:
    name = _temp_path(directory, base)
    os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
    return name
