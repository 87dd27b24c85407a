"""Wheels built byte by byte, so that each can break one ZIP rule on purpose.

:func:`wheel_bytes` writes a wheel whose members, local headers and end records are all
under the caller's control (:class:`Member` knobs), independently of the packager's own
writer: a bug shared by both would otherwise hide itself. :data:`CASES` names the crafted
inputs of the seed corpus, each with the reason code the packager must give it (or
``None`` for a wheel that must be accepted).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

LOCAL = struct.Struct("<IHHHHHIIIHH")
CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")


@dataclass
class Member:
    """One member, and how its bytes may lie about it."""

    name: str
    data: bytes
    mode: int = 0o100644
    method: int = 8
    flags: int = 0
    #: Overrides for the local header only (None: agree with the central directory).
    local_name: bytes | None = None
    local_crc: int | None = None
    local_method: int | None = None
    local_size: int | None = None
    raw_name: bytes | None = None  # the name's bytes in both headers (for non-UTF-8 names)
    body: bytes | None = None  # compressed bytes to store instead of the real ones
    declared_size: int | None = None


@dataclass
class Archive:
    members: list[Member]
    leading: bytes = b""
    trailing: bytes = b""
    #: Make the second member's local header start inside the first member's data.
    overlap: bool = False
    extra_rows: list[str] = field(default_factory=list)


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def record_row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def base_members(name: str = "demo", version: str = "1.0", payload: dict[str, bytes] | None = None) -> list[Member]:
    """A valid pure wheel: a package, METADATA, WHEEL; RECORD is added by :func:`wheel_bytes`."""
    dist = f"{name}-{version}.dist-info"
    files = payload if payload is not None else {f"{name}/__init__.py": b"VALUE = 1\n"}
    members = [Member(path, data) for path, data in files.items()]
    members.append(Member(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()))
    members.append(Member(f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: zipgen\nRoot-Is-Purelib: true\n"
                                           b"Tag: py3-none-any\n"))
    return members


def wheel_bytes(archive: Archive, *, record: bool = True) -> bytes:
    """The archive's bytes; RECORD (listing every member) is appended unless ``record`` is False."""
    members = list(archive.members)
    dist = next(m.name.split("/")[0] for m in members if ".dist-info/" in m.name)
    if record:
        rows = [record_row(m.name, m.data) for m in members] + archive.extra_rows + [f"{dist}/RECORD,,"]
        members.append(Member(f"{dist}/RECORD", ("\n".join(rows) + "\n").encode()))
    out = bytearray(archive.leading)
    central = bytearray()
    for index, m in enumerate(members):
        offset = len(out) - len(archive.leading)
        if archive.overlap and index == 1:
            offset -= 4
            del out[-4:]
        out += _local(m)
        central += _central(m, offset)
    cd_offset = len(out) - len(archive.leading)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), cd_offset, 0)
    return bytes(out + archive.trailing)


def _body(m: Member) -> bytes:
    if m.body is not None:
        return m.body
    return _deflate(m.data) if m.method == 8 else m.data


def _name(m: Member) -> bytes:
    if m.raw_name is not None:
        return m.raw_name
    return m.name.encode("utf-8")


def _flags(m: Member) -> int:
    return m.flags | (0x800 if not _name(m).isascii() else 0)


def _local(m: Member) -> bytes:
    name = m.local_name if m.local_name is not None else _name(m)
    body = _body(m)
    crc = m.local_crc if m.local_crc is not None else zlib.crc32(m.data)
    method = m.local_method if m.local_method is not None else m.method
    size = m.local_size if m.local_size is not None else (m.declared_size or len(m.data))
    return LOCAL.pack(0x04034B50, 20, _flags(m), method, 0, 0x21, crc, len(body), size, len(name), 0) + name + body


def _central(m: Member, offset: int) -> bytes:
    name = _name(m)
    size = m.declared_size if m.declared_size is not None else len(m.data)
    return CENTRAL.pack(0x02014B50, 3 << 8 | 20, 20, _flags(m), m.method, 0, 0x21, zlib.crc32(m.data),
                        len(_body(m)), size, len(name), 0, 0, 0, 0, m.mode << 16, offset) + name


def _with(index: int, **changes: object) -> Callable[[list[Member]], list[Member]]:
    def edit(members: list[Member]) -> list[Member]:
        out = list(members)
        out[index] = replace(out[index], **changes)  # type: ignore[arg-type]
        return out
    return edit


@dataclass(frozen=True)
class Case:
    """One crafted wheel: how to make it, and the reason code it must get (None: accepted)."""

    name: str
    code: str | None
    build: Callable[[], bytes]


def _case(members: Callable[[list[Member]], list[Member]] | None = None, **archive: object) -> Callable[[], bytes]:
    def build() -> bytes:
        base = base_members()
        return wheel_bytes(Archive(members(base) if members else base, **archive))  # type: ignore[arg-type]
    return build


def _dist_member(leaf: str, **changes: object) -> Callable[[list[Member]], list[Member]]:
    def edit(members: list[Member]) -> list[Member]:
        return [replace(m, **changes) if m.name.endswith(f".dist-info/{leaf}") else m  # type: ignore[arg-type]
                for m in members]
    return edit


def _record_text(text: str) -> Callable[[], bytes]:
    def build() -> bytes:
        members = base_members()
        members.append(Member("demo-1.0.dist-info/RECORD", text.encode()))
        return wheel_bytes(Archive(members), record=False)
    return build


_BAD_DEFLATE = b"\xff\xff\xff\xff" * 4
#: A raw deflate stream that zlib (and so pip) refuses ("invalid literal/lengths set": an
#: incomplete Huffman code) and ISA-L inflates to nothing: a mutated zlib stream that
#: differential fuzzing of the two inflaters found. Stored as the body of an empty member, it
#: is refused only by an inflater as strict as the installer's.
LENIENT_DEFLATE = bytes.fromhex("adc2893f130a0000605a3ae48ccccd9a30cdca31e49ca33fb0396631349b37e7422515e5c87d8c2c39cad6"
                                "438eada427cc32229e4a981c25")

CASES: tuple[Case, ...] = (
    Case("valid", None, _case()),
    Case("zeros-after-64-bytes", None, _case(lambda ms: [*ms, Member("demo/zeros.bin", b"x" * 64 + bytes(8 << 20))])),
    Case("trailing-data", None, _case(trailing=b"TRAILING" * 64)),
    Case("leading-data", "wheel.leading-data", _case(leading=b"#!/bin/sh\nexit 0\n")),
    Case("local-name-differs", "wheel.local-header", _case(_with(0, local_name=b"demo/__init__.pz"))),
    Case("local-crc-differs", "wheel.local-header", _case(_with(0, local_crc=0x12345678))),
    Case("local-method-differs", "wheel.local-header", _case(_with(0, local_method=0))),
    Case("local-size-differs", "wheel.local-header", _case(_with(0, local_size=3))),
    Case("overlapping-members", "wheel.overlap", _case(overlap=True)),
    Case("symlink-member", "wheel.symlink", _case(_with(0, mode=0o120777))),
    Case("fifo-member", "wheel.special-file", _case(_with(0, mode=0o010644))),
    Case("device-member", "wheel.special-file", _case(_with(0, mode=0o020644))),
    Case("setuid-member", "wheel.setuid", _case(_with(0, mode=0o104755))),
    Case("encrypted-member", "wheel.encrypted", _case(_with(0, flags=1))),
    Case("unknown-method", "wheel.compression", _case(_with(0, method=99, local_method=99))),
    Case("corrupt-deflate-payload", "wheel.corrupt", _case(_with(0, body=_BAD_DEFLATE))),
    Case("deflate-only-isal-accepts", "wheel.corrupt", _case(
        lambda ms: [*ms, Member("demo/empty.py", b"", body=LENIENT_DEFLATE)])),
    Case("corrupt-deflate-metadata", "wheel.member", _case(_dist_member("METADATA", body=_BAD_DEFLATE))),
    Case("non-utf8-entry-points", "wheel.malformed", _case(
        lambda ms: [*ms, Member("demo-1.0.dist-info/entry_points.txt", b"[triton.backends]\nx = \xff\xfe\n")])),
    Case("non-utf8-name-with-utf8-flag", "wheel.not-zip", _case(_with(0, raw_name=b"demo/\xff\xfe.py", flags=0x800))),
    Case("nul-in-name", "wheel.unsafe-name", _case(_with(0, raw_name=b"demo/a.py\x00.txt"))),
    Case("record-size-5000-digits", "wheel.record", _record_text("demo/__init__.py,," + "9" * 5000 + "\n")),
    Case("record-field-128k", "wheel.record", _record_text("demo/__init__.py," + "a" * (132 << 10) + ",1\n")),
    Case("zip-bomb-ratio", "wheel.zip-bomb", _case(_with(0, declared_size=1 << 31))),
    Case("not-a-zip", "wheel.not-zip", lambda: b"this is not a zip file at all" * 10),
)


def case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)
