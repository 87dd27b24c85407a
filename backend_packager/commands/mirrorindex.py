"""The index a mirror serves, replaced by one rename: never less than it served.

Layout of ``OUTDIR``::

    simple -> .mirror-index/<tag>-<random>      a symbolic link, the only name clients use
    .mirror-index/<tag>-<random>/index.html      the root page (and index.json)
                                 <project>/index.html, index.json
                                 <project>/<wheel file>   a hard link of OUTDIR/<wheel file>
    <wheel file>                                 the outputs, as ``migrate`` writes them

A generation is a whole index: every page and, beside each project page, a hard link of
every wheel it names, whose URL is relative to its page (``<wheel file>#sha256=...``).
A run builds the next generation in a new directory, complete (every wheel linked, every
page written and fsynced), and only then serves it by renaming a new symbolic link over
``simple`` (rename(2) is atomic: a reader resolves the old generation or the new one).
Nothing served is ever written again: a generation is immutable once served, and a wheel
replaced in ``OUTDIR`` (a new key, a new packager version) is a new file renamed over the
old name, while the generation being served still links the old file. Killed at any point,
``simple`` names a complete generation: the previous one or the new one. The generations
no longer served are removed by the next run, under its lock.

A generation's tag is the sha256 of its pages: a run whose pages are those served, whose
links are the served files, changes nothing (no directory, no mtime). A page whose bytes
are those of the page served is linked from it, so its mtime (and a web server's cache
validators) stay.

An ``OUTDIR/simple`` that is a directory (a mirror written before generations) is
exchanged with the new link in one ``renameat2(RENAME_EXCHANGE)`` where the kernel and
file system have it; elsewhere it is renamed aside first, leaving no index for the moment
between two renames, once.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..formats import IndexFile, pages

__all__ = ["GENERATIONS", "INDEX_DIR", "NEXT_LINK", "OLD_DIR", "prune", "publish", "served_generation", "swap"]

INDEX_DIR = "simple"
GENERATIONS = ".mirror-index"
#: The link being swapped in, and an old-layout index renamed aside: a killed run's are removed.
NEXT_LINK = ".simple.next"
OLD_DIR = ".simple.old"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def publish(outdir: Path, files: list[IndexFile], wheels: dict[str, Path],
            written: Callable[[], None] | None = None) -> Path:
    """Serve an index of ``files``: the served generation when it is already exactly that,
    else a new one (``wheels``: file name -> the file to link), swapped in once complete
    (``written`` is called between the two). Returns the generation served."""
    content = pages(files)
    tag = hashlib.sha256(b"".join(rel.encode() + b"\0" + data for rel, data in sorted(content.items()))).hexdigest()
    current = served_generation(outdir)
    if current is not None and current.name.startswith(f"{tag[:32]}-") and _intact(current, content, files, wheels):
        return current
    (outdir / GENERATIONS).mkdir(mode=0o755, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f"{tag[:32]}-", dir=outdir / GENERATIONS))
    os.chmod(new, 0o755)  # a web server reads it
    _fill(new, content, files, wheels, current)
    if written:
        written()
    swap(outdir, new)
    return new


def served_generation(outdir: Path) -> Path | None:
    """The generation ``OUTDIR/simple`` links to, or None (no index, or not one of ours)."""
    try:
        target = os.readlink(outdir / INDEX_DIR)
    except OSError:
        return None
    parts = target.split("/")
    if len(parts) != 2 or parts[0] != GENERATIONS or parts[1] in ("", ".", ".."):
        return None
    return outdir / GENERATIONS / parts[1]


def _intact(generation: Path, content: dict[str, bytes], files: list[IndexFile], wheels: dict[str, Path]) -> bool:
    """The generation holds these pages and links these very files (device and inode)."""
    try:
        for rel, data in content.items():
            if _read(generation / rel, len(data)) != data:
                return False
        for item in files:
            served = os.lstat(generation / item.project / item.filename)
            source = os.lstat(wheels[item.filename])
            if not stat.S_ISREG(served.st_mode) or (served.st_dev, served.st_ino) != (source.st_dev, source.st_ino):
                return False
    except (OSError, KeyError):
        return False
    return True


def _read(path: Path, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of a regular file, not through a symlink, never blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


def _fill(new: Path, content: dict[str, bytes], files: list[IndexFile], wheels: dict[str, Path],
          current: Path | None) -> None:
    """Every page (linked from the served generation when the bytes are the same, else
    written and fsynced) and a hard link of every wheel, then the directories fsynced."""
    dirs = {new} | {new / rel.rsplit("/", 1)[0] for rel in content if "/" in rel}
    for directory in sorted(dirs - {new}):
        directory.mkdir(mode=0o755)
    for rel, data in content.items():
        if current is None or not _link_same(current / rel, new / rel, data):
            _write_new(new / rel, data)
    for item in files:
        target = new / item.project / item.filename
        os.link(wheels[item.filename], target, follow_symlinks=False)
        if not stat.S_ISREG(os.lstat(target).st_mode):  # the staged or served output was replaced by a link
            raise OSError(errno.ELOOP, "an output to serve is not a regular file", str(wheels[item.filename]))
    for directory in dirs:
        _fsync_dir(directory)


def _link_same(old: Path, new: Path, data: bytes) -> bool:
    try:
        if _read(old, len(data)) != data:
            return False
        os.link(old, new, follow_symlinks=False)
    except OSError:
        return False
    return True


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap(outdir: Path, generation: Path) -> None:
    """Serve ``generation``: one rename of a new symbolic link over ``OUTDIR/simple``."""
    link = outdir / NEXT_LINK
    _remove(link)
    os.symlink(f"{GENERATIONS}/{generation.name}", link)
    served = outdir / INDEX_DIR
    if served.is_dir() and not served.is_symlink():  # the layout before generations
        if _exchange(link, served):
            shutil.rmtree(link)  # the old directory, now under the link's name
        else:
            _remove(outdir / OLD_DIR)
            os.rename(served, outdir / OLD_DIR)
            os.replace(link, served)
            shutil.rmtree(outdir / OLD_DIR)
    else:
        os.replace(link, served)
    _fsync_dir(outdir)


def _exchange(a: Path, b: Path) -> bool:
    """``renameat2(a, b, RENAME_EXCHANGE)``; False where the kernel or file system lacks it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def prune(outdir: Path) -> None:
    """Remove every generation but the one served, and the leftovers of an interrupted swap
    (run under the mirror's lock: no other run is building one)."""
    served = served_generation(outdir)
    for leftover in (NEXT_LINK, OLD_DIR):
        _remove(outdir / leftover)
    try:
        entries = list(os.scandir(outdir / GENERATIONS))
    except OSError:
        return
    for entry in entries:
        if served is None or entry.name != served.name:
            _remove(Path(entry.path))


def _remove(path: Path) -> None:
    """A file, a link or a whole directory (never following a link), if it is there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()
