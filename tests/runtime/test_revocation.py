"""Revocation never fails open: the ids the tools print revoke, a bad line fails closed.

Real signed distributions (``helpers.disttree``) under a real trust store; the CLI run in
process through ``main(argv)``, its exit code and its one error line checked by reason code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers.disttree import TrustEnv, make_key, write_dist
from triton_backend_runtime.cli.main import PROG, main
from triton_backend_runtime.loading.registry import Registry
from triton_backend_runtime.trust import revocation
from triton_backend_runtime.trust.keys import PublicKey, TrustStore, keyid_of, load_trust_store
from triton_backend_runtime.trust.paths import user_trust_dir

pytestmark = pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")


def demo(reg: Registry) -> tuple[str, str, str | None]:
    """(trust, state, reason code) of the demo backend."""
    found = next(e for e in reg.entries if e.name == "demo")
    return found.trust, found.state, found.reason.code if found.reason else None


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def error_code(err: str) -> str:
    """The code of the one error line."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: "), err
    found = re.search(r" \(([a-z]+\.[a-z0-9-]+)\)$", lines[0])
    assert found, lines[0]
    return found.group(1)


def spellings(keyid: str) -> dict[str, str]:
    return {
        "short": keyid[:16], "short-upper": keyid[:16].upper(), "full-upper": keyid.upper(),
        "keyid-prefix": f"keyid:{keyid[:16]}", "keyid-space-full": f"KEYID: {keyid}", "twenty": keyid[:20],
    }


@pytest.mark.parametrize("form", list(spellings("0" * 64)))
def test_every_spelling_the_tools_print_revokes(env: TrustEnv, site: Path, form: str) -> None:
    write_dist(site).sign(env.key)
    (env.trust / "revoked").write_text(f"# compromised\n{spellings(env.key.keyid)[form]}  # since today\n")
    reg = env.registry(site, policy="warn")
    assert demo(reg) == ("rejected", "excluded", "signature.signature")
    assert reg.problems == []
    reason = next(e for e in reg.entries if e.name == "demo").reason
    assert reason is not None and "is revoked" in reason.message and f"{env.trust / 'revoked'}:2" in reason.message


def test_a_prefix_revokes_every_key_that_has_it_and_no_other() -> None:
    keys = [PublicKey(keyid_of(bytes([n]) * 32), bytes([n]) * 32) for n in range(3)]
    store = TrustStore.of(keys, revoked={keys[0].keyid[:16].upper()})
    assert store.revoked_by(keys[0].keyid) == keys[0].keyid[:16]
    assert store.check(keys[0].keyid, b"x" * 64, b"m") == (
        f"key {keys[0].keyid[:16]} is revoked ({keys[0].keyid[:16]} in the trust store)")
    assert store.revoked_by(keys[1].keyid) is None and store.revoked_by(keys[2].keyid) is None
    assert revocation.revoking({"ab" * 8}, "AB" * 32) == "ab" * 8


@pytest.mark.parametrize("text", ["deadbeef", "0" * 15, "0" * 65, "g" * 16, "keyid:", "", "0" * 16 + "x",
                                  "0" * 16 + " 1"])
def test_what_is_not_an_id(text: str) -> None:
    assert revocation.parse_id(text) is None


@pytest.mark.parametrize("policy", ["strict", "warn"])
def test_an_unreadable_line_fails_closed_under_strict_and_warns_under_warn(env: TrustEnv, site: Path,
                                                                          policy: str) -> None:
    write_dist(site).sign(env.key)
    (env.trust / "revoked").write_text("# the compromised key\nthe one from yesterday\n")
    reg = env.registry(site, policy=policy)
    assert [(p.code, p.path) for p in reg.problems] == [("trust.revoked-format", f"{env.trust / 'revoked'}:2")]
    assert "no signature counts until the line is fixed" in reg.problems[0].message
    trust, state, code = demo(reg)
    assert trust == "unverified"  # no key counts: the signature grants no trust
    assert (state, code) == (("excluded", "policy.not-verified") if policy == "strict" else ("loaded", None))
    note = next(e for e in reg.entries if e.name == "demo").note
    assert "the revocation list is unreadable" in note


def test_a_line_that_starts_with_an_id_revokes_that_id(env: TrustEnv, site: Path) -> None:
    write_dist(site).sign(env.key)
    (env.trust / "revoked").write_text(f"{env.key.keyid[:20]}, the vendor's old key\n")
    reg = env.registry(site, policy="strict")
    assert [p.code for p in reg.problems] == ["trust.revoked-format"]
    assert f"keys whose keyid starts with {env.key.keyid[:20]} are revoked" in reg.problems[0].message
    assert demo(reg) == ("rejected", "excluded", "signature.signature")


@pytest.mark.parametrize("kind", ["directory", "fifo", "over-1MiB", "latin-1"])
def test_a_revoked_file_that_cannot_be_read_whole_fails_closed(env: TrustEnv, site: Path, kind: str) -> None:
    write_dist(site).sign(env.key)
    path = env.trust / "revoked"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "over-1MiB":  # the revocation past the first MiB must not be dropped unread
        path.write_text("# padding\n" * (1 << 17) + f"{env.key.keyid}\n")
    else:
        path.write_bytes(b"\xff" + env.key.keyid.encode() + b"\n")
    reg = env.registry(site, policy="strict")
    assert [(p.code, p.path) for p in reg.problems] == [("trust.read", str(path))]
    assert demo(reg) == ("unverified", "excluded", "policy.not-verified")


def test_the_cli_revokes_and_takes_back(env: TrustEnv, site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_dist(site).sign(env.key)
    keyid = env.key.keyid
    assert run(capsys, "trust", "revoke", f"keyid:{keyid[:16].upper()}", "--user")[0] == 0
    revoked = Path(user_trust_dir()) / "revoked"
    assert revoked.read_text() == f"{keyid[:16]}\n"
    code, out, _ = run(capsys, "trust", "revoke", keyid, "--user")  # the prefix already revokes it
    assert code == 0 and out.startswith(f"already revoked: {revoked}:1: {keyid[:16]}")
    assert revoked.read_text() == f"{keyid[:16]}\n"
    assert demo(env.registry(site, policy="strict")) == ("rejected", "excluded", "signature.signature")

    code, out, _ = run(capsys, "trust", "unrevoke", keyid.upper(), "--user")
    assert code == 0 and f"took back {keyid[:16]}" in out and "trusted: its signatures count" in out
    assert revoked.read_text() == ""
    code, _, err = run(capsys, "trust", "unrevoke", keyid, "--user")
    assert code == 1 and error_code(err) == "trust.not-revoked"
    assert demo(env.registry(site, policy="strict")) == ("verified", "loaded", None)


@pytest.mark.parametrize("text", ["deadbeef", "0" * 65, "not-a-key", "keyid:", "9" * 5000])
def test_the_cli_refuses_what_is_not_an_id(env: TrustEnv, capsys: pytest.CaptureFixture[str], text: str) -> None:
    for action in ("revoke", "unrevoke"):
        code, _, err = run(capsys, "trust", action, text, "--user")
        assert (code, error_code(err)) == (2, "input.keyid")
    assert not (Path(user_trust_dir()) / "revoked").exists()


def test_revoking_an_unknown_id_says_it_matches_nothing(env: TrustEnv, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "trust", "revoke", "ab" * 8, "--user")
    assert code == 0 and "no trusted key has this keyid now: a key with it is refused when added" in out


def test_trust_list_shows_only_what_is_in_effect(env: TrustEnv, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    other = make_key(tmp_path / "keys", "other")
    (env.trust / "other.pub").write_bytes(other.pub.read_bytes())
    nothing = "ab" * 8
    (env.trust / "revoked").write_text(f"{env.key.keyid[:16].upper()}\n{nothing}\n")
    code, out, _ = run(capsys, "trust", "list")
    assert code == 0
    lines = out.splitlines()
    assert [line for line in lines if line.startswith(other.keyid)], out  # still trusted
    assert not [line for line in lines if line.startswith(env.key.keyid)], "a revoked key is not listed as trusted"
    assert [line for line in lines if line.startswith(f"revoked {env.key.keyid}")], out
    assert not [line for line in lines if line.startswith(f"revoked {nothing}")], "it revokes nothing"
    assert f"revocation {nothing} ({env.trust / 'revoked'}:2): matches no trusted key, revokes nothing now" in out


def test_trust_list_shows_no_key_in_effect_while_revocations_are_unreadable(
        env: TrustEnv, capsys: pytest.CaptureFixture[str]) -> None:
    (env.trust / "revoked").write_text("0x1234\n")
    code, out, err = run(capsys, "trust", "list")
    assert code == 1 and error_code(err) == "trust.revoked-format"
    assert out.startswith(f"suspended {env.key.keyid}") and "the revocation list is unreadable" in out
    store, _ = load_trust_store()
    assert store.suspended() is not None and store.check(env.key.keyid, b"s", b"m") == store.suspended()


def test_numbers_from_the_command_line_and_trust_files_are_bounded(
        env: TrustEnv, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "trust", "min-version", "triton", "9" * 5000, "--user")
    assert (code, error_code(err)) == (2, "input.version")
    code, _, err = run(capsys, "trust", "min-version", "triton", "1." + "0" * 300, "--user")
    assert (code, error_code(err)) == (2, "input.version")
    (env.trust / "threshold").write_text("9" * 5000)
    (env.trust / "min-versions").write_text("triton " + "1" * 5000 + "\n")
    store, problems = load_trust_store()
    assert sorted(p.code for p in problems) == ["trust.min-version-format", "trust.threshold"]
    assert store.threshold == 1 and store.floors["triton"].version is None
