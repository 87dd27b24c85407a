"""Writing a wheel from files on disk (``adopt --wheel-out``: an installed distribution's checked files).

Each file is read once: hashed as it is read, its sha256 compared with the digest it was
checked with (a file changed since is refused, and no output is left), and deflated on the
way out. The writer is one-way, as :class:`~.writer.WheelWriter` is: :meth:`FileWheelWriter.copy_payload`
writes the payload, the caller plans and seals, :meth:`FileWheelWriter.finish` writes ``.dist-info``
(the kept files streamed the same way, the finished bytes it is handed deflated), RECORD
last, from the digests checked.

Deflating is most of the work (sha256 runs ten times faster than zlib's fastest level), so
it runs on ``jobs`` threads: each :data:`BLOCK` of a file is deflated on its own, primed
with the 32 KiB before it and ended byte-aligned by a sync flush, and the blocks are joined
in order into one deflate stream (pigz's way). The output depends on the block size only,
never on the thread count: the same files and SOURCE_DATE_EPOCH give the same bytes. The
compressed size is known only at the end, so each member's local header is written into
the space left for it once its data is.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ..base import InstalledError, WheelError, checkpoint
from ..formats import zipformat
from .reader import MAX_MEMBER_SIZE
from .writer import Progress, Written, check_new, write_new, write_record_and_directory

__all__ = ["BLOCK", "FileWheelWriter", "LEVEL", "SourceFile", "WINDOW"]

#: Uncompressed bytes deflated as one unit: fixed, so the output never depends on ``jobs``.
BLOCK = 1 << 20
#: zlib's fastest level: libtriton.so to a quarter of its size at 80-120 MB/s a core; level 6,
#: the default, makes it 13% smaller at under a third of the speed.
LEVEL = 1
#: Deflate's window: the bytes before a block that its compressor is primed with.
WINDOW = 32 << 10


@dataclass(frozen=True)
class SourceFile:
    """A file that becomes the member ``name``: as it was checked (sha256, size, mode, mtime),
    where it is (for messages), and how to open it again (a descriptor; closed here)."""

    name: str
    sha256: str
    size: int
    mode: int
    mtime: float
    where: str
    opener: Callable[[], int]


@dataclass
class _Streaming:
    """One member as its blocks are written: where it starts, and its CRC once read whole."""

    source: SourceFile
    header_at: int = -1
    compressed: int = 0
    crc: int = 0


class FileWheelWriter:
    """Writes one wheel into ``out_fd`` from ``files`` (each member's file, as checked)."""

    def __init__(self, dist_info: str, out_fd: int, files: list[SourceFile], *, jobs: int, epoch: int | None,
                 progress: Progress | None) -> None:
        self.dist_info = dist_info
        dist = dist_info + "/"
        self._payload = sorted((f for f in files if not f.name.startswith(dist)), key=lambda f: f.name)
        self._kept = {f.name: f for f in files if f.name.startswith(dist)}
        names = [f.name for f in files]
        if len(set(names)) != len(names) or f"{dist}RECORD" in self._kept:
            raise WheelError("duplicate", dist_info, "a member named twice, or RECORD among the files: "
                             "RECORD is written from the others")
        self._fixed = zipformat.dos_datetime(epoch) if epoch is not None else None
        newest = max((int(f.mtime) for f in files), default=zipformat.DOS_EPOCH)
        self._new_stamp = self._fixed or zipformat.dos_datetime(newest)
        self._out_fd = out_fd
        self._progress = progress
        self._jobs = max(1, jobs)
        self._pool = ThreadPoolExecutor(max_workers=self._jobs)
        self._written: list[Written] = []
        self._offset = 0

    def __enter__(self) -> FileWheelWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    @property
    def total_bytes(self) -> int:
        """What :meth:`copy_payload` and :meth:`finish` will read, for a progress bar."""
        return sum(f.size for f in self._payload) + sum(f.size for f in self._kept.values())

    def copy_payload(self) -> None:
        """Every file outside ``.dist-info``, in name order."""
        self._stream(self._payload)

    def finish(self, files: dict[str, bytes]) -> None:
        """Write ``.dist-info``: the kept files and ``files`` (name -> final bytes), all in
        name order; then RECORD, the central directory and the end records."""
        check_new(files, self.dist_info, set(self._kept), lambda name: name)
        for name in sorted([*self._kept, *files]):
            if name in self._kept:
                self._stream([self._kept[name]])
            else:
                self._append(write_new(self._out_fd, name, files[name], self._new_stamp, self._offset))
        write_record_and_directory(self._out_fd, self._written, f"{self.dist_info}/RECORD", self._new_stamp,
                                   self._offset)

    def _append(self, written: Written) -> None:
        self._written.append(written)
        self._offset += zipformat.local_header_size(written.entry.name) + written.entry.compress_size

    def _stream(self, sources: list[SourceFile]) -> None:
        """Read each file's blocks in order here (hashing them), deflate them on the pool,
        and write them back in order, at most two blocks per thread in flight."""
        window: deque[tuple[_Streaming, Future[bytes], bool]] = deque()
        for source in sources:
            member = _Streaming(source)
            for block, prime, last in self._blocks(member):
                window.append((member, self._pool.submit(_deflate, block, prime, last), last))
                while len(window) > 2 * self._jobs:
                    self._write_block(*window.popleft())
        while window:
            self._write_block(*window.popleft())

    def _blocks(self, member: _Streaming) -> Iterator[tuple[bytes, bytes, bool]]:
        """``(block, the bytes before it, whether it is the last)``; the file's size and sha256
        are compared with its own as checked before its last block is handed on."""
        source = member.source
        if source.size > MAX_MEMBER_SIZE:
            raise WheelError("limit", source.where, f"{source.size} bytes: a wheel member must be under 4 GiB")
        fd = source.opener()
        try:
            if os.fstat(fd).st_size != source.size:
                raise _changed(source)
            digest = hashlib.sha256()
            prime, left = b"", source.size
            while True:
                checkpoint()
                want = min(BLOCK, left)
                block = _read_block(fd, want)
                if len(block) != want:
                    raise _changed(source)  # shorter than it was
                digest.update(block)
                member.crc = zlib.crc32(block, member.crc)
                left -= want
                if not left and digest.hexdigest() != source.sha256:
                    raise _changed(source)
                if self._progress is not None:
                    self._progress(source.name, want)
                yield block, prime, not left
                if not left:
                    return
                prime = block[-WINDOW:]
        finally:
            os.close(fd)

    def _write_block(self, member: _Streaming, future: Future[bytes], last: bool) -> None:
        data = future.result()
        if member.header_at < 0:
            member.header_at = self._offset
            self._offset += zipformat.local_header_size(member.source.name)
        os.pwrite(self._out_fd, data, self._offset)
        self._offset += len(data)
        member.compressed += len(data)
        if last:
            self._close_member(member)

    def _close_member(self, member: _Streaming) -> None:
        source = member.source
        if member.compressed > zipformat.MAX_32:
            raise WheelError("limit", source.where, "deflates to 4 GiB or more: not one wheel member")
        date, time = self._fixed or zipformat.dos_datetime(int(source.mtime))
        entry = zipformat.Entry(source.name, zipformat.DEFLATED, member.crc, member.compressed, source.size, date,
                                time, zipformat.normal_mode(source.mode << 16, False), member.header_at)
        os.pwrite(self._out_fd, zipformat.local_header(entry), member.header_at)
        self._written.append(Written(entry, source.sha256, source.size))


def _read_block(fd: int, count: int) -> bytes:
    """``count`` bytes, fewer only at the end of the file: block edges must not move."""
    parts = []
    while count > 0:
        piece = os.read(fd, count)
        if not piece:
            break
        parts.append(piece)
        count -= len(piece)
    return b"".join(parts)


def _deflate(block: bytes, prime: bytes, last: bool) -> bytes:
    """Raw deflate of one block: primed with the window before it (the decompressor has those
    bytes as its history), ended by a sync flush (byte-aligned, not final) or, last, the final block."""
    compressor = (zlib.compressobj(LEVEL, zlib.DEFLATED, -15, zdict=prime) if prime
                  else zlib.compressobj(LEVEL, zlib.DEFLATED, -15))
    return compressor.compress(block) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def _changed(source: SourceFile) -> InstalledError:
    return InstalledError("changed", source.where, "changed since it was checked against RECORD; no wheel written")
