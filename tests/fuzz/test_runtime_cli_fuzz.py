"""The runtime CLI under hostile input (hypothesis, in-process through ``main(argv)``).

Each example builds a world in a scratch directory: a user trust directory whose entries
(``*.pub``, ``revoked``, ``threshold``, ``scopes``, ``min-versions``, ``pins``) are random bytes, key
lines good and bad, files over the 1 MiB bound, FIFOs, directories, symlink loops, dangling
links or links to FIFOs; ``TRITON_BACKEND_*`` and the other variables the runtime reads set to
random text or to such paths; then runs one command (``doctor``, ``list``, ``trust
list|add|remove|min-version|pin|unpin``, ``hook status|install|uninstall``) on them. It asserts the
one rule: no traceback and no ``error.internal``, an exit code in {0, 1, 2}, every stderr line
one ``PROG: error: ... (CODE)`` line, and with ``--json`` a document with ``"format": 1``
(its error object naming the code of the line). A command still running after
``HANG_SECONDS`` fails the example (a FIFO opened for reading blocks without O_NONBLOCK).

A signed distribution with a backend (``helpers.disttree``, built once) is first on
``sys.path``, so that ``doctor`` and ``list`` verify it against the hostile trust store and
verdict cache; its key is one of the things a trust file may hold. Everything is written under
the scratch directory: ``sys.prefix`` (the system trust directory), ``XDG_CONFIG_HOME`` and
``HOME`` point there while a command runs, and hook commands are always given ``--site`` there
(without it they would write this interpreter's real site-packages). ``FUZZ_EXAMPLES`` sets the
number of examples (default small, for ``make test``); ``make fuzz`` raises it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.alarm import Hang, alarm
from helpers.disttree import Key, make_key, write_dist
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.autohook import pth_path
from triton_backend_runtime.cli.main import PROG, main
from triton_backend_runtime.loading import registry
from triton_backend_runtime.trust.keys import PublicKey, keyid_of

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
HANG_SECONDS = 2.0
ERROR_LINE = re.compile(rf"^{re.escape(PROG)}: error: .* \(([a-z]+\.[a-z0-9-]+)\)$")
#: Every variable the runtime reads from the environment.
VARIABLES = ["TRITON_BACKEND_POLICY", "TRITON_BACKEND_TRUSTED_KEYS", "TRITON_BACKEND_CACHE_DIR",
             "TRITON_BACKEND_REHASH", "TRITON_PLUGIN_PATHS", "TRITON_DEFAULT_BACKEND", "TRITON_BACKENDS_IN_TREE",
             "TRITON_PLUGIN_VERSION_CHECK", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "HOME"]
TRUST_NAMES = ["a.pub", "b.pub", "revoked", "threshold", "scopes", "min-versions", "pins"]
KINDS = ["bytes", "big", "fifo", "dir", "loop", "dangling", "to-fifo", "absent", "vendor"]

# -- strategies ----------------------------------------------------------------------------

#: Text an environment variable or argv can hold: no NUL, no lone surrogate.
texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
#: A positional argument argparse takes as one (an option-like one is a usage error, tested apart).
arguments = (texts | st.sampled_from(["", ".", "..", "/", "triton", "1.0", "1.x", "a" * 300, "9" * 5000,
                                      "0" * 64, "deadbeef", "not a name", "\u00b2"])).filter(
    lambda t: not t.startswith("-"))
raw_keys = st.binary(min_size=32, max_size=32)
#: A key line's comment: one line of text (splitlines() splits at more than \n and \r).
comments = st.text(st.characters(categories=["L", "N", "P", "Zs"]), max_size=20)


@st.composite
def key_lines(draw: st.DrawFn) -> str:
    """A line of a trust file: a good key line, one whose keyid lies, or anything a trust
    file's parser meets (scope and floor lines, numbers, junk)."""
    raw = draw(raw_keys)
    good = PublicKey(keyid_of(raw), raw, draw(comments))
    return draw(st.sampled_from([
        good.line(), good.line().replace(good.keyid, "0" * 64), f"# {good.keyid}", f"{good.keyid} triton,x",
        f"{good.keyid} b@d", f"triton {draw(arguments)}", "9" * 5000, "3", "-1", good.keyid,
    ]) | texts)


contents = st.binary(max_size=600) | st.lists(key_lines(), max_size=6).map(lambda lines: "\n".join(lines).encode())
#: A key file as keygen writes it: one or two good key lines (so that trust add succeeds too).
key_files = st.lists(st.builds(lambda raw, note: PublicKey(keyid_of(raw), raw, note).line(), raw_keys, comments),
                     min_size=1, max_size=2).map(lambda lines: "\n".join(lines).encode() + b"\n")


@dataclass(frozen=True)
class Thing:
    """What a path holds: a file of ``data``, or one of the things a file's name may hold
    instead (``KINDS``)."""

    kind: str
    data: bytes


things = (st.builds(Thing, st.sampled_from(KINDS), contents) | st.builds(Thing, st.just("bytes"), contents)
          | st.builds(Thing, st.just("bytes"), key_files))


@dataclass(frozen=True)
class World:
    trust: dict[str, Thing]
    extra: list[Thing]
    cache: Thing
    site: Thing
    env: dict[str, str]


worlds = st.builds(
    World,
    trust=st.dictionaries(st.sampled_from(TRUST_NAMES), things, max_size=4),
    extra=st.lists(things, max_size=3),
    cache=things,
    site=things,
    env=st.fixed_dictionaries({}, optional={
        "TRITON_BACKEND_POLICY": st.sampled_from(["strict", "warn", "off", "STRICT", " warn", ""]) | texts,
        "TRITON_BACKEND_REHASH": st.sampled_from(["1", "0", ""]) | texts,
        "TRITON_DEFAULT_BACKEND": texts, "TRITON_BACKENDS_IN_TREE": st.sampled_from(["1", "0"]) | texts,
        "TRITON_PLUGIN_VERSION_CHECK": texts,
    }),
)

COMMANDS = ["trust add", "trust add --scope", "trust remove", "trust remove KEYID", "trust min-version",
            "trust pin", "trust unpin", "trust list", "hook install", "hook uninstall", "hook status", "doctor",
            "doctor --json", "list", "list --json", "list -v", "-q doctor", "doctor --rehash"]


@dataclass(frozen=True)
class Command:
    words: str
    target: Thing
    text: str
    other: str
    #: trust commands: ``--user``, else the system directory (under sys.prefix, in the scratch).
    option: bool


commands = st.builds(Command, st.sampled_from(COMMANDS), things, arguments, arguments, st.booleans())
#: The public key of the distribution on sys.path (set by the module's fixture).
VENDOR_PUB = Path()
NOTHING = Thing("absent", b"")
NO_ARGS = (NOTHING, "", "", True)

# -- building a world ----------------------------------------------------------------------


def make(path: Path, thing: Thing) -> Path:
    """``thing`` at ``path`` (parents made); its path, whatever it now names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if thing.kind == "bytes":
        path.write_bytes(thing.data)
    elif thing.kind == "vendor":  # the key of the installed distribution, and what data adds
        path.write_bytes(VENDOR_PUB.read_bytes() + thing.data)
    elif thing.kind == "big":
        path.write_bytes(b"#" * (1 << 20) + thing.data)
    elif thing.kind == "fifo":
        os.mkfifo(path)
    elif thing.kind == "dir":
        # A directory named where a file belongs; named in TRITON_BACKEND_TRUSTED_KEYS it is a
        # trust directory, so it holds hostile trust files of its own.
        make(path / "k.pub", Thing("bytes", thing.data))
        make(path / "revoked", Thing("fifo", b""))
    elif thing.kind == "loop":
        path.symlink_to(path.name)
    elif thing.kind == "dangling":
        path.symlink_to(f"{path.name}.absent")
    elif thing.kind == "to-fifo":
        os.mkfifo(path.with_name(f"{path.name}.target"))
        path.symlink_to(f"{path.name}.target")
    return path


def build(world: World, command: Command, scratch: Path) -> tuple[list[str], dict[str, str]]:
    """The world on disk; the argv of the command and the environment to run it in."""
    trusted = scratch / "config" / "triton-backend" / "trusted"
    trusted.mkdir(parents=True)
    for name, thing in world.trust.items():
        make(trusted / name, thing)
    extra = [str(make(scratch / f"extra{n}.pub", thing)) for n, thing in enumerate(world.extra)]
    env = dict(world.env) | {
        "XDG_CONFIG_HOME": str(scratch / "config"), "XDG_CACHE_HOME": str(scratch / "xdg-cache"),
        "HOME": str(scratch / "home"), "TRITON_BACKEND_CACHE_DIR": str(make(scratch / "cache", world.cache)),
        "TRITON_BACKEND_TRUSTED_KEYS": os.pathsep.join(extra), "TRITON_PLUGIN_PATHS": os.pathsep.join(extra),
    }
    return argv(command, make(scratch / "target.pub", command.target), make(scratch / "site", world.site),
                world), env


def argv(command: Command, target: Path, site: Path, world: World) -> list[str]:
    words = command.words.split()
    if words[0] == "hook":  # always --site: this interpreter's own is the real site-packages
        return [*words, "--site", str(site)]
    user = ["--user"] if command.option else []
    if command.words == "trust add --scope":
        return ["trust", "add", str(target), f"--scope={command.text}", *user]
    if command.words in ("trust add", "trust remove"):
        return [*words, str(target), *user]
    if command.words == "trust remove KEYID":
        return ["trust", "remove", _a_keyid(world) or command.text, *user]
    if command.words in ("trust min-version", "trust pin"):
        return [*words, command.text, command.other, *user]
    if command.words == "trust unpin":
        return [*words, command.text, *user]
    return words


def _a_keyid(world: World) -> str | None:
    """A prefix of a keyid the trust directory may hold, so that removal itself is reached."""
    for thing in world.trust.values():
        found = re.search(rb"\b[0-9a-f]{64}\b", thing.data)
        if found:
            return found.group().decode()[:12]
    return None


# -- running it ----------------------------------------------------------------------------


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in VARIABLES}
    for name in VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    warned: list[str]


@contextlib.contextmanager
def interpreter(prefix: Path, site: Path) -> Iterator[None]:
    """``sys.prefix`` in the scratch directory, ``site`` first on ``sys.path``."""
    saved = sys.prefix, sys.path[:]
    sys.prefix, sys.path[:0] = str(prefix), [str(site)]
    try:
        yield
    finally:
        sys.prefix, sys.path[:] = saved


def run(args: list[str], env: dict[str, str], cwd: Path, site: Path) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    registry.reset()
    with environment(env), contextlib.chdir(cwd), interpreter(cwd / "prefix", site), \
            warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            with alarm(HANG_SECONDS):
                code = main(args)
        except Hang:  # a failure of this example, so that hypothesis shrinks it and prints it
            raise AssertionError(f"{args} still running after {HANG_SECONDS} s") from None
    registry.reset()
    return Outcome(code, out.getvalue(), err.getvalue(), [str(w.message) for w in caught])


def check(args: list[str], outcome: Outcome) -> None:
    """The one rule of both CLIs."""
    where = f"{args}: exit {outcome.code}\nstdout: {outcome.out[-800:]}\nstderr: {outcome.err[-800:]}"
    assert outcome.code in (0, 1, 2), where
    assert "Traceback" not in outcome.err + outcome.out, where
    codes = []
    for line in outcome.err.splitlines():
        match = ERROR_LINE.match(line)
        assert match, f"not one error line with its code: {line!r}\n{where}"
        codes.append(match.group(1))
    assert "error.internal" not in codes, where
    assert (outcome.code == 2) <= any(c.startswith("input.") for c in codes), where
    assert all("\n" not in message for message in outcome.warned), outcome.warned
    if "--json" in args:
        doc = json.loads(outcome.out)
        assert doc["format"] == 1, where
        if "error" in doc:
            assert codes == [doc["error"]["code"]], where


@dataclass(frozen=True)
class Installed:
    """The scratch root, and a site with one signed backend distribution and its key."""

    scratch: Path
    site: Path
    key: Key
    #: Whether this interpreter's own .pth hook was there before (it must stay as it was).
    hooked: bool


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    global VENDOR_PUB
    root = tmp_path_factory.mktemp("runtime-cli-fuzz")
    key = make_key(root / "keys", "vendor")
    write_dist(root / "site", "demo-backend", backends={"demo": "demo_backend"}).sign(key)
    VENDOR_PUB = key.pub
    yield Installed(root / "scratch", root / "site", key, os.path.exists(pth_path()))
    VENDOR_PUB = Path()


@pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(world=worlds, command=commands)
# The hangs found so far, always run: a FIFO among the trust files (a plain open() blocked
# trust list, doctor through the verdict cache's context digest, and import triton), and one
# named as the key file or as the scopes file that trust add rewrites.
@example(World({"a.pub": Thing("fifo", b"")}, [], NOTHING, NOTHING, {}), Command("trust list", *NO_ARGS))
@example(World({}, [Thing("dir", b"")], NOTHING, NOTHING, {}), Command("doctor", *NO_ARGS))
@example(World({"scopes": Thing("to-fifo", b"")}, [], NOTHING, NOTHING, {}),
         Command("trust add --scope", Thing("vendor", b""), "demo-backend", "", True))
@example(World({}, [], NOTHING, NOTHING, {}), Command("trust add", Thing("fifo", b""), "", "", True))
# A 5000-digit version (past int()'s digit limit) was error.internal, found about one run in five.
@example(World({}, [], NOTHING, NOTHING, {}), Command("trust min-version", NOTHING, "triton", "9" * 5000, True))
@example(World({"pins": Thing("to-fifo", b"")}, [], NOTHING, NOTHING, {}), Command("trust pin", NOTHING, "nvidia",
                                                                                   "demo-backend", True))
def test_the_runtime_cli_keeps_the_one_rule(installed: Installed, world: World, command: Command) -> None:
    scratch = installed.scratch
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        args, env = build(world, command, scratch)
        outcome = run(args, env, scratch, installed.site)
        assert os.path.exists(pth_path()) == installed.hooked, "the real site-packages was written"
        check(args, outcome)
        codes = sorted(set(re.findall(r"\(([a-z]+\.[a-z0-9-]+)\)$", outcome.err, re.MULTILINE)))
        event(f"{command.words}: exit {outcome.code} {' '.join(codes)}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_hang_guard_fires(tmp_path: Path) -> None:
    """The guard the fuzz test relies on: a blocking open of a FIFO is interrupted."""
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(Hang), alarm(0.2):
        open(tmp_path / "fifo", "rb")  # noqa: SIM115 (it never returns)
