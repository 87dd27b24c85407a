"""``backend-packager sbom``: the PEP 770 SBOM of a wheel or an installed distribution, for
inputs written before the writers put one in (``docs/reference/cli.md``).

The input is read as every command reads it, as hostile: a wheel through the checked reader
(:class:`~backend_packager.wheel.WheelArchive`: member names, sizes, zip bombs), only the
members the SBOM describes streamed and scanned (native files, ``.dist-info/sboms/``); an
installed distribution through ``adopt``'s checks (every RECORD row confined, hashed and
matched, code RECORD does not list refused). The SBOM is then
:func:`~backend_packager.manifest.sbom_bytes` of what was scanned, so a wheel and its install
give the same bytes. Nothing is written into the input.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from triton_backend_runtime.base import describe, is_shared_library
from triton_backend_runtime.manifest import Artifact

from ..base import ElfError, InputError, WheelError, checkpoint
from ..formats import DEFAULT_PACKAGE
from ..manifest import NATIVE_SUFFIXES, SBOM_DIR, described_files, find_backends, sbom_bytes, triton_packages
from ..scanning import ELF_MAGIC, ArtifactSink, CaptureMiss, read_into
from ..wheel import ZIP_ERRORS, WheelArchive, WheelContents
from .inplace import contents_of
from .installed import Adoption, find_site, read_installed
from .recordcheck import check_installed

__all__ = ["Described", "sbom_for", "sbom_of_installed", "sbom_of_wheel"]


@dataclass
class Described:
    """An SBOM made: of what (the wheel, or the ``.dist-info`` directory), its bytes, how
    many files it describes, and the files listed without ELF facts (one line each)."""

    source: str
    name: str
    version: str
    data: bytes
    files: int
    warnings: list[str] = field(default_factory=list)


def sbom_for(target: str, sites: Sequence[Path], *, epoch: int | None, jobs: int = 1,
             site_given: bool = False) -> Described:
    """``target`` is a wheel when it names a path (``*.whl``, a separator, or something that
    exists), else a distribution installed in ``sites`` (``site_given``: --site-packages was named)."""
    if target.endswith(".whl") or os.sep in target or "/" in target or os.path.lexists(target):
        if site_given:
            raise InputError("usage", "--site-packages", "names where DIST is installed: not for a wheel")
        return sbom_of_wheel(Path(target), epoch=epoch)
    return sbom_of_installed(sites, target, epoch=epoch, jobs=jobs)


def sbom_of_wheel(path: Path, *, epoch: int | None) -> Described:
    if not os.path.lexists(path):
        raise InputError("missing", str(path), "no such file")
    if path.is_dir() and not path.is_symlink():
        raise InputError("not-a-file", str(path), "a directory: name a wheel")
    with WheelArchive(path) as archive:
        artifacts, warnings = [], list(archive.warnings)
        for member in archive.members:
            if member.is_dir or not _wanted(archive, member.name):
                continue
            checkpoint()
            artifact, warning = _stream(archive, member.name)
            artifacts.append(artifact)
            warnings += [warning] if warning else []
        contents = WheelContents(
            name=archive.metadata["Name"], version=archive.metadata["Version"],
            tags=list(archive.wheel_meta.get_all("Tag") or []), dist_info=archive.dist_info,
            names=[m.name for m in archive.members], artifacts=sorted(artifacts, key=lambda a: a.path),
            entry_points=archive.entry_points(), metadata=archive.metadata, existing_manifest=None,
            read_member=archive.read)
        return _described(str(path), contents, warnings, epoch)


def sbom_of_installed(sites: Sequence[Path], name: str, *, epoch: int | None, jobs: int = 1) -> Described:
    site = find_site(list(sites), name)
    installed = read_installed(site, name)
    checked = check_installed(installed, None, jobs, Adoption(site / name))
    contents = contents_of(installed, checked)
    return _described(installed.full(installed.dist_info), contents, contents.warnings, epoch)


def _described(source: str, contents: WheelContents, warnings: list[str], epoch: int | None) -> Described:
    packages = triton_packages(contents) or [DEFAULT_PACKAGE]
    backends = [b for package in packages for b in find_backends(contents, package=package).backends]
    data = sbom_bytes(contents.artifacts, name=contents.name, version=contents.version, backends=backends,
                      epoch=epoch)
    return Described(source, contents.name, contents.version, data, len(described_files(contents.artifacts)),
                     warnings)


def _wanted(archive: WheelArchive, name: str) -> bool:
    """A member the SBOM may describe: named or shaped as native code, or an SBOM beside ours."""
    top, _, rest = name.partition("/")
    if is_shared_library(name) or name.endswith(NATIVE_SUFFIXES):
        return True
    if top == archive.dist_info and rest.startswith(f"{SBOM_DIR}/"):
        return True
    try:
        with archive.open_member(name) as stream:
            return stream.read(4) == ELF_MAGIC
    except ZIP_ERRORS as exc:
        raise WheelError("member", archive.where(name), f"cannot read member: {describe(exc)}") from None


def _stream(archive: WheelArchive, name: str) -> tuple[Artifact, str | None]:
    """The member's record, ELF facts included when it is ELF; a file the scan refuses is
    listed with its hash and said (as the wheel writer does)."""
    where = archive.where(name)
    try:
        try:
            return _read(archive, name, where, None)
        except CaptureMiss as miss:
            return _read(archive, name, where, miss.ranges)
    except ZIP_ERRORS as exc:
        raise WheelError("member", where, f"cannot read member: {describe(exc)}") from None


def _read(archive: WheelArchive, name: str, where: str,
          capture: list[tuple[int, int]] | None) -> tuple[Artifact, str | None]:
    sink = ArtifactSink(name, where, capture=capture)
    try:
        with archive.open_member(name) as stream:
            read_into(sink, stream)  # type: ignore[arg-type]
        plain = Artifact(name, sink.sha256, sink.size)
        try:
            return sink.finish(), None
        except ElfError as exc:
            return plain, f"{where}: not scanned: {exc.detail}"
    finally:
        sink.close()
