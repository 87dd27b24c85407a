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
   Triton is imported as (``triton_package``, schema 1.2: ``triton`` or a vendor's rename);
5. every artifact, as installed: a regular file inside the install root, with the signed
   size and sha256 (:mod:`.installed`);
6. nothing unlisted that Python or the loader could run: with a manifest that covers every
   file (schema 1.1 ``coverage: all``), no ``.py``, extension module, shared library or
   sourceless ``.pyc`` anywhere in the distribution's import packages (symlinked
   directories followed); with a 1.0 manifest (native files only), no unlisted shared
   library in the backend packages. ``__pycache__`` is not checked: a verified source's
   pyc is never used (:mod:`.bytecode`);
7. every symbol a plugin (or a library linked against ``libtriton.so``) imports without a
   version, and no sibling artifact provides, is exported by the installed ``libtriton.so``.

A manifest that is well-formed but not signed by a trusted key (hash-only, or an unknown
signer) is checked the same way and comes out ``unverified``: its payload is parsed for the
integrity checks and the report only, never to grant trust. A bad signature by a trusted
key, or a revoked key, is ``rejected``. Whatever a manifest holds, the outcome is a verdict
for its own distribution: no exception leaves :func:`verify_distribution`.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ..base import (
    REJECTED,
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
    is_shared_library,
    reason_of,
    same_version,
)
from ..manifest import model as m
from ..site import (
    MAX_WALK_ENTRIES,
    Confinement,
    Distribution,
    HashCache,
    check_package_name,
    installed_path,
    other_dist_infos,
    read_bounded,
    regular_stat,
    walk_files,
)
from ..trust import TrustStore, admit_signers, check_floor, dsse, statement, ungranted
from . import dynsym
from .verdict import BackendClaim, PluginClaim, Verdict, plugin_terms

__all__ = ["Context", "HashCache", "Verdict", "installed_path", "verify_distribution"]

#: Backend protocol majors this runtime can load (manifest ``protocol_version``).
SUPPORTED_PROTOCOL_MAJORS = (1,)
#: Symbols every plugin defines on purpose; Triton looks them up per library handle.
_PER_LIBRARY = {m.PLUGIN_V2_SYMBOL, *m.PLUGIN_V1_SYMBOLS, "_init", "_fini", "_edata", "_end", "__bss_start"}
_MAJOR = re.compile(r"[0-9]{1,6}")
#: Dotted parts in one field of a wheel tag: real compressed tag sets have a handful.
MAX_TAG_PARTS = 64
#: What the import system or the dynamic loader could run, by file name.
_CODE_SUFFIXES = (".py", ".pyw", ".pyc", ".so", ".pyd")


@dataclass
class Context:
    """What verification compares against: trust, the installed Triton, this interpreter."""

    trust: TrustStore
    triton_version: str | None
    libtriton: str | None
    hashes: HashCache
    workers: int = 1
    #: The package the running Triton is imported as (``Discovery.package``).
    triton_package: str = "triton"


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
    return verdict


def _verify(dist: Distribution, ctx: Context, verdict: Verdict) -> None:
    assert dist.manifest is not None
    confine = Confinement(dist.root)
    for path in (dist.dist_info, dist.manifest):  # the verdict is about them as they are before reading
        ctx.hashes.watch(path)
    _hash_ahead(_recorded(dist.dist_info), dist.root, confine, ctx)
    data = read_bounded(dist.manifest, dsse.MAX_ENVELOPE_BYTES)
    verdict.envelope_sha256 = hashlib.sha256(data).hexdigest()
    payload, keyids = _check_signature(data, dist.manifest, ctx.trust, verdict)
    budget = None if keyids else (m.MAX_UNSIGNED_MANIFEST_VALUES, "MAX_UNSIGNED_MANIFEST_VALUES")
    manifest = statement.manifest_of(statement.load(payload, dist.manifest, max_values=budget), dist.manifest)
    verdict.coverage = manifest.coverage
    if manifest.coverage != m.COVERAGE_ALL:
        verdict.note = _join(verdict.note, "the manifest covers native files only (schema 1.0)")
    located = _locate(manifest, dist, verdict)
    _claims(manifest, dist, located, verdict)
    admitted = _check_delegation(manifest, keyids, ctx.trust, dist.manifest, verdict)
    _check_names(admitted, ctx.trust, dist.manifest, verdict)
    _check_identity(manifest, dist)
    _check_environment(manifest, dist, ctx)
    _check_artifacts(manifest, located, confine, ctx)
    _check_unlisted(manifest, dist, located, verdict, ctx.hashes)
    _check_symbols(manifest, located, ctx, verdict)
    # a file written after it was hashed, a directory after it was listed: this verdict is
    # about a state no longer there
    ctx.hashes.unchanged(verdict.files)


def _recorded(dist_info: str) -> list[tuple[str, int]]:
    """(path, size) as the installer's RECORD lists them (PEP 376): a hint of what to hash,
    read before the manifest so hashing starts at once; the manifest alone decides what is
    checked. Quoted rows (a comma in a path) are left out: a hint need not be complete."""
    from ..site import read_small_text

    rows = []
    for line in (read_small_text(os.path.join(dist_info, "RECORD")) or "").splitlines():
        path, _, size = (line.rsplit(",", 2) + ["", ""])[:3]
        if path and not path.startswith('"') and size.isascii() and size.isdigit() and len(size) < 16:
            rows.append((path, int(size)))
    return rows


def _hash_ahead(rows: list[tuple[str, int]], root: str, confine: Confinement, ctx: Context) -> None:
    """Start hashing while the manifest is read, verified, decoded and checked: on a cold
    start hashing is most of the time, and the rest then overlaps it. Only plain paths
    inside the root are touched; every check is still made, in order, below."""
    ahead = []
    for name, size in rows:
        try:
            path = installed_path(root, name)
        except VerifyError:
            continue
        if path is not None and confine.inside(os.path.dirname(path)):
            ahead.append((path, size))
    ctx.hashes.prefetch(ahead, ctx.workers)


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _check_signature(data: bytes, where: str, trust: TrustStore, verdict: Verdict) -> tuple[bytes, tuple[str, ...]]:
    envelope = dsse.decode(data, where, payload_limit=lambda signatures: _payload_limit(signatures, trust))
    if envelope.payload_type != dsse.PAYLOAD_TYPE:
        raise SignatureError("payload-type", where, f"payloadType {envelope.payload_type[:100]!r} is not ours")
    known = _known(envelope.signatures, trust)
    if not known:
        verdict.status = UNVERIFIED
        keyids = ", ".join(s.keyid[:16] for s in envelope.signatures)
        verdict.note = f"signed by {keyids}, not a trusted key" if keyids else "not signed (hash-only manifest)"
        if trust.suspended() and any(s.keyid in trust.keys for s in envelope.signatures):
            verdict.note = f"signed by {keyids}; {trust.suspended()}"
        verdict.signature = "untrusted" if keyids else "unsigned"
        verdict.signers = [s.keyid for s in envelope.signatures]
        return dsse.unverified_payload(envelope), ()
    verified = dsse.verify(envelope, trust, where)
    verdict.status = VERIFIED
    verdict.signature = "trusted"
    verdict.signers = [_signer(trust, k) for k in verified.keyids]
    return verified.payload, verified.keyids


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


def _signer(trust: TrustStore, keyid: str) -> str:
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
    verdict.signers = [_signer(trust, k) for k in admitted]
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


def _check_environment(manifest: m.Manifest, dist: Distribution, ctx: Context) -> None:
    where = dist.manifest or dist.dist_info
    _check_tags(manifest.tags, where)
    major = manifest.protocol_version.split(".")[0]
    if not _MAJOR.fullmatch(major) or int(major) not in SUPPORTED_PROTOCOL_MAJORS:
        raise VerifyError("protocol", where, f"backend protocol {manifest.protocol_version[:50]!r} is not supported")
    python = ".".join(map(str, sys.version_info[:3]))
    _check_specifier("Python", manifest.requirements.python, python, where)
    if manifest.requirements.triton and ctx.triton_version is None:
        raise VerifyError("triton", where, f"requires Triton {manifest.requirements.triton}; Triton is not installed")
    _check_specifier("Triton", manifest.requirements.triton, ctx.triton_version, where)
    _check_triton_package(manifest, ctx.triton_package, where)


def _check_triton_package(manifest: m.Manifest, running: str, where: str) -> None:
    """Backends and plugins built for Triton imported as one package are never handed to a
    Triton imported as another (a vendor's rename has its own entry-point group, its own
    ``libtriton``): ``verify.triton-package``. A manifest with neither is Triton's own or a
    library's, and holds for any."""
    if (manifest.backends or manifest.plugins) and manifest.triton_package != running:
        raise VerifyError("triton-package", where, f"built for Triton imported as "
                          f"{manifest.triton_package[:100]!r}; this Triton is imported as {running!r}")


def _check_tags(tags: list[str], where: str) -> None:
    """PEP 425 compressed tag sets (``py2.py3-none-any``) matched field by field, with sets:
    of a tag's interpreters those this Python has, of their ABIs those it has with them, and
    whether their platforms meet. Never the product of the three fields (n**3 tags for n parts
    each), never every manifest tag against every interpreter tag (100,000 tags against ~1000
    took 40 s): at most 256 tags (``manifest.MAX_TAGS``), each a few set intersections."""
    if not tags:
        return
    fields = []
    for text in tags:
        parts = text.split("-")
        expanded = [set(p.lower().split(".")) for p in parts]  # packaging.tags.Tag lowercases too
        if len(parts) != 3 or any("" in e or len(e) > MAX_TAG_PARTS for e in expanded):
            raise VerifyError("tag", where, f"wheel tag {text[:100]!r} is not 'python-abi-platform' "
                              f"(at most {MAX_TAG_PARTS} dotted parts each)")
        fields.append(expanded)
    ours = _interpreter_tags()
    for interpreters, abis, platforms in fields:
        for interpreter in interpreters & ours.keys():
            if any(not platforms.isdisjoint(ours[interpreter][abi]) for abi in abis & ours[interpreter].keys()):
                return
    raise VerifyError("tag", where, f"wheel tags {', '.join(t[:100] for t in tags[:8])}"
                      f"{f' (and {len(tags) - 8} more)' if len(tags) > 8 else ''} do not fit this interpreter")


def _check_specifier(what: str, spec: str | None, installed: str | None, where: str) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not spec or installed is None:
        return
    try:
        ok = SpecifierSet(spec).contains(installed, prereleases=True)
    except (InvalidSpecifier, ValueError):
        raise VerifyError(
            "requirement", where, f"{what} requirement {spec[:100]!r} is not a PEP 440 specifier"
        ) from None
    if not ok:
        raise VerifyError(what.lower(), where, f"requires {what} {spec}; installed is {installed}")


#: This interpreter's tags (``packaging.tags.sys_tags``): interpreter -> ABI -> platforms.
_TAGS: dict[str, dict[str, set[str]]] = {}


def _interpreter_tags() -> dict[str, dict[str, set[str]]]:
    if not _TAGS:
        from packaging.tags import sys_tags

        for tag in sys_tags():
            _TAGS.setdefault(tag.interpreter, {}).setdefault(tag.abi, set()).add(tag.platform)
    return _TAGS


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


def _is_code(directory: str, name: str) -> bool:
    """A file the import system or the loader could run; ``__pycache__`` bytecode is Python's
    cache of a source beside it, never run in place of a verified one (:mod:`.bytecode`)."""
    if os.path.basename(directory) == "__pycache__":
        return False
    return name.endswith(_CODE_SUFFIXES) or is_shared_library(name)


def _check_unlisted(manifest: m.Manifest, dist: Distribution, located: dict[str, str], verdict: Verdict,
                    hashes: HashCache) -> None:
    listed = set(located.values())
    if manifest.coverage == m.COVERAGE_ALL:
        tops = _import_packages(located, dist.root)
        is_extra = _is_code
    else:
        tops = {os.path.join(dist.root, *b.package.split(".")) for b in manifest.backends}
        tops |= {os.path.dirname(p) for p in listed if os.path.dirname(p) != dist.root}
        def is_extra(directory: str, name: str) -> bool:  # noqa: E306 - schema 1.0: libraries only
            return is_shared_library(name)
    claims = _Claims(dist, verdict, hashes)  # the other distributions' RECORDs, read once if at all
    tops = _confined(tops, manifest, dist, listed, claims)
    _check_strays(_strays(listed, tops, dist, is_extra), manifest, listed, is_extra, claims)
    budget = [MAX_WALK_ENTRIES]
    unlisted: list[str] = []
    for top in sorted(tops):
        for here, names in walk_files(top, budget, hashes.taken):  # each directory's identity before it is listed
            verdict.files.append(here)
            unlisted += [p for n in names if is_extra(here, n) and (p := os.path.join(here, n)) not in listed]
    if unlisted:
        unlisted = sorted(set(unlisted))
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        raise VerifyError("unlisted", unlisted[0], f"code the signed manifest does not list{more}")


def _confined(tops: set[str], manifest: m.Manifest, dist: Distribution, listed: set[str],
              claims: _Claims) -> set[str]:
    """The directories walked for unlisted code: the distribution's own. A top-level package
    is its own unless another distribution owns it (a fork's or plugin's backend installed
    inside Triton's ``triton/``: Triton's files are not this distribution's to list) or it is
    a namespace (PEP 420: shared by design). Inside such a package it owns the directories of
    its declared backend packages and the topmost packages whose ``__init__.py`` its manifest
    lists, each walked whole: a file dropped there is still caught. Importing one of those
    runs the ``__init__.py`` of every package above it, so each must be listed, another
    distribution's, or absent. The decision's inputs (those directories, their
    ``__init__.py``, the owners' RECORDs) join the verdict's files."""
    whole: set[str] = set()
    inside: set[str] = set()  # directories owned inside a shared package
    shared: dict[str, bool] = {}
    for directory in tops:
        top = os.path.join(dist.root, os.path.relpath(directory, dist.root).split(os.sep)[0])
        if top not in shared:
            shared[top] = _package_owner(top, listed, claims) != "own"
        if not shared[top]:
            whole.add(directory)
            continue
        owned = _owned_below(top, manifest, dist, listed)
        if any(directory == o or directory.startswith(o + os.sep) for o in owned):
            inside.add(directory)
        else:
            inside |= {o for o in owned if o.startswith(directory + os.sep)}
    inside = {d for d in inside if not any(d.startswith(o + os.sep) for o in inside)}
    if manifest.coverage == m.COVERAGE_ALL:  # a 1.0 manifest lists no Python: libraries only
        for directory in sorted(inside):
            _check_parents(directory, listed, claims)
    out = whole | inside
    return {d for d in out if not any(d.startswith(o + os.sep) for o in out)}


def _strays(listed: set[str], walked: set[str], dist: Distribution, is_extra: Callable[[str, str], bool]) -> set[str]:
    """Listed code outside every walked directory: a module or library the distribution
    installs into a directory it shares (``triton/backends/helper.py`` in a namespace, a
    plugin in ``nvidia/lib/``); top-level modules are left to the shadowing check."""
    return {
        p for p in listed
        if os.path.dirname(p) != dist.root and is_extra(os.path.dirname(p), os.path.basename(p))
        and not any(p.startswith(w + os.sep) for w in walked)
    }


def _check_strays(strays: set[str], manifest: m.Manifest, listed: set[str],
                  is_extra: Callable[[str, str], bool], claims: _Claims) -> None:
    """In a shared directory the loader searches a listed library's directory (``$ORIGIN``)
    and the path finder prefers ``X/__init__.py`` and then ``X<extension suffix>`` to a listed
    ``X.py``: unlisted code there, or in ``X/``, runs in the verified file's place unless
    another distribution's RECORD describes it (PEP 376). The packages above a listed module
    run before it, as for an owned directory. Each directory looked at joins the verdict's files."""
    unlisted: list[str] = []
    for directory in sorted({os.path.dirname(p) for p in strays}):
        here = sorted(p for p in strays if os.path.dirname(p) == directory)
        claims.watch(directory)
        found = _shadowing(directory, here, is_extra, claims)
        unlisted += [p for p in found if p not in listed and not claims.owned(p)]
        if manifest.coverage == m.COVERAGE_ALL and not all(is_shared_library(os.path.basename(p)) for p in here):
            _check_parents(os.path.join(directory, "-"), listed, claims)  # from directory's own up
    if unlisted:
        raise VerifyError("unlisted", sorted(unlisted)[0], "code the signed manifest does not list, in a "
                          "directory it shares with others (it runs in place of the verified file)")


def _shadowing(directory: str, strays: list[str], is_extra: Callable[[str, str], bool], claims: _Claims) -> list[str]:
    """The code in ``directory`` that could run in place of its listed ``strays``: any library
    beside a library, ``X.*`` code beside a module ``X``, and the code in a directory ``X/``."""
    code = _code_in(directory, is_extra)
    libraries = any(is_shared_library(os.path.basename(p)) for p in strays)
    stems = {os.path.basename(p).split(".")[0] for p in strays if not is_shared_library(os.path.basename(p))}
    found = [p for p in code if (libraries and is_shared_library(os.path.basename(p)))
             or os.path.basename(p).split(".")[0] in stems]
    for stem in sorted(stems):
        package = os.path.join(directory, stem)
        if os.path.isdir(package):
            claims.watch(package)
            found += _code_in(package, is_extra)
    return found


def _code_in(directory: str, is_extra: Callable[[str, str], bool]) -> list[str]:
    """The code files directly in ``directory`` (one bounded listing; none if unreadable)."""
    try:
        with os.scandir(directory) as entries:
            names = [e.name for _, e in zip(range(MAX_WALK_ENTRIES), entries, strict=False)]
    except OSError:
        return []
    return [path for n in sorted(names)
            if is_extra(directory, n) and not os.path.isdir(path := os.path.join(directory, n))]


class _Claims:
    """The other distributions' RECORDs in ``dist``'s ``sys.path`` entry, read once, when first
    asked (only a distribution with files in a shared directory asks)."""

    #: Above this size a RECORD row's size alone describes a shared library: hashing another
    #: vendor's half-gigabyte library on every verification is not this check's to do.
    HASH_LIMIT = 16 << 20

    def __init__(self, dist: Distribution, verdict: Verdict, hashes: HashCache) -> None:
        self.dist, self.verdict, self.hashes = dist, verdict, hashes
        self.records: list[tuple[str, str]] | None = None

    def watch(self, path: str) -> None:
        """``path`` joins the verdict's files under its identity before it is looked at."""
        self.hashes.watch(path)
        self.verdict.files.append(path)

    def owned(self, path: str) -> bool:
        """Whether another distribution's RECORD lists ``path`` as it is on disk; the file and
        that RECORD then join the verdict's files (an edit to either: verified again)."""
        self.hashes.watch(path)
        record = self.owner(path)
        if record is not None:
            self.verdict.files += [path, record]
        return record is not None

    def owner(self, path: str) -> str | None:
        """The RECORD of another distribution that lists ``path`` as it is on disk (PEP 376)."""
        from ..site import read_small_text, record_row, record_row_matches

        if self.records is None:
            self.records = []
            for info in other_dist_infos(self.dist):
                record = os.path.join(self.dist.root, info, "RECORD")
                self.hashes.watch(record)
                self.records.append((record, read_small_text(record) or ""))
        wheel_path = os.path.relpath(path, self.dist.root).replace(os.sep, "/")
        for record, text in self.records:
            row = record_row(text, wheel_path) if text else None
            if row is not None and (record_row_matches(row, path, self.HASH_LIMIT) or _large_and_sized(row, path)):
                return record
        return None


def _large_and_sized(row: str, path: str) -> bool:
    if not is_shared_library(os.path.basename(path)):
        return False
    size = row.rsplit(",", 1)[-1]
    try:
        return size.isascii() and size.isdigit() and len(size) < 16 and os.stat(path).st_size == int(size) > (
            _Claims.HASH_LIMIT)
    except (OSError, ValueError):
        return False


def _package_owner(directory: str, listed: set[str], claims: _Claims) -> str:
    """Whose package ``directory`` is: ``"own"`` (its manifest lists the ``__init__.py``, or
    nobody else claims one that is there: then it is unlisted code of this distribution),
    ``"other"`` (another installed distribution's RECORD lists it, as the file on disk is) or
    ``"namespace"`` (no ``__init__.py``: PEP 420)."""
    init = os.path.join(directory, "__init__.py")
    if init in listed or not os.path.isdir(directory):
        return "own"
    claims.hashes.watch(directory)  # before looking: an __init__.py added later makes it a package
    if not os.path.lexists(init):
        claims.verdict.files.append(directory)
        return "namespace"
    if not claims.owned(init):
        return "own"
    claims.verdict.files.append(directory)
    return "other"


def _check_parents(directory: str, listed: set[str], claims: _Claims) -> None:
    """The packages above an owned directory run first when it is imported: an ``__init__.py``
    there that this manifest does not list and no other distribution owns is unlisted code
    (dropped into a namespace, it turns it into a package that runs on import)."""
    root = claims.dist.root
    parent = os.path.dirname(directory)
    while parent != root and parent.startswith(root + os.sep):
        init = os.path.join(parent, "__init__.py")
        if _package_owner(parent, listed, claims) == "own" and init not in listed:
            raise VerifyError("unlisted", init, "code the signed manifest does not list (it runs before "
                              f"{os.path.relpath(directory, root)} is imported)")
        parent = os.path.dirname(parent)


def _owned_below(top: str, manifest: m.Manifest, dist: Distribution, listed: set[str]) -> set[str]:
    """Inside a package another distribution owns: the declared backend packages' directories
    and the topmost packages the manifest lists an ``__init__.py`` of."""
    backends = {os.path.join(dist.root, *b.package.split(".")) for b in manifest.backends}
    packages = {os.path.dirname(p) for p in listed if os.path.basename(p) == "__init__.py"}
    return {d for d in backends | packages if d.startswith(top + os.sep)}


def _import_packages(located: dict[str, str], root: str) -> set[str]:
    """The top-level directories the distribution installs, but its metadata directories."""
    tops = set()
    for path in located.values():
        top = os.path.relpath(path, root).split(os.sep)[0]
        if not top.endswith((".dist-info", ".data")) and os.path.isdir(os.path.join(root, top)):
            tops.add(os.path.join(root, top))
    return tops


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
