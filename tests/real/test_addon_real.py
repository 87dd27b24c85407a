"""The real add-on ``tokenspeed-proton``: a profiler that installs ``tokenspeed_triton/_C/libproton.so``,
``tokenspeed_triton/profiler/`` and CUPTI libraries under ``tokenspeed_triton/backends/nvidia/lib/``,
with its own RECORD and a ``Requires-Dist`` pin on ``tokenspeed-triton``. It and the Triton it pins,
each migrated and signed, are installed by one pip run into a venv whose only protection is the
``.pth`` hook: under strict every backend loads, and the add-on's library is mapped; ``doctor``
says the same. An add-on file changed after install is nobody's code, and strict refuses the import
naming it; beside another release than the one it pins, the add-on's files are not vouched for.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path

import pytest
from helpers.cli import migrate
from helpers.hookvenv import HookVenv, make_hook_venv
from helpers.projects import Keypair, keygen
from helpers.renamed import TOKENSPEED
from helpers.wheels import fetch_wheel
from packaging.requirements import Requirement

pytestmark = pytest.mark.triton_wheel

PROTON = "tokenspeed-proton==3.9.10.post20261008"
PACKAGE = "tokenspeed_triton"
LIBPROTON = f"{PACKAGE}/_C/libproton.so"
IMPORT = (f"import {PACKAGE}.backends as b, {PACKAGE}.profiler\n"
          "print(sorted(b.backends))\n"
          "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if l.rstrip().endswith('libproton.so')}))")


@dataclass(frozen=True)
class Signed:
    """Where the signed wheels are, and the key that signed them."""

    root: Path
    key: Keypair

    def venv(self, name: str, *wheels: Path) -> HookVenv:
        """A hook venv with ``wheels`` installed by one pip run (files of both land in one package)."""
        made = make_hook_venv(self.root / name)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                        str(made.site), *map(str, wheels)], check=True, capture_output=True)
        return made


def pinned_triton(addon: Path) -> str:
    """The ``name==version`` the add-on's METADATA pins (its one Requires-Dist)."""
    with zipfile.ZipFile(addon) as wheel:
        (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        (spec,) = BytesParser().parsebytes(wheel.read(meta)).get_all("Requires-Dist")
    requirement = Requirement(spec)
    (pin,) = requirement.specifier
    assert (requirement.name, pin.operator) == ("tokenspeed-triton", "==")
    return f"{requirement.name}=={pin.version}"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Signed:
    root = tmp_path_factory.mktemp("addon")
    return Signed(root, keygen(root, "platform"))


@pytest.fixture(scope="module")
def wheels(signed: Signed) -> tuple[Path, Path]:
    """The add-on and the Triton it pins, migrated and signed."""
    addon = fetch_wheel(PROTON)
    triton = fetch_wheel(pinned_triton(addon))
    out = signed.root / "out"
    return (migrate(addon, out, signed.key, "--jobs", "2").signed(),
            migrate(triton, out, signed.key, "--jobs", "2").signed())


@pytest.fixture(scope="module")
def installed(signed: Signed, wheels: tuple[Path, Path]) -> HookVenv:
    return signed.venv("venv", *wheels)


@pytest.fixture(autouse=True)
def trust(signed: Signed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_BACKEND_TRUSTED_KEYS", str(signed.key.public))
    monkeypatch.setenv("TRITON_BACKEND_CACHE_DIR", str(signed.root / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(signed.root / "config"))


def assert_loads(venv: HookVenv) -> None:
    done = venv.run("-c", IMPORT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["['amd', 'nvidia']", str([str(venv.site / LIBPROTON)])], done.stderr
    text, doc = venv.doctor("--package", PACKAGE)
    assert text.returncode == 0 and doc["healthy"], text.stdout
    assert doc["import"] == {"core_checked": True, "no_registry": False, "refused": None}
    assert {r["name"]: (r["trust"], r["state"]) for r in doc["backends"]} == {
        "amd": ("verified", "loaded"), "nvidia": ("verified", "loaded")}


def test_a_signed_addon_and_its_triton_load_every_backend_under_strict(installed: HookVenv) -> None:
    assert sorted(p.name for p in (installed.site / PACKAGE / "_C").glob("lib*.so")) == [
        "libproton.so", "libtriton.so"]
    assert_loads(installed)


@pytest.fixture()
def restored(installed: HookVenv) -> Iterator[HookVenv]:
    """The install, its add-on files put back byte for byte after the test."""
    saved = {p: p.read_bytes() for p in (installed.site / PACKAGE).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and ("profiler" in p.parts or "cupti" in p.parent.name
                                                                   or p.name == "libproton.so")}
    yield installed
    for path, data in saved.items():
        if path.read_bytes() != data:
            path.unlink()
            path.write_bytes(data)


@pytest.mark.parametrize("member", [LIBPROTON, f"{PACKAGE}/profiler/proton.py",
                                    f"{PACKAGE}/backends/nvidia/lib/cupti/libcupti.so"])
def test_an_edited_addon_file_is_refused_under_strict(restored: HookVenv, member: str) -> None:
    """Changed after install, the file matches neither RECORD: it is unlisted code in the Triton."""
    path = restored.site / member
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.unlink()  # a new file: pip may have linked it
    path.write_bytes(bytes(data))
    done = restored.run("-c", f"import {PACKAGE}")
    assert done.returncode == 1 and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.core.CoreRejected: triton core not verified: ")
    assert f"{path}: " in last and last.endswith("(verify.unlisted)")
    text, doc = restored.doctor("--package", PACKAGE)
    assert text.returncode == 1 and doc["import"]["refused"] == {
        "code": "verify.unlisted", "message": "code the signed manifest does not list", "path": str(path)}
    assert f"strict refused import {PACKAGE}: verify.unlisted {path}" in text.stdout


def test_the_addon_beside_another_release_than_it_pins_is_refused(signed: Signed, wheels: tuple[Path, Path]) -> None:
    """The add-on's pin (``==3.9.10.post20261008``) does not hold for another tokenspeed-triton: its
    files in that Triton's package are not vouched for, and strict refuses the import."""
    addon, _ = wheels
    other = migrate(fetch_wheel(TOKENSPEED), signed.root / "other", signed.key, "--jobs", "2").signed()
    venv = signed.venv("other-venv", addon, other)
    done = venv.run("-c", f"import {PACKAGE}")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.endswith("(verify.unlisted)"), done.stderr[-2000:]
    assert f"{venv.site / LIBPROTON}: " in last
    text, doc = venv.doctor("--package", PACKAGE)
    assert text.returncode == 1 and doc["import"]["refused"]["path"] == str(venv.site / LIBPROTON)
    message = doc["import"]["refused"]["message"]
    assert "tokenspeed_proton-3.9.10.post20261008.dist-info" in message and "verify.triton" in message, message
