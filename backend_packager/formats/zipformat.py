"""The bytes of a ZIP archive (APPNOTE 6.3): local headers, central directory, end records.

The wheel writer copies members as raw compressed bytes, so it writes these structures
itself instead of going through :mod:`zipfile`. What strict installers check, and what this
module therefore guarantees: no data descriptors (bit 3 is never set; CRC and sizes are in
the local header and agree with the central directory), no ZIP64 extra in a local header
(members of 4 GiB or more are refused), ZIP64 end records only when offsets need them, and
nothing after the end of central directory record.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

__all__ = [
    "CENTRAL_HEADER", "CENTRAL_SIGNATURE", "DEFLATED", "DOS_EPOCH", "END_SEARCH", "EOCD_SIGNATURE", "End", "Entry",
    "FLAG_UTF8", "LOCAL_HEADER", "LOCAL_SIGNATURE", "MAX_32", "STORED", "ZIP64_EOCD_SIGNATURE",
    "ZIP64_LOCATOR_SIGNATURE", "central_header", "dos_datetime", "end_records", "find_end", "local_header",
    "local_header_size", "normal_mode"
]

LOCAL_SIGNATURE = 0x04034B50
CENTRAL_SIGNATURE = 0x02014B50
EOCD_SIGNATURE = 0x06054B50
ZIP64_EOCD_SIGNATURE = 0x06064B50
ZIP64_LOCATOR_SIGNATURE = 0x07064B50
LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
CENTRAL_HEADER = struct.Struct("<IHHHHHHIIIHHHHHII")
STORED, DEFLATED = 0, 8
FLAG_UTF8 = 0x800
MAX_32 = 0xFFFFFFFF
#: 1980-01-01T00:00:00Z, the earliest time a DOS timestamp can hold.
DOS_EPOCH = 315532800
_MADE_BY_UNIX = 3 << 8 | 20


@dataclass(frozen=True)
class Entry:
    """One member as written: enough for both its local and its central header."""

    name: str
    method: int
    crc: int
    compress_size: int
    file_size: int
    dos_date: int
    dos_time: int
    external_attr: int
    offset: int

    @property
    def encoded_name(self) -> bytes:
        return self.name.encode("utf-8")

    @property
    def flags(self) -> int:
        return FLAG_UTF8 if not self.name.isascii() else 0


@dataclass(frozen=True)
class End:
    """What the end records of an archive say: where the central directory is, how big, how
    many entries, and where the end of central directory record itself ends."""

    count: int
    cd_offset: int
    cd_size: int
    eocd_end: int


#: The end of central directory record is 22 bytes plus a comment of at most 65,535.
END_SEARCH = 22 + 0xFFFF


def find_end(tail: bytes, tail_offset: int) -> End | None:
    """The end records found in ``tail`` (the last :data:`END_SEARCH` bytes of the file,
    which start at ``tail_offset``), or None. Searched from the back, as readers do."""
    pos = tail.rfind(struct.pack("<I", EOCD_SIGNATURE))
    if pos < 0 or len(tail) - pos < 22:
        return None
    _, _, _, _, count, cd_size, cd_offset, comment = struct.unpack_from("<IHHHHIIH", tail, pos)
    end = End(count, cd_offset, cd_size, tail_offset + pos + 22 + comment)
    if pos >= 20 and struct.unpack_from("<I", tail, pos - 20)[0] == ZIP64_LOCATOR_SIGNATURE:
        (zip64_at,) = struct.unpack_from("<Q", tail, pos - 12)
        rel = zip64_at - tail_offset
        if 0 <= rel <= len(tail) - 56 and struct.unpack_from("<I", tail, rel)[0] == ZIP64_EOCD_SIGNATURE:
            count, _, cd_size, cd_offset = struct.unpack_from("<QQQQ", tail, rel + 24)
            end = End(count, cd_offset, cd_size, end.eocd_end)
    return end


def normal_mode(external_attr: int, is_dir: bool) -> int:
    """The external attributes a member is written with: 0755 directories, and files 0755
    when any execute bit was set, else 0644. No special file type, setuid or sticky bit
    survives a rewrite."""
    if is_dir:
        return (0o40755 << 16) | 0x10
    executable = (external_attr >> 16) & 0o111
    return (0o100755 if executable else 0o100644) << 16


def dos_datetime(epoch: int) -> tuple[int, int]:
    """(date, time) of a Unix time in DOS format, clipped to 1980-01-01 (the ZIP minimum)."""
    t = time.gmtime(max(epoch, DOS_EPOCH))
    date = (t.tm_year - 1980) << 9 | t.tm_mon << 5 | t.tm_mday
    return date, t.tm_hour << 11 | t.tm_min << 5 | t.tm_sec // 2


def local_header(entry: Entry) -> bytes:
    name = entry.encoded_name
    return LOCAL_HEADER.pack(
        LOCAL_SIGNATURE, 20, entry.flags, entry.method, entry.dos_time, entry.dos_date,
        entry.crc, entry.compress_size, entry.file_size, len(name), 0,
    ) + name


def local_header_size(name: str) -> int:
    return LOCAL_HEADER.size + len(name.encode("utf-8"))


def central_header(entry: Entry) -> bytes:
    name = entry.encoded_name
    extra = b""
    offset = entry.offset
    needed = 20
    if offset >= MAX_32:
        # Only the offset can overflow here (member sizes are capped below 4 GiB).
        extra = struct.pack("<HHQ", 0x0001, 8, offset)
        offset = MAX_32
        needed = 45
    return CENTRAL_HEADER.pack(
        CENTRAL_SIGNATURE, _MADE_BY_UNIX, needed, entry.flags, entry.method, entry.dos_time, entry.dos_date,
        entry.crc, entry.compress_size, entry.file_size, len(name), len(extra), 0, 0, 0,
        entry.external_attr, offset,
    ) + name + extra


def end_records(count: int, cd_offset: int, cd_size: int) -> bytes:
    """End of central directory, preceded by the ZIP64 records when the numbers need them."""
    out = b""
    if count >= 0xFFFF or cd_offset >= MAX_32 or cd_size >= MAX_32:
        zip64_offset = cd_offset + cd_size
        out += struct.pack("<IQHHIIQQQQ", ZIP64_EOCD_SIGNATURE, 44, _MADE_BY_UNIX, 45, 0, 0,
                           count, count, cd_size, cd_offset)
        out += struct.pack("<IIQI", ZIP64_LOCATOR_SIGNATURE, 0, zip64_offset, 1)
        count, cd_offset, cd_size = min(count, 0xFFFF), min(cd_offset, MAX_32), min(cd_size, MAX_32)
    return out + struct.pack("<IHHHHIIH", EOCD_SIGNATURE, 0, 0, count, count, cd_size, cd_offset, 0)
