"""The runtime registry against the real triton==3.9.0, installed in a venv of its own.

One venv per module (triton installed once, with packaging and cryptography); the runtime
comes from this repository through PYTHONPATH; each test's extra distributions are
installed with pip into directories of their own, put in front on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, ElfFixtures, run_cli
from runtime_wheels import backend_files, pip_install, write_wheel

pytestmark = pytest.mark.triton_wheel

RUNTIME = ROOT / "runtime"
PATCH = ROOT / "hooks" / "triton-3.9-backends-registry.patch"

PROBE = """
import json, sys, warnings
warnings.simplefilter("always")
import triton.backends as tb
table = {k: v.compiler.__module__ + "." + v.compiler.__name__ for k, v in tb.backends.items()}
try:
    from triton_backend_runtime import registry
    report = registry.get().report()
except ImportError:
    report = None
print(json.dumps({"table": table, "report": report}))
"""


@dataclass
class Venv:
    root: Path
    python: Path
    site: Path
    home: Path  # XDG config/cache for the tests: the user's own trust store stays out
    key: Path
    pub: Path

    def run(self, code: str, *paths: Path, runtime: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        pythonpath = [str(p) for p in paths] + ([str(RUNTIME)] if runtime else [])
        full = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
        full.update(
            PYTHONPATH=os.pathsep.join(pythonpath), XDG_CONFIG_HOME=str(self.home / "config"),
            TRITON_BACKEND_CACHE_DIR=str(self.home / "cache"), **env,
        )
        return subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, env=full)

    def probe(self, *paths: Path, **env: str) -> dict:
        done = self.run(PROBE, *paths, **env)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]), stderr=done.stderr)

    def cli(self, *args: str, paths: tuple[Path, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
        code = f"import sys; from triton_backend_runtime.__main__ import main; sys.exit(main({list(args)!r}))"
        return self.run(code, *paths, **env)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, triton_wheel: Path) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(root / "v")], check=True)
    python = root / "v" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(triton_wheel)], check=True)
    subprocess.run([*pip, "packaging", "cryptography"], check=True)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([str(python), "-c", purelib], text=True).strip())
    key = root / "keys" / "vendor.pem"
    key.parent.mkdir()
    assert run_cli("keygen", "-o", str(key), "--comment", "test vendor").returncode == 0
    env = Venv(root, python, site, root / "home", key, key.with_suffix(".pub"))
    install = env.cli("hook", "install")
    assert install.returncode == 0, install.stderr
    yield env
    env.cli("hook", "uninstall")


def _migrate(wheel: Path, out: Path, key: Path) -> Path:
    done = run_cli("migrate", str(wheel), "-o", str(out), "--key", str(key))
    assert done.returncode == 0, done.stderr
    return out / wheel.name


def _rows(result: dict, name: str) -> list[dict]:
    return [r for r in result["report"]["backends"] if r["name"] == name]


def test_hook_unmodified_triton_legacy_under_warn_refused_under_strict(venv: Venv) -> None:
    warn = venv.probe()
    assert set(warn["table"]) == {"amd", "nvidia"}
    assert warn["report"]["used_by_triton"] is True
    assert {(r["name"], r["trust"], r["state"]) for r in warn["report"]["backends"]} == {
        ("amd", "legacy", "loaded"), ("nvidia", "legacy", "loaded")
    }
    strict = venv.probe(TRITON_BACKEND_POLICY="strict")
    assert strict["table"] == {}
    for row in strict["report"]["backends"]:
        assert row["state"] == "excluded"
        assert row["reason"]["code"] == "policy.not-verified"
        assert "legacy" in row["reason"]["message"]
    assert "BackendWarning" in strict["stderr"] and "nvidia" in strict["stderr"]
    off = venv.probe(TRITON_BACKEND_POLICY="off")
    assert set(off["table"]) == {"amd", "nvidia"} and off["report"]["used_by_triton"] is False


def test_uninstalled_hook_leaves_triton_alone(venv: Venv) -> None:
    assert venv.cli("hook", "uninstall").returncode == 0
    try:
        result = venv.probe()
        assert set(result["table"]) == {"amd", "nvidia"}
        assert result["report"]["used_by_triton"] is False
    finally:
        assert venv.cli("hook", "install").returncode == 0


def test_in_tree_discovery(venv: Venv) -> None:
    result = venv.probe(TRITON_BACKENDS_IN_TREE="1")
    assert set(result["table"]) == {"amd", "nvidia"}
    assert {r["source"] for r in result["report"]["backends"]} == {"in-tree"}


@pytest.fixture(scope="module")
def migrated(venv: Venv, triton_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The triton wheel migrated and signed by `backend-packager migrate`, in a site of its own."""
    out = tmp_path_factory.mktemp("migrated")
    wheel = _migrate(triton_wheel, out / "wheels", venv.key)
    pip_install(venv.python, wheel, out / "site")
    return out / "site"


def test_migrated_triton_verified_under_strict(venv: Venv, migrated: Path) -> None:
    trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub), "TRITON_BACKEND_POLICY": "strict"}
    result = venv.probe(migrated, **trusted)
    assert set(result["table"]) == {"amd", "nvidia"}
    rows = result["report"]["backends"]
    assert {(r["trust"], r["state"]) for r in rows} == {("verified", "loaded")}
    assert all(r["signers"][0].endswith("test vendor") for r in rows)
    assert all(r["dist_info"].startswith(str(migrated)) for r in rows)
    # warm: the same verdict from the cache, and the manifests reach Triton's cache key
    code = (
        "import triton, triton.knobs as k; from triton_backend_runtime import registry as r;"
        "print(k.runtime.add_stages_inspection_hook()[1], r.get().manifest_digest, r.get().hashed_bytes)"
    )
    done = venv.run(code, migrated, **trusted)
    hook_hash, digest, hashed = done.stdout.split()
    assert hook_hash == digest and hashed == "0", done.stderr
    # untrusted key: under strict refused with the reason, under warn loaded as unverified
    untrusted = venv.probe(migrated, TRITON_BACKEND_POLICY="strict")
    assert untrusted["table"] == {}
    assert "not a trusted key" in _rows(untrusted, "nvidia")[0]["reason"]["message"]
    assert _rows(venv.probe(migrated), "nvidia")[0]["trust"] == "unverified"


def test_legacy_only_keeps_triton_cache_key(venv: Venv) -> None:
    done = venv.run("import triton, triton.knobs as k; print(k.runtime.add_stages_inspection_hook)")
    assert done.stdout.strip() == "None"


@pytest.fixture(scope="module")
def demo_wheels(venv: Venv, elf_files: ElfFixtures, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("demo")
    files = backend_files("demo_backend", "Demo", "demo")
    files["demo_backend/lib/libexports.so"] = elf_files.exports.read_bytes()
    legacy = write_wheel(out / "legacy", "demo-backend", "1.0", files, {"demo": "demo_backend"})
    plugin = {"demo_plugin/__init__.py": b"", "demo_plugin/libdemo_plugin.so": elf_files.plugin_v2.read_bytes()}
    return {
        "demo": _migrate(legacy, out / "signed", venv.key),
        "plugin": _migrate(write_wheel(out / "legacy", "demo-plugin", "1.0", plugin), out / "signed", venv.key),
        "other-nvidia": write_wheel(
            out / "legacy", "other-nvidia", "2.0", backend_files("other_nvidia", "Other", "cuda"),
            {"nvidia": "other_nvidia"},
        ),
        "broken": write_wheel(
            out / "legacy", "broken-backend", "0.1", backend_files("broken_backend", "Broken", "x", broken=True),
            {"broken": "broken_backend"},
        ),
    }


def test_changed_byte_in_installed_so_rejected_under_strict(venv: Venv, demo_wheels: dict, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["demo"], tmp_path)
    env = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub), "TRITON_BACKEND_POLICY": "strict"}
    before = venv.probe(tmp_path, **env)
    assert before["table"] == {"demo": "demo_backend.compiler.DemoBackend"}
    assert _rows(before, "demo")[0]["trust"] == "verified"
    library = tmp_path / "demo_backend" / "lib" / "libexports.so"
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))  # same size: only the hash can tell
    after = venv.probe(tmp_path, **env)
    assert after["table"] == {}
    row = _rows(after, "demo")[0]
    assert (row["trust"], row["state"]) == ("rejected", "excluded")
    assert row["reason"]["code"] == "verify.sha256" and row["reason"]["path"] == str(library)
    listed = venv.cli("list", "--json", paths=(tmp_path,), **env)
    assert listed.returncode == 1 and str(library) in listed.stdout


def test_unlisted_so_rejected(venv: Venv, demo_wheels: dict, tmp_path: Path, elf_files: ElfFixtures) -> None:
    pip_install(venv.python, demo_wheels["demo"], tmp_path)
    extra = tmp_path / "demo_backend" / "libsneaky.so"
    shutil.copyfile(elf_files.exports, extra)
    row = _rows(venv.probe(tmp_path, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub)), "demo")[0]
    assert row["reason"]["code"] == "verify.unlisted" and row["reason"]["path"] == str(extra)


def test_second_distribution_declaring_nvidia(venv: Venv, demo_wheels: dict, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["other-nvidia"], tmp_path)
    result = venv.probe(tmp_path)
    rows = {r["distribution"]: r for r in _rows(result, "nvidia")}
    assert set(rows) == {"triton", "other-nvidia"}
    # both legacy: the one earlier on sys.path wins (PYTHONPATH comes before site-packages)
    assert result["table"]["nvidia"] == "other_nvidia.compiler.OtherBackend"
    loser = rows["triton"]
    assert loser["state"] == "excluded" and loser["reason"]["code"] == "conflict.name"
    assert "other-nvidia 2.0" in loser["reason"]["message"]


def test_verified_beats_legacy_in_a_name_conflict(venv: Venv, demo_wheels: dict, migrated: Path,
                                                  tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["other-nvidia"], tmp_path)
    result = venv.probe(tmp_path, migrated, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert result["table"]["nvidia"] == "triton.backends.nvidia.compiler.CUDABackend"
    rows = {r["distribution"]: r for r in _rows(result, "nvidia")}
    assert rows["other-nvidia"]["reason"]["code"] == "conflict.name"


def test_backend_raising_on_import_is_excluded(venv: Venv, demo_wheels: dict, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["broken"], tmp_path)
    result = venv.probe(tmp_path)
    assert set(result["table"]) == {"amd", "nvidia"}
    row = _rows(result, "broken")[0]
    assert row["state"] == "failed" and "libdemo_rt.so.3 not found" in row["reason"]["message"]
    # without the registry, the same wheel breaks `import triton` for everyone
    venv.cli("hook", "uninstall")
    try:
        assert venv.run("import triton", tmp_path).returncode != 0
    finally:
        venv.cli("hook", "install")


def test_plugin_needing_missing_libtriton_symbol_rejected_before_loading(
    venv: Venv, demo_wheels: dict, tmp_path: Path
) -> None:
    pip_install(venv.python, demo_wheels["plugin"], tmp_path)
    code = PROBE.replace("print(json.dumps(", "maps = open('/proc/self/maps').read()\nprint(json.dumps(").replace(
        '"report": report}', '"report": report, "mapped": "libdemo_plugin" in maps, '
        '"paths": __import__("os").environ.get("TRITON_PLUGIN_PATHS")}'
    )
    done = venv.run(code, tmp_path, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    result = json.loads(done.stdout.strip().splitlines()[-1])
    (plugin,) = [p for p in result["report"]["plugins"] if p["distribution"] == "demo-plugin"]
    assert (plugin["trust"], plugin["state"], plugin["handed_over"]) == ("rejected", "excluded", "")
    assert plugin["reason"]["code"] == "verify.symbols"
    assert "tritonDemoRegisterPass" in plugin["reason"]["message"]
    assert result["mapped"] is False and result["paths"] is None


def test_patch_applies_to_real_triton_file(venv: Venv, tmp_path: Path) -> None:
    from triton_backend_runtime.hook import patch_source

    installed = venv.site / "triton" / "backends" / "__init__.py"
    original = installed.read_text()
    copy = tmp_path / "__init__.py"
    copy.write_text(original)
    subprocess.run(["patch", "--quiet", str(copy), str(PATCH)], check=True)
    assert copy.read_text() == patch_source(original)
    venv.cli("hook", "uninstall")
    try:
        unpatched = venv.probe()
        installed.write_text(copy.read_text())
        absent = venv.run(PROBE, runtime=False)
        absent_result = json.loads(absent.stdout.strip().splitlines()[-1])
        present = venv.probe()
    finally:
        installed.write_text(original)
        venv.cli("hook", "install")
    assert absent_result["table"] == unpatched["table"] and absent_result["report"] is None
    assert unpatched["report"]["used_by_triton"] is False
    assert present["table"] == unpatched["table"] and present["report"]["used_by_triton"] is True


def test_two_threads_load_each_backend_once(venv: Venv) -> None:
    code = """
import threading, collections, importlib, json
import triton.backends as tb
from triton_backend_runtime import registry
registry.reset()
calls = collections.Counter()
barrier = threading.Barrier(2)
def load(name, package):
    calls[name] += 1
    return tb.Backend(tb._find_concrete_subclasses(importlib.import_module(package + ".compiler"), tb.BaseBackend),
                      tb._find_concrete_subclasses(importlib.import_module(package + ".driver"), tb.DriverBase))
tables = []
def worker():
    barrier.wait()
    tables.append(registry.get().load(load))
threads = [threading.Thread(target=worker) for _ in range(2)]
[t.start() for t in threads]; [t.join() for t in threads]
print(json.dumps([dict(calls), tables[0] is tables[1], sorted(tables[0])]))
"""
    done = venv.run(code)
    assert json.loads(done.stdout) == [{"amd": 1, "nvidia": 1}, True, ["amd", "nvidia"]], done.stderr


def test_selection_error_lists_every_backend(venv: Venv, demo_wheels: dict, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["broken"], tmp_path)
    code = "import triton\ntry:\n    triton.runtime.driver.active\nexcept RuntimeError as e:\n    print(e)"
    text = venv.run(code, tmp_path).stdout
    assert "0 active drivers" in text
    assert "nvidia [triton 3.9.0, legacy, loaded]: driver CudaDriver is not active" in text
    assert "broken [broken-backend 0.1, legacy, failed]" in text and "libdemo_rt.so.3" in text


def test_doctor_reports_everything(venv: Venv, demo_wheels: dict, migrated: Path, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["broken"], tmp_path)
    done = venv.cli("doctor", paths=(tmp_path, migrated), TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert done.returncode == 1
    out = done.stdout
    assert "nvidia     triton 3.9.0  [verified, loaded, inactive]" in out
    assert "signed by: " in out and "test vendor" in out
    assert "broken     broken-backend 0.1  [legacy, failed" in out and "libdemo_rt.so.3" in out
    assert "libTritonPluginsTestLib.so" in out
