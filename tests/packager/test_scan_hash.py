"""The hash beside the scan: a forked child where that is safe, a thread where it is not.

Every path must give hashlib's digest of the same bytes: the child's, the thread's (another
thread is alive, so no fork), and the fallback when the child gives no digest. A child is
always reaped, and no child is left when the scan fails. A file written while it is scanned
is refused; a child killed (or its parent killed, or interrupted) ends and is reaped; a FIFO
or a device is refused, never waited on. Real processes, synchronised by what they print and
by pidfds, never by sleeps.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.csrc import ElfFixtures
from helpers.signals import sigint_default
from triton_backend_runtime.manifest import model as m

from backend_packager.base.errors import ElfError, InputError
from backend_packager.scanning import artifacts
from backend_packager.scanning.artifacts import HASH_IN_CHILD, artifact_from_file


def expected(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_child_hashes_a_big_file(big_elf: Path, elf_files: ElfFixtures, forks: list[int]) -> None:
    record = artifact_from_file(big_elf, "x")
    assert record.sha256 == expected(big_elf) and record.size == big_elf.stat().st_size
    assert record.elf == artifact_from_file(elf_files.exports, "x").elf
    assert len(forks) == 1
    assert artifact_from_file(elf_files.exports, "x").sha256 == expected(elf_files.exports)
    assert len(forks) == 1  # a small file is hashed here


def test_another_thread_means_no_fork(big_elf: Path, forks: list[int]) -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert artifact_from_file(big_elf, "x").sha256 == expected(big_elf)
    finally:
        stop.set()
        other.join()
    assert forks == []


def test_a_child_without_a_digest_is_answered_here(big_elf: Path, forks: list[int],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def dies(fd: int, read: int, write: int) -> None:
        os._exit(3)  # as if killed: no digest on the pipe

    monkeypatch.setattr(artifacts, "_hash_in_child", dies)
    assert artifact_from_file(big_elf, "x").sha256 == expected(big_elf)
    assert len(forks) == 1


def test_a_failed_scan_reaps_its_child(tmp_path: Path, forks: list[int]) -> None:
    path = tmp_path / "truncated.so"
    # Program headers of 1 byte each: elf.corrupt, after the child started.
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0, 64, 0, 0, 64, 1, 1,
                         64, 0, 0)
    path.write_bytes(header + bytes(HASH_IN_CHILD))
    with pytest.raises(ElfError) as err:
        artifact_from_file(path, "x")
    assert err.value.code == "elf.corrupt"
    assert len(forks) == 1


def test_children_reaped_by_the_system_are_no_error(big_elf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With SIGCHLD ignored the kernel reaps the child itself: waitpid's ECHILD is no file error."""
    import signal

    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert artifact_from_file(big_elf, "x").sha256 == expected(big_elf)
    finally:
        signal.signal(signal.SIGCHLD, previous)


# -- a file written while it is scanned, the hash child killed, special files --------------


REPO = Path(__file__).resolve().parents[2]


#: Far more than any run of these tests takes; only a hang (the bug) reaches it.
HANG_GUARD_S = 120


#: A sparse file no hash finishes while a test waits (about ten minutes of sha256).
SPARSE_SIZE = 1 << 40


@pytest.fixture()
def another_thread() -> Iterator[None]:
    """A second thread alive: no fork, the hash runs in a thread."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    yield
    stop.set()
    other.join()


def during_scan(monkeypatch: pytest.MonkeyPatch, action: Callable[[], object]) -> None:
    """Run ``action`` after the real scan read the file, while its hash may still be running."""
    real = artifacts.scan_elf  # type: ignore[attr-defined]

    def scan(*args: Any, **kwargs: Any) -> m.ElfInfo:
        info = real(*args, **kwargs)
        action()
        return info

    monkeypatch.setattr(artifacts, "scan_elf", scan)


def other_process(code: str, path: Path) -> None:
    """A write by another process, finished before this returns."""
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


APPEND = "import sys; open(sys.argv[1], 'ab').write(b'tail')"


TRUNCATE = "import os, sys; os.truncate(sys.argv[1], os.path.getsize(sys.argv[1]) - 4096)"


# Same size, new bytes; the mtime set apart explicitly, so the test does not depend on the
# file system's timestamp granularity (see the report: a write within one clock tick of
# the scan's fstat keeps ctime on kernels without multigrain timestamps).
REWRITE = ("import os, sys; f = open(sys.argv[1], 'r+b'); f.seek(-8, 2); f.write(b'12345678'); f.close(); "
           "os.utime(sys.argv[1], ns=(10**9, 10**9))")


@pytest.mark.parametrize("write", [APPEND, TRUNCATE, REWRITE], ids=["append", "truncate", "rewrite"])
@pytest.mark.parametrize("where", ["inline", "child", "thread"])
def test_a_file_written_while_scanned_is_refused(write: str, where: str, elf_files: ElfFixtures, big_elf: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 request: pytest.FixtureRequest) -> None:
    """Never a digest of other bytes than the scan read: input.changed, whoever hashed."""
    if where == "thread":
        request.getfixturevalue("another_thread")
    if where == "inline":
        path = tmp_path / "libsmall.so"
        path.write_bytes(elf_files.exports.read_bytes() + bytes(8192))
    else:
        path = big_elf
    during_scan(monkeypatch, lambda: other_process(write, path))
    with pytest.raises(InputError) as err:
        artifact_from_file(path, "x")
    assert err.value.code == "input.changed"


def test_a_killed_hash_child_is_answered_here(big_elf: Path, forks: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 of the child mid-hash: the parent hashes the file itself, the right digest."""
    during_scan(monkeypatch, lambda: os.kill(forks[0], signal.SIGKILL))
    record = artifact_from_file(big_elf, "x")
    assert record.sha256 == expected(big_elf) and len(forks) == 1


def test_a_failed_scan_kills_the_child_at_once(elf_files: ElfFixtures, tmp_path: Path, forks: list[int],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that fails over a terabyte of (sparse) file returns without waiting for its hash."""
    path = sparse_library(elf_files, tmp_path)

    def fails() -> None:
        raise InputError("test", str(path), "the scan failed")

    during_scan(monkeypatch, fails)
    with pytest.raises(InputError):
        artifact_from_file(path, "x")
    path.unlink()
    assert len(forks) == 1  # and reaped: the fixture checks


def sparse_library(elf_files: ElfFixtures, tmp_path: Path) -> Path:
    path = tmp_path / "libsparse.so"
    path.write_bytes(elf_files.exports.read_bytes())
    os.truncate(path, SPARSE_SIZE)
    return path


HELD_SCRIPT = r"""
import os, sys
from pathlib import Path
from backend_packager.scanning import artifacts

children = []
real_fork = os.fork
def fork():
    pid = real_fork()
    if pid:
        children.append(pid)
        print(pid, flush=True)
    return pid
os.fork = fork

real_scan = artifacts.scan_elf
def scan(*args, **kwargs):
    print("scanning", flush=True)
    sys.stdin.read()  # held here until the test kills or interrupts this process
    return real_scan(*args, **kwargs)
artifacts.scan_elf = scan

try:
    artifacts.artifact_from_file(Path(sys.argv[1]), "x")
except KeyboardInterrupt:
    try:
        os.waitpid(children[0], os.WNOHANG)
        print("not reaped", flush=True)
    except ChildProcessError:
        print("reaped", flush=True)
"""


@pytest.fixture()
def held_scan(elf_files: ElfFixtures, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """Another process scanning a sparse terabyte, held inside its scan: (it, its hash
    child's pid, a pidfd on that child). Whatever happens, no child outlives the test."""
    path = sparse_library(elf_files, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "runtime")])}
    proc = subprocess.Popen([sys.executable, "-c", HELD_SCRIPT, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, preexec_fn=sigint_default)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    pidfd = os.pidfd_open(child)
    assert proc.stdout.readline() == "scanning\n"
    try:
        yield proc, child, pidfd
    finally:
        if not select.select([pidfd], [], [], 0)[0]:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.close(pidfd)
        proc.kill()
        proc.communicate()
        path.unlink()  # a terabyte, if only in name: not left for pytest's kept temporary dirs


def test_kill_9_of_the_parent_ends_the_hash_child(held_scan: tuple[subprocess.Popen[str], int, int]) -> None:
    """The orphan stops within one read (its parent changed) instead of hashing a terabyte."""
    proc, _, pidfd = held_scan
    proc.kill()
    proc.wait()
    assert select.select([pidfd], [], [], HANG_GUARD_S)[0], "the hash child outlived its parent"


def test_ctrl_c_kills_and_reaps_the_hash_child(held_scan: tuple[subprocess.Popen[str], int, int]) -> None:
    proc, _, pidfd = held_scan
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=HANG_GUARD_S)
    assert out.splitlines()[-1] == "reaped"
    assert select.select([pidfd], [], [], 0)[0]


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as err:
        artifact_from_file(fifo, "x")
    assert err.value.code == "input.not-a-file"
    proc = subprocess.run([str(Path(sys.executable).parent / "backend-packager"), "scan", "--json", str(fifo)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == ["input.not-a-file"]


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        artifact_from_file(Path("/dev/zero"), "x")
    assert err.value.code == "input.not-a-file"
