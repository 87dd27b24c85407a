"""Verification of one installed distribution against its signed manifest, offline.

In order, each step stopping at the first problem (a :class:`VerifyError`,
:class:`SignatureError` or :class:`ManifestError` naming the file):

1. the DSSE envelope's signatures against the trust store (DSSE v1); only the verified
   payload is parsed, as an in-toto Statement v1 whose predicate is the manifest;
2. the signed name and version are the installed distribution's (PEP 503 names, PEP 440
   versions): a manifest copied from another release is refused;
3. a wheel tag of the manifest fits this interpreter (``packaging.tags``, PEP 425), the
   Python and Triton versions satisfy its specifiers (PEP 440), its protocol major is one
   this runtime speaks;
4. every artifact's size and sha256 as installed (through :class:`HashCache`);
5. no ``.so`` in the backend packages or next to an artifact that the manifest does not list;
6. every symbol a plugin (or a library linked against ``libtriton.so``) imports without a
   version, and no sibling artifact provides, is exported by the installed ``libtriton.so``.

A manifest that is well-formed but not signed by a trusted key (hash-only, or an unknown
signer) is checked the same way and comes out ``unverified``: its payload is parsed for
the integrity checks and the report only, never to grant trust. A bad signature by a
trusted key, or a revoked key, is ``rejected``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, field

from . import dsse, dynsym
from . import manifest as m
from .cache import identity
from .discovery import Distribution, canonical
from .errors import SignatureError, TrustError, VerifyError
from .layout import is_shared_library
from .statement import manifest_from_statement
from .trust import TrustStore

#: Backend protocol majors this runtime can load (manifest ``protocol_version``).
SUPPORTED_PROTOCOL_MAJORS = (1,)
#: Symbols every plugin defines on purpose; Triton looks them up per library handle.
_PER_LIBRARY = {m.PLUGIN_V2_SYMBOL, *m.PLUGIN_V1_SYMBOLS, "_init", "_fini", "_edata", "_end", "__bss_start"}
_CHUNK = 1 << 20

VERIFIED, UNVERIFIED, REJECTED = "verified", "unverified", "rejected"


@dataclass
class BackendClaim:
    name: str
    package: str
    targets: list[str] = field(default_factory=list)


@dataclass
class PluginClaim:
    path: str
    file: str
    api: str
    name: str | None
    exports: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    """The outcome for one distribution; plain data, so it can be cached as JSON."""

    status: str
    signers: list[str] = field(default_factory=list)
    problem: dict[str, str] | None = None
    note: str = ""
    envelope_sha256: str = ""
    backends: list[BackendClaim] = field(default_factory=list)
    plugins: list[PluginClaim] = field(default_factory=list)
    files: list[str] = field(default_factory=list)



@dataclass
class Context:
    """What verification compares against: trust, the installed Triton, this interpreter."""

    trust: TrustStore
    triton_version: str | None
    libtriton: str | None
    hashes: HashCache


class HashCache:
    """sha256 of files keyed on identity (dev, inode, size, mtime_ns, ctime_ns).

    A file rewritten in place changes mtime/ctime; a file replaced changes inode; either way
    the entry no longer matches and the file is hashed again. ``rehash`` ignores every entry.
    """

    def __init__(self, entries: dict[str, list[object]] | None = None, rehash: bool = False) -> None:
        self.entries: dict[str, list[object]] = dict(entries or {})
        self.rehash = rehash
        self.hashed_bytes = 0

    def sha256(self, path: str, st: os.stat_result) -> str:
        ident = identity(st)
        cached = self.entries.get(path)
        if cached is not None and not self.rehash and cached[:5] == ident:
            return str(cached[5])
        digest = hashlib.sha256()
        with open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
        self.hashed_bytes += st.st_size
        self.entries[path] = [*ident, digest.hexdigest()]
        return digest.hexdigest()


def verify_distribution(dist: Distribution, ctx: Context) -> Verdict:
    """Verify ``dist`` (which has a manifest); never raises for a bad distribution."""
    assert dist.manifest is not None
    verdict = Verdict(REJECTED, files=[dist.manifest])
    try:
        data = _read_capped(dist.manifest)
        verdict.envelope_sha256 = hashlib.sha256(data).hexdigest()
        payload = _check_signature(data, dist.manifest, ctx.trust, verdict)
        manifest = manifest_from_statement(payload, dist.manifest)
        _claims(manifest, dist, verdict)
        _check_identity(manifest, dist)
        _check_environment(manifest, dist, ctx)
        located = _check_artifacts(manifest, dist, ctx, verdict)
        _check_unlisted(manifest, dist, located, verdict)
        _check_symbols(manifest, located, ctx)
    except TrustError as exc:
        verdict.status = REJECTED
        verdict.problem = exc.as_dict()
    return verdict


def _read_capped(path: str) -> bytes:
    try:
        with open(path, "rb") as stream:
            data = stream.read(dsse.MAX_ENVELOPE_BYTES + 1)
    except OSError as exc:
        raise VerifyError("read", path, f"cannot read the manifest: {exc.strerror}") from None
    return data


def _check_signature(data: bytes, where: str, trust: TrustStore, verdict: Verdict) -> bytes:
    envelope = dsse.decode(data, where)
    if envelope.payload_type != dsse.PAYLOAD_TYPE:
        raise SignatureError("payload-type", where, f"payloadType {envelope.payload_type!r} is not ours")
    known = [s for s in envelope.signatures if s.keyid in trust.keys or s.keyid in trust.revoked]
    if not known:
        verdict.status = UNVERIFIED
        keyids = ", ".join(s.keyid[:16] for s in envelope.signatures)
        verdict.note = f"signed by {keyids}, not a trusted key" if keyids else "not signed (hash-only manifest)"
        verdict.signers = [s.keyid for s in envelope.signatures]
        return dsse.unverified_payload(envelope)
    verified = dsse.verify(envelope, trust, where)
    verdict.status = VERIFIED
    verdict.signers = [_signer(trust, k) for k in verified.keyids]
    return verified.payload


def _signer(trust: TrustStore, keyid: str) -> str:
    key = trust.keys[keyid]
    return f"{keyid} {key.comment}".rstrip()


def _claims(manifest: m.Manifest, dist: Distribution, verdict: Verdict) -> None:
    verdict.backends = [BackendClaim(b.name, b.package, list(b.targets)) for b in manifest.backends]
    by_path = {a.path: a for a in manifest.artifacts}
    for plugin in manifest.plugins:
        artifact = by_path.get(plugin.path)
        exports = _strong_exports(artifact.elf) if artifact and artifact.elf else []
        verdict.plugins.append(
            PluginClaim(plugin.path, installed_path(dist.root, plugin.path), plugin.api, plugin.name, exports)
        )


def _strong_exports(elf: m.ElfInfo) -> list[str]:
    return sorted(
        s.name for s in elf.exports.symbols if s.binding in ("GLOBAL", "UNIQUE") and s.name not in _PER_LIBRARY
    )


def _check_identity(manifest: m.Manifest, dist: Distribution) -> None:
    from packaging.version import InvalidVersion, Version

    where = dist.manifest or dist.dist_info
    if canonical(manifest.name) != dist.key:
        raise VerifyError("name", where, f"the manifest is for {manifest.name!r}, installed is {dist.name!r}")
    try:
        same = Version(manifest.version) == Version(dist.version)
    except InvalidVersion:
        same = manifest.version == dist.version
    if not same:
        raise VerifyError(
            "version", where, f"the manifest is for version {manifest.version}, installed is {dist.version}"
        )


def _check_environment(manifest: m.Manifest, dist: Distribution, ctx: Context) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.tags import parse_tag

    where = dist.manifest or dist.dist_info
    supported = _interpreter_tags()
    tags = {str(t) for text in manifest.tags for t in parse_tag(text)}
    if tags and not tags & supported:
        raise VerifyError("tag", where, f"wheel tags {', '.join(manifest.tags)} do not fit this interpreter")
    major = manifest.protocol_version.split(".")[0]
    if not major.isdigit() or int(major) not in SUPPORTED_PROTOCOL_MAJORS:
        raise VerifyError("protocol", where, f"backend protocol {manifest.protocol_version} is not supported")
    python = ".".join(map(str, sys.version_info[:3]))
    wanted = [("Python", manifest.requirements.python, python), ("Triton", manifest.requirements.triton, None)]
    for what, spec, installed in wanted:
        if not spec:
            continue
        if what == "Triton":
            installed = ctx.triton_version
            if installed is None:
                raise VerifyError("triton", where, f"requires Triton {spec}; Triton is not installed")
        try:
            ok = SpecifierSet(spec).contains(str(installed), prereleases=True)
        except InvalidSpecifier:
            raise VerifyError("requirement", where, f"{what} requirement {spec!r} is not a PEP 440 specifier") from None
        if not ok:
            raise VerifyError(what.lower(), where, f"requires {what} {spec}; installed is {installed}")


_TAGS: set[str] = set()


def _interpreter_tags() -> set[str]:
    if not _TAGS:
        from packaging.tags import sys_tags

        _TAGS.update(str(t) for t in sys_tags())
    return _TAGS


def installed_path(root: str, wheel_path: str) -> str:
    """Where a wheel member lands: ``<name>.data/purelib|platlib/`` go to the root."""
    parts = wheel_path.split("/")
    if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
        parts = parts[2:]
    return os.path.join(root, *parts)


def _check_artifacts(manifest: m.Manifest, dist: Distribution, ctx: Context, verdict: Verdict) -> dict[str, str]:
    located: dict[str, str] = {}
    for artifact in manifest.artifacts:
        path = installed_path(dist.root, artifact.path)
        try:
            st = os.stat(path)
        except OSError:
            raise VerifyError("missing", path, f"listed in the manifest of {dist.label()} but not installed") from None
        if st.st_size != artifact.size:
            raise VerifyError("size", path, f"size {st.st_size}, the manifest says {artifact.size}")
        if ctx.hashes.sha256(path, st) != artifact.sha256:
            raise VerifyError("sha256", path, "sha256 differs from the signed manifest (the file was changed)")
        located[artifact.path] = path
        verdict.files.append(path)
    return located


def _check_unlisted(manifest: m.Manifest, dist: Distribution, located: dict[str, str], verdict: Verdict) -> None:
    """Walk every backend package (recursively) and every directory holding an artifact."""
    listed = set(located.values())
    roots = {os.path.join(dist.root, *b.package.split(".")) for b in manifest.backends}
    flat = {os.path.dirname(p) for p in listed} - roots
    extra: list[str] = []
    for top in sorted(roots):
        for here, _, files in os.walk(top):
            verdict.files.append(here)
            extra += [os.path.join(here, f) for f in files if is_shared_library(f)]
    for here in sorted(flat):
        if any(here.startswith(r + os.sep) for r in roots):
            continue
        verdict.files.append(here)
        try:
            names = os.listdir(here)
        except OSError:
            continue
        extra += [os.path.join(here, f) for f in names if is_shared_library(f)]
    unlisted = sorted(p for p in set(extra) if p not in listed)
    if unlisted:
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        raise VerifyError("unlisted", unlisted[0], f"a shared library the signed manifest does not list{more}")


def _check_symbols(manifest: m.Manifest, located: dict[str, str], ctx: Context) -> None:
    """Plugins and libraries linked against libtriton: their unversioned strong imports."""
    plugins = {p.path for p in manifest.plugins}
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
        if ctx.libtriton is None:
            raise VerifyError("libtriton", located[artifact.path], "needs libtriton.so, which is not installed")
        missing = dynsym.missing_exports(ctx.libtriton, needs)
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            raise VerifyError(
                "symbols", located[artifact.path], f"needs {len(missing)} symbol(s) that the installed "
                f"libtriton.so ({ctx.triton_version}) does not export: {shown}"
            )
