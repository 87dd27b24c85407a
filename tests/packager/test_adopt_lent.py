"""``adopt`` of a site where one distribution installs files into another's packages: a Triton,
a profiler add-on writing into ``triton/_C/`` and ``triton/backends/nvidia/lib/``, a backend
installed as ``triton/backends/foo/``, each with its own RECORD and no manifest (as pip leaves
them). Each is adopted on its own files (another's, as its RECORD describes them, are not
unrecorded code of this one), and the runtime then verifies all three under strict."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from helpers import disttree
from helpers.disttree import TAG, Dist, TrustEnv, entry, write_dist

from backend_packager.commands.adopt import adopt
from backend_packager.formats.records import hash_field
from backend_packager.manifest import signing

_no_triton_imported = disttree.no_triton_imported

pytestmark = pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")

WHEEL = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {TAG}\n"


def _install(site: Path, name: str, version: str, backends: dict[str, str], files: dict[str, bytes]) -> Dist:
    """``name`` as pip leaves it: its files, a WHEEL, and a RECORD of its own files only."""
    dist = write_dist(site, name, version, backends=backends, files={
        **files, f"{name.replace('-', '_')}-{version}.dist-info/WHEEL": WHEEL.encode()})
    info = dist.dist_info.name
    own = {*files, *(p for p in dist.wheel_paths() if p.startswith(info + "/"))}
    own |= {p for p in dist.wheel_paths() if any(p.startswith(v.replace(".", "/") + "/") for v in backends.values())}
    rows = []
    for path in sorted(own):
        data = dist.file(path).read_bytes()
        rows.append(f"{path},{hash_field(hashlib.sha256(data).hexdigest())},{len(data)}\n")
    (dist.dist_info / "RECORD").write_text("".join(rows) + f"{info}/RECORD,,\n")
    return dist


def _site(site: Path) -> list[Dist]:
    core = _install(site, "triton", "3.9.0", {"nvidia": "triton.backends.nvidia"}, {
        "triton/__init__.py": b"__version__ = '3.9.0'\n",
        "triton/backends/__init__.py": b"",
        "triton/_C/libtriton.so": b"not ELF: a stand-in for libtriton\n",
    })
    addon = _install(site, "triton-profiler", "1.2", {}, {
        "triton/_C/libproton.so": b"not ELF: a stand-in for the profiler's library\n",
        "triton/_C/proton_hooks.py": b"HOOKED = True\n",
        "triton/backends/nvidia/lib/libcupti_extra.so": b"not ELF: a stand-in\n",
    })
    foo = _install(site, "foo-backend", "1.0", {"foo": "triton.backends.foo"}, {
        "triton/backends/foo/lib/helper.py": b"X = 1\n",
    })
    return [core, addon, foo]


def test_each_distribution_is_adopted_on_its_own_files(env: TrustEnv, site: Path) -> None:
    dists = _site(site)
    key = signing.load(env.root / "keys" / "vendor.pem")
    for dist in dists:
        outcome = adopt(site, dist.name, key)
        assert outcome.error is None and outcome.status == "adopted", (dist.name, outcome.error, outcome.mismatches)
    reg = env.registry(site, policy="strict")
    assert [reg.verdicts[str(d.dist_info)].status for d in dists] == ["verified"] * 3
    for name in ("nvidia", "foo"):
        assert (entry(reg, name).trust, entry(reg, name).state) == ("verified", "loaded")
    assert sorted(reg.verdicts[str(dists[0].dist_info)].lent) == sorted(str(d.dist_info) for d in dists[1:])


def test_code_no_record_lists_is_still_unrecorded(env: TrustEnv, site: Path) -> None:
    """A file dropped into Triton that no RECORD describes is the adopted one's unrecorded
    code; an add-on's file changed since its RECORD was written is too."""
    core, addon, _ = _site(site)
    key = signing.load(env.root / "keys" / "vendor.pem")
    dropped = core.file("triton/_C/evil.py")
    dropped.write_text("import os\n")
    addon.file("triton/_C/proton_hooks.py").write_bytes(b"HOOKED = None\n")
    outcome = adopt(site, "triton", key)
    assert outcome.error is not None and outcome.error.code == "installed.mismatch"
    assert [(e.code, e.path) for e in outcome.mismatches] == [
        ("installed.unrecorded", str(dropped)), ("installed.unrecorded", str(addon.file("triton/_C/proton_hooks.py")))]
