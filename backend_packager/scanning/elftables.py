"""Decode an ELF file's dynamic tables, already in memory, into the manifest's :class:`ElfInfo`.

:mod:`backend_packager.scanning.elf` decides what to read and reads it; this module only decodes
bytes, in bulk with :mod:`struct` and strided slices: iterating 137k symbols through an
object model takes seconds, unpacking the raw table a fraction of that (see
``bench/bench_scan.py``). Layouts: Elf64_Sym, Elf64_Dyn and notes from the System V gABI;
Elfxx_Verneed/Vernaux/Verdef/Verdaux from LSB 5.0, "Symbol Versioning".

What counts (the same rules ``nm -D`` applies):
- an *export* is a ``.dynsym`` entry that is defined (section index not UNDEF) and bound
  as :data:`triton_backend_runtime.verification.dynsym.EXPORT_BINDINGS` says (GLOBAL, WEAK or GNU_UNIQUE),
  the runtime's definition too;
- an *import* is an undefined, non-local ``.dynsym`` entry; it is weak when bound WEAK.

Work and memory are linear in the table sizes, with these limits (``elf.limit`` errors):
:data:`VERSION_RECORD_LIMIT` version records in all, each walk also bounded by its section
size; :data:`NAME_LIMIT` bytes per name and :data:`NAME_BYTES_LIMIT` bytes of names
decoded in all; :data:`PYINIT_LIMIT` ``PyInit_*`` exports.
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
from triton_backend_runtime.verification import EXPORT_BINDINGS

from ..base import ElfError

__all__ = [
    "DT_NEEDED", "DT_RPATH", "DT_RUNPATH", "DT_SONAME", "Header", "NAME_BYTES_LIMIT", "NAME_LIMIT",
    "NT_GNU_BUILD_ID", "PYINIT_LIMIT", "Tables", "VERSION_RECORD_LIMIT", "VERSYM_HIDDEN", "decode", "limit",
    "manylinux_tag"
]

#: Most Verneed + Vernaux + Verdef records walked in one file (libtriton.so has 43).
VERSION_RECORD_LIMIT = 1 << 14
#: Longest name decoded from .dynstr (libtriton.so's longest symbol name is about 1 KB).
NAME_LIMIT = 64 << 10
#: Most bytes of names decoded from .dynstr in all (libtriton.so: about 14 MB).
NAME_BYTES_LIMIT = 96 << 20
#: Most PyInit_* exports: a Python extension module has one per module it defines.
PYINIT_LIMIT = 1024

_MANYLINUX_FLOOR = {"x86_64": (2, 5), "aarch64": (2, 17)}
_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS", 10: "IFUNC"}
_OSABI = {0: "SYSV", 3: "GNU"}
_FILE_TYPES = {1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
NT_GNU_BUILD_ID = 3
VERSYM_HIDDEN = 0x8000
_GLIBC = re.compile(r"^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$", re.ASCII)
#: Names are located in chunks, so an over-budget table stops after one chunk, not at the end.
_NAME_CHUNK = 4096


@dataclass
class Tables:
    """Raw bytes of the sections the scan needs; absent ones are empty."""

    dynsym: bytes
    dynstr: bytes
    versym: bytes
    verneed: bytes
    verneed_count: int
    verdef: bytes
    verdef_count: int
    dynamic: bytes
    notes: bytes
    comment: bytes
    interp: bytes | None = None  # the PT_INTERP path's bytes; None without PT_INTERP


@dataclass
class Header:
    machine: str
    osabi: int
    e_type: int


def limit(path: str, name: str, value: int, what: str) -> ElfError:
    """The error for a limit hit: code ``elf.limit``, the limit's name and value."""
    return ElfError("limit", path, f"{what}: over the limit {name} ({value:,}); not scanned")


class _Strings:
    """C strings of .dynstr by offset, each at most NAME_LIMIT, all within NAME_BYTES_LIMIT."""

    def __init__(self, table: bytes, path: str) -> None:
        self.table = table
        self.path = path
        self.spent = 0
        self._cache: dict[int, str] = {}

    def end(self, offset: int) -> int:
        """Where the string at ``offset`` ends; a string unterminated at the table's end ends there."""
        if offset >= len(self.table):
            return offset
        end = self.table.find(b"\0", offset, offset + NAME_LIMIT + 1)
        if end >= 0:
            return end
        if len(self.table) - offset > NAME_LIMIT:
            raise limit(self.path, "NAME_LIMIT", NAME_LIMIT, f"the name at .dynstr offset {offset:,}")
        return len(self.table)

    def spend(self, count: int) -> None:
        self.spent += count
        if self.spent > NAME_BYTES_LIMIT:
            raise limit(self.path, "NAME_BYTES_LIMIT", NAME_BYTES_LIMIT, "bytes of names decoded")

    def text(self, offset: int) -> str:
        found = self._cache.get(offset)
        if found is None:
            end = self.end(offset)
            self.spend(end - offset)
            found = self._cache[offset] = _text(self.table[offset:end])
        return found


def decode(t: Tables, header: Header, path: str) -> ElfInfo:
    strings = _Strings(t.dynstr, path)
    try:
        budget = [VERSION_RECORD_LIMIT]
        versions, needs = _version_needs(t.verneed, t.verneed_count, strings, budget)
        defined = _version_defs(t.verdef, t.verdef_count, strings, budget)
        names = _symbol_names(t, strings)
        exports, imports, ordered = _symbols(names, strings, versions, defined)
        dynamic = _dynamic(t.dynamic, strings)
    except (struct.error, IndexError) as exc:
        raise ElfError("corrupt", path, f"corrupt dynamic tables: {exc}") from None
    glibc = _max_glibc(needs)
    return ElfInfo(
        machine=header.machine,
        elf_class="ELF64",
        endianness="little",
        osabi=_OSABI.get(header.osabi, "SYSV"),
        file_type=_FILE_TYPES.get(header.e_type, "UNKNOWN"),
        soname=dynamic.get(DT_SONAME, [None])[0],
        needed=dynamic.get(DT_NEEDED, []),
        rpath=_split_paths(dynamic.get(DT_RPATH, [])),
        runpath=_split_paths(dynamic.get(DT_RUNPATH, [])),
        build_id=_build_id(t.notes),
        compiler=_comment(t.comment),
        exports=exports,
        imports=imports,
        version_needs=[VersionNeed(lib, vers) for lib, vers in needs.items()],
        glibc=".".join(map(str, glibc)) if glibc else None,
        manylinux=manylinux_tag(glibc, header.machine),
        python_extension=[n[7:] for n in _pyinit(ordered, path)],
        plugin=_plugin_api(ordered),
        interpreter=_interpreter(t.interp, path),
    )


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def _spend_record(budget: list[int], path: str) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise limit(path, "VERSION_RECORD_LIMIT", VERSION_RECORD_LIMIT, "version records walked")


def _version_needs(data: bytes, count: int, strings: _Strings,
                   budget: list[int]) -> tuple[dict[int, tuple[str, str]], dict[str, list[str]]]:
    """Walk .gnu.version_r: version index -> (library, version), and library -> versions.

    A ``vn_next`` or ``vna_next`` of 0 ends its chain (LSB); offsets only grow, and every
    record visited is counted against VERSION_RECORD_LIMIT.
    """
    by_index: dict[int, tuple[str, str]] = {}
    needs: dict[str, list[str]] = {}
    offset = 0
    for _ in range(count if data else 0):
        _spend_record(budget, strings.path)
        _, cnt, file_off, aux, nxt = struct.unpack_from("<HHIII", data, offset)
        library = strings.text(file_off)
        versions = needs.setdefault(library, [])
        aux_off = offset + aux
        for _ in range(cnt):
            _spend_record(budget, strings.path)
            _, _, other, name_off, aux_next = struct.unpack_from("<IHHII", data, aux_off)
            name = strings.text(name_off)
            by_index[other] = (library, name)
            versions.append(name)
            if not aux_next:
                break
            aux_off += aux_next
        if not nxt:
            break
        offset += nxt
    return by_index, {lib: sorted(set(v)) for lib, v in needs.items()}


def _version_defs(data: bytes, count: int, strings: _Strings, budget: list[int]) -> dict[int, str]:
    """Walk .gnu.version_d: version index -> version name (the first Verdaux)."""
    names: dict[int, str] = {}
    offset = 0
    for _ in range(count if data else 0):
        _spend_record(budget, strings.path)
        _, flags, ndx, cnt, _, aux, nxt = struct.unpack_from("<HHHHIII", data, offset)
        if cnt and not flags & 1:  # VER_FLG_BASE names the file itself, not a version
            (name_off,) = struct.unpack_from("<I", data, offset + aux)
            names[ndx] = strings.text(name_off)
        if not nxt:
            break
        offset += nxt
    return names


# st_info -> 1 when its binding (high nibble) makes an export.
_EXPORT_BINDING = bytes(1 if i >> 4 in EXPORT_BINDINGS else 0 for i in range(256))
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
        versions = list(struct.unpack(f"<{len(versym) // 2}H", versym[: len(versym) // 2 * 2])) if versym else []
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


@dataclass
class _Names:
    """Export names (latin-1 str, one char per byte) in .dynsym order, with their columns."""

    cols: _SymbolColumns
    exports: list[int]
    export_names: list[str]


def _symbol_names(t: Tables, strings: _Strings) -> _Names:
    cols = _SymbolColumns.unpack(t.dynsym, t.versym)
    exports = cols.exports()
    offsets = list(map(cols.name.__getitem__, exports))
    # latin-1 str, not bytes: one-byte str compares with memcmp when sorted, which is
    # faster than bytes' generic comparison, and round-trips every byte.
    text = t.dynstr.decode("latin-1")
    return _Names(cols, exports, _names_by_search(text, offsets, strings))


def _names_by_search(text: str, offsets: list[int], strings: _Strings) -> list[str]:
    """Names by searching for each terminator, in chunks: an over-budget table stops early.

    Each search stops at NAME_LIMIT, and the names found count against NAME_BYTES_LIMIT, so
    the work is bounded even when every symbol points into one long unterminated string.
    """
    names: list[str] = []
    find, end_of = text.find, strings.end
    for start in range(0, len(offsets), _NAME_CHUNK):
        chunk = offsets[start : start + _NAME_CHUNK]
        ends = [find("\0", o, o + NAME_LIMIT + 1) for o in chunk]
        if -1 in ends:  # out of the table, unterminated at its end, or too long
            ends = [e if e >= 0 else end_of(o) for o, e in zip(chunk, ends, strict=True)]
        strings.spend(sum(map(operator.sub, ends, chunk)))
        names += map(text.__getitem__, map(slice, chunk, ends))
    return names


def _symbols(
    n: _Names, strings: _Strings, needs: dict[int, tuple[str, str]], defs: dict[int, str]
) -> tuple[ExportTable, list[Import], list[str]]:
    """The export table, the imports, and the export names sorted (for bisection)."""
    cols = n.cols
    imports = []
    for index in cols.imports():
        library, version = needs.get(cols.version(index), (None, None))
        weak = cols.info[index] >> 4 == 2
        imports.append(Import(name=strings.text(cols.name[index]), weak=weak, version=version, library=library))
    imports.sort(key=lambda i: (i.name, i.version or ""))
    ordered = sorted(n.export_names)
    return _export_table(ordered, n, defs), imports, ordered


def _export_table(ordered: list[str], n: _Names, defs: dict[int, str]) -> ExportTable:
    """``n.export_names[k]`` is the name of .dynsym entry ``n.exports[k]``; ``ordered`` sorts them."""
    complete = len(ordered) <= EXPORT_LIST_LIMIT
    if complete:
        chosen = sorted(zip(n.export_names, n.exports, strict=True))
    else:
        chosen = _first_index(set(_significant(ordered)), n)
    cols = n.cols
    symbols = []
    for name, index in chosen:
        info = cols.info[index]
        symbols.append(Symbol(
            name=_text(name.encode("latin-1")),
            type=_TYPES.get(info & 0xF, str(info & 0xF)),
            binding=EXPORT_BINDINGS[info >> 4],
            version=defs.get(cols.version(index)),
        ))
    return ExportTable(count=len(ordered), digest=_digest(ordered), complete=complete, symbols=symbols)


def _first_index(wanted: set[str], n: _Names) -> list[tuple[str, int]]:
    """The first .dynsym index of each wanted name: a C search each for a few, else one pass."""
    if len(wanted) <= 16:
        return sorted((name, n.exports[n.export_names.index(name)]) for name in wanted)
    found: dict[str, int] = {}
    for name, index in zip(n.export_names, n.exports, strict=True):
        if name in wanted and name not in found:
            found[name] = index
    return sorted(found.items())


def _digest(ordered: list[str]) -> str:
    """sha256 of the sorted names joined with newlines, hashed in slices (no second copy of all)."""
    digest = hashlib.sha256()
    step = 1 << 16
    for start in range(0, len(ordered), step):
        part = "\n".join(ordered[start : start + step])
        digest.update((("\n" if start else "") + part).encode("latin-1"))
    return digest.hexdigest()


def _range(ordered: list[str], low: str, high: str) -> list[str]:
    return ordered[bisect.bisect_left(ordered, low) : bisect.bisect_left(ordered, high)]


def _pyinit(ordered: list[str], path: str) -> list[str]:
    found = _range(ordered, "PyInit_", "PyInit`")
    if len(found) > PYINIT_LIMIT:
        raise limit(path, "PYINIT_LIMIT", PYINIT_LIMIT, f"{len(found):,} PyInit_* exports")
    return found


def _has(ordered: list[str], name: str) -> bool:
    at = bisect.bisect_left(ordered, name)
    return at < len(ordered) and ordered[at] == name


def _significant(ordered: list[str]) -> list[str]:
    """Exports kept even in a summarised table (plugin API and Python module init), in a
    sorted name list, found by bisection, not by a scan."""
    found = _range(ordered, "PyInit_", "PyInit`")
    found += [name for name in (PLUGIN_V2_SYMBOL, *PLUGIN_V1_SYMBOLS) if _has(ordered, name)]
    return sorted(set(found))


def _plugin_api(ordered: list[str]) -> PluginApi | None:
    if _has(ordered, PLUGIN_V2_SYMBOL):
        return PluginApi(api="v2", symbols=[PLUGIN_V2_SYMBOL])
    v1 = [s for s in PLUGIN_V1_SYMBOLS if _has(ordered, s)]
    return PluginApi(api="v1", symbols=v1) if v1 else None


def _dynamic(data: bytes, strings: _Strings) -> dict[int, list[str]]:
    wanted = (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH)
    found: dict[int, list[str]] = {}
    for tag, value in struct.iter_unpack("<qQ", data[: len(data) // 16 * 16]):
        if tag == 0:
            break
        if tag in wanted:
            found.setdefault(tag, []).append(strings.text(value))
    return found


def _split_paths(values: list[str]) -> list[str]:
    return [p for v in values for p in v.split(":") if p]


def _build_id(notes: bytes) -> str | None:
    """The NT_GNU_BUILD_ID note among the contents of every allocated note section."""
    offset = 0
    while offset + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, offset)
        name_at = offset + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        if kind == NT_GNU_BUILD_ID and notes[name_at : name_at + namesz] == b"GNU\0":
            return notes[desc_at : desc_at + descsz].hex() or None
        offset = desc_at + (descsz + 3) // 4 * 4
    return None


def _interpreter(raw: bytes | None, path: str) -> str | None:
    """The PT_INTERP path: a C string filling its segment, as Linux's ``binfmt_elf`` requires
    (its last byte NUL), read up to the first NUL as the kernel reads it; empty is corrupt."""
    if raw is None:
        return None
    if raw[-1:] != b"\0":
        raise ElfError("corrupt", path, "corrupt ELF: the PT_INTERP path is not NUL-terminated")
    name = raw[: raw.index(b"\0")]
    if not name:
        raise ElfError("corrupt", path, "corrupt ELF: the PT_INTERP path is empty")
    return _text(name)


def _comment(data: bytes) -> list[str]:
    """Distinct entries of .comment, in order (a dict keeps order and dedupes in one pass)."""
    entries = (_text(entry).strip() for entry in data.split(b"\0"))
    return list(dict.fromkeys(text for text in entries if text))


def _max_glibc(needs: dict[str, list[str]]) -> tuple[int, ...] | None:
    best: tuple[int, ...] | None = None
    for versions in needs.values():
        for version in versions:
            match = _GLIBC.match(version)
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
