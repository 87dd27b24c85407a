"""The published release that ``adopt --against`` compares an installed distribution with.

RECORD on disk says what the installer wrote, and whoever could change an installed file
could rewrite RECORD to match: plain ``adopt`` vouches for such an install. ``--against``
takes the release as it was published instead, a wheel file, or the same wheel found in a
PEP 503 simple index (a directory, a ``file://`` URL, or an ``http(s)://`` URL), and
requires every installed file to be that wheel's member, byte for byte, and every member
to be installed.

The wheel is hostile input: read through :class:`~backend_packager.wheel.reader.WheelArchive`
(one descriptor, no symlink, zip checks), every member hashed through the archive (zipfile
checks each CRC and size), and its own RECORD must agree with its members. Its name,
version, build and tags must be the installed distribution's. An index page and a wheel
fetched over HTTP are read with a timeout and within a bound, and a ``#sha256=`` the page
gives is checked; a page's links are resolved as URLs, and a page on disk may only name
files inside its index directory (an index is data: it names no path of its own).

Members installed outside site-packages (``NAME.data/scripts``, ``headers``, ``data``) are
not compared (adopt reads only inside site-packages); ``NAME.data/purelib`` and ``platlib``
members are compared where the installer put them.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
import urllib.response
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit
from urllib.request import url2pathname

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from triton_backend_runtime.base import canonicalize_name, same_version

from ..base import InputError, InstalledError, TrustError, WheelError, read_input, sha256_pread
from ..formats import records, simpleindex
from ..wheel import WheelArchive, open_wheel

__all__ = [
    "CHUNK", "MAX_PAGE_BYTES", "MAX_WHEEL_BYTES", "Release", "SHOWN", "TIMEOUT_S", "Wanted", "compare",
    "installed_path", "load", "read_release", "summary"
]

#: Bounds on what is fetched: a project page, a wheel, and how long a read may stall.
MAX_PAGE_BYTES = 16 << 20
MAX_WHEEL_BYTES = 8 << 30
TIMEOUT_S = 60.0
CHUNK = 1 << 20
#: How many differing files the error line names (all are in the outcome's mismatches).
SHOWN = 5


@dataclass(frozen=True)
class Wanted:
    """The installed distribution a release must be: name, version, build, tags (WHEEL's)."""

    name: str
    version: str
    build: str | None
    tags: frozenset[str]

    def describe(self) -> str:
        return f"{self.name} {self.version} ({', '.join(sorted(self.tags))})"


@dataclass(frozen=True)
class Release:
    """A published wheel: where it came from, and each file it installs into site-packages."""

    source: str
    files: dict[str, tuple[str, int]]  # site-packages path -> (sha256, size)
    outside: int  # members installed outside site-packages: not compared


def load(spec: str, wanted: Wanted, workdir: Path) -> Release:
    """The release ``spec`` names: a wheel (a path or URL ending ``.whl``) or a simple index
    (a directory or URL) holding the wheel of ``wanted``; fetched files go to ``workdir``."""
    if spec.endswith(".whl"):
        return read_release(_fetch(spec, None, None, workdir), spec, wanted)
    url, sha256 = _find_in_index(spec, wanted)
    return read_release(_fetch(url, sha256, spec, workdir), url, wanted)


def read_release(path: Path, source: str, wanted: Wanted) -> Release:
    """Every member of the wheel at ``path`` hashed; refused unless it is ``wanted``'s wheel
    and its RECORD agrees with its members."""
    from .verify import _hash_member  # the one member hasher of a checked archive

    with WheelArchive(path, check_name=True) as archive:
        _check_identity(archive, source, wanted)
        record_name = f"{archive.dist_info}/RECORD"
        hashed = {m.name: _hash_member(archive, m) for m in archive.members if not m.is_dir}
        seen = {name: (h.sha256, h.size) for name, h in hashed.items() if name != record_name}
        found = records.discrepancies(archive.record, seen, set(hashed), strict=True)
        if found:
            raise WheelError("record", archive.where(found[0].path), f"{found[0].detail}: the published wheel "
                             "disagrees with its own RECORD; it is no reference")
        files: dict[str, tuple[str, int]] = {}
        outside = 0
        for name, digest in seen.items():
            target = installed_path(name, archive.dist_info)
            if target is None:
                outside += 1
            else:
                files[target] = digest
    return Release(source, files, outside)


def installed_path(member: str, dist_info: str) -> str | None:
    """Where an installer puts ``member`` relative to site-packages; None outside it."""
    data = dist_info.removesuffix(".dist-info") + ".data/"
    if not member.startswith(data):
        return member
    scheme, _, rest = member[len(data):].partition("/")
    return rest if scheme in ("purelib", "platlib") and rest else None


def _check_identity(archive: WheelArchive, source: str, wanted: Wanted) -> None:
    name, version = archive.metadata["Name"], archive.metadata["Version"]
    tags = frozenset(archive.wheel_meta.get_all("Tag") or [])
    build = archive.wheel_meta.get("Build")
    if canonicalize_name(name) != canonicalize_name(wanted.name) or not same_version(version, wanted.version):
        raise InputError("against", source, f"the published wheel is {name} {version}, not {wanted.name} "
                         f"{wanted.version}")
    if tags != wanted.tags or build != wanted.build:
        raise InputError("against", source, f"the published wheel is built for {', '.join(sorted(tags))} "
                         f"(build {build}), the installed distribution for {', '.join(sorted(wanted.tags))} "
                         f"(build {wanted.build}): another build")


# --- the index -------------------------------------------------------------------------------


def _find_in_index(index: str, wanted: Wanted) -> tuple[str, str | None]:
    """(URL, sha256 the page gives) of ``wanted``'s wheel on its project page."""
    base = _as_url(index)
    page_url = urljoin(base.rstrip("/") + "/", canonicalize_name(wanted.name) + "/")
    try:
        text = _read_page(page_url, index).decode("utf-8", "replace")
        found = simpleindex.links(text)
    except simpleindex.PageError as exc:
        raise InputError("against", page_url, str(exc)) from None
    for link in found:
        url = urljoin(page_url, link.href)
        if _is_wanted(unquote(urlsplit(url).path).rsplit("/", 1)[-1], wanted):
            return url, link.sha256
    raise InputError("against", page_url, f"no wheel of {wanted.describe()} on the index's project page")


def _as_url(index: str) -> str:
    """A URL as given; a path as a file URL (made absolute, never resolved: a final symlink
    stays one, and is refused when opened)."""
    if urlsplit(index).scheme in ("http", "https", "file"):
        return index
    return Path(os.path.abspath(index)).as_uri()


def _is_wanted(filename: str, wanted: Wanted) -> bool:
    try:
        name, version, build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    build_text = "".join(str(part) for part in build) if build else None
    return (canonicalize_name(name) == canonicalize_name(wanted.name) and same_version(str(version), wanted.version)
            and frozenset(str(t) for t in tags) == wanted.tags and build_text == wanted.build)


def _read_page(url: str, index: str) -> bytes:
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(url2pathname(parts.path))
        return read_input(path / "index.html" if url.endswith("/") else path, MAX_PAGE_BYTES)
    return _download(url, MAX_PAGE_BYTES)


# --- fetching ---------------------------------------------------------------------------------


def _fetch(spec: str, sha256: str | None, index: str | None, workdir: Path) -> Path:
    """A local wheel as it is, or a wheel fetched over HTTP into ``workdir``; a sha256 the
    index page gave must be the file's."""
    url = _as_url(spec) if urlsplit(spec).scheme not in ("http", "https") else spec
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(url2pathname(parts.path))
        if index is not None and urlsplit(_as_url(index)).scheme != "file":
            raise InputError("against", url, "a remote page names a local file: only files of the index are read")
        if index is not None:
            _confine(path, _as_url(index), url)
        if sha256 is not None:
            _check_sha256(path, sha256, url)
        return path
    if index is not None and urlsplit(_as_url(index)).scheme == "file":
        raise InputError("against", url, "a page on disk names a remote file: only files of the index are read")
    name = unquote(parts.path).rsplit("/", 1)[-1]
    if not name.endswith(".whl") or name.startswith(".") or any(c in name for c in "\0\\") or len(name) > 255:
        raise InputError("against", url, "the URL does not end with a plain wheel file name")
    target = workdir / name
    digest = _download_to(url, target, MAX_WHEEL_BYTES)
    if sha256 is not None and digest != sha256:
        raise InputError("against", url, f"sha256 {digest} is not the {sha256} the index page gives")
    return target


def _confine(path: Path, index_url: str, url: str) -> None:
    """A file a page on disk names must be inside the index: the directory given, or the
    one holding it when it is named ``simple`` (the files of a PEP 503 tree sit beside it)."""
    root = os.path.normpath(url2pathname(urlsplit(index_url).path))
    if os.path.basename(root) == "simple":
        root = os.path.dirname(root)
    if os.path.commonpath([root, os.path.normpath(path)]) != root:
        raise InputError("against", url, f"the index page names a file outside the index {root}")


def _check_sha256(path: Path, sha256: str, url: str) -> None:
    fd = open_wheel(path, url)
    try:
        digest = sha256_pread(fd)
    finally:
        os.close(fd)
    if digest != sha256:
        raise InputError("against", url, f"sha256 {digest} is not the {sha256} the index page gives")


def _open_url(url: str) -> urllib.response.addinfourl:
    if urlsplit(url).scheme not in ("http", "https"):
        raise InputError("against", url, "only http(s), file URLs and paths are read")
    try:
        response: urllib.response.addinfourl = urllib.request.urlopen(url, timeout=TIMEOUT_S)  # noqa: S310
        return response  # (the scheme is checked above)
    except urllib.error.HTTPError as exc:
        raise InputError("against", url, f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:  # a bad status line too
        reason = getattr(exc, "reason", exc)
        raise InputError("against", url, f"cannot fetch: {reason}") from None


def _download(url: str, limit: int) -> bytes:
    with _open_url(url) as response:
        data: bytes = _read_within(response, limit + 1, url)
    if len(data) > limit:
        raise InputError("against", url, f"larger than {limit} bytes")
    return data


def _read_within(response: urllib.response.addinfourl, limit: int, url: str) -> bytes:
    try:
        return response.read(limit)
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a timeout, a reset, a short body
        raise InputError("against", url, f"cannot fetch: {exc}") from None


def _download_to(url: str, target: Path, limit: int) -> str:
    """Stream ``url`` into ``target`` (created, never replaced) within ``limit`` bytes; its sha256."""
    digest = hashlib.sha256()
    size = 0
    with _open_url(url) as response, target.open("xb") as out:
        while chunk := _read_within(response, CHUNK, url):
            size += len(chunk)
            if size > limit:
                raise InputError("against", url, f"larger than {limit} bytes")
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


# --- the comparison -----------------------------------------------------------------------------


def compare(release: Release, installed: dict[str, tuple[str, int]], full: dict[str, str],
            skip: set[str]) -> list[TrustError]:
    """Each difference between the installed files (site-packages path -> sha256, size;
    ``full`` gives each one's path on disk) and the release, sorted by path; paths in
    ``skip`` (RECORD, what installers and adopt write) are not compared."""
    found: list[TrustError] = []
    for path in sorted((installed.keys() | release.files.keys()) - skip):
        where = full.get(path, path)
        mine, theirs = installed.get(path), release.files.get(path)
        if theirs is None:
            found.append(InstalledError("differs", where, "installed, but not a file of the published wheel"))
        elif mine is None:
            found.append(InstalledError("differs", where, "a file of the published wheel that is not installed"))
        elif mine != theirs:
            found.append(InstalledError("differs", where, f"not the published file (sha256 {mine[0][:16]}, "
                                        f"{mine[1]} bytes; published: sha256 {theirs[0][:16]}, {theirs[1]} bytes)"))
    return found


def summary(found: list[TrustError], source: str) -> InstalledError:
    """One error for every difference: the first few files named, the count, the release."""
    names = ", ".join(e.path for e in found[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return InstalledError("differs", found[0].path, f"{len(found)} installed file(s) differ from the published "
                          f"release {source} ({names}{more}): {found[0].detail}; not signing them (reinstall it)")
