"""The lock of a mirror run: an exclusive ``flock`` on the output directory's own descriptor."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from .mirrorrecords import MirrorError

__all__ = ["locked"]


@contextlib.contextmanager
def locked(outdir: Path, wait: bool, waiting: Callable[[Path], None] | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the output directory itself (its own descriptor):
    no file a cleanup could delete (a lock file removed while held let a second run in),
    and released by the kernel when the process dies, so a killed run never leaves the
    mirror locked."""
    where = str(outdir)
    try:
        fd = os.open(outdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise MirrorError("lock", where, f"cannot open the output directory: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise MirrorError("lock", where, f"cannot lock: {exc.strerror}") from None
            if not wait:
                raise MirrorError("busy", where, "another mirror run holds this output directory") from None
            if waiting:
                waiting(outdir)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
