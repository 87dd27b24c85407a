"""``backend-packager mirror``: a signed wheel mirror that pip installs from (PEP 503/691).

One run, under an exclusive ``flock`` on the output directory's own descriptor (no lock
file that a cleanup could delete):

1. find the input wheels: every ``*.whl`` of a directory, or every wheel a PEP 503 simple
   index on disk links to (hrefs resolved as URLs, confined to the source tree, a
   ``#sha256=`` checked). Each input is opened once, inside its source tree, not through a
   symlink, and checked by ``fstat`` to be a regular file; every read is of that
   descriptor. A symlink (``input.symlink``), a non-file, or a link that cannot be used
   (a NUL byte, bad percent-encoding, an overlong or escaping href) is that input's
   failure, never served, with ``pass_through`` too;
2. for each, decide from the state file (``OUTDIR/.mirror-state.json``) whether its last
   result still holds: same input (device, inode, size, mtime and ctime; else same sha256),
   same signing key for a migrated wheel, same packager version, and the output still the
   file written (device, inode, size, mtime and ctime: a wheel rewritten in place with its
   mtime set back is redone). Only the others are worked on: migrated by
   :func:`backend_packager.commands.migrate.migrate_wheel` into a staging directory; a wheel without
   a Triton backend or plugin is copied through byte for byte; a wheel that fails is left
   out of the index, or served unchanged with ``pass_through``;
3. serve the new index (:mod:`backend_packager.commands.mirrorindex`): a complete tree of pages and
   hard links of every wheel they name, swapped in by one rename; then rename the staged
   outputs into ``OUTDIR``, remove outputs whose inputs are gone, write the state last.

Killed at any point, ``OUTDIR/simple`` is the previous index or the new one, complete:
every file it names is there with the sha256 it gives. The next run redoes whatever the
state does not record. The state file is input like any other: read bounded, every field
checked, and a bad one ignored with a warning (everything is then redone).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import posixpath
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

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from triton_backend_runtime.base import canonicalize_name, describe, regularfile

from .. import __version__
from ..base import InputError, TrustError, atomic_output, atomic_write, sha256_pread
from ..formats import simpleindex
from . import mirrorindex

if TYPE_CHECKING:
    from ..manifest import Policy, SigningKey
    from .migrate import ByteProgress

STATE_FILE = ".mirror-state.json"
STAGING_DIR = ".mirror-staging"
INDEX_DIR = "simple"
#: 2: ``output_stat`` is the served file's identity (device, inode, size, mtime, ctime).
STATE_FORMAT = 2
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
    """One input wheel: where it is (a path inside ``root``, as its URL names it), its file
    name, its project, the sha256 its index gave, and the source tree it must stay in."""

    path: Path
    filename: str
    project: str
    expected_sha256: str | None = None
    root: Path | None = None  # resolved; None: the path's own directory


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
    output_stat: list[int]  # device, inode, size, mtime_ns, ctime_ns of the output; [] when not served
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
    #: Each stage of the run as it completes: "worked" (every output staged), "generation"
    #: (the new index tree written, not yet served), "swapped" (it is served), "placed" (the
    #: outputs renamed into OUTDIR), "state" (the state written).
    step: Callable[[str], None] | None = None


# --- sources ---------------------------------------------------------------------------

#: A link longer than this is no link to a wheel of the tree (PATH_MAX is 4096).
MAX_HREF = 4096


def discover(roots: list[Path], outdir: Path) -> tuple[list[Source], list[Result], list[str]]:
    """The input wheels of every root, the inputs and links that cannot be used (as
    failures), and warnings. A root that is not a directory, or is ``outdir`` or inside it,
    is refused."""
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
    """Every ``*.whl`` entry of ``root``: a regular file is a source; a symlink (to a private
    key, say) or anything else is that entry's failure, never followed, never served."""
    sources: list[Source] = []
    failures: list[Result] = []
    confine = root.resolve()
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.name.endswith(".whl"):
            continue
        path = root / entry.name
        if entry.is_symlink():
            failures.append(_failure(entry.name, str(path), _symlink_error(str(path))))
        elif not entry.is_file(follow_symlinks=False):
            failures.append(_failure(entry.name, str(path), InputError(
                "not-a-file", str(path), "not a regular file (a directory, FIFO or device): not mirrored")))
        else:
            _add_source(path, entry.name, None, confine, sources, failures)
    return sources, failures


def _symlink_error(where: str) -> InputError:
    return InputError("symlink", where, "a symbolic link: only regular files of the source tree are mirrored, "
                      "never what a link points to (with --pass-through-failures too)")


def _add_source(path: Path, filename: str, sha256: str | None, root: Path, sources: list[Source],
                failures: list[Result]) -> None:
    """A wheel whose file name says its project (PEP 427), a plain name of a file in OUTDIR;
    any other name is this file's failure."""
    where = str(path)
    if not _plain_wheel_name(filename):
        failures.append(_failure(filename[:255], where, MirrorError("filename", where, "not a plain wheel file "
                                                                    "name (a slash, a NUL, a leading dot)")))
        return
    try:
        name = parse_wheel_filename(filename)[0]
    except InvalidWheelFilename as exc:
        failures.append(_failure(filename, where, MirrorError("filename", where, str(exc))))
        return
    sources.append(Source(path, filename, canonicalize_name(name), sha256, root))


def _simple_tree(index: Path, root: Path) -> tuple[list[Source], list[Result], int]:
    """Every wheel the project pages under ``index`` link to. A link is resolved as a URL is
    (relative to the page's own URL, ``..`` lexically), must stay inside ``root`` and name a
    regular file there, reached without a symlink as its last part. Any link that cannot be
    used (a remote URL, a NUL byte, bad percent-encoding, an overlong href, a symlink) is
    that link's failure; the others are mirrored (an index is data: it names no path of its own)."""
    confine = root.resolve()
    sources: list[Source] = []
    failures: list[Result] = []
    skipped = 0
    for page in sorted(index.glob("*/index.html")):
        try:
            found = simpleindex.links(_read_confined(page, confine, MAX_PAGE_BYTES).decode("utf-8", "replace"))
        except (TrustError, simpleindex.PageError) as exc:
            error = exc if isinstance(exc, TrustError) else MirrorError("page", str(page), str(exc))
            failures.append(_failure(f"{page.parent.name}/{page.name}", str(page), error))
            continue
        base = os.path.relpath(page.parent, root)
        for link in found:
            try:
                name, path = _link_target(page, base, link.href, root)
            except MirrorError as exc:
                failures.append(_failure(_link_name(link.href), f"{page}: {link.href[:200]}", exc))
                continue
            if name is None:
                skipped += 1
                continue
            before = len(failures)
            _add_source(path, name, link.sha256, confine, sources, failures)
            if len(failures) == before:
                try:
                    os.close(_open_confined(path, confine)[0])
                except TrustError as exc:
                    sources.pop()
                    failures.append(_failure(name, f"{page}: {link.href[:200]}", exc))
    return sources, failures, skipped


def _link_name(href: str) -> str:
    """The file name a link ends with, printable and bounded, for its failure's report."""
    name = href.split("#", 1)[0].rsplit("/", 1)[-1]
    return "".join(c if c.isprintable() else "?" for c in name)[:200] or "?"


def _link_target(page: Path, base: str, href: str, root: Path) -> tuple[str | None, Path]:
    """(file name, path inside ``root``) of a relative link; (None, ...) for a link to no wheel."""
    where = f"{page}: {href[:200]}"
    if len(href) > MAX_HREF:
        raise MirrorError("source", where, f"a link of {len(href)} characters (more than {MAX_HREF})")
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        raise MirrorError("source", where, "a remote URL: only files on disk are mirrored")
    try:
        rel = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        raise MirrorError("source", where, "bad percent-encoding (not UTF-8)") from None
    name = rel.rsplit("/", 1)[-1]
    if not name.endswith(".whl"):
        return None, root
    if any(not c.isprintable() for c in rel) or "\\" in rel:
        raise MirrorError("source", where, "a NUL, control character or backslash in the link")
    joined = posixpath.normpath(posixpath.join(base, rel))
    if rel.startswith("/") or joined == ".." or joined.startswith("../"):
        raise MirrorError("source", where, f"the link leaves the source tree {root}")
    return name, root / joined


def _open_confined(path: Path, root: Path) -> tuple[int, os.stat_result]:
    """A descriptor on ``path``, a regular file whose directory is ``root`` or inside it (as
    opened: the kernel's name for the open directory, not a check before it), its last part
    opened without following a symlink and without blocking."""
    where = str(path)
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise MirrorError("source", where, f"cannot open its directory: {exc.strerror}") from None
    try:
        if not _inside(_fd_path(parent, path.parent), root):
            raise MirrorError("source", where, f"the file is outside the source tree {root}")
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _symlink_error(where) from None
            raise MirrorError("source", where, f"cannot open: {exc.strerror}") from None
    finally:
        os.close(parent)
    info = os.fstat(fd)
    if not _is_regular(info.st_mode):
        os.close(fd)
        raise InputError("not-a-file", where, "not a regular file (a directory, FIFO or device): not mirrored")
    os.set_blocking(fd, True)
    return fd, info


def _fd_path(fd: int, fallback: Path) -> str:
    """Where the open directory ``fd`` is (the kernel's ``/proc/self/fd`` link); without
    /proc, the resolved ``fallback`` when it is that same directory."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(fallback)
        if os.path.samestat(os.stat(real), os.fstat(fd)):
            return real
        raise MirrorError("source", str(fallback), "changed while it was opened") from None


def _inside(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root).rstrip("/") + "/")


def _read_confined(path: Path, root: Path, limit: int) -> bytes:
    fd, _ = _open_confined(path, root)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise MirrorError("read", str(path), f"larger than {limit} bytes")
    return data


def _read_bounded(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit``; symlinks and FIFOs refused, never waited on."""
    try:
        return regularfile.read_regular(path, limit, follow_symlinks=False)
    except regularfile.RegularFileError as exc:
        raise MirrorError("read", str(path), exc.detail) from None


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
    "output_stat": lambda v: v == [] or _ints(v, 5),
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
    """Hold an exclusive ``flock`` on the output directory itself (its own descriptor):
    no file a cleanup could delete (a lock file removed while held let a second run in),
    and released by the kernel when the process dies, so a killed run never leaves the
    mirror locked."""
    where = str(outdir)
    try:
        fd = os.open(outdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise MirrorError("lock", where, f"cannot open the output directory: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise MirrorError("lock", where, f"cannot lock: {exc.strerror}") from None
            if not wait:
                raise MirrorError("busy", where, "another mirror run holds this output directory") from None
            if waiting:
                waiting(outdir)
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
    capture: Policy = "off"
    #: Outputs written into staging by this run: linked into the new index from there, then
    #: renamed into OUTDIR once that index is served.
    staged: list[str] = field(default_factory=list)
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
    capture: Policy = "off",
) -> Run:
    """Bring ``outdir`` up to date with the wheels of ``roots``; see the module docstring.
    ``capture``: whether and where plugins' code runs (:data:`.plugininfo.Policy`); the
    state records it with the tool, so a change redoes every wheel."""
    hooks = hooks or Hooks()
    outdir.mkdir(parents=True, exist_ok=True)
    with locked(outdir, wait, hooks.waiting):
        sources, failures, warnings = discover(roots, outdir)
        previous, state_warnings = load_state(outdir)
        staging = _fresh_staging(outdir)
        mirrorindex.prune(outdir)  # what a killed run left
        ctx = _Context(outdir, staging, key, _tool(capture), pass_through, hooks, previous, capture)
        sources, duplicates = _unique(sources)
        if hooks.start:
            hooks.start([s.path for s in sources])
        results = _work(sources, ctx, jobs) + duplicates + failures
        entries = {r.entry.filename: r.entry for r in results if r.entry is not None}
        _step(hooks, "worked")
        served = {name: (staging if name in ctx.staged else outdir) / name for name, e in entries.items() if e.served}
        mirrorindex.publish(outdir, _index_files(entries), served, lambda: _step(hooks, "generation"))
        _step(hooks, "swapped")
        for name in ctx.staged:
            os.replace(staging / name, outdir / name)
        _step(hooks, "placed")
        _remove_orphans(outdir, previous, entries)
        mirrorindex.prune(outdir)  # before the outputs' identities: unlinking a hard link sets its ctime
        _record_outputs(outdir, entries, previous, ctx.staged)
        state = State(ctx.tool, key.public.keyid, entries)
        _write_if_changed(outdir / STATE_FILE, _encode_state(state))
        _step(hooks, "state")
        shutil.rmtree(staging, ignore_errors=True)
    results.sort(key=lambda r: (r.filename, r.source))
    return Run(outdir, key.public.keyid, results, state_warnings + warnings)


def _step(hooks: Hooks, name: str) -> None:
    if hooks.step:
        hooks.step(name)


def _fresh_staging(outdir: Path) -> Path:
    """An empty staging directory; what a killed run left there, or beside the outputs, goes."""
    staging = outdir / STAGING_DIR
    if staging.is_symlink() or staging.is_file():
        staging.unlink()
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for leftover in outdir.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()
    return staging


def _unique(sources: list[Source]) -> tuple[list[Source], list[Result]]:
    """One source per file name: the first file wins and another file of that name fails.
    Links to one file (one inode) are one source; the sha256 they name must agree, whatever their order."""
    seen: dict[str, Source] = {}
    failures: dict[str, Result] = {}
    for source in sources:
        first = seen.setdefault(source.filename, source)
        if first is source:
            continue
        if not _hard_links(first.path, source.path):
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


def _hard_links(a: Path, b: Path) -> bool:
    """One file under two names (a mirror's pages link the hard links beside them, an old
    page the outputs above): same device and inode of the names themselves (``lstat``: a
    symlink is not the file it names, unlike the runtime's ``verdictcache.same_file``)."""
    try:
        return os.path.samestat(os.lstat(a), os.lstat(b))
    except OSError:
        return a.resolve() == b.resolve()


def _failure(filename: str, source: str, error: TrustError) -> Result:
    return Result(filename, source, FAILED, error=error.as_dict())


#: A step that completes one wheel's result (run later for a wheel whose hashes run behind).
Finish = Callable[[], Result]
#: Starts hashing an open file: at once (in the pool) or on the background hasher (large wheels).
Hasher = Callable[[int], "Future[str]"]


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
            later.append((first, _one(first, ctx, jobs, lambda fd: background.submit(sha256_pread, fd))))
        if jobs <= 1 or len(order) <= 1:
            results.update({s.filename: _one(s, ctx, jobs, _hash_now)() for s in order})
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
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


def _one(source: Source, ctx: _Context, jobs: int, hasher: Hasher) -> Finish:
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
    return _failure(source.filename, str(source.path), error)


def _process(source: Source, ctx: _Context, jobs: int, hasher: Hasher, opened: list[int]) -> Finish:
    """The input is opened once, confined to its source tree, as a regular file and not
    through a symlink; every later read (hash, migration, copy) is of that descriptor."""
    fd, info = _open_confined(source.path, source.root or source.path.parent.resolve())
    opened.append(fd)
    fingerprint = _identity(info)
    old = ctx.previous.entries.get(source.filename) if ctx.previous else None
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
    the same choice to serve a failure, and the output still the file written (device,
    inode, size, mtime and ctime: a file rewritten in place and its mtime set back has a
    new ctime, which no unprivileged process can set back)."""
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


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _output_stat(path: Path) -> list[int]:
    """A served output's identity; [] when it is missing or no regular file."""
    try:
        info = os.lstat(path)
    except OSError:
        return []
    return _identity(info) if _is_regular(info.st_mode) else []


def _tool(capture: Policy) -> str:
    """What made the outputs: the packager's version, and how plugins were asked (a manifest
    records ``not-run`` or what the plugin reported, so another choice is another output)."""
    return __version__ if capture == "off" else f"{__version__}; capture-plugins={capture}"


def _migrate(source: Source, fd: int, ctx: _Context, jobs: int, fingerprint: list[int], input_hash: Future[str],
             hasher: Hasher, opened: list[int]) -> Finish:
    """Migrate into staging; keep the output when the wheel has a backend or a plugin, else
    copy the input through; a failure is served as it is only with ``pass_through``. Nothing
    is staged for the index before the input's sha256 is known and checked."""
    from .migrate import Options, migrate_wheel  # ~0.3 s of imports that an unchanged mirror never needs

    staged = ctx.staging / source.filename
    outcome = migrate_wheel(source.path, ctx.staging, ctx.key, jobs=jobs, progress=ctx.hooks.progress,
                            options=Options(source_fd=fd, capture=ctx.capture))
    kind = FAILED if outcome.error is not None else MIGRATED if outcome.backends or outcome.plugins else COPIED
    output_hash = None
    if kind == MIGRATED:
        out_fd = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        opened.append(out_fd)
        output_hash = hasher(out_fd)

    def finish() -> Result:
        sha256 = _checked(source, input_hash.result())
        entry = Entry(source.filename, str(source.path), source.project, fingerprint, sha256, kind,
                      kind != FAILED or ctx.pass_through, None, [], ctx.key.public.keyid, [], [])
        if kind == MIGRATED:
            entry.backends, entry.plugins = outcome.backends, outcome.plugins
            entry.output_sha256 = output_hash.result() if output_hash else None
        elif entry.served:
            _copy_through(source, fd, staged, entry)
        entry.error = outcome.error.as_dict() if outcome.error else None
        if entry.served:
            with ctx.lock:
                ctx.staged.append(entry.filename)
        return Result(source.filename, str(source.path), kind, entry.served, entry, entry.error,
                      warnings=outcome.warnings)

    return finish


def _copy_through(source: Source, fd: int, target: Path, entry: Entry) -> None:
    """The input byte for byte, from its open descriptor (a regular file of the source tree,
    never what a symlink names); its sha256 taken from the bytes copied, which must be the
    bytes hashed before (an input changing under the run is this wheel's failure)."""
    digest = hashlib.sha256()
    offset = 0
    with atomic_output(target) as out:
        while chunk := os.pread(fd, CHUNK, offset):
            digest.update(chunk)
            out.write(chunk)
            offset += len(chunk)
        if digest.hexdigest() != entry.sha256:
            raise MirrorError("source-changed", str(source.path), "the file changed while it was mirrored")
    entry.output_sha256 = entry.sha256


# --- publishing ------------------------------------------------------------------------


def _index_files(entries: dict[str, Entry]) -> list[simpleindex.IndexFile]:
    return [simpleindex.IndexFile(e.project, e.filename, e.output_sha256 or "") for e in entries.values() if e.served]


def _record_outputs(outdir: Path, entries: dict[str, Entry], previous: State | None, staged: list[str]) -> None:
    """Each served output's identity, taken now that the index links it and the generations
    no longer served are gone (a link made or removed sets its ctime). An output reused from
    the last run keeps its place only when the file is still the one checked at the start
    (device, inode, size, mtime); else the next run redoes it."""
    fresh = set(staged)
    for name, entry in entries.items():
        if not entry.served:
            entry.output_stat = []
            continue
        now = _output_stat(outdir / name)
        if name in fresh or (now and now[:4] == entry.output_stat[:4]):
            entry.output_stat = now
        else:
            entry.output_stat = [0, 0, 0, 0, 0]  # no file has inode 0: never reused


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
