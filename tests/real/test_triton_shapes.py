"""Every real Triton: forks that install ``triton`` under another distribution
name, each discovery shape since 3.0 with its patch in ``hooks/``, overlapping installs, and a
real plugin package that registers itself.

Real wheels from the index (cached by ``bench/_wheels.py``), see the table in docs/tritons.md:
``triton`` 3.0.0, 3.2.0, 3.3.0, 3.4.0, 3.5.0, 3.8.0 (their ``backends/__init__.py``), and 3.9.0;
``triton-pascal`` 3.1.0 (a fork for older GPUs, directory-scan era), ``fbtriton`` 3.7.4 (a
large company's fork, entry-point era), ``triton-ascend`` 3.2.0 (a vendor fork for another
accelerator, directory-scan era); ``triton-utlx`` 3.8.0.post16 (a plugin built for 3.8 that
registers itself: a ``.pth`` puts it in ``TRITON_PLUGIN_PATHS``, ``import utlx_plugin`` calls
``extend_with``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers.cli import migrate
from helpers.projects import ROOT
from helpers.venv import Venv, make_venv
from helpers.wheels import fetch_wheel, pip_install
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.loading.registry import libtriton_path
from triton_backend_runtime.site.discovery import core_version, discover
from triton_backend_runtime.triton import patch as registry_hook
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.statement import manifest_from_statement

from backend_packager.manifest import signing

pytestmark = pytest.mark.triton_wheel

HOOKS = ROOT / "hooks"
PATCHES = {
    "directory-scan": HOOKS / "triton-3.0-backends-registry.patch",
    "entry-points": HOOKS / "triton-3.4-backends-registry.patch",
    "entry-points-in-tree": HOOKS / "triton-3.9-backends-registry.patch",
}
BACKENDS_INIT = "triton/backends/__init__.py"
CUOBJDUMP = "triton/backends/nvidia/bin/cuobjdump"


def member(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode("utf-8")


# -- one patch per discovery shape, on the real file of each release -------------------------


@pytest.mark.parametrize(("requirement", "shape"), [
    ("triton==3.0.0", "directory-scan"),
    ("triton==3.2.0", "directory-scan"),
    ("triton==3.3.0", "directory-scan"),
    ("triton==3.4.0", "entry-points"),
    ("triton==3.5.0", "entry-points"),
    ("triton==3.8.0", "entry-points-in-tree"),
    ("triton==3.9.0", "entry-points-in-tree"),
    ("triton-pascal==3.1.0", "directory-scan"),
    ("fbtriton==3.7.4", "entry-points-in-tree"),
    ("triton-ascend==3.2.0", "directory-scan"),
])
def test_each_discovery_shape_has_its_patch(requirement: str, shape: str, tmp_path: Path) -> None:
    source = member(fetch_wheel(requirement), BACKENDS_INIT)
    found = registry_hook.shape_of(source)
    assert found is not None and found.name == shape
    copy = tmp_path / "__init__.py"
    copy.write_text(source)
    subprocess.run(["patch", "--quiet", str(copy), str(PATCHES[shape])], check=True)
    patched = copy.read_text()
    assert patched == registry_hook.patch_source(source)
    compile(patched, str(copy), "exec")
    # patched in the file: the module calls the registry itself, nothing more to wrap
    assert registry_hook.shape_of(patched) is None and registry_hook.unwrappable(str(copy), patched) is None
    # one changed line and no shape fits: the registry says it cannot be put in front
    odd = source.replace(found.anchor, found.anchor.replace("_discover_backends()", "dict(_discover_backends())"))
    assert registry_hook.patch_source(odd) is None
    assert "the registry is not in use" in (registry_hook.unwrappable(str(copy), odd) or "")


# -- forks: the core is the distribution that owns triton/__init__.py ------------------------

FORKS = [
    ("triton-pascal==3.1.0", "triton-pascal", "3.1.0", "3.1.0"),
    ("fbtriton==3.7.4", "fbtriton", "3.7.4", "3.7.4+fb"),
    ("triton-ascend==3.2.0", "triton-ascend", "3.2.0", "3.2.0"),
]


@pytest.fixture(scope="module")
def fork_sites(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fork as pip installs it, in a site of its own."""
    sites = {}
    for requirement, *_ in FORKS:
        site = tmp_path_factory.mktemp(requirement.split("==")[0])
        pip_install(venv.python, fetch_wheel(requirement), site)
        sites[requirement] = site
    return sites


@pytest.mark.parametrize(("requirement", "name", "version", "attribute"), FORKS)
def test_fork_is_the_core_found_by_its_file(
    fork_sites: dict[str, Path], venv: Venv, requirement: str, name: str, version: str, attribute: str
) -> None:
    site = fork_sites[requirement]
    found = discover([str(site)], in_tree=False)
    assert found.triton is not None and (found.triton.name, found.triton.version) == (name, version)
    assert core_version(found.triton) == attribute
    assert libtriton_path(found.triton) == str(site / "triton" / "_C" / "libtriton.so")
    # doctor, in front of the venv's own triton 3.9.0: the one import triton imports
    doctor = venv.cli("doctor", paths=(site,))
    assert f"triton:      {name} {version} (triton.__version__ {attribute}; {site}/triton/__init__.py)" \
        in doctor.stdout, doctor.stdout + doctor.stderr


@pytest.fixture(scope="module")
def pascal(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """triton-pascal 3.1.0 (directory-scan era, installs ``triton`` under another name),
    migrated and signed with the venv's key, in a site of its own."""
    out = tmp_path_factory.mktemp("pascal")
    signed = migrate(fetch_wheel("triton-pascal==3.1.0"), out / "wheels", venv.key, "--capture-plugins").signed()
    pip_install(venv.python, signed, out / "site")
    return out / "site"


def strict(venv: Venv) -> dict[str, str]:
    return {"TRITON_BACKEND_POLICY": "strict", "TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub)}


def test_directory_scan_fork_enforced_under_strict(venv: Venv, pascal: Path) -> None:
    result = venv.probe(pascal, **strict(venv))
    # imported through the import system as modules of the package: the verified source ran
    assert result["table"] == {"amd": "triton.backends.amd.compiler.HIPBackend",
                               "nvidia": "triton.backends.nvidia.compiler.CUDABackend"}
    report = result["report"]
    assert report["used_by_triton"] is True and report["discovery"] == "in-tree"
    assert {(r["name"], r["trust"], r["state"]) for r in report["backends"]} == {
        ("amd", "verified", "loaded"), ("nvidia", "verified", "loaded")}
    assert report["triton_core"]["distribution"] == "triton-pascal"
    doctor = venv.cli("doctor", paths=(pascal,), **strict(venv))
    assert doctor.returncode == 0, doctor.stdout
    assert "triton:      triton-pascal 3.1.0 (triton.__version__ 3.1.0;" in doctor.stdout
    assert "signed by: " in doctor.stdout and "test vendor (a trusted key)" in doctor.stdout


def copy_site(site: Path, out: Path, edits: dict[str, bytes]) -> Path:
    """A hard-linked copy of ``site`` with the files in ``edits`` replaced by new files
    (never written through the shared link)."""
    subprocess.run(["cp", "-al", str(site), str(out)], check=True)
    for path, data in edits.items():
        target = out / path
        target.unlink()
        target.write_bytes(data)
    return out


def test_tampered_cuobjdump_of_a_directory_scan_triton_refused_under_strict(
    venv: Venv, pascal: Path, tmp_path: Path
) -> None:
    data = bytearray((pascal / CUOBJDUMP).read_bytes())
    data[len(data) // 2] ^= 0xFF
    site = copy_site(pascal, tmp_path / "site", {CUOBJDUMP: bytes(data)})
    done = venv.run("import triton", site, **strict(venv))
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.core.CoreRejected: triton core not verified: ")
    assert f"{site / CUOBJDUMP}: " in last and last.endswith("(verify.sha256)")
    doctor = venv.cli("doctor", paths=(site,), **strict(venv))
    assert doctor.returncode == 1
    # the signer's trust apart from the reason: a trusted key, rejected for the changed file
    assert "signatures (untrusted" not in doctor.stdout and "test vendor (a trusted key)" in doctor.stdout
    assert f"reason: {site / CUOBJDUMP}: " in doctor.stdout


def test_doctor_shows_trust_files_when_no_distribution_has_a_manifest(venv: Venv) -> None:
    doctor = venv.cli("doctor", TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert f"trust files: {venv.pub}" in doctor.stdout and "no key is trusted" not in doctor.stdout


def resign(site: Path, key: Path, dist_info: str, edits: dict[str, bytes]) -> None:
    """The manifest of ``dist_info`` re-signed over the edited files: a vendor who signed it."""
    envelope = site / dist_info / MANIFEST_FILENAME
    data = envelope.read_bytes()
    manifest = manifest_from_statement(dsse.unverified_payload(dsse.decode(data, str(envelope))), str(envelope))
    for artifact in manifest.artifacts:
        if artifact.path in edits:
            artifact.sha256 = hashlib.sha256(edits[artifact.path]).hexdigest()
            artifact.size = len(edits[artifact.path])
    envelope.unlink()
    envelope.write_bytes(signing.seal_with(manifest, [signing.load(key)]))


def test_a_signed_triton_whose_discovery_cannot_be_wrapped_fails_loudly_under_strict(
    venv: Venv, pascal: Path, tmp_path: Path
) -> None:
    source = (pascal / BACKENDS_INIT).read_text()
    odd = source.replace("backends = _discover_backends()\n", "backends = dict(_discover_backends())\n").encode()
    site = copy_site(pascal, tmp_path / "site", {BACKENDS_INIT: odd})
    resign(site, venv.key, "triton_pascal-3.1.0.dist-info", {BACKENDS_INIT: odd})
    done = venv.run("import triton", site, **strict(venv))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.integration.RegistryUnavailable: triton-backend-runtime: ")
    assert str(site / BACKENDS_INIT) in last and "the registry is not in use" in last
    assert last.endswith("(policy.unenforced)")
    assert venv.cli("doctor", paths=(site,), **strict(venv)).returncode == 1
    # warn: one warning, Triton discovers its backends itself, doctor says so and exits 1
    warn = venv.run("import triton.backends as b; print(sorted(b.backends))", site,
                    TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert warn.returncode == 0 and warn.stdout.strip().splitlines()[-1] == "['amd', 'nvidia']"
    assert "the registry is not in use" in warn.stderr
    doctor = venv.cli("doctor", paths=(site,), TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert doctor.returncode == 1 and "(policy.unenforced)" in doctor.stdout


def test_entry_point_fork_verified_under_strict(venv: Venv, tmp_path: Path) -> None:
    """fbtriton 3.7.4, migrated and signed: its backends need its libtriton.so, found beside
    the triton/__init__.py it owns (by name, "triton" is not installed at all there)."""
    site = tmp_path / "site"
    signed = migrate(fetch_wheel("fbtriton==3.7.4"), tmp_path / "wheels", venv.key, "--capture-plugins").signed()
    pip_install(venv.python, signed, site)
    result = venv.probe(site, **strict(venv))
    assert set(result["table"]) == {"amd", "nvidia"}
    rows = result["report"]["backends"]
    assert {(r["name"], r["trust"], r["state"]) for r in rows if r["distribution"] == "fbtriton"} == {
        ("amd", "verified", "loaded"), ("nvidia", "verified", "loaded")}
    # the venv's own triton 3.9.0 declares the same names (shadowed by the fork): legacy, excluded
    assert {r["state"] for r in rows if r["distribution"] == "triton"} == {"excluded"}
    assert result["report"]["triton_core"]["__version__"] == "3.7.4+fb"
    # the example plugin fbtriton bundles needs symbols its own libtriton.so does not export:
    # that library alone is refused, not the core
    plugins = {p["path"]: p for p in result["report"]["plugins"]}
    bundled = plugins["triton/plugins/libMLIRDialectPlugin.so"]
    assert bundled["trust"] == "rejected" and bundled["reason"]["code"] == "verify.symbols"
    assert "loaded" not in {p["state"] for p in plugins.values()}


# -- a fork installed over triton: both RECORDs claim the files ------------------------------


@pytest.fixture(scope="module")
def overlap(venv: Venv, triton_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A venv with triton 3.9.0 migrated and signed by the session's key, then fbtriton 3.7.4
    installed over it with pip (as a user who installs a fork beside triton does)."""
    root = tmp_path_factory.mktemp("overlap")
    signed = migrate(triton_wheel, root / "wheels", venv.key, "--capture-plugins").signed()
    env = make_venv(root, signed)
    pip = [str(env.python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, str(fetch_wheel("fbtriton==3.7.4"))], check=True, capture_output=True)
    return env


def test_fork_installed_over_triton_is_conflict_files(overlap: Venv, venv: Venv) -> None:
    trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub)}
    doctor = overlap.cli("doctor", **trusted)
    out = doctor.stdout
    assert doctor.returncode == 1, out
    assert "triton:      fbtriton 3.7.4 (triton.__version__ 3.7.4+fb;" in out
    assert "its files are also claimed by triton 3.9.0" in out
    problem = next(line for line in out.splitlines() if line.endswith("(conflict.files)"))
    assert "fbtriton 3.7.4 and triton 3.9.0 both own" in problem
    assert "the files on disk are fbtriton 3.7.4's (installed last)" in problem
    # each choice: the other uninstalled, the one kept reinstalled from the wheel it came from
    assert "to keep triton 3.9.0: `pip uninstall -y fbtriton` then `pip install --force-reinstall --no-deps " \
        in problem
    assert "to keep fbtriton 3.7.4: `pip uninstall -y triton` then `pip install --force-reinstall --no-deps " \
        in problem
    assert "--no-deps triton==3.9.0" not in problem
    # the signed triton's own backends: the conflict, found before hashing, not a size mismatch
    report = overlap.probe(**trusted)["report"]
    signed = [r for r in report["backends"] if r["distribution"] == "triton"]
    assert signed and {r["reason"]["code"] for r in signed} == {"conflict.files"}
    # what doctor names is what import triton imports
    assert overlap.run("import triton; print(triton.__version__)").stdout.strip() == "3.7.4+fb"
    done = overlap.run("import triton", TRITON_BACKEND_POLICY="strict", **trusted)
    assert done.returncode == 1 and done.stderr.strip().endswith("(conflict.files)"), done.stderr


# -- a real plugin package that registers itself -----------------------------------------------


@pytest.fixture(scope="module")
def utlx(venv: Venv, triton_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A venv with the real triton 3.9.0 and triton-utlx (built for Triton 3.8), migrated and
    signed by the session's key, installed with pip: its ``utlx_plugin.pth`` runs at start-up."""
    root = tmp_path_factory.mktemp("utlx")
    env = make_venv(root, triton_wheel)
    wheel = migrate(fetch_wheel("triton-utlx==3.8.0.post16"), root / "wheels", venv.key, "--capture-plugins").signed()
    pip = [str(env.python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True)
    return env


SELF_REGISTER = """
import json, os, sys
import triton
try:
    import utlx_plugin
    outcome = {"loaded": True}
except RuntimeError as exc:
    reason = getattr(exc, "reason", None)
    outcome = {"type": type(exc).__name__, "text": str(exc), "code": reason.code if reason else None}
outcome["mapped"] = "libutlx" in open("/proc/self/maps").read()
outcome["paths"] = os.environ.get("TRITON_PLUGIN_PATHS")
print(json.dumps(outcome))
"""


def test_self_registering_plugin_refused_by_extend_with_not_a_crash(utlx: Venv, venv: Venv) -> None:
    """Without the registry this process dies with SIGSEGV in extend_with (the library needs
    Triton 3.8); with it, import utlx_plugin raises, naming the reason, and nothing is mapped."""
    done = utlx.run(SELF_REGISTER, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["type"] == "PluginRefused" and outcome["mapped"] is False
    assert "utlx_plugin/libutlx.so not loaded" in outcome["text"]
    assert outcome["code"] and outcome["code"].startswith("verify."), outcome
    # warn: the .pth's TRITON_PLUGIN_PATHS entry was taken out, with a warning
    assert not outcome["paths"] and "TRITON_PLUGIN_PATHS: " in done.stderr and "taken out" in done.stderr


def test_self_registering_plugin_in_plugin_paths_refused_under_strict(
    utlx: Venv, venv: Venv, migrated: Path
) -> None:
    env = {"TRITON_BACKEND_POLICY": "strict", "TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub)}
    done = utlx.run("import triton", migrated, **env)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.pluginguard.PluginPathRefused: TRITON_PLUGIN_PATHS names ")
    assert "utlx_plugin/libutlx.so, which is not admitted" in last
    # the variable emptied before import triton: triton imports, the package's own extend_with is refused
    quiet = utlx.run("import os; os.environ.pop('TRITON_PLUGIN_PATHS')\n" + SELF_REGISTER, migrated, **env)
    assert quiet.returncode == 0, quiet.stderr
    outcome = json.loads(quiet.stdout.strip().splitlines()[-1])
    assert outcome["type"] == "PluginRefused" and outcome["mapped"] is False
