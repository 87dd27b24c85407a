"""The verification cache: verdicts and file hashes, so a warm ``import triton`` only stats.

One JSON file per interpreter (``verify-<cache_tag>.json``) in ``TRITON_BACKEND_CACHE_DIR``,
else ``$XDG_CACHE_HOME/triton-backend-runtime``, else ``~/.cache/triton-backend-runtime``.

A verdict is reused only when its *context* is unchanged (the bytes of every trust file,
the installed Triton's METADATA and libtriton identity, this interpreter) and every file
and directory it depended on still has the identity (dev, inode, size, mtime_ns,
ctime_ns) it had: a changed ``.so``, a new file in a walked directory, a reinstalled
wheel or an edited trust store all miss. The cache is an optimisation only: unreadable,
corrupt or unwritable, it is ignored, and ``TRITON_BACKEND_REHASH=1`` bypasses it.
Writes go to a temporary file renamed into place, so readers never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

CACHE_DIR_ENV = "TRITON_BACKEND_CACHE_DIR"
REHASH_ENV = "TRITON_BACKEND_REHASH"
_FORMAT = 1


def cache_dir(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get(CACHE_DIR_ENV):
        return env[CACHE_DIR_ENV]
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "triton-backend-runtime")


def cache_file() -> str:
    return os.path.join(cache_dir(), f"verify-{sys.implementation.cache_tag}.json")


def identity(st: os.stat_result) -> list[object]:
    """A file's identity for the caches: (device, inode, size, mtime_ns, ctime_ns)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def stat_identity(path: str) -> list[object] | None:
    try:
        return identity(os.stat(path))
    except OSError:
        return None


def context_digest(trust_files: list[str], extra: list[str]) -> str:
    """Digest of everything outside the distribution that a verdict depends on."""
    digest = hashlib.sha256()
    for item in [sys.version, sys.platform, *extra]:
        digest.update(item.encode("utf-8", "surrogateescape") + b"\0")
    for path in trust_files:
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as stream:
                digest.update(stream.read(1024 * 1024))
        except OSError:
            digest.update(b"<unreadable>")
    return digest.hexdigest()


class VerifyCache:
    """Verdicts by dist-info path, and file hashes; loaded once, saved when changed."""

    def __init__(self, path: str | None, *, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled
        self.verdicts: dict[str, Any] = {}
        self.hashes: dict[str, list[object]] = {}
        self.dirty = False
        if enabled and path:
            self._load(path)

    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as stream:
                doc = json.load(stream)
        except (OSError, ValueError):
            return
        if isinstance(doc, dict) and doc.get("format") == _FORMAT:
            self.verdicts = dict(doc.get("verdicts") or {})
            self.hashes = dict(doc.get("hashes") or {})

    def lookup(self, dist_info: str, context: str) -> dict[str, Any] | None:
        """The cached verdict, if its context and every identity it recorded still hold."""
        if not self.enabled:
            return None
        entry = self.verdicts.get(dist_info)
        if not isinstance(entry, dict) or entry.get("context") != context:
            return None
        for path, ident in entry.get("identities", []):
            if stat_identity(path) != ident:
                return None
        verdict = entry.get("verdict")
        return verdict if isinstance(verdict, dict) else None

    def store(self, dist_info: str, context: str, verdict: dict[str, Any], files: list[str]) -> None:
        identities = [[p, stat_identity(p)] for p in files]
        self.verdicts[dist_info] = {"context": context, "verdict": verdict, "identities": identities}
        self.dirty = True

    def save(self) -> None:
        if not (self.enabled and self.path and self.dirty):
            return
        doc = {"format": _FORMAT, "verdicts": self.verdicts, "hashes": self.hashes}
        temp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(temp, "w", encoding="utf-8") as stream:
                json.dump(doc, stream, separators=(",", ":"))
            os.replace(temp, self.path)
            self.dirty = False
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass
