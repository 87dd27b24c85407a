"""Migrating real wheels from the package index (cached outside the repo; CI runs these)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.projects import Keypair, fresh_venv, keygen, pip_install

pytestmark = pytest.mark.triton_wheel


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "real-wheels")


@pytest.fixture(scope="module")
def migrated_triton(triton_wheel: Path, key: Keypair, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("migrated")
    proc = run_cli("migrate", str(triton_wheel), "-o", str(out), "--key", str(key.private), "--json")
    assert proc.returncode == 0, proc.stderr
    (outcome,) = json.loads(proc.stdout)["wheels"]
    assert outcome["backends"] == ["amd", "nvidia"]
    return Path(outcome["output"])


def test_triton_verifies(migrated_triton: Path, key: Keypair) -> None:
    from helpers.wheelcheck import assert_strict_zip

    proc = run_cli("verify", str(migrated_triton), "--trust", str(key.public))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(coverage all)" in proc.stdout
    assert_strict_zip(migrated_triton)


def test_triton_manifest_vouches_for_every_file(migrated_triton: Path) -> None:
    from helpers.wheelcheck import assert_vouches_for_every_file

    manifest = assert_vouches_for_every_file(migrated_triton)
    listed = {a["path"]: a for a in manifest["artifacts"]}
    assert len(listed) > 500  # 598 files in triton 3.9.0: sources, data, executables, libraries, metadata
    # What runs besides the libraries: data linked into kernels, a bundled executable, sources.
    assert listed["triton/backends/nvidia/lib/libdevice.10.bc"]["elf"] is None
    assert listed["triton/backends/nvidia/bin/ptxas"]["elf"]["file_type"] == "EXEC"
    assert listed["triton/backends/nvidia/compiler.py"]["elf"] is None
    assert listed["triton/_C/libtriton.so"]["elf"]["exports"]["count"] > 1000
    dist_info = "triton-3.9.0.dist-info"
    assert {f"{dist_info}/{leaf}" for leaf in ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt",
                                                "licenses/LICENSE")} <= set(listed)


def test_edited_triton_source_fails(migrated_triton: Path, key: Keypair, tmp_path: Path) -> None:
    from helpers.projects import rezip

    def edit(members: dict[str, bytes]) -> None:
        members["triton/backends/nvidia/compiler.py"] += b"\n# edited after signing\n"
        for name in [n for n in members if n.endswith("/")]:
            del members[name]  # rezip would list directory entries in RECORD; a careful attacker would not

    tampered = rezip(migrated_triton, tmp_path / migrated_triton.name, edit)
    proc = run_cli("verify", str(tampered), "--trust", str(key.public), "--json")
    findings = [(f["code"], f["path"]) for f in json.loads(proc.stdout)["wheels"][0]["findings"]]
    assert proc.returncode == 1
    assert findings == [("artifact.sha256", "triton/backends/nvidia/compiler.py"),
                        ("artifact.size", "triton/backends/nvidia/compiler.py")]


def test_triton_installs_and_imports(migrated_triton: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    pip_install(python, str(migrated_triton))
    code = "import triton, triton.backends as b; print(sorted(b.backends))"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['amd', 'nvidia']"


def test_utlx_plugin_needs_libtriton(key: Keypair, tmp_path: Path) -> None:
    from _wheels import fetch_wheel

    wheel = fetch_wheel("triton-utlx==3.8.0.post16")
    proc = run_cli("migrate", str(wheel), "-o", str(tmp_path), "--key", str(key.private), "--json",
                   "--capture-plugins")
    assert proc.returncode == 0, proc.stderr
    out = Path(json.loads(proc.stdout)["wheels"][0]["output"])
    assert run_cli("verify", str(out), "--trust", str(key.public)).returncode == 0
    manifest = json.loads(run_cli("inspect", "--json", str(out)).stdout)["wheels"][0]
    manifest = manifest.get("manifest", manifest)
    (plugin,) = manifest["plugins"]
    assert (plugin["path"], plugin["api"], plugin["name"]) == ("utlx_plugin/libutlx.so", "v2", None)
    # no Triton where the packager runs, none in the wheel: recorded as not captured, and why
    assert (plugin["info"]["captured"], plugin["info"]["reason_code"]) == (False, "no-libtriton")
    (lib,) = [a for a in manifest["artifacts"] if a["path"] == "utlx_plugin/libutlx.so"]
    assert "libtriton.so" in lib["elf"]["needed"]
    assert lib["elf"]["plugin"]["api"] == "v2"
