"""The hash beside the scan: a forked child where that is safe, a thread where it is not.

Every path must give hashlib's digest of the same bytes: the child's, the thread's (another
thread is alive, so no fork), and the fallback when the child gives no digest. A child is
always reaped, and no child is left when the scan fails.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures

from backend_packager import artifacts
from backend_packager.artifacts import HASH_IN_CHILD, artifact_from_file
from backend_packager.errors import ElfError


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
