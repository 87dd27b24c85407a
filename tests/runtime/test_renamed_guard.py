"""Any Triton package is guarded by the ``.pth`` hook alone, whatever it is called.

A Triton released under another name (``vendor_triton``, as ``tokenspeed_triton`` is) is found by
its core (``<package>/_C/libtriton.so``), not by a list: under strict, a tampered renamed Triton is
refused exactly as ``triton`` is; a package whose name merely contains "triton" is left alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.csrc import gcc
from helpers.disttree import Dist, TrustEnv, write_dist, write_record
from helpers.hookvenv import HookVenv, make_hook_venv
from helpers.renamed import backends_init, renamed_core

PACKAGE = "vendor_triton"


@pytest.fixture()
def venv(tmp_path: Path) -> HookVenv:
    return make_hook_venv(tmp_path / "venv")


def renamed(venv: HookVenv, env: TrustEnv, tmp_path: Path, *, signed: bool = True, package: str = PACKAGE) -> Dist:
    source = tmp_path / "libtriton.c"
    source.write_text("int triton_version_major(void) { return 3; }\n")
    files: dict[str, bytes | Path] = {
        **renamed_core(package, "vgpu"), f"{package}/_C/libtriton.so": gcc(tmp_path / "libtriton.so", str(source)),
        f"{package}/backends/__init__.py": backends_init(f"{package}.backends").encode(),
    }
    name = "vendor-triton" if package == PACKAGE else "triton"
    dist = write_dist(venv.site, name, "3.3.0", backends={}, files=files)
    if signed:
        dist.sign(env.key)
    write_record(dist)
    return dist


def test_a_tampered_renamed_triton_is_refused_under_strict(venv: HookVenv, env: TrustEnv, tmp_path: Path) -> None:
    dist = renamed(venv, env, tmp_path)
    assert venv.run("-c", f"import {PACKAGE}; print('imported')").stdout == "imported\n"
    compiler = dist.file(f"{PACKAGE}/backends/vgpu/compiler.py")
    compiler.write_bytes(compiler.read_bytes().replace(b"pass", b"1/0 "))  # the same size: its hash differs
    done = venv.run("-c", f"import {PACKAGE}.backends.vgpu.compiler")
    assert done.returncode == 1 and "ZeroDivisionError" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("(verify.sha256)"), done.stderr
    warned = venv.run("-c", f"import {PACKAGE}; print('imported')", policy="warn")
    assert warned.stdout == "imported\n" and "(verify.sha256)" in warned.stderr


def test_an_unsigned_renamed_triton_is_refused_under_strict(venv: HookVenv, env: TrustEnv, tmp_path: Path) -> None:
    renamed(venv, env, tmp_path, signed=False)
    done = venv.run("-c", f"import {PACKAGE}")
    assert done.returncode == 1 and "triton core not verified" in done.stderr


def test_a_package_that_only_shares_the_name_is_left_alone(venv: HookVenv) -> None:
    (venv.site / "tritonclient").mkdir()
    (venv.site / "tritonclient" / "__init__.py").write_text("print('client')\n")
    assert venv.run("-c", "import tritonclient").stdout == "client\n"


@pytest.mark.parametrize("package", [PACKAGE, "triton"])
def test_a_core_whose_init_was_deleted_is_refused_not_skipped(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, package: str
) -> None:
    """With its ``__init__.py`` gone the package imports as a namespace (no origin): the core
    is still checked, and its tampered backend never runs."""
    dist = renamed(venv, env, tmp_path, package=package)
    dist.file(f"{package}/__init__.py").unlink()
    compiler = dist.file(f"{package}/backends/vgpu/compiler.py")
    compiler.write_bytes(compiler.read_bytes().replace(b"pass", b"1/0 "))
    done = venv.run("-c", f"import {package}.backends.vgpu.compiler")
    assert done.returncode == 1 and "ZeroDivisionError" not in done.stderr
    assert "triton core not verified" in done.stderr.strip().splitlines()[-1]
