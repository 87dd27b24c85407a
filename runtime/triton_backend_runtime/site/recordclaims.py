"""Whose file is it: the other distribution, in one ``sys.path`` entry, whose RECORD lists a
file as it is on disk (PEP 376: the row's sha256 and size; a shared library above
:data:`HASH_LIMIT` by its size). A row that does not describe the file is no claim: an edited
or dropped file is nobody's. Read by the unlisted-code walk and by ``adopt``."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..base import is_shared_library
from .discovery import Distribution, other_dist_infos, read_small_text, record_row_matches

__all__ = ["HASH_LIMIT", "RecordClaims"]

#: Above this size a RECORD row's size alone describes a shared library: hashing another
#: vendor's half-gigabyte library on every verification is not this check's to do.
HASH_LIMIT = 16 << 20


def _unwatched(path: str) -> None:
    """Nothing to note: a caller that keeps no record of what it read."""


class RecordClaims:
    """The RECORDs of the distributions beside ``dist``, read and indexed once, when first
    asked; ``watch`` is told each RECORD's path before it is read (a verdict that depends on it)."""

    def __init__(self, dist: Distribution, watch: Callable[[str], None] = _unwatched) -> None:
        self.dist, self.watch = dist, watch
        #: wheel path -> (RECORD, row) of each RECORD's first row for that path, RECORDs sorted.
        self.rows: dict[str, list[tuple[str, str]]] | None = None

    def owner(self, path: str) -> str | None:
        """The RECORD of another distribution that lists ``path`` as it is on disk."""
        rows = self.rows if self.rows is not None else self._index()
        wheel_path = os.path.relpath(path, self.dist.root).replace(os.sep, "/")
        for record, row in rows.get(wheel_path, ()):
            if record_row_matches(row, path, HASH_LIMIT) or _large_and_sized(row, path):
                return record
        return None

    def _index(self) -> dict[str, list[tuple[str, str]]]:
        """One pass over each RECORD (a walk may ask about thousands of files; a search of
        every RECORD for each would be their product)."""
        self.rows = {}
        for info in other_dist_infos(self.dist):
            record = os.path.join(self.dist.root, info, "RECORD")
            self.watch(record)
            first: dict[str, str] = {}
            # rows end at "\n" only, as record_row reads them: str.splitlines would also end one
            # at \x0c, \x1c-\x1e, \x85 or \u2028, and two readers would disagree on a crafted RECORD
            for line in (read_small_text(record) or "").split("\n"):
                line = line.rstrip("\r")
                if line.count(",") >= 2:
                    first.setdefault(line.rsplit(",", 2)[0], line)
            for wheel_path, row in first.items():
                self.rows.setdefault(wheel_path, []).append((record, row))
        return self.rows


def _large_and_sized(row: str, path: str) -> bool:
    if not is_shared_library(os.path.basename(path)):
        return False
    size = row.rsplit(",", 1)[-1]
    try:
        return size.isascii() and size.isdigit() and len(size) < 16 and os.stat(path).st_size == int(size) > (
            HASH_LIMIT)
    except (OSError, ValueError):
        return False
