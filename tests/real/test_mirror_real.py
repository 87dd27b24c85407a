"""``backend-packager mirror`` of real wheels from the index: triton 3.9.0, the triton-utlx plugin
package (and the triton 3.8.0 it pins), the third-party wheels the runtime needs and a
truncated wheel, mirrored once; pip installs from the mirror and doctor verifies under strict;
a rerun changes nothing.
"""

from __future__ import annotations

import os
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from helpers import index
from helpers.cli import run_cli
from helpers.index import index_files, mtimes, pip_from_mirror, run_mirror, sha
from helpers.projects import fresh_venv
from helpers.wheels import fetch_wheel

pytestmark = pytest.mark.triton_wheel
#: The mirror's keys (helpers.index), registered here as a fixture.
keys = index.keys


REAL_COPIED = ("packaging", "cryptography", "cffi", "pycparser")  # what the runtime needs, as a machine gets it


@pytest.fixture(scope="module")
def real_mirror(triton_wheel: Path, keys: tuple, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Path, dict[str, Any]]:
    """triton 3.9.0, the triton-utlx plugin package (and the triton 3.8.0 it pins), the
    pure-Python and native third-party
    wheels the runtime needs, and a truncated wheel, mirrored once."""
    src = tmp_path_factory.mktemp("real-src")
    utlx = fetch_wheel("triton-utlx==3.8.0.post16")
    needed = [fetch_wheel(f"{name}=={version(name)}") for name in REAL_COPIED]
    for wheel in [triton_wheel, fetch_wheel("triton==3.8.0"), utlx, *needed]:
        try:  # the source is a directory of regular files (a symlink is refused): a link, else a copy
            os.link(wheel, src / wheel.name)
        except OSError:
            shutil.copyfile(wheel, src / wheel.name)
    (src / "broken_plugin-1.0-py3-none-manylinux_2_28_x86_64.whl").write_bytes(utlx.read_bytes()[: 200_000])
    out = tmp_path_factory.mktemp("real-mirror")
    code, doc, _ = run_mirror(src, out, keys[0])
    assert code == 1
    return out, doc


def test_real_mirror_statuses(real_mirror: tuple[Path, dict[str, Any]], keys: tuple) -> None:
    out, doc = real_mirror
    by_project = {w["project"]: w for w in doc["wheels"] if not w["filename"].startswith("triton-3.8.0-")}
    assert by_project["triton"]["status"] == "migrated" and by_project["triton"]["backends"] == ["amd", "nvidia"]
    assert by_project["triton-utlx"]["status"] == "migrated"
    assert by_project["triton-utlx"]["plugins"] == ["utlx_plugin/libutlx.so"]
    assert {by_project[name]["status"] for name in REAL_COPIED} == {"copied"}
    assert by_project["broken-plugin"]["status"] == "failed" and not by_project["broken-plugin"]["served"]
    assert doc["summary"] == {"migrated": 3, "unchanged": 0, "copied": len(REAL_COPIED), "failed": 1}
    for name in ("triton", "triton-utlx"):
        wheel = out / by_project[name]["filename"]
        assert run_cli("verify", str(wheel), "--trust", str(keys[0].public)).returncode == 0
        assert index_files(out, name)[wheel.name] == sha(wheel)


@pytest.mark.parametrize(("requirement", "triton", "plugin"), [
    ("triton==3.9.0", "3.9.0", None),
    # pins triton~=3.8; its .pth sets TRITON_PLUGIN_PATHS, read as libtriton loads: mapped, so loaded
    ("triton-utlx", "3.8.0", "utlx_plugin/libutlx.so (v2) triton-utlx 3.8.0.post16  [verified, loaded, "
     "loaded by its own code; mapped (/proc/self/maps)]"),
])
def test_real_mirror_pip_installs_and_doctor_verifies_under_strict(
    requirement: str, triton: str, plugin: str | None, real_mirror: tuple[Path, dict[str, Any]], keys: tuple,
    tmp_path: Path,
) -> None:
    """pip resolves from the mirror alone (dependencies too), and after `trust add` of the
    mirror's key, doctor under strict shows every backend (and the plugin) verified."""
    from helpers.venv import Venv

    out, doc = real_mirror
    python = fresh_venv(tmp_path / "venv")
    pip_from_mirror(python, out, requirement, "cryptography", "packaging")
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    env = Venv(tmp_path, python, site, tmp_path / "home", keys[0].private, keys[0].public)
    assert env.cli("trust", "add", str(keys[0].public)).returncode == 0
    assert env.cli("hook", "install").returncode == 0
    doctor = env.cli("doctor", TRITON_BACKEND_POLICY="strict")
    text = doctor.stdout
    # not asserted: doctor's exit code, which also covers Triton's own bundled plugins
    assert "policy:      strict" in text and "used by import triton: yes" in text, text
    for backend in ("amd", "nvidia"):
        assert f"{backend:<10} triton {triton}  [verified, loaded" in text, text
    assert plugin is None or plugin in text, text
    assert f"signed by: {doc['keyid']} mirror-one (a trusted key)" in text, text
    # triton 3.8.0 has no extend_with: a plugin found after libtriton loaded cannot be handed over.
    assert plugin is not None or (doctor.returncode == 0 and text.rstrip().endswith("OK")), text


def test_real_mirror_rerun_is_unchanged(real_mirror: tuple[Path, dict[str, Any]], keys: tuple) -> None:
    out, doc = real_mirror
    before = mtimes(out)
    src = Path(next(w["source"] for w in doc["wheels"] if w["project"] == "triton")).parent
    code, again, _ = run_mirror(src, out, keys[0])
    assert code == 1 and again["summary"] == {"migrated": 0, "unchanged": 7, "copied": 0, "failed": 1}
    assert mtimes(out) == before
