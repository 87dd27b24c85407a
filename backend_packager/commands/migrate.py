"""``backend-packager migrate``: give legacy wheels a signed manifest and entry points.

For each wheel: find its backends (declared ``triton.backends`` entry points, else the
``triton/backends/<name>/`` directories that older Tritons scan, then declare entry points
for them too; ``--backend NAME=PACKAGE`` overrides), hash every member and scan the native
ones, write the signed manifest (hash-only, with a warning, when no key is given), which
vouches for every file of the output wheel, the PEP 770 SBOM made from its facts among them
(``sboms/triton-backend.cdx.json``). Name, version and tags are kept. A wheel that
already has a manifest is re-scanned and re-signed: that is how a wheel is re-signed after
``auditwheel repair``. A backend whose code (``<package>/compiler.py`` and ``driver.py``) is not
in the wheel is refused (``wheel.backend-missing``), and one inside a Triton package whose
``__init__.py`` the wheel does not hold is signed with a warning (:mod:`backend_packager.manifest.backendcode`).
A wheel with no backend, no plugin and no Triton core (``requests``) is signed too, with a
warning saying so: a platform may sign every wheel it serves, or it may be the wrong wheel.

Renamed packages: a vendor release that renames ``triton`` (``tokenspeed_triton``) reads the
group ``<package>.backends``; the package is read from the wheel (``--triton-package`` when it
cannot be), recorded in the manifest, and a wheel with backend-shaped directories where no
backend was found gets a warning. ``--rewrite-record`` migrates a wheel whose RECORD or
file-name tags disagree with its contents, from the contents: every discrepancy is listed,
and recorded in the manifest's provenance (``repairs``).

Many wheels run in parallel threads (the heavy work, inflating and hashing, releases the
GIL); a single wheel uses the same number of threads across its members instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.trust import dsse, manifest_from_statement

from ..base import (
    InputError,
    TrustError,
    WheelError,
    checkpoint,
    from_os_error,
    source_date_epoch,  # adopt imports it from here
    worker_pool,
)
from ..formats import DEFAULT_PACKAGE, Discrepancy
from ..manifest import Injection, Keyless, SigningKey, backendcode, plugininfo, sbomfile
from ..manifest import contents as assemble
from ..rewrite import rewrite_wheel
from ..wheel import WheelContents, open_wheel

__all__ = [
    "ByteProgress", "Options", "Outcome", "add_sbom", "expand_inputs", "migrate_many", "migrate_wheel", "plan_migration"
]


@dataclass
class Outcome:
    """What happened to one input wheel."""

    source: Path
    output: Path | None = None
    status: str = "failed"  # migrated | re-signed | failed
    backends: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)
    artifacts: int = 0  # every file of the output wheel (the manifest covers them all)
    native: int = 0  # of which scanned ELF files
    signed_by: str | None = None
    sigstore: bool = False  # a Sigstore bundle signs the manifest's statement too
    warnings: list[str] = field(default_factory=list)
    error: TrustError | None = None
    seconds: float = 0.0
    triton_package: str | None = None  # the Triton package the backends plug into
    discrepancies: list[Discrepancy] = field(default_factory=list)  # RECORD / tags vs contents
    repaired: bool = False  # the discrepancies were rewritten from the contents (--rewrite-record)
    core: str | None = None  # the Triton package whose core the wheel carries

    def as_dict(self) -> dict[str, object]:
        return {
            "source": str(self.source),
            "output": str(self.output) if self.output else None,
            "status": self.status,
            "backends": self.backends,
            "plugins": self.plugins,
            "artifacts": self.artifacts,
            "native": self.native,
            "signed_by": self.signed_by,
            "sigstore": self.sigstore,
            "warnings": self.warnings,
            "error": self.error.as_dict() if self.error else None,
            "seconds": round(self.seconds, 3),
            "triton_package": self.triton_package,
            "discrepancies": [{"code": d.code, "path": d.path, "message": d.detail} for d in self.discrepancies],
            "repaired": self.repaired,
        }


@dataclass(frozen=True)
class Options:
    """What only some migrations need: ``triton_package`` names the Triton package when the
    wheel cannot tell; ``rewrite_record`` migrates a wheel whose RECORD or tags disagree
    with its contents, from the contents; ``capture`` whether and where the plugins' code
    runs to ask them what they provide (by default it does not: the wheel is not ours)."""

    triton_package: str | None = None
    rewrite_record: bool = False
    capture: plugininfo.Policy = "off"
    #: The input wheel's descriptor (:func:`migrate_wheel` sets it): every read of the input
    #: is through it, never by its path again.
    source_fd: int | None = None
    #: Warn when the wheel holds nothing Triton; ``mirror`` copies such a wheel through instead.
    warn_plain: bool = True
    #: Warn when nobody signs the output (no key, no keyless); ``mirror`` fails such a wheel
    #: for its missing bundle instead, and never serves the output.
    warn_unsigned: bool = True
    #: Sign keylessly too (or instead): a Sigstore bundle beside the manifest (``.keyless``).
    keyless: Keyless | None = None
    #: The upstream identities ``mirror`` verified the input's PEP 740 attestations against,
    #: recorded in the manifest's provenance (``provenance.upstream``).
    upstream: tuple[m.UpstreamIdentity, ...] = ()
    #: The SBOM beside the manifest (:mod:`~backend_packager.manifest.sbomfile`); off only to
    #: measure what it costs (``bench/bench_migrate.py``).
    sbom: bool = True


ByteProgress = Callable[[Path, str, int], None]


def expand_inputs(paths: list[Path]) -> list[Path]:
    """Wheel files as given, and every ``*.whl`` in a directory (sorted)."""
    wheels: list[Path] = []
    for path in paths:
        if path.is_dir():
            wheels.extend(sorted(path.glob("*.whl")))
        elif path.exists():
            wheels.append(path)
        else:
            raise InputError("missing", str(path), "no such file or directory")
    return wheels


def migrate_wheel(
    src: Path,
    out_dir: Path,
    key: SigningKey | None,
    *,
    overrides: dict[str, str] | None = None,
    jobs: int = 1,
    progress: ByteProgress | None = None,
    drop_signature: bool = False,
    options: Options = Options(),
) -> Outcome:
    """Migrate one wheel; errors are caught into the outcome, never raised. Without a key,
    a signed input is refused unless ``drop_signature``: its output would be hash-only.
    The input is opened once, as a regular file and not through a symlink
    (:func:`~backend_packager.wheel.reader.open_wheel`: a symlink is ``input.symlink``), or
    taken from ``options.source_fd`` (duplicated; the caller keeps its own)."""
    outcome = Outcome(src)
    started = time.perf_counter()
    fd = -1
    try:
        if out_dir.resolve() == src.parent.resolve():
            raise InputError("output", str(out_dir), "the output directory holds the input wheel; choose another")
        fd = os.dup(options.source_fd) if options.source_fd is not None else open_wheel(src, str(src))
        options = dataclasses.replace(options, source_fd=fd)
        if key is None and options.keyless is None and not drop_signature:
            _refuse_signature_drop(src, fd)
        epoch = source_date_epoch()

        def plan(contents: WheelContents) -> Injection:
            injection = plan_migration(contents, overrides, epoch, outcome, wheel=src, options=options)
            return add_sbom(injection, contents.dist_info, outcome) if options.sbom else injection

        def member_progress(member: str, nbytes: int) -> None:
            if progress:
                progress(src, member, nbytes)

        outcome.output = rewrite_wheel(src, out_dir, plan, key, jobs=jobs, epoch=epoch, progress=member_progress,
                                       fd=fd, keyless=options.keyless)
        outcome.signed_by = key.public.keyid if key else None
        outcome.sigstore = options.keyless is not None
        if key is None and options.keyless is None and outcome.status == "re-signed":
            outcome.status = "re-hashed"  # its signature dropped on request: nobody re-signed it
        if key is None and options.keyless is None and options.warn_unsigned:
            outcome.warnings.append(f"{src}: no signing key given: the manifest is hash-only (unsigned)")
    except TrustError as exc:
        outcome.error = exc
        outcome.status = "failed"
    except OSError as exc:  # no space, read-only output...: this wheel's failure, said as one line
        outcome.error = from_os_error(exc)
        outcome.status = "failed"
    finally:
        if fd >= 0:
            os.close(fd)
    outcome.seconds = time.perf_counter() - started
    return outcome


def plan_migration(
    contents: WheelContents, overrides: dict[str, str] | None, epoch: int | None, outcome: Outcome,
    *, wheel: Path | None = None, options: Options = Options(),
) -> Injection:
    """The manifest and files for ``contents`` (a wheel's, or an installed distribution's for
    ``adopt``), recording what was found in ``outcome``; plugins are asked what they provide
    when there is a ``wheel`` to extract them from (:mod:`.plugininfo`)."""
    repairs = _repairs(contents, outcome, options.rewrite_record)
    package = _triton_package(contents, options.triton_package, outcome)
    found = assemble.find_backends(contents, overrides, package)
    _warn_if_unfound(found, contents, outcome)
    previous = _previous_manifest(contents, outcome)
    backends = found.backends
    requirements = m.Requirements(
        triton=assemble.triton_requirement(contents), python=contents.metadata.get("Requires-Python")
    )
    provenance = m.Provenance(kind="migrate", source=f"{contents.name}-{contents.version}", source_sha256=None)
    protocol = m.PROTOCOL_VERSION
    if previous is not None and not overrides:
        # Re-signing (e.g. after auditwheel repair): keep what the vendor declared.
        backends, requirements = previous.backends, previous.requirements
        provenance, protocol = previous.provenance, previous.protocol_version
    if options.upstream:
        provenance = dataclasses.replace(provenance, upstream=list(options.upstream))
    _refuse_missing_code(backends, contents, outcome)
    _warn_if_foreign(backends, contents, package, outcome)
    injection = assemble.describe(
        contents, backends, found.entry_points,
        requirements=requirements, provenance=_repaired(provenance, repairs, outcome.source, options.source_fd),
        epoch=epoch,
        protocol_version=protocol, triton_package=package,
        plugins=plugininfo.migrated_plugins(contents.artifacts, previous.plugins if previous else [], wheel,
                                            options.capture),
    )
    outcome.warnings.extend(plugininfo.warnings(injection.manifest.plugins, str(outcome.source)))
    manifest = injection.manifest
    outcome.status = "re-signed" if contents.existing_manifest is not None else "migrated"
    outcome.backends = [b.name for b in backends]
    outcome.plugins = [p.path for p in manifest.plugins]
    outcome.artifacts = len(manifest.artifacts)
    outcome.native = sum(a.elf is not None for a in manifest.artifacts)
    outcome.core = _core(contents, package)
    if options.warn_plain and not (outcome.backends or outcome.plugins or outcome.core):
        outcome.warnings.append(f"{outcome.source}: no Triton backend, plugin or core in it: signed anyway "
                                "(a platform may sign every wheel)")
    outcome.warnings.extend(contents.warnings)
    return injection


def add_sbom(injection: Injection, dist_info: str, outcome: Outcome) -> Injection:
    """The complete plan's SBOM added (the last step before the coverage check and the seal),
    and counted among the outcome's artifacts."""
    injection = sbomfile.with_sbom(injection, dist_info)
    outcome.artifacts = len(injection.manifest.artifacts)
    return injection


def _core(contents: WheelContents, package: str) -> str | None:
    """The Triton package whose core the wheel carries, as the runtime finds a core: it
    provides ``<package>/__init__.py``, or carries a ``<pkg>/_C/libtriton.so``."""
    if f"{package}/__init__.py" in contents.names:
        return package
    library = plugininfo.libtriton_member(contents.names)
    return library.split("/")[0] if library else None


def _repairs(contents: WheelContents, outcome: Outcome, allowed: bool) -> list[m.Repair]:
    """The input's disagreements with itself: refused (naming the flag) unless ``allowed``;
    then each one is recorded in the provenance, and the output's RECORD and name come
    from the contents (the writer always regenerates RECORD from the bytes it copied)."""
    found = contents.discrepancies
    outcome.discrepancies = list(found)
    if not found:
        return []
    listing = "; ".join(f"{d.path}: {d.code}: {d.detail}" for d in found)
    first = found[0]
    where = f"{outcome.source}!{first.path}" if first.code != "wheel.tags" else str(outcome.source)
    if not allowed:
        raise WheelError("record", where, f"RECORD or tags disagree with the contents ({len(found)}: {listing}); "
                         "not signing it. `migrate --rewrite-record` migrates it from its contents, recording each "
                         "discrepancy in the manifest's provenance")
    outcome.repaired = True
    return [m.Repair(d.code, d.path, d.detail) for d in found]


def _repaired(provenance: m.Provenance, repairs: list[m.Repair], source: Path,
              fd: int | None = None) -> m.Provenance:
    """``provenance`` with this migration's repairs and the repaired input's own sha256 (its
    RECORD cannot say what it was), read through ``fd`` when the input is open; without
    any, a re-signed wheel keeps the repairs its provenance already records, as it keeps the
    source they were made from."""
    if not repairs:
        return provenance
    digest = hashlib.sha256()
    own = fd is None
    fd = open_wheel(source, str(source)) if fd is None else fd
    try:
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            checkpoint()
            digest.update(chunk)
            offset += len(chunk)
    finally:
        if own:
            os.close(fd)
    return dataclasses.replace(provenance, repairs=repairs, source_sha256=digest.hexdigest())


def _triton_package(contents: WheelContents, given: str | None, outcome: Outcome) -> str:
    """The Triton package the backends plug into: ``given``, else the one the wheel names."""
    if given:
        outcome.triton_package = given
        return given
    found = assemble.triton_packages(contents)
    if len(found) > 1:
        raise WheelError("triton-package", str(outcome.source), f"backends for several Triton packages "
                         f"({', '.join(found)}): name the one to migrate with --triton-package NAME")
    outcome.triton_package = found[0] if found else DEFAULT_PACKAGE
    return outcome.triton_package


def _warn_if_unfound(found: assemble.Backends, contents: WheelContents, outcome: Outcome) -> None:
    """Backend-shaped directories where no backend was found: say so, not nothing."""
    if found.backends:
        return
    shapes = [f"{prefix}backends/{name}/" for prefix, name in assemble.backend_shapes(contents.names)]
    if shapes:
        shown = ", ".join(shapes[:5]) + (f" and {len(shapes) - 5} more" if len(shapes) > 5 else "")
        outcome.warnings.append(
            f"{outcome.source}: backend-shaped directories ({shown}) but no backend found for the Triton "
            f"package {found.package!r}: name the package with --triton-package NAME, or the backends with "
            "--backend NAME=PACKAGE"
        )


def _refuse_missing_code(backends: list[m.Backend], contents: WheelContents, outcome: Outcome) -> None:
    """A backend is signed only where its code is: entry points alone (an overlay declaring
    Triton's own backends) would have the manifest vouch for files it does not cover."""
    missing = backendcode.missing_code(backends, contents.names)
    if missing:
        listing = "; ".join(found.describe() for found in missing)
        raise WheelError("backend-missing", str(outcome.source), f"backends whose code is not among "
                         f"{contents.name}'s files: {listing}; not signing them as its backends (`migrate --backend "
                         "NAME=PACKAGE` names the backends it does hold)")


def _warn_if_foreign(backends: list[m.Backend], contents: WheelContents, package: str, outcome: Outcome) -> None:
    """Backends inside a Triton package this distribution does not provide: say whose they may be."""
    names = backendcode.inside_foreign_package(backends, contents.names, package)
    if names:
        outcome.warnings.append(
            f"{outcome.source}: {contents.name} signs backends ({', '.join(names)}) inside the package {package}, "
            f"but has no {package}/__init__.py: that package is another distribution's; check that these "
            f"backends are {contents.name}'s own, not the other distribution's (an overlay's)"
        )


def _previous_manifest(contents: WheelContents, outcome: Outcome) -> m.Manifest | None:
    """The manifest already in the wheel, read WITHOUT checking its signature.

    Only declarations are carried over (backends and their targets, requirements, protocol,
    provenance); every fact about the files is scanned again, and the new signature is the
    re-signer's own statement about all of it.
    """
    if contents.existing_manifest is None:
        return None
    where = f"{contents.dist_info}/{m.MANIFEST_FILENAME}"
    try:
        envelope = dsse.decode(contents.existing_manifest, where)
        previous = manifest_from_statement(dsse.unverified_payload(envelope), where)
    except TrustError as exc:
        outcome.warnings.append(f"{exc}: rebuilt from the wheel's contents instead")
        return None
    outcome.warnings.append(f"{where}: already had a manifest: re-scanned and re-signed, declarations kept")
    return previous


def _refuse_signature_drop(src: Path, fd: int | None = None) -> None:
    """Read only the central directory and the manifest: a signed input needs a key."""
    from ..wheel import WheelArchive, manifest_member

    # The name is checked by the rewrite, where --rewrite-record may accept other tags.
    with WheelArchive(src, check_name=False, fd=fd) as archive:
        member = manifest_member(archive.dist_info)
        data = archive.read(member)
    if data is None:
        return
    try:
        signed = bool(dsse.decode(data, member).signatures)
    except TrustError:
        return  # unreadable: rebuilt from the contents, as a re-sign does
    if signed:
        raise InputError("signed", f"{src}!{member}", "the wheel is signed; without --key its output would be "
                         "hash-only: pass --key, or --drop-signature to drop the signature on purpose")


def migrate_many(
    wheels: list[Path],
    out_dir: Path,
    key: SigningKey | None,
    *,
    overrides: dict[str, str] | None = None,
    jobs: int = 1,
    progress: ByteProgress | None = None,
    done: Callable[[Outcome], None] | None = None,
    drop_signature: bool = False,
    options: Options = Options(),
) -> list[Outcome]:
    """Migrate every wheel, ``jobs`` at a time; one wheel alone gets ``jobs`` threads itself."""
    out_dir.mkdir(parents=True, exist_ok=True)
    inner = jobs if len(wheels) == 1 else 1

    def one(src: Path) -> Outcome:
        outcome = migrate_wheel(src, out_dir, key, overrides=overrides, jobs=inner, progress=progress,
                                drop_signature=drop_signature, options=options)
        if done:
            done(outcome)
        return outcome

    if jobs <= 1 or len(wheels) <= 1:
        return [one(w) for w in wheels]
    with worker_pool(jobs) as pool:
        return list(pool.map(one, wheels))
