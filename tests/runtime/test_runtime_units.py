"""Runtime pieces that need no Triton: discovery parsing, .dynsym lookups, trust locations,
the cache-key hook, the policy variable, the hash cache."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures, gcc
from triton_backend_runtime.base.errors import VerifyError
from triton_backend_runtime.loading import policy
from triton_backend_runtime.loading.registry import PluginEntry
from triton_backend_runtime.site import discovery
from triton_backend_runtime.site.installed import HashCache
from triton_backend_runtime.triton import compilekey, plugins
from triton_backend_runtime.trust.keys import load_trust_store
from triton_backend_runtime.trust.paths import trust_sources
from triton_backend_runtime.verification import dynsym
from triton_backend_runtime.verification.verdict import PluginClaim, Verdict

from backend_packager.manifest import signing


def test_parse_entry_points() -> None:
    text = "# c\n[console_scripts]\nx = a:b\n\n[triton.backends]\nnvidia = triton.backends.nvidia\n amd=pkg.amd \n"
    assert discovery.parse_entry_points(text) == {
        "console_scripts": {"x": "a:b"}, "triton.backends": {"nvidia": "triton.backends.nvidia", "amd": "pkg.amd"}
    }


def test_discovery_first_distribution_of_a_name_wins(tmp_path: Path) -> None:
    for site, version in (("a", "2.0"), ("b", "1.0")):
        info = tmp_path / site / f"demo_backend-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: demo-backend\nVersion: {version}\n\n")
        (info / "entry_points.txt").write_text(f"[triton.backends]\ndemo = demo_{site}\n")
    found = discovery.discover([str(tmp_path / "a"), str(tmp_path / "b")], in_tree=False)
    assert [(c.name, c.package, c.dist.version if c.dist else None) for c in found.candidates] == [
        ("demo", "demo_a", "2.0")
    ]


def test_dynsym_lookup_matches_nm(elf_files: ElfFixtures, tmp_path: Path) -> None:
    nm = subprocess.run(["nm", "-D", "--defined-only", str(elf_files.exports)], capture_output=True, text=True)
    defined = {line.split()[-1] for line in nm.stdout.splitlines() if line.split()[-2] in "TDBVWRiu"}
    assert "exported_function" in defined
    probe = sorted(defined) + ["hidden_helper", "sqrt", "no_such_symbol"]
    assert dynsym.missing_exports(str(elf_files.exports), probe) == ["hidden_helper", "no_such_symbol", "sqrt"]
    # without a GNU hash table the whole .dynsym is read: same answer
    plain = tmp_path / "libplain.so"
    src = Path(__file__).resolve().parents[1] / "csrc" / "exports.c"
    gcc(plain, str(src), "-Wl,--hash-style=sysv", "-lm", "-lpthread")
    assert dynsym.missing_exports(str(plain), probe) == ["hidden_helper", "no_such_symbol", "sqrt"]
    with pytest.raises(VerifyError, match="not an ELF64"):
        dynsym.missing_exports(str(elf_files.not_elf), ["x"])


def test_trust_store_from_every_location(tmp_path: Path) -> None:
    user = tmp_path / "config" / "triton-backend" / "trusted"
    user.mkdir(parents=True)
    a = signing.generate(tmp_path / "a.pem", user / "a.pub", "vendor a", None)
    b = signing.generate(tmp_path / "b.pem", tmp_path / "b.pub", "vendor b", None)
    (user / "revoked").write_text(f"# compromised\n{b.keyid}\n")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "threshold").write_text("2\n")
    (extra / "broken.pub").write_text("ed25519 not-base64 abc\n")
    keys = f"{extra}{os.pathsep}{tmp_path / 'b.pub'}"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "TRITON_BACKEND_TRUSTED_KEYS": keys}
    store, problems = load_trust_store(env)
    assert set(store.keys) == {a.keyid, b.keyid} and store.revoked == {b.keyid} and store.threshold == 2
    assert [p.code for p in problems] == ["trust.key-format"] and problems[0].path.endswith("broken.pub:1")
    assert str(tmp_path / "b.pub") in trust_sources(env)


def test_stages_hook_chains_and_changes_with_manifests() -> None:
    class Runtime:
        add_stages_inspection_hook = None

    class Knobs:
        runtime = Runtime()

    calls = []

    def previous(*args: object) -> tuple[str, str] | None:
        calls.append(args)
        return ("user-key", "user-hash") if not args else None

    Knobs.runtime.add_stages_inspection_hook = previous
    one = compilekey.manifest_digest([("demo", "1.0", "aa"), ("triton", "3.9.0", "bb")])
    assert one == compilekey.manifest_digest([("triton", "3.9.0", "bb"), ("demo", "1.0", "aa")])
    assert one != compilekey.manifest_digest([("demo", "1.1", "cc"), ("triton", "3.9.0", "bb")])
    hook = compilekey.install(Knobs, one)
    key, value = hook()
    assert key.startswith("user-key") and one in key and value not in ("user-hash", one)
    hook("backend", {}, None, "lang", 90)
    assert calls[-1] == ("backend", {}, None, "lang", 90)
    assert compilekey.install(Knobs, "other") is hook and hook()[0].endswith("other")


def test_policy_variable() -> None:
    assert policy.current({}) == ("warn", None)
    assert policy.current({"TRITON_BACKEND_POLICY": "STRICT"}) == ("strict", None)
    value, complaint = policy.current({"TRITON_BACKEND_POLICY": "paranoid"})
    assert value == "strict" and complaint and "paranoid" in complaint  # a typo fails closed


def test_hash_cache_rehashes_a_changed_file(tmp_path: Path) -> None:
    file = tmp_path / "lib.so"
    file.write_bytes(b"a" * 1000)
    cache = HashCache()
    first = cache.sha256(str(file), file.stat())
    assert cache.sha256(str(file), file.stat()) == first and cache.hashed_bytes == 1000
    file.write_bytes(b"b" * 1000)
    assert cache.sha256(str(file), file.stat()) != first and cache.hashed_bytes == 2000
    forced = HashCache(cache.entries, rehash=True)
    forced.sha256(str(file), file.stat())
    assert forced.hashed_bytes == 1000


def _plugin_entry(dist_name: str, file: str) -> PluginEntry:
    dist = discovery.Distribution(dist_name, "1.0", f"/site/{dist_name}-1.0.dist-info", "/site")
    return PluginEntry(dist, PluginClaim("pkg/lib.so", file, "v2", None), Verdict("verified"), "verified")


def test_plugin_hand_over_decision_without_extend_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton 3.9.0 always has libtriton loaded, with extend_with, before the registry runs
    (tests/real/test_runtime_plugins.py). The other branches need an older Triton, whose libtriton
    is stood in for by a real module object without extend_with (as 3.2-3.8 have)."""
    assert [plugins.has_extend_with(v) for v in ("3.9.0", "3.10.0rc1", "4.0", "3.8.1", "3.2.0", "", None, "x")] == [
        True, True, True, False, False, False, False, False
    ]
    # older Triton, libtriton not imported yet: TRITON_PLUGIN_PATHS, appended once, others kept;
    # pending until libtriton is imported (tests/runtime/test_plugin_mapped.py)
    monkeypatch.delitem(sys.modules, plugins.LIBTRITON, raising=False)
    monkeypatch.setenv(plugins.PLUGIN_PATHS_ENV, "/opt/other/libp.so")
    first, again, bundled = (
        _plugin_entry("demo-plugin", "/site/a/liba.so"), _plugin_entry("demo-plugin", "/site/a/liba.so"),
        _plugin_entry("triton", "/site/triton/plugins/libt.so"),
    )
    plugins.hand_over([first, again, bundled], "3.3.1", bundled.dist)  # the core: by its file, not its name
    assert os.environ[plugins.PLUGIN_PATHS_ENV] == "/opt/other/libp.so:/site/a/liba.so"
    assert (first.state, first.handed_over) == ("pending", plugins.PATHS_PENDING)
    assert bundled.state == "discovered" and bundled.handed_over.startswith("not loaded")
    # older Triton, libtriton already imported: too late for the variable; failed, saying why
    old = types.ModuleType(plugins.LIBTRITON)
    old.passes = types.ModuleType("passes")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, plugins.LIBTRITON, old)
    late = _plugin_entry("demo-plugin", "/site/b/libb.so")
    plugins.hand_over([late], "3.3.1")
    assert late.state == "failed" and late.reason is not None
    assert late.reason.code == "load.plugin-api" and "no extend_with" in late.reason.message
    assert "/site/b/libb.so" not in os.environ[plugins.PLUGIN_PATHS_ENV]
