"""An installed distribution for ``adopt``: the site-packages directory that holds it, its
``.dist-info`` read as hostile input within bounds, and what adopting it came to (:class:`Adoption`)."""

from __future__ import annotations

import email.parser
import os
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

from triton_backend_runtime.base import MANIFEST_FILENAME, TrustError, VerifyError, canonicalize_name
from triton_backend_runtime.site import Confinement, read_bounded

from ..base import InputError, InstalledError
from ..formats import entrypoints, records
from .migrate import Outcome

__all__ = ["Adoption", "Installed", "MAX_METADATA_BYTES", "MAX_RECORD_BYTES", "find_site", "read_installed"]

#: RECORD, METADATA, WHEEL, entry_points.txt larger than these are not a distribution's own.
MAX_RECORD_BYTES = 16 << 20
MAX_METADATA_BYTES = 4 << 20


@dataclass
class Installed:
    """One installed distribution: where it is, its metadata, and its RECORD rows in order."""

    site: str
    dist_info: str  # the directory's name, as wheel paths start
    metadata: Message
    wheel: Message
    rows: list[records.RecordRow]
    entry_points: entrypoints.EntryPoints

    def full(self, path: str) -> str:
        return os.path.join(self.site, *path.split("/"))

    @property
    def manifest_path(self) -> str:
        return f"{self.dist_info}/{MANIFEST_FILENAME}"


@dataclass
class Adoption(Outcome):
    """What happened to one installed distribution (``migrate``'s outcome, plus what adopt saw)."""

    mismatches: list[TrustError] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    skipped: int = 0  # rows for files the installer generated (bytecode, script wrappers)
    deflate: str | None = None  # the engine a written wheel was deflated with (the bytes depend on it)

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "mismatches": [e.as_dict() for e in self.mismatches],
                "written": self.written, "skipped": self.skipped, "deflate": self.deflate}


def find_site(sites: list[Path], name: str) -> Path:
    """The one of ``sites`` that holds ``name``'s ``.dist-info``. Searching several (an
    interpreter's purelib and platlib: pip puts a wheel that is not ``Root-Is-Purelib``, as
    Triton's, in platlib), a directory that does not exist is skipped, and a distribution
    found in two is refused: which one is imported depends on ``sys.path``, not on adopt."""
    found = [site for site in sites if _dist_infos(site, name, missing_ok=len(sites) > 1)]
    where = str(sites[0] / name)
    if not found:
        searched = " and ".join(str(s) for s in sites)
        raise InputError("not-installed", where, f"no installed distribution of that name in {searched}")
    if len(found) > 1:
        raise InputError("ambiguous", where, f"installed in {' and '.join(map(str, found))}: "
                         "name the one to adopt with --site-packages")
    return found[0]


def read_installed(site: Path, name: str) -> Installed:
    """The one ``.dist-info`` for ``name`` in ``site`` (PEP 503 names), its metadata read within bounds."""
    dist_info = _locate(site, name)
    full = os.path.join(site, dist_info)
    try:
        Confinement(str(site)).check(os.path.join(full, "RECORD"))
    except VerifyError as exc:
        raise InstalledError("path", full, exc.detail) from None
    metadata = _headers(full, "METADATA", ("Name", "Version"))
    if canonicalize_name(metadata["Name"]) != canonicalize_name(name):
        raise InstalledError("metadata", os.path.join(full, "METADATA"), f"names {metadata['Name']!r}, not {name!r}")
    record_text = _text(os.path.join(full, "RECORD"), MAX_RECORD_BYTES)
    if record_text is None:
        raise InstalledError("record", os.path.join(full, "RECORD"), "no RECORD: nothing to check the files against")
    rows = _record_rows(record_text, os.path.join(full, "RECORD"))
    eps_path = os.path.join(full, "entry_points.txt")
    eps_text = _text(eps_path, MAX_METADATA_BYTES)
    eps = entrypoints.parse(eps_text, eps_path) if eps_text else {}
    return Installed(str(site), dist_info, metadata, _headers(full, "WHEEL", ("Wheel-Version", "Tag")), rows, eps)


def _locate(site: Path, name: str) -> str:
    found = _dist_infos(site, name)
    if not found:
        raise InputError("not-installed", str(site / name), "no installed distribution of that name here")
    if len(found) > 1:
        raise InputError("ambiguous", str(site / name), f"several installed: {', '.join(found)}")
    return found[0]


def _dist_infos(site: Path, name: str, *, missing_ok: bool = False) -> list[str]:
    """The ``.dist-info`` directories in ``site`` whose name is ``name``'s (PEP 503)."""
    try:
        entries = os.listdir(site)
    except FileNotFoundError:
        if missing_ok:
            return []
        raise InputError("site-packages", str(site), "no such directory") from None
    except OSError as exc:
        raise InputError("site-packages", str(site), f"cannot list the directory: {exc.strerror}") from None
    want = canonicalize_name(name)
    return sorted(e for e in entries
                  if e.endswith(".dist-info") and canonicalize_name(e[: -len(".dist-info")].split("-")[0]) == want)


def _text(path: str, limit: int) -> str | None:
    """A small regular file's text; None when absent. Never follows a symlink, never blocks."""
    try:
        data = read_bounded(path, limit)
    except VerifyError as exc:
        if exc.code == "verify.missing":
            return None
        raise InstalledError(exc.code.split(".", 1)[1], path, exc.detail) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InstalledError("metadata", path, "not UTF-8") from None


def _headers(dist_info: str, leaf: str, required: tuple[str, ...]) -> Message:
    path = os.path.join(dist_info, leaf)
    text = _text(path, MAX_METADATA_BYTES)
    message = email.parser.HeaderParser().parsestr(text or "")
    for header in required:
        if not message.get(header):
            raise InstalledError("metadata", path, f"no {header} header" if text is not None else "missing")
    return message


def _record_rows(text: str, where: str) -> list[records.RecordRow]:
    """RECORD's rows in order; a path listed twice is refused (which row would be checked?)."""
    rows = records.parse_rows(text, where)
    repeated = len(rows) - len({row.path for row in rows})
    if repeated:
        raise InstalledError("record", where, f"lists {repeated} path(s) more than once")
    return rows
