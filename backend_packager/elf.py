"""Read the facts a manifest records from an ELF shared library or executable.

pyelftools parses the file header and finds sections; the dynamic tables themselves
(``.dynsym``, ``.dynstr``, ``.gnu.version``, ``.gnu.version_r``, ``.gnu.version_d``,
``.dynamic``) are read as raw bytes once and unpacked in bulk with :mod:`struct`.
Iterating 137k symbols through pyelftools' object model takes seconds; unpacking the raw
table takes a fraction of that (see ``bench/bench_scan.py``).

Only 64-bit little-endian x86_64 and aarch64 files are accepted: those are the platforms
Triton ships wheels for. Everything else raises :class:`ElfError` with a one-line reason.

What counts (the same rules ``nm -D`` applies):
- an *export* is a ``.dynsym`` entry that is defined (section index not UNDEF) and bound
  GLOBAL, WEAK or GNU_UNIQUE;
- an *import* is an undefined, non-local ``.dynsym`` entry; it is weak when bound WEAK.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
import re
import struct
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

from triton_backend_runtime.manifest import (
    EXPORT_LIST_LIMIT,
    PLUGIN_V1_SYMBOLS,
    PLUGIN_V2_SYMBOL,
    ElfInfo,
    ExportTable,
    Import,
    PluginApi,
    Symbol,
    VersionNeed,
)

from .errors import ElfError

ELF_MAGIC = b"\x7fELF"
MACHINES = {62: "x86_64", 183: "aarch64"}
_FOREIGN = {3: "i386", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "S/390", 40: "ARM", 243: "RISC-V"}
#: Oldest manylinux baseline per architecture, used when no GLIBC version is required.
_MANYLINUX_FLOOR = {"x86_64": (2, 5), "aarch64": (2, 17)}

_BINDINGS = {1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS", 10: "IFUNC"}
_OSABI = {0: "SYSV", 3: "GNU"}
_FILE_TYPES = {1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}

DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
PF_X, PF_W = 0x1, 0x2
SHF_ALLOC, SHF_STRINGS = 0x2, 0x20
NT_GNU_BUILD_ID = 3
#: Bytes kept after the last loadable segment when streaming: where .comment lives.
TAIL_CAPTURE = 1 << 20
SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000
_GLIBC = re.compile(rb"^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass
class _Tables:
    """Raw bytes of the sections the scan needs; absent ones are empty."""

    dynsym: bytes
    dynstr: bytes
    versym: bytes
    verneed: bytes
    verneed_count: int
    verdef: bytes
    verdef_count: int
    dynamic: bytes
    build_id: bytes
    comment: bytes


class CaptureMiss(ElfError):
    """A sparse capture lacked a section the scan needs; rescan from the whole file."""


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def check_ident(head: bytes, path: str) -> str:
    """Reject what this scanner does not support from the first 20 bytes alone.

    Returns the machine name. Checked before pyelftools sees the file, so that a 32-bit
    or big-endian file gets a precise reason instead of a parse error.
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


def scan_elf(
    stream: BinaryIO, path: str, size: int | None = None, available: list[tuple[int, int]] | None = None
) -> ElfInfo:
    """Scan a seekable ELF stream. Raises ElfError naming ``path`` on any problem.

    ``size`` and ``available`` describe a sparse capture (see :func:`capture_ranges`): the
    real file size, and the byte ranges present. A section the scan needs that lies outside
    them raises :class:`CaptureMiss`, and the caller reads the whole file instead.
    """
    stream.seek(0)
    head = stream.read(64)
    machine = check_ident(head, path)
    size = stream.seek(0, 2) if size is None else size
    tables, header = _read_tables(stream, path, size, available)
    header["osabi"] = head[7]
    return _build_info(tables, header, machine, path)


def _read_tables(
    stream: BinaryIO, path: str, size: int, available: list[tuple[int, int]] | None
) -> tuple[_Tables, dict[str, int]]:
    # pyelftools is imported here, not at module import: the runtime never needs it.
    from elftools.common.exceptions import ELFError as PyElfError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(stream)
        # Section headers only: building pyelftools' section objects parses some of them.
        headers = [elf._get_section_header(i) for i in range(elf.num_sections())]
        names = [elf._get_section_name(h) for h in headers]
        header = {"e_type": _e_type(elf.header["e_type"])}
    except (PyElfError, struct.error, ValueError, KeyError, OSError, UnicodeDecodeError) as exc:
        raise ElfError("corrupt", path, f"corrupt or truncated ELF: {exc}") from None

    def raw(hdr: Any) -> bytes:
        if hdr is None or hdr["sh_type"] == "SHT_NOBITS":
            return b""
        start, end = hdr["sh_offset"], hdr["sh_offset"] + hdr["sh_size"]
        if end > size:
            raise ElfError("truncated", path, f"truncated ELF: a section ends at byte {end}, the file has {size}")
        if available is not None and not any(lo <= start and end <= hi for lo, hi in available):
            raise CaptureMiss("capture", path, f"section at {start}-{end} lies outside the captured ranges")
        stream.seek(start)
        return stream.read(hdr["sh_size"])

    # Sections are found by type, not by name: the scan of a streamed member keeps only the
    # byte ranges it needs, and the section-name table is not among them (see capture_ranges).
    by_type = {h["sh_type"]: h for h in reversed(headers)}
    dynsym = by_type.get("SHT_DYNSYM")
    dynstr = headers[dynsym["sh_link"]] if dynsym is not None and dynsym["sh_link"] < len(headers) else None
    verneed, verdef = by_type.get("SHT_GNU_verneed"), by_type.get("SHT_GNU_verdef")
    tables = _Tables(
        dynsym=raw(dynsym),
        dynstr=raw(dynstr),
        versym=raw(by_type.get("SHT_GNU_versym")),
        verneed=raw(verneed),
        verneed_count=int(verneed["sh_info"]) if verneed is not None else 0,
        verdef=raw(verdef),
        verdef_count=int(verdef["sh_info"]) if verdef is not None else 0,
        dynamic=raw(by_type.get("SHT_DYNAMIC")),
        build_id=b"".join(raw(h) for h in headers if h["sh_type"] == "SHT_NOTE" and h["sh_flags"] & SHF_ALLOC),
        comment=raw(_comment_section(headers, names)),
    )
    return tables, header


def _comment_section(headers: list[Any], names: list[str]) -> Any:
    """``.comment`` by name; without names, the first non-alloc string section by offset.

    The linkers place ``.comment`` first among the non-allocated sections, before any
    ``.debug_*``, so the fallback finds the same section when the name table is absent.
    """
    for hdr, name in zip(headers, names, strict=True):
        if name == ".comment":
            return hdr
    candidates = [
        h for h in headers
        if h["sh_type"] == "SHT_PROGBITS" and not h["sh_flags"] & SHF_ALLOC and h["sh_flags"] & SHF_STRINGS
    ]
    return min(candidates, key=lambda h: h["sh_offset"]) if candidates else None


def capture_ranges(head: bytes) -> list[tuple[int, int]] | None:
    """Byte ranges a streamed scan must keep, from the ELF and program headers alone.

    Keeps the first loadable segment (where linkers put .dynsym, .dynstr, .gnu.version*,
    and the notes), the dynamic segment, the section header table, and 1 MiB after the
    last loadable segment (where .comment is). None when ``head`` is too short to tell,
    and the caller keeps everything.
    """
    if len(head) < 64 or head[:4] != ELF_MAGIC or head[4] != 2 or head[5] != 1:
        return None
    phoff, shoff = struct.unpack_from("<QQ", head, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
    if phentsize != 56 or phoff + phnum * 56 > len(head):
        return None
    ranges = [(0, 64), (phoff, phoff + phnum * 56), (shoff, shoff + shnum * shentsize)]
    loads = []
    for i in range(phnum):
        p_type, p_flags, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", head, phoff + i * 56)
        if p_type == PT_LOAD:
            loads.append((p_offset, p_offset + p_filesz, p_flags))
        elif p_type in (PT_DYNAMIC, PT_NOTE):
            ranges.append((p_offset, p_offset + p_filesz))
    if not loads:
        return None
    # The dynamic tables live in the read-only (neither W nor X) segments; old layouts
    # without separate code segments put them in the first segment, text and all.
    read_only = [(lo, hi) for lo, hi, flags in loads if not flags & (PF_W | PF_X)]
    ranges.extend(read_only or [loads[0][:2]])
    last_end = max(hi for _, hi, _ in loads)
    ranges.append((last_end, last_end + TAIL_CAPTURE))
    return _merge(ranges)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _e_type(value: object) -> int:
    names = {v: k for k, v in _FILE_TYPES.items()}
    return names.get(str(value).removeprefix("ET_"), 0)


def _cstr(table: bytes, offset: int) -> bytes:
    end = table.find(b"\0", offset)
    return table[offset:] if end < 0 else table[offset:end]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def _build_info(t: _Tables, header: dict[str, int], machine: str, path: str) -> ElfInfo:
    try:
        versions, needs = _version_needs(t.verneed, t.verneed_count, t.dynstr)
        defined = _version_defs(t.verdef, t.verdef_count, t.dynstr)
        exports, imports = _symbols(t, versions, defined)
        export_names = [s.name for s in exports.symbols]
        dynamic = _dynamic(t.dynamic, t.dynstr)
    except (struct.error, IndexError) as exc:
        raise ElfError("corrupt", path, f"corrupt dynamic tables: {exc}") from None
    glibc = _max_glibc(needs)
    plugin = _plugin_api(set(export_names))
    return ElfInfo(
        machine=machine,
        elf_class="ELF64",
        endianness="little",
        osabi=_OSABI.get(header.get("osabi", 0), "SYSV"),
        file_type=_FILE_TYPES.get(header["e_type"], "UNKNOWN"),
        soname=dynamic.get(DT_SONAME, [None])[0],
        needed=dynamic.get(DT_NEEDED, []),
        rpath=_split_paths(dynamic.get(DT_RPATH, [])),
        runpath=_split_paths(dynamic.get(DT_RUNPATH, [])),
        build_id=_build_id(t.build_id),
        compiler=_comment(t.comment),
        exports=exports,
        imports=imports,
        version_needs=[VersionNeed(lib, vers) for lib, vers in needs.items()],
        glibc=".".join(map(str, glibc)) if glibc else None,
        manylinux=manylinux_tag(glibc, machine),
        python_extension=sorted(n[7:] for n in export_names if n.startswith("PyInit_")),
        plugin=plugin,
    )


def _version_needs(data: bytes, count: int, dynstr: bytes) -> tuple[dict[int, tuple[str, str]], dict[str, list[str]]]:
    """Walk .gnu.version_r: version index -> (library, version), and library -> versions."""
    by_index: dict[int, tuple[str, str]] = {}
    needs: dict[str, list[str]] = {}
    offset = 0
    for _ in range(count if data else 0):
        _, cnt, file_off, aux, nxt = struct.unpack_from("<HHIII", data, offset)
        library = _text(_cstr(dynstr, file_off))
        versions = needs.setdefault(library, [])
        aux_off = offset + aux
        for _ in range(cnt):
            _, _, other, name_off, aux_next = struct.unpack_from("<IHHII", data, aux_off)
            name = _text(_cstr(dynstr, name_off))
            by_index[other] = (library, name)
            versions.append(name)
            aux_off += aux_next
        if not nxt:
            break
        offset += nxt
    return by_index, {lib: sorted(set(v)) for lib, v in needs.items()}


def _version_defs(data: bytes, count: int, dynstr: bytes) -> dict[int, str]:
    """Walk .gnu.version_d: version index -> version name (the first Verdaux)."""
    names: dict[int, str] = {}
    offset = 0
    for _ in range(count if data else 0):
        _, flags, ndx, cnt, _, aux, nxt = struct.unpack_from("<HHHHIII", data, offset)
        if cnt and not flags & 1:  # VER_FLG_BASE names the file itself, not a version
            (name_off,) = struct.unpack_from("<I", data, offset + aux)
            names[ndx] = _text(_cstr(dynstr, name_off))
        if not nxt:
            break
        offset += nxt
    return names


# st_info -> 1 when its binding (high nibble) makes an export: GLOBAL, WEAK or GNU_UNIQUE.
_EXPORT_BINDING = bytes(1 if i >> 4 in _BINDINGS else 0 for i in range(256))
# st_info -> 1 when its binding is not LOCAL (an undefined non-local symbol is an import).
_NONLOCAL = bytes(1 if i >> 4 else 0 for i in range(256))


@dataclass
class _SymbolColumns:
    """The columns of .dynsym that the scan uses; entry 0 (the null symbol) is excluded."""

    name: list[int]
    info: bytes
    defined: bytes  # 1 where st_shndx != SHN_UNDEF
    versym: list[int]

    @classmethod
    def unpack(cls, dynsym: bytes, versym: bytes) -> _SymbolColumns:
        count = len(dynsym) // 24
        versions = list(struct.unpack(f"<{len(versym) // 2}H", versym)) if versym else []
        # Elf64_Sym is 24 bytes: st_name u32 @0, st_info u8 @4, st_shndx u16 @6. Strided
        # slices pull each column out in C, without a Python loop over the symbols.
        view = memoryview(dynsym[: count * 24])
        if sys.byteorder == "little":
            names = view.cast("I")[0::6].tolist()
        else:
            names = [row[0] for row in struct.iter_unpack("<I20x", view)]
        shndx = map(operator.or_, view[6::24], view[7::24])
        return cls(names, bytes(view[4::24]), bytes(map(bool, shndx)), versions)

    def version(self, index: int) -> int:
        """The .gnu.version index of a symbol, without the 'hidden' bit."""
        return self.versym[index] & ~VERSYM_HIDDEN if index < len(self.versym) else 0

    def exports(self) -> list[int]:
        mask = map(operator.and_, self.info.translate(_EXPORT_BINDING), self.defined)
        return [i for i in itertools.compress(range(len(self.info)), mask) if i]

    def imports(self) -> list[int]:
        undefined = self.defined.translate(bytes([1, 0]) + bytes(254))
        mask = map(operator.and_, self.info.translate(_NONLOCAL), undefined)
        return [i for i in itertools.compress(range(len(self.info)), mask) if i]


def _symbols(
    t: _Tables, needs: dict[int, tuple[str, str]], defs: dict[int, str]
) -> tuple[ExportTable, list[Import]]:
    cols = _SymbolColumns.unpack(t.dynsym, t.versym)
    dynstr, find = t.dynstr, t.dynstr.find
    imports = []
    for index in cols.imports():
        offset = cols.name[index]
        library, version = needs.get(cols.version(index), (None, None))
        weak = cols.info[index] >> 4 == 2
        name = _text(dynstr[offset : find(b"\0", offset)])
        imports.append(Import(name=name, weak=weak, version=version, library=library))
    imports.sort(key=lambda i: (i.name, i.version or ""))
    defined = cols.exports()
    # Names as latin-1 str, not bytes: one-byte str compares with memcmp when sorted,
    # which is faster than bytes' generic comparison, and round-trips every byte.
    text = dynstr.decode("latin-1")
    names = [text[o : text.find("\0", o)] for o in [cols.name[i] for i in defined]]
    return _export_table(names, defined, cols, defs), imports


def _export_table(names: list[str], indices: list[int], cols: _SymbolColumns, defs: dict[int, str]) -> ExportTable:
    """``names[k]`` is the name of .dynsym entry ``indices[k]``; both in table order."""
    ordered = sorted(names)
    complete = len(names) <= EXPORT_LIST_LIMIT
    if complete:
        chosen = sorted(zip(names, indices, strict=True))
    else:
        chosen = [(name, indices[names.index(name)]) for name in _significant(ordered)]
    symbols = []
    for name, index in chosen:
        info = cols.info[index]
        symbols.append(Symbol(
            name=_text(name.encode("latin-1")),
            type=_TYPES.get(info & 0xF, str(info & 0xF)),
            binding=_BINDINGS[info >> 4],
            version=defs.get(cols.version(index)),
        ))
    digest = hashlib.sha256("\n".join(ordered).encode("latin-1")).hexdigest()
    return ExportTable(count=len(names), digest=digest, complete=complete, symbols=symbols)


def _significant(ordered: list[str]) -> list[str]:
    """Significant exports in a sorted name list, found by bisection, not by a scan."""
    found = ordered[bisect.bisect_left(ordered, "PyInit_") : bisect.bisect_left(ordered, "PyInit`")]
    for name in (PLUGIN_V2_SYMBOL, *PLUGIN_V1_SYMBOLS):
        at = bisect.bisect_left(ordered, name)
        if at < len(ordered) and ordered[at] == name:
            found.append(name)
    return sorted(set(found))


def is_significant_export(name: str) -> bool:
    """Exports kept even in a summarised table: plugin API and Python module init."""
    return name == PLUGIN_V2_SYMBOL or name in PLUGIN_V1_SYMBOLS or name.startswith("PyInit_")


def _plugin_api(names: set[str]) -> PluginApi | None:
    if PLUGIN_V2_SYMBOL in names:
        return PluginApi(api="v2", symbols=[PLUGIN_V2_SYMBOL])
    v1 = [s for s in PLUGIN_V1_SYMBOLS if s in names]
    return PluginApi(api="v1", symbols=v1) if v1 else None


def _dynamic(data: bytes, dynstr: bytes) -> dict[int, list[str]]:
    wanted = (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH)
    found: dict[int, list[str]] = {}
    for tag, value in struct.iter_unpack("<qQ", data[: len(data) // 16 * 16]):
        if tag == 0:
            break
        if tag in wanted:
            found.setdefault(tag, []).append(_text(_cstr(dynstr, value)))
    return found


def _split_paths(values: list[str]) -> list[str]:
    return [p for v in values for p in v.split(":") if p]


def _build_id(notes: bytes) -> str | None:
    """The NT_GNU_BUILD_ID note among the contents of every SHT_NOTE section."""
    offset = 0
    while offset + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, offset)
        name_at = offset + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        if kind == NT_GNU_BUILD_ID and notes[name_at : name_at + namesz] == b"GNU\0":
            return notes[desc_at : desc_at + descsz].hex() or None
        offset = desc_at + (descsz + 3) // 4 * 4
    return None


def _comment(data: bytes) -> list[str]:
    seen: list[str] = []
    for entry in data.split(b"\0"):
        text = _text(entry).strip()
        if text and text not in seen:
            seen.append(text)
    return seen


def _max_glibc(needs: dict[str, list[str]]) -> tuple[int, ...] | None:
    best: tuple[int, ...] | None = None
    for versions in needs.values():
        for version in versions:
            match = _GLIBC.match(version.encode())
            if match:
                parsed = tuple(int(g) for g in match.groups() if g is not None)
                best = parsed if best is None or parsed > best else best
    return best


def manylinux_tag(glibc: tuple[int, ...] | None, machine: str) -> str:
    """The PEP 600 tag a glibc requirement implies: GLIBC_2.27 -> manylinux_2_27_<arch>."""
    major, minor = glibc[:2] if glibc else _MANYLINUX_FLOOR[machine]
    floor = _MANYLINUX_FLOOR[machine]
    major, minor = max((major, minor), floor)
    return f"manylinux_{major}_{minor}_{machine}"
