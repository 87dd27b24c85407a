"""The example backends as users get them: installed with pip into fresh venvs, found by
importlib.metadata and by the real Triton 3.9; repaired by auditwheel and re-signed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.projects import Keypair, build_env, fresh_venv, pip_install

EXPECTED = {
    "setuptools_backend": ("demo", "demo_backend", ["demo_backend/lib/libdemo_driver.so"]),
    "scikit_build_backend": (
        "skdemo", "skdemo_backend",
        ["skdemo_backend/lib/libskdemo_driver.so", "skdemo_backend/lib/libskdemo_plugin.so"],
    ),
}

ENTRY_POINTS = """
import importlib.metadata as md, json, sys, pathlib
eps = {ep.name: ep.value for ep in md.entry_points(group="triton.backends")}
files = sorted(str(f) for f in md.files(sys.argv[1]) if str(f).endswith(".so"))
print(json.dumps({"entry_points": eps, "files": files}))
"""


def run_in(python: Path, code: str, *args: str, **env: str) -> Any:
    result = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_built_example_verifies(example: str, example_wheels: dict[str, Path], signing_key: Keypair) -> None:
    from helpers.wheelcheck import assert_strict_zip, vouched_members

    result = run_cli("verify", str(example_wheels[example]), "--trust", str(signing_key.public))
    assert result.returncode == 0, result.stdout
    assert f"{len(vouched_members(example_wheels[example]))} artifacts match (coverage all)" in result.stdout
    assert_strict_zip(example_wheels[example])


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_pip_install_exposes_entry_points(example: str, example_wheels: dict[str, Path], tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    pip_install(python, str(example_wheels[example]))
    name, package, libraries = EXPECTED[example]
    dist = example_wheels[example].name.split("-")[0]
    found = run_in(python, ENTRY_POINTS, dist)
    assert found == {"entry_points": {name: package}, "files": libraries}


def test_repaired_then_resigned_wheel_verifies(
    example_wheels: dict[str, Path], signing_key: Keypair, tmp_path: Path
) -> None:
    env = build_env(signing_key)
    python = Path(env["PATH"].split(":")[0]) / "python"
    repair = subprocess.run(
        [str(python), "-m", "auditwheel", "repair", "-w", str(tmp_path / "repaired"),
         str(example_wheels["scikit_build_backend"])], capture_output=True, text=True, env=env,
    )
    assert repair.returncode == 0, repair.stderr[-2000:]
    (repaired,) = (tmp_path / "repaired").glob("*.whl")
    assert "manylinux" in repaired.name
    # auditwheel retags the wheel: the signed tags no longer match until it is re-signed.
    stale = run_cli("verify", str(repaired), "--trust", str(signing_key.public))
    assert stale.returncode == 1 and "identity.tags" in stale.stdout
    resign = run_cli("migrate", str(repaired), "-o", str(tmp_path / "signed"), "--key", str(signing_key.private))
    assert resign.returncode == 0, resign.stderr
    (signed,) = (tmp_path / "signed").glob("*.whl")
    result = run_cli("verify", str(signed), "--trust", str(signing_key.public))
    assert result.returncode == 0, result.stdout
    from helpers.wheelcheck import vouched_members

    assert f"{len(vouched_members(signed))} artifacts match (coverage all)" in result.stdout


# -- the real Triton ----------------------------------------------------------------------

DISCOVER = """
import json, os
import triton.backends as tb
found = {name: [b.compiler.__module__ + ":" + b.compiler.__name__, b.driver.__module__ + ":" + b.driver.__name__,
                b.driver.is_active()] for name, b in tb.backends.items()}
target = None
if os.environ.get("DEMO_BACKEND_DEVICES"):
    from triton.runtime import driver
    t = driver.active.get_current_target()
    target = [t.backend, t.arch, t.warp_size]
print(json.dumps({"backends": found, "target": target}))
"""


@pytest.fixture(scope="module")
def triton_venv(tmp_path_factory: pytest.TempPathFactory, triton_wheel: Path, example_wheels: dict[str, Path]) -> Path:
    python = fresh_venv(tmp_path_factory.mktemp("triton") / "venv")
    pip_install(python, str(triton_wheel), *(str(w) for w in example_wheels.values()))
    return python


@pytest.mark.triton_wheel
def test_triton_discovers_both_backends_inactive_without_device(triton_venv: Path) -> None:
    found = run_in(triton_venv, DISCOVER)
    backends = found["backends"]
    assert isinstance(backends, dict)
    assert backends["demo"] == ["demo_backend.compiler:DemoBackend", "demo_backend.driver:DemoDriver", False]
    assert backends["skdemo"] == ["skdemo_backend.compiler:SkdemoBackend", "skdemo_backend.driver:SkdemoDriver",
                                  False]
    assert found["target"] is None


@pytest.mark.triton_wheel
def test_triton_selects_the_demo_driver_where_its_device_exists(triton_venv: Path) -> None:
    found = run_in(triton_venv, DISCOVER, DEMO_BACKEND_DEVICES="1")
    assert found["target"] == ["demo", 1, 32]
    backends = found["backends"]
    assert isinstance(backends, dict) and backends["demo"][2] is True and backends["skdemo"][2] is False


@pytest.mark.triton_wheel
def test_plugin_library_reports_itself(triton_venv: Path) -> None:
    code = """
import ctypes, json, skdemo_backend
lib = ctypes.CDLL(str(skdemo_backend.plugin_path()))
class Head(ctypes.Structure):  # the start of PluginInfo (triton/Tools/PluginUtils.h)
    _fields_ = [("api", ctypes.c_uint32), ("name", ctypes.c_char_p), ("version", ctypes.c_char_p)]
lib.tritonGetPluginInfo.restype = ctypes.POINTER(Head)
head = lib.tritonGetPluginInfo().contents
print(json.dumps([head.api, head.name.decode(), head.version.decode()]))
"""
    assert run_in(triton_venv, code) == [2, "skdemo", "0.1.0"]
