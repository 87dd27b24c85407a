"""The verdict cache as an attacker finds it: entries of any shape are a miss, never an error
or a verdict; a distribution verified again takes its file hashes from the cache. Dist-info
trees in ``tmp_path`` with real signed manifests (:mod:`helpers.disttree`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import disttree
from helpers.disttree import TrustEnv, code_of, entry, write_dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
