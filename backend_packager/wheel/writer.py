"""The wheel writer: raw copy of every unchanged member, hashed and scanned on the way.

The writer is one-way, as ``installer``'s core is: :meth:`WheelWriter.copy_payload` copies
and describes what is there, the caller plans and seals a manifest from that description,
and :meth:`WheelWriter.finish` writes the finished bytes it is handed. It never learns how
those bytes were made (no signing here, no manifest).

Each member's compressed bytes are read once. As a chunk arrives it is written to the
output unchanged (no re-deflate) and inflated into an :class:`ArtifactSink` that hashes it,
checks its CRC and declared size, and scans it if it is ELF. Because every payload offset
is known before copying starts (local headers have a fixed size: no extra field, no data
descriptor), members can be copied by several threads at once with ``pread``/``pwrite``;
zlib, hashlib and the file calls release the GIL, so ``jobs=2`` uses two cores. The inflater
is zlib's even where ISA-L is installed: it is what installers use, and ISA-L accepts some
streams zlib refuses (:mod:`.deflate`).

``.dist-info`` comes after the payload, sorted by name with the new files among the kept
ones, and RECORD last. The kept ``.dist-info`` files are hashed in :meth:`copy_payload`
(the manifest vouches for them too), but where they go depends on the size of the files
the plan adds, so they are copied raw in :meth:`finish`, and that second read must give
the bytes the first one hashed. They are metadata: kilobytes, read twice.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, wait
from dataclasses import dataclass
from typing import Any

from triton_backend_runtime.base import is_shared_library
from triton_backend_runtime.manifest import Artifact, is_installer_file

from ..base import ElfError, WheelError, checkpoint, worker_pool
from ..formats import records, zipformat
from ..scanning import CHUNK, ArtifactSink, CaptureMiss
from .reader import WITHDRAWN, Member, WheelArchive, WheelContents, bundle_member, manifest_member

__all__ = [
    "FOREIGN_BINARY", "INFLATE_STEP", "Progress", "Streamed", "WheelWriter", "Written", "check_new",
    "replaced_members", "write_new", "write_record_and_directory"
]

#: Most bytes one inflate step may produce: bounds memory whatever the compression ratio.
INFLATE_STEP = 4 << 20
#: Magic numbers of native binaries this tool cannot scan (PE, Mach-O 32/64, fat Mach-O).
FOREIGN_BINARY = (b"MZ", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
                  b"\xca\xfe\xba\xbe")
_NEW_FILE_ATTR = 0o100644 << 16

Progress = Callable[[str, int], None]


@dataclass
class Streamed:
    """One member as read: its record (sha256, size, ELF facts when native), and why it was
    listed without being scanned, if it was."""

    member: Member
    artifact: Artifact
    warning: str | None = None


@dataclass(frozen=True)
class Written:
    """One member as written: its zip entry and the RECORD row it gets."""

    entry: zipformat.Entry
    sha256: str
    size: int


class _Stamp:
    """Timestamps: SOURCE_DATE_EPOCH for all when given, else each member keeps its own."""

    def __init__(self, members: list[Member], epoch: int | None) -> None:
        self.fixed = zipformat.dos_datetime(epoch) if epoch is not None else None
        newest = max((m.date_time for m in members), default=(1980, 1, 1, 0, 0, 0))
        self.new = self.fixed or _dos(newest)

    def of(self, member: Member) -> tuple[int, int]:
        return self.fixed or _dos(member.date_time)


def _dos(dt: tuple[int, int, int, int, int, int]) -> tuple[int, int]:
    year, month, day, hour, minute, second = dt
    return (max(year, 1980) - 1980) << 9 | month << 5 | day, hour << 11 | minute << 5 | second // 2


def replaced_members(dist_info: str) -> set[str]:
    """``.dist-info`` members the rewrite drops: regenerated (RECORD), planned anew (entry
    points, manifest, its Sigstore bundle), or withdrawn signature files the spec says tools must not add."""
    names = {f"{dist_info}/RECORD", f"{dist_info}/entry_points.txt", manifest_member(dist_info),
             bundle_member(dist_info)}
    return names | {f"{dist_info}/{w}" for w in WITHDRAWN}


class WheelWriter:
    """Writes one output wheel into ``out_fd`` from one validated input archive."""

    def __init__(self, archive: WheelArchive, out_fd: int, *, jobs: int, epoch: int | None,
                 progress: Progress | None, replaced: set[str] | None = None) -> None:
        """``replaced``: the ``.dist-info`` members dropped from the input, made anew by the
        plan or not at all; :func:`replaced_members` when not given."""
        self.archive = archive
        self.jobs = jobs
        dist = archive.dist_info + "/"
        replaced = replaced_members(archive.dist_info) if replaced is None else replaced
        self._payload = sorted((m for m in archive.members if not m.name.startswith(dist)), key=lambda m: m.name)
        self._kept = sorted((m for m in archive.members if m.name.startswith(dist) and m.name not in replaced),
                            key=lambda m: m.name)
        self._stamp = _Stamp(archive.members, epoch)
        self._src_fd = os.dup(archive.fd)  # the descriptor the archive was checked through
        self._copier = _Copier(archive, self._src_fd, out_fd, progress)
        self._out_fd = out_fd
        self._written: list[Written] = []
        self._hashed: dict[str, str] = {}
        self._offset = 0

    def __enter__(self) -> WheelWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._src_fd)

    def copy_payload(self) -> WheelContents:
        """Copy every payload member raw and hash the kept ``.dist-info`` files; describe all."""
        entries, self._offset = _layout(self._payload, self._stamp, 0)
        work: list[tuple[Member, zipformat.Entry | None]] = [*zip(self._payload, entries, strict=True)]
        work += [(m, None) for m in self._kept]  # hashed now, written by finish()
        streamed = self._copier.copy_all(work, self.jobs)
        for entry, item in zip(entries, streamed[:len(entries)], strict=True):
            self._written.append(Written(entry, item.artifact.sha256, item.artifact.size))
        self._hashed = {s.member.name: s.artifact.sha256 for s in streamed[len(entries):]}
        return _contents(self.archive, streamed, _discrepancies(self.archive, streamed))

    def finish(self, files: dict[str, bytes]) -> None:
        """Write ``.dist-info``: the kept files raw and ``files`` (name -> final bytes)
        deflated, all in name order; then RECORD, the central directory and the end records."""
        self._check_new(files)
        by_name = {m.name: m for m in self._kept}
        for name in sorted([*by_name, *files]):
            if name in by_name:
                self._append(self._copy_kept(by_name[name]))
            else:
                self._append(write_new(self._out_fd, name, files[name], self._stamp.new, self._offset))
        self._write_record_and_directory()

    def _check_new(self, files: dict[str, bytes]) -> None:
        check_new(files, self.archive.dist_info, {m.name for m in self._kept}, self.archive.where)

    def _copy_kept(self, member: Member) -> Written:
        (entry,), _ = _layout([member], self._stamp, self._offset)
        item = self._copier.copy(member, entry)
        if item.artifact.sha256 != self._hashed[member.name]:
            raise WheelError("changed", self.archive.where(member.name),
                             "the input changed while it was being rewritten; no output written")
        return Written(entry, item.artifact.sha256, item.artifact.size)

    def _append(self, written: Written) -> None:
        self._written.append(written)
        self._offset += zipformat.local_header_size(written.entry.name) + written.entry.compress_size

    def _write_record_and_directory(self) -> None:
        write_record_and_directory(self._out_fd, self._written, f"{self.archive.dist_info}/RECORD",
                                   self._stamp.new, self._offset)


def check_new(files: dict[str, bytes], dist_info: str, kept: set[str], where: Callable[[str], str]) -> None:
    """The files a plan adds: files in ``.dist-info``, none of them a kept member or RECORD."""
    dist = dist_info + "/"
    for name in files:
        if not name.startswith(dist) or name.endswith("/"):
            raise WheelError("injection", where(name), f"a file added on rewrite must be a file in {dist}")
        if name in kept or name == f"{dist}RECORD":
            raise WheelError("injection", where(name), "a file added on rewrite would replace a kept member")


def write_record_and_directory(fd: int, written: list[Written], record_name: str, when: tuple[int, int],
                               offset: int) -> None:
    """RECORD (last member, at ``offset``) of the members ``written``, then the central
    directory and end records; nothing after."""
    rows = [records.RecordRow(w.entry.name, w.sha256, w.size) for w in written if not w.entry.name.endswith("/")]
    rows.append(records.RecordRow(record_name, None, None))
    record = write_new(fd, record_name, records.render(rows), when, offset)
    entries = [*written, record]
    offset += zipformat.local_header_size(record_name) + record.entry.compress_size
    directory = b"".join(zipformat.central_header(w.entry) for w in entries)
    tail = directory + zipformat.end_records(len(entries), offset, len(directory))
    os.pwrite(fd, tail, offset)
    os.ftruncate(fd, offset + len(tail))


def _layout(members: list[Member], stamp: _Stamp, offset: int) -> tuple[list[zipformat.Entry], int]:
    """Output entries with their offsets, computed before any byte is copied."""
    entries = []
    for m in members:
        date, time = stamp.of(m)
        entries.append(zipformat.Entry(m.name, m.method, m.crc, m.compress_size, m.file_size, date, time,
                                       zipformat.normal_mode(m.external_attr, m.is_dir), offset))
        offset += zipformat.local_header_size(m.name) + m.compress_size
    return entries, offset


class _Copier:
    """Copies members from one open input to one open output; thread-safe per member."""

    def __init__(self, archive: WheelArchive, src_fd: int, out_fd: int, progress: Progress | None) -> None:
        self.archive = archive
        self.src_fd = src_fd
        self.out_fd = out_fd
        self.src_size = os.fstat(src_fd).st_size
        self.progress = progress
        self._lock = threading.Lock()

    def copy_all(self, pairs: list[tuple[Member, zipformat.Entry | None]], jobs: int) -> list[Streamed]:
        if jobs <= 1:
            return [self.copy(m, e) for m, e in pairs]
        # Biggest first, so one large member does not start last and run alone.
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i][0].compress_size)
        with worker_pool(jobs) as pool:
            futures = {i: pool.submit(self.copy, *pairs[i]) for i in order}
            done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    for other in futures.values():
                        other.cancel()
                    raise future.exception()  # type: ignore[misc]
        return [futures[i].result() for i in range(len(pairs))]

    def copy(self, member: Member, entry: zipformat.Entry | None) -> Streamed:
        """Hash and scan ``member``; with ``entry``, also write it raw at the entry's offset."""
        where = self.archive.where(member.name)
        write_at = None
        if entry is not None:
            header = zipformat.local_header(entry)
            os.pwrite(self.out_fd, header, entry.offset)
            write_at = entry.offset + len(header)
        sink = ArtifactSink(member.name, where)
        try:
            self._stream(member, sink, write_at, where)
            return self._result(member, sink, where)
        except CaptureMiss as miss:
            # Rare layouts put a needed section outside the planned ranges: read it again,
            # keeping exactly the ranges the scan asked for.
            full = ArtifactSink(member.name, where, capture=miss.ranges)
            try:
                self._stream(member, full, None, where)
                return self._result(member, full, where)
            finally:
                full.close()
        finally:
            sink.close()

    def _stream(self, m: Member, sink: ArtifactSink, write_at: int | None, where: str) -> None:
        """Inflate ``m`` into ``sink``; with ``write_at``, also copy its raw bytes there."""
        pos = self._data_offset(m, where)
        end = pos + m.compress_size
        inflater = zlib.decompressobj(-15) if m.method == zipformat.DEFLATED else None
        crc = 0
        while pos < end:
            checkpoint()
            raw = os.pread(self.src_fd, min(CHUNK, end - pos), pos)
            if not raw:
                raise WheelError("truncated", where, "member data ends before its declared size (truncated wheel)")
            pos += len(raw)
            crc = self._inflate(inflater, raw, sink, crc, m, where)
            if write_at is None:
                continue
            os.pwrite(self.out_fd, raw, write_at)
            write_at += len(raw)
            if self.progress:
                with self._lock:
                    self.progress(m.name, len(raw))
        if inflater is not None and not inflater.eof:
            raise WheelError("corrupt", where, "compressed data ends early (corrupt member)")
        if sink.size != m.file_size or crc != m.crc:
            raise WheelError("corrupt", where, "CRC or size does not match the zip directory (corrupt member)")

    @staticmethod
    def _inflate(inflater: Any, raw: bytes, sink: ArtifactSink, crc: int, m: Member,
                 where: str) -> int:
        """Feed ``raw`` through; each step yields at most INFLATE_STEP bytes. zlib may hold
        output after taking all its input (a run of zeros inflates ~1000:1), so the loop
        ends only when a step leaves no input and fills less than a whole step."""
        pending = raw
        while True:
            try:
                data = inflater.decompress(pending, INFLATE_STEP) if inflater else pending
            except zlib.error as exc:
                raise WheelError("corrupt", where, f"cannot inflate member: {exc}") from None
            if sink.size + len(data) > m.file_size:
                raise WheelError("zip-bomb", where, f"inflates past its declared size of {m.file_size} bytes")
            crc = zlib.crc32(data, crc)
            sink.update(data)
            pending = inflater.unconsumed_tail if inflater else b""
            if not pending and len(data) < INFLATE_STEP:
                return crc

    def _data_offset(self, m: Member, where: str) -> int:
        """Where ``m``'s data starts: checked against the central directory when the archive
        was opened; here only against the file's present size."""
        if m.data_offset < 0 or m.data_offset + m.compress_size > self.src_size:
            raise WheelError("truncated", where, "member data runs past the end of the file (truncated wheel)")
        return m.data_offset

    @staticmethod
    def _result(m: Member, sink: ArtifactSink, where: str) -> Streamed:
        """Every file is an artifact; native ones carry their ELF facts, or say why not."""
        plain = Artifact(m.name, sink.sha256, sink.size)
        if sink.is_elf:
            try:
                return Streamed(m, sink.finish())
            except CaptureMiss:
                raise
            except ElfError as exc:
                return Streamed(m, plain, f"{where}: not scanned: {exc.detail}")
        if sink.head.startswith(FOREIGN_BINARY):
            return Streamed(m, plain, f"{where}: unsupported binary format (PE or Mach-O): listed, not scanned")
        if not m.is_dir and is_shared_library(m.name):
            return Streamed(m, plain, f"{where}: named like a shared library but not ELF: listed, not scanned")
        return Streamed(m, plain)


def _discrepancies(archive: WheelArchive, streamed: list[Streamed]) -> list[records.Discrepancy]:
    """What was streamed against the input's RECORD, and the file name's tags against WHEEL's:
    reported, not raised here; the rewrite refuses them unless the plan records each one."""
    seen = {s.member.name: (s.artifact.sha256, s.artifact.size) for s in streamed if not s.member.is_dir}
    found = records.discrepancies(archive.record, seen, {m.name for m in archive.members})
    tags = archive.tag_problem()
    if tags:
        found.append(records.Discrepancy("wheel.tags", archive.path.name, tags))
    return found


def _contents(archive: WheelArchive, streamed: list[Streamed], found: list[records.Discrepancy]) -> WheelContents:
    meta = archive.metadata
    files = [s.artifact for s in streamed if not s.member.is_dir and not is_installer_file(s.member.name)]
    return WheelContents(
        name=meta["Name"],
        version=meta["Version"],
        tags=list(archive.wheel_meta.get_all("Tag") or []),
        dist_info=archive.dist_info,
        names=[m.name for m in archive.members],
        artifacts=sorted(files, key=lambda a: a.path),
        entry_points=archive.entry_points(),
        metadata=meta,
        existing_manifest=archive.read(manifest_member(archive.dist_info)),
        read_member=archive.read,
        warnings=[*archive.warnings, *(s.warning for s in streamed if s.warning)],
        discrepancies=found,
    )


def write_new(fd: int, name: str, data: bytes, when: tuple[int, int], offset: int) -> Written:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = compressor.compress(data) + compressor.flush()
    entry = zipformat.Entry(name, zipformat.DEFLATED, zlib.crc32(data), len(body), len(data), when[0], when[1],
                            _NEW_FILE_ATTR, offset)
    os.pwrite(fd, zipformat.local_header(entry) + body, offset)
    return Written(entry, hashlib.sha256(data).hexdigest(), len(data))
