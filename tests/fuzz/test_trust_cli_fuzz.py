"""The ``trust`` commands under hostile input (hypothesis, in process through ``main(argv)``).

Each example writes a user trust directory of hostile files (``revoked``, ``scopes``,
``min-versions``, ``threshold``, ``pins``, ``*.pub``: key ids in every spelling and length, huge
numbers, junk) and runs one ``trust`` command with hostile arguments. The one rule: no
traceback, no ``error.internal``, an exit code in {0, 1, 2} (2 only with an ``input.*`` code),
every stderr line one ``PROG: error: ... (CODE)`` line, done within ``HANG_SECONDS``. And
revocation never fails open: after ``trust revoke ID`` succeeds, every trusted key whose keyid
starts with the id is revoked (or no key counts at all). ``FUZZ_EXAMPLES`` sets the number
of examples.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.alarm import alarm
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.cli.main import PROG, main
from triton_backend_runtime.trust import revocation
from triton_backend_runtime.trust.keys import PublicKey, keyid_of, load_trust_store

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
HANG_SECONDS = 2.0
ERROR_LINE = re.compile(rf"^{re.escape(PROG)}: error: .* \(([a-z]+\.[a-z0-9-]+)\)$")
VARIABLES = ["XDG_CONFIG_HOME", "HOME", "TRITON_BACKEND_TRUSTED_KEYS", "TRITON_BACKEND_POLICY"]
#: Two real keys (any 32 bytes are an Ed25519 key to the trust store).
KEYS = [PublicKey(keyid_of(bytes([n]) * 32), bytes([n]) * 32, f"key{n}") for n in (1, 2)]
FILES = ["revoked", "scopes", "min-versions", "threshold", "pins", "k.pub"]

texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
hex_ids = st.builds(
    lambda key, length, upper, prefix: prefix + (key.keyid[:length].upper() if upper else key.keyid[:length]),
    st.sampled_from(KEYS), st.integers(1, 70), st.booleans(), st.sampled_from(["", "keyid:", "KEYID: ", "0x"]),
)
numbers = st.sampled_from(["9" * 5000, "1." + "0" * 5000, "1" * 201, "2", "0", "-1", "1e999", "٣", "1_0"])
#: A command-line argument argparse takes as one (an option-like one is a usage error).
arguments = (texts | hex_ids | numbers | st.sampled_from(["triton", "1.0", "demo", "backend:x", "*"])).filter(
    lambda t: not t.startswith("-"))
lines = st.one_of(
    texts, hex_ids, numbers, st.sampled_from([k.line() for k in KEYS]),
    st.builds(lambda i, n: f"{i} {n}", hex_ids | texts, arguments),
    st.builds(lambda n, v: f"{n} {v}", st.sampled_from(["triton", "demo", "!!"]), numbers | texts),
)
contents = st.lists(lines, max_size=6).map(lambda found: "\n".join(found).encode("utf-8", "surrogatepass")) | \
    st.binary(max_size=200) | st.just(b"#" * (1 << 20) + b"\n" + KEYS[0].keyid.encode())
ACTIONS = ["list", "revoke", "unrevoke", "min-version", "remove", "add", "pin", "unpin"]


@contextlib.contextmanager
def world(scratch: Path) -> Iterator[None]:
    """The user's and the system's trust directories in ``scratch``, nothing else read."""
    saved = {name: os.environ.get(name) for name in VARIABLES}
    prefix = sys.prefix
    for name in VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(XDG_CONFIG_HOME=str(scratch / "config"), HOME=str(scratch / "home"))
    sys.prefix = str(scratch / "prefix")
    try:
        yield
    finally:
        sys.prefix = prefix
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), alarm(HANG_SECONDS):
        code = main(args)
    text = err.getvalue()
    where = f"{[a[:80] for a in args]}: exit {code}\nstdout: {out.getvalue()[-600:]}\nstderr: {text[-600:]}"
    assert code in (0, 1, 2), where
    assert "Traceback" not in text + out.getvalue(), where
    codes = []
    for line in text.splitlines():
        found = ERROR_LINE.match(line)
        assert found, f"not one error line with its code: {line!r}\n{where}"
        codes.append(found.group(1))
    assert "error.internal" not in codes, where
    assert (code == 2) <= any(c.startswith("input.") for c in codes), where
    return code, where


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trust-cli-fuzz")


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files=st.dictionaries(st.sampled_from(FILES), contents, max_size=4), action=st.sampled_from(ACTIONS),
       first=arguments, second=arguments, user=st.booleans())
# The one the runtime CLI fuzz test found about one run in five: a 5000-digit version.
@example(files={}, action="min-version", first="triton", second="9" * 5000, user=True)
@example(files={"revoked": b"0x1234\n", "k.pub": KEYS[0].line().encode()}, action="list", first="", second="",
         user=True)
@example(files={"k.pub": KEYS[0].line().encode()}, action="revoke", first=f"KEYID: {KEYS[0].keyid[:16].upper()}",
         second="", user=True)
def test_trust_commands_keep_the_one_rule(scratch: Path, files: dict[str, bytes], action: str, first: str,
                                          second: str, user: bool) -> None:
    shutil.rmtree(scratch, ignore_errors=True)
    trusted = scratch / "config" / "triton-backend" / "trusted"
    trusted.mkdir(parents=True)
    for name, data in files.items():
        (trusted / name).write_bytes(data)
    (scratch / "key.pub").write_bytes(KEYS[1].line().encode() + b"\n")
    args = {"list": ["list"], "revoke": ["revoke", first], "unrevoke": ["unrevoke", first],
            "min-version": ["min-version", first, second], "remove": ["remove", first],
            "add": ["add", str(scratch / "key.pub"), f"--scope={first}"], "pin": ["pin", first, second],
            "unpin": ["unpin", first]}[action]
    with world(scratch):
        code, where = run(["trust", *args, *(["--user"] if user and action != "list" else [])])
        event(f"{action}: exit {code}")
        if action == "revoke" and code == 0:
            wanted = revocation.parse_id(first)
            assert wanted is not None, where
            store, _ = load_trust_store()
            for keyid in store.keys:
                if keyid.startswith(wanted):
                    assert store.suspended() or store.revoked_by(keyid), f"{keyid} still counts\n{where}"
