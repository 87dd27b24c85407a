"""Key scopes and rollback floors (after TUF's delegations).

Real Ed25519 keys, real trust directories under tmp_path, real DSSE envelopes over real
manifests, and the ``trust`` command run as a subprocess from a throwaway environment (its
``sys.prefix`` is the system trust location), so nothing touches this machine's trust store.
"""

from __future__ import annotations

import dataclasses
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures
from helpers.disttree import TrustEnv, entry, write_dist
from helpers.manifests import sample
from triton_backend_runtime.base.errors import TrustStoreError
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.delegation import admit_signers, check_floor
from triton_backend_runtime.trust.editing import write_atomic
from triton_backend_runtime.trust.keys import TrustStore, load_trust_store
from triton_backend_runtime.trust.paths import trust_sources
from triton_backend_runtime.trust.scopes import parse_scope
from triton_backend_runtime.trust.statement import manifest_from_statement
from triton_backend_runtime.trust.syntax import parse_name

from backend_packager.manifest import signing

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


@dataclasses.dataclass
class Place:
    """One trust setup: the user directory and an extra directory (TRITON_BACKEND_TRUSTED_KEYS)."""

    root: Path

    @property
    def user(self) -> Path:
        return self.root / "config" / "triton-backend" / "trusted"

    @property
    def extra(self) -> Path:
        return self.root / "extra"

    def env(self) -> dict[str, str]:
        return {"XDG_CONFIG_HOME": str(self.root / "config"), "TRITON_BACKEND_TRUSTED_KEYS": str(self.extra)}

    def load(self) -> tuple[TrustStore, list[TrustStoreError]]:
        return load_trust_store(self.env())


@pytest.fixture()
def place(tmp_path: Path) -> Place:
    place = Place(tmp_path)
    place.user.mkdir(parents=True)
    place.extra.mkdir()
    return place


def new_key(place: Place, name: str) -> signing.SigningKey:
    """A key pair whose public half is trusted in the user directory."""
    signing.generate(place.root / f"{name}.pem", place.user / f"{name}.pub", f"vendor {name}", None)
    key = signing.load(place.root / f"{name}.pem")
    return dataclasses.replace(key, public=dataclasses.replace(key.public, comment=f"vendor {name}"))


def release(elf_files: ElfFixtures, keys: list[signing.SigningKey], name: str, version: str) -> bytes:
    return signing.seal_with(dataclasses.replace(sample(elf_files), name=name, version=version), keys)


def admit(store: TrustStore, envelope: bytes) -> tuple[str, ...]:
    """What the verifier does: signatures first, then parse the verified bytes, then scope and floor."""
    verified = dsse.verify(dsse.decode(envelope, "m.json"), store, "m.json")
    manifest = manifest_from_statement(verified.payload, "m.json")
    return admit_signers(store, verified.keyids, manifest.name, manifest.version, "m.json")


def refusal(store: TrustStore, envelope: bytes) -> TrustStoreError:
    with pytest.raises(TrustStoreError) as err:
        admit(store, envelope)
    return err.value


# --- scopes -------------------------------------------------------------------------------


def test_scoped_key_counts_only_for_its_names(elf_files: ElfFixtures, place: Place) -> None:
    a, b = new_key(place, "a"), new_key(place, "b")
    (place.user / "scopes").write_text(f"# vendor a builds one backend\n{a.public.keyid} Triton_Foo  # inline\n")
    store, problems = place.load()
    assert problems == [] and set(store.keys) == {a.public.keyid, b.public.keyid}
    # Any spelling of the name PEP 503 normalises to the scoped one is the same distribution.
    assert admit(store, release(elf_files, [a], "triton.foo", "1.0")) == (a.public.keyid,)
    error = refusal(store, release(elf_files, [a], "triton-bar", "1.0"))
    assert error.code == "trust.scope" and error.path == "m.json"
    assert a.public.keyid[:16] in error.detail and "vendor a" in error.detail and "triton-foo" in error.detail
    assert f"{place.user / 'scopes'}:2" in error.detail
    # An unscoped key signs anything; the out-of-scope signature simply does not count.
    assert admit(store, release(elf_files, [a, b], "triton-bar", "1.0")) == (b.public.keyid,)
    assert admit(store, release(elf_files, [a, b], "triton-foo", "1.0")) == (a.public.keyid, b.public.keyid)


def test_threshold_two_with_one_signer_out_of_scope(elf_files: ElfFixtures, place: Place) -> None:
    a, b = new_key(place, "a"), new_key(place, "b")
    (place.user / "threshold").write_text("2\n")
    (place.extra / "scopes").write_text(f"{a.public.keyid} triton-foo\n")
    store, problems = place.load()
    assert problems == [] and store.threshold == 2
    both_bar = release(elf_files, [a, b], "triton-bar", "1.0")
    # Both signatures are valid (dsse.verify passes), yet only one of them counts for triton-bar.
    assert dsse.verify(dsse.decode(both_bar, "m.json"), store, "m.json").keyids == (a.public.keyid, b.public.keyid)
    error = refusal(store, both_bar)
    assert error.code == "trust.scope" and error.detail.startswith("1 of 2 required signatures count for triton-bar")
    assert a.public.keyid[:16] in error.detail and b.public.keyid[:16] not in error.detail
    assert admit(store, release(elf_files, [a, b], "triton-foo", "1.0")) == (a.public.keyid, b.public.keyid)
    # Fewer signers than the threshold passed in (a caller's mistake) is refused, never admitted.
    with pytest.raises(TrustStoreError, match="only 1 valid signature") as err:
        admit_signers(store, [b.public.keyid], "triton-foo", "1.0", "m.json")
    assert err.value.code == "trust.scope"


def test_scopes_merge_to_the_intersection(elf_files: ElfFixtures, place: Place) -> None:
    a, b = new_key(place, "a"), new_key(place, "b")
    (place.user / "scopes").write_text(f"{a.public.keyid} foo,bar\n{b.public.keyid} foo\n")
    (place.extra / "scopes").write_text(f"{a.public.keyid} bar baz\n")
    also = place.root / "more"
    also.mkdir()
    (also / "scopes").write_text(f"{b.public.keyid} qux\n")  # disjoint: b now signs nothing
    env = place.env() | {"TRITON_BACKEND_TRUSTED_KEYS": f"{place.extra}{os.pathsep}{also / 'scopes'}"}
    store, problems = load_trust_store(env)
    assert problems == []
    assert store.scopes[a.public.keyid].names == {"bar"} and len(store.scopes[a.public.keyid].sources) == 2
    assert store.scopes[b.public.keyid].names == frozenset()
    assert admit_signers(store, [a.public.keyid], "bar", "1", "m") == (a.public.keyid,)
    for name in ("foo", "baz"):
        assert refusal(store, release(elf_files, [a], name, "1.0")).code == "trust.scope"
    error = refusal(store, release(elf_files, [b], "foo", "1.0"))
    assert "may sign only no distribution" in error.detail
    # A duplicate line in one file narrows too; a key scoped anywhere is scoped everywhere.
    (place.extra / "scopes").write_text(f"{a.public.keyid} bar,baz\n{a.public.keyid} baz\n")
    store, _ = place.load()
    assert store.scopes[a.public.keyid].names == frozenset() and b.public.keyid in store.scopes


# --- floors -------------------------------------------------------------------------------


def test_floor_rejects_rollback_and_the_highest_floor_applies(elf_files: ElfFixtures, place: Place) -> None:
    a = new_key(place, "a")
    (place.user / "min-versions").write_text("triton_foo 1.0\nother 5\n")
    (place.extra / "min-versions").write_text("# after the CVE fix\nTriton.Foo 2.0\n")
    loose = place.root / "min-versions"
    loose.write_text("triton-foo 1.5\n")
    env = place.env() | {"TRITON_BACKEND_TRUSTED_KEYS": f"{loose}{os.pathsep}{place.extra}"}
    store, problems = load_trust_store(env)
    assert problems == []
    floor = store.floors["triton-foo"]
    assert (floor.version, floor.source) == ("2.0", f"{place.extra / 'min-versions'}:2")
    error = refusal(store, release(elf_files, [a], "triton-foo", "1.9"))
    assert error.code == "trust.rollback" and error.path == "m.json"
    assert error.detail == f"triton-foo version 1.9 is below the floor 2.0 set in {place.extra / 'min-versions'}:2"
    assert admit(store, release(elf_files, [a], "triton-foo", "2.0")) == (a.public.keyid,)
    assert admit(store, release(elf_files, [a], "triton-foo", "2.0.post1")) == (a.public.keyid,)
    for version in ("2.0rc1", "0.9", "not-a-version"):
        with pytest.raises(TrustStoreError) as err:
            check_floor(store, "TRITON_FOO", version, "m.json")
        assert err.value.code == "trust.rollback" and version in err.value.detail
    check_floor(store, "no-floor-here", "0.0.1", "m.json")
    check_floor(store, "triton-foo", "1!0.1", "m.json")  # a higher epoch is a higher version


def test_scope_is_checked_before_the_floor(elf_files: ElfFixtures, place: Place) -> None:
    a = new_key(place, "a")
    (place.user / "scopes").write_text(f"{a.public.keyid} triton-foo\n")
    (place.user / "min-versions").write_text("triton-bar 9\ntriton-foo 9\n")
    store, _ = place.load()
    assert refusal(store, release(elf_files, [a], "triton-bar", "1.0")).code == "trust.scope"
    assert refusal(store, release(elf_files, [a], "triton-foo", "1.0")).code == "trust.rollback"


# --- malformed lines ----------------------------------------------------------------------


def test_malformed_lines_are_reported_with_file_and_line_and_fail_closed(place: Place) -> None:
    a = new_key(place, "a")
    good, bad_names, bare = "1" * 64, "2" * 64, "3" * 64
    scopes = place.user / "scopes"
    scopes.write_text(
        "# keyid names\n"
        f"{good} foo\n"
        "deadbeef foo\n"                       # 3: not a keyid: skipped
        f"{bad_names} ok-name,-bad-,b@d\n"     # 4: the readable names only
        f"{bare}\n"                            # 5: no name: scoped to nothing
        f"{a.public.keyid.upper()} foo\n"      # upper-case hex is the same keyid
    )
    floors = place.extra / "min-versions"
    floors.write_text(
        "foo 1.0\n"
        "!!! 2.0\n"                            # 2: no distribution name: skipped
        "bar banana\n"                         # 3: bad version: nothing of bar is admitted
        "baz\n"                                # 4: no version: nothing of baz is admitted
        "qux 1.0 2.0\n"                        # 5: too many fields: nothing of qux is admitted
    )
    store, problems = place.load()
    assert [(p.code, p.path) for p in problems] == [
        ("trust.scope-format", f"{scopes}:3"),
        ("trust.scope-format", f"{scopes}:4"),
        ("trust.scope-format", f"{scopes}:5"),
        ("trust.min-version-format", f"{floors}:2"),
        ("trust.min-version-format", f"{floors}:3"),
        ("trust.min-version-format", f"{floors}:4"),
        ("trust.min-version-format", f"{floors}:5"),
    ]
    assert "'-bad-'" in problems[1].detail and "'b@d'" in problems[1].detail
    assert store.scopes[good].names == {"foo"} and store.scopes[bad_names].names == {"ok-name"}
    assert store.scopes[bare].names == frozenset() and store.scopes[a.public.keyid].names == {"foo"}
    assert "deadbeef" not in store.scopes and set(store.floors) == {"foo", "bar", "baz", "qux"}
    check_floor(store, "foo", "1.0", "m")
    for name in ("bar", "baz", "qux"):
        with pytest.raises(TrustStoreError, match="unreadable") as err:
            check_floor(store, name, "99", "m")
        assert err.value.code == "trust.rollback" and f"{floors}:" in err.value.detail
    # An unreadable floor outranks any readable one, from any location.
    (place.user / "min-versions").write_text("bar 1.0\n")
    store, _ = place.load()
    assert store.floors["bar"].version is None


def test_trust_sources_list_scopes_and_floors(place: Place) -> None:
    (place.user / "scopes").write_text("")
    (place.extra / "min-versions").write_text("")
    (place.extra / ".min-versions.abc.tmp").write_text("foo 9\n")  # a write in progress is not read
    named = place.root / "scopes"
    named.write_text("")
    env = place.env() | {"TRITON_BACKEND_TRUSTED_KEYS": f"{place.extra}{os.pathsep}{named}"}
    sources = trust_sources(env)
    assert str(place.user / "scopes") in sources and str(place.extra / "min-versions") in sources
    assert str(named) in sources and not any(s.endswith(".tmp") for s in sources)


def test_atomic_write_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "scopes"
    write_atomic(str(target), b"one\n")
    write_atomic(str(target), b"two\n")
    assert target.read_bytes() == b"two\n" and os.listdir(tmp_path) == ["scopes"]
    assert target.stat().st_mode & 0o777 == 0o644
    blocker = tmp_path / "min-versions"
    blocker.mkdir()  # os.replace onto a directory fails: the temporary file must go
    with pytest.raises(OSError):
        write_atomic(str(blocker), b"foo 1\n")
    assert sorted(os.listdir(tmp_path)) == ["min-versions", "scopes"] and os.listdir(blocker) == []


def test_a_writer_killed_before_its_rename_leaves_nothing_for_long(tmp_path: Path) -> None:
    """kill -9 between the temporary's write and the rename: the target is untouched, and
    the next write removes that writer's temporary (its pid is gone); a live writer's stays."""
    target = tmp_path / "min-versions"
    write_atomic(str(target), b"triton 3.9\n")
    child = (
        "import os, signal, sys; sys.path.insert(0, sys.argv[2])\n"
        "from triton_backend_runtime.base import atomicfile\n"
        "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomicfile.write_atomic(sys.argv[1], b'half' * 1000)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(target), str(RUNTIME)], capture_output=True)
    assert done.returncode == -9
    leftover = [n for n in os.listdir(tmp_path) if n != "min-versions"]
    assert len(leftover) == 1 and leftover[0].endswith(".tmp")  # the kill really left it
    assert target.read_bytes() == b"triton 3.9\n"
    live = tmp_path / f".min-versions.{os.getpid()}-live.tmp"  # a writer still running
    live.write_bytes(b"")
    write_atomic(str(target), b"triton 3.10\n")
    assert sorted(os.listdir(tmp_path)) == sorted(["min-versions", live.name])
    assert target.read_bytes() == b"triton 3.10\n"


# --- the trust command ----------------------------------------------------------------------


@dataclasses.dataclass
class Cli:
    python: Path
    system: Path  # <sys.prefix>/etc/triton-backend/trusted of the throwaway environment
    place: Place

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON", "XDG_"))}
        paths = [str(RUNTIME), *site.getsitepackages()]  # the runtime, packaging, cryptography
        env |= self.place.env() | {
            "HOME": str(self.place.root / "home"), "PYTHONPATH": os.pathsep.join(paths),
            "TRITON_BACKEND_CACHE_DIR": str(self.place.root / "cache"),
        }
        command = [str(self.python), "-m", "triton_backend_runtime", "trust", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=self.place.root)


@pytest.fixture()
def cli(place: Place) -> Cli:
    venv = place.root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return Cli(venv / "bin" / "python", venv / "etc" / "triton-backend" / "trusted", place)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    # Each use is input that cannot be used: exit 2 (the runtime CLI's grammar).
    assert result.returncode == 2 and result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m triton_backend_runtime: error: "), result.stderr
    return lines[0]


def test_cli_add_with_scope(cli: Cli, place: Place) -> None:
    public = signing.generate(place.root / "k.pem", place.root / "k.pub", "vendor k", None)
    result = cli("add", str(place.root / "k.pub"), "--scope", "Triton_Foo,triton-bar", "--user")
    assert result.returncode == 0, result.stderr
    scopes = place.user / "scopes"
    assert scopes.read_text() == f"{public.keyid} triton-bar,triton-foo\n"
    assert (place.user / f"{public.keyid[:16]}.pub").read_text() == (place.root / "k.pub").read_text()
    listing = cli("list")
    assert listing.returncode == 0, listing.stderr
    assert f"{public.keyid}  vendor k" in listing.stdout
    assert f"scope: triton-bar, triton-foo ({scopes}:1)" in listing.stdout
    # --scope again replaces the key's line in that directory; without --scope it is kept.
    scopes.write_text(f"# ours\n{'9' * 64} other\n{scopes.read_text()}")
    assert cli("add", str(place.root / "k.pub"), "--scope", "triton-baz", "--user").returncode == 0
    assert scopes.read_text() == f"# ours\n{'9' * 64} other\n{public.keyid} triton-baz\n"
    assert cli("add", str(place.root / "k.pub"), "--user").returncode == 0
    store, problems = place.load()
    assert problems == [] and store.scopes[public.keyid].names == {"triton-baz"}
    assert sorted(os.listdir(place.user)) == [f"{public.keyid[:16]}.pub", "scopes"]  # no temporary file left
    listing = cli("list")
    assert f"scope {'9' * 64}: other ({scopes}:2; no such trusted key)" in listing.stdout
    # Without --user: the environment's own directory, <sys.prefix>/etc/triton-backend/trusted.
    assert cli("add", str(place.root / "k.pub"), "--scope", "triton-foo").returncode == 0
    assert (cli.system / "scopes").read_text() == f"{public.keyid} triton-foo\n"
    store, _ = load_trust_store(place.env() | {"TRITON_BACKEND_TRUSTED_KEYS": str(cli.system)})
    assert store.scopes[public.keyid].names == frozenset()  # triton-baz here, triton-foo there: nothing


def test_cli_min_version(cli: Cli, place: Place) -> None:
    floors = place.user / "min-versions"
    result = cli("min-version", "Triton_Foo", "1.2", "--user")
    assert result.returncode == 0, result.stderr
    assert floors.read_text() == "triton-foo 1.2\n"
    assert cli("min-version", "triton.foo", "2.0", "--user").returncode == 0
    assert floors.read_text() == "triton-foo 2.0\n"
    assert cli("min-version", "triton-foo", "3.0").returncode == 0  # the system directory
    assert (cli.system / "min-versions").read_text() == "triton-foo 3.0\n"
    # The environment's 3.0 and the user's 2.0: the higher floor applies, wherever it is set.
    listing = cli("list")
    assert listing.returncode == 0
    assert listing.stdout.splitlines() == [f"min-version triton-foo 3.0  ({cli.system / 'min-versions'}:1)"]
    store, _ = load_trust_store(place.env() | {"TRITON_BACKEND_TRUSTED_KEYS": str(cli.system)})
    with pytest.raises(TrustStoreError, match="below the floor 3.0") as err:
        check_floor(store, "triton-foo", "2.5", "m")
    assert err.value.code == "trust.rollback"
    # Invalid input: one line on stderr, exit 2, nothing written.
    line = one_error_line(cli("min-version", "triton-foo", "1.x", "--user"))
    assert "'1.x' is not a PEP 440 version" in line
    assert "not a distribution name" in one_error_line(cli("min-version", "foo@bar", "1.0", "--user"))
    assert floors.read_text() == "triton-foo 2.0\n" and os.listdir(place.user) == ["min-versions"]


def test_cli_errors_and_usage(cli: Cli, place: Place) -> None:
    signing.generate(place.root / "k.pem", place.root / "k.pub", "vendor k", None)
    line = one_error_line(cli("add", str(place.root / "k.pub"), "--scope", "ok,b@d", "--user"))
    assert line.endswith("--scope: 'b@d' is not a distribution name or KIND:NAME (KIND one of backend, pass, "
                         "dialect, op) (input.name)")
    assert not place.user.joinpath("scopes").exists() and not any(place.user.glob("*.pub"))
    assert "no such file" in one_error_line(cli("add", str(place.root / "missing.pub"), "--user")).lower()
    for args in (["add"], ["min-version", "foo"], ["frob"], []):
        result = cli(*args)
        assert result.returncode == 2 and "usage:" in result.stderr, (args, result)
    (place.user / "scopes").write_text("not-a-keyid foo\n")
    listing = cli("list")
    assert listing.returncode == 1
    assert f"{place.user / 'scopes'}:1: expected" in listing.stderr and "(trust.scope-format)" in listing.stderr


def test_floor_holds_for_a_release_without_a_manifest(place: Place, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Downgrading to an unsigned (legacy) release below the floor is a rollback too."""
    from triton_backend_runtime.loading import registry

    site_dir = tmp_path / "site"
    info = site_dir / "demo_backend-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-backend\nVersion: 1.0\n\n")
    (info / "entry_points.txt").write_text("[triton.backends]\ndemo = demo_backend\n")
    for key, value in {**place.env(), "TRITON_BACKEND_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "path", [str(site_dir), *sys.path])

    def legacy_entry() -> registry.Entry:
        reg = registry.Registry()
        reg.verify(backends_dir=None)
        (entry,) = reg.entries
        return entry

    assert legacy_entry().trust == "legacy"  # no floor: loaded as Triton would
    place.extra.mkdir(parents=True, exist_ok=True)
    (place.extra / "min-versions").write_text("demo-backend 1.1\n")
    entry = legacy_entry()
    assert (entry.trust, entry.reason.code if entry.reason else None) == ("rejected", "trust.rollback")


# -- trust files linked to /proc and /dev --------------------------------------------------


@pytest.mark.parametrize("target", ["/proc/self/mem", "/proc/kmsg", "/proc/self/pagemap", "/dev/zero", "/proc/self"])
def test_a_trust_file_linked_to_proc_or_dev_is_a_reason_not_a_hang(env: TrustEnv, site: Path, target: str) -> None:
    """Opened without blocking (``/proc/kmsg`` waits for kernel messages), read within the
    bound (``/proc/self/pagemap`` is a "regular" file of size 0 with gigabytes in it): the
    trust file is one problem with a code, the trusted key beside it still verifies."""
    if not os.path.exists(target):
        pytest.skip(f"{target} is not on this machine")
    write_dist(site).sign(env.key)
    (env.trust / "linked.pub").symlink_to(target)
    reg = env.registry(site, policy="warn")
    demo = entry(reg, "demo")
    expected = "trust.key-format" if target == "/proc/self/pagemap" else "trust.read"  # read, bounded: not a key
    assert [(p.code, p.path.split(".pub")[0]) for p in reg.problems] == [(expected, str(env.trust / "linked"))]
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)


def test_a_name_or_scope_that_names_no_distribution_is_refused() -> None:
    """The names ``trust add --scope`` and the floor commands take: PEP 508 names, at least one;
    anything else is the argument's error, never a scope that grants less (or more)."""
    for parse, text in [(parse_name, "not a name!"), (parse_scope, "triton-foo,@@"), (parse_scope, " , ")]:
        with pytest.raises(TrustStoreError) as caught:
            parse(text, "--scope")
        assert caught.value.code == "trust.name-format", text
    assert parse_name("Triton_Foo", "--scope") == "triton-foo"
