"""Verification of one installed distribution against its signed manifest, offline.

In order, each step stopping at the first problem (a :class:`VerifyError`,
:class:`SignatureError`, :class:`ManifestError` or :class:`TrustStoreError` naming the file):

1. the DSSE envelope's signatures against the trust store (DSSE v1); only the verified
   payload is parsed (within :mod:`.jsonlimits`), as an in-toto Statement v1 whose
   predicate is the manifest;
2. the signers' scope and the version floor (TUF-style delegations, :mod:`.trust`), and the
   names the manifest declares (each backend, each captured pass, dialect and op): a name the
   signers are not granted refuses that backend or plugin alone (``trust.name``), the Triton
   core's included (which distribution is the core is the installed files' word, not a key's);
3. the signed name and version are the installed distribution's (PEP 503 names, PEP 440
   versions): a manifest copied from another release is refused;
4. a wheel tag of the manifest fits this interpreter (``packaging.tags``, PEP 425), the
   Python and Triton versions satisfy its specifiers (PEP 440), its protocol major is one
   this runtime speaks; a manifest with backends or plugins was built for the package this
   Triton is imported as (``triton_package``, schema 1.2: ``triton`` or a vendor's rename)
   (:mod:`.environment`);
5. every artifact, as installed: a regular file inside the install root, with the signed
   size and sha256 (:mod:`.installed`);
6. nothing unlisted that Python or the loader could run (:mod:`.unlisted`): with a
   manifest that covers every file (schema 1.1 ``coverage: all``), no ``.py``, extension
   module, shared library or sourceless ``.pyc`` anywhere in the distribution's import
   packages (symlinked directories followed); with a 1.0 manifest (native files only), no
   unlisted shared library in the backend packages. ``__pycache__`` is not checked: a
   verified source's pyc is never used (:mod:`.bytecode`);
7. every symbol a plugin (or a library linked against ``libtriton.so``) imports without a
   version, and no sibling artifact provides, is exported by the installed ``libtriton.so``.

A keyless signature (a Sigstore bundle, ``triton_backend.sigstore.json`` beside the manifest)
is verified offline when the trust store trusts an identity (:mod:`..trust.sigstorebundle`): a
verified bundle by a trusted identity counts as one more signer of the same statement, scoped,
granted and revoked as a key is. A bundle that fails is refused with its ``sigstore.*`` reason
when the keys alone do not meet the threshold, and noted otherwise; with sigstore-python not
installed it does not count (``sigstore.missing``).

A manifest that is well-formed but not signed by a trusted key (hash-only, or an unknown
signer) is checked the same way and comes out ``unverified``: its payload is parsed for the
integrity checks and the report only, never to grant trust. A bad signature by a trusted
key, or a revoked key, is ``rejected``. Whatever a manifest holds, the outcome is a verdict
for its own distribution: no exception leaves :func:`verify_distribution`.
"""

from __future__ import annotations

import hashlib
import os

from ..base import (
    REJECTED,
    SIGSTORE_BUNDLE_FILENAME,
    UNVERIFIED,
    VERIFIED,
    ManifestError,
    Reason,
    SignatureError,
    TrustError,
    TrustStoreError,
    VerifyError,
    canonicalize_name,
    describe,
    reason_of,
    record,
    same_version,
)
from ..manifest import model as m
from ..site import (
    Confinement,
    Distribution,
    HashCache,
    check_package_name,
    installed_path,
    read_bounded,
    regular_stat,
)
from ..trust import (
    MAX_BUNDLE_BYTES,
    KeylessSigner,
    TrustStore,
    admit_signers,
    check_floor,
    dsse,
    statement,
    ungranted,
    verify_bundle,
)
from . import dynsym
from .environment import check_environment
from .prefetch import hash_ahead
from .unlisted import check_unlisted
from .verdict import BackendClaim, KeylessIdentity, PluginClaim, UpstreamSigner, Verdict, plugin_terms

__all__ = ["Context", "HashCache", "Verdict", "installed_path", "verify_distribution"]

#: Symbols every plugin defines on purpose; Triton looks them up per library handle.
_PER_LIBRARY = {m.PLUGIN_V2_SYMBOL, *m.PLUGIN_V1_SYMBOLS, "_init", "_fini", "_edata", "_end", "__bss_start"}


@record()
class Context:
    """What verification compares against: trust, the installed Triton, this interpreter."""

    trust: TrustStore
    triton_version: str | None
    libtriton: str | None
    hashes: HashCache
    workers: int = 1
    #: The package the running Triton is imported as (``Discovery.package``).
    triton_package: str = "triton"
    #: The ``.dist-info`` directories whose hashing the caller already started (:func:`.hash_ahead`).
    ahead: frozenset[str] = frozenset()


def verify_distribution(dist: Distribution, ctx: Context) -> Verdict:
    """Verify ``dist`` (which has a manifest); never raises, whatever its files hold."""
    assert dist.manifest is not None
    verdict = Verdict(REJECTED, files=[dist.dist_info, dist.manifest])
    try:
        _verify(dist, ctx, verdict)
    except TrustError as exc:
        verdict.status, verdict.problem = REJECTED, reason_of(exc)
    except Exception as exc:  # hostile input: any failure is this distribution's reason, only
        verdict.status = REJECTED
        verdict.problem = Reason("verify.error", dist.manifest, f"cannot verify: {describe(exc)}"[:500])
    finally:
        ctx.hashes.settle()
    if verdict.signature != "trusted":  # what an unsigned or untrusted manifest says was checked: anyone's claim
        verdict.upstream = []
    return verdict


def _verify(dist: Distribution, ctx: Context, verdict: Verdict) -> None:
    assert dist.manifest is not None
    confine = Confinement(dist.root)
    if dist.dist_info not in ctx.ahead:  # else the caller started it, before this module was imported
        hash_ahead(dist, ctx.hashes, ctx.workers)
    data = read_bounded(dist.manifest, dsse.MAX_ENVELOPE_BYTES)
    verdict.envelope_sha256 = hashlib.sha256(data).hexdigest()
    payload, keyids = _check_signature(data, dist, ctx.trust, verdict)
    budget = None if keyids else (m.MAX_UNSIGNED_MANIFEST_VALUES, "MAX_UNSIGNED_MANIFEST_VALUES")
    manifest = statement.manifest_of(statement.load(payload, dist.manifest, max_values=budget), dist.manifest)
    verdict.coverage = manifest.coverage
    verdict.upstream = [UpstreamSigner(u.issuer, u.identity, u.kind) for u in manifest.provenance.upstream]
    if manifest.coverage != m.COVERAGE_ALL:
        verdict.note = _join(verdict.note, "the manifest covers native files only (schema 1.0)")
    located = _locate(manifest, dist, verdict)
    _claims(manifest, dist, located, verdict)
    admitted = _check_delegation(manifest, keyids, ctx.trust, dist.manifest, verdict)
    _check_names(admitted, ctx.trust, dist.manifest, verdict)
    _check_identity(manifest, dist)
    check_environment(manifest, dist.manifest or dist.dist_info, ctx.triton_version, ctx.triton_package)
    # The walk for unlisted code runs while the artifacts are still being hashed (it needs no
    # digest); what it finds is raised after them, so a changed artifact is still reported first.
    unlisted = _unlisted(manifest, dist, located, verdict, ctx.hashes)
    _check_artifacts(manifest, located, confine, ctx)
    if unlisted is not None:
        raise unlisted
    _check_symbols(manifest, located, ctx, verdict)
    # a file written after it was hashed, a directory after it was listed: this verdict is
    # about a state no longer there
    ctx.hashes.unchanged(verdict.files)


def _unlisted(manifest: m.Manifest, dist: Distribution, located: dict[str, str], verdict: Verdict,
              hashes: HashCache) -> TrustError | None:
    try:
        check_unlisted(manifest, dist, located, verdict, hashes)
    except TrustError as exc:
        return exc
    return None


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _check_signature(
    data: bytes, dist: Distribution, trust: TrustStore, verdict: Verdict
) -> tuple[bytes, tuple[str, ...]]:
    assert dist.manifest is not None
    where = dist.manifest
    bundle = _bundle(dist, verdict)
    # a bundle to check when an identity is trusted: its payload is verified before it is parsed
    keyless = bundle is not None and trust.identities != {}
    envelope = dsse.decode(data, where, payload_limit=lambda sigs: None if keyless else _payload_limit(sigs, trust))
    if envelope.payload_type != dsse.PAYLOAD_TYPE:
        raise SignatureError("payload-type", where, f"payloadType {envelope.payload_type[:100]!r} is not ours")
    signer, failed = _check_keyless(bundle, envelope.payload, dist, trust, verdict) if keyless else (None, None)
    known = _known(envelope.signatures, trust)
    if not known and signer is None:
        if failed is not None and failed.code != "sigstore.missing":
            raise failed  # the keyless signature is all that could have vouched for it, and it does not hold
        limit = _payload_limit(envelope.signatures, trust)
        if keyless and limit is not None and len(envelope.payload) > limit[0]:  # the budget decode skipped
            raise ManifestError("limit", where, f"a payload of {len(envelope.payload):,} bytes that no trusted "
                                f"signer signed; the limit is {limit[0]:,} ({limit[1]})")
        verdict.status = UNVERIFIED
        keyids = ", ".join(s.keyid[:16] for s in envelope.signatures)
        verdict.note = _join(f"signed by {keyids}, not a trusted key" if keyids else "not signed (hash-only manifest)",
                             verdict.note)
        if trust.suspended() and any(s.keyid in trust.keys for s in envelope.signatures):
            verdict.note = _join(f"signed by {keyids}; {trust.suspended()}", verdict.note)
        verdict.signature = "untrusted" if keyids else "unsigned"
        verdict.signers = [s.keyid for s in envelope.signatures]
        return dsse.unverified_payload(envelope), ()
    verified = dsse.verify(envelope, trust, where, also=(signer.id,) if signer is not None else ())
    verdict.status = VERIFIED
    verdict.signature = "trusted"
    verdict.signers = [_signer(trust, k, verdict) for k in verified.keyids]
    return verified.payload, verified.keyids


def _bundle(dist: Distribution, verdict: Verdict) -> str | None:
    """The distribution's Sigstore bundle, if it has one; the verdict then depends on it (the
    cache sees it change; one added or removed changes the ``.dist-info`` it sits in)."""
    path = os.path.join(dist.dist_info, SIGSTORE_BUNDLE_FILENAME)
    if not os.path.lexists(path):
        return None
    verdict.files.append(path)
    return path


def _check_keyless(
    bundle: str | None, payload: bytes, dist: Distribution, trust: TrustStore, verdict: Verdict
) -> tuple[KeylessSigner | None, TrustError | None]:
    """The trusted identity whose bundle signs ``payload``, or why the bundle does not count
    (noted on the verdict; the caller decides whether it refuses the distribution)."""
    if bundle is None:
        return None, None
    try:
        signer = verify_bundle(read_bounded(bundle, MAX_BUNDLE_BYTES), payload, dist.name, trust, bundle)
    except TrustError as exc:
        verdict.note = _join(verdict.note, f"keyless signature not counted: {exc.detail} ({exc.code})")
        return None, exc
    verdict.keyless = KeylessIdentity(signer.issuer, signer.san, signer.id, signer.pattern)
    return signer, None


def _known(signatures: tuple[dsse.Signature, ...], trust: TrustStore) -> list[dsse.Signature]:
    """The signatures whose verification decides (a trusted or a revoked key's); none while the
    revocation list is unreadable (no key counts then: the manifest grants no trust)."""
    if trust.suspended():
        return []
    return [s for s in signatures if s.keyid in trust.keys or trust.revoked_by(s.keyid)]


def _payload_limit(signatures: tuple[dsse.Signature, ...], trust: TrustStore) -> tuple[int, str] | None:
    """A payload no trusted key may have signed is anyone's: the tighter budget, before it is
    decoded. With a trusted (or revoked) key's signature it is verified before it is parsed."""
    return None if _known(signatures, trust) else (m.MAX_UNSIGNED_MANIFEST_BYTES, "MAX_UNSIGNED_MANIFEST_BYTES")


def _signer(trust: TrustStore, keyid: str, verdict: Verdict) -> str:
    keyless = verdict.keyless
    if keyless is not None and keyid == keyless.id:
        return f"{keyid} sigstore {keyless.san} (issuer {keyless.issuer})"
    key = trust.keys[keyid]
    return f"{keyid} {key.comment}".rstrip()


def _check_delegation(
    manifest: m.Manifest, keyids: tuple[str, ...], trust: TrustStore, where: str, verdict: Verdict
) -> tuple[str, ...]:
    """TUF-style delegations: a key signs only the names it is scoped to (``trust.scope``);
    no release below the floor loads, signed or not (``trust.rollback``). Returns the keyids
    that count (none for a manifest no trusted key signed)."""
    if not keyids:
        check_floor(trust, manifest.name, manifest.version, where)
        return ()
    admitted = admit_signers(trust, keyids, manifest.name, manifest.version, where)
    verdict.signers = [_signer(trust, k, verdict) for k in admitted]
    return admitted


def _check_names(keyids: tuple[str, ...], trust: TrustStore, where: str, verdict: Verdict) -> None:
    """A signature vouches for bytes; the trust store says which names its key may declare. A
    backend or plugin declaring a name its signers are not granted is refused alone
    (``trust.name``): the rest of its distribution is still what the key signed."""
    if not keyids:
        return  # not trusted at all: nothing is granted, and nothing claims trust
    for backend in verdict.backends:
        why = ungranted(trust, keyids, "backend", backend.name)
        if why is not None:
            backend.problem = reason_of(TrustStoreError("name", where, f"backend {backend.name[:100]!r}: {why}"))
    for plugin in verdict.plugins:
        terms = plugin.terms
        claims = [("pass", terms.passes), ("dialect", terms.dialects), ("op", terms.ops)]  \
            if terms is not None and terms.captured else [(k, ["*"]) for k in ("pass", "dialect", "op")]
        # names never captured are unknown: whatever the library registers when loaded, so only
        # a key granted any name of each kind (KIND:*, or unscoped) may vouch for them
        why = next((w for kind, names in claims for n in names if (w := ungranted(trust, keyids, kind, n))), None)
        if why is not None and plugin.problem is None:
            plugin.problem = reason_of(TrustStoreError("name", where, f"plugin {plugin.path[:200]!r}: {why}"))


def _locate(manifest: m.Manifest, dist: Distribution, verdict: Verdict) -> dict[str, str]:
    """Where each artifact is installed; every one becomes a dependency of the verdict, so a
    missing or failing file that is later repaired is noticed."""
    where = dist.manifest or dist.dist_info
    located: dict[str, str] = {}
    for artifact in manifest.artifacts:
        path = installed_path(dist.root, artifact.path, where)
        if artifact.path in located:  # or a small manifest could make verification hash a file 1000 times
            raise VerifyError("path", where, f"artifact {artifact.path[:200]!r} is listed twice")
        if path is not None:
            located[artifact.path] = path
    for backend in manifest.backends:
        check_package_name(backend.package, where)
    verdict.files += sorted(set(located.values()))
    return located


def _claims(manifest: m.Manifest, dist: Distribution, located: dict[str, str], verdict: Verdict) -> None:
    verdict.backends = [BackendClaim(b.name, b.package, list(b.targets)) for b in manifest.backends]
    by_path = {a.path: a for a in manifest.artifacts}
    for plugin in manifest.plugins:
        artifact = by_path.get(plugin.path)
        file = located.get(plugin.path)
        if artifact is None or file is None:
            raise VerifyError("plugin", dist.manifest or dist.dist_info,
                              f"plugin {plugin.path[:200]!r} is not an installed artifact of the manifest")
        exports = _strong_exports(artifact.elf) if artifact.elf else []
        verdict.plugins.append(PluginClaim(plugin.path, file, plugin.api, plugin.name, exports, plugin_terms(plugin)))


def _strong_exports(elf: m.ElfInfo) -> list[str]:
    return sorted(
        s.name for s in elf.exports.symbols if s.binding in ("GLOBAL", "UNIQUE") and s.name not in _PER_LIBRARY
    )


def _check_identity(manifest: m.Manifest, dist: Distribution) -> None:
    where = dist.manifest or dist.dist_info
    if canonicalize_name(manifest.name) != dist.key:
        raise VerifyError("name", where, f"the manifest is for {manifest.name[:200]!r}, installed is {dist.name!r}")
    if not same_version(manifest.version, dist.version):
        raise VerifyError(
            "version", where, f"the manifest is for version {manifest.version[:100]}, installed is {dist.version}"
        )


def _check_artifacts(manifest: m.Manifest, located: dict[str, str], confine: Confinement, ctx: Context) -> None:
    """Every vouched file: inside the root, regular, the signed size, then the signed sha256."""
    checked: list[tuple[m.Artifact, str, os.stat_result]] = []
    for artifact in manifest.artifacts:
        path = located.get(artifact.path)
        if path is None:
            continue
        confine.check(path)
        st = regular_stat(path)
        if st.st_size != artifact.size:
            raise VerifyError("size", path, f"size {st.st_size}, the manifest says {artifact.size}")
        checked.append((artifact, path, st))
    digests = ctx.hashes.digests([(path, st) for _, path, st in checked], ctx.workers)
    for artifact, path, _ in checked:
        if digests[path] != artifact.sha256:
            raise VerifyError("sha256", path, "sha256 differs from the signed manifest (the file was changed)")



def _check_symbols(manifest: m.Manifest, located: dict[str, str], ctx: Context, verdict: Verdict) -> None:
    """Plugins and libraries linked against libtriton: their unversioned strong imports. A
    plugin bundled with the Triton core itself (fbtriton ships an example one that its own
    libtriton.so cannot serve) is refused alone: it is never loaded for the user, and the
    core it came with is still the core."""
    plugins = {p.path for p in manifest.plugins}
    core = ctx.libtriton is not None and ctx.libtriton in located.values()
    budget = m.MAX_UNSIGNED_LOOKUP_BYTES if verdict.status != VERIFIED else None  # anyone's names: bounded
    provided: set[str] = set()
    for artifact in manifest.artifacts:
        if artifact.elf is not None and artifact.elf.exports.complete:
            provided.update(s.name for s in artifact.elf.exports.symbols)
    for artifact in manifest.artifacts:
        elf = artifact.elf
        if elf is None or not (artifact.path in plugins or any(n.startswith("libtriton.so") for n in elf.needed)):
            continue
        needs = {
            i.name
            for i in elf.imports
            if not i.weak and i.version is None and not i.name.startswith(("Py", "_Py")) and i.name not in provided
        }
        if not needs:
            continue
        where = located.get(artifact.path, artifact.path)
        if ctx.libtriton is None:
            raise VerifyError("libtriton", where, "needs libtriton.so, which is not installed")
        if budget is not None:  # each name is hashed in Python (the GNU hash): ~250 ms a MB of names
            budget -= sum(map(len, needs))
            if budget < 0:
                raise ManifestError("limit", where, f"more than {m.MAX_UNSIGNED_LOOKUP_BYTES:,} bytes of names to "
                                    "look up in libtriton.so for a manifest no trusted key signed "
                                    "(MAX_UNSIGNED_LOOKUP_BYTES)")
        missing = dynsym.missing_exports(ctx.libtriton, needs)
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            error = VerifyError(
                "symbols", where, f"needs {len(missing)} symbol(s) that the installed "
                f"libtriton.so ({ctx.triton_version}) does not export: {shown}"
            )
            claim = next((c for c in verdict.plugins if c.path == artifact.path), None) if core else None
            if claim is None:
                raise error
            claim.problem = reason_of(error)
