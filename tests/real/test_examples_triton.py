"""The example backends found by the real Triton 3.9, installed with pip beside it in a fresh
venv: both discovered and inactive without a device, the demo driver selected where its device
exists, the plugin library reporting itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.projects import fresh_venv, pip_install
from helpers.venv import run_in

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
