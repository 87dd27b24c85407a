"""The PEP 770 SBOM a plan adds beside the manifest, signed with the files it describes.

Every writer (the build hook, ``migrate``, ``mirror``, ``adopt --wheel-out`` and ``adopt`` in
place) calls :func:`with_sbom` last, once its plan is complete and before the coverage check
and the seal: the SBOM is made from the planned manifest's facts (:mod:`.sbom`: nothing is
read or scanned again), written as ``<dist-info>/sboms/triton-backend.cdx.json``, listed as
an artifact like any other file, and named by the manifest's ``sbom`` field (schema 1.6).

The SBOM describes the manifest without the SBOM, and never carries the manifest's digest:
the manifest lists the SBOM's sha256, so either way round would be circular. An SBOM already
in the input (auditwheel's ``sboms/auditwheel.cdx.json``) is a file of the wheel: kept as it
is, listed, and referenced by the new one. This package's own SBOM in an input (a re-signed
wheel, an adopt run again) is made anew, never kept: :func:`regenerated_members`.
"""

from __future__ import annotations

import dataclasses

from ..scanning import artifact_from_bytes
from ..wheel import replaced_members
from .contents import Injection
from .sbom import SBOM_PATH, sbom_bytes

__all__ = ["regenerated_members", "sbom_member", "with_sbom"]


def sbom_member(dist_info: str) -> str:
    """The SBOM's path in the wheel (or the install), ``<dist-info>/sboms/triton-backend.cdx.json``."""
    return f"{dist_info}/{SBOM_PATH}"


def regenerated_members(dist_info: str) -> set[str]:
    """``.dist-info`` members a writer drops from its input and makes anew: the rewrite's
    (:func:`~backend_packager.wheel.writer.replaced_members`) and the SBOM."""
    return replaced_members(dist_info) | {sbom_member(dist_info)}


def with_sbom(injection: Injection, dist_info: str) -> Injection:
    """``injection`` with the SBOM of its manifest added: the file, its artifact, and the
    manifest's ``sbom``. Its timestamp is the manifest's ``SOURCE_DATE_EPOCH``, if any."""
    manifest = injection.manifest
    member = sbom_member(dist_info)
    data = sbom_bytes(manifest, name=manifest.name, version=manifest.version,
                      epoch=manifest.build.source_date_epoch)
    artifacts = [a for a in manifest.artifacts if a.path != member]
    artifacts = sorted([*artifacts, artifact_from_bytes(member, data)], key=lambda a: a.path)
    signed = dataclasses.replace(manifest, artifacts=artifacts, sbom=SBOM_PATH)
    return Injection(signed, {**injection.files, member: data})
