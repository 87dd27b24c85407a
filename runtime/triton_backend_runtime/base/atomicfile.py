"""One atomic file writer for both distributions: trust files, the verdict cache, the
``.pth`` hook, signing keys, output wheels.

On Linux the data is written to an unnamed file (``O_TMPFILE``) in the target's directory:
a writer killed while writing (``kill -9``) leaves nothing with a name. The finished file
is linked in (through ``/proc/self/fd``, which needs no capability, unlike ``linkat`` with
``AT_EMPTY_PATH``) under a temporary name ``.<name>.<pid>-<random>.tmp`` and renamed over
the target, so a named temporary exists only between those two calls. Where ``O_TMPFILE``
is missing the data goes to such a named temporary from the start. Either way a temporary
left by a dead writer carries its pid: :func:`remove_orphans` deletes those whose writer is
gone, and every write runs it first.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

__all__ = ["atomic_output", "remove_orphans", "write_atomic"]


def write_atomic(path: str, data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` at once. ``mode`` defaults to the existing file's, else
    0644; ``durable`` fsyncs the data and the directory (cold paths; the cache skips it)."""
    with atomic_output(path, mode=mode, durable=durable) as stream:
        stream.write(data)


@contextlib.contextmanager
def atomic_output(path: str, *, mode: int | None = None, durable: bool = True) -> Iterator[BinaryIO]:
    """A stream whose bytes replace ``path`` when the block ends without an exception; on
    any exception nothing is left, and ``path`` is as it was."""
    directory = os.path.dirname(path) or "."
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
    remove_orphans(directory, os.path.basename(path))
    fd, temp = _open_temporary(directory, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            yield stream
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
            if temp is None:
                temp = _link_named(stream.fileno(), directory, os.path.basename(path))
        os.replace(temp, path)
    except BaseException:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        raise
    if durable:
        _fsync_directory(directory)


def _open_temporary(directory: str, name: str) -> tuple[int, str | None]:
    """An unnamed file in ``directory`` (name None), else a pid-named temporary."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag and os.path.isdir("/proc/self/fd"):
        try:
            return os.open(directory, flag | os.O_WRONLY | os.O_CLOEXEC, 0o600), None
        except OSError as exc:
            import errno

            # File systems without O_TMPFILE say so with these; anything else is a real error.
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    import tempfile  # ~5 ms of imports (random, shutil): only when something is written

    fd, temp = tempfile.mkstemp(prefix=f"{_prefix(name)}{os.getpid()}-", suffix=".tmp", dir=directory)
    return fd, temp


def _link_named(fd: int, directory: str, name: str) -> str:
    """Give the unnamed file a pid-named temporary name, for the rename over the target."""
    import secrets

    # A directory fd makes os.link call linkat(..., AT_SYMLINK_FOLLOW): plain link() would
    # link the /proc symlink itself and fail across devices.
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for _ in range(8):
            temp = os.path.join(directory, f"{_prefix(name)}{os.getpid()}-{secrets.token_hex(6)}.tmp")
            try:
                os.link(str(fd), temp, src_dir_fd=proc, follow_symlinks=True)
                return temp
            except FileExistsError:
                continue
    finally:
        os.close(proc)
    raise FileExistsError(f"{directory}: could not name a temporary for {name}")


def _prefix(name: str) -> str:
    return f".{name}."


def remove_orphans(directory: str, name: str) -> None:
    """Temporaries for ``name`` whose writer died before renaming: ours, so ours to remove."""
    prefix = _prefix(name)
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid = entry[len(prefix):].split("-", 1)[0]
        if pid.isascii() and pid.isdigit() and not process_alive(int(pid)):
            try:
                os.unlink(os.path.join(directory, entry))
            except OSError:
                pass


def process_alive(pid: int) -> bool:
    """Whether ``pid`` names a running process (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable; not every file system lets a directory be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
