"""Read the tables a manifest records from an ELF shared library or executable, within limits.

The file header and the section header table are unpacked with :mod:`struct` (System V
gABI, "ELF Header" and "Sections"); then the few sections the scan needs are read once
as raw bytes (``.dynsym``, ``.dynstr``, ``.gnu.version``, ``.gnu.version_r``,
``.gnu.version_d`` from the LSB 5.0 "Symbol Versioning" chapter, ``.dynamic``, the
allocated notes, ``.comment``) and handed to :mod:`backend_packager.scanning.elftables`, which
decodes them in memory.

Only 64-bit little-endian x86_64 and aarch64 files are accepted: those are the platforms
Triton ships wheels for. Everything else raises :class:`ElfError` with a one-line reason.

Hostile files cost bounded time and memory. Every read is sized from a header checked
against the file size and against a named limit first; hitting a limit raises
``ElfError`` with code ``elf.limit`` naming the limit:

- :data:`SECTION_LIMIT` section headers;
- :data:`SYMBOL_LIMIT` ``.dynsym`` entries (and as many ``.gnu.version`` entries);
- :data:`STRING_TABLE_LIMIT` bytes of ``.dynstr``;
- :data:`TABLE_LIMIT` bytes for each of ``.dynamic``, ``.gnu.version_r``,
  ``.gnu.version_d``, ``.comment`` and the section-name table;
- :data:`NOTE_BYTES_LIMIT` bytes of allocated notes, overlapping note sections read once;
- :data:`INTERP_LIMIT` bytes of the ``PT_INTERP`` path (the program headers themselves are
  at most 65,535 by the header's 16-bit count);
- and, while decoding, the limits of :mod:`~backend_packager.scanning.elftables` (version records,
  decoded name bytes, ``PyInit_*`` exports).

The program interpreter (``PT_INTERP``, gABI "Program Header") is what tells a PIE
executable (ET_DYN with an interpreter) from a shared library. Its path is checked as
Linux's ``binfmt_elf`` checks it before running a file: 2 to ``PATH_MAX`` bytes, inside the
file, ending in NUL; anything else is ``elf.corrupt`` (``elf.truncated`` past the end of the
file, ``elf.limit`` over :data:`INTERP_LIMIT`), never a silently absent field.

Memory bound: the raw tables held at once are at most :data:`SCAN_BYTES_LIMIT` (about
120 MiB), and decoding adds at most a few hundred bytes per symbol plus the decoded
names (:data:`~backend_packager.scanning.elftables.NAME_BYTES_LIMIT`). A scan's peak stays under
:data:`MEMORY_BOUND`, whatever the file; ``tests/packager/test_elf.py`` holds this by scanning
crafted files at the limits in a child process under ``RLIMIT_AS``. Time is linear in
the bytes read. The limits sit far above real libraries: triton 3.9.0's ``libtriton.so``
(500 MB) has 41 sections, 137k symbols and 14 MB of ``.dynstr``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from triton_backend_runtime.manifest import ElfInfo

from ..base import ElfError
from . import elftables
from .elftables import limit

__all__ = [
    "COMMENT_GUESS_BYTES", "CaptureMiss", "ELF_MAGIC", "INTERP_LIMIT", "MACHINES", "MEMORY_BOUND",
    "NOTE_BYTES_LIMIT", "PF_W", "PF_X", "PROGRAM_HEADER_BYTES", "PT_DYNAMIC", "PT_INTERP", "PT_LOAD", "PT_NOTE",
    "Range", "SCAN_BYTES_LIMIT", "SECTION_LIMIT", "SHF_ALLOC", "SHF_STRINGS", "SHN_XINDEX", "SHT_DYNAMIC",
    "SHT_DYNSYM", "SHT_GNU_VERDEF", "SHT_GNU_VERNEED", "SHT_GNU_VERSYM", "SHT_NOBITS", "SHT_NOTE", "SHT_PROGBITS",
    "STRING_TABLE_LIMIT", "SYMBOL_LIMIT", "TABLE_LIMIT", "TAIL_CAPTURE", "capture_ranges", "check_ident", "is_elf",
    "merge", "scan_elf"
]

ELF_MAGIC = b"\x7fELF"
MACHINES = {62: "x86_64", 183: "aarch64"}
_FOREIGN = {3: "i386", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "S/390", 40: "ARM", 243: "RISC-V"}

#: Most section headers read (extended numbering included): 4 MiB of headers.
SECTION_LIMIT = 1 << 16
#: Most ``.dynsym`` entries: 7.6 times libtriton.so's 137k.
SYMBOL_LIMIT = 1 << 20
#: Most bytes of ``.dynstr``: 4.5 times libtriton.so's 14 MB.
STRING_TABLE_LIMIT = 64 << 20
#: Most bytes of each small table (``.dynamic``, version tables, ``.comment``, section names).
TABLE_LIMIT = 1 << 20
#: Most bytes of allocated notes, after merging overlapping note sections.
NOTE_BYTES_LIMIT = 1 << 20
#: Most bytes of small non-allocated sections a second pass keeps, one of which may be .comment.
COMMENT_GUESS_BYTES = 16 << 20
#: Most bytes of the PT_INTERP path, its NUL included: Linux's PATH_MAX, above which
#: ``binfmt_elf`` refuses to run the file.
INTERP_LIMIT = 4096
#: Most bytes of program headers: e_phnum is 16 bits.
PROGRAM_HEADER_BYTES = 0xFFFF * 56
#: Most raw bytes one scan reads and holds: also what a streamed scan spools at most.
SCAN_BYTES_LIMIT = (64 + SECTION_LIMIT * 64 + SYMBOL_LIMIT * 26 + STRING_TABLE_LIMIT + 5 * TABLE_LIMIT
                    + NOTE_BYTES_LIMIT + COMMENT_GUESS_BYTES + PROGRAM_HEADER_BYTES + INTERP_LIMIT)
#: Peak memory of one scan at every limit, interpreter included (held in a test).
MEMORY_BOUND = 768 << 20

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
SHT_PROGBITS, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 1, 6, 7, 8, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
PF_X, PF_W = 0x1, 0x2
SHF_ALLOC, SHF_STRINGS = 0x2, 0x20
SHN_XINDEX = 0xFFFF
#: Bytes kept after the last loadable segment when streaming: where .comment lives.
TAIL_CAPTURE = 1 << 20


Range = tuple[int, int]


class CaptureMiss(Exception):  # noqa: N818 (a retry signal, not an error: never shown to a user)
    """A sparse capture lacked a section the scan needs. ``ranges`` are all it needs.

    Not an :class:`ElfError` on purpose: it is a request to stream the member again
    keeping ``ranges``, and must not be caught by code that reports errors to users.
    """

    def __init__(self, path: str, ranges: list[Range]) -> None:
        super().__init__(f"{path}: the capture lacks a section the scan needs")
        self.path = path
        self.ranges = ranges


@dataclass
class _Section:
    name: int
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int

    @property
    def extent(self) -> Range:
        return (self.offset, self.offset + self.size)


@dataclass
class _Plan:
    """Which sections the scan reads; ``names`` (the section-name table) is optional;
    ``program_headers`` and ``interp``: the program header table and the PT_INTERP path,
    where the file has them."""

    sections: dict[str, _Section | None]
    notes: list[Range]
    names: _Section | None
    program_headers: Range | None = None
    interp: Range | None = None


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def check_ident(head: bytes, path: str) -> str:
    """Reject what this scanner does not support from the first 20 bytes alone.

    Returns the machine name, so that a 32-bit or big-endian file gets a precise reason
    instead of a parse error.
    """
    if len(head) < 4 or not is_elf(head):
        raise ElfError("not-elf", path, f"not an ELF file (starts with {head[:4]!r})")
    if len(head) < 20:
        raise ElfError("truncated", path, f"truncated ELF file ({len(head)} bytes)")
    if head[4] == 1:
        raise ElfError("32-bit", path, "32-bit ELF (ELFCLASS32) is not supported; backends are 64-bit")
    if head[4] != 2:
        raise ElfError("corrupt", path, f"invalid ELF class byte {head[4]}")
    if head[5] == 2:
        raise ElfError("big-endian", path, "big-endian ELF is not supported; backends are little-endian")
    if head[5] != 1:
        raise ElfError("corrupt", path, f"invalid ELF data-encoding byte {head[5]}")
    (machine,) = struct.unpack_from("<H", head, 18)
    if machine not in MACHINES:
        name = _FOREIGN.get(machine, f"EM_{machine}")
        detail = f"foreign architecture {name} (e_machine={machine}); supported: x86_64, aarch64"
        raise ElfError("architecture", path, detail)
    return MACHINES[machine]


def scan_elf(stream: BinaryIO, path: str, size: int | None = None, available: list[Range] | None = None) -> ElfInfo:
    """Scan a seekable ELF stream. Raises ElfError naming ``path`` on any problem.

    ``size`` and ``available`` describe a sparse capture (see :func:`capture_ranges`): the
    real file size, and the byte ranges present. When a section the scan needs lies
    outside them, :class:`CaptureMiss` lists every range the scan needs.
    """
    stream.seek(0)
    head = stream.read(_EHDR.size)
    machine = check_ident(head, path)
    size = stream.seek(0, 2) if size is None else size
    if len(head) < _EHDR.size:
        raise ElfError("truncated", path, f"truncated ELF file ({len(head)} bytes)")
    sections, names_index = _section_table(stream, head, path, size, available)
    plan = _plan(sections, names_index, path, size)
    plan.program_headers, plan.interp, dynamic = _program_headers(stream, head, path, size, available)
    section = plan.sections["dynamic"]
    if dynamic is not None and (section is None or section.offset != dynamic):
        # The loader reads PT_DYNAMIC, never the sections: a library whose section headers
        # were stripped (sstrip) or point elsewhere still loads, with DT_NEEDED and symbols
        # the scan would record as none, or as another table's ("needs nothing, complete").
        raise ElfError("corrupt", path, "corrupt ELF: the dynamic segment (PT_DYNAMIC) is not the .dynamic "
                       "section (section headers stripped or false): what it needs and exports cannot be read "
                       "as the loader reads it: not scanned")
    read = _Reader(stream, available)
    # In a sparse capture the section names are usually absent, and .comment is a guess
    # (see _comment_section): a guess that fails its checks asks the second pass, which
    # knows the names, rather than failing a file the whole-file scan would accept.
    guessed = plan.names is not None and not read.has(plan.names.extent)
    names = read(plan.names) if plan.names is not None and not guessed else b""
    comment = _comment_section(sections, names)
    try:
        _check_section(comment, ".comment", TABLE_LIMIT, "TABLE_LIMIT", path, size)
    except ElfError:
        if not guessed:
            raise
        comment = None
    plan.sections["comment"] = comment
    _check_captured(plan, sections, head, path, available, names_known=not guessed,
                    force=guessed and comment is None)
    tables = elftables.Tables(
        **{key: read(section) for key, section in plan.sections.items()},
        verneed_count=_info(plan.sections["verneed"]),
        verdef_count=_info(plan.sections["verdef"]),
        notes=b"".join(read.range(r) for r in plan.notes),
        interp=read.range(plan.interp) if plan.interp is not None else None,
    )
    header = elftables.Header(machine=machine, osabi=head[7], e_type=_EHDR.unpack(head)[1])
    return elftables.decode(tables, header, path)


def _info(section: _Section | None) -> int:
    return section.info if section is not None else 0


class _Reader:
    """Reads a section's bytes; NOBITS and absent sections read as empty."""

    def __init__(self, stream: BinaryIO, available: list[Range] | None) -> None:
        self.stream = stream
        self.available = available

    def has(self, extent: Range) -> bool:
        return _covered(extent, self.available)

    def __call__(self, section: _Section | None) -> bytes:
        if section is None or section.type == SHT_NOBITS:
            return b""
        return self.range(section.extent)

    def range(self, extent: Range) -> bytes:
        self.stream.seek(extent[0])
        return self.stream.read(extent[1] - extent[0])


def _covered(extent: Range, available: list[Range] | None) -> bool:
    if available is None or extent[0] == extent[1]:
        return True
    return any(lo <= extent[0] and extent[1] <= hi for lo, hi in available)


def _section_table(stream: BinaryIO, head: bytes, path: str, size: int,
                   available: list[Range] | None) -> tuple[list[_Section], int]:
    """The section headers (at most SECTION_LIMIT) and the section-name table's index."""
    fields = _EHDR.unpack(head)
    shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
    if shoff == 0:
        return [], 0
    if shentsize != _SHDR.size:
        raise ElfError("corrupt", path, f"corrupt ELF: section header size {shentsize}, expected {_SHDR.size}")
    first = _read_exact(stream, path, size, available, shoff, _SHDR.size)
    zero = _Section(*_section_fields(first))
    if shnum == 0:  # extended numbering (gABI): the count is section 0's sh_size
        shnum = zero.size
    if shstrndx == SHN_XINDEX:
        shstrndx = zero.link
    if shnum > SECTION_LIMIT:
        raise limit(path, "SECTION_LIMIT", SECTION_LIMIT, f"section count {shnum:,}")
    data = _read_exact(stream, path, size, available, shoff, shnum * _SHDR.size)
    return [_Section(*_section_fields(row)) for row in _SHDR.iter_unpack(data)], shstrndx


def _section_fields(row: bytes | tuple[int, ...]) -> tuple[int, ...]:
    name, kind, flags, _, offset, size, link, info, _, _ = _SHDR.unpack(row) if isinstance(row, bytes) else row
    return name, kind, flags, offset, size, link, info


def _read_exact(stream: BinaryIO, path: str, size: int, available: list[Range] | None, start: int,
                length: int, what: str = "section headers") -> bytes:
    if start + length > size:
        raise ElfError("truncated", path, f"truncated ELF: the {what} end at byte {start + length}, "
                       f"the file has {size}")
    if not _covered((start, start + length), available):
        raise CaptureMiss(path, [(0, _EHDR.size), (start, start + length)])
    stream.seek(start)
    return stream.read(length)


def _program_headers(stream: BinaryIO, head: bytes, path: str, size: int,
                     available: list[Range] | None) -> tuple[Range | None, Range | None, int | None]:
    """The program header table, where the first PT_INTERP's path lies (the gABI allows
    one), checked as Linux's ``binfmt_elf`` checks it: 2 to INTERP_LIMIT bytes, within the
    file; and the first PT_DYNAMIC segment's file offset, if any."""
    fields = _EHDR.unpack(head)
    phoff, phentsize, phnum = fields[5], fields[9], fields[10]
    if phoff == 0 or phnum == 0:
        return None, None, None
    if phentsize != _PHDR.size:
        raise ElfError("corrupt", path, f"corrupt ELF: program header size {phentsize}, expected {_PHDR.size}")
    extent = (phoff, phoff + phnum * _PHDR.size)
    table = _read_exact(stream, path, size, available, phoff, phnum * _PHDR.size, "program headers")
    rows = list(_PHDR.iter_unpack(table))
    dynamic = next((row[2] for row in rows if row[0] == PT_DYNAMIC), None)
    interp = next((row for row in rows if row[0] == PT_INTERP), None)
    if interp is None:
        return extent, None, dynamic
    offset, length = interp[2], interp[5]
    if length > INTERP_LIMIT:
        raise limit(path, "INTERP_LIMIT", INTERP_LIMIT, f"the PT_INTERP path's {length:,} bytes")
    if length < 2:
        raise ElfError("corrupt", path, f"corrupt ELF: the PT_INTERP path has {length} bytes (an empty path)")
    if offset + length > size:
        raise ElfError("truncated", path, f"truncated ELF: the PT_INTERP path ends at byte {offset + length}, "
                       f"the file has {size}")
    return extent, (offset, offset + length), dynamic


def _plan(sections: list[_Section], names_index: int, path: str, size: int) -> _Plan:
    """Pick the sections by type (the first of each), check each against the file and its limit."""
    by_type: dict[int, _Section] = {}
    for section in sections:
        by_type.setdefault(section.type, section)
    dynsym = by_type.get(SHT_DYNSYM)
    dynstr = sections[dynsym.link] if dynsym is not None and dynsym.link < len(sections) else None
    chosen = {
        "dynsym": (dynsym, SYMBOL_LIMIT * 24, "SYMBOL_LIMIT"),
        "dynstr": (dynstr, STRING_TABLE_LIMIT, "STRING_TABLE_LIMIT"),
        "versym": (by_type.get(SHT_GNU_VERSYM), SYMBOL_LIMIT * 2, "SYMBOL_LIMIT"),
        "verneed": (by_type.get(SHT_GNU_VERNEED), TABLE_LIMIT, "TABLE_LIMIT"),
        "verdef": (by_type.get(SHT_GNU_VERDEF), TABLE_LIMIT, "TABLE_LIMIT"),
        "dynamic": (by_type.get(SHT_DYNAMIC), TABLE_LIMIT, "TABLE_LIMIT"),
    }
    for key, (chosen_section, cap, name) in chosen.items():
        _check_section(chosen_section, key, cap, name, path, size)
    names = sections[names_index] if 0 < names_index < len(sections) else None
    _check_section(names, "section names", TABLE_LIMIT, "TABLE_LIMIT", path, size)
    notes = _note_ranges(sections, path, size)
    return _Plan({key: value[0] for key, value in chosen.items()}, notes, names)


def _check_section(section: _Section | None, what: str, cap: int, name: str, path: str, size: int) -> None:
    if section is None or section.type == SHT_NOBITS:
        return
    if section.size > cap:
        raise limit(path, name, cap, f"the {what} table's {section.size:,} bytes")
    end = section.offset + section.size
    if end > size:
        raise ElfError("truncated", path, f"truncated ELF: a section ends at byte {end}, the file has {size}")


def _note_ranges(sections: list[_Section], path: str, size: int) -> list[Range]:
    """Allocated notes, overlapping or adjacent sections merged: each byte is read once."""
    extents = []
    for section in sections:
        if section.type == SHT_NOTE and section.flags & SHF_ALLOC and section.size:
            _check_section(section, "note", NOTE_BYTES_LIMIT, "NOTE_BYTES_LIMIT", path, size)
            extents.append(section.extent)
    merged = merge(extents)
    total = sum(hi - lo for lo, hi in merged)
    if total > NOTE_BYTES_LIMIT:
        raise limit(path, "NOTE_BYTES_LIMIT", NOTE_BYTES_LIMIT, f"{total:,} bytes of notes")
    return merged


def _comment_section(sections: list[_Section], names: bytes) -> _Section | None:
    """``.comment`` by name; without names, the first non-alloc string section by offset.

    The linkers place ``.comment`` first among the non-allocated sections, before any
    ``.debug_*``, so the fallback finds the same section when the name table is absent.
    """
    if names:
        for section in sections:
            if names.startswith(b".comment\0", section.name):
                return section
    candidates = [s for s in sections
                  if s.type == SHT_PROGBITS and not s.flags & SHF_ALLOC and s.flags & SHF_STRINGS]
    return min(candidates, key=lambda s: s.offset) if candidates else None


def _check_captured(plan: _Plan, sections: list[_Section], head: bytes, path: str, available: list[Range] | None,
                    names_known: bool, force: bool = False) -> None:
    """With a sparse capture, raise CaptureMiss listing every range the scan needs.

    Without the section names, .comment was guessed (see :func:`_comment_section`); the
    second pass will know the names, so it also gets the small non-allocated sections
    any of which may be the one named .comment (within COMMENT_GUESS_BYTES together).
    """
    if available is None:
        return
    needed = [s.extent for s in plan.sections.values() if s is not None and s.type != SHT_NOBITS]
    needed += plan.notes + [r for r in (plan.program_headers, plan.interp) if r is not None]
    if not force and all(_covered(extent, available) for extent in needed):
        return
    shoff = _EHDR.unpack(head)[6]
    table = [(shoff, shoff + max(len(sections), 1) * _SHDR.size)] if shoff else []
    names = [plan.names.extent] if plan.names is not None else []
    guesses: list[Range] = []
    if not names_known:
        small = [s.extent for s in sections
                 if s.type != SHT_NOBITS and not s.flags & SHF_ALLOC and s.size <= TABLE_LIMIT]
        guesses = _within(merge(small), COMMENT_GUESS_BYTES)
    raise CaptureMiss(path, merge([(0, _EHDR.size), *table, *names, *needed, *guesses]))


def capture_ranges(head: bytes, budget: int = SCAN_BYTES_LIMIT) -> list[Range] | None:
    """Byte ranges a streamed scan keeps, from the first bytes of the file alone.

    Always the ELF header and the section and program header tables (their places are in
    the ELF header). With program headers in ``head``: the interpreter's path, the dynamic
    segment, the notes, 1 MiB after the last loadable
    segment (where .comment is), and the read-only loadable segments (where linkers put
    .dynsym, .dynstr, .gnu.version*), cut so the total stays within ``budget``. A miss is
    answered by :class:`CaptureMiss` with the exact ranges. None when ``head`` is too
    short to tell even the ELF header, and the caller keeps the bytes it has.
    """
    if len(head) < _EHDR.size or head[:4] != ELF_MAGIC or head[4] != 2 or head[5] != 1:
        return None
    fields = _EHDR.unpack_from(head)
    phoff, shoff, phentsize, phnum, shnum = fields[5], fields[6], fields[9], fields[10], fields[12]
    table = min(shnum or SECTION_LIMIT, SECTION_LIMIT) * _SHDR.size if shoff else 0
    headers = [(0, _EHDR.size), (shoff, shoff + table)]
    if phoff and phnum and phentsize == _PHDR.size:
        headers.append((phoff, phoff + phnum * _PHDR.size))
    ranges: list[Range] = []
    loads: list[tuple[int, int, int]] = []
    if phentsize == _PHDR.size and phnum and phoff + phnum * _PHDR.size <= len(head):
        for i in range(phnum):
            p_type, p_flags, p_offset, _, _, p_filesz, _, _ = _PHDR.unpack_from(head, phoff + i * _PHDR.size)
            if p_type == PT_LOAD:
                loads.append((p_offset, p_offset + p_filesz, p_flags))
            elif p_type in (PT_DYNAMIC, PT_NOTE):
                ranges.append((p_offset, p_offset + min(p_filesz, TABLE_LIMIT)))
            elif p_type == PT_INTERP:
                ranges.append((p_offset, p_offset + min(p_filesz, INTERP_LIMIT)))
    if loads:
        last_end = max(hi for _, hi, _ in loads)
        ranges.append((last_end, last_end + TAIL_CAPTURE))
    # The headers first (a few MiB at most); thousands of program headers could name a
    # range each, so the budget holds for the rest together.
    headers = merge(headers)
    ranges = headers + _within(merge(ranges), budget - sum(hi - lo for lo, hi in headers))
    if loads:
        # The dynamic tables live in the read-only (neither W nor X) segments; old layouts
        # without separate code segments put them in the first segment, text and all.
        read_only = [(lo, hi) for lo, hi, flags in loads if not flags & (PF_W | PF_X)]
        ranges += _within(read_only or [loads[0][:2]], budget - sum(hi - lo for lo, hi in ranges))
    return merge(ranges)


def _within(extents: list[Range], budget: int) -> list[Range]:
    """The leading parts of ``extents`` that fit ``budget`` bytes, in order."""
    kept = []
    for lo, hi in extents:
        take = max(0, min(hi - lo, budget))
        if take:
            kept.append((lo, lo + take))
        budget -= take
    return kept


def merge(ranges: list[Range]) -> list[Range]:
    """Sorted, overlapping and adjacent ranges joined."""
    merged: list[Range] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged

