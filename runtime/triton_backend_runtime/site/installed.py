"""Installed files, read as hostile input: where a wheel path lands, and bounded reads of it.

A manifest names files by their path in the wheel. Before any of them is opened:

* the path must be a plain relative path (no ``..``, no absolute or empty parts, no
  backslash or NUL), so it lands inside the distribution's install root (the ``sys.path``
  entry holding its ``.dist-info``); ``<name>.data/purelib|platlib/`` map to that root
  (the binary distribution format spec), other ``.data`` schemes land outside it and are
  left to ``backend-packager verify``;
* the directory it lands in must not resolve (through a symlink) outside the root;
* only a regular file is opened (``O_NOFOLLOW``, ``O_NONBLOCK``: a symlink, FIFO or device
  is refused without blocking), and no more bytes are read than the manifest declares.

Hashes are cached on file identity (:func:`.verdictcache.identity`) by :class:`HashCache`;
the files still to hash are hashed by a few threads (``hashlib`` releases the GIL), biggest
first, so one large library does not start last and run alone. A vouched file is checked
with ``lstat`` first and opened only by the thread that hashes it: no descriptor is held
per file, whatever the number of files.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..base import RegularFileError, VerifyError, open_regular, read_views
from .fileidentity import identity

__all__ = [
    "CHUNK", "Confinement", "HashCache", "MAX_PATH_CHARS", "MAX_PATH_PARTS", "MAX_WALK_ENTRIES", "check_package_name",
    "hash_file", "hash_workers", "installed_path", "open_installed", "read_bounded", "regular_stat", "sha256_fd",
    "walk_files", "wheel_path_parts",
]

#: Every file is hashed in pieces of this size, read into one reused buffer (``read_views``).
#: Larger pieces mean fewer waits for the GIL while verification runs Python beside the
#: hashing, but on a 2-core EPYC (512 KiB of L2 a core) two threads hashing 8 MiB pieces took
#: 0.52 s for triton 3.9.0 against 0.41 s in 1 MiB ones, and cold verification's ratio to
#: parallel sha256 went from 1.75-1.80 to 1.53-1.61 (A/B, three rounds). With the short switch
#: interval verification sets, a wait is at most 0.1 ms a piece.
CHUNK = 1 << 20
#: Longest wheel path accepted, and deepest (deeper is no real package, only a walk to bound).
MAX_PATH_CHARS = 1024
MAX_PATH_PARTS = 32
#: The most directory entries one distribution's package walk may visit.
MAX_WALK_ENTRIES = 200_000
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def wheel_path_parts(wheel_path: str, where: str) -> list[str]:
    """The parts of a wheel path, refused unless it is a plain relative path."""
    parts = wheel_path.split("/")
    bad = (
        not wheel_path or len(wheel_path) > MAX_PATH_CHARS or len(parts) > MAX_PATH_PARTS
        or "\\" in wheel_path or "\0" in wheel_path or any(p in ("", ".", "..") for p in parts)
    )
    if bad:
        raise VerifyError("path", where, f"artifact path {wheel_path[:200]!r} is not a plain relative path")
    return parts


def installed_path(root: str, wheel_path: str, where: str = "manifest") -> str | None:
    """Where a wheel member lands under ``root``; None for a ``.data`` scheme outside it."""
    parts = wheel_path_parts(wheel_path, where)
    if parts[0].endswith(".data"):
        if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
            return None
        parts = parts[2:]
    return os.path.join(root, *parts)


def check_package_name(package: str, where: str) -> list[str]:
    """A backend package is a dotted Python name, nothing else (never ``/`` or ``..``)."""
    parts = package.split(".")
    if len(package) > 256 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise VerifyError("package", where, f"backend package {package[:200]!r} is not a dotted Python name")
    return parts


class Confinement:
    """Checks that directories resolve inside one root; remembers each directory's answer."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._seen: dict[str, bool] = {}

    def inside(self, directory: str) -> bool:
        known = self._seen.get(directory)
        if known is None:
            real = os.path.realpath(directory)
            known = real == self.root or real.startswith(self.root + os.sep)
            self._seen[directory] = known
        return known

    def check(self, path: str) -> None:
        if not self.inside(os.path.dirname(path)):
            raise VerifyError("path", path, f"resolves outside the install root {self.root} (a symlink escapes it)")


def open_installed(path: str) -> tuple[int, os.stat_result]:
    """An open descriptor on an installed regular file and its stat: never following a final
    symlink, never blocking (:func:`.regularfile.open_regular`), failures as ``verify.*``."""
    try:
        fd = open_regular(path, follow_symlinks=False)
    except RegularFileError as exc:
        raise _installed_error(exc) from None
    try:
        return fd, os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise VerifyError("read", path, f"cannot stat: {exc.strerror}") from None


def _installed_error(exc: RegularFileError) -> VerifyError:
    if exc.reason == "missing":
        return VerifyError("missing", exc.path, "listed in the manifest but not installed")
    if exc.reason == "symlink":
        return VerifyError("not-regular", exc.path, "is a symlink; an installed file is a regular file")
    if exc.reason == "not-a-file":
        return VerifyError("not-regular", exc.path, "is not a regular file (a FIFO, device or directory)")
    return VerifyError("read", exc.path, exc.detail)


def read_bounded(path: str, limit: int) -> bytes:
    """A small file (a manifest) read whole, refused past ``limit`` bytes."""
    fd, st = open_installed(path)
    try:
        if st.st_size > limit:
            raise VerifyError("too-large", path, f"{st.st_size} bytes; the limit is {limit}")
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


def sha256_fd(fd: int, size: int) -> str:
    """sha256 of the first ``size`` bytes of ``fd``: never more than the manifest declared."""
    digest = hashlib.sha256()
    for view in read_views(fd, size, CHUNK):
        digest.update(view)
    return digest.hexdigest()


def regular_stat(path: str) -> os.stat_result:
    """``lstat`` of a vouched file, refused unless it is a regular file (no open, no fd held)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise VerifyError("missing", path, "listed in the manifest but not installed") from None
    except OSError as exc:
        raise VerifyError("read", path, f"cannot stat: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise VerifyError("not-regular", path, "is a symlink; an installed file is a regular file")
    if not stat.S_ISREG(st.st_mode):
        raise VerifyError("not-regular", path, "is not a regular file (a FIFO, device or directory)")
    return st


#: Called as ``observer(path, stage)`` by the hashing thread after the last read of a file
#: (``"read"``) and after its second ``fstat`` (``"done"``). None in use: a seam for tests,
#: which write the file there (a real write in the window each check closes).
hash_observer: Callable[[str, str], None] | None = None


def hash_file(path: str, size: int) -> tuple[list[object], str]:
    """The identity of the file as opened, and its sha256 if it is ``size`` bytes long (a
    file of another size is not read at all: "" then). The identity is the descriptor's,
    taken before and after the bytes are read: a file written meanwhile is ``verify.changed``,
    so a digest is only ever paired with the identity of the bytes it describes."""
    fd, st = open_installed(path)
    try:
        before = identity(st)
        if st.st_size != size:
            return before, ""
        digest = sha256_fd(fd, size)
        if hash_observer is not None:
            hash_observer(path, "read")
        after = identity(os.fstat(fd))
    finally:
        os.close(fd)
    if hash_observer is not None:
        hash_observer(path, "done")
    if after != before:
        raise VerifyError("changed", path, "changed while it was being hashed (written, or its metadata changed)")
    return before, digest


class HashCache:
    """sha256 of files keyed on identity (dev, inode, size, mtime_ns, ctime_ns).

    A file rewritten in place changes mtime/ctime; a file replaced changes inode; either way
    the entry no longer matches and the file is hashed again. ``rehash`` ignores every entry.
    Entries come from a cache file, so each is checked for shape before it is believed.

    Hashing runs on a few threads (``hashlib`` and reads release the GIL), biggest file
    first. :meth:`prefetch` starts it as soon as the signed subject list is known, so the
    hashes are computed while the manifest is decoded and checked; :meth:`digests` then
    takes a prefetched digest only for a file whose identity is still the one checked.

    :attr:`taken` holds, for each file a digest was given for, the identity that digest is
    about (the descriptor's when hashed, the checked ``lstat`` when it came from the cache):
    the verdict cache stores these, never a later ``stat``. :meth:`unchanged` checks them at
    the end of a verification.
    """

    def __init__(self, entries: dict[str, list[object]] | None = None, rehash: bool = False) -> None:
        self.entries: dict[str, list[object]] = dict(entries or {})
        self.rehash = rehash
        self.hashed_bytes = 0
        #: Files handed to the hashing threads (prefetched or checked): what a cold start costs.
        self.submitted = 0
        self._pool: Any = None
        self._ahead: dict[str, Any] = {}
        self.taken: dict[str, list[object]] = {}

    def cached(self, path: str, st: os.stat_result) -> str | None:
        entry = self.entries.get(path)
        if self.rehash or not isinstance(entry, list) or len(entry) != 6 or entry[:5] != identity(st):
            return None
        return entry[5] if isinstance(entry[5], str) else None

    def remember(self, path: str, ident: list[object], digest: str) -> None:
        self.entries[path] = [*ident, digest]
        self.hashed_bytes += int(ident[2])  # type: ignore[call-overload]

    def sha256(self, path: str, st: os.stat_result) -> str:
        """The digest of one file now (small callers)."""
        return self.digests([(path, st)], 1)[path]

    def prefetch(self, files: list[tuple[str, int]], workers: int) -> None:
        """Start hashing these (path, expected size) in the background, biggest first: an
        optimisation only. Nothing is checked here: the thread opens each file as a regular
        file or not at all, and :meth:`digests` takes a result only for the file it checked."""
        for path, size in sorted(dict(files).items(), key=lambda item: -item[1]):
            # A file with a cache entry is most likely unchanged: leave it to digests(), which
            # stats it, rather than hash it ahead for nothing (one changed file must not cost
            # hashing all of them).
            if path not in self._ahead and (self.rehash or path not in self.entries):
                self._ahead[path] = self._submit(path, size, workers)

    def _submit(self, path: str, size: int, workers: int) -> Any:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="triton-backend-hash")
        self.submitted += 1
        return self._pool.submit(hash_file, path, size)

    def digests(self, files: list[tuple[str, os.stat_result]], workers: int) -> dict[str, str]:
        """sha256 of each (path, lstat) pair: from the cache, from a prefetch of the same file
        as checked, or hashed now; at most ``st_size`` bytes are read from any file."""
        out: dict[str, str] = {}
        pending: dict[str, tuple[os.stat_result, Any]] = {}
        for path, st in sorted(files, key=lambda item: -item[1].st_size):
            known = self.cached(path, st)
            if known is not None:
                out[path] = known
                self.taken[path] = identity(st)
                continue
            ahead = self._ahead.pop(path, None)
            pending[path] = (st, ahead if ahead is not None else self._submit(path, st.st_size, workers))
        for path, (st, future) in pending.items():
            ident, digest = self._result(path, st, future, workers)
            if ident != identity(st):
                raise VerifyError("changed", path, "changed while it was being verified")
            self.remember(path, ident, digest)
            self.taken[path] = ident
            out[path] = digest
        return out

    def watch(self, path: str) -> None:
        """Take ``path``'s identity now, before it is read or listed, unless a digest already
        took it: the verdict is about this state, and :meth:`unchanged` holds it there (one
        that cannot be stat-ed is not watched: it is stat-ed when the verdict is stored)."""
        if path not in self.taken:
            try:
                self.taken[path] = identity(os.stat(path))
            except (OSError, ValueError):
                pass

    def unchanged(self, paths: Iterable[str]) -> None:
        """Raise ``verify.changed`` for the first of ``paths`` whose identity now is not the
        one taken when it was read (a file written after it was hashed, a directory after it
        was listed, during verification). ``stat``, as the verdict cache's lookup does."""
        for path in dict.fromkeys(paths):
            taken = self.taken.get(path)
            if taken is None:
                continue
            try:
                now: list[object] | None = identity(os.stat(path))
            except OSError:
                now = None
            if now != taken:
                raise VerifyError("changed", path, "changed after it was read, while it was being verified")

    def _result(self, path: str, st: os.stat_result, future: Any, workers: int) -> tuple[list[object], str]:
        try:
            ident, digest = future.result()
        except VerifyError as exc:
            if exc.code != "verify.changed":
                raise
            ident, digest = [], ""  # written while hashed (ahead of the check, maybe): once more
        except OSError as exc:
            raise VerifyError("read", path, f"cannot read: {exc.strerror}") from None
        if ident != identity(st) or not digest:  # a prefetch of another version of the file
            ident, digest = self._submit(path, st.st_size, workers).result()
        return ident, digest

    def settle(self) -> None:
        """Forget prefetches no check asked for (a distribution refused early): those not
        started are cancelled; one already running finishes its file, and is kept."""
        for path, future in self._ahead.items():
            if future.cancel():
                continue
            try:
                ident, digest = future.result()
            except Exception:  # noqa: BLE001 - a prefetch is an optimisation: its failure is no verdict
                continue
            if digest:  # "" : the file was not the size RECORD said, so it was not read
                self.remember(path, ident, digest)
        self._ahead.clear()

    def close(self) -> None:
        """Stop: prefetches not started are cancelled, running ones finish their file."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._ahead.clear()


def hash_workers() -> int:
    """Threads for cold hashing: the cores this process may use, at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def walk_files(top: str, budget: list[int],
               taken: dict[str, list[object]] | None = None) -> Iterator[tuple[str, list[str]]]:
    """``(directory, file names)`` under ``top``, symlinked directories followed, each
    directory visited once (by device and inode: a symlink loop ends), at most
    ``budget[0]`` entries in all (shared across calls; raises when spent). ``taken`` gets
    each directory's identity as it was before it was listed (what the verdict cache keeps)."""
    seen: set[tuple[int, int]] = set()
    pending = [top]
    while pending:
        here = pending.pop()
        try:
            st = os.stat(here)
            entries = list(os.scandir(here))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        if taken is not None:
            taken[here] = identity(st)
        budget[0] -= len(entries)
        if budget[0] < 0:
            raise VerifyError("walk-limit", top, f"more than {MAX_WALK_ENTRIES} entries under the package: refusing")
        files = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                pending.append(entry.path)
            else:
                files.append(entry.name)
        yield here, sorted(files)
