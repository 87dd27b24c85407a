"""One atomic file writer for the runtime: trust files, the verdict cache, the ``.pth`` hook.

The data goes to a temporary file in the target's directory, named
``.<name>.<pid>-<random>.tmp``, which is renamed over the target; the temporary never
outlives a failure that Python sees. One left by a writer killed before its rename (``kill
-9``) carries that writer's pid: :func:`remove_orphans` deletes those whose writer is gone.
"""

from __future__ import annotations

import os


def write_atomic(path: str, data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` at once. ``mode`` defaults to the existing file's, else
    0644; ``durable`` fsyncs the data and the directory (cold paths; the cache skips it)."""
    directory = os.path.dirname(path) or "."
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
    import tempfile  # ~5 ms of imports (random, shutil): only when something is written

    remove_orphans(directory, os.path.basename(path))
    fd, temp = tempfile.mkstemp(prefix=f"{_prefix(os.path.basename(path))}{os.getpid()}-", suffix=".tmp",
                                dir=directory)
    try:
        with os.fdopen(fd, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            stream.write(data)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_directory(directory)


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
        if pid.isascii() and pid.isdigit() and not _alive(int(pid)):
            try:
                os.unlink(os.path.join(directory, entry))
            except OSError:
                pass


def _alive(pid: int) -> bool:
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
