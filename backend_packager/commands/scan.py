"""``backend-packager scan``: artifact records for .so files, directories and wheels.

Inputs are read where they lie: a wheel's members are streamed out of the zip (never
extracted to disk as a tree), a directory is walked in sorted order. One bad file never
stops the others; every problem is collected as a :class:`TrustError` naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from triton_backend_runtime.base import is_shared_library
from triton_backend_runtime.manifest import Artifact, file_kind

from ..base import ElfError, InputError, TrustError, WheelError, fsutil
from ..scanning import ELF_MAGIC, ArtifactSink, CaptureMiss, artifact_from_file, read_into

if TYPE_CHECKING:
    import zipfile

__all__ = ["MAGIC_BYTES", "Progress", "ScanResult", "kind_of", "scan_paths"]


@dataclass
class ScanResult:
    """Records in input order; ``kinds[i]`` labels ``artifacts[i]``; ``warnings`` name the
    files listed but not scanned (PE and Mach-O binaries)."""

    artifacts: list[Artifact] = field(default_factory=list)
    errors: list[TrustError] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    warnings: list[TrustError] = field(default_factory=list)


@dataclass
class _Listed:
    artifact: Artifact
    kind: str
    warning: TrustError | None = None


Progress = Callable[[str], None]


def scan_paths(paths: list[Path], progress: Progress | None = None) -> ScanResult:
    """Scan every input; collect records and errors, in input order."""
    result = ScanResult()
    for path in paths:
        try:
            for item in _scan_one(path, progress):
                if isinstance(item, TrustError):
                    result.errors.append(item)
                    continue
                result.artifacts.append(item.artifact)
                result.kinds.append(item.kind)
                if item.warning is not None:
                    result.warnings.append(item.warning)
        except TrustError as exc:
            result.errors.append(exc)
    return result


def kind_of(artifact: Artifact, head: bytes) -> str:
    """The label ``scan`` shows: plugin, Python extension, library or executable (PIE
    included: an ET_DYN file with an interpreter, see
    :func:`~triton_backend_runtime.manifest.model.file_kind`), unsupported binary, or data."""
    info = artifact.elf
    if info is None:
        foreign = _foreign_format(head)
        return f"unsupported ({foreign})" if foreign else "data"
    if info.plugin:
        return f"triton-plugin-{info.plugin.api}"
    if info.python_extension:
        return "python-extension"
    return file_kind(info)


def _foreign_format(head: bytes) -> str | None:
    if head.startswith(ELF_MAGIC):
        return None
    # The wheel writer's list, imported only for a file that is not ELF: scanning a .so
    # needs none of the writer's imports (a quarter of `scan`'s start-up).
    from ..wheel import FOREIGN_BINARY

    if not head.startswith(FOREIGN_BINARY):
        return None
    return "PE" if head.startswith(b"MZ") else "Mach-O"


def _listed(artifact: Artifact, head: bytes, display: str) -> _Listed:
    foreign = _foreign_format(head) if artifact.elf is None else None
    warning = None
    if foreign:
        warning = ElfError("unsupported", display, f"unsupported binary format ({foreign}): listed, not scanned")
    return _Listed(artifact, kind_of(artifact, head), warning)


def _scan_one(path: Path, progress: Progress | None) -> Iterator[_Listed | TrustError]:
    if not path.exists():
        raise InputError("missing", str(path), "no such file or directory")
    if path.is_dir():
        yield from _scan_directory(path, progress)
    elif path.suffix == ".whl":
        yield from _scan_wheel(path, progress)
    else:
        yield _scan_file(path, path.name, str(path), require_elf=True)


def _scan_file(file: Path, name: str, display: str, *, require_elf: bool) -> _Listed | TrustError:
    try:
        head = _head(file)
        foreign = _foreign_format(head) is not None
        return _listed(artifact_from_file(file, name, require_elf=require_elf and not foreign), head, display)
    except TrustError as exc:
        return exc
    except OSError as exc:
        return InputError("unreadable", display, f"cannot read: {exc.strerror or exc}")


def _scan_directory(root: Path, progress: Progress | None) -> Iterator[_Listed | TrustError]:
    for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        named_so = is_shared_library(file.name)
        if not named_so and not _is_binary(_head(file, 4)):
            continue
        if progress:
            progress(str(file))
        yield _scan_file(file, file.relative_to(root).as_posix(), str(file), require_elf=named_so)


#: Enough for every magic number the scan tells apart (ELF, PE, Mach-O).
MAGIC_BYTES = 64


def _head(file: Path, size: int = MAGIC_BYTES) -> bytes:
    """The first bytes, for the magic number (the scan reads the rest itself). Opened as
    :func:`~backend_packager.base.fsutil.open_input` opens: a FIFO named ``x.so`` must not hang."""
    with os.fdopen(fsutil.open_input(file), "rb") as stream:
        return stream.read(size)


def _is_binary(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC or _foreign_format(head) is not None


def _scan_wheel(wheel: Path, progress: Progress | None) -> Iterator[_Listed | TrustError]:
    # Imported here: scanning a .so file needs none of the zip machinery (start-up time).
    from ..wheel import open_zip

    archive = open_zip(wheel, str(wheel), follow_symlinks=True)
    with archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            yield from _scan_member(archive, info, f"{wheel}!{info.filename}", progress)


def _stream_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, display: str, require_elf: bool, *,
                   capture: list[tuple[int, int]] | None = None) -> _Listed:
    sink = ArtifactSink(info.filename, display, capture=capture)
    try:
        with archive.open(info) as stream:
            read_into(sink, stream)  # type: ignore[arg-type]
        head = sink.head
        return _listed(sink.finish(require_elf=require_elf), head, display)
    finally:
        sink.close()


def _scan_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, display: str, progress: Progress | None
) -> Iterator[_Listed | TrustError]:
    from triton_backend_runtime.base import describe

    from ..wheel import ZIP_ERRORS

    named_so = is_shared_library(info.filename)
    try:
        with archive.open(info) as stream:
            head = stream.read(4)
        if not named_so and not _is_binary(head):
            return
        if progress:
            progress(display)
        require_elf = named_so and _foreign_format(head) is None
        try:
            yield _stream_member(archive, info, display, require_elf)
        except CaptureMiss as miss:
            yield _stream_member(archive, info, display, require_elf, capture=miss.ranges)
    except TrustError as exc:
        yield exc
    except ZIP_ERRORS as exc:
        yield WheelError("member", display, f"cannot read member: {describe(exc)}")
