"""PT_INTERP: the interpreter a manifest records, and the label it gives (PIE is an executable).

Real files compiled here by gcc (a PIE, a non-PIE executable, a shared library) are checked
against ``readelf -l``; crafted ones (``tests/helpers/elfgen``) carry PT_INTERP paths that
point outside the file, are unterminated, empty or too long: each fails with its reason
code, the same through the whole-file scan and the streamed one. Old manifests without the
field still load; an oversized one is refused.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import elfgen, zipgen
from helpers.cli import run_cli
from helpers.csrc import ElfFixtures
from helpers.manifests import sample
from helpers.scratch import session_dir
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_backend_runtime.base.errors import ManifestError
from triton_backend_runtime.manifest import model as m

from backend_packager.base.errors import ElfError
from backend_packager.commands.scan import scan_paths
from backend_packager.scanning.artifacts import ArtifactSink, artifact_from_file
from backend_packager.scanning.elf import INTERP_LIMIT, CaptureMiss

TOOL_C = '#include <stdio.h>\nint main(void) { puts("tool"); return 0; }\n'
#: The PT_INTERP program header in elfgen's layout: after the ELF header and one PT_LOAD.
INTERP_PHDR = 64 + 56


@dataclass
class Programs:
    pie: Path
    no_pie: Path
    library: Path


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory, elf_files: ElfFixtures) -> Programs:
    d = session_dir(tmp_path_factory, "pie")
    source = d / "tool.c"
    source.write_text(TOOL_C)
    pie, no_pie = d / "tool-pie", d / "tool-no-pie"
    subprocess.run(["gcc", "-fPIE", "-pie", "-o", str(pie), str(source)], check=True, capture_output=True)
    subprocess.run(["gcc", "-no-pie", "-o", str(no_pie), str(source)], check=True, capture_output=True)
    return Programs(pie, no_pie, elf_files.exports)


def readelf_interpreter(path: Path) -> str | None:
    """The oracle: ``readelf -l``'s "[Requesting program interpreter: PATH]"."""
    out = subprocess.run(["readelf", "-lW", str(path)], check=True, capture_output=True, text=True).stdout
    found = re.search(r"\[Requesting program interpreter: (.*)\]", out)
    return found.group(1) if found else None


def readelf_type(path: Path) -> str:
    out = subprocess.run(["readelf", "-hW", str(path)], check=True, capture_output=True, text=True).stdout
    found = re.search(r"Type:\s+(\w+)", out)
    assert found, out
    return found.group(1)


@pytest.mark.parametrize(("which", "file_type", "kind"), [
    ("pie", "DYN", "executable"), ("no_pie", "EXEC", "executable"), ("library", "DYN", "library"),
])
def test_interpreter_and_kind_match_readelf(programs: Programs, which: str, file_type: str, kind: str) -> None:
    path: Path = getattr(programs, which)
    info = artifact_from_file(path, path.name).elf
    assert info is not None
    assert readelf_type(path) == info.file_type == file_type
    assert info.interpreter == readelf_interpreter(path)
    assert (info.interpreter is None) == (which == "library")
    assert m.file_kind(info) == kind


def test_streamed_scan_records_the_interpreter_and_inspect_labels(programs: Programs, tmp_path: Path) -> None:
    """Wheel members are streamed (only planned ranges kept): the interpreter must be among
    them. Then the manifest ``migrate`` writes carries it, and ``inspect`` labels by it."""
    files = {f"tool/{p.name}": p for p in (programs.pie, programs.no_pie, programs.library)}
    payload = {name: path.read_bytes() for name, path in files.items()}
    wheel = tmp_path / "tool-1.0-py3-none-any.whl"
    wheel.write_bytes(zipgen.wheel_bytes(zipgen.Archive(zipgen.base_members("tool", "1.0", payload))))
    result = scan_paths([wheel])
    assert not result.errors
    kinds = {a.path: k for a, k in zip(result.artifacts, result.kinds, strict=True) if a.elf is not None}
    assert kinds == {"tool/tool-pie": "executable", "tool/tool-no-pie": "executable",
                     "tool/libexports.so": "library"}
    for artifact in result.artifacts:
        if artifact.path in files:
            assert artifact.elf == artifact_from_file(files[artifact.path], "x").elf

    out = tmp_path / "out"
    migrated = run_cli("migrate", str(wheel), "-o", str(out), "-q")
    assert migrated.returncode == 0, migrated.stderr
    shown = run_cli("inspect", str(out / wheel.name))
    assert shown.returncode == 0, shown.stderr
    interp = readelf_interpreter(programs.pie)
    assert f"executable (DYN, PIE; interpreter {interp})" in shown.stdout
    assert f"executable (EXEC; interpreter {interp})" in shown.stdout
    assert "library (DYN)" in shown.stdout
    doc = json.loads(run_cli("inspect", "--json", str(out / wheel.name)).stdout)["wheels"][0]
    assert doc["kinds"] == kinds
    listed = {a["path"]: a["elf"] for a in doc["manifest"]["artifacts"] if a["elf"]}
    assert listed["tool/tool-pie"]["interpreter"] == interp and listed["tool/libexports.so"]["interpreter"] is None


# -- crafted PT_INTERP ----------------------------------------------------------------------


def crafted(interp: bytes, *, offset: int | None = None, size: int | None = None) -> bytes:
    """A small library with PT_INTERP over ``interp`` + NUL; ``offset``/``size`` override the
    program header's p_offset and p_filesz (the path itself stays where it was laid out)."""
    data = bytearray(elfgen.build(elfgen.library([b"f"], interpreter=interp)))
    p_type, _, p_offset, _, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, INTERP_PHDR)
    assert p_type == elfgen.PT_INTERP and data[p_offset : p_offset + p_filesz] == interp + b"\0"
    struct.pack_into("<Q", data, INTERP_PHDR + 8, p_offset if offset is None else offset)
    struct.pack_into("<Q", data, INTERP_PHDR + 32, p_filesz if size is None else size)
    return bytes(data)


def both_ways(data: bytes, tmp_path: Path) -> object:
    """The whole-file scan's result (the ElfInfo or the error code), checked equal to the
    streamed scan's (with the second pass a miss asks for)."""
    path = tmp_path / "crafted.so"
    path.write_bytes(data)
    try:
        whole: object = artifact_from_file(path, "crafted.so").elf
    except ElfError as exc:
        whole = exc.code
    assert _streamed(data) == whole
    return whole


def _streamed(data: bytes) -> object:
    capture = None
    for _ in range(2):
        sink = ArtifactSink("crafted.so", "crafted.so", capture=capture)
        try:
            sink.update(data)
            return sink.finish().elf
        except CaptureMiss as miss:
            assert capture is None, "the second pass asked for more"
            capture = miss.ranges
        except ElfError as exc:
            return exc.code
        finally:
            sink.close()
    raise AssertionError("unreachable")


def test_crafted_interpreter_is_read(tmp_path: Path) -> None:
    info = both_ways(crafted(b"/opt/ld.so"), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so" and m.file_kind(info) == "executable"
    # Read as the kernel reads it: up to the first NUL of a NUL-terminated segment.
    info = both_ways(crafted(b"/opt/ld.so\0junk"), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"


@pytest.mark.parametrize(("offset", "size", "code"), [
    (1 << 40, None, "elf.truncated"),  # the path lies past the end of the file
    (None, 4, "elf.corrupt"),  # unterminated: its last byte is not NUL
    (None, 1, "elf.corrupt"),  # shorter than a one-byte path and its NUL
    (None, 0, "elf.corrupt"),
    (None, INTERP_LIMIT + 1, "elf.limit"),  # longer than PATH_MAX
])
def test_crafted_interpreter_fails_with_a_reason(tmp_path: Path, offset: int | None, size: int | None,
                                                 code: str) -> None:
    assert both_ways(crafted(b"/opt/ld.so", offset=offset, size=size), tmp_path) == code


def test_empty_interpreter_and_limit_named(tmp_path: Path) -> None:
    assert both_ways(crafted(b""), tmp_path) == "elf.corrupt"
    path = tmp_path / "long.so"
    path.write_bytes(crafted(b"/x" * 2048))
    with pytest.raises(ElfError) as err:
        artifact_from_file(path, "long.so")
    assert err.value.code == "elf.limit" and "INTERP_LIMIT" in str(err.value)
    proc = run_cli("scan", "--json", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == ["elf.limit"]


@settings(max_examples=60, deadline=5000, database=None)
@given(interp=st.binary(max_size=40), offset=st.none() | st.integers(0, 1 << 16),
       size=st.none() | st.integers(0, 2 * INTERP_LIMIT))
def test_drawn_interpreter_segments(tmp_path_factory: pytest.TempPathFactory, interp: bytes, offset: int | None,
                                    size: int | None) -> None:
    """The outcome the kernel's rules predict, whatever the segment says."""
    data = crafted(interp, offset=offset, size=size)
    at, length = struct.unpack_from("<Q", data, INTERP_PHDR + 8)[0], struct.unpack_from("<Q", data, INTERP_PHDR + 32)[0]
    raw = data[at : at + length]
    scratch = tmp_path_factory.getbasetemp() / "drawn-interp"
    scratch.mkdir(exist_ok=True)
    result = both_ways(data, scratch)
    if length > INTERP_LIMIT:
        assert result == "elf.limit"
    elif length < 2:
        assert result == "elf.corrupt"
    elif at + length > len(data):
        assert result == "elf.truncated"
    elif raw[-1] != 0 or raw[0] == 0:
        assert result == "elf.corrupt"
    else:
        assert isinstance(result, m.ElfInfo)
        assert result.interpreter == raw[: raw.index(0)].decode("utf-8", "backslashreplace")


# -- the manifest field -------------------------------------------------------------------


def test_manifest_without_interpreter_loads_and_oversized_is_refused(elf_files: ElfFixtures) -> None:
    doc = json.loads(m.to_json(sample(elf_files)))
    elf = doc["artifacts"][0]["elf"]
    assert "interpreter" in elf and elf["interpreter"] is None
    del elf["interpreter"]  # a manifest before schema 1.3
    doc["schema_version"] = "1.2"
    old = m.from_json(json.dumps(doc).encode())
    assert old.artifacts[0].elf is not None and old.artifacts[0].elf.interpreter is None
    elf["interpreter"] = "/lib64/ld-linux-x86-64.so.2"
    assert m.from_json(json.dumps(doc).encode()).artifacts[0].elf.interpreter == elf["interpreter"]  # type: ignore[union-attr]
    for bad, detail in ((7, "expected string"), ("/" * (m.INTERP_MAX_CHARS + 1), "the limit is")):
        elf["interpreter"] = bad
        with pytest.raises(ManifestError) as err:
            m.from_json(json.dumps(doc).encode(), "x.dist-info/triton_backend.json")
        assert err.value.code == "manifest.schema" and "interpreter" in str(err.value) and detail in str(err.value)


def test_json_schema_bounds_the_interpreter(elf_files: ElfFixtures) -> None:
    prop = m.json_schema()["$defs"]["ElfInfo"]["properties"]["interpreter"]
    assert {"type": "string", "maxLength": m.INTERP_MAX_CHARS} in prop["anyOf"] and "interpreter" not in \
        m.json_schema()["$defs"]["ElfInfo"]["required"]
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(m.to_json(sample(elf_files)))
    doc["artifacts"][0]["elf"]["interpreter"] = "/" * (m.INTERP_MAX_CHARS + 1)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, m.json_schema())


def test_reference_lists_every_elf_cap() -> None:
    """The cap table of docs/reference/manifest.md names every ``*_LIMIT`` of the scanner, with its value."""
    from backend_packager.scanning import elf, elftables

    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "manifest.md").read_text()
    section = page.split("\n## The ELF scanner's caps\n", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| ([^|]+) \|", section, re.MULTILINE))
    caps = {name: getattr(module, name) for module in (elf, elftables) for name in dir(module)
            if name.endswith("_LIMIT") and isinstance(getattr(module, name), int)
            and not hasattr(m, name)}  # EXPORT_LIST_LIMIT is the manifest's summary threshold, no cap
    caps["MEMORY_BOUND"] = elf.MEMORY_BOUND
    assert set(caps) <= set(rows), set(caps) - set(rows)
    units = {"MiB": 1 << 20, "KiB": 1 << 10, "bytes": 1}
    for name, value in caps.items():
        number, unit = re.fullmatch(r"(?:about )?([\d,]+)(?: (MiB|KiB|bytes))?(?: each)?", rows[name].strip()).groups()
        shown = int(number.replace(",", "")) * units.get(unit or "bytes", 1)
        assert shown == value or (rows[name].startswith("about") and abs(shown - value) < 1 << 20), (name, value)


# -- crafted PT_INTERP: two, overflowing, without section headers --------------------------


def test_the_first_of_two_interpreters_rules(tmp_path: Path) -> None:
    """As Linux's binfmt_elf: the first PT_INTERP is the one; a bad second is not read."""
    data = bytearray(crafted(b"/opt/ld.so"))
    interp = bytes(data[INTERP_PHDR : INTERP_PHDR + 56])
    data[64:120] = interp  # the PT_LOAD before it becomes a second, identical PT_INTERP ...
    info = both_ways(bytes(data), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"
    data[INTERP_PHDR + 32 : INTERP_PHDR + 40] = (1).to_bytes(8, "little")  # ... the second now bad
    info = both_ways(bytes(data), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"
    data[64 + 32 : 64 + 40] = (1).to_bytes(8, "little")  # the first bad: refused
    assert both_ways(bytes(data), tmp_path) == "elf.corrupt"


def test_offset_and_size_overflowing_64_bits(tmp_path: Path) -> None:
    assert both_ways(crafted(b"/opt/ld.so", offset=(1 << 64) - 2, size=16), tmp_path) == "elf.truncated"


def test_an_interpreter_without_section_headers(tmp_path: Path) -> None:
    """No section headers (e_shoff, e_shnum, e_shstrndx zero) and no dynamic segment: the
    interpreter still read, the same both ways (with PT_DYNAMIC it is refused: below)."""
    data = bytearray(crafted(b"/opt/ld.so"))
    data[40:48] = bytes(8)  # e_shoff
    data[60:64] = bytes(4)  # e_shnum, e_shstrndx
    info = both_ways(bytes(data), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"


def test_a_library_without_section_headers_is_refused(elf_files: ElfFixtures, tmp_path: Path) -> None:
    """sstrip-style: the section headers gone, the library still loads (dlopen reads only
    PT_DYNAMIC), needing libm and exporting symbols. Recorded it would say "needs nothing,
    exports nothing, complete"; it is refused, both ways, and by the CLI."""
    import ctypes

    data = bytearray(elf_files.exports.read_bytes())
    data[40:48] = bytes(8)  # e_shoff
    data[60:64] = bytes(4)  # e_shnum, e_shstrndx
    path = tmp_path / "libnosections.so"
    path.write_bytes(data)
    ctypes.CDLL(str(path))  # the loader takes it
    assert both_ways(bytes(data), tmp_path) == "elf.corrupt"
    proc = run_cli("scan", "--json", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [e["code"] for e in errors] == ["elf.corrupt"] and "PT_DYNAMIC" in errors[0]["message"]


def test_a_dynamic_section_elsewhere_than_the_segment_is_refused(elf_files: ElfFixtures, tmp_path: Path) -> None:
    """Section headers that lie: .dynamic moved 16 bytes on (its DT_NEEDED then not the
    loader's). Refused, both ways."""
    import struct

    data = bytearray(elf_files.exports.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 40)
    shnum, = struct.unpack_from("<H", data, 60)
    for i in range(shnum):
        at = shoff + 64 * i
        if struct.unpack_from("<I", data, at + 4)[0] == 6:  # SHT_DYNAMIC
            offset, = struct.unpack_from("<Q", data, at + 24)
            struct.pack_into("<Q", data, at + 24, offset + 16)
            break
    else:
        raise AssertionError("no .dynamic section")
    assert both_ways(bytes(data), tmp_path) == "elf.corrupt"
