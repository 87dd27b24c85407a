"""Reading wheels safely: the one wheel reader, and what a pass over a wheel found.

Input checks (:class:`WheelArchive`): a real zip, not truncated, no duplicate names, no
absolute or ``..`` names, no symlinks, no member that declares an absurd size (zip bomb),
a well-formed WHEEL and RECORD, and a file name (PEP 427 / the binary distribution format)
that agrees with the metadata.

Writing is elsewhere: :mod:`backend_packager.wheel.writer` copies, :mod:`backend_packager.rewrite`
runs copy, plan, seal and finish in that order.
"""

from __future__ import annotations

import dataclasses
import email.parser
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import IO, BinaryIO

from triton_backend_runtime.base import (
    SIGSTORE_BUNDLE_FILENAME,
    RegularFileError,
    canonicalize_name,
    describe,
    open_regular,
)
from triton_backend_runtime.manifest import MANIFEST_FILENAME, Artifact

from ..base import InputError, WheelError
from ..formats import entrypoints, records, zipformat

__all__ = [
    "MAX_DEFLATE_RATIO", "MAX_DIRECTORY", "MAX_MEMBERS", "MAX_MEMBER_SIZE", "MAX_METADATA_SIZE", "MAX_TAG_PARTS",
    "Member", "WITHDRAWN", "WheelArchive", "WheelContents", "WheelName", "ZIP_ERRORS", "dist_info_name",
    "bundle_member", "escape_name", "manifest_member", "open_wheel", "open_zip", "read_end"
]

#: A declared uncompressed size above this is refused before anything is inflated.
MAX_MEMBER_SIZE = 0xFFFFFFFF - 1
#: Deflate cannot compress better than ~1032:1; a member that claims more is a zip bomb.
MAX_DEFLATE_RATIO = 1100
#: Central directory caps, checked before zipfile reads it (each entry costs ~0.5 KB there).
MAX_MEMBERS = 200_000
MAX_DIRECTORY = 64 << 20
#: Most bytes a member read whole (RECORD, METADATA, the manifest...) may hold.
MAX_METADATA_SIZE = 64 << 20
#: Withdrawn signature files (the spec says tools must not add them); dropped on rewrite.
WITHDRAWN = ("RECORD.jws", "RECORD.p7s")
#: Most dot-separated parts in a file name's compressed tag sets (expanded, they multiply).
MAX_TAG_PARTS = 64


def escape_name(name: str) -> str:
    """A project name as wheel and ``.dist-info`` names spell it (the binary distribution
    format's escaping): PEP 503 normalised, with ``_`` for ``-``."""
    return canonicalize_name(name).replace("-", "_")


@dataclass(frozen=True)
class WheelName:
    """A wheel file name split into its parts; tags are expanded (compressed tag sets)."""

    name: str
    version: str
    build: str | None
    tags: tuple[str, ...]

    @classmethod
    def parse(cls, filename: str) -> WheelName:
        """``packaging.utils.parse_wheel_filename`` (the binary distribution format); name and
        version are kept as the file name spells them, for messages and comparisons."""
        from packaging.utils import InvalidWheelFilename, parse_wheel_filename

        parts = filename.removesuffix(".whl").split("-")
        if len(parts) in (5, 6) and sum(p.count(".") + 1 for p in parts[-3:]) > MAX_TAG_PARTS:
            raise WheelError("filename", filename, f"more than {MAX_TAG_PARTS} parts in the compressed tag sets")
        try:
            _, _, build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename as exc:
            raise WheelError("filename", filename, f"not a wheel file name "
                             f"(name-version[-build]-python-abi-platform.whl): {str(exc).split(':')[0]}") from None
        return cls(parts[0], parts[1], parts[2] if build else None, tuple(sorted(str(tag) for tag in tags)))


@dataclass(frozen=True)
class Member:
    """One member of the input, from its central directory entry."""

    name: str
    method: int
    crc: int
    compress_size: int
    file_size: int
    header_offset: int
    external_attr: int
    date_time: tuple[int, int, int, int, int, int]
    #: Where the member's data starts (after its local header); set once the header is checked.
    data_offset: int = -1

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


@dataclass
class WheelContents:
    """What one pass over a wheel found; handed to the plan that builds the manifest.

    ``artifacts`` holds every file the output keeps unchanged (payload and kept
    ``.dist-info``), sorted by path, with ELF facts on native ones: directories and the
    files installers write (``is_installer_file``) are left out, as the manifest leaves them.
    """

    name: str
    version: str
    tags: list[str]
    dist_info: str
    names: list[str]
    artifacts: list[Artifact]
    entry_points: entrypoints.EntryPoints
    metadata: Message
    existing_manifest: bytes | None
    read_member: Callable[[str], bytes | None]
    warnings: list[str] = field(default_factory=list)
    #: Where RECORD or the file name's tags disagree with the contents; a rewrite refuses
    #: them unless the plan's provenance records them (``migrate --rewrite-record``).
    discrepancies: list[records.Discrepancy] = field(default_factory=list)


class WheelArchive:
    """A validated input wheel. Holds the open zip: its state is real."""

    def __init__(self, path: Path, *, check_name: bool = True, fd: int | None = None) -> None:
        """Open and check ``path``; ``check_name=False`` leaves the name check to the caller
        (``verify`` reports a renamed wheel as one finding among others). ``fd``: a
        descriptor the caller already opened on ``path`` as a regular file (a confined
        source of ``mirror``); it is duplicated, never closed here. Every read of the wheel,
        here and by :class:`~backend_packager.wheel.writer.WheelWriter`, is from this one
        descriptor: the file checked is the file read."""
        self.path = path
        self.display = str(path)
        #: Problems the output repairs rather than refuses (trailing data), one line each.
        self.warnings: list[str] = []
        self.fd = os.dup(fd) if fd is not None else open_wheel(path, self.display)
        try:
            end = self._check_end()
            self._zip = _zip_of(self.fd, self.display)
        except BaseException:
            os.close(self.fd)
            raise
        try:
            self.members = self._members(end)
            self.dist_info = self._dist_info()
            self.wheel_name = WheelName.parse(path.name)
            self.wheel_meta = self._headers("WHEEL")
            self.metadata = self._headers("METADATA")
            self.record = records.parse(self._text("RECORD"), f"{self.display}!{self.dist_info}/RECORD")
            problems = self.name_problems()
            if check_name and problems:
                raise WheelError("name-mismatch", self.display, "; ".join(problems))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._zip.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> WheelArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def where(self, member: str) -> str:
        return f"{self.display}!{member}"

    def _check_end(self) -> zipformat.End:
        """Bytes after the end record are trailing data: not copied, and said."""
        end, size = _read_end_fd(self.fd, self.display)
        if end.eocd_end < size:
            self.warnings.append(f"{self.display}: {size - end.eocd_end} bytes of trailing data after the end "
                                 "of the archive: not copied to the output")
        return end

    def _members(self, end: zipformat.End) -> list[Member]:
        infos = self._zip.infolist()
        if len(infos) != end.count:
            raise WheelError("corrupt", self.display, f"the end record says {end.count} entries, the central "
                             f"directory holds {len(infos)}")
        seen: set[str] = set()
        members = []
        for info in infos:
            member = Member(info.filename, info.compress_type, info.CRC, info.compress_size, info.file_size,
                            info.header_offset, info.external_attr, info.date_time)
            self._check_member(member, info, seen)
            seen.add(member.name)
            members.append(member)
        return _with_data_offsets(self.fd, self.display, members, self._zip.start_dir, self.where)

    def _check_member(self, m: Member, info: zipfile.ZipInfo, seen: set[str]) -> None:
        where = self.where(m.name)
        if m.name in seen:
            raise WheelError("duplicate", where, "duplicate member name")
        parts = m.name.rstrip("/").split("/")
        if m.name.startswith("/") or "\\" in m.name or ".." in parts or re.match(r"^[A-Za-z]:", m.name):
            raise WheelError("unsafe-name", where, "absolute or '..' member name")
        if info.orig_filename != info.filename:
            # zipfile cuts a name at NUL; the cut name is not the one the archive holds.
            raise WheelError("unsafe-name", where, "member name holds a NUL byte")
        mode = m.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise WheelError("symlink", where, "symlink members are not allowed in a wheel")
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise WheelError("special-file", where, f"member is a device, FIFO or socket (mode {mode:o})")
        if mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
            raise WheelError("setuid", where, f"member has a setuid, setgid or sticky bit (mode {mode:o})")
        if info.flag_bits & 0x1:
            raise WheelError("encrypted", where, "encrypted members are not allowed")
        if m.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise WheelError("compression", where, f"unsupported compression method {m.method}")
        absurd = m.file_size > MAX_MEMBER_SIZE or (
            m.method == zipfile.ZIP_DEFLATED and m.file_size > MAX_DEFLATE_RATIO * m.compress_size + 1024
        ) or (m.method == zipfile.ZIP_STORED and m.file_size != m.compress_size)
        if absurd:
            raise WheelError(
                "zip-bomb", where,
                f"declares {m.file_size} bytes from {m.compress_size} compressed: refusing (zip bomb?)",
            )

    def _dist_info(self) -> str:
        tops = {m.name.split("/")[0] for m in self.members if m.name.split("/")[0].endswith(".dist-info")}
        if len(tops) != 1:
            found = ", ".join(sorted(tops)) or "none"
            raise WheelError("dist-info", self.display, f"expected exactly one .dist-info directory, found {found}")
        return tops.pop()

    def read(self, name: str, limit: int = MAX_METADATA_SIZE) -> bytes | None:
        """A small member's bytes (at most ``limit``), or None when absent."""
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            return None
        if info.file_size > limit:
            raise WheelError("limit", self.where(name), f"member of {info.file_size} bytes: over the limit of "
                             f"{limit} for a file read whole")
        try:
            return self._zip.read(info)
        except ZIP_ERRORS as exc:
            # zipfile raises each of these for some corrupt member: every one is this member's problem.
            raise WheelError("member", self.where(name), f"cannot read member: {describe(exc)}") from None

    def open_member(self, name: str) -> IO[bytes]:
        """A stream of one member's bytes, for reading in chunks (zipfile checks its CRC and
        size at the end); its exceptions are the caller's to map (:data:`ZIP_ERRORS`)."""
        return self._zip.open(name)

    def _text(self, leaf: str) -> str:
        name = f"{self.dist_info}/{leaf}"
        data = self.read(name)
        if data is None:
            raise WheelError("missing", self.where(name), f"the wheel has no {leaf}")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise WheelError("malformed", self.where(name), f"{leaf} is not UTF-8") from None

    def _headers(self, leaf: str) -> Message:
        text = self._text(leaf)
        message = email.parser.HeaderParser().parsestr(text)
        required = {"WHEEL": ("Wheel-Version", "Tag"), "METADATA": ("Name", "Version")}[leaf]
        for header in required:
            if not message.get(header):
                raise WheelError("malformed", self.where(f"{self.dist_info}/{leaf}"), f"{leaf} has no {header}")
        return message

    def tag_problem(self) -> str | None:
        """Why the file name's tags are not WHEEL's, or None when they agree."""
        tags = sorted(self.wheel_meta.get_all("Tag") or [])
        if sorted(self.wheel_name.tags) != tags:
            return f"file name tags {sorted(self.wheel_name.tags)} differ from WHEEL tags {tags}"
        return None

    def name_problems(self, *, tags: bool = True) -> list[str]:
        """File name, dist-info name, METADATA and WHEEL (``tags``) must all tell the same story."""
        name, version = self.metadata["Name"], self.metadata["Version"]
        expected = f"{escape_name(name)}-{version}.dist-info"
        problems = []
        if escape_name(self.wheel_name.name) != escape_name(name):
            problems.append(f"file name says {self.wheel_name.name!r}, METADATA says {name!r}")
        if self.wheel_name.version != version:
            problems.append(f"file name says version {self.wheel_name.version}, METADATA says {version}")
        if escape_name(self.dist_info) != escape_name(expected):
            problems.append(f"dist-info directory {self.dist_info!r} does not match {name} {version}")
        tag_problem = self.tag_problem() if tags else None
        if tag_problem:
            problems.append(tag_problem)
        return problems

    def entry_points(self) -> entrypoints.EntryPoints:
        name = f"{self.dist_info}/entry_points.txt"
        data = self.read(name)
        if not data:
            return {}
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WheelError("malformed", self.where(name), "entry_points.txt is not UTF-8") from None
        return entrypoints.parse(text, self.where(name))


#: What zipfile raises for one malformed archive or member: each is that input's problem.
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError, NotImplementedError, RuntimeError,
              UnicodeDecodeError, struct.error, OverflowError)


def open_wheel(path: Path, display: str, *, follow_symlinks: bool = False) -> int:
    """A descriptor on the wheel ``path``: opened without following a final symlink and
    without blocking, then checked by ``fstat`` to be a regular file. A wheel is hostile
    input: a ``*.whl`` symlink (to a private key, say) is ``input.symlink``, never read;
    anything else that is no regular file is ``wheel.<reason>``. ``follow_symlinks`` is for
    ``scan``, a report that reads what a path names, as it does for a ``.so``."""
    try:
        fd = open_regular(path, follow_symlinks=follow_symlinks)
    except RegularFileError as exc:
        if exc.reason == "symlink":
            raise InputError("symlink", display, "a symbolic link: only a regular file is read as a wheel "
                             "(name the file it points to, if it is one)") from None
        raise WheelError(exc.reason, display, exc.detail) from None
    try:
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_end(path: Path, display: str) -> tuple[zipformat.End, int]:
    """The end records of ``path`` and its size (:func:`open_wheel`'s rules)."""
    fd = open_wheel(path, display)
    try:
        return _read_end_fd(fd, display)
    finally:
        os.close(fd)


def _read_end_fd(fd: int, display: str) -> tuple[zipformat.End, int]:
    """The end records and size of the open wheel ``fd``, read before :mod:`zipfile` reads
    anything: zipfile keeps every central directory entry in memory, so their number and
    size are capped first."""
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - zipformat.END_SEARCH)
        end = zipformat.find_end(os.pread(fd, size - start, start), start)
    except OSError as exc:
        raise WheelError("unreadable", display, f"cannot read: {exc.strerror or exc}") from None
    if end is None:
        raise WheelError("not-zip", display, "not a zip file, or truncated (no end of central directory)")
    if end.count > MAX_MEMBERS or end.cd_size > MAX_DIRECTORY:
        raise WheelError("limit", display, f"central directory of {end.count} entries in {end.cd_size} "
                         f"bytes: over the limit of {MAX_MEMBERS} entries or {MAX_DIRECTORY} bytes")
    return end, size


def open_zip(path: Path, display: str, *, follow_symlinks: bool = False) -> zipfile.ZipFile:
    """``path`` opened by zipfile after :func:`read_end`, through one descriptor
    (:func:`open_wheel`), every exception of zipfile's mapped to a :class:`WheelError`."""
    fd = open_wheel(path, display, follow_symlinks=follow_symlinks)
    try:
        _read_end_fd(fd, display)
        return _zip_of(fd, display)
    finally:
        os.close(fd)


class _OwnZip(zipfile.ZipFile):
    """A zip over a stream it owns: closing the zip closes the stream (zipfile leaves a
    stream it was handed open)."""

    def close(self) -> None:
        stream = self.fp
        try:
            super().close()
        finally:
            if stream is not None:
                stream.close()


def _zip_of(fd: int, display: str) -> zipfile.ZipFile:
    """zipfile over a stream of its own on a duplicate of ``fd`` (the caller keeps ``fd``)."""
    stream = os.fdopen(os.dup(fd), "rb")
    try:
        return _OwnZip(stream)
    except OSError as exc:
        stream.close()
        raise WheelError("unreadable", display, f"cannot read: {exc.strerror or exc}") from None
    except ZIP_ERRORS as exc:
        stream.close()
        # Each is zipfile's word for a malformed central directory (a bad UTF-8 name, a bad extra...).
        raise WheelError("not-zip", display, f"not a zip file, or corrupt ({describe(exc)})") from None
    except BaseException:
        stream.close()
        raise


def _with_data_offsets(fd: int, display: str, members: list[Member], directory_at: int,
                       where: Callable[[str], str]) -> list[Member]:
    """Each member with where its data starts, after checking what strict installers check:
    no bytes before the first member, local headers that agree with the central directory
    (name, flags, method, CRC, sizes), members that neither overlap each other nor the
    central directory."""
    by_offset = sorted(members, key=lambda m: m.header_offset)
    if by_offset and by_offset[0].header_offset != 0:
        raise WheelError("leading-data", display, f"{by_offset[0].header_offset} bytes before the first member")
    placed: dict[str, Member] = {}
    previous_end = 0
    with open(fd, "rb", closefd=False) as stream:
        for m in by_offset:
            if m.header_offset < previous_end:
                raise WheelError("overlap", where(m.name), "member overlaps the one before it")
            stream.seek(m.header_offset)
            data_offset = _check_local(stream, m, where(m.name))
            previous_end = data_offset + m.compress_size
            placed[m.name] = dataclasses.replace(m, data_offset=data_offset)
    if previous_end > directory_at:
        raise WheelError("overlap", display, "member data overlaps the central directory")
    return [placed[m.name] for m in members]


def _check_local(stream: BinaryIO, m: Member, where: str) -> int:
    """The local header at ``stream``'s position checked against ``m``; the data offset.
    Reads the header and its name only (the name's length is in the header)."""
    size = zipformat.LOCAL_HEADER.size
    raw = stream.read(size)
    if len(raw) < size:
        raise WheelError("truncated", where, "local header past the end of the file (truncated wheel)")
    sig, _, flags, method, _, _, crc, csize, usize, name_len, extra_len = zipformat.LOCAL_HEADER.unpack(raw)
    if sig != zipformat.LOCAL_SIGNATURE:
        raise WheelError("local-header", where, "bad local header signature")
    name = stream.read(name_len)
    encoding = "utf-8" if flags & zipformat.FLAG_UTF8 else "cp437"
    if name.decode(encoding, errors="replace") != m.name:
        raise WheelError("local-header", where, "the local header names another file than the central directory")
    mismatches = [label for label, local, central in (
        ("method", method, m.method), ("encryption", flags & 1, 0),
    ) if local != central]
    if not flags & 0x8:  # with a data descriptor the local CRC and sizes may be zero
        mismatches += [label for label, local, central in (
            ("CRC", crc, m.crc), ("compressed size", csize, m.compress_size), ("size", usize, m.file_size),
        ) if local != central]
    if mismatches:
        raise WheelError("local-header", where, f"local header disagrees with the central directory on "
                         f"{', '.join(mismatches)}")
    data_offset: int = m.header_offset + size + name_len + extra_len
    return data_offset


def dist_info_name(name: str, version: str) -> str:
    return f"{escape_name(name)}-{version}.dist-info"


def manifest_member(dist_info: str) -> str:
    return f"{dist_info}/{MANIFEST_FILENAME}"


def bundle_member(dist_info: str) -> str:
    """Where the manifest's keyless signature (a Sigstore bundle) sits beside it."""
    return f"{dist_info}/{SIGSTORE_BUNDLE_FILENAME}"
