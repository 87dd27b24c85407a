"""Ctrl-C (SIGINT) and SIGTERM stop ``migrate``, ``adopt`` (in place and ``-o``), ``mirror``
and ``scan`` within a second: their worker threads are cancelled, not drained; the exit is
130 or 143 with one line on stderr, no traceback, and nothing is left behind.

Each command runs in a real subprocess on 32 MiB of random (incompressible) files, its
reads of 256 KiB or more slowed to :data:`DELAY` each (a slow disk: the whole run would take
seconds on every thread). The signal is sent once the first slow read has begun (a marker
line on stdout), and the time to exit is measured from the signal. ``adopt -o`` reads its
files twice, checked then written: its first reads go at full speed, so that the signal
comes while the wheel is being written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from helpers.signals import sigint_default
from helpers.wheels import backend_files, write_wheel

from backend_packager.manifest import signing

#: Seconds each large read takes; the run stops within one of them per thread.
DELAY = 0.25
#: The bound asserted: one second, with headroom for a loaded CI machine.
LIMIT = 1.5

SLOW = """
import os, sys, threading, time
from backend_packager import cli
skip = int(sys.argv.pop(1))  # large reads at full speed first: the phase to interrupt comes after
lock = threading.Lock()
def slowed(read, size_of):
    def slow(*args):
        global skip
        got = read(*args)
        if size_of(got) >= 256 << 10:
            with lock:
                skip -= 1
                if skip == -1:
                    print("slow read", flush=True)
            if skip < 0:
                time.sleep({delay})
        return got
    return slow
os.read = slowed(os.read, len)
os.pread = slowed(os.pread, len)
os.preadv = slowed(os.preadv, int)
os.readv = slowed(os.readv, int)
sys.exit(cli.main(sys.argv[1:]))
""".replace("{delay}", str(DELAY))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A backend wheel with four 8 MiB random members, in a directory of its own; the same
    files as installed (extracted, RECORD and all); two 16 MiB binaries; a signing key."""
    base = tmp_path_factory.mktemp("interrupt")
    files = backend_files("acme_backend", "Acme", "acme")
    files.update({f"acme_backend/data/blob{i}.bin": os.urandom(8 << 20) for i in range(4)})
    wheel = write_wheel(base / "wheels", "acme-backend", "1.0", files, {"acme": "acme_backend"})
    site = base / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    libraries = base / "libraries"  # what scan reads: binaries (PE here), hashed in a forked child
    libraries.mkdir()
    for i in range(2):
        (libraries / f"blob{i}.dll").write_bytes(b"MZ" + os.urandom(16 << 20))
    signing.generate(base / "key.pem", base / "key.pub", "interrupt test", None)
    return {"wheel": wheel, "site": site, "libraries": libraries, "key": base / "key.pem"}


def listing(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def interrupted(sig: signal.Signals, *args: str, skip: int = 0) -> tuple[int, float, str]:
    """Run ``backend-packager ARGS``, its large reads slowed after the first ``skip``; send
    ``sig`` once its first slow read began. Its exit status, the seconds from the signal to
    its exit, its stderr."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW, str(skip), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "slow read\n", (line, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(sig)
        sent = time.monotonic()
        proc.wait(timeout=30)
        elapsed = time.monotonic() - sent
        return proc.returncode, elapsed, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def check(sig: signal.Signals, code: int, elapsed: float, stderr: str) -> None:
    assert code == 128 + sig, stderr
    assert elapsed < LIMIT, f"{elapsed:.2f} s from {sig.name} to exit"
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == f"backend-packager: interrupted ({sig.name})", stderr


#: The large reads of the check against RECORD, before ``adopt -o`` writes: one per MiB of blob.
BLOB_READS = 32
SIGNALS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])


@SIGNALS
def test_migrate(sig: signal.Signals, inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    check(sig, *interrupted(sig, "migrate", str(inputs["wheel"]), "-o", str(out), "--key", str(inputs["key"]),
                            "--jobs", "2"))
    assert not out.exists() or listing(out) == {}


@SIGNALS
def test_mirror(sig: signal.Signals, inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "mirror"
    check(sig, *interrupted(sig, "mirror", str(inputs["wheel"].parent), "-o", str(out), "--key",
                            str(inputs["key"]), "--jobs", "2"))
    assert sorted(p.name for p in out.iterdir()) == []  # no wheel, no staging, no state


@SIGNALS
def test_adopt_in_place(sig: signal.Signals, inputs: dict[str, Path], tmp_path: Path) -> None:
    before = listing(inputs["site"])
    check(sig, *interrupted(sig, "adopt", "acme-backend", "--site-packages", str(inputs["site"]), "--key",
                            str(inputs["key"]), "--jobs", "2"))
    assert listing(inputs["site"]) == before


@SIGNALS
def test_adopt_wheel_out(sig: signal.Signals, inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = listing(inputs["site"])
    check(sig, *interrupted(sig, "adopt", "acme-backend", "--site-packages", str(inputs["site"]), "--key",
                            str(inputs["key"]), "--jobs", "2", "-o", str(out), skip=BLOB_READS))
    assert not out.exists() or listing(out) == {}
    assert listing(inputs["site"]) == before


@SIGNALS
def test_scan(sig: signal.Signals, inputs: dict[str, Path]) -> None:
    check(sig, *interrupted(sig, "scan", str(inputs["libraries"])))
