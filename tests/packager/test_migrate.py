"""``backend-packager migrate``: legacy wheels built here with setuptools, bad inputs, determinism."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate, run_cli, run_on_terminal
from helpers.csrc import ElfFixtures
from helpers.projects import (
    Keypair,
    build_env,
    built_wheel,
    fresh_venv,
    keygen,
    pip_install,
    rezip,
    write_legacy_project,
)
from helpers.wheelcheck import assert_strict_zip, assert_vouches_for_every_file, entry_points_of


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory, elf_files: ElfFixtures) -> dict[str, Path]:
    """Three legacy wheels: declared entry points, none, and the directory-scan layout."""
    base = tmp_path_factory.mktemp("legacy")
    specs = {
        "with_ep": ("legacy-ep-backend", "legacy_ep_backend", "legacyep"),
        "no_ep": ("legacy-noep-backend", "legacy_noep_backend", None),
        "dir_scan": ("triton-fork-backend", "triton.backends.forkgpu", None),
    }
    wheels = {}
    for key, (name, package, entry_point) in specs.items():
        project = write_legacy_project(base / key, name, package, elf_files.plugin_v2, entry_point)
        wheels[key] = built_wheel(project, base / f"{key}-dist", build_env(None))
    return wheels


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "migrate-test")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(wheel: Path, key: Keypair) -> subprocess.CompletedProcess[str]:
    return run_cli("verify", str(wheel), "--trust", str(key.public))


def test_declared_entry_points(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    src = legacy["with_ep"]
    before = sha(src)
    proc = migrate(src, tmp_path, key, "--json")
    assert proc.returncode == 0, proc.stderr
    (outcome,) = json.loads(proc.stdout)["wheels"]
    assert outcome["status"] == "migrated"
    assert outcome["backends"] == ["legacyep"]
    assert outcome["plugins"] == ["legacy_ep_backend/lib/libdemo_plugin.so"]
    out = tmp_path / src.name
    assert verify(out, key).returncode == 0, verify(out, key).stdout
    assert sha(src) == before
    info = json.loads(run_cli("inspect", "--json", str(out)).stdout)["wheels"][0]
    assert json.dumps(info).count("legacy_ep_backend.compiler:LegacyEpBackendBackend") == 1


def test_no_entry_points_needs_backend_flag_then_installs(legacy: dict[str, Path], key: Keypair,
                                                          tmp_path: Path) -> None:
    src = legacy["no_ep"]
    plain = migrate(src, tmp_path / "plain", key, "--json")
    assert json.loads(plain.stdout)["wheels"][0]["backends"] == []
    proc = migrate(src, tmp_path, key, "--backend", "noep=legacy_noep_backend")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / src.name
    assert "noep = legacy_noep_backend" in entry_points_of(out)
    assert verify(out, key).returncode == 0
    python = fresh_venv(tmp_path / "venv")
    pip_install(python, str(out))
    code = ("from importlib.metadata import entry_points; "
            "print(sorted((e.name, e.value) for e in entry_points(group='triton.backends')))")
    seen = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    assert seen.strip() == "[('noep', 'legacy_noep_backend')]"


def test_directory_scan_layout_gets_entry_points(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    src = legacy["dir_scan"]
    assert "triton.backends" not in (entry_points_of(src) if _has_entry_points(src) else "")
    proc = migrate(src, tmp_path, key, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["wheels"][0]["backends"] == ["forkgpu"]
    out = tmp_path / src.name
    assert "forkgpu = triton.backends.forkgpu" in entry_points_of(out)
    assert verify(out, key).returncode == 0


def _has_entry_points(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as archive:
        return any(n.endswith("entry_points.txt") for n in archive.namelist())


def test_hash_only_without_key_then_resign(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    src = legacy["with_ep"]
    proc = migrate(src, tmp_path / "a", None)
    assert proc.returncode == 0
    assert "hash-only" in proc.stderr
    unsigned = tmp_path / "a" / src.name
    check = verify(unsigned, key)
    assert check.returncode == 1 and "not signed" in check.stdout
    proc = migrate(unsigned, tmp_path / "b", key)
    assert proc.returncode == 0
    assert proc.stdout.startswith("re-signed")
    assert "re-scanned and re-signed" in proc.stderr
    assert verify(tmp_path / "b" / src.name, key).returncode == 0


def test_directory_of_wheels_in_parallel(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for wheel in legacy.values():
        shutil.copy(wheel, inputs)
    proc = migrate(inputs, tmp_path / "out", key, "--jobs", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failed"] == 0
    assert sorted(Path(w["output"]).name for w in summary["wheels"]) == sorted(w.name for w in legacy.values())
    plain = migrate(inputs, tmp_path / "out2", key)
    assert plain.stdout.count("migrated ") == 3  # not a terminal: one plain line per wheel


def test_same_wheel_twice_is_byte_identical(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    src = legacy["dir_scan"]
    for run in ("one", "two"):
        assert migrate(src, tmp_path / run, key, "--jobs", "2").returncode == 0
    assert (tmp_path / "one" / src.name).read_bytes() == (tmp_path / "two" / src.name).read_bytes()


@pytest.mark.parametrize("kind", ["with_ep", "no_ep", "dir_scan"])
def test_migrated_manifest_vouches_for_every_file(kind: str, legacy: dict[str, Path], key: Keypair,
                                                  tmp_path: Path) -> None:
    src = legacy[kind]
    assert migrate(src, tmp_path, key).returncode == 0
    manifest = assert_vouches_for_every_file(tmp_path / src.name)
    paths = {a["path"] for a in manifest["artifacts"]}
    native = {a["path"] for a in manifest["artifacts"] if a["elf"] is not None}
    assert {p for p in paths if p.endswith(".so")} == native and len(native) == 2  # extension and plugin
    assert any(p.endswith("/compiler.py") for p in paths) and any(p.endswith(".dist-info/METADATA") for p in paths)
    # Entry points are written for the first and last kinds; either way the file is vouched for.
    assert any(p.endswith(".dist-info/entry_points.txt") for p in paths) == (kind != "no_ep")
    assert verify(tmp_path / src.name, key).returncode == 0


def test_edited_source_fails_after_migration(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    src = legacy["with_ep"]
    assert migrate(src, tmp_path, key).returncode == 0

    def edit(members: dict[str, bytes]) -> None:
        members["legacy_ep_backend/compiler.py"] += b"\n# edited after signing\n"

    (tmp_path / "t").mkdir()
    tampered = rezip(tmp_path / src.name, tmp_path / "t" / src.name, edit)
    check = run_cli("verify", str(tampered), "--trust", str(key.public), "--json")
    findings = json.loads(check.stdout)["wheels"][0]["findings"]
    assert check.returncode == 1
    assert [(f["code"], f["path"]) for f in findings][:1] == [("artifact.sha256", "legacy_ep_backend/compiler.py")]


def test_a_plan_that_leaves_a_file_out_is_not_signed(legacy: dict[str, Path], tmp_path: Path) -> None:
    from triton_backend_runtime.manifest import model as m

    from backend_packager.base.errors import WheelError
    from backend_packager.manifest import contents as assemble
    from backend_packager.rewrite import rewrite_wheel
    from backend_packager.wheel.reader import WheelContents

    def forgetful(contents: WheelContents) -> assemble.Injection:
        injection = assemble.describe(contents, [], contents.entry_points, requirements=m.Requirements(""),
                                      provenance=m.Provenance("migrate", None), epoch=None)
        injection.manifest.artifacts = [a for a in injection.manifest.artifacts if not a.path.endswith(".py")]
        return injection

    with pytest.raises(WheelError) as caught:
        rewrite_wheel(legacy["with_ep"], tmp_path, forgetful, None)
    assert caught.value.code == "wheel.coverage" and caught.value.path.endswith(".py")
    assert list(tmp_path.iterdir()) == []


def test_output_members_are_raw_copies_in_order(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    src = legacy["with_ep"]
    assert migrate(src, tmp_path, key).returncode == 0
    assert_strict_zip(tmp_path / src.name)
    with zipfile.ZipFile(src) as before, zipfile.ZipFile(tmp_path / src.name) as after:
        assert after.testzip() is None
        names = after.namelist()
        dist = [n for n in names if ".dist-info/" in n]
        assert names[-len(dist):] == dist and dist[-1].endswith("RECORD")
        rewritten = ("/RECORD", "/entry_points.txt")
        for info in before.infolist():
            if not info.filename.endswith(rewritten):  # kept .dist-info files are raw copies too
                assert after.getinfo(info.filename).compress_size == info.compress_size
                assert after.getinfo(info.filename).CRC == info.CRC
                assert not after.getinfo(info.filename).flag_bits & 0x8


def test_foreign_binaries_are_listed_not_scanned(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    def add(members: dict[str, bytes]) -> None:
        members["legacy_ep_backend/lib/helper.dll"] = b"MZ\x90\x00" + bytes(200)
        members["legacy_ep_backend/lib/libmac.dylib"] = b"\xcf\xfa\xed\xfe" + bytes(200)

    src = rezip(legacy["with_ep"], tmp_path / legacy["with_ep"].name, add)
    proc = migrate(src, tmp_path / "out", key)
    assert proc.returncode == 0, proc.stderr
    assert "helper.dll: unsupported binary format" in proc.stderr
    assert "libmac.dylib: unsupported binary format" in proc.stderr


# -- bad input -------------------------------------------------------------------------------


def _patch_central_size(wheel: Path, member: str, size: int) -> None:
    data = bytearray(wheel.read_bytes())
    at = data.index(b"PK\x01\x02")
    while data[at + 46 : at + 46 + len(member)] != member.encode():
        at = data.index(b"PK\x01\x02", at + 4)
    data[at + 24 : at + 28] = size.to_bytes(4, "little")
    wheel.write_bytes(bytes(data))


def _bad_wheels(good: Path, tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (wheel, expected message part)."""
    out: dict[str, tuple[Path, str]] = {}
    tmp.mkdir(parents=True)
    name = good.name
    with zipfile.ZipFile(good) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    dist = next(n.split("/")[0] for n in members if ".dist-info/" in n)

    def write(label: str, entries: list[tuple[zipfile.ZipInfo | str, bytes]], message: str) -> None:
        path = tmp / label / name
        path.parent.mkdir()
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for info, data in entries:
                archive.writestr(info, data)
        out[label] = (path, message)

    items = list(members.items())
    (tmp / "notzip").mkdir()
    (tmp / "notzip" / name).write_text("plain text")
    out["notzip"] = (tmp / "notzip" / name, "not a zip file")
    (tmp / "truncated").mkdir()
    (tmp / "truncated" / name).write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    out["truncated"] = (tmp / "truncated" / name, "truncated")
    with pytest.warns(UserWarning, match="Duplicate name"):
        write("duplicate", [*items, (items[0][0], b"again")], "duplicate member name")
    write("absolute", [*items, ("/etc/evil.py", b"x")], "absolute or '..' member name")
    write("dotdot", [*items, ("legacy_ep_backend/../../evil.py", b"x")], "absolute or '..' member name")
    link = zipfile.ZipInfo("legacy_ep_backend/link.so")
    link.external_attr = 0o120777 << 16
    write("symlink", [*items, (link, b"/usr/lib/libc.so.6")], "symlink members are not allowed")
    write("no-record", [(n, d) for n, d in items if not n.endswith("RECORD")], "the wheel has no RECORD")
    write("bad-record", [(n, b"a,b\n" if n.endswith("RECORD") else d) for n, d in items], "expected 3 fields")
    write("no-wheel", [(n, d) for n, d in items if not n.endswith(".dist-info/WHEEL")], "the wheel has no WHEEL")
    write("bad-wheel", [(n, b"Generator: x\n" if n.endswith(".dist-info/WHEEL") else d) for n, d in items],
          "WHEEL has no Wheel-Version")
    rename = tmp / "renamed" / name.replace("-1.0-", "-2.0-")
    rename.parent.mkdir()
    shutil.copy(good, rename)
    out["renamed"] = (rename, "METADATA says 1.0")
    write("bad-entry-points", [(n, b"[triton.backends]\njunk\n" if n.endswith("entry_points.txt") else d)
                               for n, d in items], "malformed entry_points.txt: line 2")
    tampered = [(n, d + b"\n# edited" if n.endswith("compiler.py") else d) for n, d in items]
    write("corrupt", tampered, "sha256 differs from RECORD")
    bomb = tmp / "bomb" / name
    bomb.parent.mkdir()
    shutil.copy(good, bomb)
    _patch_central_size(bomb, f"{dist}/METADATA", 0xFFFFFF00)
    out["bomb"] = (bomb, "zip bomb")
    return out


def test_bad_inputs_fail_cleanly(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    cases = _bad_wheels(legacy["with_ep"], tmp_path / "bad")
    for label, (wheel, message) in cases.items():
        before = sha(wheel)
        out = tmp_path / "out" / label
        proc = migrate(wheel, out, key)
        assert proc.returncode == 1, label
        assert "Traceback" not in proc.stderr, label
        assert message in proc.stderr, (label, proc.stderr)
        assert str(wheel) in proc.stderr, label
        assert list(out.iterdir()) == [], label  # no output, not even a temporary file
        assert sha(wheel) == before, label


def test_bad_member_is_named(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    cases = _bad_wheels(legacy["with_ep"], tmp_path / "bad")
    wheel, _ = cases["corrupt"]
    proc = migrate(wheel, tmp_path / "out", key)
    assert f"{wheel}!legacy_ep_backend/compiler.py" in proc.stderr


def test_usage_errors(tmp_path: Path) -> None:
    absent = migrate(tmp_path / "absent.whl", tmp_path, None)
    assert absent.returncode == 2 and "(input.missing)" in absent.stderr  # unusable input
    assert run_cli("migrate", "-o", str(tmp_path)).returncode == 2
    assert run_cli("migrate", "--help").returncode == 0
    proc = migrate(tmp_path, tmp_path / "o", None, "--backend", "nonsense")
    assert proc.returncode == 2 and "NAME=PACKAGE" in proc.stderr


def test_progress_bar_on_a_terminal(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    returncode, screen, stdout = run_on_terminal("migrate", str(legacy["with_ep"]), "-o", str(tmp_path),
                                                 "--key", str(key.private))
    assert returncode == 0
    assert b"1/1 wheels" in screen and b"100%" in screen
    assert stdout.decode().startswith("migrated ")


def test_resigning_a_built_wheel_keeps_declarations(example_wheels: dict[str, Path], key: Keypair,
                                                    tmp_path: Path) -> None:
    built = example_wheels["setuptools_backend"]
    before = json.loads(run_cli("inspect", "--json", str(built)).stdout)["wheels"][0]["manifest"]
    proc = migrate(built, tmp_path, key)
    assert proc.returncode == 0, proc.stderr
    assert "declarations kept" in proc.stderr
    after = json.loads(run_cli("inspect", "--json", str(tmp_path / built.name)).stdout)["wheels"][0]["manifest"]
    assert after["backends"] == before["backends"] and after["backends"][0]["targets"] == ["demo"]
    assert after["provenance"] == before["provenance"] and after["provenance"]["kind"] == "build"
    assert after["requirements"] == before["requirements"]
    assert verify(tmp_path / built.name, key).returncode == 0


class _Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3), as streaming tools do."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return len(b)


def test_data_descriptors_in_the_input_are_not_copied(legacy: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    with zipfile.ZipFile(legacy["with_ep"]) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    sink = _Unseekable()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            with archive.open(name, "w") as stream:
                stream.write(data)
    src = tmp_path / "in" / legacy["with_ep"].name
    src.parent.mkdir()
    src.write_bytes(bytes(sink.data))
    with zipfile.ZipFile(src) as archive:
        assert all(info.flag_bits & 0x8 for info in archive.infolist())
    assert migrate(src, tmp_path / "out", key).returncode == 0
    out = tmp_path / "out" / src.name
    assert_strict_zip(out)
    assert verify(out, key).returncode == 0
