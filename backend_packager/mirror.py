"""``backend-packager mirror``: a signed wheel mirror that pip installs from (PEP 503/691).

One run, under an exclusive lock on ``OUTDIR/.mirror.lock``:

1. find the input wheels: every ``*.whl`` of a directory, or every wheel a PEP 503 simple
   index on disk links to (hrefs confined to the source tree, a ``#sha256=`` checked);
2. for each, decide from the state file (``OUTDIR/.mirror-state.json``) whether its last
   result still holds: same file (device, inode, size, mtime and ctime; else same sha256),
   same signing key for a migrated wheel, same packager version, output file as written.
   Only the others are worked on: migrated by :func:`backend_packager.migrate.migrate_wheel`
   into a staging directory, then renamed into ``OUTDIR``; a wheel without a Triton backend
   or plugin is copied through byte for byte; a wheel that fails is left out of the index,
   or served unchanged with ``pass_through``;
3. write the index (:mod:`backend_packager.simpleindex`) after every wheel it names is in
   place, project pages before the root page, each page atomically and only when its bytes
   change; remove outputs whose inputs are gone; write the state last. An output that
   replaces a file the index already names (same file name, new bytes: a changed input, a
   new key) waits in staging until an index without that file is written, then is renamed
   into place, then the index names it with its new sha256.

Killed at any point, every file the index names is complete and has the sha256 the index
gives (wheels are renamed into place before a page names them), and the next run redoes
whatever the state does not record.
The state file is input like any other: read bounded, every field checked, and a bad one
ignored with a warning (everything is then redone).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from . import __version__, simpleindex
from .errors import InputError, TrustError
from .fsutil import atomic_output, atomic_write

if TYPE_CHECKING:
    from .migrate import ByteProgress
    from .signing import SigningKey

STATE_FILE = ".mirror-state.json"
LOCK_FILE = ".mirror.lock"
STAGING_DIR = ".mirror-staging"
INDEX_DIR = "simple"
STATE_FORMAT = 1
#: Bounds on what is read back: the state (~1 kB a wheel) and a source index page.
MAX_STATE_BYTES = 64 << 20
MAX_PAGE_BYTES = 16 << 20
CHUNK = 1 << 20

MIGRATED, UNCHANGED, COPIED, FAILED = "migrated", "unchanged", "copied", "failed"
STATUSES = (MIGRATED, UNCHANGED, COPIED, FAILED)


class MirrorError(TrustError):
    """A mirror input or output that cannot be used: a source link, a duplicate, the lock."""

    code_prefix = "mirror"


@dataclass(frozen=True)
class Source:
    """One input wheel: where it is, its file name, its project, the sha256 its index gave."""

    path: Path
    filename: str
    project: str
    expected_sha256: str | None = None


@dataclass
class Entry:
    """What the state file records about one input wheel (keyed by its file name)."""

    filename: str
    source: str
    project: str
    stat: list[int]  # device, inode, size, mtime_ns, ctime_ns of the input
    sha256: str
    kind: str  # migrated | copied | failed
    served: bool  # OUTDIR holds OUTDIR/<filename> and the index names it
    output_sha256: str | None
    output_stat: list[int]  # size, mtime_ns of the output; [] when not served
    keyid: str | None
    backends: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)
    error: dict[str, str] | None = None


@dataclass
class Result:
    """One input wheel in this run: its status (migrated | unchanged | copied | failed)."""

    filename: str
    source: str
    status: str
    served: bool = False
    entry: Entry | None = None
    error: dict[str, str] | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        entry = self.entry
        return {
            "filename": self.filename,
            "source": self.source,
            "status": self.status,
            "kind": entry.kind if entry else FAILED,
            "served": self.served,
            "project": entry.project if entry else None,
            "sha256": entry.sha256 if entry else None,
            "output_sha256": entry.output_sha256 if entry and self.served else None,
            "backends": entry.backends if entry else [],
            "plugins": entry.plugins if entry else [],
            "error": self.error,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Run:
    """A finished run: one result per input wheel, run-level warnings, what the index holds."""

    outdir: Path
    keyid: str
    results: list[Result]
    warnings: list[str]

    def counts(self) -> dict[str, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    @property
    def failed(self) -> bool:
        return any(r.status == FAILED for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": 1,
            "outdir": str(self.outdir),
            "index": str(self.outdir / INDEX_DIR),
            "keyid": self.keyid,
            "wheels": [r.as_dict() for r in self.results],
            "summary": self.counts(),
            "warnings": self.warnings,
        }


@dataclass
class Hooks:
    """What the caller sees while the run goes: the lock wait, bytes, finished wheels."""

    waiting: Callable[[Path], None] | None = None
    start: Callable[[list[Path]], None] | None = None
    progress: ByteProgress | None = None
    done: Callable[[Path, Result], None] | None = None


# --- sources ---------------------------------------------------------------------------


def discover(roots: list[Path], outdir: Path) -> tuple[list[Source], list[Result], list[str]]:
    """The input wheels of every root, the links that cannot be used (as failures), and
    warnings. A root that is not a directory, or is ``outdir`` or inside it, is refused."""
    sources: list[Source] = []
    failures: list[Result] = []
    warnings: list[str] = []
    out = outdir.resolve()
    for root in roots:
        if not root.is_dir():
            raise InputError("missing", str(root), "not a directory of wheels or a simple index")
        real = root.resolve()
        if real == out or out in real.parents:
            raise InputError("output", str(root), "the source is the output directory or inside it")
        index = _index_dir(root)
        if index is None:
            found, bad = _wheel_dir(root)
        else:
            found, bad, skipped = _simple_tree(index, root)
            if skipped:
                warnings.append(f"{index}: {skipped} non-wheel files ignored")
        sources += found
        failures += bad
    return sources, failures, warnings


def _index_dir(root: Path) -> Path | None:
    """``root/simple`` or ``root`` itself when it holds project pages and no wheel."""
    if (root / INDEX_DIR / "index.html").is_file() or (root / INDEX_DIR).is_dir():
        return root / INDEX_DIR
    if not any(root.glob("*.whl")) and any(root.glob("*/index.html")):
        return root
    return None


def _wheel_dir(root: Path) -> tuple[list[Source], list[Result]]:
    sources: list[Source] = []
    failures: list[Result] = []
    for path in sorted(root.glob("*.whl")):
        if path.is_file():
            _add_source(path, path.name, None, sources, failures)
    return sources, failures


def _add_source(path: Path, filename: str, sha256: str | None, sources: list[Source], failures: list[Result]) -> None:
    """A wheel whose file name says its project (PEP 427); any other name is this file's failure."""
    try:
        name = parse_wheel_filename(filename)[0]
    except InvalidWheelFilename as exc:
        failures.append(_failure(filename, str(path), MirrorError("filename", str(path), str(exc))))
        return
    sources.append(Source(path, filename, canonicalize_name(name), sha256))


def _simple_tree(index: Path, root: Path) -> tuple[list[Source], list[Result], int]:
    """Every wheel the project pages under ``index`` link to; a link must be a relative URL
    to a regular file inside ``root`` (an index is data: it names no path of its own)."""
    confine = root.resolve()
    sources: list[Source] = []
    failures: list[Result] = []
    skipped = 0
    for page in sorted(index.glob("*/index.html")):
        try:
            found = simpleindex.links(_read_bounded(page, MAX_PAGE_BYTES).decode("utf-8", "replace"))
        except MirrorError as exc:
            failures.append(_failure(f"{page.parent.name}/{page.name}", str(page), exc))
            continue
        for link in found:
            name = unquote(urlsplit(link.href).path).rsplit("/", 1)[-1]
            if not name.endswith(".whl"):
                skipped += 1
                continue
            try:
                path = _confined(page.parent, link.href, confine)
            except MirrorError as exc:
                failures.append(_failure(name, f"{page}: {link.href}", exc))
                continue
            _add_source(path, name, link.sha256, sources, failures)
    return sources, failures, skipped


def _confined(base: Path, href: str, root: Path) -> Path:
    parts = urlsplit(href)
    where = f"{base / 'index.html'}: {href}"
    if parts.scheme or parts.netloc:
        raise MirrorError("source", where, "a remote URL: only files on disk are mirrored")
    target = (base / unquote(parts.path)).resolve()
    if root not in target.parents:
        raise MirrorError("source", where, f"the link leaves the source tree {root}")
    if target.name != unquote(parts.path).rsplit("/", 1)[-1]:
        raise MirrorError("source", where, f"the link names a symlink to {target.name}: mirror files by their own name")
    if not target.is_file():
        raise MirrorError("source", where, "the link names no regular file")
    return target


def _read_bounded(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit``; symlinks and FIFOs refused, never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise MirrorError("read", str(path), f"cannot open: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not _is_regular(info.st_mode):
            raise MirrorError("read", str(path), "not a regular file")
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise MirrorError("read", str(path), f"larger than {limit} bytes")
    return data


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


# --- state -----------------------------------------------------------------------------


@dataclass
class State:
    tool: str
    keyid: str | None
    entries: dict[str, Entry]


def load_state(outdir: Path) -> tuple[State | None, list[str]]:
    """The state of the last run, or None with a warning when it is missing or unusable."""
    path = outdir / STATE_FILE
    if not path.exists() and not path.is_symlink():
        return None, []
    try:
        doc = json.loads(_read_bounded(path, MAX_STATE_BYTES))
        return _decode_state(doc, str(path)), []
    except (MirrorError, ValueError, RecursionError, UnicodeDecodeError) as exc:
        return None, [f"{path}: state ignored and rebuilt ({exc}) (mirror.state)"]


def _decode_state(doc: Any, where: str) -> State:
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        raise MirrorError("state", where, f"not a format {STATE_FORMAT} mirror state")
    tool, keyid, entries = doc.get("tool"), doc.get("keyid"), doc.get("entries")
    if not isinstance(tool, str) or not _opt_str(keyid) or not isinstance(entries, dict):
        raise MirrorError("state", where, "tool, keyid or entries of the wrong type")
    decoded = {name: _decode_entry(name, value, where) for name, value in entries.items()}
    return State(tool, keyid, decoded)


_ENTRY_TYPES: dict[str, Callable[[Any], bool]] = {
    "filename": lambda v: isinstance(v, str),
    "source": lambda v: isinstance(v, str),
    "project": lambda v: isinstance(v, str),
    "stat": lambda v: _ints(v, 5),
    "sha256": lambda v: isinstance(v, str) and len(v) == 64,
    "kind": lambda v: v in (MIGRATED, COPIED, FAILED),
    "served": lambda v: isinstance(v, bool),
    "output_sha256": lambda v: v is None or (isinstance(v, str) and len(v) == 64),
    "output_stat": lambda v: v == [] or _ints(v, 2),
    "keyid": lambda v: _opt_str(v),
    "backends": lambda v: _strs(v),
    "plugins": lambda v: _strs(v),
    "error": lambda v: v is None or (isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
                                     and set(v) == {"code", "path", "message"}),
}


def _decode_entry(name: str, value: Any, where: str) -> Entry:
    if not isinstance(value, dict) or set(value) != set(_ENTRY_TYPES):
        raise MirrorError("state", f"{where}: {name[:100]}", "an entry with missing or unknown fields")
    for key, check in _ENTRY_TYPES.items():
        if not check(value[key]):
            raise MirrorError("state", f"{where}: {name[:100]}", f"field {key!r} of the wrong type or form")
    entry = Entry(**value)
    if entry.filename != name or not _plain_wheel_name(name) or (entry.served and not entry.output_stat):
        raise MirrorError("state", f"{where}: {name[:100]}", "not a plain wheel file name, or inconsistent")
    return entry


def _plain_wheel_name(name: str) -> bool:
    """A name that can only mean a file directly in OUTDIR (the state names files to delete)."""
    return (0 < len(name) <= 255 and name.endswith(".whl") and not name.startswith(".")
            and not any(c in name for c in "/\\\0"))


def _ints(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(type(x) is int and x >= 0 for x in value)


def _strs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _opt_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _encode_state(state: State) -> bytes:
    doc = {"format": STATE_FORMAT, "tool": state.tool, "keyid": state.keyid,
           "entries": {name: asdict(e) for name, e in sorted(state.entries.items())}}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


# --- the lock --------------------------------------------------------------------------


@contextlib.contextmanager
def locked(outdir: Path, wait: bool, waiting: Callable[[Path], None] | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``OUTDIR/.mirror.lock`` (released by the kernel when
    the process dies, so a killed run never leaves the mirror locked)."""
    path = outdir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise MirrorError("lock", str(path), f"cannot open the lock file: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise MirrorError("lock", str(path), f"cannot lock: {exc.strerror}") from None
            if not wait:
                raise MirrorError("busy", str(path), "another mirror run holds this output directory") from None
            if waiting:
                waiting(path)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# --- the run ---------------------------------------------------------------------------


@dataclass
class _Context:
    outdir: Path
    staging: Path
    key: SigningKey
    tool: str
    pass_through: bool
    hooks: Hooks
    previous: State | None
    #: Outputs that replace a file the current index names, moved only once it names them no more.
    deferred: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def mirror(
    roots: list[Path],
    outdir: Path,
    key: SigningKey,
    *,
    jobs: int = 1,
    pass_through: bool = False,
    wait: bool = True,
    hooks: Hooks | None = None,
) -> Run:
    """Bring ``outdir`` up to date with the wheels of ``roots``; see the module docstring."""
    hooks = hooks or Hooks()
    outdir.mkdir(parents=True, exist_ok=True)
    with locked(outdir, wait, hooks.waiting):
        sources, failures, warnings = discover(roots, outdir)
        previous, state_warnings = load_state(outdir)
        staging = _fresh_staging(outdir)
        ctx = _Context(outdir, staging, key, __version__, pass_through, hooks, previous)
        sources, duplicates = _unique(sources)
        if hooks.start:
            hooks.start([s.path for s in sources])
        results = _work(sources, ctx, jobs) + duplicates + failures
        entries = {r.entry.filename: r.entry for r in results if r.entry is not None}
        if ctx.deferred:
            _publish(outdir, {name: e for name, e in entries.items() if name not in ctx.deferred})
            for name in ctx.deferred:
                os.replace(staging / name, outdir / name)
        _publish(outdir, entries)
        _remove_orphans(outdir, previous, entries)
        state = State(__version__, key.public.keyid, entries)
        _write_if_changed(outdir / STATE_FILE, _encode_state(state))
        shutil.rmtree(staging, ignore_errors=True)
    results.sort(key=lambda r: (r.filename, r.source))
    return Run(outdir, key.public.keyid, results, state_warnings + warnings)


def _fresh_staging(outdir: Path) -> Path:
    """An empty staging directory; what a killed run left there, or in the index, goes."""
    staging = outdir / STAGING_DIR
    if staging.is_symlink() or staging.is_file():
        staging.unlink()
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for leftover in [*outdir.glob(".*.tmp"), *(outdir / INDEX_DIR).glob("**/.*.tmp")]:
        with contextlib.suppress(OSError):
            leftover.unlink()
    return staging


def _unique(sources: list[Source]) -> tuple[list[Source], list[Result]]:
    """One source per file name: the first file wins and another file of that name fails.
    Links to one file are one source; the sha256 they name must agree, whatever their order."""
    seen: dict[str, Source] = {}
    failures: dict[str, Result] = {}
    for source in sources:
        first = seen.setdefault(source.filename, source)
        if first is source:
            continue
        if first.path.resolve() != source.path.resolve():
            error = MirrorError("duplicate", str(source.path), f"another source already provides {source.filename} "
                                f"({first.path}); this one is ignored")
            failures[f"{source.path}"] = _failure(source.filename, str(source.path), error)
        elif first.expected_sha256 and source.expected_sha256 and first.expected_sha256 != source.expected_sha256:
            error = MirrorError("source-hash", str(source.path), "the index pages name different sha256 for this file")
            failures[source.filename] = _failure(source.filename, str(source.path), error)
        elif source.expected_sha256:
            seen[source.filename] = source
    kept = [s for name, s in seen.items() if name not in failures]
    return kept, list(failures.values())


def _failure(filename: str, source: str, error: TrustError) -> Result:
    return Result(filename, source, FAILED, error=error.as_dict())


#: A step that completes one wheel's result (run later for a wheel whose hashes run behind).
Finish = Callable[[], Result]
#: Starts hashing a file: at once (in the pool) or on the background hasher (large wheels).
Hasher = Callable[[Path], "Future[str]"]


def _work(sources: list[Source], ctx: _Context, jobs: int) -> list[Result]:
    """Reuse what still holds; work on the rest. A wheel larger than all the others left
    together is migrated first, alone, with every thread (its members in parallel); its input
    and output are hashed by a background thread meanwhile and while the rest share the pool,
    one thread each, largest first (their work holds the GIL, hashing does not)."""
    sizes = {s.filename: _size(s.path) for s in sources}
    order = sorted(sources, key=lambda s: -sizes[s.filename])
    results: dict[str, Result] = {}
    remaining = sum(sizes.values())
    with ThreadPoolExecutor(max_workers=1) as background:
        later: list[tuple[Source, Finish]] = []
        while order and jobs > 1 and sizes[order[0].filename] > remaining - sizes[order[0].filename]:
            first = order.pop(0)
            remaining -= sizes[first.filename]
            later.append((first, _one(first, ctx, jobs, lambda path: background.submit(_sha256_of, path))))
        if jobs <= 1 or len(order) <= 1:
            results.update({s.filename: _one(s, ctx, jobs, _hash_now)() for s in order})
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                done = pool.map(lambda s: _one(s, ctx, 1, _hash_now)(), order)
                results.update({s.filename: r for s, r in zip(order, done, strict=True)})
        results.update({s.filename: finish() for s, finish in later})
    return [results[s.filename] for s in sources]


def _hash_now(path: Path) -> Future[str]:
    future: Future[str] = Future()
    try:
        future.set_result(_sha256_of(path))
    except OSError as exc:
        future.set_exception(exc)
    return future


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _one(source: Source, ctx: _Context, jobs: int, hasher: Hasher) -> Finish:
    """Start one input wheel; the step returned completes it. Every error, in either part,
    becomes this wheel's failure."""
    started = time.perf_counter()
    try:
        finish = _process(source, ctx, jobs, hasher)
    except Exception as exc:  # noqa: BLE001  (one wheel's problem must not stop the others)
        failure = _failure_of(source, exc)
        finish = lambda: failure  # noqa: E731

    def end() -> Result:
        try:
            result = finish()
        except Exception as exc:  # noqa: BLE001
            result = _failure_of(source, exc)
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
        error = MirrorError("internal", str(source.path), f"{type(exc).__name__}: {exc}")
    return _failure(source.filename, str(source.path), error)


def _process(source: Source, ctx: _Context, jobs: int, hasher: Hasher) -> Finish:
    info = os.stat(source.path)
    fingerprint = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    old = ctx.previous.entries.get(source.filename) if ctx.previous else None
    if old is not None and old.stat == fingerprint and _reusable(old, source, ctx, old.sha256):
        return _ready(_unchanged(old, source))
    if old is None:
        return _migrate(source, ctx, jobs, fingerprint, hasher(source.path), hasher)
    # a file seen before whose stat changed: the same bytes are still unchanged, so hash first
    sha256 = _checked(source, _sha256_of(source.path))
    if _reusable(old, source, ctx, sha256):
        old.stat, old.source = fingerprint, str(source.path)
        return _ready(_unchanged(old, source))
    return _migrate(source, ctx, jobs, fingerprint, _known(sha256), hasher)


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


def _reusable(old: Entry, source: Source, ctx: _Context, sha256: str) -> bool:
    """The last result still holds: same bytes, same tool, same key for a signed output,
    the same choice to serve a failure, and the output still as written."""
    assert ctx.previous is not None
    if old.sha256 != sha256 or ctx.previous.tool != ctx.tool:
        return False
    if source.expected_sha256 and source.expected_sha256 != old.sha256:
        return False
    if old.kind == MIGRATED and old.keyid != ctx.key.public.keyid:
        return False
    if old.kind == FAILED and old.served != ctx.pass_through:
        return False
    return not old.served or _output_stat(ctx.outdir / old.filename) == old.output_stat


def _unchanged(old: Entry, source: Source) -> Result:
    status = FAILED if old.kind == FAILED else UNCHANGED
    return Result(old.filename, str(source.path), status, old.served, old, old.error)


def _output_stat(path: Path) -> list[int]:
    try:
        info = os.lstat(path)
    except OSError:
        return []
    return [info.st_size, info.st_mtime_ns] if _is_regular(info.st_mode) else []


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _migrate(source: Source, ctx: _Context, jobs: int, fingerprint: list[int], input_hash: Future[str],
             hasher: Hasher) -> Finish:
    """Migrate into staging; keep the output when the wheel has a backend or a plugin, else
    copy the input through; a failure is served as it is only with ``pass_through``. Nothing
    is placed before the input's sha256 is known and checked."""
    from .migrate import migrate_wheel  # ~0.3 s of imports that an unchanged mirror never needs

    staged = ctx.staging / source.filename
    outcome = migrate_wheel(source.path, ctx.staging, ctx.key, jobs=jobs, progress=ctx.hooks.progress)
    kind = FAILED if outcome.error is not None else MIGRATED if outcome.backends or outcome.plugins else COPIED
    output_hash = hasher(staged) if kind == MIGRATED else None

    def finish() -> Result:
        sha256 = _checked(source, input_hash.result())
        entry = Entry(source.filename, str(source.path), source.project, fingerprint, sha256, kind,
                      kind != FAILED or ctx.pass_through, None, [], ctx.key.public.keyid, [], [])
        if kind == MIGRATED:
            entry.backends, entry.plugins = outcome.backends, outcome.plugins
            entry.output_sha256 = output_hash.result() if output_hash else None
        elif entry.served:
            _copy_through(source, staged, entry)
        entry.error = outcome.error.as_dict() if outcome.error else None
        if entry.served:
            entry.output_stat = _output_stat(staged)  # a rename keeps size and mtime
            _place(entry.filename, ctx)
        return Result(source.filename, str(source.path), kind, entry.served, entry, entry.error,
                      warnings=outcome.warnings)

    return finish


def _place(filename: str, ctx: _Context) -> None:
    """Move a staged output into OUTDIR now when no file of that name is there; else later,
    between an index without it and the index with its new sha256 (pip never meets a file
    whose hash is not the one its index page names)."""
    if os.path.lexists(ctx.outdir / filename):  # served by the last run, or by one whose state was lost
        with ctx.lock:
            ctx.deferred.append(filename)
    else:
        os.replace(ctx.staging / filename, ctx.outdir / filename)


def _copy_through(source: Source, target: Path, entry: Entry) -> None:
    """The input byte for byte; its sha256 taken from the bytes copied, which must be the
    bytes hashed before (an input changing under the run is this wheel's failure)."""
    digest = hashlib.sha256()
    with source.path.open("rb") as stream, atomic_output(target) as out:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
        if digest.hexdigest() != entry.sha256:
            raise MirrorError("source-changed", str(source.path), "the file changed while it was mirrored")
    entry.output_sha256 = entry.sha256


# --- publishing ------------------------------------------------------------------------


def _publish(outdir: Path, entries: dict[str, Entry]) -> None:
    """Write the index over the served wheels: project pages first, the root page last,
    then drop the pages of projects no longer served."""
    files = [simpleindex.IndexFile(e.project, e.filename, e.output_sha256 or "")
             for e in entries.values() if e.served]
    pages = simpleindex.pages(files)
    index = outdir / INDEX_DIR
    for rel in sorted(pages, key=lambda p: (p.count("/") == 0, p)):
        _write_if_changed(index / rel, pages[rel])
    projects = {rel.split("/")[0] for rel in pages if "/" in rel}
    for stale in index.iterdir():
        if stale.is_dir() and not stale.is_symlink() and stale.name not in projects:
            for leaf in ("index.html", "index.json"):
                with contextlib.suppress(FileNotFoundError):
                    (stale / leaf).unlink()
            with contextlib.suppress(OSError):
                stale.rmdir()


def _write_if_changed(path: Path, data: bytes) -> None:
    """Atomically, and only when the bytes differ: an unchanged mirror keeps its mtimes."""
    try:
        if _read_bounded(path, len(data)) == data:
            return
    except MirrorError:
        pass
    atomic_write(path, data)


def _remove_orphans(outdir: Path, previous: State | None, entries: dict[str, Entry]) -> None:
    """Outputs the last run served and this one does not (their input is gone or failed)."""
    if previous is None:
        return
    for name, old in previous.entries.items():
        new = entries.get(name)
        if old.served and (new is None or not new.served):
            with contextlib.suppress(FileNotFoundError):
                (outdir / name).unlink()

