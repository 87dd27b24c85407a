"""Writing a wheel from files on disk (``adopt --wheel-out``: an installed distribution's checked files).

Everything that can be refused is refused before any byte is deflated: the caller checks the
files and plans and seals the manifest first, then makes a :class:`FileWheelWriter` with the
files to stream and the finished files the plan adds, which refuses a member named twice,
RECORD among them, a file too large for a member or an added file outside ``.dist-info``.
:meth:`FileWheelWriter.write` then writes everything in one pass: the payload in name order,
then ``.dist-info`` (the kept files streamed, the added ones deflated from memory), RECORD last.

Each file is read once here and not hashed again: the digest in RECORD and in the manifest is
the one the check computed. What is streamed must be the file that was checked, so its
identity (device, inode, size, mtime and ctime in ns: a write in place changes the
timestamps, a rename over it the inode) is compared with the check's when it is opened and
again after its last byte is read, as the runtime compares a file with the one it verified.

Chunks are deflated on ``jobs`` threads (:mod:`.deflate`) and written in order, so one large
file uses every core; the bytes never depend on ``jobs``. The compressed size is known only at
the end, so each member's local header is written into the space left for it once its data is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from triton_backend_runtime.site import identity

from ..base import InstalledError, WheelError, checkpoint, worker_pool
from ..formats import zipformat
from .deflate import CHUNK, WINDOW, ChunkDeflater, Engine, engine
from .reader import MAX_MEMBER_SIZE
from .writer import Progress, Written, check_new, write_new, write_record_and_directory

__all__ = ["FileWheelWriter", "SourceFile"]


@dataclass(frozen=True)
class SourceFile:
    """A file that becomes the member ``name``: as it was checked (sha256, size, mode, mtime and
    the identity it was hashed with), where it is (for messages), and how to open it again (a
    descriptor; closed here)."""

    name: str
    sha256: str
    size: int
    mode: int
    mtime: float
    where: str
    opener: Callable[[], int]
    identity: tuple[int, ...]


@dataclass
class _Streaming:
    """One member as its chunks are written: where its header goes, its size so far, its CRC."""

    source: SourceFile
    header_at: int = -1
    compressed: int = 0
    crc: int = 0


class FileWheelWriter:
    """One wheel of ``files``, streamed (each as checked), and ``added`` (name -> final bytes:
    what the plan adds to ``.dist-info``); refused when made, written by :meth:`write`."""

    def __init__(self, dist_info: str, files: Sequence[SourceFile], added: dict[str, bytes], *,
                 jobs: int, epoch: int | None, progress: Progress | None, using: Engine | None = None) -> None:
        self.dist_info = dist_info
        self.engine = using or engine()
        dist = dist_info + "/"
        names = [f.name for f in files]
        if len(set(names)) != len(names) or f"{dist}RECORD" in names:
            raise WheelError("duplicate", dist_info, "a member named twice, or RECORD among the files: "
                             "RECORD is written from the others")
        for source in files:
            if source.size > MAX_MEMBER_SIZE:
                raise WheelError("limit", source.where, f"member {source.name}: {source.size} bytes; "
                                 "a wheel member must be under 4 GiB")
        kept = {f.name: f for f in files if f.name.startswith(dist)}
        check_new(added, dist_info, set(kept), lambda name: name)
        payload = sorted((f for f in files if not f.name.startswith(dist)), key=lambda f: f.name)
        self._order: list[SourceFile | str] = [*payload, *(kept.get(n, n) for n in sorted([*kept, *added]))]
        self._added = added
        self._fixed = zipformat.dos_datetime(epoch) if epoch is not None else None
        newest = max((int(f.mtime) for f in files), default=zipformat.DOS_EPOCH)
        self._new_stamp = self._fixed or zipformat.dos_datetime(newest)
        self._out_fd = -1
        self._progress = progress
        self._jobs = max(1, jobs)
        self._written: list[Written] = []
        self._offset = 0

    @property
    def total_bytes(self) -> int:
        """The bytes :meth:`write` reads from the files, for a progress bar."""
        return sum(item.size for item in self._order if isinstance(item, SourceFile))

    def write(self, out_fd: int) -> None:
        """Every member in order into ``out_fd``, then RECORD, the central directory and the
        end records. At most two chunks a thread are held, read ahead or deflated but not
        yet written."""
        self._out_fd = out_fd
        with worker_pool(self._jobs) as pool:
            deflater: ChunkDeflater[_Streaming] = ChunkDeflater(pool, 2 * self._jobs, self.engine)
            for item in self._order:
                if isinstance(item, SourceFile):
                    self._stream(_Streaming(item), deflater)
                    continue
                for piece in deflater.drain():  # an added file goes where the streamed ones end
                    self._write_piece(*piece)
                self._append(write_new(self._out_fd, item, self._added[item], self._new_stamp, self._offset))
            for piece in deflater.drain():
                self._write_piece(*piece)
        write_record_and_directory(self._out_fd, self._written, f"{self.dist_info}/RECORD", self._new_stamp,
                                   self._offset)

    def _append(self, written: Written) -> None:
        self._written.append(written)
        self._offset += zipformat.local_header_size(written.entry.name) + written.entry.compress_size

    def _stream(self, member: _Streaming, deflater: ChunkDeflater[_Streaming]) -> None:
        """Read the file's chunks in order here (its CRC as they come), hand them to the
        deflater, and write what it gives back."""
        source = member.source
        fd = source.opener()
        try:
            _same_as_checked(fd, source)
            history, left = b"", source.size
            while True:
                checkpoint()
                chunk = _read_chunk(fd, min(CHUNK, left), source)
                member.crc = self.engine.crc32(chunk, member.crc)
                left -= len(chunk)
                if not left:
                    _same_as_checked(fd, source)  # nothing was written while it was read
                if self._progress is not None:
                    self._progress(source.name, len(chunk))
                for piece in deflater.feed(member, chunk, history, not left):
                    self._write_piece(*piece)
                if not left:
                    return
                history = chunk[-WINDOW:]
        finally:
            os.close(fd)

    def _write_piece(self, member: _Streaming, piece: bytes, last: bool) -> None:
        source = member.source
        if member.header_at < 0:
            member.header_at = self._offset
            self._offset += zipformat.local_header_size(source.name)
        _write_at(self._out_fd, piece, self._offset, source)
        self._offset += len(piece)
        member.compressed += len(piece)
        if last:
            self._close_member(member)

    def _close_member(self, member: _Streaming) -> None:
        source = member.source
        if member.compressed > zipformat.MAX_32:
            raise WheelError("limit", source.where, f"member {source.name} deflates to 4 GiB or more: "
                             "not one wheel member")
        date, time = self._fixed or zipformat.dos_datetime(int(source.mtime))
        entry = zipformat.Entry(source.name, zipformat.DEFLATED, member.crc, member.compressed, source.size, date,
                                time, zipformat.normal_mode(source.mode << 16, False), member.header_at)
        _write_at(self._out_fd, zipformat.local_header(entry), member.header_at, source)
        self._written.append(Written(entry, source.sha256, source.size))


def _same_as_checked(fd: int, source: SourceFile) -> None:
    try:
        now = tuple(identity(os.fstat(fd)))
    except OSError as exc:
        raise InstalledError("read", source.where, f"member {source.name}: cannot stat: {exc.strerror}") from None
    if now != source.identity:
        raise InstalledError("changed", source.where, f"member {source.name}: changed since it was checked "
                             "against RECORD; no wheel written")


def _read_chunk(fd: int, count: int, source: SourceFile) -> bytes:
    """Exactly ``count`` bytes: a chunk's edges must not move, and a file shorter than it
    was checked is not that file."""
    parts = []
    left = count
    try:
        while left > 0:
            piece = os.read(fd, left)
            if not piece:
                raise InstalledError("changed", source.where, f"member {source.name}: shorter than when it was "
                                     "checked against RECORD; no wheel written")
            parts.append(piece)
            left -= len(piece)
    except OSError as exc:
        raise InstalledError("read", source.where, f"member {source.name}: cannot read: {exc.strerror}") from None
    return b"".join(parts)


def _write_at(fd: int, data: bytes, offset: int, source: SourceFile) -> None:
    view = memoryview(data)
    try:
        while view:
            done = os.pwrite(fd, view, offset)
            view, offset = view[done:], offset + done
    except OSError as exc:  # no space left: the output's failure, said while writing this member
        raise WheelError("write", source.where, f"member {source.name}: cannot write it into the wheel: "
                         f"{exc.strerror}") from None
