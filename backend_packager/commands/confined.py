"""Reading a mirror's input files: opened once, confined to their source tree, never through
a symbolic link, never blocking on a FIFO, and read bounded."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from triton_backend_runtime.base import regularfile

from ..base import InputError
from .mirrorrecords import MirrorError

__all__ = ["is_regular", "open_confined", "read_bounded", "read_confined", "symlink_error"]


def symlink_error(where: str) -> InputError:
    return InputError("symlink", where, "a symbolic link: only regular files of the source tree are mirrored, "
                      "never what a link points to (with --pass-through-failures too)")


def open_confined(path: Path, root: Path) -> tuple[int, os.stat_result]:
    """A descriptor on ``path``, a regular file whose directory is ``root`` or inside it (as
    opened: the kernel's name for the open directory, not a check before it), its last part
    opened without following a symlink and without blocking."""
    where = str(path)
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise MirrorError("source", where, f"cannot open its directory: {exc.strerror}") from None
    try:
        if not _inside(_fd_path(parent, path.parent), root):
            raise MirrorError("source", where, f"the file is outside the source tree {root}")
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise symlink_error(where) from None
            raise MirrorError("source", where, f"cannot open: {exc.strerror}") from None
    finally:
        os.close(parent)
    info = os.fstat(fd)
    if not is_regular(info.st_mode):
        os.close(fd)
        raise InputError("not-a-file", where, "not a regular file (a directory, FIFO or device): not mirrored")
    os.set_blocking(fd, True)
    return fd, info


def _fd_path(fd: int, fallback: Path) -> str:
    """Where the open directory ``fd`` is (the kernel's ``/proc/self/fd`` link); without
    /proc, the resolved ``fallback`` when it is that same directory."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(fallback)
        if os.path.samestat(os.stat(real), os.fstat(fd)):
            return real
        raise MirrorError("source", str(fallback), "changed while it was opened") from None


def _inside(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root).rstrip("/") + "/")


def read_confined(path: Path, root: Path, limit: int) -> bytes:
    fd, _ = open_confined(path, root)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise MirrorError("read", str(path), f"larger than {limit} bytes")
    return data


def read_bounded(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit``; symlinks and FIFOs refused, never waited on."""
    try:
        return regularfile.read_regular(path, limit, follow_symlinks=False)
    except regularfile.RegularFileError as exc:
        raise MirrorError("read", str(path), exc.detail) from None


def is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)
