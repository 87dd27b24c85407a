"""``backend-packager adopt`` on a real triton 3.9.0 installed in a venv, then ``doctor`` under
strict, as a platform team would: the plugins adopt records are the ones migrate records.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.manifests import manifest_plugins
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.manifest import model as m


@pytest.mark.triton_wheel
def test_real_triton_in_a_venv_adopted_then_strict_doctor(triton_wheel: Path, tmp_path: Path) -> None:
    from helpers.venv import make_venv

    venv = make_venv(tmp_path, triton_wheel)
    code, doc = _adopt_real(venv.site, venv.key, "--capture-plugins")
    assert code == 0, doc
    (outcome,) = doc["distributions"]
    assert outcome["backends"] == ["amd", "nvidia"] and outcome["artifacts"] > 500
    info = "triton-3.9.0.dist-info"
    assert outcome["written"] == [f"{info}/triton_backend.dsse.json", f"{info}/sboms/triton-backend.cdx.json",
                                  f"{info}/RECORD"]
    # Asked to, its bundled plugins say what they are (in the sandbox), from the installed files,
    # as migrate asks the wheel's.
    adopted = manifest_plugins((venv.site / "triton-3.9.0.dist-info" / MANIFEST_FILENAME).read_bytes())
    migrated = _migrated_plugins(triton_wheel, tmp_path / "migrated", venv.key)
    assert adopted == migrated
    captured = {p.path: p.info for p in adopted if p.info is not None and p.info.captured}
    assert set(captured) >= {"triton/plugins/libTritonPluginsTestLib.so", "triton/plugins/libMLIRDialectPlugin.so"}
    assert all(i.libtriton == "triton/_C/libtriton.so" and i.ran_in == "sandbox" for i in captured.values())
    assert venv.cli("trust", "add", str(venv.pub)).returncode == 0
    doctor = venv.cli("doctor", TRITON_BACKEND_POLICY="strict")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    for name in ("amd", "nvidia"):
        assert any(line.split()[:1] == [name] and "[verified, loaded" in line for line in doctor.stdout.splitlines())
    # An installed file edited afterwards: doctor rejects, and adopt refuses to sign it again.
    compiler = venv.site / "triton" / "backends" / "nvidia" / "compiler.py"
    compiler.write_bytes(compiler.read_bytes() + b"# edited after adoption\n")
    assert venv.cli("doctor", TRITON_BACKEND_POLICY="strict").returncode == 1
    code, doc = _adopt_real(venv.site, venv.key)
    assert code == 1
    assert [m["code"] for m in doc["distributions"][0]["mismatches"]] == ["installed.size"]
    venv.cli("hook", "uninstall")


def _migrated_plugins(wheel: Path, out: Path, key: Path) -> list[m.Plugin]:
    done = run_cli("migrate", str(wheel), "-o", str(out), "--key", str(key), "--capture-plugins")
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out / wheel.name) as archive:
        plugins = manifest_plugins(archive.read(f"triton-3.9.0.dist-info/{MANIFEST_FILENAME}"))
    (out / wheel.name).unlink()  # 300 MB
    return plugins


def _adopt_real(site: Path, key: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("adopt", "triton", "--site-packages", str(site), "--key", str(key), "--json", *extra)
    return done.returncode, json.loads(done.stdout)
