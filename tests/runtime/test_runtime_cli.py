"""The runtime CLI's grammar: --version, -q/-v, --json with "format", trust remove, exit
codes (0 ok, 1 checked failure, 2 usage or unusable input), closed pipes, OSErrors, and the
one error line ``PROG: error: PATH: DETAIL (CODE)`` (input.*, trust.*, file.*, error.internal).

The CLI runs as a subprocess from a throwaway environment (its ``sys.prefix`` is the system
trust location) with the user's config and cache under tmp_path, so nothing touches this
machine's trust store. Without Triton installed there, doctor and list find a problem
(``load.triton``): a checked failure, exit 1.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest
from triton_backend_runtime import __version__

from backend_packager.manifest import signing

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
PROG = "python -m triton_backend_runtime"


class Cli:
    def __init__(self, root: Path) -> None:
        self.root = root
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        self.python = venv / "bin" / "python"
        self.system = venv / "etc" / "triton-backend" / "trusted"
        self.user = root / "config" / "triton-backend" / "trusted"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON", "XDG_"))}
        paths = [str(RUNTIME), *site.getsitepackages()]  # the runtime, packaging, cryptography
        return env | {"XDG_CONFIG_HOME": str(self.root / "config"), "HOME": str(self.root / "home"),
                      "PYTHONPATH": os.pathsep.join(paths), "TRITON_BACKEND_CACHE_DIR": str(self.root / "cache")}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.python), "-m", "triton_backend_runtime", *args]
        return subprocess.run(command, capture_output=True, text=True, env=self.env(), cwd=self.root)

    def key(self, name: str) -> tuple[str, Path]:
        public = signing.generate(self.root / f"{name}.pem", self.root / f"{name}.pub", name, None)
        return public.keyid, self.root / f"{name}.pub"


@pytest.fixture()
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


#: The end of every error line: its code, as the packager's lines end.
CODE_AT_END = re.compile(r" \((?:[a-z]+)\.[a-z0-9-]+\)$")


def one_error(result: subprocess.CompletedProcess[str], code: int, reason: str | None = None) -> str:
    """The one error line of ``result`` (``PROG: error: PATH: DETAIL (CODE)``), which exited
    with ``code``; ``reason``, when given, is the CODE the line must end with."""
    assert result.returncode == code, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: "), result.stderr
    assert CODE_AT_END.search(lines[0]), lines[0]
    assert reason is None or lines[0].endswith(f" ({reason})"), (reason, lines[0])
    assert "Traceback" not in result.stderr
    return lines[0]


def test_version(cli: Cli) -> None:
    result = cli("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"{PROG} {__version__}")


def test_list_and_doctor_json_carry_the_format(cli: Cli) -> None:
    listing = cli("list", "--json")
    doc = json.loads(listing.stdout)
    assert doc["format"] == 1 and listing.returncode == 1
    assert [p["code"] for p in doc["problems"]] == ["load.triton"]
    doctor = cli("doctor", "--json")
    report = json.loads(doctor.stdout)
    assert (report["format"], report["healthy"], doctor.returncode) == (1, False, 1)
    assert report["hook"] == {"installed": False, "path": report["hook"]["path"], "first": None, "before": [],
                              "before_importing": [], "old_names": [], "imported_before_hook": None}
    assert report["problems"] == doc["problems"] and report["backends"] == doc["backends"] == []


def test_quiet_prints_nothing_but_the_exit_code_tells(cli: Cli) -> None:
    for args in (["-q", "doctor"], ["doctor", "-q"], ["list", "--quiet"]):
        result = cli(*args)
        assert (result.returncode, result.stdout) == (1, ""), (args, result)
    keyid, pub = cli.key("k")
    added = cli("trust", "add", str(pub), "--user", "-q")
    assert (added.returncode, added.stdout) == (0, "")
    # --json is what was asked for: -q does not hide it.
    assert json.loads(cli("-q", "list", "--json").stdout)["format"] == 1
    assert cli("-q", "-v", "doctor").returncode == 2


def test_verbose_adds_detail(cli: Cli) -> None:
    plain, verbose = cli("doctor"), cli("doctor", "-v")
    assert "Details:" not in plain.stdout and "Details:" in verbose.stdout
    assert "discovery:   entry-points" in verbose.stdout
    assert verbose.stdout.startswith(plain.stdout.rstrip("\n"))


def test_trust_remove_by_keyid_prefix_and_by_file(cli: Cli) -> None:
    one, one_pub = cli.key("one")
    two, two_pub = cli.key("two")
    for pub in (one_pub, two_pub):
        assert cli("trust", "add", str(pub), "--user").returncode == 0
    assert sorted(p.name for p in cli.user.glob("*.pub")) == sorted(f"{k[:16]}.pub" for k in (one, two))
    removed = cli("trust", "remove", one[:12], "--user")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines() == [f"removed {one} from {cli.user}"]
    assert [p.name for p in cli.user.glob("*.pub")] == [f"{two[:16]}.pub"]
    assert one not in cli("trust", "list").stdout and two in cli("trust", "list").stdout
    assert cli("trust", "remove", str(two_pub), "--user").returncode == 0
    assert list(cli.user.glob("*.pub")) == []
    # Gone already: a checked failure; nothing but the .pub files was touched.
    line = one_error(cli("trust", "remove", one, "--user"), 1, "trust.no-such-key")
    assert line.endswith(f"{cli.user}: no trusted key matches {one} (trust.no-such-key)")


def test_trust_remove_keeps_the_other_lines_of_a_file(cli: Cli) -> None:
    one, one_pub = cli.key("one")
    two, two_pub = cli.key("two")
    cli.user.mkdir(parents=True)
    shared = cli.user / "team.pub"
    shared.write_text(f"# the team's keys\n{one_pub.read_text().strip()}\n{two_pub.read_text().strip()}\n")
    assert cli("trust", "remove", one, "--user").returncode == 0
    assert shared.read_text() == f"# the team's keys\n{two_pub.read_text().strip()}\n"
    assert sorted(os.listdir(cli.user)) == ["team.pub"], "no temporary left behind"


def test_trust_remove_refuses_what_it_cannot_use(cli: Cli) -> None:
    one, one_pub = cli.key("one")
    assert cli("trust", "add", str(one_pub), "--user").returncode == 0
    assert "xyz: neither a key file nor a keyid" in one_error(cli("trust", "remove", "xyz", "--user"), 2, "input.key")
    assert "neither a key file nor a keyid" in one_error(cli("trust", "remove", one[:7], "--user"), 2, "input.key")
    private = cli.root / "one.pem"
    assert "is a private key; pass the public key" in one_error(cli("trust", "remove", str(private), "--user"), 2,
                                                                "input.key")
    assert "not a regular file" in one_error(cli("trust", "remove", str(cli.root), "--user"), 2, "input.not-a-file")
    assert list(cli.user.glob("*.pub")), "nothing removed"


def test_trust_remove_from_the_system_directory_notes_a_key_still_trusted(cli: Cli) -> None:
    one, one_pub = cli.key("one")
    assert cli("trust", "add", str(one_pub)).returncode == 0
    assert cli("trust", "add", str(one_pub), "--user").returncode == 0
    result = cli("trust", "remove", one)
    assert result.returncode == 0 and f"removed {one} from {cli.system}" in result.stdout
    assert "still trusted from another trust directory" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "reason", "text"),
    [
        (["trust", "add", "missing.pub", "--user"], 2, "input.missing", "missing.pub: cannot open: No such file"),
        (["trust", "add", "one.pem", "--user"], 2, "input.key", "one.pem: is a private key; pass the public key"),
        (["trust", "add", "big.pub", "--user"], 2, "input.too-big", "big.pub: over 1048576 bytes"),
        (["trust", "add", "latin1.pub", "--user"], 2, "input.key", "latin1.pub: cannot read key file: not UTF-8"),
        (["trust", "add", "empty.pub", "--user"], 2, "input.key", "empty.pub: the file holds no public key"),
        (["trust", "add", "one.pub", "--scope", ",", "--user"], 2, "input.name", "--scope: a scope names at least"),
        (["trust", "min-version", "triton", "1.x", "--user"], 2, "input.version", "'1.x' is not a PEP 440 version"),
        (["trust", "min-version", "bad_", "1.0", "--user"], 2, "input.name", "is not a distribution name"),
        (["hook", "install", "--site", "nowhere/at/all"], 2, "input.site-packages", "nowhere/at/all: not a dir"),
    ],
)
def test_exit_codes_and_one_line_errors(cli: Cli, args: list[str], code: int, reason: str, text: str) -> None:
    cli.key("one")
    (cli.root / "big.pub").write_bytes(b"#" * ((1 << 20) + 1))
    (cli.root / "latin1.pub").write_bytes(b"# caf\xe9\n")
    (cli.root / "empty.pub").write_text("# no key here\n")
    assert text in one_error(cli(*args), code, reason)
    assert not cli.user.exists(), "nothing was written"


def test_a_fifo_given_as_a_key_file_is_refused_not_waited_on(cli: Cli) -> None:
    """Opened without blocking: a FIFO with no writer would hang an open() forever."""
    os.mkfifo(cli.root / "fifo.pub")
    assert "fifo.pub: is not a regular file" in one_error(cli("trust", "add", "fifo.pub", "--user"), 2,
                                                           "input.not-a-file")
    assert "fifo.pub" in one_error(cli("trust", "remove", "fifo.pub", "--user"), 2, "input.not-a-file")


def test_an_os_error_line_carries_its_errno_code(cli: Cli) -> None:
    _, pub = cli.key("one")
    (cli.root / "config").write_text("a file where the config directory should be\n")
    line = one_error(cli("trust", "add", str(pub), "--user"), 1)
    assert line.endswith(("(file.enotdir)", "(file.eexist)")), line


def test_unwritable_trust_directory_is_one_line(cli: Cli) -> None:
    _, pub = cli.key("one")
    (cli.root / "config").write_text("a file where the config directory should be\n")
    assert "config" in one_error(cli("trust", "add", str(pub), "--user"), 1)


def test_a_long_output_into_a_closed_pipe_is_not_an_error(cli: Cli) -> None:
    # More than a pipe buffer: print itself fails, inside the command (not at the final flush).
    cli.user.mkdir(parents=True)
    (cli.user / "revoked").write_text("".join(f"{i:064x}\n" for i in range(5000)))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([str(cli.python), "-m", "triton_backend_runtime", "trust", "list"], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, env=cli.env(), cwd=cli.root)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


def test_usage_errors_exit_2(cli: Cli) -> None:
    for args in ([], ["frob"], ["trust", "remove"], ["doctor", "--nope"]):
        result = cli(*args)
        assert result.returncode == 2 and "usage:" in result.stderr, (args, result)


@pytest.mark.parametrize("args", [["--version"], ["list", "--json"], ["doctor"], ["trust", "list", "-v"]])
def test_a_closed_pipe_ends_quietly(cli: Cli, args: list[str]) -> None:
    # The reader is gone before anything is written (`| head -0`): every write fails with
    # EPIPE, deterministically. No traceback, no "Exception ignored" at exit.
    cli.user.mkdir(parents=True)
    (cli.user / "revoked").write_text("0" * 64 + "\n")  # so that trust list prints a line
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([str(cli.python), "-m", "triton_backend_runtime", *args], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, env=cli.env(), cwd=cli.root)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


def test_a_prefix_matching_two_keys_is_refused_before_anything_is_removed(cli: Cli) -> None:
    """Two real key lines whose keyids share their first 8 hex digits (found by a birthday
    search over raw 32-byte keys: the trust store reads any 32 bytes as an Ed25519 key)."""
    from triton_backend_runtime.trust.keys import PublicKey, keyid_of

    seen: dict[str, bytes] = {}
    for number in range(1 << 20):
        raw = number.to_bytes(32, "big")
        prefix = keyid_of(raw)[:8]
        if prefix in seen:
            break
        seen[prefix] = raw
    first, second = PublicKey(keyid_of(seen[prefix]), seen[prefix]), PublicKey(keyid_of(raw), raw)
    cli.user.mkdir(parents=True)
    (cli.user / "a.pub").write_text(first.line() + "\n")
    (cli.user / "b.pub").write_text(second.line() + "\n")
    line = one_error(cli("trust", "remove", prefix, "--user"), 2, "input.ambiguous")
    assert f"{prefix}: the prefix matches 2 keys" in line
    assert sorted(p.name for p in cli.user.glob("*.pub")) == ["a.pub", "b.pub"], "nothing removed"
    assert cli("trust", "remove", first.keyid, "--user").returncode == 0
    assert [p.name for p in cli.user.glob("*.pub")] == ["b.pub"]


@pytest.mark.parametrize("args", [["--version"], ["trust", "list"]])
def test_stdout_on_a_full_disk_is_one_line(cli: Cli, args: list[str]) -> None:
    """Writing to /dev/full fails with ENOSPC at the final flush: one line, no "Exception
    ignored" from the interpreter's own flush at exit."""
    cli.user.mkdir(parents=True)
    (cli.user / "revoked").write_text("0" * 64 + "\n")
    with open("/dev/full", "w") as full:
        result = subprocess.run([str(cli.python), "-m", "triton_backend_runtime", *args], stdout=full,
                                stderr=subprocess.PIPE, text=True, env=cli.env(), cwd=cli.root)
    assert one_error(result, 1, "file.enospc").startswith(f"{PROG}: error: <stdout>: ")


# -- a bug of ours: the catch-all ----------------------------------------------------------
# A bug cannot be triggered on purpose through the real code paths (then it would be fixed),
# so these inject one: a registry or trust store that raises, in-process through main(argv).


@pytest.fixture()
def broken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from triton_backend_runtime import trust
    from triton_backend_runtime.loading import registry
    from triton_backend_runtime.trust import keys

    def bug(*_: object) -> object:
        raise KeyError("a bug")

    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "TRITON_BACKEND_CACHE_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name))
    monkeypatch.setattr(registry, "get", bug)
    # both: the layer's package keeps a name once it was asked for (its __getattr__ caches it)
    monkeypatch.setattr(keys, "load_trust_store", bug)
    monkeypatch.setattr(trust, "load_trust_store", bug)


@pytest.mark.parametrize(("args", "path"), [(["list"], "list"), (["doctor"], "doctor"), (["trust", "list"],
                                                                                           "trust list")])
@pytest.mark.usefixtures("broken")
def test_an_internal_error_is_one_line_with_its_code(capsys: pytest.CaptureFixture[str], args: list[str],
                                                     path: str) -> None:
    from triton_backend_runtime.cli.main import main

    assert main(args) == 1  # as backend-packager's error.internal
    err = capsys.readouterr().err
    assert err == f"{PROG}: error: {path}: KeyError: 'a bug' (a bug: -v shows the traceback) (error.internal)\n"


@pytest.mark.usefixtures("broken")
def test_json_gives_the_error_object(capsys: pytest.CaptureFixture[str]) -> None:
    from triton_backend_runtime.cli.main import main

    assert main(["doctor", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"format": 1, "error": {
        "code": "error.internal", "path": "doctor", "message": "KeyError: 'a bug' (a bug: -v shows the traceback)"}}
    assert err.endswith("(error.internal)\n") and err.count("\n") == 1


@pytest.mark.usefixtures("broken")
def test_verbose_shows_the_traceback_of_an_internal_error() -> None:
    from triton_backend_runtime.cli.main import main

    for args in (["-v", "list"], ["trust", "list", "-v"]):
        with pytest.raises(KeyError, match="a bug"):
            main(args)



def test_a_fifo_in_a_trust_directory_is_a_bad_trust_file_not_a_hang(cli: Cli) -> None:
    """``x.pub`` a FIFO with no writer: a plain open() blocked trust list, doctor and every
    ``import triton`` forever. It is a trust file that cannot be read (trust.read), and a
    scopes file that is one refuses the scope it was asked to set."""
    _, pub = cli.key("one")
    cli.user.mkdir(parents=True)
    os.mkfifo(cli.user / "x.pub")
    line = one_error(cli("trust", "list"), 1, "trust.read")
    assert f"{cli.user / 'x.pub'}: cannot read trust file: is not a regular file" in line
    assert [p["code"] for p in json.loads(cli("list", "--json").stdout)["problems"]] == ["load.triton"]
    os.mkfifo(cli.user / "scopes")
    assert "scopes: cannot read trust file" in one_error(cli("trust", "add", str(pub), "--scope", "a", "--user"), 1,
                                                        "trust.read")
    assert sorted(os.listdir(cli.user)) == ["scopes", "x.pub"], "no key without its scope"
