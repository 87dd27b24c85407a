"""Small regular files read whole, as hostile input: one reader for both distributions.

Key files, trust files, RECORD, METADATA, ``entry_points.txt``, Triton's ``__init__.py``:
every one may be a FIFO, a device, a directory or a huge file where a small file belongs.
The rule, the same for every caller:

* opened with ``O_NONBLOCK``: open(2) of a FIFO for reading returns at once with it, where a
  plain open waits for a writer forever (``import triton`` or ``trust list`` hung);
* the descriptor, not the name, is checked to be a regular file (``fstat``: no race between
  a check and the open);
* read no further than a bound.

Whether a final symbolic link is followed is the caller's contract, stated at each call
(:func:`open_regular`'s ``follow_symlinks``): a site-packages, a key file or a trust directory
entry may legitimately be a link (followed, as :func:`read_regular` does); an installed file a
manifest vouches for may not (``installed.open_installed``: a link is ``symlink``, never read).

Every failure is one :class:`RegularFileError` with the path, a reason (``missing``,
``not-a-file``, ``symlink``, ``unreadable``, ``too-big``) and the OSError behind it, if any; each caller
maps it as it reports: the packager to ``input.*``, discovery to "no such file", the
runtime CLI to its one-line error.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterator

from .errors import TrustError

__all__ = ["RegularFileError", "open_regular", "read_chunks", "read_regular", "read_views"]

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
#: Read in pieces of this size, so a bound of gigabytes never becomes one allocation of it.
_PIECE = 1 << 20


class RegularFileError(TrustError):
    """A path that is not a readable regular file within the bound.

    ``reason`` is the code without its prefix (``missing``, ``not-a-file``, ``symlink``,
    ``unreadable``, ``too-big``), for callers that map it into their own family; ``cause`` is the OSError."""

    code_prefix = "input"

    def __init__(self, reason: str, path: str, detail: str, cause: OSError | None = None) -> None:
        super().__init__(reason, path, detail)
        self.reason = reason
        self.cause = cause


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool) -> int:
    """A descriptor on ``path``, a regular file; never blocks. A final symbolic link is
    followed only with ``follow_symlinks``, else refused (``symlink``) without being read."""
    where = os.fspath(path)
    try:
        fd = os.open(path, _FLAGS if follow_symlinks else _FLAGS | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise RegularFileError("symlink", where, "is a symbolic link; only a regular file is read", exc) from None
        reason = "missing" if exc.errno == errno.ENOENT else "unreadable"
        raise RegularFileError(reason, where, f"cannot open: {exc.strerror or exc}", exc) from None
    except ValueError:  # an embedded NUL: no file has that name
        raise RegularFileError("missing", where, "cannot open: not a file name (a NUL byte)") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise RegularFileError("unreadable", where, f"cannot stat: {exc.strerror or exc}", exc) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise RegularFileError("not-a-file", where, "is not a regular file (a directory, FIFO or device)")
    return fd


def read_regular(path: str | os.PathLike[str], limit: int, *, truncate: bool = False,
                 follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``: all of them, refused (``too-big``) when there
    are more than ``limit``; with ``truncate``, its first ``limit`` bytes whatever its size.
    A final symbolic link is followed unless ``follow_symlinks`` is false (then ``symlink``)."""
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        data = _read_upto(fd, limit if truncate else limit + 1)
    except OSError as exc:
        raise RegularFileError("unreadable", os.fspath(path), f"cannot read: {exc.strerror or exc}", exc) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise RegularFileError("too-big", os.fspath(path), f"over {limit} bytes")
    return data


def _read_upto(fd: int, count: int) -> bytes:
    """Up to ``count`` bytes, fewer only at the end of the file."""
    return b"".join(read_chunks(fd, count))


def read_chunks(fd: int, count: int, piece_size: int = _PIECE) -> Iterator[bytes]:
    """The next ``count`` bytes of ``fd`` in pieces of at most ``piece_size`` (1 MiB: one stays
    in cache; a bound of gigabytes is never one allocation), ending early only at the end of
    the file: no caller reads past what it declared."""
    left = count
    while left > 0:
        piece = os.read(fd, min(left, piece_size))
        if not piece:
            return
        yield piece
        left -= len(piece)


def read_views(fd: int, count: int, piece_size: int = _PIECE) -> Iterator[memoryview]:
    """The next ``count`` bytes of ``fd`` as :func:`read_chunks` reads them, into one buffer of
    at most ``piece_size`` bytes, reused: each view is valid until the next is asked for. For
    hashing large files: a fresh ``bytes`` per piece is memory the kernel faults in and zeroes
    again, and beside another thread's Python the hash then falls far behind (H200, 416 MB
    beside a busy thread: 515 ms in new 8 MiB pieces, 412 ms reused, 370 ms alone)."""
    buffer = memoryview(bytearray(max(0, min(piece_size, count))))
    left = count
    while left > 0:
        got = _readinto(fd, buffer[:left])
        if not got:
            return
        yield buffer[:got]
        left -= got


def _readinto(fd: int, view: memoryview) -> int:
    if hasattr(os, "readv"):  # looked up at each call: POSIX (Windows has none)
        return os.readv(fd, [view])
    with io.FileIO(fd, closefd=False) as stream:
        return stream.readinto(view) or 0
