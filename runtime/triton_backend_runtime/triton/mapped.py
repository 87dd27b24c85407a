"""What this process has mapped: ``/proc/self/maps``, read within bounds.

The kernel lists each file mapping with the device and inode of the file, so a library is
recognised by the identity of the file on disk, not by the path it was loaded under (a
symbolic link, a relative path and the real path all name one file). The table is read with
bounds on bytes, lines and line length (a process with torch and CUDA maps a few thousand
regions); past a bound, where the file cannot be read (no ``/proc``: not Linux) or where a
line does not parse, the answer is unknown, never an exception: this runs inside
``import triton``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

from ..base import record

__all__ = [
    "DELETED", "Lookup", "MAPS", "MAX_BYTES", "MAX_LINE", "MAX_LINES", "Mapping", "is_mapped", "lookup", "parse",
    "same_file"
]

MAPS = "/proc/self/maps"
MAX_BYTES = 32 << 20
MAX_LINES = 200_000
#: PATH_MAX (4096) plus the fields before the path and `` (deleted)``.
MAX_LINE = 8192
DELETED = b" (deleted)"


@record(frozen=True)
class Mapping:
    """One line of the table: a region mapped from a file."""

    span: str  # start-end, hexadecimal: its name under /proc/self/map_files
    device: int
    inode: int
    path: bytes  # as the kernel wrote it, " (deleted)" included


@record(frozen=True)
class Lookup:
    """The first mapping that matched; ``complete`` when the whole table was read, so that
    none found means none is mapped."""

    found: Mapping | None
    complete: bool

    @property
    def known(self) -> bool:
        return self.found is not None or self.complete


def lookup(match: Callable[[Mapping], bool], source: str | None = None) -> Lookup:
    """The first mapping of ``source`` (default: this process's table) that ``match`` accepts."""
    try:
        with open(source or MAPS, "rb") as maps:
            return _scan(maps, match)
    except Exception:  # the kernel's text, or not Linux: unknown, whatever went wrong
        return Lookup(None, False)


def _scan(maps: BinaryIO, match: Callable[[Mapping], bool]) -> Lookup:
    total = 0
    for _ in range(MAX_LINES):
        line = maps.readline(MAX_LINE + 1)
        if not line:
            return Lookup(None, True)
        total += len(line)
        if len(line) > MAX_LINE or total > MAX_BYTES:
            break
        mapping = parse(line)
        if mapping is not None and match(mapping):
            return Lookup(mapping, True)
    return Lookup(None, False)


def parse(line: bytes) -> Mapping | None:
    """A file mapping's fields; None for an anonymous region. Raises ValueError for a line
    that is not the kernel's format."""
    parts = line.rstrip(b"\n").split(None, 5)
    if len(parts) < 5:
        raise ValueError("not a line of /proc/self/maps")
    major, minor = parts[3].split(b":")
    inode = int(parts[4])
    if len(parts) == 5 or inode == 0:
        return None
    return Mapping(parts[0].decode("ascii"), os.makedev(int(major, 16), int(minor, 16)), inode, parts[5])


def is_mapped(path: str, source: str | None = None) -> bool | None:
    """Whether the file at ``path`` is mapped into this process; None when that cannot be
    known (no ``/proc``, the file gone, the table past its bounds)."""
    try:
        stat = os.stat(path)
        real = os.fsencode(os.path.realpath(path))
    except (OSError, ValueError):
        return None
    found = lookup(lambda m: same_file(m, stat.st_dev, stat.st_ino, real), source)
    return True if found.found is not None else (False if found.complete else None)


def same_file(mapping: Mapping, device: int, inode: int, real: bytes) -> bool:
    """Whether ``mapping`` is of the file of this device and inode (at real path ``real``)."""
    if mapping.inode != inode:
        return False
    if mapping.device == device:
        return True
    # An overlay (containers) or a btrfs subvolume: stat and the kernel's table name two
    # devices for one file, one of them anonymous (major 0). The inode and the path then decide.
    return (os.major(device) == 0 or os.major(mapping.device) == 0) and mapping.path in (real, real + DELETED)
