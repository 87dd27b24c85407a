"""``doctor --package`` and ``list --package``: a Triton installed under another package name.
A vendor release that renames the package (``vendor_triton/``, group
``vendor_triton.backends``) is examined as the name it is imported by: its core (the
distribution holding ``vendor_triton/__init__.py``), its group, its backends, verified for
that package. Without ``--package`` doctor looks at ``triton``, finds none, and says which
package a Triton is installed as.

Synthetic wheels (:mod:`helpers.renamed`; migrated, signed, installed with pip into a site of
their own), the vendor's ``backends/__init__.py`` carrying the registry patch as a patched
release does; the real ``tokenspeed-triton``: ``tests/real/test_doctor_package_real.py``.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import doctor_json, environment, migrate, runtime
from helpers.projects import Keypair, keygen
from helpers.renamed import backend, backends_init, entry_points, renamed_core
from helpers.wheels import pip_install, write_wheel
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_backend_runtime.cli.inputs import UnusableInput
from triton_backend_runtime.cli.inputs import package_arg as _package
from triton_backend_runtime.site import discovery
from triton_backend_runtime.triton.patch import patch_source

PACKAGE = "vendor_triton"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))

#: The vendor's ``backends/__init__.py``: Triton's entry-points shape, reading its own package's group.
VENDOR_BACKENDS = backends_init(f"{PACKAGE}.backends")


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "vendor")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, key: Keypair) -> Path:
    """The vendor's renamed core and a backend for it, migrated, signed and installed."""
    root = tmp_path_factory.mktemp("renamed-site")
    patched = patch_source(VENDOR_BACKENDS)
    assert patched is not None
    core = renamed_core(PACKAGE, "vgpu") | {f"{PACKAGE}/backends/__init__.py": patched.encode()}
    plugin = backend("acme_backend", "Acme", f"{PACKAGE}.backends") | entry_points(
        "acme_backend-1.0.dist-info", f"{PACKAGE}.backends", {"acme": "acme_backend"})
    target = root / "site"
    for name, files in (("vendor-triton", core), ("acme-backend", plugin)):
        wheel = write_wheel(root / name, name, "3.3.0" if name == "vendor-triton" else "1.0", files)
        run = migrate(wheel, root / "out", key, "--json")
        code, outcome = run.returncode, run.outcome
        assert code == 0 and outcome["triton_package"] == PACKAGE, outcome
        pip_install(Path(sys.executable), root / "out" / wheel.name, target)
    return target


def test_doctor_examines_the_renamed_package(site: Path, key: Keypair, tmp_path: Path) -> None:
    code, doc = doctor_json(site, key, tmp_path, "--package", PACKAGE)
    assert code == 0, doc
    assert doc["healthy"] and doc["enforced"] and doc["used_by_triton"] and doc["problems"] == []
    assert doc["package"] == PACKAGE
    core = doc["triton_core"]
    assert (core["distribution"], core["version"], core["__version__"]) == ("vendor-triton", "3.3.0", "3.3.0")
    assert core["init"] == str(site / PACKAGE / "__init__.py")
    rows = {r["name"]: (r["distribution"], r["package"], r["trust"], r["state"], r["reason"]) for r in doc["backends"]}
    assert rows == {
        "acme": ("acme-backend", "acme_backend", "verified", "loaded", None),
        "vgpu": ("vendor-triton", f"{PACKAGE}.backends.vgpu", "verified", "loaded", None),
    }
    assert doc["renamed_cores"] == []


def test_doctor_text_and_list_name_the_package(site: Path, key: Keypair, tmp_path: Path) -> None:
    text = runtime(site, key, tmp_path, "doctor", "--package", PACKAGE)
    assert text.returncode == 0, text.stdout
    assert f"  {PACKAGE}: vendor-triton 3.3.0 ({PACKAGE}.__version__ 3.3.0; " in text.stdout
    assert text.stdout.rstrip().endswith("OK")
    listing = runtime(site, key, tmp_path, "list", "--package", PACKAGE)
    assert listing.returncode == 0, listing.stdout
    assert sorted(listing.stdout.splitlines()) == [
        "acme\tacme-backend 1.0\tverified\tloaded", "vgpu\tvendor-triton 3.3.0\tverified\tloaded"]


def test_without_the_flag_doctor_looks_for_triton_and_points_at_the_rename(site: Path, key: Keypair,
                                                                          tmp_path: Path) -> None:
    code, doc = doctor_json(site, key, tmp_path)
    assert code == 1 and not doc["healthy"]
    assert doc["package"] == "triton" and doc["triton_core"] is None
    # triton's group holds no backend here: none is shown, let alone as verified
    assert doc["backends"] == []
    assert [(p["code"], p["path"]) for p in doc["problems"]] == [("load.triton", "triton")]
    assert doc["renamed_cores"] == [{"distribution": "vendor-triton 3.3.0", "package": PACKAGE}]
    text = runtime(site, key, tmp_path, "doctor")
    assert text.returncode == 1
    assert "  triton:      not installed (no installed distribution's RECORD lists the triton/__init__.py" in (
        text.stdout)
    assert (f"note: a Triton is installed as {PACKAGE} (vendor-triton 3.3.0): "
            f"python -m triton_backend_runtime doctor --package {PACKAGE}") in text.stdout


def test_a_manifest_for_the_rename_is_refused_under_triton(site: Path, key: Keypair, tmp_path: Path) -> None:
    """The registry, asked for ``triton``, refuses the vendor's manifests by reason: they were
    built for the Triton imported as vendor_triton."""
    probe = ("import json\nfrom triton_backend_runtime.loading import registry\nr = registry.get()\nr.verify()\n"
             "print(json.dumps({k: v.problem.code if v.problem else None for k, v in r.verdicts.items()}))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=environment(site, key, tmp_path), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    codes = json.loads(proc.stdout)
    assert sorted(codes.values()) == ["verify.triton-package", "verify.triton-package"]


CORE_PROBE = """
import importlib.util, json, sys
from triton_backend_runtime.triton import core
from triton_backend_runtime.loading import registry
try:
    reason = core.check_core(importlib.util.find_spec(sys.argv[1]), sys.argv[1])
    print(json.dumps(None if reason is None else reason.code))
except core.CoreRejected as exc:
    print(json.dumps(["refused", exc.reason.code, exc.reason.path]))
"""


def test_the_core_check_takes_the_package(site: Path, key: Keypair, tmp_path: Path) -> None:
    """check_core for the renamed package: its verified core passes; an edited
    vendor_triton/__init__.py is refused under strict, by reason, naming the file."""
    copy = tmp_path / "site"
    shutil.copytree(site, copy)

    def check() -> Any:
        proc = subprocess.run([sys.executable, "-c", CORE_PROBE, PACKAGE], capture_output=True, text=True,
                              env=environment(copy, key, tmp_path), cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert check() is None
    init = copy / PACKAGE / "__init__.py"
    init.write_text(init.read_text() + "# edited after install\n")
    assert check() == ["refused", "verify.size", str(init)]


@given(st.text(max_size=120) | st.sampled_from(["triton", "vendor_triton", "None", "tritón", "class", "a" * 101,
                                              "x\n"]))
@settings(max_examples=EXAMPLES, deadline=None, database=None)
def test_package_values_are_names_or_input_name(value: str) -> None:
    try:
        name = _package(argparse.Namespace(package=value))
    except UnusableInput as exc:
        assert exc.code == "input.name" and exc.path == "--package"
        assert not value.isidentifier() or len(value) > 100 or keyword.iskeyword(value)
        return
    assert name == value and name.isidentifier() and len(name) <= 100


@given(st.lists(st.sampled_from([
    "vendor_triton/__init__.py,sha256=x,1", "vendor_triton/backends/__init__.py,sha256=x,1",
    "triton/__init__.py,,", "triton/backends/__init__.py,,", "x/backends/__init__.py,,", "1x/__init__.py,,",
    "1x/backends/__init__.py,,", '"a,b/backends/__init__.py",,', "../y/backends/__init__.py,,", "y/__init__.py,,",
    "", "\x00", "\r",
]) | st.text(max_size=40), max_size=12), st.booleans())
@settings(max_examples=EXAMPLES, deadline=None, database=None)
def test_renamed_cores_from_any_record(tmp_path_factory: pytest.TempPathFactory, rows: list[str],
                                       crlf: bool) -> None:
    """Whatever a RECORD holds: a renamed core is named only for a package (an identifier,
    not triton) that the RECORD lists both ``__init__.py`` and ``backends/__init__.py`` of."""
    info = tmp_path_factory.mktemp("record") / "x-1.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(("\r\n" if crlf else "\n").join(rows), encoding="utf-8", errors="replace")
    dist = discovery.Distribution("x", "1", str(info))
    found = [package for _, package in discovery.renamed_cores([dist])]
    listed = {row.split(",")[0] for row in "\n".join(rows).splitlines()}
    assert found == sorted(found) and len(found) == len(set(found))
    for package in found:
        assert package.isidentifier() and package != "triton"
        assert {f"{package}/__init__.py", f"{package}/backends/__init__.py"} <= listed


@pytest.mark.parametrize("bad", ["a/b", "a.b", "1x", "", "class", "vendor-triton"])
@pytest.mark.parametrize("command", ["doctor", "list"])
def test_package_must_be_a_python_package_name(site: Path, key: Keypair, tmp_path: Path, command: str,
                                               bad: str) -> None:
    proc = runtime(site, key, tmp_path, command, "--package", bad, "--json")
    assert proc.returncode == 2, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m triton_backend_runtime: error: --package: ")
    assert lines[0].endswith(" (input.name)")
    assert json.loads(proc.stdout)["error"]["code"] == "input.name"


