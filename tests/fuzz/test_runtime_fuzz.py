"""Hostile input is contained per distribution (hypothesis, on real signed trees).

(a) Manifests: arbitrary JSON, byte mutations of a real signed envelope, and structured
    mutations of a real statement (re-signed by the trusted key, by an unknown key, or not
    at all), written as one distribution's manifest beside a second, valid, signed one.
    ``verify_distribution`` never raises; the hostile one is verified, unverified, or
    rejected with a code and a path of its own; the valid one keeps exactly its verdict;
    nothing is hashed beyond what is installed, and no example takes long.
(b) The verdict cache: random bytes, random JSON and structured mutations of a real cache
    file (values of another type, required keys removed, truncation, identities changed):
    ``Registry.load`` never raises and the valid backend stays verified and loaded under
    strict, with nothing but ``cache.*`` notes.

Mutations that keep a cache well-formed but make it lie (a signed package name changed to
another string) are left out of (b): the cache is as trusted as its writer (see
``verdictcache``); what is checked is that malformed caches are misses, never drops.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.disttree import Dist, Key, TrustEnv, make_key, seal_payload, statement_of, stub_loader, write_dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.loading.registry import Registry
from triton_backend_runtime.site.discovery import Distribution
from triton_backend_runtime.site.installed import HashCache
from triton_backend_runtime.trust.keys import TrustStore, load_trust_store
from triton_backend_runtime.verification.distribution import Context, verify_distribution
from triton_backend_runtime.verification.verdict import Verdict

pytestmark = pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")

CODE = re.compile(r"(signature|manifest|verify|trust)\.[a-z0-9-]+")


def fuzz(examples: int) -> settings:
    """No deadline (file systems vary), no example database written into the repository."""
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# -- strategies ----------------------------------------------------------------------------

NASTY_STRINGS = [
    "", ".", "..", "/", "../../../dev/zero", "/etc/passwd", "demo_backend/../x.py", "a\\b", "x\x00y", "\u00b2.0",
    "1" * 5000, "9.0", "2.0", "1.0", "x", "cp27-cp27m-win32", "hostile_backend/compiler.py", "good_backend/driver.py",
    "hostile_backend", "good_backend", "hostile-backend", "good-backend", ">=4", "not a spec", "all", "native",
    "v1", "v2", "verified", "0" * 64, "\ud800", "x" * 300,
]

scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20) | st.sampled_from(NASTY_STRINGS)
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location inside a JSON value (keys and indices from the root)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, (*prefix, index))


def get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    get(out, path[:-1])[path[-1]] = value
    return out


def deleted(doc: Any, path: tuple[Any, ...]) -> Any:
    out = copy.deepcopy(doc)
    parent = get(out, path[:-1])
    del parent[path[-1]]
    return out


def json_type(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)[:4]
    return "number" if isinstance(value, int | float) else type(value).__name__


def of_another_type(old: Any) -> st.SearchStrategy[Any]:
    kind = json_type(old)
    return json_values.filter(lambda v: json_type(v) != kind)


@st.composite
def mutated(draw: st.DrawFn, doc: Any, *, same_type: bool = True, delete: bool = True) -> Any:
    """``doc`` with a few locations replaced by arbitrary JSON (or deleted)."""
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths_of(doc))))
        if delete and path and draw(st.booleans()):
            doc = deleted(doc, path)
            continue
        old = get(doc, path)
        value = draw(json_values if same_type else of_another_type(old))
        doc = replaced(doc, path, value)
    return doc


def typed_values(old: Any) -> st.SearchStrategy[Any]:
    """Values of the JSON type ``old`` has: what gets past the schema to the checks behind it."""
    if isinstance(old, bool):
        return st.booleans()
    if isinstance(old, int):
        return st.integers(-(2**63), 2**63) | st.sampled_from([0, -1, 1, 2**40])
    if isinstance(old, str):
        return st.sampled_from(NASTY_STRINGS) | st.text(max_size=20)
    if isinstance(old, list):
        return st.lists(st.sampled_from(NASTY_STRINGS) | st.text(max_size=10), max_size=3)
    if old is None:
        return st.none() | st.sampled_from(NASTY_STRINGS)
    return json_values


def subjects_of(predicate: Any, fallback: Any) -> Any:
    """The statement subjects that agree with ``predicate``'s artifacts, where it has them."""
    artifacts = predicate.get("artifacts") if isinstance(predicate, dict) else None
    if not isinstance(artifacts, list) or not all(
        isinstance(a, dict) and isinstance(a.get("path"), str) and isinstance(a.get("sha256"), str) for a in artifacts
    ):
        return fallback
    return [{"name": a["path"], "digest": {"sha256": a["sha256"]}} for a in artifacts]


@st.composite
def manifest_mutations(draw: st.DrawFn, statement: dict[str, Any]) -> dict[str, Any]:
    """The manifest (the predicate) changed in place, values mostly of the type they had,
    entries dropped or duplicated; the subjects usually re-derived so the checks behind the
    statement's run too."""
    predicate = copy.deepcopy(statement["predicate"])
    for _ in range(draw(st.integers(1, 3))):
        paths = list(paths_of(predicate))
        leaves = [p for p in paths if not isinstance(get(predicate, p), dict)]
        prefer_leaves = bool(leaves) and draw(st.integers(0, 4)) > 0
        path = draw(st.sampled_from(leaves if prefer_leaves else paths))
        op = draw(st.sampled_from(["typed", "typed", "typed", "typed", "any", "drop", "dup"]))
        old = get(predicate, path)
        if op == "drop" and path:
            predicate = deleted(predicate, path)
        elif op == "dup" and isinstance(old, list) and old:
            predicate = replaced(predicate, path, [*old, draw(st.sampled_from(old))])
        else:
            predicate = replaced(predicate, path, draw(typed_values(old) if op == "typed" else json_values))
    subject = subjects_of(predicate, statement["subject"]) if draw(st.integers(0, 4)) else statement["subject"]
    return {**statement, "predicate": predicate, "subject": subject}


@st.composite
def byte_mutations(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        if op == "flip" and at < len(out):
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del out[at:at + draw(st.integers(1, 16))]
        else:
            del out[at:]
    return bytes(out)


# -- (a) manifests ---------------------------------------------------------------------------


@dataclass
class ManifestWorld:
    site: Path
    good: Distribution
    hostile: Dist
    hostile_dist: Distribution
    key: Key
    stranger: Key
    store: TrustStore
    baseline: Verdict
    envelope: bytes
    statement: dict[str, Any]
    installed: int

    def context(self) -> Context:
        return Context(self.store, None, None, HashCache(), 2)


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManifestWorld]:
    root = tmp_path_factory.mktemp("fuzz-manifests")
    with pytest.MonkeyPatch.context() as mp:
        env = TrustEnv.make(root, mp)
        site = root / "site"
        good = write_dist(site, "good-backend", backends={"good": "good_backend"})
        good.sign(env.key)
        hostile = write_dist(site, "hostile-backend", backends={"hostile": "hostile_backend"})
        manifest = hostile.sign(env.key)
        store, problems = load_trust_store()
        assert not problems
        installed = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        world = ManifestWorld(
            site, good.distribution(), hostile, hostile.distribution(), env.key, make_key(root / "other", "stranger"),
            store, Verdict("rejected"), hostile.manifest_path.read_bytes(), statement_of(manifest), installed,
        )
        world.baseline = verify_distribution(world.good, world.context())
        assert world.baseline.status == "verified" and world.baseline.problem is None
        assert verify_distribution(world.hostile_dist, world.context()).status == "verified"
        yield world


def check_contained(world: ManifestWorld, data: bytes) -> Verdict:
    world.hostile.manifest_path.write_bytes(data)
    ctx = world.context()
    verdict = verify_distribution(world.hostile_dist, ctx)  # never raises: that is the first property
    assert verdict.status in ("verified", "unverified", "rejected")
    if verdict.status == "rejected":
        assert verdict.problem is not None and CODE.fullmatch(verdict.problem.code), verdict.problem
        where = verdict.problem.path
        assert where == str(world.hostile.manifest_path) or where.startswith(f"{world.site}{os.sep}"), where
    else:
        assert verdict.problem is None
    if verdict.status == "verified":
        assert verdict.signers and verdict.signers[0].startswith(world.key.keyid)
    assert ctx.hashes.hashed_bytes <= world.installed, "hashed more than is installed"
    assert verify_distribution(world.good, world.context()) == world.baseline
    return verdict


@fuzz(120)
@given(value=json_values)
def test_any_json_as_the_envelope(manifests: ManifestWorld, value: Any) -> None:
    check_contained(manifests, json.dumps(value).encode())


@fuzz(120)
@given(data=st.data())
def test_byte_mutations_of_a_signed_envelope(manifests: ManifestWorld, data: st.DataObject) -> None:
    check_contained(manifests, data.draw(byte_mutations(manifests.envelope)))


@fuzz(80)
@given(data=st.data())
def test_structured_mutations_of_the_envelope(manifests: ManifestWorld, data: st.DataObject) -> None:
    doc = json.loads(manifests.envelope)
    check_contained(manifests, json.dumps(data.draw(mutated(doc))).encode())


@fuzz(250)
@given(data=st.data(), signer=st.sampled_from(["trusted", "stranger", "none"]))
def test_structured_mutations_of_a_signed_statement(manifests: ManifestWorld, data: st.DataObject,
                                                    signer: str) -> None:
    statement = data.draw(mutated(manifests.statement))
    body = json.dumps(statement).encode("utf-8", "surrogatepass")
    keys = {"trusted": [manifests.key], "stranger": [manifests.stranger], "none": []}[signer]
    verdict = check_contained(manifests, seal_payload(body, keys))
    if signer != "trusted":
        assert verdict.status != "verified"


@fuzz(200)
@given(data=st.data(), signer=st.sampled_from(["trusted", "trusted", "stranger", "none"]))
def test_manifest_mutations_signed(manifests: ManifestWorld, data: st.DataObject, signer: str) -> None:
    statement = data.draw(manifest_mutations(manifests.statement))
    keys = {"trusted": [manifests.key], "stranger": [manifests.stranger], "none": []}[signer]
    check_contained(manifests, seal_payload(json.dumps(statement).encode(), keys))


@fuzz(60)
@given(payload=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()),
       signer=st.sampled_from(["trusted", "none"]))
def test_any_payload_signed(manifests: ManifestWorld, payload: bytes, signer: str) -> None:
    verdict = check_contained(manifests, seal_payload(payload, [manifests.key] if signer == "trusted" else []))
    assert verdict.status == "rejected"


@fuzz(25)
@given(data=st.data())
def test_registry_keeps_the_valid_backend(manifests: ManifestWorld, data: st.DataObject,
                                          monkeypatch_module: pytest.MonkeyPatch) -> None:
    """End to end: whatever the hostile manifest holds, the valid backend loads under strict
    and the hostile backend is loaded only if it verified."""
    statement = data.draw(manifest_mutations(manifests.statement))
    raw = data.draw(st.sampled_from(["statement", "bytes"]))
    blob = (seal_payload(json.dumps(statement).encode("utf-8", "surrogatepass"), [manifests.key]) if raw == "statement"
            else data.draw(byte_mutations(manifests.envelope)))
    manifests.hostile.manifest_path.write_bytes(blob)
    reg = Registry()
    assert reg.policy == "strict"
    reg.load(stub_loader)
    states = {e.name: (e.trust, e.state) for e in reg.entries}
    assert states["good"] == ("verified", "loaded")
    assert states["hostile"][1] == ("loaded" if states["hostile"][0] == "verified" else "excluded")
    assert reg.verdicts[str(manifests.good.dist_info)] == manifests.baseline
    assert reg.problems == []


@pytest.fixture(scope="module")
def monkeypatch_module(manifests: ManifestWorld) -> Iterator[pytest.MonkeyPatch]:
    """sys.path and the policy for the registry examples of (a), once for all of them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "path", [str(manifests.site), *sys.path])
        mp.setenv("TRITON_BACKEND_POLICY", "strict")
        yield mp


# -- (b) the verdict cache -------------------------------------------------------------------


@dataclass
class CacheWorld:
    cache: Path
    good: Dist
    baseline: Verdict
    data: bytes
    doc: dict[str, Any]
    installed: int


REQUIRED = {("format",), ("verdicts",), ("hashes",)}


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CacheWorld]:
    root = tmp_path_factory.mktemp("fuzz-cache")
    with pytest.MonkeyPatch.context() as mp:
        env = TrustEnv.make(root, mp)
        site = root / "site"
        good = write_dist(site, "good-backend", backends={"good": "good_backend"})
        good.sign(env.key)
        write_dist(site, "old-backend", backends={"old": "old_backend"})  # legacy, beside it
        base = str(tmp_path_factory.getbasetemp())
        mp.setattr(sys, "path", [str(site), *(p for p in sys.path if not p.startswith(base))])
        mp.setenv("TRITON_BACKEND_POLICY", "strict")
        reg = Registry()
        reg.load(stub_loader)
        data = env.cache_file().read_bytes()
        installed = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        yield CacheWorld(env.cache_file(), good, reg.verdicts[str(good.dist_info)], data, json.loads(data), installed)


def check_cache(world: CacheWorld, content: bytes) -> Registry:
    world.cache.write_bytes(content)
    os.chmod(world.cache, 0o600)
    reg = Registry()
    reg.load(stub_loader)  # never raises: the first property
    # Bounded work, not time: whatever the cache says, no more is hashed than is installed.
    assert reg.hashed_bytes <= world.installed, "hashed more than is installed"
    good = next(e for e in reg.entries if e.name == "good")
    assert (good.trust, good.state, good.reason) == ("verified", "loaded", None)
    assert reg.verdicts[str(world.good.dist_info)] == world.baseline
    assert next(e for e in reg.entries if e.name == "old").state == "excluded"
    assert reg.problems == []
    assert all(n.code.startswith("cache.") for n in reg.notes), reg.notes
    return reg


@fuzz(80)
@given(content=st.binary(max_size=512))
def test_cache_random_bytes(caches: CacheWorld, content: bytes) -> None:
    check_cache(caches, content)


@fuzz(80)
@given(value=json_values | st.fixed_dictionaries({"format": st.just(3)}, optional={
    "verdicts": json_values, "hashes": json_values}))
def test_cache_random_json(caches: CacheWorld, value: Any) -> None:
    check_cache(caches, json.dumps(value).encode())


@st.composite
def cache_mutations(draw: st.DrawFn, doc: dict[str, Any]) -> Any:
    """Values of another JSON type anywhere, required keys removed, identities changed.
    Each location is changed once, and never one inside another that was: two retypes of one
    place can bring back its type with another value (``"x"`` -> ``[""]`` -> ``""``), and a
    value edit by the cache's own writer is trusted (see verdictcache's threat model)."""
    touched: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in paths_of(doc) if p and not any(_overlap(p, t) for t in touched)]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        touched.append(path)
        op = draw(st.sampled_from(["retype", "retype", "drop", "renumber"]))
        if op == "drop" and (path in REQUIRED or path[2:] in {("context",), ("verdict",), ("identities",),
                                                              ("verdict", "status")}):
            doc = deleted(doc, path)
        elif op == "renumber" and isinstance(get(doc, path), int) and not isinstance(get(doc, path), bool):
            doc = replaced(doc, path, draw(st.integers(0, 2**63)))
        else:
            doc = replaced(doc, path, draw(of_another_type(get(doc, path))))
    return doc


def _overlap(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether one location is the other or inside it."""
    return a[:len(b)] == b or b[:len(a)] == a


@fuzz(150)
@given(data=st.data())
def test_cache_structured_mutations(caches: CacheWorld, data: st.DataObject) -> None:
    doc = data.draw(cache_mutations(copy.deepcopy(caches.doc)))
    check_cache(caches, json.dumps(doc).encode())


@fuzz(40)
@given(cut=st.integers(0, 10**6))
def test_cache_truncated(caches: CacheWorld, cut: int) -> None:
    data = caches.data[: cut % len(caches.data)]
    reg = check_cache(caches, data)
    assert [n.code for n in reg.notes] == ["cache.json"]  # no proper prefix of a JSON object is JSON


# -- the depth guard agrees with the parser -------------------------------------------------

_nested = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner,
                                                                max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None, database=None)
@given(value=_nested, ascii_only=st.booleans())
def test_nesting_depth_is_the_parsed_depth(value: Any, ascii_only: bool) -> None:
    """Brackets and backslashes inside strings never count: the byte-level scan gives the
    depth of what json.loads builds, for any document (escapes included)."""
    from triton_backend_runtime.base.jsonlimits import nesting_depth

    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    assert nesting_depth(data, stop=1000) == _depth(json.loads(data))
