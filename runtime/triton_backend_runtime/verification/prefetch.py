"""Hashing started before a distribution's manifest is read: RECORD's rows as a hint.

On a cold start hashing is most of the time, and its largest file (``libtriton.so``) alone
sets the floor: every millisecond before that file's hash starts is added to the whole. So
the caller starts it as early as it can (the registry, before it loads the trust store and
imports the verifier), and the rest of verification overlaps it. Nothing here decides
anything: only plain paths inside the install root are opened, and :mod:`.distribution`
still checks every artifact the manifest lists, by its own ``lstat``, against the digest of
the bytes as they were checked (:meth:`.HashCache.digests`).
"""

from __future__ import annotations

import os

from ..base import VerifyError
from ..site import Confinement, Distribution, HashCache, installed_path, read_small_text

__all__ = ["hash_ahead"]


def hash_ahead(dist: Distribution, hashes: HashCache, workers: int) -> None:
    """Start hashing the files ``dist``'s RECORD lists, largest first, each submitted as soon
    as its path is checked (the largest does not wait for the rest to be). The identities of
    the ``.dist-info`` and the manifest are taken first: the verdict is about them as they
    were before anything was read."""
    for path in (dist.dist_info, dist.manifest or dist.dist_info):
        hashes.watch(path)
    confine = Confinement(dist.root)
    for name, size in sorted(_recorded(dist.dist_info), key=lambda row: -row[1]):
        try:
            where = installed_path(dist.root, name)
        except VerifyError:
            continue
        if where is not None and confine.inside(os.path.dirname(where)):
            hashes.prefetch([(where, size)], workers)


def _recorded(dist_info: str) -> list[tuple[str, int]]:
    """(path, size) as the installer's RECORD lists them (PEP 376): a hint of what to hash;
    the manifest alone decides what is checked. Quoted rows (a comma in a path) are left
    out: a hint need not be complete."""
    rows = []
    for line in (read_small_text(os.path.join(dist_info, "RECORD")) or "").splitlines():
        path, _, size = (line.rsplit(",", 2) + ["", ""])[:3]
        if path and not path.startswith('"') and size.isascii() and size.isdigit() and len(size) < 16:
            rows.append((path, int(size)))
    return rows
