"""The real triton 3.9.0 wheel from the package index (cached outside the repo)."""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers.cli import run_cli

pytestmark = pytest.mark.triton_wheel


@pytest.fixture(scope="module")
def scanned(triton_wheel: Path) -> dict[str, dict[str, object]]:
    proc = run_cli("scan", "--json", str(triton_wheel))
    assert proc.returncode == 0, proc.stderr
    return {a["path"]: a for a in json.loads(proc.stdout)["artifacts"]}


def test_libtriton_export_count_equals_nm(scanned: dict[str, dict[str, object]], triton_wheel: Path,
                                          tmp_path: Path) -> None:
    with zipfile.ZipFile(triton_wheel) as archive:
        lib = archive.extract("triton/_C/libtriton.so", tmp_path)
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, check=True, text=True).stdout
    elf = scanned["triton/_C/libtriton.so"]["elf"]
    assert isinstance(elf, dict)
    assert elf["exports"]["count"] == len(out.splitlines())
    assert elf["exports"]["complete"] is False
    assert [s["name"] for s in elf["exports"]["symbols"]] == ["PyInit_libtriton"]


def test_plugin_test_lib_is_v2(scanned: dict[str, dict[str, object]]) -> None:
    elf = scanned["triton/plugins/libTritonPluginsTestLib.so"]["elf"]
    assert isinstance(elf, dict)
    assert elf["plugin"]["api"] == "v2"


def test_glibc_fits_wheel_tag(scanned: dict[str, dict[str, object]], triton_wheel: Path) -> None:
    tag = re.search(r"manylinux_(\d+)_(\d+)_x86_64", triton_wheel.name)
    assert tag is not None
    allowed = (int(tag.group(1)), int(tag.group(2)))
    assert allowed == (2, 27)
    needed = [tuple(map(int, a["elf"]["glibc"].split(".")))[:2] for a in scanned.values()  # type: ignore[index]
              if a["elf"] and a["elf"]["glibc"]]  # type: ignore[index]
    assert needed and max(needed) <= allowed
    assert scanned["triton/_C/libtriton.so"]["elf"]["manylinux"] == "manylinux_2_27_x86_64"  # type: ignore[index]
