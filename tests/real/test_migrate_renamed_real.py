"""The real renamed release ``tokenspeed-triton`` (package ``tokenspeed_triton``, group
``tokenspeed_triton.backends``): migrated and verified with its group signed, and loaded through
the registry as the package it is imported by.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate
from helpers.projects import Keypair, keygen
from helpers.renamed import TOKENSPEED
from helpers.wheelcheck import entry_points_of, manifest_of, verified
from helpers.wheels import fetch_wheel, pip_install
from triton_backend_runtime.site import discovery


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "renamed")


@pytest.mark.triton_wheel
def test_real_renamed_release_tokenspeed_triton(key: Keypair, tmp_path: Path) -> None:
    """tokenspeed-triton installs ``tokenspeed_triton``; its backends/__init__.py selects the
    group ``tokenspeed_triton.backends``. Before: migrate found no backend and said nothing."""
    src = fetch_wheel(TOKENSPEED)
    with zipfile.ZipFile(src) as archive:
        scan = archive.read("tokenspeed_triton/backends/__init__.py").decode()
    assert 'entry_points().select(group="tokenspeed_triton.backends")' in scan
    run = migrate(src, tmp_path / "out", key, "--json", "--jobs", "2")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    assert (outcome["backends"], outcome["triton_package"]) == (["amd", "nvidia"], "tokenspeed_triton")
    out = tmp_path / "out" / src.name
    assert entry_points_of(out) == entry_points_of(src)  # declared already: kept as they are
    manifest = manifest_of(out)
    assert manifest["triton_package"] == "tokenspeed_triton"
    assert {b["compiler"] for b in manifest["backends"]} == {
        "tokenspeed_triton.backends.amd.compiler:HIPBackend", "tokenspeed_triton.backends.nvidia.compiler:CUDABackend"}
    assert verified(out, key)

    site = tmp_path / "site"
    pip_install(Path(sys.executable), out, site)
    found = discovery.discover([str(site)], in_tree=False, backends_dir=str(site / "tokenspeed_triton" / "backends"))
    assert sorted((c.name, c.package) for c in found.candidates) == [
        ("amd", "tokenspeed_triton.backends.amd"), ("nvidia", "tokenspeed_triton.backends.nvidia")]
    assert all(c.dist is not None and c.dist.manifest for c in found.candidates)


PROBE = """
import tokenspeed_triton.backends as b
from triton_backend_runtime.loading import registry
r = registry.get()
print(json.dumps({"table": sorted(b.backends), "package": r.discovery.package,
                  "entries": {e.name: [e.state, e.reason.code if e.reason else None] for e in r.entries}}))
"""


@pytest.mark.triton_wheel
def test_real_renamed_release_loads_through_the_registry(key: Keypair, tmp_path: Path) -> None:
    """The vendor's patched release (the registry patch applied to its backends/__init__.py,
    RECORD left stale as a hand edit leaves it): migrated with --rewrite-record, installed,
    imported under strict. Both backends verified and loaded from tokenspeed_triton.backends;
    after an edit to one of its files the distribution (both backends) is rejected, by reason."""
    import subprocess

    from triton_backend_runtime.triton.patch import patch_source

    src = fetch_wheel(TOKENSPEED)
    member = "tokenspeed_triton/backends/__init__.py"
    patched = tmp_path / "patched" / src.name
    patched.parent.mkdir()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(patched, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == member:
                text = patch_source(data.decode())
                assert text is not None
                data = text.encode()
            zout.writestr(info, data)
    run = migrate(patched, tmp_path / "refused", key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 1 and outcome["error"]["code"] == "wheel.record"
    run = migrate(patched, tmp_path / "out", key, "--json", "--rewrite-record", "--jobs", "2")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    assert [(d["code"], d["path"]) for d in outcome["discrepancies"]] == [("record.mismatch", member)]
    site = tmp_path / "site"
    pip_install(Path(sys.executable), tmp_path / "out" / src.name, site)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "TRITON_BACKEND_POLICY": "strict",
           "TRITON_BACKEND_TRUSTED_KEYS": str(key.public), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "TRITON_BACKEND_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}

    def probe() -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", "import json\n" + PROBE], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
        return doc

    doc = probe()
    assert doc["package"] == "tokenspeed_triton"
    assert doc["table"] == ["amd", "nvidia"]
    assert doc["entries"] == {"amd": ["loaded", None], "nvidia": ["loaded", None]}
    compiler = site / "tokenspeed_triton" / "backends" / "amd" / "compiler.py"
    compiler.write_text(compiler.read_text() + "\n# edited after install\n")
    doc = probe()
    assert doc["table"] == []
    assert doc["entries"] == {"amd": ["excluded", "verify.size"], "nvidia": ["excluded", "verify.size"]}
