"""``backend-packager scan``: files, directories and wheels; one line per bad file."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.csrc import ElfFixtures, patched_copy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))


def test_scan_directory_json(elf_files: ElfFixtures, tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    for lib in (elf_files.exports, elf_files.plugin_v2):
        (good / lib.name).write_bytes(lib.read_bytes())
    (good / "README.txt").write_text("not scanned: neither .so nor ELF")
    proc = run_cli("scan", "--json", str(good))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [a["path"] for a in doc["artifacts"]] == ["libdemo_plugin.so", "libexports.so"]
    assert doc["errors"] == []
    plugin = doc["artifacts"][0]
    assert plugin["elf"]["plugin"] == {"api": "v2", "symbols": ["tritonGetPluginInfo"]}


def test_bad_files_each_get_one_line_and_do_not_stop_the_others(elf_files: ElfFixtures, tmp_path: Path) -> None:
    big_endian = patched_copy(elf_files.exports, tmp_path / "libbe.so", 5, b"\x02")
    bits32 = patched_copy(elf_files.exports, tmp_path / "lib32.so", 4, b"\x01")
    arm = patched_copy(elf_files.exports, tmp_path / "libarm.so", 18, (40).to_bytes(2, "little"))
    bad = [elf_files.not_elf, elf_files.truncated, big_endian, bits32, arm]
    proc = run_cli("scan", str(elf_files.exports), *map(str, bad), str(elf_files.plugin_v1))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(bad)
    for path, line in zip(bad, lines, strict=True):
        assert str(path) in line
    assert "not an ELF file" in lines[0]
    assert "truncated" in lines[1]
    assert "big-endian" in lines[2]
    assert "32-bit" in lines[3]
    assert "foreign architecture ARM" in lines[4]
    assert "libexports.so" in proc.stdout and "libold_plugin.so" in proc.stdout
    assert "triton-plugin-v1" in proc.stdout


def test_scan_wheel_reads_members_without_extracting(elf_files: ElfFixtures, tmp_path: Path) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(elf_files.plugin_v2, "demo/lib/libdemo_plugin.so")
        archive.write(elf_files.not_elf, "demo/lib/libbroken.so")
        archive.writestr("demo/__init__.py", "")
    proc = run_cli("scan", "--json", str(wheel))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert [a["path"] for a in doc["artifacts"]] == ["demo/lib/libdemo_plugin.so"]
    assert doc["errors"][0]["path"] == f"{wheel}!demo/lib/libbroken.so"
    assert doc["errors"][0]["code"] == "elf.not-elf"
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]


def test_missing_path_and_bad_zip(tmp_path: Path) -> None:
    notzip = tmp_path / "broken-1.0-py3-none-any.whl"
    notzip.write_text("no zip here")
    proc = run_cli("scan", "--json", str(tmp_path / "absent.so"), str(notzip))
    assert proc.returncode == 2  # a path that is not there is unusable input, as on every command
    errors = json.loads(proc.stdout)["errors"]
    assert [(e["code"], e["path"]) for e in errors] == [("input.missing", str(tmp_path / "absent.so")),
                                                        ("wheel.not-zip", str(notzip))]
    assert len(proc.stderr.splitlines()) == 2 and "Traceback" not in proc.stderr


def test_help_and_usage() -> None:
    assert run_cli("scan", "--help").returncode == 0
    assert run_cli("scan").returncode == 2
    assert run_cli("--version").returncode == 0


def _stream_scan(path: Path, sparse: bool = True, capture: list[tuple[int, int]] | None = None) -> object:
    from backend_packager.scanning.artifacts import ArtifactSink

    sink = ArtifactSink(path.name, str(path), sparse=sparse, capture=capture)
    data = path.read_bytes()
    for start in range(0, len(data), 4096):  # small chunks: ranges straddle chunk edges
        sink.update(data[start : start + 4096])
    return sink.finish()


def test_streamed_sparse_scan_equals_file_scan(elf_files: ElfFixtures, tmp_path: Path) -> None:
    from helpers.csrc import CSRC, gcc

    from backend_packager.scanning.artifacts import artifact_from_file

    # The old single-segment layout (text and dynamic tables in one R+X segment) as well.
    old = gcc(tmp_path / "libold_layout.so", str(CSRC / "exports.c"), "-lm", "-Wl,-z,noseparate-code")
    for lib in (elf_files.exports, elf_files.plugin_v2, elf_files.pyext, elf_files.runpath, elf_files.versioned, old):
        assert _stream_scan(lib) == artifact_from_file(lib, lib.name), lib


def test_capture_miss_falls_back_to_whole_file(elf_files: ElfFixtures, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    from backend_packager.scanning import elf
    from backend_packager.scanning.artifacts import artifact_from_file

    monkeypatch.setattr(elf, "TAIL_CAPTURE", 0)  # .comment is no longer captured
    with pytest.raises(elf.CaptureMiss) as miss:
        _stream_scan(elf_files.exports)
    assert _stream_scan(elf_files.exports, sparse=False) == artifact_from_file(elf_files.exports, "libexports.so")
    assert _stream_scan(elf_files.exports, capture=miss.value.ranges) == artifact_from_file(elf_files.exports,
                                                                                             "libexports.so")
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(elf_files.exports, "demo/libexports.so")
    from backend_packager.commands.scan import scan_paths

    (record,) = scan_paths([wheel]).artifacts
    assert record.elf == artifact_from_file(elf_files.exports, "x").elf


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_spool_is_bounded_by_what_the_scan_needs(elf_files: ElfFixtures, tmp_path: Path) -> None:
    """An ELF member without program headers, behind 64 MiB of zeros (a wheel of 100 KB):
    the first pass keeps the headers, the second exactly the tables; never the member."""
    import make_elf_corpus

    from backend_packager.commands.scan import scan_paths
    from backend_packager.scanning.artifacts import ArtifactSink, artifact_from_file
    from backend_packager.scanning.elf import CaptureMiss

    data = make_elf_corpus.no_program_headers(gap=64 << 20)
    lib = tmp_path / "libgap.so"
    lib.write_bytes(data)
    kept = []
    capture = None
    for _ in range(2):
        sink = ArtifactSink(lib.name, lib.name, capture=capture)
        for start in range(0, len(data), 1 << 20):
            sink.update(data[start : start + (1 << 20)])
        kept.append(sink.kept)
        try:
            record = sink.finish()
            break
        except CaptureMiss as miss:
            capture = miss.ranges
    assert len(kept) == 2 and max(kept) < 64 << 10, kept
    assert record == artifact_from_file(lib, lib.name)
    wheel = _wheel(tmp_path / "gap-1.0-py3-none-linux_x86_64.whl", {"gap/libgap.so": data})
    assert wheel.stat().st_size < 1 << 20
    (scanned,) = scan_paths([wheel]).artifacts
    assert scanned.elf == record.elf and [i.name for i in scanned.elf.imports] == ["malloc"]


def test_pie_is_an_executable_and_foreign_binaries_are_unsupported(elf_files: ElfFixtures, tmp_path: Path) -> None:
    import subprocess

    src = tmp_path / "tool.c"
    src.write_text('#include <stdio.h>\nint main(void) { puts("tool"); return 0; }\n')
    pie = tmp_path / "tool"
    subprocess.run(["gcc", "-fPIE", "-pie", "-o", str(pie), str(src)], check=True, capture_output=True)
    assert "DYN" in subprocess.run(["readelf", "-h", str(pie)], capture_output=True, text=True).stdout
    proc = run_cli("scan", str(pie), str(elf_files.exports))
    assert proc.returncode == 0, proc.stderr
    kinds = {line.split()[0]: line.split()[-2] for line in proc.stdout.splitlines()[1:]}
    assert kinds == {"tool": "executable", "libexports.so": "library"}

    wheel = _wheel(tmp_path / "winonly-1.0-py3-none-win_amd64.whl", {
        "winonly/native.pyd": b"MZ" + bytes(200), "winonly/libmac.dylib": b"\xcf\xfa\xed\xfe" + bytes(200),
        "winonly/__init__.py": b"",
    })
    proc = run_cli("scan", "--json", str(wheel))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [a["path"] for a in doc["artifacts"]] == ["winonly/libmac.dylib", "winonly/native.pyd"]
    assert [(w["code"], w["message"]) for w in doc["warnings"]] == [
        ("elf.unsupported", "unsupported binary format (Mach-O): listed, not scanned"),
        ("elf.unsupported", "unsupported binary format (PE): listed, not scanned"),
    ]
    table = run_cli("scan", str(wheel))
    assert "unsupported (PE)" in table.stdout and "unsupported (Mach-O)" in table.stdout
    assert table.stderr.count("warning:") == 2


def test_second_pass_finds_comment_by_name(tmp_path: Path) -> None:
    """The first pass, without section names, guesses .comment (the first non-allocated
    string section); the second knows the names: it must have kept the named one too."""
    from helpers import elfgen as g

    from backend_packager.scanning.artifacts import artifact_from_file

    lib = g.library([b"f"], program_headers=False)
    lib.sections += [g.Section(".decoy", g.SHT_PROGBITS, b"decoy 1.0\0", g.SHF_STRINGS),
                     g.Section(".comment", g.SHT_PROGBITS, b"GCC: (test) 1.0\0", g.SHF_STRINGS)]
    path = tmp_path / "libnamed.so"
    path.write_bytes(g.build(lib))
    whole = artifact_from_file(path, path.name)
    assert whole.elf is not None and whole.elf.compiler == ["GCC: (test) 1.0"]
    from backend_packager.scanning.elf import CaptureMiss

    with pytest.raises(CaptureMiss) as miss:
        _stream_scan(path)
    assert _stream_scan(path, capture=miss.value.ranges) == whole
