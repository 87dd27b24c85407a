"""A backend is signed only where its code is (``wheel.backend-missing``), and one inside a Triton
package the wheel does not provide is signed with a warning naming both.

The overlay is the shape of a real pure-Python Triton overlay: a ``triton/`` tree with no
``__init__.py``, no ``_C/`` and no ``backends/<name>/``, declaring Triton's own ``amd`` and
``nvidia`` into ``triton.backends``. Real wheels are built and migrated, or installed by pip
and adopted, through the command line.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.cli import migrate, run_cli
from helpers.projects import Keypair, keygen
from helpers.wheels import backend_files, pip_install, write_wheel
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.manifest import model as m

from backend_packager.manifest import backendcode

OVERLAY = "triton-overlay"
OVERLAY_FILES = {
    "triton/language/extra/patched.py": b"PATCHED = True\n",
    "triton/runtime/fixups.py": b"def fix():\n    return 1\n",
}
TRITON_BACKENDS = {"amd": "triton.backends.amd", "nvidia": "triton.backends.nvidia"}


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "backend-code")


def overlay(directory: Path, extra: dict[str, bytes] | None = None) -> Path:
    return write_wheel(directory, OVERLAY, "1.0", {**OVERLAY_FILES, **(extra or {})}, TRITON_BACKENDS)


def entry_points_of(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()


def test_overlay_declaring_backends_without_code_is_refused(key: Keypair, tmp_path: Path) -> None:
    src = overlay(tmp_path / "in")
    out = tmp_path / "out"
    done = migrate(src, out, key, "--json")
    assert done.returncode == 1
    error = done.outcome["error"]
    assert error["code"] == "wheel.backend-missing" and error["path"] == str(src)
    for named in ("'amd'", "triton.backends.amd", "'nvidia'", "triton/backends/nvidia/driver.py", OVERLAY):
        assert named in error["message"]
    assert not any(out.iterdir())  # nothing written, not even a temporary file
    plain = migrate(src, tmp_path / "plain", key)
    assert plain.returncode == 1 and "(wheel.backend-missing)" in plain.stderr and "--backend" in plain.stderr


def test_backend_override_naming_code_in_the_wheel_signs(key: Keypair, tmp_path: Path) -> None:
    src = overlay(tmp_path / "in", backend_files("overlay_gpu", "OverlayGpu", "overlaygpu"))
    done = migrate(src, tmp_path / "out", key, "--json", "--backend", "overlaygpu=overlay_gpu")
    assert done.returncode == 0, done.stderr
    assert done.outcome["backends"] == ["overlaygpu"]
    assert "[triton.backends]\noverlaygpu = overlay_gpu\n" == entry_points_of(done.signed())  # amd, nvidia dropped
    assert run_cli("verify", str(done.signed()), "--trust", str(key.public)).returncode == 0


def test_backend_override_naming_absent_code_is_refused(key: Keypair, tmp_path: Path) -> None:
    src = overlay(tmp_path / "in")
    done = migrate(src, tmp_path / "out", key, "--json", "--backend", "ghost=ghost_backend")
    assert done.returncode == 1
    assert done.outcome["error"]["code"] == "wheel.backend-missing" and "'ghost'" in done.outcome["error"]["message"]


def test_backends_with_their_code_are_signed_as_before(key: Keypair, tmp_path: Path) -> None:
    src = write_wheel(tmp_path / "in", "acme-backend", "1.0", backend_files("acme_backend", "Acme", "acme"),
                      {"acme": "acme_backend"})
    done = migrate(src, tmp_path / "out", key, "--json")
    assert done.returncode == 0, done.stderr
    assert done.outcome["backends"] == ["acme"] and done.outcome["warnings"] == []


def test_triton_itself_gets_no_warning(key: Keypair, tmp_path: Path) -> None:
    files = {"triton/__init__.py": b"__version__ = '3.9.0'\n", **backend_files("triton/backends/amd", "Amd", "hip")}
    src = write_wheel(tmp_path / "in", "triton", "3.9.0", files, {"amd": "triton.backends.amd"})
    done = migrate(src, tmp_path / "out", key, "--json")
    assert done.returncode == 0, done.stderr
    assert done.outcome["backends"] == ["amd"] and done.outcome["warnings"] == []


def test_overlay_carrying_tritons_backend_code_is_signed_with_a_warning(key: Keypair, tmp_path: Path) -> None:
    src = overlay(tmp_path / "in", {**backend_files("triton/backends/amd", "Amd", "hip"),
                                    **backend_files("triton/backends/nvidia", "Nvidia", "cuda")})
    done = migrate(src, tmp_path / "out", key, "--json")
    assert done.returncode == 0, done.stderr
    assert done.outcome["backends"] == ["amd", "nvidia"]
    (warning,) = done.outcome["warnings"]
    assert OVERLAY in warning and "inside the package triton" in warning and "triton/__init__.py" in warning
    assert "(amd, nvidia)" in warning
    plain = migrate(src, tmp_path / "plain", key)
    assert plain.returncode == 0 and "backend-packager: warning:" in plain.stderr and OVERLAY in plain.stderr


def test_adopting_an_installed_overlay_is_refused(key: Keypair, tmp_path: Path) -> None:
    site = tmp_path / "site"
    pip_install(Path(sys.executable), overlay(tmp_path / "in"), site)
    dist_info = site / "triton_overlay-1.0.dist-info"
    before = {p.name: p.read_bytes() for p in dist_info.iterdir()}
    done = run_cli("adopt", OVERLAY, "--site-packages", str(site), "--key", str(key.private), "--json")
    assert done.returncode == 1, done.stderr
    (outcome,) = json.loads(done.stdout)["distributions"]
    assert outcome["error"]["code"] == "wheel.backend-missing" and "triton.backends.amd" in outcome["error"]["message"]
    assert {p.name: p.read_bytes() for p in dist_info.iterdir()} == before  # no manifest, RECORD untouched
    assert not (dist_info / MANIFEST_FILENAME).exists()


def backend(name: str, package: str) -> m.Backend:
    return m.Backend(name=name, package=package, compiler=None, driver=None)


@pytest.mark.parametrize("names", [
    ["pkg/compiler.py", "pkg/driver.py"],
    ["pkg/compiler/__init__.py", "pkg/driver/__init__.py"],
    ["pkg/compiler.cpython-311-x86_64-linux-gnu.so", "pkg/driver.abi3.so"],
    ["pkg/compiler.pyc", "pkg/driver.so"],
])
def test_each_form_of_a_module_counts(names: list[str]) -> None:
    assert backendcode.missing_code([backend("b", "pkg")], names) == []


def test_missing_code_names_what_is_absent() -> None:
    backends = [backend("a", "pkg.a"), backend("b", "pkg.b")]
    names = ["pkg/a/compiler.py", "pkg/a/driver.py", "pkg/b/compiler.py", "pkg/b/drivers.py", "pkg/b/compiler.txt"]
    (missing,) = backendcode.missing_code(backends, names)
    assert (missing.backend, missing.package, missing.absent) == ("b", "pkg.b", ["pkg/b/driver.py"])
