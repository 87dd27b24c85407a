"""Write the crafted ELF files of the seed corpus into a directory (nothing is committed).

Each file is one way a hostile or broken file once cost unbounded time or memory, or an
edge the scanner must get right. ``CORPUS`` maps each file name to the error code its
scan must end in (None: it scans). ``LARGE`` files sit at the scanner's limits and are
big (tens of MB): the memory-bound test builds them, the quick tests do not.

Run: ``python tests/data/make_elf_corpus.py OUTDIR [--large]``.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers import elfgen as g  # noqa: E402

from backend_packager.scanning import elf  # noqa: E402

Maker = Callable[[], bytes]


def overlapping_notes(count: int = 60_000) -> bytes:
    """60,000 SHT_NOTE sections over the same 64 KiB: once read 60,000 times (6.3 GB)."""
    notes = g.build_id_note() + bytes(64 << 10)
    lib = g.library([b"f"])
    lib.sections.append(g.Section(".note.0", g.SHT_NOTE, notes, g.SHF_ALLOC))
    lib.sections += [g.Section(f".n{i}", g.SHT_NOTE, b"", g.SHF_ALLOC, offset=".note.0", size=len(notes))
                     for i in range(count)]
    return g.build(lib)


def verneed_aux_claims(entries: int = 2_000, chained: bool = False) -> bytes:
    """Verneed entries each claiming 65,535 aux records (once 239 s and 2.1 GB for 82 KB).

    ``chained``: every vna_next is 16, so each entry's aux chain runs on through all the
    records after it: quadratic unless the walk is bounded.
    """
    table, offsets = g.strtab([b"libc.so.6", b"GLIBC_2.2.5"])
    data = g.verneed([(offsets[0], [(2, offsets[1])])] * entries, cnt=0xFFFF, next_zero=not chained)
    lib = g.library([b"f"])
    lib.sections[1].data = table
    lib.sections[0].data = g.dynsym([(offsets[1], g.STB_GLOBAL << 4 | g.STT_FUNC, 7)])
    lib.sections.append(g.Section(".gnu.version_r", g.SHT_GNU_VERNEED, data, g.SHF_ALLOC, link=2, info=entries))
    return g.build(lib)


def verneed_loop() -> bytes:
    """One Verneed whose vn_next is 0 but whose count claims 2**32-1 entries."""
    table, offsets = g.strtab([b"libc.so.6", b"GLIBC_2.2.5"])
    data = g.verneed([(offsets[0], [(2, offsets[1])])])
    lib = g.library([b"f"])
    lib.sections[1].data = table
    lib.sections.append(g.Section(".gnu.version_r", g.SHT_GNU_VERNEED, data, g.SHF_ALLOC, link=2, info=0xFFFFFFFF))
    return g.build(lib)


def pyinit_exports(count: int = 100_000) -> bytes:
    """100k PyInit_* exports (once 100 s: a quadratic list search per name)."""
    return g.build(g.library([b"PyInit_m%d" % i for i in range(count)]))


def many_exports_summarised(count: int = 50_000) -> bytes:
    """More exports than a manifest lists, with a few PyInit_*: the summary path."""
    return g.build(g.library([b"sym_%d" % i for i in range(count)] + [b"PyInit_a", b"PyInit_b"]))


def no_program_headers(gap: int = 8 << 20) -> bytes:
    """No program headers, and zeros before the tables: once spooled whole (301 MiB)."""
    return g.build(g.library([b"f"], [b"malloc"], program_headers=False, gap=gap))


def section_count_over_limit() -> bytes:
    """Extended numbering: section 0's sh_size claims 2**40 sections."""
    data = bytearray(g.build(g.library([b"f"], shnum=0)))
    shoff = struct.unpack_from("<Q", data, 40)[0]
    struct.pack_into("<Q", data, shoff + 32, 1 << 40)
    return bytes(data)


def unterminated_names() -> bytes:
    """Every symbol's name points into one 1 MiB string with no terminator."""
    lib = g.library([])
    lib.sections[1].data = b"\0" + b"A" * (1 << 20)
    lib.sections[0].data = g.dynsym([(1 + i, g.STB_GLOBAL << 4 | g.STT_FUNC, 7) for i in range(20_000)])
    return g.build(lib)


def name_bytes_over_limit() -> bytes:
    """60k symbols all naming the same 2 KiB string: 120 MB of names from a tiny table."""
    lib = g.library([])
    lib.sections[1].data = b"\0" + b"B" * 2048 + b"\0"
    lib.sections[0].data = g.dynsym([(1, g.STB_GLOBAL << 4 | g.STT_FUNC, 7)] * 60_000)
    return g.build(lib)


def dynstr_over_limit() -> bytes:
    """A .dynstr header claiming more than STRING_TABLE_LIMIT bytes (the file is small)."""
    lib = g.library([b"f"])
    lib.sections[1].size = elf.STRING_TABLE_LIMIT + 1
    return g.build(lib)


def truncated_tables() -> bytes:
    """A .dynsym whose header claims more than the file holds."""
    lib = g.library([b"f%d" % i for i in range(200)])
    lib.sections[0].size = 1 << 24
    return g.build(lib)


def comment_entries() -> bytes:
    """.comment with 200k distinct entries (a list-membership dedupe was quadratic)."""
    lib = g.library([b"f"])
    text = b"\0".join(b"c%d" % i for i in range(200_000))[: elf.TABLE_LIMIT]
    lib.sections.append(g.Section(".comment", g.SHT_PROGBITS, text, g.SHF_STRINGS))
    return g.build(lib)


def pie_executable() -> bytes:
    return g.build(g.library([b"main"], [b"puts"], interpreter=b"/lib64/ld-linux-x86-64.so.2"))


CORPUS: dict[str, tuple[Maker, str | None]] = {
    "overlapping-notes.so": (overlapping_notes, None),
    "verneed-aux-claims.so": (verneed_aux_claims, None),
    "verneed-aux-chains.so": (lambda: verneed_aux_claims(chained=True), "elf.limit"),
    "verneed-count-loop.so": (verneed_loop, None),
    "pyinit-100k.so": (pyinit_exports, "elf.limit"),
    "exports-summarised.so": (many_exports_summarised, None),
    "section-count.so": (section_count_over_limit, "elf.limit"),
    "unterminated-names.so": (unterminated_names, "elf.limit"),
    "name-bytes.so": (name_bytes_over_limit, "elf.limit"),
    "dynstr-limit.so": (dynstr_over_limit, "elf.limit"),
    "truncated-tables.so": (truncated_tables, "elf.truncated"),
    "comment-entries.so": (comment_entries, None),
    "pie.so": (pie_executable, None),
    "no-program-headers.so": (no_program_headers, None),
}


def at_symbol_limit(imports: bool) -> bytes:
    """SYMBOL_LIMIT - 1 symbols with distinct 40-byte names: the most memory a scan takes."""
    count = elf.SYMBOL_LIMIT - 1
    names = [b"%040d" % i for i in range(count)]
    table = b"\0" + b"".join(n + b"\0" for n in names)
    shndx = 0 if imports else 7
    rows = b"".join(g.sym(1 + 41 * i, g.STB_GLOBAL << 4 | g.STT_FUNC, shndx) for i in range(count))
    lib = g.library([])
    lib.sections[0].data = bytes(24) + rows
    lib.sections[1].data = table
    return g.build(lib)


LARGE: dict[str, Maker] = {
    "limit-imports.so": lambda: at_symbol_limit(imports=True),
    "limit-exports.so": lambda: at_symbol_limit(imports=False),
}


def write(outdir: Path, *, large: bool = False) -> dict[Path, str | None]:
    """Write the corpus; returns each file with the error code its scan must end in."""
    outdir.mkdir(parents=True, exist_ok=True)
    written: dict[Path, str | None] = {}
    for name, (make, expected) in CORPUS.items():
        (outdir / name).write_bytes(make())
        written[outdir / name] = expected
    for name, maker in (LARGE.items() if large else []):
        (outdir / name).write_bytes(maker())
        written[outdir / name] = None
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--large", action="store_true", help="also the files at the limits (tens of MB each)")
    args = parser.parse_args()
    for path, expected in write(args.outdir, large=args.large).items():
        print(f"{path.name}: {expected or 'scans'}")


if __name__ == "__main__":
    main()
