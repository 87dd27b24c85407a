"""The packager's command line under hostile wheels (hypothesis): one line, never a bug.

Three generators, each through ``migrate``, ``verify``, ``inspect`` and ``scan`` in process:

(a) structured wheels (``tests/helpers/zipgen.py``): member names, modes, methods, flags,
    local headers that lie, leading and trailing bytes, overlapping members;
(b) byte mutations (overwrite, truncate, insert) of a valid wheel that carries a real
    signed manifest, so the re-sign path and the manifest parser are reached;
(c) manifests: arbitrary JSON (deep nesting, huge numbers, wrong types) as the manifest
    member of an otherwise valid wheel.

Every run must end with exit 0, 1 or 2, stderr made only of our own one-line messages, and
no ``error.internal`` (the CLI's catch-all for a bug). ``FUZZ_EXAMPLES`` sets the examples
per generator (small by default: ``make test`` runs a slice); ``make fuzz`` runs rounds of
this file for as long as it is asked and reports runs, failures, slow runs and peak memory.
``FUZZ_STATS`` names a file that gets one line per run (command, exit code, seconds).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import zipgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend_packager.cli import main  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="FUZZ_SEED" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
NAME = "demo-1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def key() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzz.pem"
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["keygen", "-q", "-o", str(path)]) == 0
        yield path


@pytest.fixture(scope="module")
def signed_wheel(key: Path) -> Iterator[bytes]:
    """A valid wheel with a signed manifest, made by ``migrate``: what mutations start from."""
    with tempfile.TemporaryDirectory() as directory:
        src = Path(directory) / "in" / NAME
        src.parent.mkdir()
        src.write_bytes(zipgen.case("valid").build())
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["migrate", "-q", str(src), "-o", str(Path(directory) / "out"), "--key", str(key)]) == 0
        yield (Path(directory) / "out" / NAME).read_bytes()


def run_all(data: bytes, key: Path) -> None:
    """Every command on ``data`` as a wheel file; each must end as the rule says."""
    with tempfile.TemporaryDirectory() as directory:
        wheel = Path(directory) / "in" / NAME
        wheel.parent.mkdir()
        wheel.write_bytes(data)
        public = str(key.with_suffix(".pub"))
        for argv in (["migrate", str(wheel), "-o", str(Path(directory) / "out"), "--key", str(key), "--json"],
                     ["verify", str(wheel), "--trust", public, "--json"],
                     ["inspect", str(wheel), "--json"],
                     ["scan", str(wheel), "--json"]):
            _run_one(argv)
        shutil.rmtree(Path(directory) / "out", ignore_errors=True)


def _run_one(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    _record(argv[0], code, time.perf_counter() - started)
    assert code in (0, 1, 2), (argv[0], code)
    text = err.getvalue()
    assert "error.internal" not in text and "Traceback" not in text, text
    for line in text.splitlines():
        assert line.startswith(("backend-packager: error: ", "backend-packager: warning: ")), line
    document = json.loads(out.getvalue())  # every --json run prints one document
    assert document.get("format") == 1 or "error" in document


def _record(command: str, code: int, seconds: float) -> None:
    stats = os.environ.get("FUZZ_STATS")
    if stats:
        with open(stats, "a", encoding="utf-8") as stream:
            stream.write(json.dumps({"command": command, "code": code, "seconds": round(seconds, 4)}) + "\n")


# --- (a) structured wheels -------------------------------------------------------------

names = st.one_of(
    st.sampled_from(["demo/__init__.py", "demo/x.so", "../evil.py", "/abs.py", "demo\\win.py", "C:/x.py",
                     "demo/", "demo-1.0.dist-info/RECORD", "demo-1.0.dist-info/entry_points.txt"]),
    st.text(min_size=1, max_size=40).map(lambda t: f"demo/{t}"),
)
members = st.builds(
    zipgen.Member,
    name=names,
    data=st.binary(max_size=300),
    mode=st.sampled_from([0o100644, 0o100755, 0o120777, 0o010644, 0o020644, 0o104755, 0o040755, 0, 0o777]),
    method=st.sampled_from([0, 8, 8, 12, 99]),
    flags=st.sampled_from([0, 0, 1, 8, 0x800]),
    local_name=st.none() | st.binary(max_size=20),
    local_crc=st.none() | st.integers(0, 0xFFFFFFFF),
    local_method=st.none() | st.sampled_from([0, 8]),
    local_size=st.none() | st.integers(0, 0xFFFFFFFF),
    declared_size=st.none() | st.integers(0, 0xFFFFFFFF),
)


@FUZZ
@given(extra=st.lists(members, max_size=4), leading=st.binary(max_size=8), trailing=st.binary(max_size=40),
       overlap=st.booleans(), record=st.booleans())
def test_structured_wheels(key: Path, extra: list[zipgen.Member], leading: bytes, trailing: bytes,
                           overlap: bool, record: bool) -> None:
    archive = zipgen.Archive([*zipgen.base_members(), *extra], leading=leading, trailing=trailing, overlap=overlap)
    run_all(zipgen.wheel_bytes(archive, record=record), key)


# --- (b) byte mutations of a signed wheel ------------------------------------------------

edits = st.lists(st.tuples(st.sampled_from(["set", "cut", "insert"]), st.floats(0, 1), st.binary(min_size=1,
                                                                                                   max_size=8)),
                 min_size=1, max_size=6)


@FUZZ
@given(edits=edits)
def test_mutated_signed_wheels(key: Path, signed_wheel: bytes, edits: list[tuple[str, float, bytes]]) -> None:
    data = bytearray(signed_wheel)
    for kind, where, value in edits:
        at = min(int(where * len(data)), max(len(data) - 1, 0))
        if kind == "set":
            data[at:at + len(value)] = value
        elif kind == "cut":
            del data[at:]
        else:
            data[at:at] = value
    run_all(bytes(data), key)


# --- (c) hostile manifests -----------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)
manifest_bytes = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(10, 100_000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.just(b'{"payload": "' + b"9" * 5000 + b'", "payloadType": 1, "signatures": []}'),
    st.binary(max_size=200),
)


@FUZZ
@given(manifest=manifest_bytes)
def test_hostile_manifests(key: Path, manifest: bytes) -> None:
    members = [*zipgen.base_members(), zipgen.Member("demo-1.0.dist-info/triton_backend.dsse.json", manifest)]
    run_all(zipgen.wheel_bytes(zipgen.Archive(members)), key)
