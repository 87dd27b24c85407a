"""Renamed Triton packages: a vendor release that installs ``triton`` as
another package (``<pkg>/backends/<name>/``, entry-point group ``<pkg>.backends``).

``migrate`` and ``verify`` read the package from the wheel (``--triton-package`` when it
cannot tell), the manifest records it, and the runtime's discovery reads the group of the
Triton package whose ``backends/__init__.py`` is running. Wheels written here; the real
``tokenspeed-triton``: ``tests/real/test_migrate_renamed_real.py``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate, run_cli
from helpers.projects import Keypair, keygen
from helpers.renamed import backend, entry_points, renamed_core
from helpers.wheelcheck import entry_points_of, manifest_of, verified
from helpers.wheels import pip_install, resign, write_wheel
from triton_backend_runtime.site import discovery


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "renamed")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Legacy wheels written here, each a case of its own."""
    d = tmp_path_factory.mktemp("renamed")
    acme = backend("acme_backend", "Acme", "vendor_triton.backends")
    return {
        # The renamed core itself, directory-scan era: no entry points at all.
        "core": write_wheel(d / "core", "vendor-triton", "3.3.0", renamed_core("vendor_triton", "vgpu")),
        # An out-of-tree backend for the renamed Triton: declares the renamed group.
        "plugin": write_wheel(d / "plugin", "acme-backend", "1.0", {
            **acme, **entry_points("acme_backend-1.0.dist-info", "vendor_triton.backends", {"acme": "acme_backend"}),
        }),
        # Backends for two Triton packages: only --triton-package can say which is meant.
        "both": write_wheel(d / "both", "two-tritons", "1.0", {
            **renamed_core("vendor_triton", "vgpu"), **backend("triton.backends.forkgpu", "Fork", "triton.backends"),
        }),
        # Backend-shaped directories nowhere a Triton scans: nothing found, and said.
        "nested": write_wheel(d / "nested", "vendored-thing", "1.0", {
            "vendored/__init__.py": b"", **renamed_core("vendored/triton", "hidden"),
        }),
        # Another library's group that happens to end in .backends: not a Triton.
        "keyring": write_wheel(d / "keyring", "keyring-thing", "1.0", {
            "keyring_thing/__init__.py": b"", "keyring_thing/store.py": b"x = 1\n",
            **entry_points("keyring_thing-1.0.dist-info", "keyring.backends", {"store": "keyring_thing.store"}),
        }),
    }


def test_renamed_core_of_the_directory_scan_era(wheels: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    run = migrate(wheels["core"], tmp_path, key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    assert (outcome["backends"], outcome["triton_package"]) == (["vgpu"], "vendor_triton")
    out = tmp_path / wheels["core"].name
    assert "[vendor_triton.backends]\nvgpu = vendor_triton.backends.vgpu" in entry_points_of(out)
    assert "[triton.backends]" not in entry_points_of(out)
    manifest = manifest_of(out)
    assert manifest["triton_package"] == "vendor_triton"
    assert manifest["backends"][0]["compiler"] == "vendor_triton.backends.vgpu.compiler:VgpuBackend"
    assert verified(out, key)


def test_backend_for_a_renamed_triton_keeps_its_group(wheels: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    run = migrate(wheels["plugin"], tmp_path, key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    assert (outcome["backends"], outcome["triton_package"]) == (["acme"], "vendor_triton")
    out = tmp_path / wheels["plugin"].name
    assert entry_points_of(out) == "[vendor_triton.backends]\nacme = acme_backend\n"
    assert verified(out, key)


def test_two_triton_packages_need_the_flag(wheels: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    run = migrate(wheels["both"], tmp_path / "refused", key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 1
    assert outcome["error"]["code"] == "wheel.triton-package"
    assert "--triton-package" in outcome["error"]["message"]
    assert list((tmp_path / "refused").iterdir()) == []
    for package, name in (("vendor_triton", "vgpu"), ("triton", "forkgpu")):
        run = migrate(wheels["both"], tmp_path / package, key, "--json", "--triton-package", package)
        code, outcome = run.returncode, run.outcome
        assert code == 0, outcome
        assert (outcome["backends"], outcome["triton_package"]) == ([name], package)
        assert verified(tmp_path / package / wheels["both"].name, key)


def test_backend_shaped_directories_without_a_backend_warn(wheels: dict[str, Path], key: Keypair,
                                                           tmp_path: Path) -> None:
    run = migrate(wheels["nested"], tmp_path, key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 0 and outcome["backends"] == []
    (warning,) = [w for w in outcome["warnings"] if "backend-shaped" in w]
    assert "vendored/triton/backends/hidden/" in warning and "--triton-package" in warning
    plain = run_cli("migrate", str(wheels["nested"]), "-o", str(tmp_path / "plain"), "--key", str(key.private))
    assert "backend-packager: warning:" in plain.stderr and "vendored/triton/backends/hidden/" in plain.stderr


def test_another_librarys_backends_group_is_not_a_triton(wheels: dict[str, Path], key: Keypair,
                                                          tmp_path: Path) -> None:
    run = migrate(wheels["keyring"], tmp_path, key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    assert (outcome["backends"], outcome["triton_package"]) == ([], "triton")
    assert not any("backend-shaped" in w for w in outcome["warnings"])
    assert manifest_of(tmp_path / wheels["keyring"].name)["triton_package"] == "triton"


def test_triton_package_flag_is_a_package_name(wheels: dict[str, Path], tmp_path: Path) -> None:
    for bad in ("a/b", "a.b", "1x", ""):
        proc = run_cli("migrate", str(wheels["core"]), "-o", str(tmp_path), "--triton-package", bad)
        assert proc.returncode == 2, bad
        assert "Traceback" not in proc.stderr and "not a Python package name" in proc.stderr


def test_verify_checks_the_signed_group(wheels: dict[str, Path], key: Keypair, tmp_path: Path) -> None:
    assert migrate(wheels["plugin"], tmp_path / "out", key, "--json").returncode == 0
    out = tmp_path / "out" / wheels["plugin"].name

    def findings(edited: Path) -> list[dict[str, str]]:
        proc = run_cli("verify", str(edited), "--trust", str(key.public), "--json")
        assert proc.returncode == 1, proc.stdout
        found: list[dict[str, str]] = json.loads(proc.stdout)["wheels"][0]["findings"]
        return found

    # Signed for upstream triton: the wheel's vendor_triton.backends entry point is unsigned.
    upstream = resign(out, tmp_path / "upstream", [key.private], lambda man: setattr(man, "triton_package", "triton"))
    codes = {f["code"] for f in findings(upstream)}
    assert codes == {"entry-point.missing"}
    odd = resign(out, tmp_path / "odd", [key.private], lambda man: setattr(man, "triton_package", "../x"))
    assert [f["code"] for f in findings(odd)] == ["manifest.triton-package"]
    # Signed for vendor_triton, yet declaring upstream triton.backends too (entry_points.txt re-signed).
    both = tmp_path / "both" / out.name
    both.parent.mkdir()
    points = entry_points_of(out).encode() + b"\n[triton.backends]\nacme = acme_backend\n"
    with zipfile.ZipFile(out) as zin, zipfile.ZipFile(both, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, points if info.filename.endswith("entry_points.txt") else zin.read(info))

    def vouch(man: Any) -> None:  # the vendor's key signs the edited entry_points.txt
        art = next(a for a in man.artifacts if a.path.endswith("entry_points.txt"))
        art.sha256, art.size = hashlib.sha256(points).hexdigest(), len(points)

    resigned = resign(both, tmp_path / "both-signed", [key.private], vouch)
    upstream_too = findings(resigned)
    assert [f["code"] for f in upstream_too] == ["entry-point.unsigned"]
    assert "triton.backends entry point 'acme'" in upstream_too[0]["message"]


def test_runtime_reads_the_group_of_the_running_package(wheels: dict[str, Path], key: Keypair,
                                                        tmp_path: Path) -> None:
    site = tmp_path / "site"
    for case in ("core", "plugin"):
        assert migrate(wheels[case], tmp_path / "out", key, "--json").returncode == 0
        pip_install(Path(sys.executable), tmp_path / "out" / wheels[case].name, site)
    backends_dir = str(site / "vendor_triton" / "backends")
    assert discovery.package_of(backends_dir) == "vendor_triton"
    assert discovery.package_of(str(site / "triton" / "backends")) == "triton"
    assert discovery.package_of(None) == discovery.package_of(str(site / "x")) == "triton"

    found = discovery.discover([str(site)], in_tree=False, backends_dir=backends_dir)
    assert found.package == "vendor_triton"
    assert sorted((c.name, c.package) for c in found.candidates) == [
        ("acme", "acme_backend"), ("vgpu", "vendor_triton.backends.vgpu")]
    assert discovery.discover([str(site)], in_tree=False).candidates == []  # upstream triton's group: none
    scanned = discovery.discover([str(site)], in_tree=True, backends_dir=backends_dir)
    assert [(c.name, c.package, c.source) for c in scanned.candidates] == [
        ("vgpu", "vendor_triton.backends.vgpu", "in-tree")]




def test_plugin_capture_finds_the_core_library_of_a_renamed_triton() -> None:
    """Capture calls a bundled plugin against its own core's library, whatever the package."""
    from backend_packager.manifest.plugininfo import libtriton_member

    assert libtriton_member(["tokenspeed_triton/_C/libtriton.so", "tokenspeed_triton/plugins/x.so"]) == \
        "tokenspeed_triton/_C/libtriton.so"
    assert libtriton_member(["vendor_triton/_C/libtriton.so", "triton/_C/libtriton.so"]) == "triton/_C/libtriton.so"
    assert libtriton_member(["a/b/_C/libtriton.so", "pkg/libtriton.so"]) is None
