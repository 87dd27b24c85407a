"""Hashing started before a distribution's manifest is read: RECORD's rows as a hint.

On a cold start hashing is most of the time, and its largest file (``libtriton.so``) alone
sets the floor: every millisecond before that file's hash starts is added to the whole. So
the caller starts it as early as it can (the registry, before it loads the trust store and
imports the verifier), and the rest of verification overlaps it. Nothing here decides
anything: only plain paths inside the install root are opened, and :mod:`.distribution`
still checks every artifact the manifest lists, by its own ``lstat``, against the digest of
the bytes as they were checked (:meth:`.HashCache.digests`).

RECORD is the installer's copy of the wheel's rows, so it is hostile: it may list any
number of files, missing or another distribution's. A hint is bounded hard: only for a
manifest that carries a signature (a hash-only one is checked within its own budget, which
a prefetch must not exceed), at most :data:`MAX_PREFETCH_FILES` files and
:data:`MAX_PREFETCH_BYTES` bytes as RECORD sizes them, from at most
:data:`MAX_PREFETCH_ROWS` rows of at most :data:`MAX_PREFETCH_RECORD_BYTES` bytes.
"""

from __future__ import annotations

import heapq
import os
import re

from ..base import VerifyError
from ..site import Confinement, Distribution, HashCache, installed_path, read_small_bytes
from ..trust import MAX_ENVELOPE_BYTES

__all__ = [
    "MAX_PREFETCH_BYTES", "MAX_PREFETCH_FILES", "MAX_PREFETCH_RECORD_BYTES", "MAX_PREFETCH_ROWS", "hash_ahead",
]

#: The largest files are what a prefetch is for; a real backend's few big ones fit.
MAX_PREFETCH_FILES = 16
#: What the files hashed ahead may add up to, by RECORD's size column (hash_file reads a
#: file only when it is that size).
MAX_PREFETCH_BYTES = 2 * 1024 * 1024 * 1024
#: RECORD rows read for the hint, and the bytes of RECORD read.
MAX_PREFETCH_ROWS = 20_000
MAX_PREFETCH_RECORD_BYTES = 2 * 1024 * 1024
#: A DSSE envelope's list of signatures, not empty. Inside a JSON string every quote is escaped
#: (``\"``), so the phrase written in a string never matches: only a member of that name does.
_SIGNATURES = re.compile(rb'"signatures"\s*:\s*\[\s*\{')


def hash_ahead(dist: Distribution, hashes: HashCache, workers: int) -> None:
    """Start hashing the largest files ``dist``'s RECORD lists, largest first, each submitted
    as soon as its path is checked (the largest does not wait for the rest to be). The
    identities of the ``.dist-info`` and the manifest are taken first: the verdict is about
    them as they were before anything was read."""
    for path in (dist.dist_info, dist.manifest or dist.dist_info):
        hashes.watch(path)
    if dist.manifest is None or not _signed(dist.manifest):
        return
    confine = Confinement(dist.root)
    budget = MAX_PREFETCH_BYTES
    for name, size in _largest(_recorded(dist.dist_info)):
        if size > budget:
            continue
        try:
            where = installed_path(dist.root, name)
        except VerifyError:
            continue
        if where is not None and confine.inside(os.path.dirname(where)):
            budget -= size
            hashes.prefetch([(where, size)], workers)


def _signed(manifest: str) -> bool:
    """Whether the envelope appears to carry a signature: a ``"signatures"`` member holding an
    object. A hint, so the bytes are searched, not parsed (parsing a 2 MB envelope here cost
    ~8 ms before the first hash). A hash-only manifest (``"signatures": []``) is not hinted;
    one made to look signed (a nested member of that name) costs what a signature that does
    not hold costs anyone: the prefetch's own bounds."""
    data = read_small_bytes(manifest, MAX_ENVELOPE_BYTES)
    return data is not None and _SIGNATURES.search(data) is not None


def _largest(rows: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The :data:`MAX_PREFETCH_FILES` largest rows, largest first, one a path."""
    return heapq.nlargest(MAX_PREFETCH_FILES, dict(rows).items(), key=lambda row: row[1])


def _recorded(dist_info: str) -> list[tuple[str, int]]:
    """(path, size) as the installer's RECORD lists them (PEP 376), from its first
    :data:`MAX_PREFETCH_ROWS` rows: a hint of what to hash; the manifest alone decides what
    is checked. Quoted rows (a comma in a path) are left out: a hint need not be complete."""
    rows = []
    data = read_small_bytes(os.path.join(dist_info, "RECORD"), MAX_PREFETCH_RECORD_BYTES) or b""
    for line in data.decode("utf-8", "replace").split("\n", MAX_PREFETCH_ROWS)[:MAX_PREFETCH_ROWS]:
        line = line.rstrip("\r")
        path, _, size = (line.rsplit(",", 2) + ["", ""])[:3]
        if path and not path.startswith('"') and size.isascii() and size.isdigit() and len(size) < 16:
            rows.append((path, int(size)))
    return rows
