"""The runtime registry against the real triton==3.9.0, in the shared venv (``triton_venv``):
the hook, policies, migrated and signed wheels, tampering, conflicts, the patch, selection."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from unittest.mock import ANY

import pytest
from helpers.cli import migrate, run_cli
from helpers.csrc import ElfFixtures
from helpers.projects import ROOT
from helpers.venv import PROBE, Venv, backend_rows, cosigned_site
from helpers.wheels import backend_files, pip_install, resign, write_wheel
from triton_backend_runtime.manifest.model import Manifest

pytestmark = pytest.mark.triton_wheel

PATCH = ROOT / "hooks" / "triton-3.9-backends-registry.patch"


def test_hook_unmodified_triton_legacy_under_warn_refused_under_strict(venv: Venv) -> None:
    warn = venv.probe()
    assert set(warn["table"]) == {"amd", "nvidia"}
    assert warn["report"]["used_by_triton"] is True
    assert {(r["name"], r["trust"], r["state"]) for r in warn["report"]["backends"]} == {
        ("amd", "legacy", "loaded"), ("nvidia", "legacy", "loaded")
    }
    # strict: the legacy core itself is refused before triton/__init__ runs (it loads libtriton)
    strict = venv.run("import triton", TRITON_BACKEND_POLICY="strict")
    assert strict.returncode == 1
    last = strict.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.core.CoreRejected: triton core not verified: ")
    assert "triton/__init__.py" in last and "(policy.not-verified)" in last
    off = venv.probe(TRITON_BACKEND_POLICY="off")
    assert set(off["table"]) == {"amd", "nvidia"} and off["report"]["used_by_triton"] is False


def test_uninstalled_hook_leaves_triton_alone(venv: Venv, migrated: Path) -> None:
    assert venv.cli("hook", "uninstall").returncode == 0
    try:
        result = venv.probe()
        assert set(result["table"]) == {"amd", "nvidia"}
        assert result["report"]["used_by_triton"] is False
        # strict asked for, everything verified, but import triton bypasses the registry: not OK
        doctor = venv.cli("doctor", paths=(migrated,), TRITON_BACKEND_POLICY="strict",
                          TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
        assert doctor.returncode == 1, doctor.stdout
        assert "policy strict is not enforced" in doctor.stdout and "[verified, loaded" in doctor.stdout
    finally:
        assert venv.cli("hook", "install").returncode == 0


def test_in_tree_discovery(venv: Venv) -> None:
    result = venv.probe(TRITON_BACKENDS_IN_TREE="1")
    assert set(result["table"]) == {"amd", "nvidia"}
    assert {r["source"] for r in result["report"]["backends"]} == {"in-tree"}


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
        "import triton, triton.knobs as k; from triton_backend_runtime.loading import registry as r;"
        "print(k.runtime.add_stages_inspection_hook()[1], r.get().manifest_digest, r.get().hashed_bytes)"
    )
    done = venv.run(code, migrated, **trusted)
    hook_hash, digest, hashed = done.stdout.split()
    assert hook_hash == digest and hashed == "0", done.stderr
    # untrusted key: under strict refused with the reason, under warn loaded as unverified
    # (the core itself is then refused before triton/__init__ runs)
    untrusted = venv.run("import triton", migrated, TRITON_BACKEND_POLICY="strict")
    assert untrusted.returncode == 1 and "not a trusted key" in untrusted.stderr
    assert "(policy.not-verified)" in untrusted.stderr.strip().splitlines()[-1]
    assert backend_rows(venv.probe(migrated), "nvidia")[0]["trust"] == "unverified"


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
        "demo": migrate(legacy, out / "signed", venv.key, "--capture-plugins").signed(),
        "plugin": migrate(write_wheel(out / "legacy", "demo-plugin", "1.0", plugin), out / "signed", venv.key,
                          "--capture-plugins").signed(),
        "other-nvidia": write_wheel(
            out / "legacy", "other-nvidia", "2.0", backend_files("other_nvidia", "Other", "cuda"),
            {"nvidia": "other_nvidia"},
        ),
        "broken": write_wheel(
            out / "legacy", "broken-backend", "0.1", backend_files("broken_backend", "Broken", "x", broken=True),
            {"broken": "broken_backend"},
        ),
    }


def test_changed_byte_in_installed_so_rejected_under_strict(
    venv: Venv, demo_wheels: dict, migrated: Path, tmp_path: Path
) -> None:
    pip_install(venv.python, demo_wheels["demo"], tmp_path)
    env = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub), "TRITON_BACKEND_POLICY": "strict"}
    before = venv.probe(tmp_path, migrated, **env)
    assert before["table"] == {"amd": ANY, "nvidia": ANY, "demo": "demo_backend.compiler.DemoBackend"}
    assert backend_rows(before, "demo")[0]["trust"] == "verified"
    library = tmp_path / "demo_backend" / "lib" / "libexports.so"
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))  # same size: only the hash can tell
    after = venv.probe(tmp_path, migrated, **env)
    assert set(after["table"]) == {"amd", "nvidia"}
    row = backend_rows(after, "demo")[0]
    assert (row["trust"], row["state"]) == ("rejected", "excluded")
    assert row["reason"]["code"] == "verify.sha256" and row["reason"]["path"] == str(library)
    listed = venv.cli("list", "--json", paths=(tmp_path, migrated), **env)
    assert listed.returncode == 1 and str(library) in listed.stdout


def test_unlisted_so_rejected(venv: Venv, demo_wheels: dict, tmp_path: Path, elf_files: ElfFixtures) -> None:
    pip_install(venv.python, demo_wheels["demo"], tmp_path)
    extra = tmp_path / "demo_backend" / "libsneaky.so"
    shutil.copyfile(elf_files.exports, extra)
    row = backend_rows(venv.probe(tmp_path, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub)), "demo")[0]
    assert row["reason"]["code"] == "verify.unlisted" and row["reason"]["path"] == str(extra)


def test_second_distribution_declaring_nvidia(venv: Venv, demo_wheels: dict, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["other-nvidia"], tmp_path)
    result = venv.probe(tmp_path)
    rows = {r["distribution"]: r for r in backend_rows(result, "nvidia")}
    assert set(rows) == {"triton", "other-nvidia"}
    # both legacy, the other earlier on sys.path (PYTHONPATH comes before site-packages): the
    # core's own nvidia stays the core's all the same
    assert result["table"]["nvidia"] == "triton.backends.nvidia.compiler.CUDABackend"
    loser = rows["other-nvidia"]
    assert loser["state"] == "excluded" and loser["reason"]["code"] == "conflict.name"
    assert "belongs to the Triton core (triton 3.9.0)" in loser["reason"]["message"]
    assert "trust pin nvidia DIST" in loser["reason"]["message"]
    # ... until the trust store pins it to the other
    trust = tmp_path.parent / f"{tmp_path.name}-trust"
    trust.mkdir()
    (trust / "pins").write_text("nvidia other-nvidia\n")
    result = venv.probe(tmp_path, TRITON_BACKEND_TRUSTED_KEYS=str(trust))
    assert result["table"]["nvidia"] == "other_nvidia.compiler.OtherBackend"
    rows = {r["distribution"]: r for r in backend_rows(result, "nvidia")}
    assert "pinned to other-nvidia" in rows["triton"]["reason"]["message"]


def test_verified_beats_legacy_in_a_name_conflict(venv: Venv, demo_wheels: dict, migrated: Path,
                                                  tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["other-nvidia"], tmp_path)
    result = venv.probe(tmp_path, migrated, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert result["table"]["nvidia"] == "triton.backends.nvidia.compiler.CUDABackend"
    rows = {r["distribution"]: r for r in backend_rows(result, "nvidia")}
    assert rows["other-nvidia"]["reason"]["code"] == "conflict.name"
    assert "belongs to the Triton core" in rows["other-nvidia"]["reason"]["message"]  # verified or not


def _claim_targets(*targets: str) -> Callable[[Manifest], None]:
    def edit(manifest: Manifest) -> None:
        for backend in manifest.backends:
            backend.targets = list(targets)

    return edit


@pytest.fixture(scope="module")
def rival_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = tmp_path_factory.mktemp("rival") / "rival.pem"
    assert run_cli("keygen", "-o", str(key), "--comment", "second signer").returncode == 0
    return key


def test_two_backends_claiming_one_target(venv: Venv, demo_wheels: dict, rival_key: Path, tmp_path: Path) -> None:
    """Different distributions, different backend names, one target: the trust store decides."""
    rival = write_wheel(
        tmp_path / "legacy", "rival-backend", "1.0", backend_files("rival_backend", "Rival", "demo-gpu"),
        {"rival": "rival_backend"},
    )
    signed = {
        "demo": resign(demo_wheels["demo"], tmp_path / "t", [venv.key], _claim_targets("demo-gpu")),
        "rival": resign(migrate(rival, tmp_path / "m", venv.key, "--capture-plugins").signed(), tmp_path / "t",
                        [venv.key],
                        _claim_targets("demo-gpu", "rival-only")),
        "rival-untrusted": resign(migrate(rival, tmp_path / "m", venv.key, "--capture-plugins").signed(),
                                  tmp_path / "u", [rival_key],
                                  _claim_targets("demo-gpu")),
    }
    sites = {name: tmp_path / "site" / name for name in signed}
    for name, wheel in signed.items():
        pip_install(venv.python, wheel, sites[name])
    trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub)}

    def outcome(*order: str) -> tuple[dict, dict]:
        result = venv.probe(*(sites[n] for n in order), **trusted)
        return result, {n: backend_rows(result, n)[0] for n in ("demo", "rival")}

    # both verified, neither the core: neither keeps the target, in either sys.path order
    for order in (("demo", "rival"), ("rival", "demo")):
        result, row = outcome(*order)
        for name in order:
            assert (row[name]["trust"], row[name]["state"]) == ("verified", "excluded") and name not in result["table"]
            assert row[name]["reason"]["code"] == "conflict.target"
            assert "'demo-gpu'" in row[name]["reason"]["message"]
            assert "trust pin target:demo-gpu DIST" in row[name]["reason"]["message"]
        assert "BackendWarning" in result["stderr"] and "demo-gpu" in result["stderr"]
    # the trust store pins the target: its owner keeps it, from either place on sys.path
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(venv.pub, store / "platform.pub")
    (store / "pins").write_text("target:demo-gpu rival-backend\n")
    for order in (("demo", "rival"), ("rival", "demo")):
        result = venv.probe(*(sites[n] for n in order), TRITON_BACKEND_TRUSTED_KEYS=str(store))
        pinned = {n: backend_rows(result, n)[0] for n in ("demo", "rival")}
        assert pinned["rival"]["state"] == "loaded" and "rival" in result["table"], result["stderr"]
        assert (pinned["demo"]["state"], pinned["demo"]["reason"]["code"]) == ("excluded", "conflict.target")
    # verified beats unverified, even from later on sys.path
    result, row = outcome("rival-untrusted", "demo")
    assert (row["rival"]["trust"], row["rival"]["state"]) == ("unverified", "excluded")
    assert row["rival"]["reason"]["code"] == "conflict.target" and row["demo"]["state"] == "loaded"
    # without a shared target (the demo wheel as migrated claims none) both load
    pip_install(venv.python, demo_wheels["demo"], tmp_path / "plain")
    result = venv.probe(sites["rival-untrusted"], tmp_path / "plain", **trusted)
    assert {"demo", "rival"} <= set(result["table"])


def test_trust_threshold_of_two(
    venv: Venv, demo_wheels: dict, migrated: Path, rival_key: Path, tmp_path: Path
) -> None:
    core = cosigned_site(migrated, tmp_path / "core", [venv.key, rival_key])  # strict needs a verified core
    trust = tmp_path / "trusted"
    trust.mkdir()
    shutil.copyfile(venv.pub, trust / "vendor.pub")
    shutil.copyfile(rival_key.with_suffix(".pub"), trust / "second.pub")
    (trust / "threshold").write_text("2\n")
    env = {"TRITON_BACKEND_TRUSTED_KEYS": str(trust), "TRITON_BACKEND_POLICY": "strict"}
    wheels = {
        "one": demo_wheels["demo"],
        "same-key-twice": resign(demo_wheels["demo"], tmp_path / "twice", [venv.key, venv.key]),
        "both": resign(demo_wheels["demo"], tmp_path / "both", [venv.key, rival_key]),
    }
    result = {}
    for name, wheel in wheels.items():
        pip_install(venv.python, wheel, tmp_path / name)
        result[name] = venv.probe(tmp_path / name, core, **env)
    for refused in ("one", "same-key-twice"):
        row = backend_rows(result[refused], "demo")[0]
        assert "demo" not in result[refused]["table"] and (row["trust"], row["state"]) == ("rejected", "excluded")
        assert row["reason"]["code"] == "signature.signature"
        assert "1 of 2 required signatures" in row["reason"]["message"]
    row = backend_rows(result["both"], "demo")[0]
    assert result["both"]["table"]["demo"] == "demo_backend.compiler.DemoBackend"
    assert row["trust"] == "verified" and [s.split(" ", 1)[1] for s in row["signers"]] == [
        "test vendor", "second signer"
    ]
    # the same two-signature wheel with the threshold back at 1: the cached verdict must not
    # outlive the trust store it was made with
    (trust / "threshold").unlink()
    (trust / "second.pub").unlink()
    row = backend_rows(venv.probe(tmp_path / "one", core, **env), "demo")[0]
    assert (row["trust"], row["state"]) == ("verified", "loaded")


def test_backend_raising_on_import_is_excluded(venv: Venv, demo_wheels: dict, tmp_path: Path) -> None:
    pip_install(venv.python, demo_wheels["broken"], tmp_path)
    result = venv.probe(tmp_path)
    assert set(result["table"]) == {"amd", "nvidia"}
    row = backend_rows(result, "broken")[0]
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
    from triton_backend_runtime.triton.patch import patch_source

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
from triton_backend_runtime.loading import registry
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
    plan = registry.get().load(load)
    tables.append(plan.backends if plan is not None else None)
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
