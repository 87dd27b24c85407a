"""Rewriting a wheel with a signed manifest, one way: copy, plan, seal, finish.

Shaped like ``installer._core.install(source, destination, additional_metadata)``: the
writer copies and describes, a plan (the build hook's or ``migrate``'s) turns that
description into a manifest and the files to add, the manifest is sealed, and the writer
gets finished bytes. Nothing flows back, and only this module knows about signing (with a key,
keyless, or both).

The output: every unchanged member copied as raw compressed bytes, never re-deflated (see
:mod:`backend_packager.wheel.writer`); the manifest envelope and the plan's files
(``entry_points.txt``, the SBOM: :mod:`backend_packager.manifest.sbomfile`) written into
``.dist-info``, this package's SBOM in the input dropped and made anew; RECORD regenerated from the bytes
actually seen; ``.dist-info`` last and RECORD last of all; members in sorted order; the
file appears under its final name only when complete. The manifest vouches for every file
of the output but RECORD and itself (coverage "all"); that is checked here, before sealing,
whatever the plan did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from triton_backend_runtime.manifest import COVERAGE_ALL

from .base import WheelError, atomic_output
from .manifest import Injection, Keyless, SigningKey, keyless_files, regenerated_members, seal
from .wheel import Progress, WheelArchive, WheelContents, WheelWriter, bundle_member, manifest_member

__all__ = ["Plan", "check_coverage", "check_repairs", "output_name", "rewrite_wheel"]

Plan = Callable[[WheelContents], Injection]


def rewrite_wheel(
    src: Path,
    out_dir: Path,
    plan: Plan,
    key: SigningKey | None,
    *,
    jobs: int = 1,
    epoch: int | None = None,
    progress: Progress | None = None,
    fd: int | None = None,
    keyless: Keyless | None = None,
) -> Path:
    """Write ``out_dir/<same file name>``: ``src`` plus the manifest ``plan`` builds, signed by ``key``
    and, with ``keyless``, its Sigstore bundle beside it (``.manifest.keyless``).

    ``epoch`` (SOURCE_DATE_EPOCH) sets every member's timestamp; without it, copied members
    keep theirs and new ones take the newest timestamp in the input, so the output is a
    pure function of the input either way. ``fd``: ``src`` already opened by the caller
    (a regular file, read through that descriptor only).
    """
    with WheelArchive(src, check_name=False, fd=fd) as archive:
        problems = archive.name_problems(tags=False)
        if problems:
            raise WheelError("name-mismatch", archive.display, "; ".join(problems))
        # The file name's tags are WHEEL's once a plan accepts a difference (check_repairs).
        dst = out_dir / output_name(archive)
        with (
            atomic_output(dst) as out,
            WheelWriter(archive, out.fileno(), jobs=jobs, epoch=epoch, progress=progress,
                        replaced=regenerated_members(archive.dist_info)) as writer,
        ):
            contents = writer.copy_payload()
            injection = plan(contents)
            check_repairs(contents, injection, archive.where)
            check_coverage(contents, injection, archive.where)
            envelope = seal(injection.manifest, key)
            bundle = bundle_member(archive.dist_info)
            writer.finish({**injection.files, manifest_member(archive.dist_info): envelope,
                           **keyless_files(injection.manifest, keyless, bundle, archive.where(bundle))})
    return dst


def output_name(archive: WheelArchive) -> str:
    """The input's file name, its tags spelled as WHEEL's (the same name when they agree):
    one compressed tag set, each part in WHEEL's order (the binary distribution format)."""
    if archive.tag_problem() is None:
        return archive.path.name
    tags = [t.split("-") for t in archive.wheel_meta.get_all("Tag") or []]
    parts = [list(dict.fromkeys(t[i] for t in tags if len(t) == 3)) for i in range(3)]
    if len(tags) != len(parts[0]) * len(parts[1]) * len(parts[2]) or any(len(t) != 3 for t in tags):
        raise WheelError("tags", archive.where(f"{archive.dist_info}/WHEEL"),
                         "WHEEL's tags are not one compressed tag set: no file name can carry them")
    name = archive.wheel_name
    build = f"-{name.build}" if name.build else ""
    stem = archive.path.name.split("-")[0]
    return f"{stem}-{name.version}{build}-{'.'.join(parts[0])}-{'.'.join(parts[1])}-{'.'.join(parts[2])}.whl"


def check_repairs(contents: WheelContents, injection: Injection, where: Callable[[str], str]) -> None:
    """Input whose RECORD or tags disagree with its contents is signed only when the manifest's
    provenance records exactly those disagreements (``migrate --rewrite-record``). A consistent
    input may carry repairs recorded earlier (a re-signed wheel keeps its provenance)."""
    found = [(d.code, d.path, d.detail) for d in contents.discrepancies]
    recorded = [(r.code, r.path, r.detail) for r in injection.manifest.provenance.repairs]
    if not found or found == recorded:
        return
    first = contents.discrepancies[0]
    member = f"{contents.dist_info}/WHEEL" if first.code == "wheel.tags" else first.path
    raise WheelError("record", where(member), f"{first.detail}: the input wheel disagrees with itself "
                     f"({len(found)} discrepancies); not signing it")


def check_coverage(contents: WheelContents, injection: Injection, where: Callable[[str], str]) -> None:
    """The manifest lists exactly the files the output will hold (kept and added), each with
    the sha256 of its final bytes: a plan that forgot one must not get it signed."""
    manifest = injection.manifest
    if manifest.coverage != COVERAGE_ALL:
        raise WheelError("coverage", where(manifest_member(contents.dist_info)),
                         f"a rewritten wheel's manifest must cover every file; this one says {manifest.coverage!r}")
    expected = {a.path: a.sha256 for a in contents.artifacts}
    expected |= {path: hashlib.sha256(data).hexdigest() for path, data in injection.files.items()}
    listed = {a.path: a.sha256 for a in manifest.artifacts}
    for path in sorted(expected.keys() | listed.keys()):
        if path not in listed:
            raise WheelError("coverage", where(path), "the planned manifest does not list this file; not signing it")
        if path not in expected:
            raise WheelError("coverage", where(path), "the planned manifest lists a file the wheel will not hold")
        if listed[path] != expected[path]:
            raise WheelError("coverage", where(path), "the planned manifest's sha256 is not the file's; not signing it")
