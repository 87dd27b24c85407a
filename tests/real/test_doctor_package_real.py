"""``doctor --package`` on the real renamed release ``tokenspeed-triton``: with the registry patch
applied to its ``backends/__init__.py`` and migrated with ``--rewrite-record``, doctor finds its
core by the file, its libtriton.so beside it, and both backends verified.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from helpers.cli import doctor_json, migrate
from helpers.projects import Keypair, keygen
from helpers.renamed import TOKENSPEED
from helpers.wheels import fetch_wheel, pip_install
from triton_backend_runtime.triton.patch import patch_source


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "vendor")


@pytest.mark.triton_wheel
def test_real_renamed_release_doctor(key: Keypair, tmp_path: Path) -> None:
    """tokenspeed-triton (package tokenspeed_triton) with the registry patch applied to its
    backends/__init__.py, migrated with --rewrite-record: doctor --package finds its core by
    the file, its libtriton.so beside it, and both backends verified."""
    src = fetch_wheel(TOKENSPEED)
    package = "tokenspeed_triton"
    member = f"{package}/backends/__init__.py"
    patched = tmp_path / "patched" / src.name
    patched.parent.mkdir()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(patched, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            text = patch_source(data.decode()) if info.filename == member else None
            zout.writestr(info, text.encode() if text is not None else data)
    run = migrate(patched, tmp_path / "out", key, "--json", "--rewrite-record", "--jobs", "2")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    target = tmp_path / "site"
    pip_install(Path(sys.executable), tmp_path / "out" / src.name, target)
    code, doc = doctor_json(target, key, tmp_path, "--package", package)
    core = doc["triton_core"]
    assert (core["distribution"], core["version"]) == ("tokenspeed-triton", "3.9.10.post20261028")
    assert core["__version__"] and core["libtriton"] == str(target / package / "_C" / "libtriton.so")
    assert {r["name"]: (r["trust"], r["reason"]) for r in doc["backends"]} == {
        "amd": ("verified", None), "nvidia": ("verified", None)}
    code, doc = doctor_json(target, key, tmp_path)
    assert doc["triton_core"] is None and doc["backends"] == []
    assert doc["renamed_cores"] == [{"distribution": "tokenspeed-triton 3.9.10.post20261028", "package": package}]
