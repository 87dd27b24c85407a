"""The scanner's facts, each checked against what readelf / nm report for the same file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import binutils
from helpers.csrc import ElfFixtures, patched_copy
from triton_backend_runtime.manifest.model import EXPORT_LIST_LIMIT, ElfInfo

from backend_packager.base.errors import ElfError
from backend_packager.scanning.artifacts import artifact_from_file
from backend_packager.scanning.elf import scan_elf


def scan(path: Path) -> ElfInfo:
    with path.open("rb") as stream:
        return scan_elf(stream, str(path))


ALL = ["exports", "plugin_v2", "plugin_v1", "pyext", "runpath", "rpath", "versioned"]


@pytest.mark.parametrize("which", ALL)
def test_exports_match_readelf(elf_files: ElfFixtures, which: str) -> None:
    path = getattr(elf_files, which)
    info = scan(path)
    expected = binutils.exports(path)
    assert info.exports.complete
    assert {s.name: (s.type, s.binding) for s in info.exports.symbols} == expected
    assert info.exports.count == len(binutils.nm_defined(path))


@pytest.mark.parametrize("which", ALL)
def test_imports_match_nm(elf_files: ElfFixtures, which: str) -> None:
    path = getattr(elf_files, which)
    info = scan(path)
    assert {i.name: i.weak for i in info.imports} == binutils.nm_undefined(path)
    versions = {i.name: i.version for i in info.imports if i.version}
    assert versions == binutils.nm_import_versions(path)


@pytest.mark.parametrize("which", ALL)
def test_dynamic_section_matches_readelf(elf_files: ElfFixtures, which: str) -> None:
    path = getattr(elf_files, which)
    info = scan(path)
    dyn = binutils.dynamic(path)
    assert info.needed == dyn.get("NEEDED", [])
    assert info.soname == (dyn["SONAME"][0] if "SONAME" in dyn else None)
    assert info.rpath == [p for v in dyn.get("RPATH", []) for p in v.split(":")]
    assert info.runpath == [p for v in dyn.get("RUNPATH", []) for p in v.split(":")]
    assert info.build_id == binutils.build_id(path)
    assert info.compiler == binutils.comment(path)
    assert info.machine == "x86_64" if "X86-64" in binutils.machine(path) else info.machine == "aarch64"


def test_version_needs_and_glibc(elf_files: ElfFixtures) -> None:
    info = scan(elf_files.exports)
    needs = binutils.version_needs(elf_files.exports)
    assert {n.library: set(n.versions) for n in info.version_needs} == needs
    glibc = max(
        (tuple(int(p) for p in v.removeprefix("GLIBC_").split(".")) for vs in needs.values() for v in vs
         if v.startswith("GLIBC_2")),
    )
    assert info.glibc == ".".join(map(str, glibc))
    assert info.manylinux == f"manylinux_{glibc[0]}_{glibc[1]}_{info.machine}"
    by_name = {i.name: i for i in info.imports}
    assert by_name["sqrt"].library == "libm.so.6"
    assert by_name["memcpy"].library == "libc.so.6"
    assert by_name["optional_hook"].weak and by_name["optional_hook"].version is None


def test_runpath_and_soname(elf_files: ElfFixtures) -> None:
    info = scan(elf_files.runpath)
    assert info.soname == "librunpath.so.1"
    assert info.runpath == ["$ORIGIN/../lib", "/opt/demo/lib"]
    assert info.rpath == []
    assert "libexports.so" in info.needed
    assert scan(elf_files.rpath).rpath == ["$ORIGIN"]
    by_name = {i.name: i for i in info.imports}
    assert not by_name["exported_function"].weak and by_name["exported_function"].version is None


def test_hidden_and_static_symbols_are_not_exports(elf_files: ElfFixtures) -> None:
    names = {s.name for s in scan(elf_files.exports).exports.symbols}
    assert {"exported_function", "weak_function", "exported_counter", "exported_tls"} <= names
    assert "hidden_helper" not in names and "hidden_global" not in names
    tls = next(s for s in scan(elf_files.exports).exports.symbols if s.name == "exported_tls")
    assert tls.type == "TLS"


def test_plugin_v2(elf_files: ElfFixtures) -> None:
    info = scan(elf_files.plugin_v2)
    assert info.plugin is not None and info.plugin.api == "v2"
    assert info.plugin.symbols == ["tritonGetPluginInfo"]
    assert "tritonDemoRegisterPass" in {i.name for i in info.imports}


def test_plugin_v1(elf_files: ElfFixtures) -> None:
    info = scan(elf_files.plugin_v1)
    assert info.plugin is not None and info.plugin.api == "v1"
    assert info.plugin.symbols == ["tritonEnumeratePluginPasses", "tritonAddPluginPass", "tritonRegisterPluginPass"]
    assert scan(elf_files.exports).plugin is None


def test_python_extension(elf_files: ElfFixtures) -> None:
    assert scan(elf_files.pyext).python_extension == ["fastmod"]
    assert scan(elf_files.exports).python_extension == []


def test_versioned_exports(elf_files: ElfFixtures) -> None:
    symbols = {s.name: s.version for s in scan(elf_files.versioned).exports.symbols}
    assert symbols["api_v1"] == "DEMO_1.0"
    assert symbols["api_v2"] == "DEMO_2.0"


def test_artifact_hash_and_size(elf_files: ElfFixtures) -> None:
    import hashlib

    record = artifact_from_file(elf_files.exports, "lib/libexports.so")
    data = elf_files.exports.read_bytes()
    assert record.sha256 == hashlib.sha256(data).hexdigest()
    assert record.size == len(data)
    assert record.path == "lib/libexports.so"


def test_large_export_table_is_summarised(tmp_path: Path) -> None:
    count = EXPORT_LIST_LIMIT + 10
    src = tmp_path / "many.c"
    src.write_text("".join(f"int sym_{i}(void) {{ return {i}; }}\n" for i in range(count))
                   + "void *PyInit_many(void) { return 0; }\n")
    from helpers.csrc import gcc

    lib = gcc(tmp_path / "libmany.so", str(src))
    info = scan(lib)
    assert info.exports.count == len(binutils.nm_defined(lib))
    assert not info.exports.complete
    assert [s.name for s in info.exports.symbols] == ["PyInit_many"]
    # The digest does not depend on whether the list was kept: same rule as a small lib.
    import hashlib

    names = sorted(binutils.nm_defined(lib))
    assert info.exports.digest == hashlib.sha256("\n".join(names).encode()).hexdigest()


@pytest.mark.parametrize(
    ("offset", "value", "code", "words"),
    [
        (4, b"\x01", "elf.32-bit", "32-bit"),
        (5, b"\x02", "elf.big-endian", "big-endian"),
        (18, (40).to_bytes(2, "little"), "elf.architecture", "foreign architecture ARM"),
        (18, (243).to_bytes(2, "little"), "elf.architecture", "foreign architecture RISC-V"),
    ],
)
def test_unsupported_files(elf_files: ElfFixtures, tmp_path: Path, offset: int, value: bytes, code: str,
                           words: str) -> None:
    bad = patched_copy(elf_files.exports, tmp_path / "libbad.so", offset, value)
    with pytest.raises(ElfError) as err:
        scan(bad)
    assert err.value.code == code
    assert words in str(err.value)
    assert str(bad) in str(err.value)


def test_truncated_and_not_elf(elf_files: ElfFixtures) -> None:
    with pytest.raises(ElfError) as err:
        scan(elf_files.truncated)
    assert err.value.code in ("elf.truncated", "elf.corrupt")
    assert "truncated" in str(err.value)
    with pytest.raises(ElfError) as err:
        scan(elf_files.not_elf)
    assert err.value.code == "elf.not-elf"


# --- hostile files: bounded time and memory, every limit named ------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_elf_corpus  # noqa: E402
from helpers import elfgen  # noqa: E402

from backend_packager.scanning import elf, elftables  # noqa: E402

#: The limit each corpus file that must fail is refused by.
LIMIT_OF = {
    "pyinit-100k.so": "PYINIT_LIMIT",
    "section-count.so": "SECTION_LIMIT",
    "name-bytes.so": "NAME_BYTES_LIMIT",
    "unterminated-names.so": "NAME_LIMIT",
    "dynstr-limit.so": "STRING_TABLE_LIMIT",
    "verneed-aux-chains.so": "VERSION_RECORD_LIMIT",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, str | None]:
    return make_elf_corpus.write(tmp_path_factory.mktemp("corpus"))


def _outcome(path: Path) -> ElfInfo | ElfError:
    try:
        return scan(path)
    except ElfError as exc:
        return exc


def test_corpus_files_end_as_expected(corpus: dict[Path, str | None]) -> None:
    for path, expected in corpus.items():
        outcome = _outcome(path)
        if expected is None:
            assert isinstance(outcome, ElfInfo), (path.name, outcome)
        else:
            assert isinstance(outcome, ElfError) and outcome.code == expected, (path.name, outcome)
            if path.name in LIMIT_OF:
                assert LIMIT_OF[path.name] in outcome.detail, outcome


def test_overlapping_notes_are_read_once(corpus: dict[Path, str | None]) -> None:
    (path,) = [p for p in corpus if p.name == "overlapping-notes.so"]
    assert scan(path).build_id == bytes(range(20)).hex()


def test_version_walks_stop_at_zero_next_and_at_the_section(corpus: dict[Path, str | None]) -> None:
    by_name = {p.name: p for p in corpus}
    for name in ("verneed-aux-claims.so", "verneed-count-loop.so"):
        info = scan(by_name[name])
        assert [(n.library, n.versions) for n in info.version_needs] == [("libc.so.6", ["GLIBC_2.2.5"])]
        assert info.glibc == "2.2.5"


def test_summarised_exports_keep_every_pyinit(corpus: dict[Path, str | None]) -> None:
    (path,) = [p for p in corpus if p.name == "exports-summarised.so"]
    info = scan(path)
    assert info.exports.count == 50_002 and not info.exports.complete
    assert [s.name for s in info.exports.symbols] == ["PyInit_a", "PyInit_b"]
    assert info.python_extension == ["a", "b"]


@pytest.mark.parametrize(("limit", "value", "make"), [
    ("SYMBOL_LIMIT", 10, lambda: elfgen.library([b"s%d" % i for i in range(20)])),
    ("TABLE_LIMIT", 8, lambda: elfgen.library([b"f"], sections_extra=[
        elfgen.Section(".dynamic", elfgen.SHT_DYNAMIC, elfgen.dynamic([(elfgen.DT_NEEDED, 1)]), 2, link=2)])),
    ("NOTE_BYTES_LIMIT", 16, lambda: elfgen.library([b"f"], sections_extra=[
        elfgen.Section(".note.a", elfgen.SHT_NOTE, elfgen.build_id_note(), 2)])),
    ("STRING_TABLE_LIMIT", 4, lambda: elfgen.library([b"long_name"])),
])
def test_each_limit_is_named_when_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, value: int,
                                      make: object) -> None:
    library = make()  # type: ignore[operator]
    path = tmp_path / "lib.so"
    path.write_bytes(elfgen.build(library))
    assert isinstance(_outcome(path), ElfInfo)  # under the real limits it scans
    monkeypatch.setattr(elf, limit, value)
    outcome = _outcome(path)
    assert isinstance(outcome, ElfError) and outcome.code == "elf.limit", outcome
    assert limit in outcome.detail


def test_version_record_limit_counts_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(make_elf_corpus.verneed_aux_claims(entries=20))
    assert isinstance(_outcome(path), ElfInfo)
    monkeypatch.setattr(elftables, "VERSION_RECORD_LIMIT", 39)  # 20 entries + 20 aux records
    outcome = _outcome(path)
    assert isinstance(outcome, ElfError) and "VERSION_RECORD_LIMIT" in outcome.detail


_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({bound}, {bound}))
from backend_packager.scanning.elf import scan_elf
for path in sys.argv[1:]:
    with open(path, "rb") as stream:
        info = scan_elf(stream, path)
    print(info.exports.count + len(info.imports))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_memory_bound_holds_at_the_symbol_limit(tmp_path: Path) -> None:
    """The scan of files at SYMBOL_LIMIT (all imports: the costliest; all exports) fits
    in MEMORY_BOUND of address space, as the module docstring states."""
    paths = []
    for imports in (True, False):
        path = tmp_path / f"limit-{imports}.so"
        path.write_bytes(make_elf_corpus.at_symbol_limit(imports))
        paths.append(str(path))
    code = _CHILD.format(bound=elf.MEMORY_BOUND)
    proc = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    *counts, peak_kb = map(int, proc.stdout.split())
    assert counts == [elf.SYMBOL_LIMIT - 1] * 2
    assert peak_kb * 1024 < elf.MEMORY_BOUND


def test_capture_plan_stays_within_the_scan_budget() -> None:
    """Program headers naming thousands of note and dynamic ranges, and a read-only
    segment of 1 TiB: what a streamed scan keeps stays within SCAN_BYTES_LIMIT."""
    import struct

    count = 4000
    phdrs = [struct.pack("<IIQQQQQQ", elf.PT_NOTE, 4, (i + 1) << 21, 0, 0, 1 << 20, 1 << 20, 4) for i in range(count)]
    phdrs.append(struct.pack("<IIQQQQQQ", elf.PT_LOAD, 4, 0, 0, 0, 1 << 40, 1 << 40, 4096))
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0, 64, 1 << 41, 0, 64,
                         56, len(phdrs), 64, 40, 39)
    ranges = elf.capture_ranges(header + b"".join(phdrs))
    assert ranges is not None and ranges == elf.merge(ranges)
    assert sum(hi - lo for lo, hi in ranges) <= elf.SCAN_BYTES_LIMIT

    def kept(lo: int, hi: int) -> bool:
        return any(a <= lo and hi <= b for a, b in ranges)

    assert kept(0, 64 + 56 * len(phdrs)) and kept(1 << 41, (1 << 41) + 40 * 64)  # the headers come first


def test_many_pyinit_exports_are_found_in_one_pass(tmp_path: Path) -> None:
    """1,000 PyInit_* among 5,000 exports: the summarised table keeps each with its own
    .dynsym entry (the first, for a name exported twice), found without a search per name."""
    names = [b"PyInit_m%04d" % i for i in range(elftables.PYINIT_LIMIT - 24)] + [b"sym_%d" % i for i in range(4000)]
    lib = elfgen.library([*names, b"PyInit_m0000"])  # a duplicate: the first entry is kept
    lib.sections[0].data = lib.sections[0].data[:-24] + elfgen.sym(1, elfgen.STB_WEAK << 4 | elfgen.STT_FUNC, 7)
    path = tmp_path / "libmany.so"
    path.write_bytes(elfgen.build(lib))
    info = scan(path)
    assert not info.exports.complete and info.exports.count == len(names) + 1
    assert info.python_extension[:2] == ["m0000", "m0000"] and len(info.python_extension) == len(names) - 4000 + 1
    kept = {s.name: s.binding for s in info.exports.symbols}
    assert len(kept) == elftables.PYINIT_LIMIT - 24 and kept["PyInit_m0000"] == "GLOBAL"


def test_a_failed_comment_guess_asks_the_second_pass() -> None:
    """Captured: every table but the section names. The guessed .comment (a string section
    whose size runs past the file) fails its checks: that asks for a second pass, which
    finds .comment by name, as the whole-file scan does, instead of failing the file."""
    import io
    import struct

    lib = elfgen.library([b"f"], program_headers=False)
    lib.sections += [elfgen.Section(".decoy", elfgen.SHT_PROGBITS, b"decoy\0", elfgen.SHF_STRINGS, size=1 << 20),
                     elfgen.Section(".comment", elfgen.SHT_PROGBITS, b"GCC: (test) 1.0\0", elfgen.SHF_STRINGS)]
    data = elfgen.build(lib)
    whole = scan_elf(io.BytesIO(data), "x")
    assert whole.compiler == ["GCC: (test) 1.0"]
    shoff, shstrndx = struct.unpack_from("<Q", data, 40)[0], struct.unpack_from("<H", data, 62)[0]
    names_at = struct.unpack_from("<Q", data, shoff + 64 * shstrndx + 24)[0]
    with pytest.raises(elf.CaptureMiss) as miss:
        scan_elf(io.BytesIO(data), "x", size=len(data), available=[(0, names_at), (shoff, len(data))])
    assert scan_elf(io.BytesIO(data), "x", size=len(data), available=miss.value.ranges) == whole
