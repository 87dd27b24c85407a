"""Cache isolation on real Triton releases before 3.7, where ``compile()`` never asks the
stages-inspection hook for a key: which releases' ``compiler.py`` asks it (read from each
wheel), and, in venvs with the real triton 3.2.0 (directory-scan era) and 3.6.0 (entry-point
era), the key Triton itself forms: ``make_backend(GPUTarget("cuda", 90, 32)).hash()`` and the
hash of a kernel that ``triton.compiler.compile`` builds on the CPU for that target, with its
cache directory. The salt itself, without Triton: ``tests/runtime/test_cachekey_legacy.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate, run_cli
from helpers.projects import ROOT
from helpers.scratch import session_dir
from helpers.venv import Venv, cosigned_site, make_venv
from helpers.wheels import fetch_wheel, pip_install
from triton_backend_runtime.triton import compilekey


@pytest.mark.triton_wheel
@pytest.mark.parametrize(("requirement", "reads"), [
    ("triton==3.0.0", False), ("triton==3.2.0", False), ("triton==3.3.0", False), ("triton==3.4.0", False),
    ("triton==3.5.0", False), ("triton==3.6.0", False), ("fbtriton==3.7.4", True), ("triton==3.8.0", True),
    ("triton==3.9.0", True), ("triton-pascal==3.1.0", False), ("triton-ascend==3.2.0", False),
])
def test_which_releases_compile_reads_the_hook(requirement: str, reads: bool, tmp_path: Path) -> None:
    """The text test against each real ``compiler.py``; 3.4-3.6 do mention the knob (in their
    backends' ``add_stages``), never as a key."""
    with zipfile.ZipFile(fetch_wheel(requirement)) as archive:
        archive.extract("triton/compiler/compiler.py", tmp_path)
    assert compilekey.compile_reads_hook(str(tmp_path / "triton")) is reads


KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def store_one(x_ptr):
    tl.store(x_ptr, 1.0)
'''


# Triton's own code forms the key: make_backend's instance, compile() for a target given,
# which needs no GPU (ptxas is a host binary; the kernel is not loaded until launched).
PROBE = '''\
import json, os
from triton.backends.compiler import GPUTarget
from triton.compiler import compiler
import kernel

target = GPUTarget("cuda", 90, 32)
compiled = compiler.compile(compiler.ASTSource(kernel.store_one, {"x_ptr": "*fp32"}), target=target)
try:
    from triton_backend_runtime.loading import registry
    digest = registry.get().manifest_digest
except ImportError:
    digest = None
print(json.dumps({"hash": compiler.make_backend(target).hash(), "kernel": compiled.hash, "digest": digest,
                  "cached": sorted(os.listdir(os.environ["TRITON_CACHE_DIR"]))}))
'''


@dataclass
class Legacy:
    requirement: str
    venv: Venv
    kernel: Path  # the directory of kernel.py
    signed: Path  # the triton wheel migrated, signed by the venv's key, in a site of its own
    cosigned: Path  # the same, its manifest signed by a second key as well
    cache: Path

    def key(self, *paths: Path, **env: str) -> dict[str, Any]:
        result: dict[str, Any] = self.venv.json(PROBE, *paths, self.kernel, TRITON_CACHE_DIR=str(self.cache), **env)
        return result


@pytest.fixture(scope="module", params=["triton==3.2.0", "triton==3.6.0"])
def legacy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Legacy]:
    """A venv with the real Triton of one era; removed when its tests are done (~2 GB)."""
    wheel = fetch_wheel(request.param)
    root = session_dir(tmp_path_factory, request.param.replace("==", "-"))
    try:
        venv = make_venv(root, wheel)
        # the check script runs the packager from this checkout, whose SBOMs need cyclonedx
        subprocess.run([str(venv.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "cyclonedx-python-lib>=8"], check=True)
        signed = migrate(wheel, root / "wheels", venv.key, "--capture-plugins").signed()
        pip_install(venv.python, signed, root / "signed")
        second = root / "keys" / "second.pem"
        assert run_cli("keygen", "-o", str(second), "--comment", "second signer").returncode == 0
        cosigned = cosigned_site(root / "signed", root / "cosigned", [venv.key, second])
        (root / "kernel").mkdir()
        (root / "kernel" / "kernel.py").write_text(KERNEL)
        (root / "cache").mkdir()
        yield Legacy(request.param, venv, root / "kernel", root / "signed", cosigned, root / "cache")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.triton_wheel
def test_the_key_triton_forms_changes_with_the_manifest(legacy: Legacy) -> None:
    trusted = {"TRITON_BACKEND_POLICY": "strict", "TRITON_BACKEND_TRUSTED_KEYS": str(legacy.venv.pub)}
    own = legacy.key(TRITON_BACKEND_POLICY="off")  # Triton's own key
    assert own["digest"] is None and len(own["cached"]) == 1
    # legacy only (no manifest in use): the key is Triton's own, a cache hit
    plain = legacy.key()
    assert (plain["hash"], plain["kernel"], plain["digest"]) == (own["hash"], own["kernel"], None)
    assert plain["cached"] == own["cached"]
    # the signed core in use: the backend's hash ends with the digest, the kernel misses
    one = legacy.key(legacy.signed, **trusted)
    assert one["digest"] and one["hash"] == f"{own['hash']}-backend-manifests-{one['digest']}"
    assert one["kernel"] != own["kernel"] and len(one["cached"]) == len(own["cached"]) + 1
    # the same manifests in another process: the same key, a hit
    again = legacy.key(legacy.signed, **trusted)
    assert (again["hash"], again["kernel"], again["cached"]) == (one["hash"], one["kernel"], one["cached"])
    # the manifest changed (signed again, by two keys): a new digest, a miss
    other = legacy.key(legacy.cosigned, **trusted)
    assert other["digest"] not in (None, one["digest"]) and other["hash"].endswith(other["digest"])
    assert other["kernel"] not in (own["kernel"], one["kernel"])
    assert len(other["cached"]) == len(one["cached"]) + 1


@pytest.mark.triton_wheel
def test_the_gpu_check_script_on_the_cpu(legacy: Legacy) -> None:
    """``examples/gpu_smoke/cachekey_check.py`` (run on the GPU machine by hand), here compiling
    for a target instead of launching: a signed backend's upgrade misses, entry-point era only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
    done = subprocess.run([str(legacy.venv.python), str(ROOT / "examples" / "gpu_smoke" / "cachekey_check.py"),
                           "--target", "cuda:90", "--json"], capture_output=True, text=True, env=env)
    assert done.stdout.startswith("{"), done.stderr[-3000:]
    report = json.loads(done.stdout)
    if legacy.requirement == "triton==3.2.0":  # directory-scan: no entry points
        assert done.returncode == 2 and "by entry point" in report["unusable"][0], done.stdout
        return
    assert done.returncode == 0 and report["wrong"] == [] and report["unusable"] == [], done.stdout
    runs = report["runs"]
    assert runs["demo-1.0"]["demo"] == [["verified", "loaded"]]
    assert len({runs[name]["kernel"] for name in ("off", "demo-1.0", "demo-1.1")}) == 3
