"""Bytecode for verified sources: compiled from the verified ``.py``, never read from ``__pycache__``.

Python runs ``__pycache__/<name>.<tag>.pyc`` in place of a source whose mtime and size the
pyc's header repeats, without reading the source (and an unchecked hash-based pyc without
even that), so a pyc beside a verified source is code nobody verified. Checking it would
mean compiling every source at verification (about 1.6 ms each, ~250 ms for Triton, on
every cold start); instead it is simply *not used*. For a module whose source a verified
manifest lists, the ``.pth`` hook's loader (:mod:`.autohook`) asks :func:`code_for`, which

1. checks that the source still has the identity (device, inode, size, mtime_ns, ctime_ns)
   it had when it was verified: a file changed since is refused (:class:`SourceChanged`);
2. returns the code compiled from that very file, kept in the runtime's own store
   (``<cache dir>/bytecode``, used only when this user owns it and no one else can write
   it), keyed by the source's path and stamped with its identity, so a warm import reads
   one small file, as Python's own pyc would cost.

Python's ``__pycache__`` is neither read nor written for these modules.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import sys
from types import CodeType

from ..base import read_chunks
from ..site import identity
from ..verification import cache_dir, unsafe_owner_or_mode

__all__ = ["SourceChanged", "code_for", "verified_source"]

_HEADER = struct.Struct("<16s5q")  # MAGIC_NUMBER padded, then the source's identity
_STORE: dict[str, str | None] = {}


class SourceChanged(ImportError):
    """A verified source changed between its verification and its import."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: changed since it was verified (verify.changed); not importing it", path=path)


def code_for(path: str, verified: list[object]) -> CodeType:
    """The code of the verified source at ``path`` (identity ``verified`` when it was checked)."""
    try:
        st = os.lstat(path)
    except OSError:
        raise SourceChanged(path) from None
    if not stat.S_ISREG(st.st_mode) or identity(st) != verified:
        raise SourceChanged(path)
    stored = _stored_path(path)
    code = _load(stored, verified) if stored else None
    if code is None:
        code = compile(verified_source(path, verified), path, "exec", dont_inherit=True)
        if stored:
            _save(stored, verified, code)
    return code


def verified_source(path: str, verified: list[object]) -> bytes:
    """The bytes of the source, read from the very file whose identity was verified."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:  # gone, or replaced by a symlink, since it was verified
        raise SourceChanged(path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or identity(st) != verified:
            raise SourceChanged(path)
        return _read_all(fd, st.st_size)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    return b"".join(read_chunks(fd, size))


def _magic() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER.ljust(16, b"\0")


def _store_dir() -> str | None:
    """The bytecode store, if this user may trust it (created 0700 when missing)."""
    if "dir" not in _STORE:
        directory = os.path.join(cache_dir(), "bytecode")
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            unsafe = unsafe_owner_or_mode(os.stat(directory)) or unsafe_owner_or_mode(
                os.stat(os.path.dirname(directory)))
        except OSError:
            unsafe = "cannot be created"
        _STORE["dir"] = None if unsafe else directory
    return _STORE["dir"]


def _stored_path(path: str) -> str | None:
    directory = _store_dir()
    if directory is None:
        return None
    key = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return os.path.join(directory, f"{key}.{sys.implementation.cache_tag}.pyc")


def _load(stored: str, verified: list[object]) -> CodeType | None:
    import marshal

    try:
        fd = os.open(stored, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or unsafe_owner_or_mode(st):
            return None
        data = _read_all(fd, st.st_size)
    finally:
        os.close(fd)
    if len(data) < _HEADER.size or _HEADER.unpack_from(data) != (_magic(), *verified):
        return None  # another interpreter's, or of another version of the source
    try:
        code = marshal.loads(data[_HEADER.size:])
    except (ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _save(stored: str, verified: list[object], code: CodeType) -> None:
    import marshal

    from ..base import write_atomic

    try:
        header = _HEADER.pack(_magic(), *verified)
        write_atomic(stored, header + marshal.dumps(code), mode=0o600, durable=False)
    except (OSError, struct.error):
        pass  # an optimisation only: the next import compiles again
