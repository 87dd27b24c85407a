"""File ownership: files that the RECORDs of two installed distributions both claim.

pip installs a wheel over whatever is there: a Triton fork installed over ``triton``
overwrites hundreds of its files, and both RECORDs (PEP 376) then list them. The files on
disk are the ones of the distribution installed last; the other one's RECORD (and manifest)
no longer describe them, and uninstalling either deletes the other's files. Hashing would
only say "sha256 differs" on whichever shared file came first; this module says why, before
anything is hashed: which two distributions, how many files they share, which one the files
on disk match, and for each of the two the commands that keep it (``conflict.files``): the
other uninstalled, then the one kept reinstalled from the archive it came from (PEP 610
``direct_url.json``, read by ``directurl``), since uninstalling either removes the shared files.

It reads RECORDs only (and, for a conflict it describes, the two ``direct_url.json``): on
the cold path for the distributions being verified (one bounded read per distribution in the
same ``sys.path`` entry whose RECORD mentions one of their top-level directories, a C-speed
substring test first), and for the Triton core when two RECORDs claim its ``__init__.py``
(known from discovery).
"""

from __future__ import annotations

import os

from ..base import ConflictError, Reason, printable, reason_of, record
from .directurl import install_source
from .discovery import (
    Distribution,
    RecordSyntaxError,
    metadata_name_version,
    other_dist_infos,
    read_small_text,
    record_lines,
    record_row_matches,
)

__all__ = [
    "MAX_COMPARED", "MAX_HASHED_BYTES", "MAX_SHOWN", "Overlap", "compare", "core_overlap", "keep_advice",
    "overlaps_of", "record_rows"
]

#: Shared files whose rows differ that are compared with the disk, at most: a few decide it.
MAX_COMPARED = 16
#: Files bigger than this are not hashed to decide it (libtriton.so is ~400 MB).
MAX_HASHED_BYTES = 1 << 20
#: Names, versions and paths in the advice are cut here: a hostile METADATA or RECORD must not
#: make the one-line message unbounded.
MAX_SHOWN = 120


@record(frozen=True)
class Overlap:
    """Two distributions whose RECORDs list the same files."""

    first: Distribution
    second: Distribution
    shared: tuple[str, ...]  # wheel paths, sorted
    on_disk: Distribution | None  # the one the shared files match (installed last); None: neither or both

    def describe(self) -> str:
        """Both distributions, whose files are on disk, and for each one the commands that keep
        it: one line, bounded, printable (names, versions and paths are hostile input)."""
        head = f"{_label(self.first)} and {_label(self.second)}"
        if self.on_disk is None:
            state = "the files on disk match neither RECORD alone"
            choices = (self.first, self.second)
        else:
            other = self.second if self.on_disk is self.first else self.first
            head = f"{_label(self.on_disk)} and {_label(other)}"
            state = (f"the files on disk are {_label(self.on_disk)}'s (installed last), "
                     f"so {_label(other)} is broken")
            choices = (other, self.on_disk)
        keep = [f"to keep {_label(a)}: {keep_advice(a, b)}" for a, b in (choices, choices[::-1])]
        return printable(f"{head} both own {len(self.shared)} file(s) (e.g. {_shown(self.shared[0])}); {state}; "
                         f"{'; '.join(keep)} (uninstalling either removes the shared files, "
                         f"so the one kept is reinstalled after)")

    def reason(self, path: str) -> Reason:
        return reason_of(ConflictError("files", path, self.describe()))


def keep_advice(keep: Distribution, drop: Distribution) -> str:
    """The commands that leave ``keep`` the only owner of the shared files: ``drop`` uninstalled,
    then ``keep`` reinstalled from the archive it came from (PEP 610). Never a bare
    ``pip install NAME==VERSION``: an index may serve another build (an unsigned one) under it."""
    from shlex import quote  # only a conflict is described: ``import triton`` does not pay

    uninstall = f"`pip uninstall -y {quote(_shown(drop.name))}`"
    source = install_source(keep.dist_info)
    if source is not None:
        return f"{uninstall} then `pip install --force-reinstall --no-deps {quote(source)}`"
    pinned = quote(f"{_shown(keep.name)}=={_shown(keep.version)}")
    return (f"{uninstall} then reinstall {_label(keep)} from the wheel, index or mirror it came from "
            f"(source unknown; e.g. `pip install --force-reinstall --no-deps --index-url <that index> {pinned}`)")


def _shown(text: str) -> str:
    """``text`` as one printable piece of the advice, cut at MAX_SHOWN characters."""
    text = printable(text)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def _label(dist: Distribution) -> str:
    return f"{_shown(dist.name)} {_shown(dist.version)}"


def record_rows(dist_info: str) -> dict[str, str]:
    """Wheel path -> the rest of its RECORD row (hash, size); the installed files only."""
    rows: dict[str, str] = {}
    try:
        for _, (path, *rest) in record_lines(read_small_text(os.path.join(dist_info, "RECORD")) or ""):
            if path and not _metadata(path):
                rows[path] = ",".join(rest)
    except RecordSyntaxError:
        pass  # the rows before a line csv refuses are what this RECORD says
    return rows


def _metadata(path: str) -> bool:
    top = path.split("/", 1)[0]
    return top.endswith((".dist-info", ".data")) or "/__pycache__/" in path or path.endswith(".pyc")


def _tops(rows: dict[str, str]) -> set[str]:
    return {p.split("/", 1)[0] + "/" for p in rows if "/" in p}


def overlaps_of(dist: Distribution, rows: dict[str, str] | None = None) -> list[Overlap]:
    """Every other distribution in ``dist``'s ``sys.path`` entry sharing files with it."""
    rows = record_rows(dist.dist_info) if rows is None else rows
    tops = _tops(rows)
    if not tops:
        return []
    found = []
    for info in other_dist_infos(dist):
        path = os.path.join(dist.root, info)
        text = read_small_text(os.path.join(path, "RECORD")) or ""
        if not any(text.startswith(t) or f"\n{t}" in text for t in tops):
            continue
        other = _distribution(path, dist)
        overlap = compare(dist, rows, other, record_rows(path))
        if overlap is not None:
            found.append(overlap)
    return found


def _distribution(dist_info: str, near: Distribution) -> Distribution:
    stem = os.path.basename(dist_info)[: -len(".dist-info")]
    name, _, version = stem.partition("-")
    real_name, real_version = metadata_name_version(dist_info)
    return Distribution(real_name or name, real_version or version, dist_info, near.root, near.order)


def compare(a: Distribution, a_rows: dict[str, str], b: Distribution, b_rows: dict[str, str]) -> Overlap | None:
    """The overlap of two RECORDs, and which one the shared files on disk match."""
    shared = sorted(set(a_rows) & set(b_rows))
    if not shared:
        return None
    # the smallest differing files first: a few decide it, and none is hashed above the cap
    differing = sorted((p for p in shared if a_rows[p] != b_rows[p]), key=lambda p: _size(a_rows[p]))
    votes = {"a": 0, "b": 0}
    for path in [p for p in differing if _size(a_rows[p]) <= MAX_HASHED_BYTES][:MAX_COMPARED]:
        installed = os.path.join(a.root, *path.split("/"))
        votes["a"] += record_row_matches(f"{path},{a_rows[path]}", installed)
        votes["b"] += record_row_matches(f"{path},{b_rows[path]}", installed)
    on_disk = a if votes["a"] > votes["b"] else b if votes["b"] > votes["a"] else None
    return Overlap(a, b, tuple(shared), on_disk)


def _size(rest: str) -> int:
    """The size field of a RECORD row's remainder (``sha256=...,SIZE``); huge when unreadable."""
    size = rest.rpartition(",")[2]
    return int(size) if size.isdigit() and len(size) < 16 else 1 << 62


def core_overlap(claims: list[Distribution]) -> Overlap | None:
    """The first two distributions whose RECORDs claim the imported ``triton/__init__.py``."""
    if len(claims) < 2:
        return None
    return compare(claims[0], record_rows(claims[0].dist_info), claims[1], record_rows(claims[1].dist_info))
