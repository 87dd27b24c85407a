"""Artifact records: a file's sha256 and size, plus its ELF facts when it is ELF.

Bytes are read once. :class:`ArtifactSink` takes a stream chunk by chunk (from a file, or
from a wheel member as it is inflated), hashes it, and spools it only when it is ELF, so
the scanner can seek in it afterwards. Only the byte ranges the scan reads are spooled
(:func:`~backend_packager.elf.capture_ranges`: about 90 MB of libtriton.so's 500 MB), at
their own offsets, leaving holes elsewhere. The spool lives in memory up to
:data:`SPOOL_IN_MEMORY` and in a temporary file beyond, so memory stays bounded however
big the member.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import BinaryIO

from triton_backend_runtime.manifest import Artifact

from .elf import ELF_MAGIC, capture_ranges, scan_elf
from .errors import ElfError

CHUNK = 1 << 20
SPOOL_IN_MEMORY = 16 << 20


class ArtifactSink:
    """Accumulates one member's bytes: hash always, spool for the scan if ELF."""

    def __init__(self, path: str, display: str, *, sparse: bool = True) -> None:
        self.path = path
        self.display = display
        self.size = 0
        self._hash = hashlib.sha256()
        self._head = b""
        self._decided = False
        self._ranges: list[tuple[int, int]] | None = None
        self._sparse = sparse
        self._spool: tempfile.SpooledTemporaryFile[bytes] | None = None

    def update(self, chunk: bytes) -> None:
        self._hash.update(chunk)
        start = self.size
        self.size += len(chunk)
        if self._spool is not None:
            self._keep(chunk, start)
            return
        if self._decided:
            return
        self._head += chunk
        if len(self._head) < 4:
            return
        # Enough bytes to tell: spool (including what came before) only if ELF.
        self._decided = True
        if self._head[:4] == ELF_MAGIC:
            self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
            self._ranges = capture_ranges(self._head) if self._sparse else None
            self._keep(self._head, 0)
        self._head = self._head[:64]

    def _keep(self, chunk: bytes, start: int) -> None:
        """Write the parts of ``chunk`` (at stream offset ``start``) that the scan needs."""
        assert self._spool is not None
        if self._ranges is None:
            self._spool.seek(start)
            self._spool.write(chunk)
            return
        end = start + len(chunk)
        for low, high in self._ranges:
            if high <= start or low >= end:
                continue
            lo, hi = max(low, start), min(high, end)
            self._spool.seek(lo)  # gaps stay holes: a sparse file, or zeros in memory
            self._spool.write(chunk[lo - start : hi - start])

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    @property
    def head(self) -> bytes:
        """Up to the first 64 bytes seen (for magic numbers)."""
        return self._head[:64]

    @property
    def is_elf(self) -> bool:
        return self._spool is not None

    def finish(self, *, require_elf: bool = False) -> Artifact:
        """The record. Non-ELF data raises ElfError when ``require_elf`` is set.

        Raises :class:`~backend_packager.elf.CaptureMiss` when the sparse capture missed a
        section: the caller then streams the member again into ``ArtifactSink(sparse=False)``.
        """
        try:
            if self._spool is None:
                if require_elf:
                    raise ElfError("not-elf", self.display, f"not an ELF file (starts with {self._head[:4]!r})")
                return Artifact(path=self.path, sha256=self.sha256, size=self.size, elf=None)
            info = scan_elf(self._spool, self.display, size=self.size, available=self._ranges)  # type: ignore[arg-type]
            return Artifact(path=self.path, sha256=self.sha256, size=self.size, elf=info)
        finally:
            self.close()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None


def read_into(sink: ArtifactSink, stream: BinaryIO) -> ArtifactSink:
    while chunk := stream.read(CHUNK):
        sink.update(chunk)
    return sink


def artifact_from_bytes(path: str, data: bytes) -> Artifact:
    """Record for a file the packager writes itself (``entry_points.txt``): never native."""
    return Artifact(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data), elf=None)


def artifact_from_file(file: Path, path: str, *, require_elf: bool = False) -> Artifact:
    """Record for a file on disk, hashed in one pass and scanned in place (no spool)."""
    digest = hashlib.sha256()
    with file.open("rb") as stream:
        head = stream.read(64)
        digest.update(head)
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
        size = stream.tell()
        if head[:4] != ELF_MAGIC:
            if require_elf:
                raise ElfError("not-elf", str(file), f"not an ELF file (starts with {head[:4]!r})")
            return Artifact(path=path, sha256=digest.hexdigest(), size=size, elf=None)
        info = scan_elf(stream, str(file))
    return Artifact(path=path, sha256=digest.hexdigest(), size=size, elf=info)
