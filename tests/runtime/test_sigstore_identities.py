"""Trusting an identity, not a key: the trust store's identities, their patterns, and Sigstore
bundles verified offline at load time (issue 21 item 2).

Bundles are real: sigstore-python's own test asset (``tests/data/sigstore/``, made by Sigstore's
staging instance, checked against the staging root sigstore-python ships) and bundles of the local
Sigstore (:mod:`helpers.sigstoreca`) over real signed manifests of real dist-info trees. The
verifier is sigstore-python's, never a stand-in.
"""

from __future__ import annotations

import base64
import importlib.resources
import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import disttree
from helpers.disttree import Dist, TrustEnv, write_dist
from helpers.sigstoreca import DEFAULT_SIGNED_AT, TEST_IDENTITY, TEST_ISSUER, LocalSigstore, Tamper, make_local_sigstore
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_backend_runtime.base.layout import SIGSTORE_BUNDLE_FILENAME
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.trust import statement
from triton_backend_runtime.trust.identities import ALLOWED_WILDCARD, identity_id, matches, parse_identity
from triton_backend_runtime.trust.keys import load_trust_store
from triton_backend_runtime.trust.sigstorebundle import (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_VALUES,
    SigstoreError,
    verify_bundle,
)

_no_triton_imported = disttree.no_triton_imported

DATA = Path(__file__).resolve().parents[1] / "data" / "sigstore"
ASSET = DATA / "a.dsse.staging-rekor-v2.txt.sigstore.json"
ASSET_ISSUER = "https://token.actions.githubusercontent.com"
ASSET_SAN = ("https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/"
             "extremely-dangerous-oidc-beacon.yml@refs/heads/main")
REPO = Path(__file__).resolve().parents[2]


def staging_root() -> Path:
    """The staging trusted root sigstore-python ships: the root the asset was made for."""
    shipped = importlib.resources.files("sigstore._store").joinpath("https%3A%2F%2Ftuf-repo-cdn.sigstage.dev",
                                                                    "trusted_root.json")
    return Path(str(shipped))


# -- patterns ---------------------------------------------------------------------------------

WORKFLOW = "https://github.com/vendor/backend/.github/workflows/release.yml"


@pytest.mark.parametrize(("pattern", "san", "expected"), [
    (f"{WORKFLOW}@refs/tags/v1.0", f"{WORKFLOW}@refs/tags/v1.0", True),
    (f"{WORKFLOW}@refs/tags/v1.0", f"{WORKFLOW}@refs/tags/v1.0.1", False),  # exact: anchored at the end
    (f"{WORKFLOW}@refs/tags/*", f"{WORKFLOW}@refs/tags/v2.3.4", True),
    (f"{WORKFLOW}@refs/tags/*", f"{WORKFLOW}@refs/tags/", False),  # '*' is one character or more
    (f"{WORKFLOW}@refs/tags/*", f"{WORKFLOW}@refs/tags/release/1", False),  # never past a '/'
    (f"{WORKFLOW}@refs/tags/*", f"{WORKFLOW}@refs/heads/main", False),
    (f"{WORKFLOW}@refs/tags/v*", f"{WORKFLOW}@refs/tags/v1", True),
    (f"{WORKFLOW}@refs/tags/v*", f"{WORKFLOW}@refs/tags/w1", False),
    ("https://github.com/vendor/*", "https://github.com/vendor/backend", True),
    ("https://github.com/vendor/*", f"{WORKFLOW}@refs/tags/v1", False),  # the last segment only
    ("https://github.com/vendor/*", "https://github.com/vendorx/backend", False),
    ("release@example.com", "release@example.com", True),
    ("release@example.com", "Release@example.com", False),  # case-sensitive
])
def test_pattern_rules(pattern: str, san: str, expected: bool) -> None:
    parse_identity(TEST_ISSUER, pattern, "t")  # every pattern here is one a platform may write
    assert matches(pattern, san) is expected


@pytest.mark.parametrize("pattern", [
    "https://github.com/*",  # a whole host
    "https://*",
    f"{WORKFLOW}@refs/*/v1",  # '*' not last
    f"{WORKFLOW}@refs/tags/**",  # two
    "*@example.com",
    "http://github.com/vendor/*",  # https only with a '*'
    "a b",
    "https://host.test/a/b#frag",  # '#' would start the line's comment in the identities file
    "",
])
def test_patterns_that_are_refused(pattern: str) -> None:
    with pytest.raises(Exception) as caught:
        parse_identity(TEST_ISSUER, pattern, "t")
    assert getattr(caught.value, "code", None) == "trust.identity-format"


def test_an_issuer_is_a_url() -> None:
    with pytest.raises(Exception) as caught:
        parse_identity("token.actions.githubusercontent.com", WORKFLOW, "t")
    assert getattr(caught.value, "code", None) == "trust.identity-format"


_SEGMENT = st.text(alphabet="abcXYZ019._+-/@:%?#~", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(prefix=_SEGMENT, tail=_SEGMENT)
def test_a_wildcard_admits_exactly_one_segment_tail(prefix: str, tail: str) -> None:
    """Anchored, and never an over-match: ``P*`` admits ``S`` iff ``S`` is ``P`` followed by one
    or more characters of the wildcard's alphabet (no separator), whatever P and S hold."""
    pattern = f"https://host.test/org/{prefix}*"
    san = f"https://host.test/org/{prefix}{tail}"
    admitted = matches(pattern, san)
    assert admitted == (ALLOWED_WILDCARD.fullmatch(tail) is not None)
    if admitted:
        assert not set(tail) & set("/@:%?#~")


@settings(max_examples=300, deadline=None)
@given(pattern=st.text(min_size=1, max_size=30).filter(lambda p: "*" not in p), san=st.text(max_size=30))
def test_an_exact_identity_matches_itself_only(pattern: str, san: str) -> None:
    assert matches(pattern, san) is (san == pattern)
    assert matches(pattern, pattern)


@settings(max_examples=200, deadline=None)
@given(other=st.text(min_size=1, max_size=20))
def test_a_wildcard_never_matches_a_san_that_does_not_start_with_its_prefix(other: str) -> None:
    pattern = f"{WORKFLOW}@refs/tags/*"
    san = other + f"{WORKFLOW}@refs/tags/v1"  # the prefix inside, not at the start
    assert not matches(pattern, san)


# -- the trust command --------------------------------------------------------------------------


def trust_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(home / "config"), "TRITON_BACKEND_TRUSTED_KEYS": ""}
    return subprocess.run([sys.executable, "-m", "triton_backend_runtime", "trust", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def listed(home: Path) -> dict[str, Any]:
    done = trust_cli(home, "list", "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_trust_identity_round_trip(tmp_path: Path) -> None:
    pattern = f"{WORKFLOW}@refs/tags/*"
    wanted = identity_id(TEST_ISSUER, pattern)
    done = trust_cli(tmp_path, "add-identity", "--issuer", TEST_ISSUER, "--identity", pattern,
                     "--scope", "demo-backend,backend:demo", "--comment", "vendor CI", "--user")
    assert done.returncode == 0, done.stderr
    assert wanted[:16] in done.stdout
    again = trust_cli(tmp_path, "add-identity", "--issuer", TEST_ISSUER, "--identity", pattern, "--user")
    assert again.returncode == 0, again.stderr
    rows = listed(tmp_path)["identities"]
    assert [(r["id"], r["issuer"], r["identity"], r["scope"], r["revoked"]) for r in rows] == [
        (wanted, TEST_ISSUER, pattern, "demo-backend", False)]  # added twice, one line

    assert trust_cli(tmp_path, "revoke", wanted[:16], "--user").returncode == 0
    assert listed(tmp_path)["identities"][0]["revoked"] is True
    assert trust_cli(tmp_path, "unrevoke", wanted[:16], "--user").returncode == 0
    assert listed(tmp_path)["identities"][0]["revoked"] is False

    assert trust_cli(tmp_path, "remove-identity", wanted[:12], "--user").returncode == 0
    assert listed(tmp_path)["identities"] == []
    gone = trust_cli(tmp_path, "remove-identity", "--issuer", TEST_ISSUER, "--identity", pattern, "--user", "--json")
    assert gone.returncode == 1
    assert json.loads(gone.stdout)["error"]["code"] == "trust.no-such-identity"


def test_trust_identity_refuses_a_free_pattern(tmp_path: Path) -> None:
    done = trust_cli(tmp_path, "add-identity", "--issuer", TEST_ISSUER, "--identity", "https://github.com/*",
                     "--user", "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "input.identity"
    assert not (tmp_path / "config" / "triton-backend" / "trusted" / "identities").exists()


def test_trust_root_pins_a_copy_and_unpins(tmp_path: Path) -> None:
    done = trust_cli(tmp_path, "root", str(staging_root()), "--user")
    assert done.returncode == 0, done.stderr
    pinned = tmp_path / "config" / "triton-backend" / "trusted" / "sigstore-root.json"
    assert pinned.read_bytes() == staging_root().read_bytes()
    assert listed(tmp_path)["sigstore_roots"] == [str(pinned)]
    bad = tmp_path / "not-a-root.json"
    bad.write_text('{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}')
    refused = trust_cli(tmp_path, "root", str(bad), "--user", "--json")
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["error"]["code"] == "input.root"
    assert pinned.read_bytes() == staging_root().read_bytes()  # the pinned one is kept
    assert trust_cli(tmp_path, "root", "--remove", "--user").returncode == 0
    assert listed(tmp_path)["sigstore_roots"] == []


# -- a real bundle made by others ---------------------------------------------------------------


def asset_store(tmp_path: Path, pattern: str = ASSET_SAN, issuer: str = ASSET_ISSUER, root: Path | None = None,
                monkeypatch: pytest.MonkeyPatch | None = None) -> Any:
    trust = tmp_path / "trust"
    trust.mkdir(exist_ok=True)
    (trust / "identities").write_text(f"{issuer} {pattern}\n")
    if root is not None:
        shutil.copyfile(root, trust / "sigstore-root.json")
    assert monkeypatch is not None
    monkeypatch.setenv("TRITON_BACKEND_TRUSTED_KEYS", str(trust))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    store, problems = load_trust_store()
    assert problems == []
    return store


def asset_payload() -> bytes:
    return base64.b64decode(json.loads(ASSET.read_bytes())["dsseEnvelope"]["payload"])


def test_sigstore_pythons_staging_bundle_verifies_offline_against_its_root(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = asset_store(tmp_path, root=staging_root(), monkeypatch=monkeypatch)
    signer = verify_bundle(ASSET.read_bytes(), asset_payload(), "a", store, str(ASSET))
    assert (signer.issuer, signer.san, signer.id) == (ASSET_ISSUER, ASSET_SAN, identity_id(ASSET_ISSUER, ASSET_SAN))


@pytest.mark.parametrize(("pattern", "issuer", "code"), [
    (ASSET_SAN.replace("@refs/heads/main", "@refs/heads/*"), ASSET_ISSUER, None),
    (ASSET_SAN.replace("@refs/heads/main", "@refs/tags/*"), ASSET_ISSUER, "sigstore.identity"),
    (ASSET_SAN, "https://accounts.google.com", "sigstore.issuer"),
])
def test_the_asset_against_identities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str, issuer: str,
                                      code: str | None) -> None:
    store = asset_store(tmp_path, pattern, issuer, staging_root(), monkeypatch)
    try:
        verify_bundle(ASSET.read_bytes(), asset_payload(), "a", store, str(ASSET))
        found = None
    except SigstoreError as exc:
        found = exc.code
    assert found == code


def test_the_asset_needs_the_root_it_was_made_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a pinned root, sigstore-python's production root: the staging bundle's signed
    timestamp is by a TSA that root does not list, so there is no verified time."""
    store = asset_store(tmp_path, monkeypatch=monkeypatch)
    with pytest.raises(SigstoreError) as caught:
        verify_bundle(ASSET.read_bytes(), asset_payload(), "a", store, str(ASSET))
    assert caught.value.code == "sigstore.timestamp"


def test_the_asset_signs_its_own_statement_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = asset_store(tmp_path, root=staging_root(), monkeypatch=monkeypatch)
    with pytest.raises(SigstoreError) as caught:
        verify_bundle(ASSET.read_bytes(), asset_payload() + b" ", "a", store, str(ASSET))
    assert caught.value.code == "sigstore.statement"


@pytest.mark.parametrize(("data", "code"), [
    (b"[" * 100 + b"]" * 100, "sigstore.json"),
    (b" " * (MAX_BUNDLE_BYTES + 1), "sigstore.too-large"),
    (b'{"mediaType": 3}', "sigstore.bundle"),
    (b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "dsseEnvelope": {}}', "sigstore.bundle"),
])
def test_hostile_bundles_are_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, code: str) -> None:
    store = asset_store(tmp_path, root=staging_root(), monkeypatch=monkeypatch)
    with pytest.raises(SigstoreError) as caught:
        verify_bundle(data, asset_payload(), "a", store, "b")
    assert caught.value.code == code


def test_a_bundle_of_many_small_values_is_refused_before_sigstore_parses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Megabytes of tiny values cost sigstore's parser seconds and gigabytes: refused by their
    count (the reason names the budget), never handed to it; a real bundle is far below it."""
    doc = json.loads(ASSET.read_bytes())
    doc["padding"] = [0] * 200_000
    store = asset_store(tmp_path, root=staging_root(), monkeypatch=monkeypatch)
    with pytest.raises(SigstoreError) as caught:
        verify_bundle(json.dumps(doc).encode(), asset_payload(), "a", store, "b")
    assert caught.value.code == "sigstore.too-large" and "MAX_BUNDLE_VALUES" in caught.value.detail
    assert ASSET.read_bytes().count(b",") < MAX_BUNDLE_VALUES // 10


def test_a_pinned_root_that_is_not_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1", "tlogs": 7}')
    store = asset_store(tmp_path, root=junk, monkeypatch=monkeypatch)
    with pytest.raises(SigstoreError) as caught:
        verify_bundle(ASSET.read_bytes(), asset_payload(), "a", store, str(ASSET))
    assert caught.value.code == "sigstore.root"


# -- end to end: real dist-info trees, real manifests, bundles of a local Sigstore ----------------


@pytest.fixture
def local(tmp_path: Path) -> LocalSigstore:
    return make_local_sigstore(tmp_path / "sigstore")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: LocalSigstore) -> TrustEnv:
    """Only an identity trusted (no key), the local Sigstore's root pinned."""
    env = TrustEnv.make(tmp_path, monkeypatch)
    (env.trust / "vendor.pub").unlink()
    (env.trust / "identities").write_text(f"{TEST_ISSUER} {TEST_IDENTITY}\n")
    shutil.copyfile(local.trusted_root_path, env.trust / "sigstore-root.json")
    return env


def keyless_dist(site: Path, local: LocalSigstore, name: str = "demo-backend", *keys: disttree.Key,
                 **sign: Any) -> Dist:
    """A distribution whose manifest (hash-only, or signed by ``keys``) is signed keylessly too."""
    dist = write_dist(site, name, backends={name.split("-")[0]: name.replace("-", "_")})
    manifest = dist.describe()
    dist.seal(manifest, *keys)
    sign.setdefault("identity", TEST_IDENTITY)
    sign.setdefault("issuer", TEST_ISSUER)
    bundle = local.sign_dsse(statement.statement_bytes(manifest), **sign)
    (dist.dist_info / SIGSTORE_BUNDLE_FILENAME).write_bytes(bundle)
    return dist


def test_an_identity_alone_verifies_and_loads_under_strict(tmp_path: Path, env: TrustEnv,
                                                          local: LocalSigstore) -> None:
    keyless_dist(tmp_path / "site", local)
    reg = env.registry(tmp_path / "site", policy="strict")
    entry = disttree.entry(reg, "demo")
    assert (entry.trust, entry.state, disttree.code_of(entry)) == ("verified", "loaded", None)
    assert entry.verdict is not None and entry.verdict.keyless is not None
    assert (entry.verdict.keyless.san, entry.verdict.keyless.issuer) == (TEST_IDENTITY, TEST_ISSUER)
    row = next(r for r in reg.report().backends if r.name == "demo").to_dict()
    assert row["identity"]["san"] == TEST_IDENTITY
    assert row["identity"]["issuer"] == TEST_ISSUER
    assert any("sigstore" in s for s in row["signers"])


def _tampered(tmp_path: Path, local: LocalSigstore, case: str) -> Dist:
    site = tmp_path / "site"
    if case == "wrong-identity":
        return keyless_dist(site, local, identity=TEST_IDENTITY.replace("v1.0.0", "v6.6.6"))
    if case == "wrong-issuer":
        return keyless_dist(site, local, issuer="https://accounts.google.com")
    if case == "expired-without-timestamp":
        return keyless_dist(site, local, integrated_at=DEFAULT_SIGNED_AT + timedelta(hours=2))
    if case == "bad-inclusion-proof":
        return keyless_dist(site, local, tamper=Tamper.PROOF_HASH)
    if case == "another-statement":
        dist = keyless_dist(site, local)
        other = dist.describe()
        other.build = m.Build(tool="tests", tool_version="1")  # another statement of the same files
        bundle = local.sign_dsse(statement.statement_bytes(other), identity=TEST_IDENTITY, issuer=TEST_ISSUER)
        (dist.dist_info / SIGSTORE_BUNDLE_FILENAME).write_bytes(bundle)
        return dist
    assert case == "swapped"
    mine = keyless_dist(site, local)
    theirs = keyless_dist(site, local, "other-backend")
    shutil.copyfile(theirs.dist_info / SIGSTORE_BUNDLE_FILENAME, mine.dist_info / SIGSTORE_BUNDLE_FILENAME)
    return mine


@pytest.mark.parametrize(("case", "code"), [
    ("wrong-identity", "sigstore.identity"),
    ("wrong-issuer", "sigstore.issuer"),
    ("expired-without-timestamp", "sigstore.expired"),
    ("bad-inclusion-proof", "sigstore.tlog"),
    ("another-statement", "sigstore.statement"),
    ("swapped", "sigstore.swapped"),
])
def test_tampered_bundles_each_give_their_reason(tmp_path: Path, env: TrustEnv, local: LocalSigstore, case: str,
                                                 code: str) -> None:
    dist = _tampered(tmp_path, local, case)
    verdict = env.verify(dist)
    assert verdict.status == "rejected"
    assert verdict.problem is not None and verdict.problem.code == code
    reg = env.registry(tmp_path / "site", policy="strict")
    entry = disttree.entry(reg, "demo")
    assert (entry.state, disttree.code_of(entry)) == ("excluded", code)


@pytest.mark.parametrize(("tamper", "code"), [
    (Tamper.UNTRUSTED_CA, "sigstore.certificate"),
    (Tamper.PAYLOAD_SWAPPED, "sigstore.signature"),
    (Tamper.CHECKPOINT_KEY, "sigstore.tlog"),
])
def test_more_tampering(tmp_path: Path, env: TrustEnv, local: LocalSigstore, tamper: Tamper, code: str) -> None:
    verdict = env.verify(keyless_dist(tmp_path / "site", local, tamper=tamper))
    assert verdict.problem is not None and verdict.problem.code == code


def test_a_revoked_identity_does_not_count(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    (env.trust / "revoked").write_text(identity_id(TEST_ISSUER, TEST_IDENTITY)[:16] + "\n")
    verdict = env.verify(keyless_dist(tmp_path / "site", local))
    assert verdict.problem is not None and verdict.problem.code == "sigstore.revoked"


def test_an_identity_scoped_elsewhere_does_not_count(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    (env.trust / "scopes").write_text(f"{identity_id(TEST_ISSUER, TEST_IDENTITY)} other-backend,backend:*\n")
    verdict = env.verify(keyless_dist(tmp_path / "site", local))
    assert verdict.problem is not None and verdict.problem.code == "trust.scope"


def test_an_identity_declares_only_the_names_it_is_granted(tmp_path: Path, env: TrustEnv,
                                                           local: LocalSigstore) -> None:
    (env.trust / "scopes").write_text(f"{identity_id(TEST_ISSUER, TEST_IDENTITY)} demo-backend\n")
    keyless_dist(tmp_path / "site", local)
    entry = disttree.entry(env.registry(tmp_path / "site", policy="strict"), "demo")
    assert (entry.state, disttree.code_of(entry)) == ("excluded", "trust.name")


def test_a_key_and_an_identity_meet_a_threshold_of_two(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    (env.trust / "vendor.pub").write_bytes(env.key.pub.read_bytes())
    (env.trust / "threshold").write_text("2\n")
    verdict = env.verify(keyless_dist(tmp_path / "site", local, "demo-backend", env.key))
    assert (verdict.status, verdict.problem) == ("verified", None)
    assert len(verdict.signers) == 2
    (env.trust / "identities").write_text("")  # the key alone is one of two
    verdict = env.verify(Dist(tmp_path / "site", "demo-backend", "1.0", {"demo": "demo_backend"}))
    assert verdict.problem is not None and verdict.problem.code == "signature.signature"


def test_a_failing_bundle_beside_enough_keys_is_a_note(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    (env.trust / "vendor.pub").write_bytes(env.key.pub.read_bytes())
    dist = keyless_dist(tmp_path / "site", local, "demo-backend", env.key, tamper=Tamper.PROOF_HASH)
    verdict = env.verify(dist)
    assert (verdict.status, verdict.problem, verdict.keyless) == ("verified", None, None)
    assert "(sigstore.tlog)" in verdict.note


def test_no_identity_trusted_leaves_a_bundle_unread(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    (env.trust / "identities").unlink()
    verdict = env.verify(keyless_dist(tmp_path / "site", local, tamper=Tamper.PROOF_HASH))
    assert (verdict.status, verdict.problem) == ("unverified", None)


def test_the_verdict_cache_holds_the_keyless_verdict_and_sees_changes(tmp_path: Path, env: TrustEnv,
                                                                     local: LocalSigstore) -> None:
    dist = keyless_dist(tmp_path / "site", local)
    assert disttree.entry(env.registry(tmp_path / "site", policy="strict"), "demo").state == "loaded"
    warm = env.registry(tmp_path / "site", policy="strict")
    assert (disttree.entry(warm, "demo").state, warm.hashed_bytes) == ("loaded", 0)  # from the cache
    wrong = local.sign_dsse(statement.statement_bytes(dist.describe()), identity=TEST_IDENTITY + "x",
                            issuer=TEST_ISSUER)
    (dist.dist_info / SIGSTORE_BUNDLE_FILENAME).write_bytes(wrong)  # the bundle changed
    assert disttree.code_of(disttree.entry(env.registry(tmp_path / "site", policy="strict"), "demo")) == \
        "sigstore.identity"
    keyless_dist(tmp_path / "site", local)  # the good one back
    assert disttree.entry(env.registry(tmp_path / "site", policy="strict"), "demo").state == "loaded"
    (env.trust / "identities").write_text(f"{TEST_ISSUER} {TEST_IDENTITY}x\n")  # the identities changed
    assert disttree.code_of(disttree.entry(env.registry(tmp_path / "site", policy="strict"), "demo")) == \
        "sigstore.identity"
    (env.trust / "identities").write_text(f"{TEST_ISSUER} {TEST_IDENTITY}\n")
    other = make_local_sigstore(tmp_path / "other", seed="other")
    shutil.copyfile(other.trusted_root_path, env.trust / "sigstore-root.json")  # the root changed
    assert disttree.code_of(disttree.entry(env.registry(tmp_path / "site", policy="strict"), "demo")) == \
        "sigstore.certificate"


_WARM = """
import sys
from triton_backend_runtime.loading import Registry
reg = Registry()
reg.verify()
print([(e.name, e.trust) for e in reg.entries], "sigstore" in sys.modules, reg.hashed_bytes)
"""


def test_sigstore_is_imported_on_the_cold_path_only(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    keyless_dist(tmp_path / "site", local)
    child = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "runtime")])}
    runs = [subprocess.run([sys.executable, "-X", "importtime", "-c", _WARM], capture_output=True, text=True,
                           env=child, timeout=120) for _ in range(2)]
    assert [r.stdout.split("] ", 1)[0] + "]" for r in runs] == ["[('demo', 'verified')]"] * 2, runs[0].stderr
    assert runs[0].stdout.split()[-2:-1] == ["True"]  # cold: verified with sigstore
    assert runs[1].stdout.split()[-2:] == ["False", "0"]  # warm: from the cache, sigstore never imported
    assert " sigstore" not in runs[1].stderr  # -X importtime: no sigstore module


def test_without_sigstore_a_bundle_does_not_count(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    """A site without sigstore installed (every other package of this one, linked): the bundle
    is ``sigstore.missing`` and does not count; the distribution is unverified, not rejected."""
    keyless_dist(tmp_path / "site", local)
    import sigstore

    packages = Path(sigstore.__file__).parents[1]
    bare = tmp_path / "bare-site"
    bare.mkdir()
    for item in packages.iterdir():
        if not item.name.lower().startswith(("sigstore", "_sigstore", "__editable__")) and item.suffix != ".pth":
            (bare / item.name).symlink_to(item)
    script = _WARM.replace("print(", "print([str(e.note)[-80:] for e in reg.entries], ")
    child = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "runtime"),
                                                          str(bare)])}
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, env=child,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "sigstore.missing" in done.stdout  # the note ends with its code
    assert "[('demo', 'unverified')]" in done.stdout


def test_doctor_and_list_show_the_keyless_signer(tmp_path: Path, env: TrustEnv, local: LocalSigstore) -> None:
    keyless_dist(tmp_path / "site", local)
    child = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "runtime")]),
             "TRITON_BACKEND_POLICY": "strict"}
    run = [sys.executable, "-m", "triton_backend_runtime"]
    listed = subprocess.run([*run, "list", "--json"], capture_output=True, text=True, env=child, timeout=120)
    row = next(b for b in json.loads(listed.stdout)["backends"] if b["name"] == "demo")
    assert (row["trust"], row["identity"]["san"], row["identity"]["issuer"]) == ("verified", TEST_IDENTITY,
                                                                                 TEST_ISSUER)
    doctor = subprocess.run([*run, "doctor"], capture_output=True, text=True, env=child, timeout=120)
    assert f"keyless signer: {TEST_IDENTITY} (issuer {TEST_ISSUER}" in doctor.stdout, doctor.stdout
