"""Names are granted, not taken: a signature vouches for bytes, the trust store for names.

Real signed manifests over dist-info trees in tmp_path, real Ed25519 keys, the registry as
``import triton`` drives it, and the ``trust`` command as a subprocess of a throwaway
environment. A Triton core here is a distribution whose RECORD lists ``triton/__init__.py``
and that declares the ``nvidia`` backend, signed by the (unscoped) vendor key.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.csrc import CSRC, gcc
from helpers.disttree import Dist, Key, TrustEnv, make_key, write_dist, write_record
from triton_backend_runtime.loading.conflicts import Claim, resolve
from triton_backend_runtime.loading.registry import BackendWarning, Registry
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.trust.keys import load_trust_store
from triton_backend_runtime.trust.paths import trust_sources
from triton_backend_runtime.trust.pins import set_pin
from triton_backend_runtime.trust.scopes import parse_scopes
from triton_backend_runtime.verification.cache import context_digest

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
PIN_HINT = "python -m triton_backend_runtime trust pin"


def core(site: Path, env: TrustEnv) -> Dist:
    """Triton 3.9.0 as pip leaves it (RECORD and all), its own nvidia backend, signed."""
    triton = write_dist(site, "triton", "3.9.0", backends={"nvidia": "triton.backends.nvidia"}, files={
        "triton/__init__.py": b"__version__ = '3.9.0'\n", "triton/backends/__init__.py": b""})
    triton.sign(env.key)
    write_record(triton)
    return triton


def trusted(env: TrustEnv, name: str, scope: str | None) -> Key:
    """Another trusted key, scoped by a ``scopes`` line (``KEYID scope``) unless ``scope`` is None."""
    key = make_key(env.root / "keys", name)
    (env.trust / f"{name}.pub").write_bytes(key.pub.read_bytes())
    if scope is not None:
        with open(env.trust / "scopes", "a") as scopes:
            scopes.write(f"{key.keyid} {scope}\n")
    return key


def states(reg: Registry, name: str) -> dict[str, tuple[str, str | None]]:
    """Each distribution's backend ``name``: its state and reason code."""
    return {e.dist.name if e.dist else "": (e.state, e.reason.code if e.reason else None)
            for e in reg.entries if e.name == name}


def message(reg: Registry, name: str, dist: str) -> str:
    found = next(e for e in reg.entries if e.name == name and e.dist is not None and e.dist.name == dist)
    assert found.reason is not None
    return found.reason.message


# -- the attack: a scoped key re-signs its distribution declaring nvidia -------------------------


def test_a_scoped_key_cannot_declare_the_cores_backend(env: TrustEnv, site: Path) -> None:
    core(site, env)
    key = trusted(env, "evil", "evil-x")  # a scope line as written before names were granted
    write_dist(site, "evil-x", backends={"nvidia": "evil_x"}).sign(key)
    reg = env.registry(site, policy="strict")
    assert states(reg, "nvidia") == {"triton": ("loaded", None), "evil-x": ("excluded", "trust.name")}
    evil = next(e for e in reg.entries if e.dist is not None and e.dist.name == "evil-x")
    assert evil.trust == "rejected" and evil.reason is not None
    assert evil.reason.path == str(evil.dist.manifest if evil.dist else "")
    assert "backend 'nvidia'" in evil.reason.message and key.keyid[:16] in evil.reason.message
    assert "may declare no backend, pass, dialect, op name" in evil.reason.message
    assert reg.result is not None and reg.result["nvidia"].package == "triton.backends.nvidia"


def test_under_warn_the_refusal_is_said(env: TrustEnv, site: Path) -> None:
    core(site, env)
    key = trusted(env, "evil", "evil-x")
    write_dist(site, "evil-x", backends={"nvidia": "evil_x"}).sign(key)
    with pytest.warns(BackendWarning, match=r"Triton backend nvidia \(evil-x 1.0\) excluded: .*may declare"):
        reg = env.registry(site, policy="warn")
    assert states(reg, "nvidia") == {"triton": ("loaded", None), "evil-x": ("excluded", "trust.name")}


@pytest.mark.parametrize("scope", ["evil-x,backend:nvidia", "evil-x,backend:*", None], ids=["granted", "any", "full"])
def test_a_granted_name_of_the_core_stays_the_cores_until_pinned(env: TrustEnv, site: Path, scope: str | None) -> None:
    """A grant (or a key of full trust) lets a signature declare a name; the core's names are
    still the core's, unless the trust store pins one to another distribution."""
    core(site, env)
    key = trusted(env, "fork", scope)
    write_dist(site, "evil-x", backends={"nvidia": "evil_x"}).sign(key)
    reg = env.registry(site, policy="strict")
    assert states(reg, "nvidia") == {"triton": ("loaded", None), "evil-x": ("excluded", "conflict.name")}
    text = message(reg, "nvidia", "evil-x")
    assert "belongs to the Triton core (triton 3.9.0)" in text and f"{PIN_HINT} nvidia DIST" in text
    set_pin(str(env.trust), "backend", "nvidia", "Evil_X")  # any spelling of the name
    reg = env.registry(site, policy="strict")
    assert states(reg, "nvidia") == {"triton": ("excluded", "conflict.name"), "evil-x": ("loaded", None)}
    assert "pinned to evil-x in the trust store; evil-x 1.0 keeps it" in message(reg, "nvidia", "triton")


@pytest.mark.parametrize(("scope", "state"), [("triton", "excluded"), ("triton,backend:*", "loaded")])
def test_the_core_is_no_exception(env: TrustEnv, site: Path, scope: str, state: str) -> None:
    """A key scoped to the core signs it; the core's names need grants all the same."""
    platform = trusted(env, "platform", scope)
    triton = write_dist(site, "triton", "3.9.0", backends={"nvidia": "triton.backends.nvidia"}, files={
        "triton/__init__.py": b"__version__ = '3.9.0'\n", "triton/backends/__init__.py": b""})
    triton.sign(platform)
    write_record(triton)
    reg = env.registry(site, policy="strict")
    assert states(reg, "nvidia") == {"triton": (state, "trust.name" if state == "excluded" else None)}


def test_a_scoped_key_declares_exactly_what_it_is_granted(env: TrustEnv, site: Path) -> None:
    key = trusted(env, "vendor-b", "two-x,backend:mine")
    write_dist(site, "two-x", backends={"mine": "two_mine", "other": "two_other"}).sign(key)
    reg = env.registry(site, policy="strict")
    assert states(reg, "mine") == {"two-x": ("loaded", None)}
    assert states(reg, "other") == {"two-x": ("excluded", "trust.name")}


def test_a_threshold_counts_grants_per_name(env: TrustEnv, site: Path) -> None:
    (env.trust / "threshold").write_text("2\n")
    one, two = trusted(env, "one", "two-x,backend:mine,backend:other"), trusted(env, "two", "two-x,backend:mine")
    write_dist(site, "two-x", backends={"mine": "two_mine", "other": "two_other"}).sign(one, two)
    reg = env.registry(site, policy="strict")
    assert states(reg, "mine") == {"two-x": ("loaded", None)}
    assert states(reg, "other") == {"two-x": ("excluded", "trust.name")}
    assert message(reg, "other", "two-x").startswith("backend 'other': 1 of 2 required signatures may declare")


# -- re-signing by a mirror vouches for bytes, not for names --------------------------------------


@pytest.mark.parametrize(("scope", "code"), [
    ("evil-x,good-x,backend:demo", "trust.name"),  # the mirror's scope names no nvidia
    ("evil-x,good-x,backend:*", "conflict.name"),  # it may declare any name: nvidia is still the core's
])
def test_a_wheel_resigned_by_a_scoped_mirror_key(env: TrustEnv, site: Path, scope: str, code: str) -> None:
    core(site, env)
    mirror = trusted(env, "mirror", scope)
    uploader = make_key(env.root / "keys", "uploader")  # signed it first; not trusted here
    evil = write_dist(site, "evil-x", backends={"nvidia": "evil_x", "demo": "evil_demo"})
    evil.sign(uploader)
    evil.sign(mirror)  # the mirror re-signs what was uploaded, whatever it declares
    reg = env.registry(site, policy="strict")
    assert states(reg, "nvidia") == {"triton": ("loaded", None), "evil-x": ("excluded", code)}
    assert states(reg, "demo") == {"evil-x": ("loaded", None)}


# -- two claims, neither the core: the order of names never decides --------------------------------


@pytest.mark.parametrize("first", ["aaa-x", "zzz-x"])
@pytest.mark.parametrize("apart", [False, True], ids=["one-site", "two-sites"])
def test_two_verified_claims_are_both_excluded(env: TrustEnv, tmp_path: Path, site: Path, first: str,
                                               apart: bool) -> None:
    other = tmp_path / "other"
    other.mkdir()
    second = "zzz-x" if first == "aaa-x" else "aaa-x"
    write_dist(site, first, backends={"demo": f"{first[:3]}_demo"}).sign(env.key)
    write_dist(other if apart else site, second, backends={"demo": f"{second[:3]}_demo"}).sign(env.key)
    reg = env.registry(site, other, policy="strict")
    assert states(reg, "demo") == {"aaa-x": ("excluded", "conflict.name"), "zzz-x": ("excluded", "conflict.name")}
    for dist in ("aaa-x", "zzz-x"):
        text = message(reg, "demo", dist)
        assert "aaa-x 1.0, zzz-x 1.0" in text and f"{PIN_HINT} demo DIST" in text
    assert reg.result == {}


@pytest.mark.parametrize("first", ["aaa-x", "zzz-x"])
@pytest.mark.parametrize("owner", ["aaa-x", "zzz-x"])
def test_a_pin_settles_two_claims(env: TrustEnv, site: Path, tmp_path: Path, first: str, owner: str) -> None:
    other = tmp_path / "other"
    other.mkdir()
    second = "zzz-x" if first == "aaa-x" else "aaa-x"
    write_dist(site, first, backends={"demo": f"{first[:3]}_demo"}).sign(env.key)
    write_dist(other, second, backends={"demo": f"{second[:3]}_demo"}).sign(env.key)
    set_pin(str(env.trust), "backend", "demo", owner)
    reg = env.registry(site, other, policy="strict")
    loser = "zzz-x" if owner == "aaa-x" else "aaa-x"
    assert states(reg, "demo") == {owner: ("loaded", None), loser: ("excluded", "conflict.name")}
    assert f"pinned to {owner}" in message(reg, "demo", loser)
    assert reg.result is not None and reg.result["demo"].package == f"{owner[:3]}_demo"


def test_trust_still_ranks_before_any_name(env: TrustEnv, site: Path) -> None:
    """Verified beats unverified whatever the names; under strict the unverified is not even admitted."""
    write_dist(site, "aaa-x", backends={"demo": "aaa_demo"}).sign()  # hash-only
    write_dist(site, "zzz-x", backends={"demo": "zzz_demo"}).sign(env.key)
    reg = env.registry(site, policy="warn")
    assert states(reg, "demo") == {"zzz-x": ("loaded", None), "aaa-x": ("excluded", "conflict.name")}
    assert "zzz-x 1.0, which wins (verified > unverified > legacy)" in message(reg, "demo", "aaa-x")


def test_a_pin_names_a_distribution_that_does_not_claim_it(env: TrustEnv, site: Path) -> None:
    """A pin lets its distribution take a name; it takes nothing from the others when that one is absent."""
    core(site, env)
    set_pin(str(env.trust), "backend", "nvidia", "not-installed")
    reg = env.registry(site, policy="strict")
    assert states(reg, "nvidia") == {"triton": ("loaded", None)}


def test_only_installs_of_one_distribution_are_ordered_by_sys_path() -> None:
    """The rule itself, over claims: one name (two .dist-info of one PEP 503 name) in two
    sys.path entries, the earlier keeps it; two names alike, neither does, in either order."""
    def claim(key: int, dist: str, order: int) -> Claim:
        return Claim(key, "demo", "verified", order, dist, f"{dist} 1.0")

    (excluded,) = resolve([claim(0, "one-x", 1), claim(1, "one-x", 0)], [])
    assert excluded.key == 0 and "earlier on sys.path" in excluded.detail
    for pair in ([claim(0, "aaa-x", 0), claim(1, "zzz-x", 1)], [claim(0, "zzz-x", 0), claim(1, "aaa-x", 1)]):
        assert sorted(e.key for e in resolve(pair, [])) == [0, 1]
        assert sorted(e.key for e in resolve(pair[::-1], [])) == [0, 1]


# -- plugins: pass, dialect and op names -----------------------------------------------------------


@pytest.fixture(scope="module")
def plugin_so(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real plugin library (API v2, needing nothing from libtriton, no strong export but its entry point)."""
    out = tmp_path_factory.mktemp("grants") / "libnames.so"
    gcc(out, str(CSRC / "contract_plugin.c"), "-DNO_LIBTRITON")
    return out


def plugin_dist(site: Path, name: str, so: Path, key: Key, *, passes: tuple[str, ...] = (),
                dialects: tuple[str, ...] = (), ops: tuple[str, ...] = ()) -> Dist:
    """A distribution with one plugin whose manifest records the names it registers (as captured)."""
    dist = write_dist(site, name, backends={}, files={f"{name.replace('-', '_')}/libnames.so": so})
    info = m.PluginInfo(captured=True, api_version=2, name=name, version="1.0", triton_version="3.9.0",
                        passes=[m.PluginPass(p, "1") for p in passes],
                        dialects=[m.PluginDialect(d, "1") for d in dialects], ops=list(ops))
    dist.sign(key, edit=lambda man: setattr(man, "plugins", [replace(p, info=info) for p in man.plugins]))
    return dist


def bare_triton(site: Path) -> None:
    """Triton 3.9.0 without a manifest (its plugins' contracts are checked against it); it claims nothing."""
    triton = write_dist(site, "triton", "3.9.0", backends={}, files={"triton/__init__.py": b"__version__ = '3.9.0'\n"})
    write_record(triton)


def plugin_states(reg: Registry) -> dict[str, tuple[str, str | None]]:
    return {p.dist.name: (p.state, p.reason.code if p.reason else None) for p in reg.plugins}


@pytest.mark.parametrize(("kind", "names"), [
    ("pass", {"passes": ("fuse",)}), ("dialect", {"dialects": ("Fuse",)}), ("op", {"ops": ("fuse_op",)}),
])
def test_a_plugin_declares_only_granted_names(env: TrustEnv, site: Path, plugin_so: Path, kind: str,
                                              names: dict[str, tuple[str, ...]]) -> None:
    (name,) = next(iter(names.values()))
    bare_triton(site)
    refused = trusted(env, "narrow", f"plug-a,{kind}:other")
    granted = trusted(env, "wide", f"plug-b,{kind}:{name}")
    plugin_dist(site, "plug-a", plugin_so, refused, **names)
    plugin_dist(site, "plug-b", plugin_so, granted, **names)
    reg = env.registry(site, policy="strict")
    # the admitted one waits for libtriton (Triton is installed): handed over by extend_with
    assert plugin_states(reg) == {"plug-a": ("excluded", "trust.name"), "plug-b": ("pending", None)}
    reason = next(p.reason for p in reg.plugins if p.dist.name == "plug-a")
    assert reason is not None and f"may declare {kind} {name!r}" in reason.message


def test_a_plugin_whose_names_were_never_captured_needs_every_kind_granted(
        env: TrustEnv, site: Path, plugin_so: Path) -> None:
    """``not-run`` (migrate's default): what the library will register is unknown, so a key
    granted some names only may not vouch for it; one granted any name of each kind may."""
    bare_triton(site)
    narrow = trusted(env, "narrow", "plug-a,pass:fuse,dialect:Fuse,op:fuse_op")
    wide = trusted(env, "wide", "plug-b,pass:*,dialect:*,op:*")
    for name, key in (("plug-a", narrow), ("plug-b", wide)):
        dist = write_dist(site, name, backends={}, files={f"{name.replace('-', '_')}/libnames.so": plugin_so})
        info = m.PluginInfo(captured=False, reason_code="not-run", reason="not asked")
        dist.sign(key, edit=lambda man, info=info: setattr(  # type: ignore[misc]
            man, "plugins", [replace(p, info=info) for p in man.plugins]))
    reg = env.registry(site, policy="strict")
    assert plugin_states(reg) == {"plug-a": ("excluded", "trust.name"), "plug-b": ("pending", None)}
    reason = next(p.reason for p in reg.plugins if p.dist.name == "plug-a")
    assert reason is not None and "may declare pass '*'" in reason.message


@pytest.mark.parametrize(("kind", "names"), [
    ("pass", {"passes": ("fuse",)}), ("dialect", {"dialects": ("Fuse",)}), ("op", {"ops": ("fuse_op",)}),
])
def test_two_plugins_registering_one_name_until_pinned(env: TrustEnv, site: Path, plugin_so: Path, kind: str,
                                                       names: dict[str, tuple[str, ...]]) -> None:
    (name,) = next(iter(names.values()))
    bare_triton(site)
    plugin_dist(site, "zzz-plug", plugin_so, env.key, **names)
    plugin_dist(site, "aaa-plug", plugin_so, env.key, **names)
    reg = env.registry(site, policy="strict")
    code = f"conflict.{kind}"
    assert plugin_states(reg) == {"aaa-plug": ("excluded", code), "zzz-plug": ("excluded", code)}
    reason = reg.plugins[0].reason
    assert reason is not None and f"{PIN_HINT} {kind}:{name} DIST" in reason.message
    set_pin(str(env.trust), kind, name, "zzz-plug")
    reg = env.registry(site, policy="strict")
    assert plugin_states(reg) == {"aaa-plug": ("excluded", code), "zzz-plug": ("pending", None)}


def test_the_cores_bundled_plugin_names_are_the_cores(env: TrustEnv, site: Path, plugin_so: Path) -> None:
    triton = write_dist(site, "triton", "3.9.0", backends={}, files={
        "triton/__init__.py": b"__version__ = '3.9.0'\n", "triton/_C/libnames.so": plugin_so})
    info = m.PluginInfo(captured=True, api_version=2, name="core", version="1", passes=[m.PluginPass("fuse", "1")])
    triton.sign(env.key, edit=lambda man: setattr(man, "plugins", [replace(p, info=info) for p in man.plugins]))
    write_record(triton)
    plugin_dist(site, "aaa-plug", plugin_so, env.key, passes=("fuse",))
    reg = env.registry(site, policy="strict")
    got = plugin_states(reg)
    assert got["aaa-plug"] == ("excluded", "conflict.pass") and got["triton"][0] != "excluded"
    reason = next(p.reason for p in reg.plugins if p.dist.name == "aaa-plug")
    assert reason is not None and "belongs to the Triton core (triton 3.9.0)" in reason.message


# -- the trust files: scope syntax, pins, the verdict cache ---------------------------------------------


def test_scope_lines_old_and_new(tmp_path: Path) -> None:
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    text = (f"{a} Triton_Foo, triton-bar\n"                           # 1: as written before grants
            f"{b} dist:foo,backend:nvidia,pass:my_pass,dialect:*,op:x.y\n"  # 2: the new items
            f"{c} foo,backend:b@d,frob:x,backend:,op:-x\n")             # 3: bad items: dropped, reported
    scopes, problems = parse_scopes(text, "scopes")
    assert scopes[a].names == {"triton-foo", "triton-bar"} and scopes[a].grants == frozenset()
    assert not scopes[a].grants_name("backend", "foo")
    assert scopes[b].names == {"foo"}
    assert scopes[b].grants == {("backend", "nvidia"), ("pass", "my_pass"), ("dialect", "*"), ("op", "x.y")}
    assert scopes[b].grants_name("dialect", "Anything") and not scopes[b].grants_name("backend", "amd")
    assert [(p.code, p.path) for p in problems] == [("trust.scope-format", "scopes:3")]
    assert "'frob:x'" in problems[0].detail and "'backend:'" in problems[0].detail
    assert scopes[c].names == {"foo"} and scopes[c].grants == frozenset()
    # Merged across files: the intersection, a wildcard meeting a name as that name.
    more, _ = parse_scopes(f"{b} foo,dialect:Mine,backend:*\n", "more")
    narrowed = scopes[b].narrow(more[b])
    assert narrowed.grants == {("dialect", "Mine"), ("backend", "nvidia")}


def test_pins_lines_and_disagreement(env: TrustEnv, tmp_path: Path) -> None:
    (env.trust / "pins").write_text("# who keeps what\nnvidia My_Fork\npass:fuse plug-a\nfrob:x y\nlonely\n"
                                    "op:-bad x\n")
    extra = tmp_path / "extra" / "pins"
    extra.parent.mkdir()
    extra.write_text("nvidia other-fork\npass:fuse plug-a\n")
    env.monkeypatch.setenv("TRITON_BACKEND_TRUSTED_KEYS", f"{env.trust}{os.pathsep}{extra}")
    store, problems = load_trust_store()
    assert [(p.code, p.path) for p in problems] == [
        ("trust.pin-format", f"{env.trust / 'pins'}:4"), ("trust.pin-format", f"{env.trust / 'pins'}:5"),
        ("trust.pin-format", f"{env.trust / 'pins'}:6"), ("trust.pin-format", f"{extra}:1"),
    ]
    assert store.pins[("backend", "nvidia")].dist is None  # pinned to two: to neither
    assert store.pins[("pass", "fuse")].dist == "plug-a"


def test_a_pin_change_is_a_new_verdict_cache_context(env: TrustEnv) -> None:
    before = context_digest(trust_sources(), [])
    set_pin(str(env.trust), "backend", "demo", "demo-backend")
    assert str(env.trust / "pins") in trust_sources()
    after = context_digest(trust_sources(), [])
    set_pin(str(env.trust), "backend", "demo", "other-backend")
    assert len({before, after, context_digest(trust_sources(), [])}) == 3


# -- the trust command ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway environment's interpreter: its sys.prefix holds the system trust directory."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def trust_cli(python: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import site

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON", "XDG_"))}
    env |= {"XDG_CONFIG_HOME": str(root / "config"), "HOME": str(root / "home"),
            "PYTHONPATH": os.pathsep.join([str(RUNTIME), *site.getsitepackages()]),
            "TRITON_BACKEND_CACHE_DIR": str(root / "cache")}
    command = [str(python), "-m", "triton_backend_runtime", "trust", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=root)


def test_cli_pin_unpin_list(python: Path, tmp_path: Path) -> None:
    user = tmp_path / "config" / "triton-backend" / "trusted"
    done = trust_cli(python, tmp_path, "pin", "nvidia", "My_Fork", "--user")
    assert done.returncode == 0 and done.stderr == "", done
    assert (user / "pins").read_text() == "nvidia my-fork\n"
    assert trust_cli(python, tmp_path, "pin", "pass:fuse", "plug-a", "--user").returncode == 0
    again = trust_cli(python, tmp_path, "pin", "nvidia", "other-fork", "--user")
    assert again.returncode == 0 and "replaced: nvidia my-fork" in again.stdout
    assert (user / "pins").read_text() == "nvidia other-fork\npass:fuse plug-a\n"
    listing = trust_cli(python, tmp_path, "list")
    assert listing.returncode == 0, listing.stderr
    assert f"pin nvidia other-fork  ({user / 'pins'}:1)" in listing.stdout
    assert f"pin pass:fuse plug-a  ({user / 'pins'}:2)" in listing.stdout
    gone = trust_cli(python, tmp_path, "unpin", "nvidia", "--user")
    assert gone.returncode == 0 and (user / "pins").read_text() == "pass:fuse plug-a\n"
    assert "pin nvidia" not in trust_cli(python, tmp_path, "list").stdout
    missing = trust_cli(python, tmp_path, "unpin", "nvidia", "--user")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.splitlines() == [
        f"python -m triton_backend_runtime: error: {user / 'pins'}: nvidia is not pinned here (trust.not-pinned)"]
    for args in (["pin", "frob:x", "dist"], ["pin", "nvidia", "b@d"], ["pin", "pass:*", "dist"], ["unpin", "a b"]):
        bad = trust_cli(python, tmp_path, *args, "--user")
        assert bad.returncode == 2 and bad.stderr.endswith("(input.name)\n") and bad.stdout == "", (args, bad)
    assert (user / "pins").read_text() == "pass:fuse plug-a\n"
    usage = trust_cli(python, tmp_path, "pin", "nvidia")
    assert usage.returncode == 2 and "usage:" in usage.stderr
    (user / "pins").write_text("nvidia\n")
    broken = trust_cli(python, tmp_path, "list")
    assert broken.returncode == 1 and "(trust.pin-format)" in broken.stderr


def test_cli_add_with_grants(python: Path, tmp_path: Path) -> None:
    from backend_packager.manifest import signing

    public = signing.generate(tmp_path / "k.pem", tmp_path / "k.pub", "vendor k", None)
    user = tmp_path / "config" / "triton-backend" / "trusted"
    done = trust_cli(python, tmp_path, "add", str(tmp_path / "k.pub"), "--scope",
                     "my-dist,backend:mybackend,pass:my_pass", "--user")
    assert done.returncode == 0, done.stderr
    assert (user / "scopes").read_text() == f"{public.keyid} my-dist,backend:mybackend,pass:my_pass\n"
    assert "may declare backend:mybackend, pass:my_pass" in done.stdout
    listing = trust_cli(python, tmp_path, "list")
    assert listing.returncode == 0 and "  may declare: backend:mybackend, pass:my_pass" in listing.stdout
    for scope in ("backend:only", "my-dist,backend:a@b", "my-dist,frob:x"):
        bad = trust_cli(python, tmp_path, "add", str(tmp_path / "k.pub"), "--scope", scope, "--user")
        assert bad.returncode == 2 and bad.stderr.endswith("(input.name)\n"), (scope, bad)
    assert (user / "scopes").read_text() == f"{public.keyid} my-dist,backend:mybackend,pass:my_pass\n"
