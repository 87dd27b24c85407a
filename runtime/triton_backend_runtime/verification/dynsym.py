"""Which names a shared library exports: a small reader of ``.dynsym`` (System V gABI, ELF64).

The runtime asks one question of the installed ``libtriton.so`` (~500 MB, ~137k dynamic
symbols): are these few names defined there? It answers through the GNU hash table
(``DT_GNU_HASH``, section type ``SHT_GNU_HASH``) the dynamic linker itself uses, so a
lookup touches a handful of pages of a memory-mapped file instead of unpacking every
symbol. Without a GNU hash table it falls back to reading the whole ``.dynsym`` once.

An export is a defined symbol (``st_shndx != SHN_UNDEF``) bound GLOBAL, WEAK or
GNU_UNIQUE: what the dynamic linker may bind an undefined reference to. Only ELF64
little-endian is read (x86_64 and aarch64, the platforms Triton ships for).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from typing import Final

from ..base import VerifyError

__all__ = ["EXPORT_BINDINGS", "gnu_hash", "is_export", "missing_exports"]

#: The bindings (``st_info >> 4``) that make a defined symbol an export, with the name the
#: manifest gives each: the one statement of "what is an export", the packager's scan's too.
EXPORT_BINDINGS: Final = {1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}  # UNIQUE: STB_GNU_UNIQUE

_SHT_DYNSYM = 11
_SHT_GNU_HASH = 0x6FFFFFF6
_SYM = struct.Struct("<IBBHQQ")  # st_name, st_info, st_other, st_shndx, st_value, st_size
_SHDR = struct.Struct("<IIQQQQIIQQ")


def gnu_hash(name: bytes) -> int:
    """The GNU symbol hash (h = h * 33 + c, from 5381, 32-bit)."""
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def is_export(info: int, shndx: int) -> bool:
    """Whether a ``.dynsym`` entry (its ``st_info`` and ``st_shndx``) is an export."""
    return shndx != 0 and info >> 4 in EXPORT_BINDINGS


def missing_exports(path: str, names: Iterable[str]) -> list[str]:
    """The names in ``names`` that the library at ``path`` does not export, sorted."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    try:
        with open(path, "rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
            table = _Table(data, path)
            return [n for n in wanted if not table.exports(n.encode("utf-8"))]
    except (OSError, ValueError, struct.error) as exc:
        raise VerifyError("elf", path, f"cannot read the dynamic symbol table: {exc}") from None


class _Table:
    """The dynamic symbol table of one mapped file; the state is the parsed headers."""

    def __init__(self, data: mmap.mmap, path: str) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise VerifyError("elf", path, "not an ELF64 little-endian file")
        self.data = data
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        dynsym = next((s for s in sections if s[1] == _SHT_DYNSYM), None)
        if dynsym is None:
            raise VerifyError("elf", path, "the file has no .dynsym section")
        self.sym_off, self.sym_size = dynsym[4], dynsym[5]
        strtab = sections[dynsym[6]]
        self.str_off, self.str_size = strtab[4], strtab[5]
        gnu = next((s for s in sections if s[1] == _SHT_GNU_HASH), None)
        self.hash_off = gnu[4] if gnu else None
        self._all: set[bytes] | None = None

    def _name(self, offset: int) -> bytes:
        start = self.str_off + offset
        end = self.data.find(b"\0", start, self.str_off + self.str_size)
        return self.data[start:end]

    def _defined(self, index: int, name: bytes) -> bool:
        st_name, info, _, shndx, _, _ = _SYM.unpack_from(self.data, self.sym_off + index * _SYM.size)
        return is_export(info, shndx) and self._name(st_name) == name

    def exports(self, name: bytes) -> bool:
        if self.hash_off is None:
            return name in self._everything()
        nbuckets, symoffset, bloom_size, _ = struct.unpack_from("<IIII", self.data, self.hash_off)
        buckets = self.hash_off + 16 + bloom_size * 8
        chains = buckets + nbuckets * 4
        h = gnu_hash(name)
        index, = struct.unpack_from("<I", self.data, buckets + (h % nbuckets) * 4)
        if index == 0:
            return False
        while True:
            value, = struct.unpack_from("<I", self.data, chains + (index - symoffset) * 4)
            if (value | 1) == (h | 1) and self._defined(index, name):
                return True
            if value & 1:
                return False
            index += 1

    def _everything(self) -> set[bytes]:
        if self._all is None:
            block = self.data[self.sym_off : self.sym_off + self.sym_size]
            self._all = {
                self._name(st_name)
                for st_name, info, _, shndx, _, _ in _SYM.iter_unpack(block)
                if is_export(info, shndx)
            }
        return self._all
