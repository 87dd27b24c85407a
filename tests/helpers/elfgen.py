"""Build ELF64 little-endian files from tables, and hypothesis strategies that draw them.

The builder writes what the System V gABI and LSB 5.0 lay out (file header, program and
section headers, Elf64_Sym, Elf64_Dyn, notes, Verneed/Vernaux, Verdef/Verdaux) with
every field settable, so that tests can state a file exactly, lies included: section
sizes past the end, overlapping sections, record counts that do not match.

Strategies (for the ELF fuzz, and for the lead's wheel-level fuzz):
:func:`elf_files` draws whole files; :func:`symbol_tables`, :func:`verneed_tables`,
:func:`verdef_tables`, :func:`dynamic_tables` and :func:`note_tables` draw single tables.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from hypothesis import strategies as st

EM_X86_64 = 62
ET_EXEC, ET_DYN = 2, 3
SHT_PROGBITS, SHT_STRTAB, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 1, 3, 6, 7, 8, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
SHF_ALLOC, SHF_STRINGS = 0x2, 0x20
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
STB_GLOBAL, STB_WEAK = 1, 2
STT_FUNC, STT_OBJECT = 2, 1
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29


@dataclass
class Section:
    """One section: its bytes, and header fields; ``offset``/``size`` override the layout."""

    name: str
    type: int
    data: bytes = b""
    flags: int = 0
    link: int = 0
    info: int = 0
    entsize: int = 0
    offset: int | str | None = None  # a number, or the name of a section to lie over
    size: int | None = None


@dataclass
class Elf:
    sections: list[Section] = field(default_factory=list)
    e_type: int = ET_DYN
    machine: int = EM_X86_64
    interpreter: bytes | None = None  # adds PT_INTERP (a PIE when e_type is ET_DYN)
    program_headers: bool = True
    shnum: int | None = None  # override e_shnum (0: extended numbering)
    gap: int = 0  # zero bytes between the program headers and the first section

    def index(self, name: str) -> int:
        return 1 + [s.name for s in self.sections].index(name)


def strtab(names: list[bytes]) -> tuple[bytes, list[int]]:
    """A string table (leading NUL) and each name's offset in it."""
    data, offsets = bytearray(b"\0"), []
    for name in names:
        offsets.append(len(data))
        data += name + b"\0"
    return bytes(data), offsets


def sym(name: int, info: int, shndx: int, value: int = 0, size: int = 0) -> bytes:
    return struct.pack("<IBBHQQ", name, info, 0, shndx, value, size)


def dynsym(entries: list[tuple[int, int, int]]) -> bytes:
    """(st_name, st_info, st_shndx) rows after the null symbol."""
    return bytes(24) + b"".join(sym(n, i, s) for n, i, s in entries)


def verneed(records: list[tuple[int, list[tuple[int, int]]]], *, cnt: int | None = None,
            next_zero: bool = True) -> bytes:
    """Verneed entries: (vn_file, [(vna_other, vna_name)...]) each, laid out back to back."""
    out = bytearray()
    for i, (file_off, aux) in enumerate(records):
        size = 16 + 16 * len(aux)
        last = i == len(records) - 1
        out += struct.pack("<HHIII", 1, len(aux) if cnt is None else cnt, file_off, 16, 0 if last else size)
        for j, (other, name) in enumerate(aux):
            nxt = 0 if j == len(aux) - 1 and next_zero else 16
            out += struct.pack("<IHHII", 0, 0, other, name, nxt)
    return bytes(out)


def verdef(records: list[tuple[int, int, int]]) -> bytes:
    """Verdef entries (flags, ndx, name offset), each with one Verdaux."""
    out = bytearray()
    for i, (flags, ndx, name) in enumerate(records):
        last = i == len(records) - 1
        out += struct.pack("<HHHHIII", 1, flags, ndx, 1, 0, 20, 0 if last else 28)
        out += struct.pack("<II", name, 0)
    return bytes(out)


def dynamic(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack("<qQ", tag, value) for tag, value in [*entries, (0, 0)])


def note(name: bytes, kind: int, desc: bytes) -> bytes:
    pad = lambda b: b + bytes(-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


def build_id_note(desc: bytes = bytes(range(20))) -> bytes:
    return note(b"GNU\0", 3, desc)


def build(elf: Elf) -> bytes:
    """Lay the file out: header, program headers, section data, names, section headers."""
    names, name_offsets = strtab([s.name.encode() for s in elf.sections] + [b".shstrtab"])
    phdrs = _program_headers(elf)
    body = bytearray(64 + 56 * len(phdrs) + elf.gap)
    placed: list[int] = []
    where: dict[str, int] = {}
    for section in elf.sections:
        body += bytes(-len(body) % 8)
        if section.offset is None:
            placed.append(len(body))
            body += section.data
        else:
            placed.append(where[section.offset] if isinstance(section.offset, str) else section.offset)
        where[section.name] = placed[-1]
    if elf.interpreter is not None:
        interp_at = len(body)
        body += elf.interpreter + b"\0"
        phdrs = [(PT_INTERP, interp_at, len(elf.interpreter) + 1) if p[0] == PT_INTERP else p for p in phdrs]
    names_at = len(body)
    body += names + bytes(-(len(body) + len(names)) % 8)
    shoff = len(body)
    rows = [bytes(64)]
    for section, at, name in zip(elf.sections, placed, name_offsets, strict=False):
        size = len(section.data) if section.size is None else section.size
        rows.append(struct.pack("<IIQQQQIIQQ", name, section.type, section.flags, at, at, size, section.link,
                                section.info, 8, section.entsize))
    rows.append(struct.pack("<IIQQQQIIQQ", name_offsets[-1], SHT_STRTAB, 0, 0, names_at, len(names), 0, 0, 1, 0))
    body += b"".join(rows)
    total = len(body)
    phdr_bytes = b"".join(_phdr(p, total) for p in phdrs)
    shnum = len(rows) if elf.shnum is None else elf.shnum
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), elf.e_type, elf.machine, 1, 0,
                         64 if phdrs else 0, shoff, 0, 64, 56, len(phdrs), 64, shnum, len(rows) - 1)
    body[: 64 + len(phdr_bytes)] = header + phdr_bytes
    return bytes(body)


def _program_headers(elf: Elf) -> list[tuple[int, int, int]]:
    if not elf.program_headers:
        return []
    phdrs = [(PT_LOAD, 0, -1)]  # -1: the whole file, known once laid out
    if elf.interpreter is not None:
        phdrs.append((PT_INTERP, 0, 0))
    return phdrs


def _phdr(p: tuple[int, int, int], total: int) -> bytes:
    kind, offset, size = p
    size = total if size < 0 else size
    return struct.pack("<IIQQQQQQ", kind, 4, offset, offset, offset, size, size, 8)


def library(names: list[bytes], imports: list[bytes] | None = None, *, sections_extra: list[Section] | None = None,
            **extra: object) -> Elf:
    """A shared library exporting ``names`` (FUNC, GLOBAL) and importing ``imports``."""
    imports = imports or []
    table, offsets = strtab([*names, *imports])
    rows = [(o, STB_GLOBAL << 4 | STT_FUNC, 7) for o in offsets[: len(names)]]
    rows += [(o, STB_GLOBAL << 4 | STT_FUNC, 0) for o in offsets[len(names):]]
    sections = [
        Section(".dynsym", SHT_DYNSYM, dynsym(rows), SHF_ALLOC, link=2, info=1, entsize=24),
        Section(".dynstr", SHT_STRTAB, table, SHF_ALLOC),
    ]
    return Elf(sections=sections + (sections_extra or []), **extra)  # type: ignore[arg-type]


# --- hypothesis strategies -------------------------------------------------------------

_u16 = st.integers(0, 0xFFFF)
_INFOS = [STB_GLOBAL << 4 | STT_FUNC, STB_GLOBAL << 4 | STT_OBJECT, STB_WEAK << 4 | STT_FUNC, 10 << 4 | STT_FUNC,
          STT_FUNC, STB_GLOBAL << 4 | 6]


def _mostly(usual: st.SearchStrategy, odd: st.SearchStrategy, one_in: int = 8) -> st.SearchStrategy:  # type: ignore[type-arg]
    """``usual``, and ``odd`` about once in ``one_in`` draws: most files stay deep enough to reach the tables."""
    return st.integers(1, one_in).flatmap(lambda n: odd if n == 1 else usual)
_u32 = st.one_of(st.integers(0, 64), st.integers(0, 0xFFFFFFFF))
_names = st.lists(st.binary(min_size=0, max_size=24), max_size=24)


@st.composite
def symbol_tables(draw: st.DrawFn) -> tuple[bytes, bytes, bytes]:
    """(dynsym, dynstr, versym): names may point anywhere, bindings and indices anything."""
    table, offsets = strtab(draw(_names))
    spots = st.one_of(st.sampled_from(offsets or [0]), st.integers(0, len(table) + 8), _u32)
    infos = _mostly(st.sampled_from(_INFOS), st.integers(0, 255))
    rows = draw(st.lists(st.tuples(spots, infos, _mostly(st.sampled_from([0, 7, 7]), _u16)), max_size=40))
    versym = b"".join(struct.pack("<H", v) for v in draw(st.lists(_u16, max_size=len(rows) + 2)))
    return dynsym(rows), table, versym


@st.composite
def verneed_tables(draw: st.DrawFn, strings: int = 64) -> tuple[bytes, int]:
    """(.gnu.version_r bytes, sh_info): well formed, or with lying counts and offsets."""
    offs = st.one_of(st.integers(0, strings), _u32)
    records = draw(st.lists(st.tuples(offs, st.lists(st.tuples(_u16, offs), max_size=6)), max_size=5))
    data = verneed(records, cnt=draw(st.none() | _u16), next_zero=draw(st.booleans()))
    count = draw(st.one_of(st.just(len(records)), _u32))
    return data, count


@st.composite
def verdef_tables(draw: st.DrawFn, strings: int = 64) -> tuple[bytes, int]:
    records = draw(st.lists(st.tuples(st.integers(0, 3), _u16, st.one_of(st.integers(0, strings), _u32)),
                            max_size=6))
    return verdef(records), draw(st.one_of(st.just(len(records)), _u32))


def dynamic_tables(strings: int = 64) -> st.SearchStrategy[bytes]:
    tags = st.sampled_from([DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, 5, 6, 0x6FFFFFFB])
    return st.lists(st.tuples(tags, st.one_of(st.integers(0, strings), _u32)), max_size=12).map(dynamic)


def note_tables() -> st.SearchStrategy[bytes]:
    one = st.one_of(
        st.binary(max_size=24).map(build_id_note),
        st.tuples(st.binary(max_size=8), _u32, st.binary(max_size=16)).map(lambda t: note(*t)),
        st.binary(max_size=40),
    )
    return st.lists(one, max_size=4).map(b"".join)


@st.composite
def elf_files(draw: st.DrawFn) -> bytes:
    """A whole file: tables drawn above, headers that may lie, then maybe cut or flipped."""
    symbols, table, versym = draw(symbol_tables())
    sections = [
        Section(".dynsym", SHT_DYNSYM, symbols, SHF_ALLOC, link=draw(_mostly(st.just(2), st.sampled_from([0, 99]))),
                info=1, entsize=24),
        Section(".dynstr", SHT_STRTAB, table, SHF_ALLOC),
        Section(".gnu.version", SHT_GNU_VERSYM, versym, SHF_ALLOC, link=1),
    ]
    if draw(st.booleans()):
        data, count = draw(verneed_tables(len(table)))
        sections.append(Section(".gnu.version_r", SHT_GNU_VERNEED, data, SHF_ALLOC, link=2, info=count))
    if draw(st.booleans()):
        data, count = draw(verdef_tables(len(table)))
        sections.append(Section(".gnu.version_d", SHT_GNU_VERDEF, data, SHF_ALLOC, link=2, info=count))
    if draw(st.booleans()):
        sections.append(Section(".dynamic", SHT_DYNAMIC, draw(dynamic_tables(len(table))), SHF_ALLOC, link=2))
    for i in range(draw(st.integers(0, 3))):
        overlap = draw(st.none() | st.integers(0, 256))
        sections.append(Section(f".note.{i}", SHT_NOTE, draw(note_tables()), SHF_ALLOC, offset=overlap))
    if draw(st.booleans()):
        sections.append(Section(".decoy", SHT_PROGBITS, b"not the comment\0", SHF_STRINGS))  # precedes .comment
    if draw(st.booleans()):
        sections.append(Section(".comment", SHT_PROGBITS, draw(st.binary(max_size=64)), SHF_STRINGS))
    for section in sections:
        section.size = draw(_mostly(st.none(), _u32, one_in=12))
    elf = Elf(sections=sections, e_type=draw(_mostly(st.sampled_from([ET_DYN, ET_EXEC]), _u16)),
              interpreter=draw(st.none() | st.just(b"/lib64/ld-linux-x86-64.so.2")),
              program_headers=draw(st.booleans()), shnum=draw(_mostly(st.none(), st.just(0) | _u16)))
    data = bytearray(build(elf))
    for _ in range(draw(_mostly(st.just(0), st.integers(1, 4), one_in=4))):
        at = draw(st.integers(16, len(data) - 1))  # past e_ident: the identity checks have their own tests
        data[at] = draw(st.integers(0, 255))
    cut = draw(_mostly(st.none(), st.integers(0, len(data))))
    return bytes(data[:cut])
