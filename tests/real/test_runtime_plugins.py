"""Plugins on the real triton==3.9.0: verified, resolved and handed to Triton.

The real plugin is the one the triton wheel ships, ``triton/plugins/libTritonPluginsTestLib.so``
(plugin API v2, built against this very libtriton; it registers one pass, ``plugin``),
repackaged into a signed wheel of another distribution. ``libshared_plugin.so`` (gcc, from
``csrc/plugin_shared.c``) is a v2 plugin Triton accepts that exports a strong symbol, for
the symbol conflict. Everything runs on the CPU: ``extend_with`` only loads the library
and registers what it declares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate, run_cli
from helpers.csrc import ElfFixtures
from helpers.venv import Venv, cosigned_site
from helpers.wheels import pip_install, write_wheel

pytestmark = pytest.mark.triton_wheel

TEST_PLUGIN = "libTritonPluginsTestLib.so"
#: handed over with extend_with, and the library is in the process's /proc/self/maps
HANDED = "extend_with; mapped (/proc/self/maps)"

#: import triton, then report the registry's plugin rows, which libraries are mapped, and
#: what Triton's libtriton now offers: the pass the plugin registers becomes
#: ``passes.plugin.add_plugin``, and running it renames the module's functions to ``foo``.
OBSERVE = """
import json, os
import triton
from triton._C.libtriton import ir, passes
from triton_backend_runtime.loading import registry
report = registry.get().report().to_dict()
maps = open("/proc/self/maps").read()
renamed = None
if hasattr(passes.plugin, "add_plugin"):
    ctx = ir.context()
    ir.load_dialects(ctx)
    builder = ir.builder(ctx)
    module = builder.create_module()
    fn = builder.get_or_insert_function(module, "kernel", builder.get_function_ty([], []), "public", False)
    module.push_back(fn)
    builder.set_insertion_point_to_start(fn.add_entry_block())
    builder.ret([])
    pm = ir.pass_manager(ctx)
    passes.plugin.add_plugin(pm)
    pm.run(module, "plugin")
    renamed = str(module)
print(json.dumps({
    "plugins": report["plugins"], "paths": os.environ.get("TRITON_PLUGIN_PATHS"),
    "mapped": sorted({l.split()[-1] for l in maps.splitlines()
                      if l.endswith(".so") and "plugin" in l.rsplit("/", 1)[-1].lower()}),
    "add_plugin": hasattr(passes.plugin, "add_plugin"), "module": renamed,
}))
"""


def _plugin(result: dict[str, Any], distribution: str) -> dict[str, Any]:
    (row,) = [p for p in result["plugins"] if p["distribution"] == distribution]
    return row


@pytest.fixture(scope="module")
def plugin_wheels(venv: Venv, elf_files: ElfFixtures, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("plugins")
    real = (venv.site / "triton" / "plugins" / TEST_PLUGIN).read_bytes()
    wheels = {"demo-plugin": {"demo_plugin/__init__.py": b"", f"demo_plugin/{TEST_PLUGIN}": real}}
    for suffix in ("a", "b"):
        package = f"shared_{suffix}"
        shared = elf_files.plugin_shared.read_bytes()
        wheels[f"shared-{suffix}"] = {f"{package}/__init__.py": b"", f"{package}/libshared_plugin.so": shared}
    return {
        name: migrate(write_wheel(out / "legacy", name, "1.0", files), out / "signed", venv.key,
                      "--capture-plugins").signed()
        for name, files in wheels.items()
    }


def test_real_plugin_handed_over_with_extend_with(
    venv: Venv, plugin_wheels: dict[str, Path], migrated: Path, tmp_path: Path
) -> None:
    baseline = venv.json(OBSERVE)  # Triton alone does not load its own test plugin
    assert baseline["plugins"] == [] and baseline["add_plugin"] is False and baseline["mapped"] == []

    pip_install(venv.python, plugin_wheels["demo-plugin"], tmp_path)
    installed = str(tmp_path / "demo_plugin" / TEST_PLUGIN)
    trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub)}
    for policy in ("strict", "warn"):
        result = venv.json(OBSERVE, tmp_path, migrated, TRITON_BACKEND_POLICY=policy, **trusted)
        row = _plugin(result, "demo-plugin")
        assert (row["trust"], row["state"], row["handed_over"]) == ("verified", "loaded", HANDED), row
        assert row["file"] == installed and row["api"] == "v2" and row["reason"] is None
        # Triton knows the pass now, and runs it: the test plugin renames every function
        assert result["add_plugin"] is True and result["mapped"] == [installed]
        assert "tt.func public @foo()" in result["module"] and "@kernel" not in result["module"], result["module"]
        assert result["paths"] is None  # 3.9 has extend_with: the environment is left alone

    # strict, signer not trusted: excluded, and never loaded into the process
    core_key = tmp_path / "core.pem"  # the core signed by a key of its own, the only one trusted
    assert run_cli("keygen", "-o", str(core_key)).returncode == 0
    core = cosigned_site(migrated, tmp_path / "core", [core_key])
    core_only = {"TRITON_BACKEND_TRUSTED_KEYS": str(core_key.with_suffix(".pub"))}
    refused = venv.json(OBSERVE, tmp_path, core, TRITON_BACKEND_POLICY="strict", **core_only)
    row = _plugin(refused, "demo-plugin")
    assert (row["trust"], row["state"], row["handed_over"]) == ("unverified", "excluded", "")
    assert row["reason"]["code"] == "policy.not-verified"
    assert refused["mapped"] == [] and refused["add_plugin"] is False


def test_plugin_built_for_another_triton_is_refused_before_dlopen(
    venv: Venv, elf_files: ElfFixtures, tmp_path: Path
) -> None:
    """Built for Triton 3.8.0: Triton's extend_with would refuse it only after dlopen. Its
    tritonGetPluginInfo, captured when it was migrated, says so, and it is refused unloaded."""
    data = elf_files.plugin_shared.read_bytes().replace(b"3.9.0\0", b"3.8.0\0")
    assert data != elf_files.plugin_shared.read_bytes()
    legacy = write_wheel(tmp_path / "legacy", "old-plugin", "1.0", {"old_plugin/__init__.py": b"",
                                                                     "old_plugin/libold.so": data})
    signed = migrate(legacy, tmp_path / "signed", venv.key, "--capture-plugins").signed()
    pip_install(venv.python, signed, tmp_path / "site")
    result = venv.json(OBSERVE, tmp_path / "site", TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    row = _plugin(result, "old-plugin")
    assert (row["trust"], row["state"], row["handed_over"]) == ("rejected", "excluded", "")
    assert row["reason"]["code"] == "verify.plugin-triton" and "built for Triton 3.8.0" in row["reason"]["message"]
    assert result["mapped"] == []


def test_plugins_exporting_one_strong_symbol(
    venv: Venv, plugin_wheels: dict[str, Path], migrated: Path, tmp_path: Path
) -> None:
    sites = {name: tmp_path / name for name in ("shared-a", "shared-b")}
    for name, site in sites.items():
        pip_install(venv.python, plugin_wheels[name], site)
    trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(venv.pub), "TRITON_BACKEND_POLICY": "strict"}
    # two verified distributions, neither the core: neither is loaded, in either sys.path order
    # (a strong symbol cannot be pinned: the message says to uninstall one)
    for first, second in (("shared-a", "shared-b"), ("shared-b", "shared-a")):
        result = venv.json(OBSERVE, sites[first], sites[second], migrated, **trusted)
        for name in (first, second):
            row = _plugin(result, name)
            assert (row["trust"], row["state"], row["handed_over"]) == ("verified", "excluded", ""), row
            assert row["reason"]["code"] == "conflict.symbol"
            assert "'demo_shared_helper'" in row["reason"]["message"]
            assert "uninstall the one you do not want" in row["reason"]["message"]
        assert result["mapped"] == []  # neither reached dlopen
    # one of them alone loads
    result = venv.json(OBSERVE, sites["shared-a"], migrated, **trusted)
    row = _plugin(result, "shared-a")
    assert (row["state"], row["handed_over"]) == ("loaded", HANDED)
    assert result["mapped"] == [row["file"]]


def test_plugin_waits_for_libtriton(venv: Venv, plugin_wheels: dict[str, Path], tmp_path: Path) -> None:
    """The registry runs before libtriton is imported (doctor, or a program that asks first):
    on Triton 3.9 the plugin waits and is handed over with extend_with once libtriton loads;
    TRITON_PLUGIN_PATHS, which this wheel does not read at import, stays unset."""
    pip_install(venv.python, plugin_wheels["demo-plugin"], tmp_path)
    code = """
import json, os, sys
from triton_backend_runtime.loading import registry
from triton_backend_runtime.triton.integration import admit
admit(registry.get(), lambda name, package: None)  # decided and acted on, as Triton's import does
def row():
    return [p for p in registry.get().report().to_dict()["plugins"] if p["distribution"] == "demo-plugin"][0]
before = row(), "triton._C.libtriton" in sys.modules, os.environ.get("TRITON_PLUGIN_PATHS")
import triton._C.libtriton as lt
print(json.dumps({"before": before, "after": row(), "add_plugin": hasattr(lt.passes.plugin, "add_plugin")}))
"""
    result = venv.json(code, tmp_path, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    before, imported, paths = result["before"]
    assert (before["state"], imported, paths) == ("pending", False, None)
    assert before["handed_over"] == "extend_with, when libtriton is imported"
    assert (result["after"]["state"], result["after"]["handed_over"]) == ("loaded", HANDED)
    assert result["add_plugin"] is True


def test_doctor_shows_handed_over_plugin(venv: Venv, plugin_wheels: dict[str, Path], tmp_path: Path) -> None:
    pip_install(venv.python, plugin_wheels["demo-plugin"], tmp_path)
    done = venv.cli("list", "--json", paths=(tmp_path,), TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    doc = json.loads(done.stdout)
    (row,) = [p for p in doc["plugins"] if p["distribution"] == "demo-plugin"]
    assert (row["state"], row["handed_over"]) == ("loaded", HANDED)


def test_plugin_for_another_triton_never_reaches_dlopen(venv: Venv, migrated: Path, tmp_path: Path) -> None:
    """The real triton-utlx 3.8.0.post16 (Requires-Dist: triton~=3.8.0, a v2 plugin linked
    against libtriton.so), migrated and signed, beside the installed Triton 3.9.0: its Triton
    requirement is checked from the manifest, before anything is loaded."""
    from _wheels import fetch_wheel

    signed = migrate(fetch_wheel("triton-utlx==3.8.0.post16"), tmp_path / "signed", venv.key,
                     "--capture-plugins").signed()
    pip_install(venv.python, signed, tmp_path / "site")
    for policy in ("warn", "strict"):
        result = venv.json(OBSERVE, tmp_path / "site", migrated, TRITON_BACKEND_POLICY=policy,
                           TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
        row = _plugin(result, "triton-utlx")
        assert (row["trust"], row["state"], row["handed_over"]) == ("rejected", "excluded", ""), row
        assert row["reason"]["code"] == "verify.triton", row["reason"]
        assert row["reason"]["message"] == "requires Triton ~=3.8.0; installed is 3.9.0"
        assert result["mapped"] == []  # libutlx.so was never mapped into the process
