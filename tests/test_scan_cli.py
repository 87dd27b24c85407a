"""``backend-packager scan``: files, directories and wheels; one line per bad file."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import ElfFixtures, patched_copy, run_cli


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
    proc = run_cli("scan", str(tmp_path / "absent.so"), str(notzip))
    assert proc.returncode == 1
    assert "absent.so: no such file or directory" in proc.stderr
    assert f"{notzip}: not a readable wheel" in proc.stderr


def test_help_and_usage() -> None:
    assert run_cli("scan", "--help").returncode == 0
    assert run_cli("scan").returncode == 2
    assert run_cli("--version").returncode == 0


def _stream_scan(path: Path, sparse: bool = True) -> object:
    from backend_packager.artifacts import ArtifactSink

    sink = ArtifactSink(path.name, str(path), sparse=sparse)
    data = path.read_bytes()
    for start in range(0, len(data), 4096):  # small chunks: ranges straddle chunk edges
        sink.update(data[start : start + 4096])
    return sink.finish()


def test_streamed_sparse_scan_equals_file_scan(elf_files: ElfFixtures, tmp_path: Path) -> None:
    from conftest import CSRC, gcc

    from backend_packager.artifacts import artifact_from_file

    # The old single-segment layout (text and dynamic tables in one R+X segment) as well.
    old = gcc(tmp_path / "libold_layout.so", str(CSRC / "exports.c"), "-lm", "-Wl,-z,noseparate-code")
    for lib in (elf_files.exports, elf_files.plugin_v2, elf_files.pyext, elf_files.runpath, elf_files.versioned, old):
        assert _stream_scan(lib) == artifact_from_file(lib, lib.name), lib


def test_capture_miss_falls_back_to_whole_file(elf_files: ElfFixtures, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    from backend_packager import elf
    from backend_packager.artifacts import artifact_from_file

    monkeypatch.setattr(elf, "TAIL_CAPTURE", 0)  # .comment is no longer captured
    with pytest.raises(elf.CaptureMiss):
        _stream_scan(elf_files.exports)
    assert _stream_scan(elf_files.exports, sparse=False) == artifact_from_file(elf_files.exports, "libexports.so")
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(elf_files.exports, "demo/libexports.so")
    from backend_packager.scan import scan_paths

    (record,) = scan_paths([wheel]).artifacts
    assert record.elf == artifact_from_file(elf_files.exports, "x").elf
