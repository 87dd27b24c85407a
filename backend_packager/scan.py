"""``backend-packager scan``: artifact records for .so files, directories and wheels.

Inputs are read where they lie: a wheel's members are streamed out of the zip (never
extracted to disk as a tree), a directory is walked in sorted order. One bad file never
stops the others; every problem is collected as a :class:`TrustError` naming the file.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from triton_backend_runtime.layout import is_shared_library
from triton_backend_runtime.manifest import Artifact

from .artifacts import ArtifactSink, artifact_from_file, read_into
from .elf import ELF_MAGIC, CaptureMiss
from .errors import InputError, TrustError, WheelError
from .wheelfile import ZIP_ERRORS, describe, open_zip


@dataclass
class ScanResult:
    artifacts: list[Artifact] = field(default_factory=list)
    errors: list[TrustError] = field(default_factory=list)


Progress = Callable[[str], None]


def scan_paths(paths: list[Path], progress: Progress | None = None) -> ScanResult:
    """Scan every input; collect records and errors, in input order."""
    result = ScanResult()
    for path in paths:
        try:
            for item in _scan_one(path, progress):
                if isinstance(item, TrustError):
                    result.errors.append(item)
                else:
                    result.artifacts.append(item)
        except TrustError as exc:
            result.errors.append(exc)
    return result


def _scan_one(path: Path, progress: Progress | None) -> Iterator[Artifact | TrustError]:
    if not path.exists():
        raise InputError("missing", str(path), "no such file or directory")
    if path.is_dir():
        yield from _scan_directory(path, progress)
    elif path.suffix == ".whl":
        yield from _scan_wheel(path, progress)
    else:
        yield _guard(lambda: artifact_from_file(path, path.name, require_elf=True))


def _guard(make: Callable[[], Artifact]) -> Artifact | TrustError:
    try:
        return make()
    except TrustError as exc:
        return exc


def _scan_directory(root: Path, progress: Progress | None) -> Iterator[Artifact | TrustError]:
    for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        named_so = is_shared_library(file.name)
        if not named_so and not _starts_with_magic(file):
            continue
        if progress:
            progress(str(file))
        try:
            yield artifact_from_file(file, file.relative_to(root).as_posix(), require_elf=named_so)
        except TrustError as exc:
            yield exc


def _starts_with_magic(file: Path) -> bool:
    with file.open("rb") as stream:
        return stream.read(4) == ELF_MAGIC


def _scan_wheel(wheel: Path, progress: Progress | None) -> Iterator[Artifact | TrustError]:
    archive = open_zip(wheel, str(wheel))
    with archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            yield from _scan_member(archive, info, f"{wheel}!{info.filename}", progress)


def _stream_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, display: str, named_so: bool, *,
                   capture: list[tuple[int, int]] | None = None) -> Artifact:
    sink = ArtifactSink(info.filename, display, capture=capture)
    try:
        with archive.open(info) as stream:
            read_into(sink, stream)  # type: ignore[arg-type]
        return sink.finish(require_elf=named_so)
    finally:
        sink.close()


def _scan_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, display: str, progress: Progress | None
) -> Iterator[Artifact | TrustError]:
    named_so = is_shared_library(info.filename)
    try:
        with archive.open(info) as stream:
            head = stream.read(4)
        if head != ELF_MAGIC and not named_so:
            return
        if progress:
            progress(display)
        try:
            yield _stream_member(archive, info, display, named_so)
        except CaptureMiss as miss:
            yield _stream_member(archive, info, display, named_so, capture=miss.ranges)
    except TrustError as exc:
        yield exc
    except ZIP_ERRORS as exc:
        yield WheelError("member", display, f"cannot read member: {describe(exc)}")
