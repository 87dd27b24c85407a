"""Writing files so that nothing is ever half-written: the runtime's one atomic writer.

The packager and the runtime share :mod:`triton_backend_runtime.atomicfile` (unnamed
``O_TMPFILE`` data linked in and renamed over the target; a writer killed by ``kill -9``
leaves nothing the next write does not remove). This module only adapts it to paths.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from triton_backend_runtime import atomicfile

from .errors import InputError

#: Opening never blocks: a FIFO given where a file belongs must not hang the command.
_OPEN_INPUT = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def open_input(path: Path) -> int:
    """A descriptor on ``path``, refused unless it is a regular file; never blocks."""
    try:
        fd = os.open(path, _OPEN_INPUT)
    except OSError as exc:
        raise InputError("unreadable", str(path), f"cannot open: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError("not-a-file", str(path), "is not a regular file (a directory, FIFO or device)")
    os.set_blocking(fd, True)
    return fd


def read_input(path: Path, limit: int) -> bytes:
    """A small input file whole (a key, a key list): at most ``limit`` bytes, else refused."""
    fd = open_input(path)
    try:
        data = os.read(fd, limit + 1)
    except OSError as exc:
        raise InputError("unreadable", str(path), f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError("too-big", str(path), f"over {limit} bytes: not a key file")
    return data


@contextlib.contextmanager
def atomic_output(path: Path, mode: int = 0o644, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A stream whose bytes become ``path`` (parents made) only when the block succeeds.
    Not fsynced by default: output wheels are rebuilt from their inputs after a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomicfile.atomic_output(str(path), mode=mode, durable=durable) as stream:
        yield stream


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``path`` replaced by ``data`` durably (keys, small files)."""
    with atomic_output(path, mode, durable=True) as stream:
        stream.write(data)
