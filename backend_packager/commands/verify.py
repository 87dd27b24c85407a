"""``backend-packager verify``: check a wheel file offline against trusted keys.

What must hold (each failure is one :class:`Finding`):

- the wheel's own integrity: every member listed in RECORD with the right sha256 and size
  (the binary distribution format spec), and nothing listed that is absent;
- the DSSE signature over the manifest, by a trusted key (checked before the payload is
  parsed; only the verified bytes are parsed);
- every artifact in the signed manifest present with the signed sha256 and size, and the
  same in RECORD;
- nothing in the wheel that the manifest leaves out: with coverage "all" (schema 1.1), no
  file at all but the ``.dist-info`` files installers write (``is_installer_file``); with
  coverage "native" (what 1.0 manifests meant) no shared library, by name or by ELF magic,
  and a note says that the other files are vouched for by RECORD only;
- name, version and tags in the signed payload equal the wheel's own (file name, METADATA,
  WHEEL), so a signed 1.0 cannot be passed off as 1.1 or for another platform;
- the ``triton.backends`` entry points (``<package>.backends`` for a renamed Triton package,
  as the signed ``triton_package`` says) name the packages the manifest names.
- a Sigstore bundle beside the manifest (``triton_backend.sigstore.json``), where there is
  one: with identities trusted, verified offline by the runtime's own check
  (:func:`triton_backend_runtime.trust.verify_bundle`: root, certificate chain, log, identity,
  the manifest's payload byte for byte) and counted as one more signer, as the runtime counts
  it; without, only checked to carry the manifest's payload, and a note says who signed it
  was not checked.

The checks are pure functions returning findings; the CLI only formats them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

from triton_backend_runtime.base import TrustError, canonicalize_name, describe, is_shared_library, same_version
from triton_backend_runtime.manifest import (
    COVERAGE_ALL,
    COVERAGE_NATIVE,
    MANIFEST_FILENAME,
    Manifest,
    is_installer_file,
)
from triton_backend_runtime.trust import MAX_BUNDLE_BYTES, TrustStore, dsse, manifest_from_statement, verify_bundle

from ..formats import entrypoints, records
from ..scanning import ELF_MAGIC
from ..wheel import MAX_MEMBER_SIZE, ZIP_ERRORS, WheelArchive, WheelName, bundle_member, manifest_member
from ..wheel import Member as WheelMember

__all__ = [
    "CHUNK", "Finding", "Member", "Verification", "Wheel", "check_artifacts", "check_entry_points", "check_keyless",
    "check_identity", "check_record", "check_unlisted", "coverage_notes", "read_wheel", "verify_wheel"
]

CHUNK = 1 << 20


@dataclass(frozen=True)
class Finding:
    """One reason the wheel does not verify."""

    code: str
    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class Member:
    sha256: str
    size: int
    elf: bool


@dataclass
class Wheel:
    """What verification needs from the archive, read once."""

    file_name: str
    dist_info: str
    members: dict[str, Member]
    record: dict[str, records.RecordRow]
    metadata: Message
    tags: list[str]
    entry_points: entrypoints.EntryPoints
    envelope: bytes | None
    bundle: bytes | None = None  # the keyless signature, where there is one


@dataclass
class Verification:
    wheel: str
    findings: list[Finding] = field(default_factory=list)
    signers: tuple[str, ...] = ()
    manifest: Manifest | None = None
    notes: list[str] = field(default_factory=list)  # worth saying, not a failure
    #: The Sigstore bundle: None without one, else what was checked of it.
    sigstore: str | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def coverage(self) -> str | None:
        """What the signed manifest vouches for ("all" or "native"); None when none verified."""
        return self.manifest.coverage if self.manifest else None


def verify_wheel(path: Path, trust: TrustStore) -> Verification:
    """Every check, in order; a check that needs the signed manifest runs only once it verified."""
    result = Verification(str(path))
    try:
        wheel = read_wheel(path)
    except TrustError as exc:
        result.findings.append(Finding(exc.code, exc.path, exc.detail))
        return result
    if wheel.envelope is None:
        result.findings.append(Finding("manifest.missing", f"{wheel.dist_info}/{MANIFEST_FILENAME}",
                                       "the wheel has no manifest (build it with backend_packager.build, or "
                                       "run `backend-packager migrate`)"))
        return result
    result.findings += check_record(wheel)
    try:
        where = f"{wheel.dist_info}/{MANIFEST_FILENAME}"
        envelope = dsse.decode(wheel.envelope, where)
    except TrustError as exc:
        result.findings.append(Finding(exc.code, exc.path, exc.detail))
        return result
    signer = check_keyless(wheel, envelope.payload, trust, result)
    try:
        verified = dsse.verify(envelope, trust, where, also=(signer,) if signer else ())
        manifest = manifest_from_statement(verified.payload, where)
    except TrustError as exc:
        result.findings.append(Finding(exc.code, exc.path, exc.detail))
        return result
    result.signers, result.manifest = verified.keyids, manifest
    result.notes += coverage_notes(manifest)
    result.findings += check_identity(manifest, wheel)
    result.findings += check_artifacts(manifest, wheel)
    result.findings += check_unlisted(manifest, wheel)
    result.findings += check_entry_points(manifest, wheel)
    return result


# -- reading ------------------------------------------------------------------------------


def check_keyless(wheel: Wheel, payload: bytes, trust: TrustStore, result: Verification) -> str | None:
    """The Sigstore bundle, where there is one: verified for a trusted identity when the store
    trusts any (the identity's id returned, one more signer), else only checked to carry
    ``payload``. A bundle that does not hold is a finding (``sigstore.*``)."""
    from ..manifest import keyless

    if wheel.bundle is None:
        return None
    where = bundle_member(wheel.dist_info)
    try:
        if trust.identities:
            signer = verify_bundle(wheel.bundle, payload, str(wheel.metadata.get("Name", "")), trust, where)
            result.sigstore = f"verified: {signer.text()}"
            return signer.id
        keyless.check_bundle(wheel.bundle, payload, where)
    except TrustError as exc:
        result.sigstore = exc.code
        result.findings.append(Finding(exc.code, exc.path, exc.detail))
        return None
    result.sigstore = "payload matches; identity not checked"
    result.notes.append("a Sigstore bundle signs the manifest's statement (its payload matches); who signed it is "
                        "not checked without --trust-identity")
    return None


def read_wheel(path: Path) -> Wheel:
    """Read through :class:`WheelArchive` (its safety checks included), hashing every member
    only when there is a manifest to check them against: no manifest is said at once."""
    with WheelArchive(path, check_name=False) as archive:
        envelope = archive.read(manifest_member(archive.dist_info))
        bundle = archive.read(bundle_member(archive.dist_info), MAX_BUNDLE_BYTES) if envelope is not None else None
        members = {m.name: _hash_member(archive, m) for m in archive.members
                   if not m.is_dir and envelope is not None}
        return Wheel(
            file_name=path.name,
            dist_info=archive.dist_info,
            members=members,
            record=archive.record,
            metadata=archive.metadata,
            tags=sorted(archive.wheel_meta.get_all("Tag") or []),
            entry_points=archive.entry_points(),
            envelope=envelope,
            bundle=bundle,
        )


def _hash_member(archive: WheelArchive, member: WheelMember) -> Member:
    """One member hashed through the archive already checked (its central directory is not
    parsed a second time)."""
    from ..base import WheelError

    where = archive.where(member.name)
    if member.file_size > MAX_MEMBER_SIZE:
        raise WheelError("zip-bomb", where, f"declares {member.file_size} bytes: refusing")
    digest = hashlib.sha256()
    try:
        with archive.open_member(member.name) as stream:  # zipfile checks the CRC and size at the end
            head = stream.read(len(ELF_MAGIC))
            digest.update(head)
            size = len(head)
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except ZIP_ERRORS as exc:
        # zipfile's words for a corrupt member: each one is this member's problem.
        raise WheelError("corrupt", where, f"cannot read member: {describe(exc)}") from None
    return Member(digest.hexdigest(), size, head == ELF_MAGIC)


# -- checks -------------------------------------------------------------------------------


def check_record(wheel: Wheel) -> list[Finding]:
    """RECORD lists every member with its hash and size (RECORD's own row has neither)."""
    record_name = f"{wheel.dist_info}/RECORD"
    seen = {name: (m.sha256, m.size) for name, m in wheel.members.items() if name != record_name}
    found = records.discrepancies(wheel.record, seen, set(wheel.members), strict=True)
    return [Finding(d.code, d.path, d.detail) for d in found]


def check_identity(manifest: Manifest, wheel: Wheel) -> list[Finding]:
    """The signed name, version and tags against the file name, METADATA and WHEEL."""
    findings = []
    try:
        named = WheelName.parse(wheel.file_name)
    except TrustError as exc:
        return [Finding(exc.code, exc.path, exc.detail)]
    signed = canonicalize_name(manifest.name)
    for source, value in (("file name", named.name), ("METADATA", wheel.metadata.get("Name", ""))):
        if canonicalize_name(value) != signed:
            findings.append(Finding("identity.name", wheel.file_name,
                                    f"{source} says name {value!r}; the signed manifest says {manifest.name!r}"))
    for source, value in (("file name", named.version), ("METADATA", wheel.metadata.get("Version", ""))):
        if not same_version(value, manifest.version):
            findings.append(Finding("identity.version", wheel.file_name,
                                    f"{source} says version {value}; the signed manifest says {manifest.version}"))
    for source, tags in (("file name", sorted(named.tags)), ("WHEEL", wheel.tags)):
        if tags != sorted(manifest.tags):
            findings.append(Finding("identity.tags", wheel.file_name,
                                    f"{source} says tags {', '.join(tags)}; the signed manifest says "
                                    f"{', '.join(sorted(manifest.tags))}"))
    return findings


def check_artifacts(manifest: Manifest, wheel: Wheel) -> list[Finding]:
    """Each signed artifact: present, with the signed sha256 and size, and RECORD agreeing."""
    findings = []
    for art in manifest.artifacts:
        member = wheel.members.get(art.path)
        if member is None:
            findings.append(Finding("artifact.missing", art.path, "listed in the signed manifest but not in the wheel"))
            continue
        if member.sha256 != art.sha256:
            findings.append(Finding("artifact.sha256", art.path,
                                    f"sha256 {member.sha256} differs from the signed manifest's {art.sha256}"))
        if member.size != art.size:
            findings.append(Finding("artifact.size", art.path,
                                    f"size {member.size} differs from the signed manifest's {art.size}"))
        row = wheel.record.get(art.path)
        # Content that differs from the manifest was reported just above; RECORD adds nothing then.
        intact = member.sha256 == art.sha256 and member.size == art.size
        if intact and (row is None or row.sha256 != art.sha256 or row.size != art.size):
            findings.append(Finding("artifact.record", art.path, "RECORD does not carry the signed sha256 and size"))
    return findings


def check_unlisted(manifest: Manifest, wheel: Wheel) -> list[Finding]:
    """A file the manifest does not vouch for is extraneous: with coverage "all", any file
    but those installers write; with coverage "native", any library, whatever its name."""
    listed = {a.path for a in manifest.artifacts}
    every = manifest.coverage == COVERAGE_ALL
    findings = []
    for name, member in sorted(wheel.members.items()):
        if name in listed or (every and is_installer_file(name)):
            continue
        if member.elf or is_shared_library(name):
            findings.append(Finding("artifact.unlisted", name, "shared library not listed in the signed manifest"))
        elif every:
            findings.append(Finding("artifact.unlisted", name, "file not listed in the signed manifest, which "
                                    "vouches for every file of the wheel"))
    return findings


def coverage_notes(manifest: Manifest) -> list[str]:
    """A native-only manifest verifies, but says less than a reader may assume: say so."""
    if manifest.coverage != COVERAGE_NATIVE:
        return []
    return [f"coverage native: the manifest (schema {manifest.schema_version}) vouches for native files only; "
            "the other files are checked against RECORD alone (re-sign with `backend-packager migrate` to "
            "cover every file)"]


def check_entry_points(manifest: Manifest, wheel: Wheel) -> list[Finding]:
    """Triton loads what entry_points.txt names in its group (``triton.backends``, or
    ``<package>.backends`` for the renamed package the manifest names); it must be what was signed."""
    where = f"{wheel.dist_info}/entry_points.txt"
    if not manifest.triton_package.isidentifier():
        return [Finding("manifest.triton-package", f"{wheel.dist_info}/{MANIFEST_FILENAME}",
                        f"triton_package {manifest.triton_package[:100]!r} is not a Python package name")]
    group = entrypoints.backends_group(manifest.triton_package)
    declared = wheel.entry_points.get(group, {})
    findings = []
    for backend in manifest.backends:
        value = declared.get(backend.name)
        if value is None:
            findings.append(Finding("entry-point.missing", where,
                                    f"no {group} entry point {backend.name!r}"))
        elif value.split(":")[0].strip() != backend.package:
            findings.append(Finding("entry-point.mismatch", where,
                                    f"{backend.name} = {value}; the signed manifest says {backend.package}"))
    for name in sorted(set(declared) - {b.name for b in manifest.backends}):
        findings.append(Finding("entry-point.unsigned", where,
                                f"{group} entry point {name!r} is not in the signed manifest"))
    # Signed for a renamed Triton: backends declared for upstream triton were not signed for it.
    upstream = wheel.entry_points.get(entrypoints.BACKENDS_GROUP, {}) if group != entrypoints.BACKENDS_GROUP else {}
    for name in sorted(upstream):
        findings.append(Finding("entry-point.unsigned", where, f"{entrypoints.BACKENDS_GROUP} entry point "
                                f"{name!r}: the signed manifest is for {manifest.triton_package}, not triton"))
    return findings
