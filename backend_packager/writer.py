"""The rewrite engine: raw copy of every unchanged member, hashed and scanned on the way.

Each member's compressed bytes are read once. As a chunk arrives it is written to the
output unchanged (no re-deflate) and inflated into an :class:`ArtifactSink` that hashes it,
checks its CRC and declared size, and scans it if it is ELF. Because every output offset
is known before copying starts (local headers have a fixed size: no extra field, no data
descriptor), members can be copied by several threads at once with ``pread``/``pwrite``;
zlib, hashlib and the file calls release the GIL, so ``jobs=2`` uses two cores.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_backend_runtime.layout import is_shared_library
from triton_backend_runtime.manifest import Artifact

from . import entrypoints, records, zipformat
from .artifacts import CHUNK, ArtifactSink
from .elf import CaptureMiss
from .errors import ElfError, WheelError
from .fsutil import atomic_output
from .signing import SigningKey, seal
from .wheelfile import WITHDRAWN, Injection, Member, WheelArchive, WheelContents, manifest_member

#: Most bytes one inflate step may produce: bounds memory whatever the compression ratio.
INFLATE_STEP = 4 << 20
#: Magic numbers of native binaries this tool cannot scan (PE, Mach-O 32/64, fat Mach-O).
FOREIGN_BINARY = (b"MZ", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
                  b"\xca\xfe\xba\xbe")
_NEW_FILE_ATTR = 0o100644 << 16


@dataclass
class Copied:
    """A member as written: its entry, digest, and artifact record if it is native code."""

    entry: zipformat.Entry
    sha256: str
    size: int
    artifact: Artifact | None
    warning: str | None = None


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


def write_rewritten(
    archive: WheelArchive,
    dst: Path,
    plan: Callable[[WheelContents], Injection],
    key: SigningKey | None,
    *,
    jobs: int,
    epoch: int | None,
    progress: Callable[[str, int], None] | None,
) -> Path:
    dist = archive.dist_info + "/"
    payload = sorted((m for m in archive.members if not m.name.startswith(dist)), key=lambda m: m.name)
    replaced = {f"{dist}RECORD", f"{dist}entry_points.txt", manifest_member(archive.dist_info)}
    replaced |= {f"{dist}{w}" for w in WITHDRAWN}
    kept = sorted((m for m in archive.members if m.name.startswith(dist) and m.name not in replaced),
                  key=lambda m: m.name)
    stamp = _Stamp(archive.members, epoch)
    with atomic_output(dst) as out, _SourceFile(archive.path) as src_fd:
        copier = _Copier(archive, src_fd, out.fileno(), progress)
        entries, offset = _layout(payload, stamp, 0)
        copied = copier.copy_all(payload, entries, jobs)
        _check_record(archive, copied)
        contents = _contents(archive, copied)
        injection = plan(contents)
        tail = _dist_info_files(archive, injection, key)
        written, offset = _write_dist_info(copier, kept, tail, stamp, offset)
        _check_record(archive, [w for w in written if w.entry.name not in tail])
        _finish(out.fileno(), archive, copied + written, offset, stamp)
    return dst


class _SourceFile:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _layout(members: list[Member], stamp: _Stamp, offset: int) -> tuple[list[zipformat.Entry], int]:
    """Output entries with their offsets, computed before any byte is copied."""
    entries = []
    for m in members:
        date, time = stamp.of(m)
        entries.append(zipformat.Entry(m.name, m.method, m.crc, m.compress_size, m.file_size, date, time,
                                       m.external_attr, offset))
        offset += zipformat.local_header_size(m.name) + m.compress_size
    return entries, offset


class _Copier:
    """Copies members from one open input to one open output; thread-safe per member."""

    def __init__(self, archive: WheelArchive, src_fd: int, out_fd: int,
                 progress: Callable[[str, int], None] | None) -> None:
        self.archive = archive
        self.src_fd = src_fd
        self.out_fd = out_fd
        self.src_size = os.fstat(src_fd).st_size
        self.progress = progress
        self._lock = threading.Lock()

    def copy_all(self, members: list[Member], entries: list[zipformat.Entry], jobs: int) -> list[Copied]:
        pairs = list(zip(members, entries, strict=True))
        if jobs <= 1:
            return [self.copy(m, e) for m, e in pairs]
        # Biggest first, so one large member does not start last and run alone.
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i][0].compress_size)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {i: pool.submit(self.copy, *pairs[i]) for i in order}
            done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    for other in futures.values():
                        other.cancel()
                    raise future.exception()  # type: ignore[misc]
        return [futures[i].result() for i in range(len(pairs))]

    def copy(self, member: Member, entry: zipformat.Entry) -> Copied:
        where = self.archive.where(member.name)
        header = zipformat.local_header(entry)
        os.pwrite(self.out_fd, header, entry.offset)
        sink = ArtifactSink(member.name, where)
        try:
            self._stream(member, sink, entry.offset + len(header), where)
            return self._result(member, entry, sink, where)
        except CaptureMiss:
            # Rare layouts put a needed section outside the captured ranges: read it again, whole.
            full = ArtifactSink(member.name, where, sparse=False)
            try:
                self._stream(member, full, None, where)
                return self._result(member, entry, full, where)
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
        pending = raw
        while pending:
            try:
                data = inflater.decompress(pending, INFLATE_STEP) if inflater else pending
            except zlib.error as exc:
                raise WheelError("corrupt", where, f"cannot inflate member: {exc}") from None
            if sink.size + len(data) > m.file_size:
                raise WheelError("zip-bomb", where, f"inflates past its declared size of {m.file_size} bytes")
            crc = zlib.crc32(data, crc)
            sink.update(data)
            pending = inflater.unconsumed_tail if inflater else b""
        return crc

    def _data_offset(self, m: Member, where: str) -> int:
        header = os.pread(self.src_fd, zipformat.LOCAL_HEADER.size, m.header_offset)
        if len(header) < zipformat.LOCAL_HEADER.size:
            raise WheelError("truncated", where, "local header past the end of the file (truncated wheel)")
        fields = zipformat.LOCAL_HEADER.unpack(header)
        if fields[0] != zipformat.LOCAL_SIGNATURE:
            raise WheelError("corrupt", where, "bad local header signature")
        start: int = m.header_offset + zipformat.LOCAL_HEADER.size + fields[9] + fields[10]
        if start + m.compress_size > self.src_size:
            raise WheelError("truncated", where, "member data runs past the end of the file (truncated wheel)")
        return start

    @staticmethod
    def _result(m: Member, entry: zipformat.Entry, sink: ArtifactSink, where: str) -> Copied:
        digest, size = sink.sha256, sink.size
        if sink.is_elf:
            try:
                return Copied(entry, digest, size, sink.finish())
            except CaptureMiss:
                raise
            except ElfError as exc:
                warning = f"{where}: not scanned: {exc.detail}"
                return Copied(entry, digest, size, Artifact(m.name, digest, size), warning)
        if sink.head.startswith(FOREIGN_BINARY):
            return Copied(entry, digest, size, Artifact(m.name, digest, size),
                          f"{where}: unsupported binary format (PE or Mach-O): listed, not scanned")
        if not m.is_dir and is_shared_library(m.name):
            return Copied(entry, digest, size, Artifact(m.name, digest, size),
                          f"{where}: named like a shared library but not ELF: listed, not scanned")
        return Copied(entry, digest, size, None)


def _check_record(archive: WheelArchive, copied: list[Copied]) -> None:
    """Compare what was streamed with the input's RECORD: a mismatch means corrupt input."""
    for item in copied:
        name = item.entry.name
        if name.endswith("/"):
            continue
        row = archive.record.get(name)
        where = archive.where(name)
        if row is None:
            raise WheelError("record", where, "member is not listed in RECORD")
        if row.sha256 is not None and row.sha256 != item.sha256:
            raise WheelError("corrupt", where, "sha256 differs from RECORD: the input wheel is corrupt; not signing it")
        if row.size is not None and row.size != item.size:
            raise WheelError("corrupt", where, f"size {item.size} differs from RECORD's {row.size}; not signing it")
    present = {m.name for m in archive.members}
    for path in archive.record:
        if path not in present:
            raise WheelError("record", archive.where(path), "listed in RECORD but not in the wheel")


def _contents(archive: WheelArchive, copied: list[Copied]) -> WheelContents:
    meta = archive.metadata
    return WheelContents(
        name=meta["Name"],
        version=meta["Version"],
        tags=list(archive.wheel_meta.get_all("Tag") or []),
        dist_info=archive.dist_info,
        names=[m.name for m in archive.members],
        artifacts=sorted((c.artifact for c in copied if c.artifact), key=lambda a: a.path),
        entry_points=archive.entry_points(),
        metadata=meta,
        existing_manifest=archive.read(manifest_member(archive.dist_info)),
        read_member=archive.read,
        warnings=[c.warning for c in copied if c.warning],
    )


def _dist_info_files(archive: WheelArchive, injection: Injection, key: SigningKey | None) -> dict[str, bytes]:
    files = {manifest_member(archive.dist_info): seal(injection.manifest, key)}
    text = entrypoints.render(injection.entry_points)
    if text:
        files[f"{archive.dist_info}/entry_points.txt"] = text.encode("utf-8")
    return files


def _write_dist_info(copier: _Copier, kept: list[Member], new: dict[str, bytes], stamp: _Stamp,
                     offset: int) -> tuple[list[Copied], int]:
    """Kept members raw, new ones deflated, all in name order; RECORD comes after."""
    names = sorted([m.name for m in kept] + list(new))
    by_name = {m.name: m for m in kept}
    written = []
    for name in names:
        if name in by_name:
            (entry,), _ = _layout([by_name[name]], stamp, offset)
            written.append(copier.copy(by_name[name], entry))
            offset += zipformat.local_header_size(name) + entry.compress_size
        else:
            item = _write_new(copier.out_fd, name, new[name], stamp.new, offset)
            written.append(item)
            offset += zipformat.local_header_size(name) + item.entry.compress_size
    return written, offset


def _write_new(fd: int, name: str, data: bytes, when: tuple[int, int], offset: int) -> Copied:
    import hashlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = compressor.compress(data) + compressor.flush()
    entry = zipformat.Entry(name, zipformat.DEFLATED, zlib.crc32(data), len(body), len(data), when[0], when[1],
                            _NEW_FILE_ATTR, offset)
    os.pwrite(fd, zipformat.local_header(entry) + body, offset)
    return Copied(entry, hashlib.sha256(data).hexdigest(), len(data), None)


def _finish(fd: int, archive: WheelArchive, written: list[Copied], offset: int, stamp: _Stamp) -> None:
    """RECORD (last member), then the central directory and end records; nothing after."""
    rows = [records.RecordRow(c.entry.name, c.sha256, c.size) for c in written if not c.entry.name.endswith("/")]
    record_name = f"{archive.dist_info}/RECORD"
    rows.append(records.RecordRow(record_name, None, None))
    record = _write_new(fd, record_name, records.render(rows), stamp.new, offset)
    offset += zipformat.local_header_size(record_name) + record.entry.compress_size
    entries = [c.entry for c in written] + [record.entry]
    directory = b"".join(zipformat.central_header(e) for e in entries)
    tail = directory + zipformat.end_records(len(entries), offset, len(directory))
    os.pwrite(fd, tail, offset)
    os.ftruncate(fd, offset + len(tail))
