"""The work on each input wheel of a mirror run: reused when its last result still holds,
else migrated into staging or copied through, in a thread pool (largest wheels first)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from triton_backend_runtime.base import describe, regularfile
from triton_backend_runtime.trust import MAX_BUNDLE_BYTES

from .. import __version__
from ..base import KeylessError, TrustError, atomic_output, checkpoint, sha256_pread, worker_pool
from ..manifest import SBOM_PATH
from .confined import is_regular, open_confined, read_confined
from .mirrorrecords import COPIED, FAILED, MIGRATED, UNCHANGED, Entry, Hooks, MirrorError, Result, Source, failure
from .mirrorstate import State
from .upstream import MAX_PROVENANCE_BYTES, ProvenanceError, UpstreamRoot, check_provenance

if TYPE_CHECKING:
    from triton_backend_runtime.manifest import UpstreamIdentity
    from triton_backend_runtime.trust import Identity

    from ..manifest import Keyless, Policy, SigningKey

__all__ = ["BUNDLE_SUFFIX", "CHUNK", "Context", "Finish", "Hasher", "output_stat", "tool", "work"]

CHUNK = 1 << 20
#: ``--sigstore-bundle DIR`` holds ``<output wheel file name>`` and this for each wheel it signs.
BUNDLE_SUFFIX = ".sigstore.json"


@dataclass
class Context:
    """What the work on every wheel shares: the run's settings and last state, and the outputs it staged."""

    outdir: Path
    staging: Path
    key: SigningKey | None
    tool: str
    pass_through: bool
    hooks: Hooks
    previous: State | None
    capture: Policy = "off"
    keyless: Keyless | None = None
    #: The identities upstream PEP 740 attestations must be signed by (``--upstream-identity``);
    #: none: provenance is not read.
    upstream: tuple[Identity, ...] = ()
    #: The Sigstore trust root they are verified against (``--upstream-root``); None: Sigstore's production root.
    upstream_root: UpstreamRoot | None = None
    #: ``--sigstore-bundle DIR``: each migrated wheel's Sigstore bundle, attached instead of
    #: signing now (a byte-identical rebuild of keyless-signed outputs).
    sigstore_bundles: Path | None = None
    #: Outputs written into staging by this run: linked into the new index from there, then
    #: renamed into OUTDIR once that index is served.
    staged: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def keyid(self) -> str | None:
        """The key the migrated outputs are signed with; None where only Sigstore signs them."""
        return self.key.public.keyid if self.key is not None else None


#: A step that completes one wheel's result (run later for a wheel whose hashes run behind).
Finish = Callable[[], Result]
#: Starts hashing an open file: at once (in the pool) or on the background hasher (large wheels).
Hasher = Callable[[int], "Future[str]"]


def work(sources: list[Source], ctx: Context, jobs: int) -> list[Result]:
    """Reuse what still holds; work on the rest. A wheel larger than all the others left
    together is migrated first, alone, with every thread (its members in parallel); its input
    and output are hashed by a background thread meanwhile and while the rest share the pool,
    one thread each, largest first (their work holds the GIL, hashing does not)."""
    sizes = {s.filename: _size(s.path) for s in sources}
    order = sorted(sources, key=lambda s: -sizes[s.filename])
    results: dict[str, Result] = {}
    remaining = sum(sizes.values())
    with worker_pool(1) as background:
        later: list[tuple[Source, Finish]] = []
        while order and jobs > 1 and sizes[order[0].filename] > remaining - sizes[order[0].filename]:
            first = order.pop(0)
            remaining -= sizes[first.filename]
            later.append((first, _one(first, ctx, jobs, lambda fd: background.submit(sha256_pread, fd))))
        if jobs <= 1 or len(order) <= 1:
            results.update({s.filename: _one(s, ctx, jobs, _hash_now)() for s in order})
        else:
            with worker_pool(jobs) as pool:
                done = pool.map(lambda s: _one(s, ctx, 1, _hash_now)(), order)
                results.update({s.filename: r for s, r in zip(order, done, strict=True)})
        results.update({s.filename: finish() for s, finish in later})
    return [results[s.filename] for s in sources]


def _hash_now(fd: int) -> Future[str]:
    future: Future[str] = Future()
    try:
        future.set_result(sha256_pread(fd))
    except OSError as exc:
        future.set_exception(exc)
    return future


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _one(source: Source, ctx: Context, jobs: int, hasher: Hasher) -> Finish:
    """Start one input wheel; the step returned completes it. Every error, in either part,
    becomes this wheel's failure; the descriptors it opened are closed when it completes."""
    started = time.perf_counter()
    opened: list[int] = []
    try:
        finish = _process(source, ctx, jobs, hasher, opened)
    except Exception as exc:  # noqa: BLE001  (one wheel's problem must not stop the others)
        failure = _failure_of(source, exc)
        finish = lambda: failure  # noqa: E731

    def end() -> Result:
        try:
            result = finish()
        except Exception as exc:  # noqa: BLE001
            result = _failure_of(source, exc)
        finally:
            for fd in opened:
                os.close(fd)
        result.seconds = time.perf_counter() - started
        if ctx.hooks.done:
            ctx.hooks.done(source.path, result)
        return result

    return end


def _failure_of(source: Source, exc: Exception) -> Result:
    if isinstance(exc, TrustError):
        error = exc
    elif isinstance(exc, OSError):
        error = MirrorError("io", str(source.path), exc.strerror or str(exc))
    else:  # a bug of ours, still this wheel's alone
        error = MirrorError("internal", str(source.path), describe(exc))
    return failure(source.filename, str(source.path), error)


def _process(source: Source, ctx: Context, jobs: int, hasher: Hasher, opened: list[int]) -> Finish:
    """The input is opened once, confined to its source tree, as a regular file and not
    through a symlink; every later read (hash, migration, copy) is of that descriptor."""
    fd, info = open_confined(source.path, source.root or source.path.parent.resolve())
    opened.append(fd)
    fingerprint = _identity(info)
    old = ctx.previous.entries.get(source.filename) if ctx.previous else None
    if ctx.upstream:
        return _attested(source, fd, ctx, jobs, fingerprint, old, hasher, opened)
    if old is not None and old.stat == fingerprint and _reusable(old, source, ctx, old.sha256):
        return _ready(_unchanged(old, source))
    if old is None:
        return _migrate(source, fd, ctx, jobs, fingerprint, hasher(fd), hasher, opened)
    # a file seen before whose stat changed: the same bytes are still unchanged, so hash first
    sha256 = _checked(source, sha256_pread(fd))
    if _reusable(old, source, ctx, sha256):
        old.stat, old.source = fingerprint, str(source.path)
        return _ready(_unchanged(old, source))
    return _migrate(source, fd, ctx, jobs, fingerprint, _known(sha256), hasher, opened)


def _attested(source: Source, fd: int, ctx: Context, jobs: int, fingerprint: list[int], old: Entry | None,
              hasher: Hasher, opened: list[int]) -> Finish:
    """With ``--upstream-identity``: the wheel's PEP 740 provenance verified against the
    wheel's own sha256 and the listed identities before it is migrated; the last result
    holds only for the same wheel and the same provenance bytes. No provenance, one that does
    not verify, or one by another identity is this wheel's failure, never served."""
    where = str(source.provenance or source.path)
    data = _provenance(source)
    sha256 = _checked(source, sha256_pread(fd))
    digest = hashlib.sha256(data).hexdigest() if data is not None else None
    if digest is not None and old is not None and old.provenance_sha256 == digest and _reusable(old, source, ctx,
                                                                                                 sha256):
        old.stat, old.source = fingerprint, str(source.path)
        return _ready(_unchanged(old, source))
    if data is None:
        raise ProvenanceError("missing", str(source.path), "no PEP 740 provenance (a <wheel>.provenance file, or "
                              "the index's data-provenance): --upstream-identity requires one for every wheel")
    upstream = check_provenance(data, source.filename, sha256, ctx.upstream, where, ctx.upstream_root)
    return _migrate(source, fd, ctx, jobs, fingerprint, _known(sha256), hasher, opened, (upstream, digest))


def _provenance(source: Source) -> bytes | None:
    """The provenance's bytes, None when a directory's wheel has none beside it (a file the
    index names must be there); read as inputs are, confined to the source tree. One that
    cannot be read so (a symlink, a FIFO, over the bound, missing) is this wheel's
    ``provenance.unreadable``: an ``input.*`` code would end the whole run with exit 2."""
    if source.provenance is None or (not source.provenance_named and not os.path.lexists(source.provenance)):
        return None
    try:
        return read_confined(source.provenance, source.root or source.path.parent.resolve(), MAX_PROVENANCE_BYTES)
    except TrustError as exc:
        raise ProvenanceError("unreadable", exc.path, f"{exc.detail} ({exc.code})") from None


def _ready(result: Result) -> Finish:
    return lambda: result


def _known(sha256: str) -> Future[str]:
    future: Future[str] = Future()
    future.set_result(sha256)
    return future


def _checked(source: Source, sha256: str) -> str:
    """The input's sha256, when it is the one its index page names (if any)."""
    if source.expected_sha256 and sha256 != source.expected_sha256:
        raise MirrorError("source-hash", str(source.path),
                          f"sha256 {sha256} is not the {source.expected_sha256} its index page names")
    return sha256


def _reusable(old: Entry, source: Source, ctx: Context, sha256: str) -> bool:
    """The last result still holds: same bytes, same tool, same key for a signed output,
    the same choice to serve a failure, and the output still the file written (device,
    inode, size, mtime and ctime: a file rewritten in place and its mtime set back has a
    new ctime, which no unprivileged process can set back)."""
    assert ctx.previous is not None
    if old.sha256 != sha256 or ctx.previous.tool != ctx.tool:
        return False
    if source.expected_sha256 and source.expected_sha256 != old.sha256:
        return False
    if old.kind == MIGRATED and old.keyid != ctx.keyid:
        return False
    if old.kind == FAILED and old.served != ctx.pass_through:
        return False
    if old.kind != COPIED and old.bundle_sha256 != _bundle_now(source, ctx):
        return False
    return not old.served or output_stat(ctx.outdir / old.filename) == old.output_stat


def _bundle_now(source: Source, ctx: Context) -> str | None:
    """The sha256 of the wheel's bundle in ``--sigstore-bundle DIR`` now: None without one (or
    without DIR); one that cannot be read matches no recorded digest (the wheel is redone and
    its reading fails it). A wheel migrated or failed with another bundle, or none, is redone."""
    if ctx.sigstore_bundles is None:
        return None
    try:
        return hashlib.sha256(_read_bundle(_bundle_path(source, ctx.sigstore_bundles))).hexdigest()
    except regularfile.RegularFileError as exc:
        return None if exc.reason == "missing" else "unreadable"


def _bundle_path(source: Source, bundles: Path) -> Path:
    return bundles / f"{source.filename}{BUNDLE_SUFFIX}"


def _read_bundle(path: Path) -> bytes:
    """A bundle of ``--sigstore-bundle DIR``, read as the other inputs are: a regular file,
    bounded, never through a symlink (``symlink``), never blocking on a FIFO."""
    return regularfile.read_regular(path, MAX_BUNDLE_BYTES, follow_symlinks=False)


def _unchanged(old: Entry, source: Source) -> Result:
    status = FAILED if old.kind == FAILED else UNCHANGED
    return Result(old.filename, str(source.path), status, old.served, old, old.error)


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def output_stat(path: Path) -> list[int]:
    """A served output's identity; [] when it is missing or no regular file."""
    try:
        info = os.lstat(path)
    except OSError:
        return []
    return _identity(info) if is_regular(info.st_mode) else []


def tool(capture: Policy, sigstore: bool = False) -> str:
    """What made the outputs: the packager's version and what it writes into a wheel (the
    SBOM: outputs of this version made before SBOMs were written are made again), how plugins
    were asked (a manifest records ``not-run`` or what the plugin reported, so another choice
    is another output), and whether a Sigstore bundle signs them too."""
    version = f"{__version__}; sbom={SBOM_PATH}"
    made = version if capture == "off" else f"{version}; capture-plugins={capture}"
    return f"{made}; sigstore" if sigstore else made


def _migrate(source: Source, fd: int, ctx: Context, jobs: int, fingerprint: list[int], input_hash: Future[str],
             hasher: Hasher, opened: list[int],
             attested: tuple[list[UpstreamIdentity], str | None] = ([], None)) -> Finish:
    """Migrate into staging; keep the output when the wheel has a backend or a plugin, else
    copy the input through; a failure is served as it is only with ``pass_through``. Nothing
    is staged for the index before the input's sha256 is known and checked. ``attested``: the
    upstream identities checked (recorded in the manifest and the state) and the sha256 of
    the provenance they were read from."""
    upstream, provenance_sha256 = attested
    from .migrate import Options, migrate_wheel  # ~0.3 s of imports that an unchanged mirror never needs

    staged = ctx.staging / source.filename
    keyless, unsigned = _keyless(source, ctx)
    outcome = migrate_wheel(source.path, ctx.staging, ctx.key, jobs=jobs, progress=ctx.hooks.progress,
                            options=Options(source_fd=fd, capture=ctx.capture, warn_plain=False,
                                            warn_unsigned=unsigned is None, keyless=keyless,
                                            upstream=tuple(upstream)))
    triton = bool(outcome.backends or outcome.plugins)
    error = outcome.error or (unsigned if triton else None)
    if not triton and isinstance(error, KeylessError):
        error = None  # the bundle of an output never served: a wheel copied through needs none
    if unsigned is not None and error is not None and error.code == "input.signed":
        error = unsigned  # refused before planning for want of a signer: the missing bundle is why
    kind = FAILED if error is not None else MIGRATED if triton else COPIED
    output_hash = None
    if kind == MIGRATED:
        out_fd = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        opened.append(out_fd)
        output_hash = hasher(out_fd)

    def finish() -> Result:
        sha256 = _checked(source, input_hash.result())
        _still_opened(source, fd, fingerprint)
        entry = Entry(source.filename, str(source.path), source.project, fingerprint, sha256, kind,
                      kind != FAILED or ctx.pass_through, None, [], ctx.keyid, [], [])
        if kind != FAILED:
            entry.core = outcome.core
        entry.upstream = [{"issuer": u.issuer, "identity": u.identity, "kind": u.kind} for u in upstream]
        entry.provenance_sha256 = provenance_sha256
        if kind != COPIED and keyless is not None and keyless.bundle is not None:
            entry.bundle_sha256 = hashlib.sha256(keyless.bundle).hexdigest()
        if kind == MIGRATED:
            entry.backends, entry.plugins = outcome.backends, outcome.plugins
            entry.output_sha256 = output_hash.result() if output_hash else None
        elif entry.served:
            _copy_through(source, fd, staged, entry)
        entry.error = error.as_dict() if error else None
        if entry.served:
            with ctx.lock:
                ctx.staged.append(entry.filename)
        return Result(source.filename, str(source.path), kind, entry.served, entry, entry.error,
                      warnings=outcome.warnings)

    return finish


def _still_opened(source: Source, fd: int, fingerprint: list[int]) -> None:
    """The input is still the file opened, hashed and checked (its provenance too): the
    migration read it again through the same descriptor, and a file rewritten in place
    meanwhile (same inode, other bytes) would be served and signed as what was checked.
    Its size, mtime or ctime differs then: this wheel's failure, nothing of it served."""
    if _identity(os.fstat(fd)) != fingerprint:
        raise MirrorError("source-changed", str(source.path), "the file changed while it was mirrored "
                          "(its size, mtime or ctime is not the one it was opened with)")


def _keyless(source: Source, ctx: Context) -> tuple[Keyless | None, KeylessError | None]:
    """How this wheel's output is signed keylessly: with ``--sigstore-bundle DIR``, its bundle
    there attached (checked against the manifest's statement when the output is written:
    ``sigstore.statement``), else the run's own signing (``--sigstore``). With neither, none,
    and the error the wheel gets if it is migrated (a wheel copied through needs no bundle)."""
    if ctx.sigstore_bundles is None:
        return ctx.keyless, None
    from ..manifest import Keyless

    path = _bundle_path(source, ctx.sigstore_bundles)
    try:
        return Keyless(bundle=_read_bundle(path), source=str(path)), None
    except regularfile.RegularFileError as exc:
        if exc.reason != "missing":
            return None, KeylessError("bundle", str(path), f"{exc.detail}: not a Sigstore bundle")
    if ctx.keyless is not None:
        return ctx.keyless, None
    return None, KeylessError("bundle", str(path), "no bundle for this wheel in --sigstore-bundle, and no "
                                                   "--sigstore to sign it now")


def _copy_through(source: Source, fd: int, target: Path, entry: Entry) -> None:
    """The input byte for byte, from its open descriptor (a regular file of the source tree,
    never what a symlink names); its sha256 taken from the bytes copied, which must be the
    bytes hashed before (an input changing under the run is this wheel's failure)."""
    digest = hashlib.sha256()
    offset = 0
    with atomic_output(target) as out:
        while chunk := os.pread(fd, CHUNK, offset):
            checkpoint()
            digest.update(chunk)
            out.write(chunk)
            offset += len(chunk)
        if digest.hexdigest() != entry.sha256:
            raise MirrorError("source-changed", str(source.path), "the file changed while it was mirrored")
    entry.output_sha256 = entry.sha256
