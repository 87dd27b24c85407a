"""Reading wheels safely: the one wheel reader, and what a pass over a wheel found.

Input checks (:class:`WheelArchive`): a real zip, not truncated, no duplicate names, no
absolute or ``..`` names, no symlinks, no member that declares an absurd size (zip bomb),
a well-formed WHEEL and RECORD, and a file name (PEP 427 / the binary distribution format)
that agrees with the metadata.

Writing is elsewhere: :mod:`backend_packager.writer` copies, :mod:`backend_packager.rewrite`
runs copy, plan, seal and finish in that order.
"""

from __future__ import annotations

import email.parser
import re
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

from triton_backend_runtime.manifest import MANIFEST_FILENAME, Artifact

from . import entrypoints, records
from .errors import WheelError

#: A declared uncompressed size above this is refused before anything is inflated.
MAX_MEMBER_SIZE = 0xFFFFFFFF - 1
#: Deflate cannot compress better than ~1032:1; a member that claims more is a zip bomb.
MAX_DEFLATE_RATIO = 1100
#: Withdrawn signature files (the spec says tools must not add them); dropped on rewrite.
WITHDRAWN = ("RECORD.jws", "RECORD.p7s")
_WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


def normalize_name(name: str) -> str:
    """PEP 503 normalisation, with ``_`` as wheel file names use it."""
    return re.sub(r"[-_.]+", "_", name).lower()


@dataclass(frozen=True)
class WheelName:
    """A wheel file name split into its parts; tags are expanded (compressed tag sets)."""

    name: str
    version: str
    build: str | None
    tags: tuple[str, ...]

    @classmethod
    def parse(cls, filename: str) -> WheelName:
        match = _WHEEL_NAME.match(filename)
        if not match:
            raise WheelError("filename", filename, "not a wheel file name (name-version-python-abi-platform.whl)")
        tags = tuple(
            f"{py}-{abi}-{plat}"
            for py in match["py"].split(".")
            for abi in match["abi"].split(".")
            for plat in match["plat"].split(".")
        )
        return cls(match["name"], match["version"], match["build"], tags)


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


class WheelArchive:
    """A validated input wheel. Holds the open zip: its state is real."""

    def __init__(self, path: Path, *, check_name: bool = True) -> None:
        """Open and check ``path``; ``check_name=False`` leaves the name check to the caller
        (``verify`` reports a renamed wheel as one finding among others)."""
        self.path = path
        self.display = str(path)
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise WheelError("not-zip", self.display, f"not a zip file, or truncated ({exc})") from None
        try:
            self.members = self._members()
            self.dist_info = self._dist_info()
            self.wheel_name = WheelName.parse(path.name)
            self.wheel_meta = self._headers("WHEEL")
            self.metadata = self._headers("METADATA")
            self.record = records.parse(self._text("RECORD"), f"{self.display}!{self.dist_info}/RECORD")
            problems = self.name_problems()
            if check_name and problems:
                raise WheelError("name-mismatch", self.display, "; ".join(problems))
        except BaseException:
            self._zip.close()
            raise

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> WheelArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def where(self, member: str) -> str:
        return f"{self.display}!{member}"

    def _members(self) -> list[Member]:
        seen: set[str] = set()
        members = []
        for info in self._zip.infolist():
            member = Member(info.filename, info.compress_type, info.CRC, info.compress_size, info.file_size,
                            info.header_offset, info.external_attr, info.date_time)
            self._check_member(member, info, seen)
            seen.add(member.name)
            members.append(member)
        return members

    def _check_member(self, m: Member, info: zipfile.ZipInfo, seen: set[str]) -> None:
        where = self.where(m.name)
        if m.name in seen:
            raise WheelError("duplicate", where, "duplicate member name")
        parts = m.name.rstrip("/").split("/")
        if m.name.startswith("/") or "\\" in m.name or ".." in parts or re.match(r"^[A-Za-z]:", m.name):
            raise WheelError("unsafe-name", where, "absolute or '..' member name")
        if stat.S_ISLNK(m.external_attr >> 16):
            raise WheelError("symlink", where, "symlink members are not allowed in a wheel")
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

    def read(self, name: str) -> bytes | None:
        """A small member's bytes, or None when absent."""
        try:
            return self._zip.read(name)
        except KeyError:
            return None
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise WheelError("member", self.where(name), f"cannot read member: {exc}") from None

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

    def name_problems(self) -> list[str]:
        """File name, dist-info name, METADATA and WHEEL must all tell the same story."""
        name, version = self.metadata["Name"], self.metadata["Version"]
        expected = f"{normalize_name(name)}-{version}.dist-info"
        problems = []
        if normalize_name(self.wheel_name.name) != normalize_name(name):
            problems.append(f"file name says {self.wheel_name.name!r}, METADATA says {name!r}")
        if self.wheel_name.version != version:
            problems.append(f"file name says version {self.wheel_name.version}, METADATA says {version}")
        if normalize_name(self.dist_info) != normalize_name(expected):
            problems.append(f"dist-info directory {self.dist_info!r} does not match {name} {version}")
        tags = sorted(self.wheel_meta.get_all("Tag") or [])
        if sorted(self.wheel_name.tags) != tags:
            problems.append(f"file name tags {sorted(self.wheel_name.tags)} differ from WHEEL tags {tags}")
        return problems

    def entry_points(self) -> entrypoints.EntryPoints:
        name = f"{self.dist_info}/entry_points.txt"
        data = self.read(name)
        return entrypoints.parse(data.decode("utf-8"), self.where(name)) if data else {}


def dist_info_name(name: str, version: str) -> str:
    return f"{normalize_name(name)}-{version}.dist-info"


def manifest_member(dist_info: str) -> str:
    return f"{dist_info}/{MANIFEST_FILENAME}"
