"""The packager's promises, attacked: a file hashed beside its scan, crafted PT_INTERP
segments, the scratch-directory sweep, and the CLI's one coded line.

Real files (gcc-built libraries, FIFOs, sparse files), real processes killed with SIGKILL or
interrupted with SIGINT, synchronised by what they print and by pidfds, never by sleeps.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.csrc import ElfFixtures
from test_elf_pie import INTERP_PHDR, both_ways, crafted
from test_scan_hash import expected
from triton_backend_runtime import manifest as m

from backend_packager import artifacts, fsutil
from backend_packager.artifacts import artifact_from_file
from backend_packager.errors import InputError

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


# -- 1. the hash beside the scan ------------------------------------------------------------


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
from backend_packager import artifacts

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
                            stdout=subprocess.PIPE, text=True, env=env)
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
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == ["input.not-a-file"]


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        artifact_from_file(Path("/dev/zero"), "x")
    assert err.value.code == "input.not-a-file"


# -- 2. PT_INTERP -----------------------------------------------------------------------------


def test_the_first_of_two_interpreters_rules(tmp_path: Path) -> None:
    """As Linux's binfmt_elf: the first PT_INTERP is the one; a bad second is not read."""
    data = bytearray(crafted(b"/opt/ld.so"))
    interp = bytes(data[INTERP_PHDR : INTERP_PHDR + 56])
    data[64:120] = interp  # the PT_LOAD before it becomes a second, identical PT_INTERP ...
    info = both_ways(bytes(data), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"
    data[INTERP_PHDR + 32 : INTERP_PHDR + 40] = (1).to_bytes(8, "little")  # ... the second now bad
    info = both_ways(bytes(data), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"
    data[64 + 32 : 64 + 40] = (1).to_bytes(8, "little")  # the first bad: refused
    assert both_ways(bytes(data), tmp_path) == "elf.corrupt"


def test_offset_and_size_overflowing_64_bits(tmp_path: Path) -> None:
    assert both_ways(crafted(b"/opt/ld.so", offset=(1 << 64) - 2, size=16), tmp_path) == "elf.truncated"


def test_an_interpreter_without_section_headers(tmp_path: Path) -> None:
    """No section headers (e_shoff, e_shnum, e_shstrndx zero) and no dynamic segment: the
    interpreter still read, the same both ways (with PT_DYNAMIC it is refused: below)."""
    data = bytearray(crafted(b"/opt/ld.so"))
    data[40:48] = bytes(8)  # e_shoff
    data[60:64] = bytes(4)  # e_shnum, e_shstrndx
    info = both_ways(bytes(data), tmp_path)
    assert isinstance(info, m.ElfInfo) and info.interpreter == "/opt/ld.so"


def test_a_library_without_section_headers_is_refused(elf_files: ElfFixtures, tmp_path: Path) -> None:
    """sstrip-style: the section headers gone, the library still loads (dlopen reads only
    PT_DYNAMIC), needing libm and exporting symbols. Recorded it would say "needs nothing,
    exports nothing, complete"; it is refused, both ways, and by the CLI."""
    import ctypes

    data = bytearray(elf_files.exports.read_bytes())
    data[40:48] = bytes(8)  # e_shoff
    data[60:64] = bytes(4)  # e_shnum, e_shstrndx
    path = tmp_path / "libnosections.so"
    path.write_bytes(data)
    ctypes.CDLL(str(path))  # the loader takes it
    assert both_ways(bytes(data), tmp_path) == "elf.corrupt"
    proc = run_cli("scan", "--json", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [e["code"] for e in errors] == ["elf.corrupt"] and "PT_DYNAMIC" in errors[0]["message"]


def test_a_dynamic_section_elsewhere_than_the_segment_is_refused(elf_files: ElfFixtures, tmp_path: Path) -> None:
    """Section headers that lie: .dynamic moved 16 bytes on (its DT_NEEDED then not the
    loader's). Refused, both ways."""
    import struct

    data = bytearray(elf_files.exports.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 40)
    shnum, = struct.unpack_from("<H", data, 60)
    for i in range(shnum):
        at = shoff + 64 * i
        if struct.unpack_from("<I", data, at + 4)[0] == 6:  # SHT_DYNAMIC
            offset, = struct.unpack_from("<Q", data, at + 24)
            struct.pack_into("<Q", data, at + 24, offset + 16)
            break
    else:
        raise AssertionError("no .dynamic section")
    assert both_ways(bytes(data), tmp_path) == "elf.corrupt"


# -- 3. the scratch-directory sweep -------------------------------------------------------------

PREFIX = "backend-packager-review-"


def dead_pid() -> int:
    proc = subprocess.run(["true"], check=True)
    del proc
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_sweep_removes_only_ours(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep").write_text("x")
    dead = dead_pid()
    orphan = root / f"{PREFIX}{dead}-a"
    orphan.mkdir()
    (orphan / "f").write_text("x")
    (root / f"{PREFIX}{dead}-link").symlink_to(target)  # a link named like ours
    live = root / f"{PREFIX}{os.getpid()}-b"
    live.mkdir()
    huge = root / f"{PREFIX}{'9' * 30}-c"  # no pid is that big
    huge.mkdir()
    foreign = root / f"{PREFIX}{dead}-d"
    foreign.mkdir()
    if os.getuid() == 0:
        os.chown(foreign, 54321, 54321)  # another user's
    fsutil.remove_orphan_dirs(root, PREFIX)
    assert not orphan.exists()
    assert (target / "keep").exists() and (root / f"{PREFIX}{dead}-link").is_symlink()
    assert live.is_dir() and huge.is_dir()
    assert foreign.is_dir() == (os.getuid() == 0)
    shutil.rmtree(root)


# -- 4. the CLI -------------------------------------------------------------------------------


def test_adopt_with_a_fifo_for_site_packages_is_one_line(tmp_path: Path, elf_files: ElfFixtures) -> None:
    fifo = tmp_path / "site"
    os.mkfifo(fifo)
    proc = run_cli("adopt", "triton", "--site-packages", str(fifo), "--key", str(tmp_path / "nokey.pem"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "input." in proc.stderr


# -- 3. adopt: plugins called from the installed files, held to the file as hashed -------------


def test_a_plugin_renamed_over_while_asked_is_not_what_the_child_calls(elf_files: ElfFixtures, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Another file renamed over the plugin's path while the child asks it (a new inode
    there): the sandbox mounts only the inode held on the file as hashed, and the swap is
    still seen after the call: nothing is signed."""
    from helpers.adopted import key_file, plugpack
    from helpers.disttree import TrustEnv
    from triton_backend_runtime.layout import MANIFEST_FILENAME

    from backend_packager import adopt as adopt_module
    from backend_packager import plugininfo, signing

    trust = TrustEnv.make(tmp_path / "trust-env", monkeypatch)
    _, site = plugpack(elf_files, tmp_path)
    plugin = site / "plugpack" / "libshared.so"
    hashed = expected(plugin)
    real = plugininfo._call_sandboxed

    def swap_first(*args: Any, **kwargs: Any) -> Any:
        if args[0].name == plugin.name:
            other = plugin.with_name("swap.tmp")
            shutil.copyfile(elf_files.exports, other)  # a library that is no plugin at all
            os.replace(other, plugin)
        return real(*args, **kwargs)

    monkeypatch.setattr(plugininfo, "_call_sandboxed", swap_first)
    outcome = adopt_module.adopt(site, "plugpack", signing.load(key_file(trust)), capture="sandbox")
    # The held inode lost its name (its link count, so its ctime, changed): refused, unsigned.
    assert outcome.error is not None and outcome.error.code == "installed.changed", outcome.error
    assert "while its plugin was being asked" in outcome.error.detail
    assert not (site / "plugpack-1.0.dist-info" / MANIFEST_FILENAME).exists()
    assert expected(plugin) != hashed
