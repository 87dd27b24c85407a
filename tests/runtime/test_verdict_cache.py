"""The verdict cache: a warm run only stats, a repair or an added module is noticed, an unsafe,
malformed, oversized or foreign cache is a note and a cold verification, never an error or a
wrong verdict; entries of any shape are a miss; a distribution verified again takes its file
hashes from the cache; cold verdicts agree with ``verify_distribution``. Dist-info
trees in ``tmp_path`` with real signed manifests (:mod:`helpers.disttree`)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import disttree
from helpers.csrc import ElfFixtures
from helpers.disttree import Dist, TrustEnv, code_of, codes, entry, make_key, write_dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.site.installed import HashCache
from triton_backend_runtime.trust.keys import load_trust_store
from triton_backend_runtime.verification.distribution import Context, verify_distribution
from triton_backend_runtime.verification.verdict import Verdict

#: Trees found by the finders; what a test imports from its tree is forgotten after it.
_no_triton_imported = disttree.no_triton_imported


# -- format 3: hostile shapes are a miss ---------------------------------------------------


@pytest.fixture()
def warm(env: TrustEnv, site: Path) -> tuple[TrustEnv, Path, dict[str, object]]:
    write_dist(site).sign(env.key)
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    doc = json.loads(env.cache_file().read_bytes())
    assert doc["format"] == 3
    return env, site, doc


identity_text = st.one_of(
    st.text(max_size=40), st.text(alphabet="0123456789:", max_size=80),
    st.builds(lambda n: "9" * n, st.integers(20, 5000)), st.builds(lambda n: ":" * n, st.integers(0, 10)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_format_3_identities_and_hashes_of_any_shape_are_a_miss(warm: tuple[TrustEnv, Path, dict[str, object]],
                                                                data: st.DataObject) -> None:
    """Identity strings with non-digit parts, huge numbers, a list of another length than the
    verdict's files, hash strings of any text: never a crash, never a dropped backend."""
    env, site, doc = warm
    doc = json.loads(json.dumps(doc))
    (item,) = doc["verdicts"].values()
    identities = item["identities"]
    how = data.draw(st.sampled_from(["edit", "longer", "shorter", "hashes"]))
    if how == "edit":
        identities[data.draw(st.integers(0, len(identities) - 1))] = data.draw(identity_text)
    elif how == "longer":
        identities.extend(data.draw(st.lists(st.none() | identity_text, min_size=1, max_size=3)))
    elif how == "shorter":
        del identities[data.draw(st.integers(0, len(identities) - 1))]
    else:
        hashes = doc["hashes"]
        for path in list(hashes)[: data.draw(st.integers(1, 3))]:
            hashes[path] = data.draw(identity_text)
    env.cache_file().write_text(json.dumps(doc))
    os.chmod(env.cache_file(), 0o600)
    reg = env.registry(site, policy="strict")
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)
    assert reg.problems == [] and all(n.code.startswith("cache.") for n in reg.notes)


# -- file hashes ---------------------------------------------------------------------------


def test_a_verdict_verified_again_takes_file_hashes_from_the_cache(env: TrustEnv, site: Path) -> None:
    """A new file in a walked directory invalidates the verdict, not the hashes of the files
    that did not change: nothing is hashed again, before or after the file goes."""
    dist = write_dist(site)
    dist.sign(env.key)
    assert env.registry(site, policy="strict").hashed_bytes > 0
    stray = dist.file("demo_backend/stray.py")
    stray.write_text("")
    again = env.registry(site, policy="strict")
    assert code_of(entry(again, "demo")) == "verify.unlisted"
    assert again.hashed_bytes == 0
    stray.unlink()
    healed = env.registry(site, policy="strict")
    assert entry(healed, "demo").state == "loaded" and healed.hashed_bytes == 0
    compiler = dist.file("demo_backend/compiler.py")
    compiler.write_bytes(compiler.read_bytes().replace(b"'demo'", b"'dem0'"))  # same size, other bytes
    edited = env.registry(site, policy="strict")
    assert code_of(entry(edited, "demo")) == "verify.sha256"
    assert edited.hashed_bytes == compiler.stat().st_size  # that file only


# -- warm runs, repairs, unsafe and malformed cache files ----------------------------------


def _installed_bytes(dist: Dist) -> int:
    return sum(dist.file(p).stat().st_size for p in dist.wheel_paths())


def test_cache_warm_run_only_stats(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    cold = env.registry(site, policy="strict")
    assert cold.hashed_bytes == _installed_bytes(dist) > 0
    assert stat.S_IMODE(env.cache_file().stat().st_mode) & 0o077 == 0
    warm = env.registry(site, policy="strict")
    assert warm.hashed_bytes == 0 and entry(warm, "demo").state == "loaded"
    assert warm.verdicts == cold.verdicts and warm.notes == []


def test_cache_notices_a_repair_byte_for_byte(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    path = dist.file("demo_backend/compiler.py")
    good = path.read_bytes()
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    path.write_bytes(good.replace(b"class", b"klass"))
    tampered = entry(env.registry(site, policy="strict"), "demo")
    assert tampered.reason is not None and tampered.reason.code == "verify.sha256"
    assert entry(env.registry(site, policy="strict"), "demo").reason.code == "verify.sha256"  # type: ignore[union-attr]
    path.write_bytes(good)  # restored; the cache file is left alone
    repaired = env.registry(site, policy="strict")
    assert (entry(repaired, "demo").trust, entry(repaired, "demo").state) == ("verified", "loaded")


def test_cache_notices_an_added_module(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    (dist.file("demo_backend/sub")).mkdir()
    dist.file("demo_backend/sub/__init__.py").write_text("")
    assert entry(env.registry(site, policy="strict"), "demo").reason.code == "verify.unlisted"  # type: ignore[union-attr]
    dist.file("demo_backend/sub/__init__.py").unlink()
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    dist.file("demo_backend/sub/late.py").write_text("")  # in a directory the last run walked
    assert entry(env.registry(site, policy="strict"), "demo").reason.code == "verify.unlisted"  # type: ignore[union-attr]


def test_cache_rehash_ignores_and_rewrites(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    env.registry(site, policy="strict")
    doc = json.loads(env.cache_file().read_bytes())
    (cached,) = doc["verdicts"].values()
    cached["verdict"]["status"] = "rejected"  # a cache that lies (it is trusted: only we can write it)
    env.cache_file().write_text(json.dumps(doc))
    assert entry(env.registry(site, policy="strict"), "demo").trust == "rejected"
    before = env.cache_file().stat().st_ino
    rehashed = env.registry(site, policy="strict", rehash=True)
    assert entry(rehashed, "demo").state == "loaded" and rehashed.hashed_bytes == _installed_bytes(dist)
    assert env.cache_file().stat().st_ino != before
    (again,) = json.loads(env.cache_file().read_bytes())["verdicts"].values()
    assert again["verdict"]["status"] == "verified"
    assert env.registry(site, policy="strict").hashed_bytes == 0


def _warm(env: TrustEnv, site: Path) -> Dist:
    dist = write_dist(site)
    dist.sign(env.key)
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    return dist


def test_cache_unsafe_directory(env: TrustEnv, site: Path) -> None:
    dist = _warm(env, site)
    os.chmod(env.cache, 0o777)
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == ["cache.unsafe"] and reg.notes[0].path == str(env.cache)
    assert reg.report().to_dict()["notes"][0]["code"] == "cache.unsafe"
    assert entry(reg, "demo").state == "loaded" and reg.hashed_bytes == _installed_bytes(dist)
    assert reg.problems == []


def test_cache_unsafe_file(env: TrustEnv, site: Path) -> None:
    dist = _warm(env, site)
    os.chmod(env.cache_file(), 0o666)
    before = env.cache_file().read_bytes()
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == ["cache.unsafe"] and reg.notes[0].path == str(env.cache_file())
    assert entry(reg, "demo").state == "loaded" and reg.hashed_bytes == _installed_bytes(dist)
    assert env.cache_file().read_bytes() == before  # refused, so never written either


@pytest.mark.parametrize("edit", [
    lambda e: e.update(identities=5),
    lambda e: e["verdict"].update(backends=7),
    lambda e: e.pop("context"),
    lambda e: e["verdict"].pop("status"),
    lambda e: e["verdict"].update(status="trusted"),
    lambda e: e["identities"].append(["x", "y"]),
], ids=["identities-int", "backends-int", "no-context", "no-status", "unknown-status", "bad-identity"])
def test_cache_malformed_entry_is_verified_again(env: TrustEnv, site: Path,
                                                  edit: Callable[[dict[str, Any]], Any]) -> None:
    dist = _warm(env, site)
    doc = json.loads(env.cache_file().read_bytes())
    edit(doc["verdicts"][str(dist.dist_info)])
    env.cache_file().write_text(json.dumps(doc))
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == ["cache.malformed"]
    assert reg.notes[0].path == f"{env.cache_file()}: {dist.dist_info}"
    assert (entry(reg, "demo").trust, entry(reg, "demo").state) == ("verified", "loaded")
    healed = env.registry(site, policy="strict")  # the entry was written again
    assert healed.notes == [] and healed.hashed_bytes == 0


@pytest.mark.parametrize("key", ["backends", "plugins", "signers"])
def test_cache_entry_missing_keys_is_verified_again(env: TrustEnv, site: Path, elf_files: ElfFixtures,
                                                    key: str) -> None:
    dist = write_dist(site, files={"demo_backend/libshared_plugin.so": elf_files.plugin_shared})
    dist.sign(env.key)
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    doc = json.loads(env.cache_file().read_bytes())
    doc["verdicts"][str(dist.dist_info)]["verdict"].pop(key)
    env.cache_file().write_text(json.dumps(doc))
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == ["cache.malformed"]
    assert entry(reg, "demo").state == "loaded" and entry(reg, "demo").signers
    assert [p.state for p in reg.plugins] == ["pending"]  # no Triton: TRITON_PLUGIN_PATHS, awaiting libtriton


@pytest.mark.parametrize(("content", "code"), [
    (b"\x00garbage{", "cache.json"),
    (b"[" * 100_000 + b"]" * 100_000, "cache.json"),  # deeper than the parser recurses
    (b'{"format": 2, "verdicts": {}, "hashes": {}}', "cache.format"),
    (b"[1, 2]", "cache.format"),
    (b'{"format": 3, "verdicts": 5, "hashes": {}}', "cache.malformed"),
    (b'{"format": 3}', "cache.malformed"),
], ids=["garbage", "deep", "old-format", "a-list", "verdicts-int", "missing-keys"])
def test_cache_file_unusable_is_ignored_and_rebuilt(env: TrustEnv, site: Path, content: bytes, code: str) -> None:
    dist = _warm(env, site)
    env.cache_file().write_bytes(content)
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == [code] and reg.notes[0].path == str(env.cache_file())
    assert entry(reg, "demo").state == "loaded" and reg.hashed_bytes == _installed_bytes(dist)
    rebuilt = env.registry(site, policy="strict")
    assert rebuilt.notes == [] and rebuilt.hashed_bytes == 0


def test_cache_too_large(env: TrustEnv, site: Path) -> None:
    from triton_backend_runtime.verification.cache import MAX_CACHE_BYTES

    _warm(env, site)
    os.truncate(env.cache_file(), MAX_CACHE_BYTES + 1)
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == ["cache.too-large"] and entry(reg, "demo").state == "loaded"


def test_cache_unreadable_symlink(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    _warm(env, site)
    env.cache_file().rename(tmp_path / "elsewhere.json")
    os.symlink(tmp_path / "elsewhere.json", env.cache_file())
    reg = env.registry(site, policy="strict")
    assert codes(reg.notes) == ["cache.unreadable"] and entry(reg, "demo").state == "loaded"
    assert not env.cache_file().is_symlink()  # replaced by a file of our own


def test_cache_of_another_trust_store_is_not_reused(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    _warm(env, site)
    other = make_key(tmp_path / "other", "other")
    (env.trust / "vendor.pub").write_bytes(other.pub.read_bytes())  # our key is no longer trusted
    reg = env.registry(site, policy="strict")
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state) == ("unverified", "excluded")


def test_cold_verdicts_agree_with_verify_distribution(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    reg = env.registry(site, policy="strict")
    direct: Verdict = verify_distribution(dist.distribution(), Context(load_trust_store()[0], None, None, HashCache()))
    assert reg.verdicts[str(dist.dist_info)] == direct
