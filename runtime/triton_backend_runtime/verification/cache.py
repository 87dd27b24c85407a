"""The verdict cache: verdicts and file hashes, so a warm ``import triton`` only stats.

One JSON file per interpreter (``verify-<cache_tag>.json``) in ``TRITON_BACKEND_CACHE_DIR``,
else ``$XDG_CACHE_HOME/triton-backend-runtime``, else ``~/.cache/triton-backend-runtime``.

Threat model. Whoever can write the install (site-packages) is trusted: they could change
any file Python imports. Wheel sources, mirrors and other users of the machine are not.
The cache holds conclusions about the install, so it is exactly as trusted as its writer:
it is used only when the file and its directory belong to this user and no other user can
write them; otherwise it is refused (and ``doctor`` says so), and verification runs cold.

Correct by construction: a verdict is reused only when its *context* is unchanged (the
bytes of every trust file, the trusted identities and the pinned Sigstore root among them,
the installed Triton and its ``libtriton.so`` identity, this interpreter, and, while an
identity is trusted, the sigstore-python a keyless signature was checked with) and every
file and directory it depends on still has the identity (device, inode, size, mtime_ns,
ctime_ns) it had. Those are every artifact the manifest lists (found or not, passing or
failing: a repair is noticed), the manifest, its Sigstore bundle when there is one, the
``.dist-info`` and every directory walked for unlisted code. Entries are decoded into the typed
:class:`.verdict.Verdict`; an entry of the wrong shape is a miss, never a dropped backend.

What is cached is what was hashed: a hashed file's identity is the one its digest was taken
with, from the descriptor read, before and after reading (:func:`.installed.hash_file`),
never a ``stat`` made when the verdict is stored. A file written while it was hashed, or
after, before the verification ended, makes the verdict ``verify.changed``, which is not
stored (the next import verifies again). A walked directory is kept under its identity from
before it was listed (:func:`.installed.walk_files`). The rest (the ``.dist-info``, the
manifest, directories looked at for shared packages) is still ``stat``-ed when stored.

Format 3 is shaped for the warm path, which parses it on every ``import triton``: an
identity is one string, ``"dev:ino:size:mtime_ns:ctime_ns"`` (``null`` for a file that was
missing), kept in a list beside ``verdict.files`` rather than repeating each path, and a
file hash is ``"dev:ino:size:mtime_ns:ctime_ns:sha256"``, decoded only when something is
verified again. Triton's 727 files: 331 KB and ~2 ms to parse in format 2, 119 KB and
~0.4 ms now (no list per file for the parser to build and the collector to track).
``TRITON_BACKEND_REHASH=1`` ignores what is cached and writes what it finds.
Writes go through :mod:`.atomicfile` (a temporary renamed into place; one left by a killed
writer is removed by the next).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from collections.abc import Mapping

from ..base import CacheError, ManifestError, RegularFileError, read_regular
from ..manifest import schema
from ..site import identity_text
from ..trust import IDENTITIES_FILE
from .verdict import Verdict

__all__ = [
    "CACHE_DIR_ENV", "CHANGED", "MAX_CACHE_BYTES", "REHASH_ENV", "VerifyCache", "cache_dir", "cache_file",
    "context_digest", "unsafe_owner_or_mode"
]

CACHE_DIR_ENV = "TRITON_BACKEND_CACHE_DIR"
REHASH_ENV = "TRITON_BACKEND_REHASH"
_FORMAT = 3
#: The reason of a verdict about a file written while it was verified: never cached.
CHANGED = "verify.changed"
#: A cache this big was not written by this package (700 files of triton take ~200 KB).
MAX_CACHE_BYTES = 64 * 1024 * 1024


def cache_dir(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get(CACHE_DIR_ENV):
        return env[CACHE_DIR_ENV]
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "triton-backend-runtime")


def cache_file() -> str:
    return os.path.join(cache_dir(), f"verify-{sys.implementation.cache_tag}.json")


def _text(ident: list[object]) -> str:
    return ":".join(map(str, ident))


def context_digest(trust_files: list[str], extra: list[str]) -> str:
    """Digest of everything outside the distribution that a verdict depends on."""
    digest = hashlib.sha256()
    if any(os.path.basename(path) == IDENTITIES_FILE for path in trust_files):
        from ..trust import sigstore_state  # keyless verdicts: with which sigstore, or none (sigstore.missing)

        extra = [*extra, sigstore_state()]
    for item in [sys.version, sys.platform, *extra]:
        digest.update(item.encode("utf-8", "surrogateescape") + b"\0")
    for path in trust_files:
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        try:  # without blocking: a FIFO among the trust files hung every import triton here
            digest.update(read_regular(path, 1024 * 1024, truncate=True))
        except RegularFileError:
            digest.update(b"<unreadable>")
    return digest.hexdigest()


def unsafe_owner_or_mode(st: os.stat_result) -> str | None:
    """Why another user could change this file or directory; None when only we can."""
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not this user ({os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


#: One cached verdict: its context digest, the verdict, and the :func:`identity_text` of each
#: of ``verdict.files`` in order (a tuple: a class would cost its creation on every import).
_Entry = tuple[str, Verdict, list["str | None"]]


class VerifyCache:
    """Verdicts by dist-info path, and file hashes; loaded once, saved when changed.

    ``read=False`` (REHASH) starts empty but still saves. ``notes`` says what was ignored
    and why (unsafe, malformed), for ``doctor``.
    """

    def __init__(self, path: str | None, *, read: bool = True, write: bool = True) -> None:
        self.path = path
        self.write = write and path is not None
        self.raw_verdicts: dict[str, object] = {}
        self.verdicts: dict[str, _Entry] = {}
        #: File hashes as stored; decoded by :meth:`hash_entries` only when verifying.
        self.raw_hashes: dict[str, object] = {}
        self.notes: list[CacheError] = []
        self.dirty = False
        if path:
            self._open(path, read)

    def _open(self, path: str, read: bool) -> None:
        directory = os.path.dirname(path)
        try:
            unsafe = unsafe_owner_or_mode(os.stat(directory))
        except OSError:
            return  # no directory yet: nothing to read, save creates it
        if unsafe:
            self._refuse(directory, unsafe)
            return
        if read:
            try:
                self._load(path)
            except CacheError as exc:
                self.notes.append(exc)
                if exc.code == "cache.unsafe":
                    self.write = False

    def _refuse(self, where: str, why: str) -> None:
        self.notes.append(CacheError("unsafe", where, f"verdict cache not used: {why}"))
        self.write = False

    def _load(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise CacheError("unreadable", path, f"verdict cache ignored: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            unsafe = unsafe_owner_or_mode(st) or (None if stat.S_ISREG(st.st_mode) else "not a regular file")
            if unsafe:
                raise CacheError("unsafe", path, f"verdict cache not used: {unsafe}")
            data = os.read(fd, MAX_CACHE_BYTES + 1)
        finally:
            os.close(fd)
        doc = _parse(data, path)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise CacheError("format", path, "verdict cache of another format ignored; it will be rebuilt")
        verdicts, hashes = doc.get("verdicts"), doc.get("hashes")
        if not isinstance(verdicts, dict) or not isinstance(hashes, dict):
            raise CacheError("malformed", path, "verdict cache malformed (verdicts, hashes); it will be rebuilt")
        self.raw_verdicts, self.raw_hashes = verdicts, hashes

    def _entry(self, dist_info: str) -> _Entry | None:
        """The typed entry, decoded on first use; a malformed one is noted and dropped."""
        if dist_info in self.verdicts:
            return self.verdicts[dist_info]
        raw = self.raw_verdicts.pop(dist_info, None)
        if raw is None:
            return None
        try:
            if not isinstance(raw, dict) or not isinstance(raw.get("context"), str):
                raise ManifestError("schema", "$", "entry is not an object with a context")
            verdict = schema.decode(Verdict, raw.get("verdict"), complete=True)
            entry = (raw["context"], verdict, _identities(raw, len(verdict.files)))
        except (ManifestError, TypeError, ValueError) as exc:
            self.notes.append(CacheError("malformed", f"{self.path}: {dist_info}",
                                         f"cache entry ignored ({exc}); verified again"))
            self.dirty = True
            return None
        self.verdicts[dist_info] = entry
        return entry

    def lookup(self, dist_info: str, context: str) -> Verdict | None:
        """The cached verdict, if its context and every identity it recorded still hold."""
        entry = self._entry(dist_info)
        if entry is None or entry[0] != context:
            return None
        _, verdict, identities = entry
        for path, ident in zip(verdict.files, identities, strict=True):
            if identity_text(path) != ident:
                return None
        return verdict

    def identities(self, dist_info: str, suffix: str = "") -> list[tuple[str, list[object]]]:
        """The identities (as :func:`identity`) of the files ending in ``suffix`` that a stored
        or looked-up verdict depends on, as verified; files that were missing are left out.
        Each text equals a fresh stat's (the lookup compared them), so it is well formed."""
        entry = self.verdicts.get(dist_info)
        if entry is None:
            return []
        _, verdict, identities = entry
        return [(path, [int(part) for part in ident.split(":")])
                for path, ident in zip(verdict.files, identities, strict=True)
                if ident is not None and path.endswith(suffix)]

    def store(self, dist_info: str, context: str, verdict: Verdict,
              taken: Mapping[str, list[object]] | None = None) -> bool:
        """Keep ``verdict``, each hashed file under the identity its digest was taken with
        (``taken``, :attr:`.installed.HashCache.taken`): a file written after it was hashed
        then no longer matches, and is verified again. A verdict of a file that changed while
        it was verified (``verify.changed``) is not kept: False."""
        if verdict.problem is not None and verdict.problem.code == CHANGED:
            self.verdicts.pop(dist_info, None)
            self.raw_verdicts.pop(dist_info, None)
            self.dirty = True
            return False
        verdict.files = list(dict.fromkeys(verdict.files))  # one identity per file
        taken = taken or {}
        identities = [_text(taken[p]) if p in taken else identity_text(p) for p in verdict.files]
        self.verdicts[dist_info] = (context, verdict, identities)
        self.dirty = True
        return True

    def hash_entries(self) -> dict[str, list[object]]:
        """The stored file hashes as :class:`.installed.HashCache` takes them; an entry of
        another shape is left out (the file is hashed again)."""
        entries: dict[str, list[object]] = {}
        for path, text in self.raw_hashes.items():
            parts = text.split(":") if isinstance(text, str) else []
            if len(parts) == 6 and all(p.isascii() and p.isdigit() and len(p) < 24 for p in parts[:5]):
                entries[path] = [*(int(p) for p in parts[:5]), parts[5]]
        return entries

    def keep_hashes(self, entries: dict[str, list[object]]) -> None:
        """Replace the stored file hashes with these (a verification's :class:`.installed.HashCache`)."""
        self.raw_hashes = {path: ":".join(map(str, entry)) for path, entry in entries.items()}
        self.dirty = True

    def save(self) -> None:
        if not (self.write and self.path and self.dirty):
            return
        verdicts = dict(self.raw_verdicts)
        verdicts.update({k: {"context": context, "verdict": schema.encode(verdict), "identities": identities}
                         for k, (context, verdict, identities) in self.verdicts.items()})
        doc = {"format": _FORMAT, "verdicts": verdicts, "hashes": self.raw_hashes}
        from ..base import write_atomic  # only when something was verified

        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            data = json.dumps(doc, separators=(",", ":")).encode("utf-8")
            write_atomic(self.path, data, mode=0o600, durable=False)  # an optimisation: no fsync
            self.dirty = False
        except OSError:
            pass  # an optimisation only: the next import verifies again


def _parse(data: bytes, path: str) -> object:
    """The cache's JSON. Its owner and mode were checked, so it is as trusted as its writer and
    the manifests' depth scan and number hook (:mod:`.jsonlimits`, ~5 ms here) are skipped:
    the size is capped, and CPython's parser itself refuses deep nesting (RecursionError) and
    numbers past 4300 digits (ValueError), which are a malformed cache, nothing worse."""
    if len(data) > MAX_CACHE_BYTES:
        raise CacheError("too-large", path, f"{len(data)} bytes; the limit is {MAX_CACHE_BYTES}")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CacheError("json", path, f"verdict cache ignored, not valid JSON: {str(exc)[:200]}") from None


def _identities(raw: dict[str, object], files: int) -> list[str | None]:
    items = raw.get("identities")
    if not isinstance(items, list) or len(items) != files:
        raise ValueError("identities is not a list with one item per file of the verdict")
    if not all(item is None or isinstance(item, str) for item in items):
        raise ValueError("an identity is not 'dev:ino:size:mtime_ns:ctime_ns' or null")
    return items
