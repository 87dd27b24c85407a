"""The one small-file reader (``triton_backend_runtime.base.regularfile``) and its three mappings:
the packager's ``input.*`` (``fsutil.read_input``), discovery's None, the runtime CLI's line.

Real files, FIFOs, directories and links made in tmp_path; the reason codes are asserted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from triton_backend_runtime.base.regularfile import (
    RegularFileError,
    open_regular,
    read_chunks,
    read_regular,
    read_views,
)
from triton_backend_runtime.site.discovery import read_small_bytes

from backend_packager.base.errors import InputError
from backend_packager.base.fsutil import read_input


def hostile(tmp_path: Path) -> dict[str, Path]:
    """One path of each kind a small file's name can hold instead of a small file."""
    (tmp_path / "big").write_bytes(b"x" * 101)
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("absent")
    return {"too-big": tmp_path / "big", "not-a-file": tmp_path / "dir", "fifo": tmp_path / "fifo",
            "loop": tmp_path / "loop", "dangling": tmp_path / "dangling", "missing": tmp_path / "absent"}


EXPECTED = {"too-big": "too-big", "not-a-file": "not-a-file", "fifo": "not-a-file", "loop": "unreadable",
            "dangling": "missing", "missing": "missing"}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_every_hostile_kind_is_one_error_with_its_reason(tmp_path: Path, kind: str) -> None:
    """A FIFO with no writer would block a plain open() forever: here it is refused at once."""
    path = hostile(tmp_path)[kind]
    with pytest.raises(RegularFileError) as caught:
        read_regular(path, 100)
    error = caught.value
    assert (error.reason, error.code, error.path) == (EXPECTED[kind], f"input.{EXPECTED[kind]}", str(path))
    assert str(error).startswith(f"{path}: ") and "\n" not in str(error)


def test_a_link_to_a_regular_file_is_followed_and_the_bound_holds(tmp_path: Path) -> None:
    (tmp_path / "key.pub").write_bytes(b"k" * 100)
    (tmp_path / "link.pub").symlink_to("key.pub")
    assert read_regular(tmp_path / "link.pub", 100) == b"k" * 100
    assert read_regular(tmp_path / "link.pub", 10, truncate=True) == b"k" * 10
    with pytest.raises(RegularFileError, match="over 99 bytes"):
        read_regular(tmp_path / "key.pub", 99)
    fd = open_regular(tmp_path / "link.pub", follow_symlinks=True)
    try:
        assert os.read(fd, 3) == b"kkk"
    finally:
        os.close(fd)


def test_a_bound_above_the_read_piece_reads_the_whole_file(tmp_path: Path) -> None:
    data = os.urandom((3 << 20) + 7)
    (tmp_path / "RECORD").write_bytes(data)
    assert read_regular(tmp_path / "RECORD", len(data)) == data
    assert read_regular(tmp_path / "RECORD", 1 << 30, truncate=True) == data


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_discovery_sees_none_where_no_small_file_is(tmp_path: Path, kind: str) -> None:
    expected = b"x" * 100 if kind == "too-big" else None  # discovery reads a prefix
    assert read_small_bytes(str(hostile(tmp_path)[kind]), 100) == expected


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_the_packager_maps_each_to_input_codes(tmp_path: Path, kind: str) -> None:
    expected = EXPECTED[kind]  # the same codes as the runtime CLI's
    with pytest.raises(InputError) as caught:
        read_input(hostile(tmp_path)[kind], 100)
    assert caught.value.code == f"input.{expected}"
    if kind == "too-big":
        assert caught.value.detail == "over 100 bytes: not a key file"


def test_without_follow_symlinks_a_link_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "key.pub").write_bytes(b"k")
    (tmp_path / "link.pub").symlink_to("key.pub")
    (tmp_path / "dangling.pub").symlink_to("gone")
    for name in ("link.pub", "dangling.pub"):
        with pytest.raises(RegularFileError) as caught:
            open_regular(tmp_path / name, follow_symlinks=False)
        assert caught.value.code == "input.symlink"
    fd = open_regular(tmp_path / "key.pub", follow_symlinks=False)
    os.close(fd)


def test_a_link_loop_is_unreadable_with_its_cause(tmp_path: Path) -> None:
    """A loop of links is neither missing nor a link refused unread: the open failed, and the
    OSError behind it is kept for the caller's line."""
    (tmp_path / "a.pub").symlink_to("b.pub")
    (tmp_path / "b.pub").symlink_to("a.pub")
    with pytest.raises(RegularFileError) as caught:
        open_regular(tmp_path / "a.pub", follow_symlinks=True)
    assert caught.value.code == "input.unreadable" and caught.value.cause is not None


def test_read_chunks_stops_at_the_count_or_the_end_of_the_file(tmp_path: Path) -> None:
    """The one chunked read (small files, hashes of installed files, compiled bytecode):
    never past what the caller declared, fewer bytes only where the file ends."""
    (tmp_path / "f").write_bytes(b"a" * ((1 << 20) + 5))
    fd = open_regular(tmp_path / "f", follow_symlinks=False)
    try:
        assert [len(c) for c in read_chunks(fd, (1 << 20) + 2)] == [1 << 20, 2]
        assert b"".join(read_chunks(fd, 100)) == b"aaa"
        assert list(read_chunks(fd, 100)) == []
    finally:
        os.close(fd)


def test_read_views_stop_at_the_count_or_the_end_of_the_file(tmp_path: Path) -> None:
    """As read_chunks: a count of 0 reads nothing, a file shorter than the count ends early."""
    path = tmp_path / "f"
    path.write_bytes(b"aaa")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert [bytes(v) for v in read_views(fd, 0)] == []
        assert b"".join(bytes(v) for v in read_views(fd, 100)) == b"aaa"
        assert list(read_views(fd, 100)) == []
    finally:
        os.close(fd)
