"""Writing files so that nothing is ever half-written: the runtime's one atomic writer.

The packager and the runtime share :mod:`triton_backend_runtime.base.atomicfile` (unnamed
``O_TMPFILE`` data linked in and renamed over the target; a writer killed by ``kill -9``
leaves nothing the next write does not remove). This module only adapts it to paths.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from triton_backend_runtime.base import atomicfile, regularfile

from .errors import InputError
from .interrupt import checkpoint

__all__ = [
    "PID_LIMIT", "atomic_output", "atomic_write", "open_input", "read_input", "remove_orphan_dirs", "sha256_pread"
]


def open_input(path: Path) -> int:
    """A descriptor on ``path``, refused unless it is a regular file; never blocks (a FIFO
    given where a file belongs must not hang the command)."""
    try:
        fd = regularfile.open_regular(path, follow_symlinks=True)
    except regularfile.RegularFileError as exc:
        raise _input_error(exc) from None
    os.set_blocking(fd, True)
    return fd


def read_input(path: Path, limit: int) -> bytes:
    """A small input file whole (a key, a key list): at most ``limit`` bytes, else refused."""
    try:
        return regularfile.read_regular(path, limit)
    except regularfile.RegularFileError as exc:
        raise _input_error(exc, "not a key file") from None


def sha256_pread(fd: int) -> str:
    """sha256 of an open file from its start to its end, read with ``pread`` (threads may
    share the descriptor; its offset is left alone), 1 MiB at a time."""
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        checkpoint()
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def _input_error(exc: regularfile.RegularFileError, too_big: str = "") -> InputError:
    detail = f"{exc.detail}: {too_big}" if too_big and exc.reason == "too-big" else exc.detail
    return InputError(exc.reason, exc.path, detail)


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


#: Linux's PID_MAX_LIMIT (2**22, include/linux/threads.h): no process id reaches it.
PID_LIMIT = 1 << 22


def remove_orphan_dirs(root: Path, prefix: str, suffix: str = "") -> None:
    """Scratch directories ``PREFIX<pid>-...SUFFIX`` in ``root`` that a killed run of ours
    left: removed only when ours (a real directory, our uid) and the pid is no running process."""
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(prefix) and e.name.endswith(suffix)]
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(prefix):].split("-", 1)[0]
        try:
            ours = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        except OSError:
            continue
        if ours and _dead(pid):
            shutil.rmtree(entry.path, ignore_errors=True)  # never follows a symlink inside


def _dead(pid: str) -> bool:
    """Whether ``pid`` names a process id no process has: a number beyond every pid
    (kill(2) cannot even be asked about it) is no pid of ours, and its directory stays."""
    if not (pid.isascii() and pid.isdigit() and 0 < int(pid) < PID_LIMIT):
        return False
    return not atomicfile.process_alive(int(pid))
