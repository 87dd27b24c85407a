"""Artifact records: a file's sha256 and size, plus its ELF facts when it is ELF.

Bytes are read once. :class:`ArtifactSink` takes a stream chunk by chunk (from a wheel
member as it is inflated), hashes it, and, when it is ELF, keeps the byte ranges the scan
reads so the scanner can seek in them afterwards. The ranges come from the first bytes
(:func:`~backend_packager.scanning.elf.capture_ranges`: about 90 MB of libtriton.so's 500 MB) and
never add up to more than :data:`~backend_packager.scanning.elf.SCAN_BYTES_LIMIT`, the most the
scan reads, whatever the member's size. When they miss a section, the scan says exactly
which ranges it needs (:class:`~backend_packager.scanning.elf.CaptureMiss`), and a second pass
keeps only those. Kept ranges are stored end to end, without holes: in memory up to
:data:`SPOOL_IN_MEMORY`, in a temporary file beyond.

A file on disk is scanned in place, and hashed meanwhile in a forked child (or a thread
where forking is not safe; see :class:`_Hasher`), so the hash costs little time beside
the scan on two cores.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NoReturn, cast

from triton_backend_runtime.manifest import Artifact, ElfInfo

from ..base import ElfError, InputError, fsutil, interrupt
from .elf import ELF_MAGIC, SCAN_BYTES_LIMIT, CaptureMiss, capture_ranges, scan_elf

if TYPE_CHECKING:
    import tempfile

__all__ = [
    "ArtifactSink", "CHUNK", "HASH_CHUNK", "HASH_IN_CHILD", "HASH_IN_THREAD", "HASH_STEP", "PLAN_BYTES", "Range",
    "SPOOL_IN_MEMORY", "artifact_from_bytes", "artifact_from_file", "read_into"
]

CHUNK = 1 << 20
SPOOL_IN_MEMORY = 16 << 20
#: First bytes held before deciding what to keep: the ELF header and program headers.
PLAN_BYTES = 64 << 10
#: Files at least this big are hashed beside the scan: in a thread, or (see _Hasher) ...
HASH_IN_THREAD = 1 << 20
#: ... from this size on, in a forked child where that is safe (a fork costs about 1 ms).
HASH_IN_CHILD = 16 << 20
#: Bytes per read in that thread while the scan runs (see _Hasher), and once it is alone.
HASH_CHUNK = 16 << 20
HASH_STEP = 256 << 10

Range = tuple[int, int]


class _Spool:
    """Kept byte ranges of a stream, stored end to end; reads by the stream's offsets."""

    def __init__(self, ranges: list[Range]) -> None:
        self.ranges = ranges
        self._starts = [lo for lo, _ in ranges]
        self._bases = [0]
        for lo, hi in ranges:
            self._bases.append(self._bases[-1] + hi - lo)
        import tempfile  # only a wheel member's scan spools: `scan` of a .so file skips this import

        self._file: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        self.kept = 0
        self._pos = 0

    def keep(self, chunk: bytes, start: int) -> None:
        """Write the parts of ``chunk`` (at stream offset ``start``) inside the ranges.

        Chunks arrive in stream order and the ranges are sorted and disjoint, so the
        stored bytes only ever grow at the end: no seeks, no holes.
        """
        end = start + len(chunk)
        for low, high in self.ranges[max(0, bisect.bisect_right(self._starts, start) - 1):]:
            if low >= end:
                break
            lo, hi = max(low, start), min(high, end)
            if lo < hi:
                self._file.write(chunk[lo - start : hi - start])
                self.kept += hi - lo

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        """Bytes from the current position, up to the end of the range holding it."""
        at = bisect.bisect_right(self._starts, self._pos) - 1
        if at < 0 or self._pos >= self.ranges[at][1]:
            return b""
        lo, hi = self.ranges[at]
        size = hi - self._pos if size < 0 else min(size, hi - self._pos)
        self._file.seek(self._bases[at] + self._pos - lo)
        data = self._file.read(size)
        self._pos += len(data)
        return data

    def close(self) -> None:
        self._file.close()


class ArtifactSink:
    """Accumulates one member's bytes: hash always, keep what the scan needs if ELF.

    ``capture``: keep exactly these ranges (the second pass after a
    :class:`~backend_packager.scanning.elf.CaptureMiss`). ``sparse=False``: keep everything up to
    SCAN_BYTES_LIMIT. Otherwise the ranges are planned from the first bytes.
    """

    def __init__(self, path: str, display: str, *, sparse: bool = True, capture: list[Range] | None = None) -> None:
        self.path = path
        self.display = display
        self.size = 0
        self._hash = hashlib.sha256()
        self._head = bytearray()  # grows by appending: chunks may be tiny
        self._decided = False
        self._sparse = sparse
        self._capture = capture
        self._spool: _Spool | None = None

    def update(self, chunk: bytes) -> None:
        self._hash.update(chunk)
        start = self.size
        self.size += len(chunk)
        if self._spool is not None:
            self._spool.keep(chunk, start)
        elif not self._decided:
            self._head += chunk
            if len(self._head) >= PLAN_BYTES or (len(self._head) >= 4 and self._head[:4] != ELF_MAGIC):
                self._decide()

    def _decide(self) -> None:
        """Plan from the first bytes; keep (from) them if ELF."""
        self._decided = True
        head = bytes(self._head)
        self._head = self._head[:PLAN_BYTES]
        if head[:4] != ELF_MAGIC:
            return
        if self._capture is not None:
            ranges = self._capture
        elif self._sparse:
            ranges = capture_ranges(head) or [(0, len(head))]
        else:
            ranges = [(0, SCAN_BYTES_LIMIT)]
        self._spool = _Spool(ranges)
        self._spool.keep(head, 0)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    @property
    def head(self) -> bytes:
        """Up to the first 64 bytes seen (for magic numbers)."""
        return bytes(self._head[:64])

    @property
    def kept(self) -> int:
        """Bytes kept for the scan so far."""
        return self._spool.kept if self._spool is not None else 0

    @property
    def is_elf(self) -> bool:
        if not self._decided and self._head[:4] == ELF_MAGIC:
            self._decide()
        return self._spool is not None

    def finish(self, *, require_elf: bool = False) -> Artifact:
        """The record. Non-ELF data raises ElfError when ``require_elf`` is set.

        Raises :class:`~backend_packager.scanning.elf.CaptureMiss` when the planned ranges missed a
        section: the caller then streams the member again into
        ``ArtifactSink(capture=miss.ranges)``. A miss in that second pass is an ElfError.
        """
        try:
            if not self.is_elf:
                if require_elf:
                    raise ElfError("not-elf", self.display, f"not an ELF file (starts with {self.head[:4]!r})")
                return Artifact(path=self.path, sha256=self.sha256, size=self.size, elf=None)
            assert self._spool is not None
            return Artifact(path=self.path, sha256=self.sha256, size=self.size, elf=self._scan(self._spool))
        finally:
            self.close()

    def _scan(self, spool: _Spool) -> ElfInfo:
        try:
            return scan_elf(cast(BinaryIO, spool), self.display, size=self.size, available=spool.ranges)
        except CaptureMiss:
            if self._capture is None and self._sparse:
                raise
            if self._capture is not None:  # the file told the first pass one thing, the second another
                raise ElfError("corrupt", self.display, "the sections the scan needs moved between two reads "
                               "of the same bytes: not scanned") from None
            raise ElfError("limit", self.display, f"a section the scan needs lies past SCAN_BYTES_LIMIT "
                           f"({SCAN_BYTES_LIMIT:,}) bytes: not scanned") from None

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None


def read_into(sink: ArtifactSink, stream: BinaryIO) -> ArtifactSink:
    while chunk := stream.read(CHUNK):
        interrupt.checkpoint()
        sink.update(chunk)
    return sink


def artifact_from_bytes(path: str, data: bytes) -> Artifact:
    """Record for a file the packager writes itself (``entry_points.txt``): never native."""
    return Artifact(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data), elf=None)


def artifact_from_file(file: Path, path: str, *, require_elf: bool = False) -> Artifact:
    """Record for a file on disk: scanned in place (no spool) while a child or a thread hashes it.

    Both read the one open file (the hash by ``pread``), so they see the same file; it must
    be a regular file (a FIFO would block the open, a device never end the hash), and be
    the same file, unwritten, after both (device, inode, size, mtime and ctime): a file
    written meanwhile is ``input.changed``, never recorded with a digest of other bytes
    than the scan read.
    """
    fd = fsutil.open_input(file)
    with os.fdopen(fd, "rb") as stream:
        before = os.fstat(fd)
        head = stream.read(64)
        size = before.st_size
        if head[:4] != ELF_MAGIC:
            if require_elf:
                raise ElfError("not-elf", str(file), f"not an ELF file (starts with {head[:4]!r})")
            info = None
            digest = _Hasher(fd, size, str(file)).result()
        else:
            hasher = _Hasher(fd, size, str(file))
            try:
                info = scan_elf(stream, str(file), size=size)
            except BaseException:
                hasher.cancel()  # a corrupt file or Ctrl-C: its digest is not needed
                raise
            digest = hasher.result()
        if _identity(os.fstat(fd)) != _identity(before):
            raise InputError("changed", str(file), "changed while it was being scanned and hashed: not recorded")
    return Artifact(path=path, sha256=digest, size=size, elf=info)


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class _Hasher:
    """sha256 of an open file by ``preadv``, beside the scan: in a child process where that
    is safe, else in a thread; inline for small files.

    A thread beside the scan hashes at half speed or worse: it needs the GIL after every
    read and every update, and the scan holds it through long C calls (sorting 137k names,
    slicing them out of 14 MB of ``.dynstr``) that never give it up. A forked child has its
    own interpreter: on libtriton.so (500 MB, two cores) a scan with a thread took 0.60 s,
    with a child 0.46 s, the hash alone 0.45 s. The child only reads the inherited
    descriptor (``preadv``: the parent's offset is untouched), hashes, writes the digest to
    a pipe and leaves by ``os._exit`` (no atexit, no flush of the parent's buffers). It is
    forked only on Linux and only while this process has one thread (:func:`_fork_safe`):
    a lock another thread holds would stay locked in the child. A child that fails (a
    read error, a signal) is answered by hashing here, where the error surfaces as usual.

    The thread reads HASH_CHUNK at a time while the scan runs (few GIL round trips), then
    HASH_STEP at a time once :meth:`result` waits for it: blocks that stay in the CPU cache
    between the copy and the hash, as ``openssl dgst`` does, cost a third less CPU than
    blocks that go through memory. The child reads HASH_STEP at a time throughout.
    """

    def __init__(self, fd: int, size: int, display: str) -> None:
        self._fd, self._size, self._display = fd, size, display
        self._hash = hashlib.sha256()
        self._read = 0
        self._error: OSError | None = None
        self._thread: threading.Thread | None = None
        self._child: tuple[int, int] | None = None
        self._alone = False  # set by result(): nothing else runs Python now
        self._stop = False  # set by cancel()
        if size < HASH_IN_THREAD:
            self._alone = True
            self._run()
            return
        self._child = _fork_hash(fd, size) if size >= HASH_IN_CHILD else None
        if self._child is None:
            self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """Exactly the size seen at the start, never more: a file that keeps growing ends."""
        # One buffer, filled again and again: no page faults per read; no bigger than the file.
        buffer = bytearray(min(HASH_CHUNK, self._size))
        view = memoryview(buffer)
        try:
            while not self._stop and not interrupt.STOP.is_set() and (left := self._size - self._read) > 0:
                step = min(left, HASH_STEP if self._alone else HASH_CHUNK)
                count = os.preadv(self._fd, [view[:step]], self._read)
                if not count:
                    return  # shorter than it was: result() says so
                self._hash.update(view[:count])
                self._read += count
        except OSError as exc:
            self._error = exc

    def result(self) -> str:
        self._alone = True
        if self._child is not None:
            digest = _child_digest(*self._child)
            self._child = None
            if digest is not None:
                return digest
            self._run()  # the child failed: hash here, where a read error is raised
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        interrupt.checkpoint()  # stopped early by Ctrl-C, not truncated
        if self._read != self._size:
            raise InputError("changed", self._display, f"{self._read:,} bytes where it had {self._size:,} when "
                             "opened (truncated while being hashed): not recorded")
        return self._hash.hexdigest()

    def cancel(self) -> None:
        """No digest wanted: the child killed and reaped, the thread stopped; returns at once."""
        self._stop = True
        if self._child is not None:
            pid, read = self._child
            self._child = None
            _kill(pid)
            _child_digest(pid, read)
        if self._thread is not None:
            self._thread.join()


def _fork_safe() -> bool:
    """Linux, and one thread in this process (every thread, not only Python's)."""
    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _fork_hash(fd: int, size: int) -> tuple[int, int] | None:
    """A child hashing ``size`` bytes of ``fd``: (its pid, the pipe's read end); None where
    forking is not safe."""
    if not _fork_safe():
        return None
    parent = os.getpid()
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:
        try:
            _hash_in_child(fd, size, parent, read, write)
        finally:
            os._exit(1)  # never return into the parent's code, even on a Ctrl-C at the first bytecode
    os.close(write)
    return pid, read


def _hash_in_child(fd: int, size: int, parent: int, read: int, write: int) -> NoReturn:
    """Writes the digest of exactly ``size`` bytes, or nothing (file shorter, read error,
    signal). Stops within one step when the parent is gone (killed by ``kill -9``: the
    child is reparented), so no orphan goes on reading half a gigabyte for nobody."""
    code = 1
    try:
        os.close(read)
        digest, buffer, offset = hashlib.sha256(), bytearray(HASH_STEP), 0
        view = memoryview(buffer)
        while offset < size and os.getppid() == parent:
            count = os.preadv(fd, [view[: min(HASH_STEP, size - offset)]], offset)
            if not count:
                break
            digest.update(view[:count])
            offset += count
        if offset == size:
            os.write(write, digest.hexdigest().encode("ascii"))
            code = 0
    finally:
        os._exit(code)  # whatever happened (even KeyboardInterrupt): never return into the parent's code


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child_digest(pid: int, read: int) -> str | None:
    """The child's hex digest, or None when it gave none; the child is always reaped, and
    killed first if this wait is interrupted (Ctrl-C while it hashes)."""
    try:
        data = b""
        while len(data) < 64 and (more := os.read(read, 64 - len(data))):
            data += more
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(read)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # reaped already: an embedding program set SIGCHLD to SIG_IGN
            pass
    return data.decode("ascii") if len(data) == 64 else None
