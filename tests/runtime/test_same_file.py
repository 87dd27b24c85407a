"""``verdictcache.same_file``: the one "these two paths are one file" of the runtime (the core's
root, a shadowed package's directory, a plugin library being loaded)."""

from __future__ import annotations

import os
from pathlib import Path

from triton_backend_runtime.site.fileidentity import same_file


def test_links_and_names_of_one_file_are_the_same(tmp_path: Path) -> None:
    target = tmp_path / "lib.so"
    target.write_bytes(b"x")
    os.link(target, tmp_path / "hard.so")
    (tmp_path / "soft.so").symlink_to(target)
    for other in ("hard.so", "soft.so", "sub/../lib.so"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        assert same_file(str(target), str(tmp_path / other)), other


def test_two_files_are_not_the_same(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    (tmp_path / "b").write_bytes(b"x")
    assert not same_file(str(tmp_path / "a"), str(tmp_path / "b"))


def test_paths_that_cannot_be_stated_are_compared_resolved(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "missing")
    assert same_file(str(tmp_path / "link"), str(tmp_path / "missing"))
    assert not same_file(str(tmp_path / "missing"), str(tmp_path / "gone"))


def test_a_path_with_a_nul_is_only_itself(tmp_path: Path) -> None:
    """``os.path.samefile`` and ``realpath`` raise ``ValueError`` on a NUL: not a crash of the
    loader guard that asks."""
    (tmp_path / "a").write_bytes(b"x")
    assert not same_file(str(tmp_path / "a\0"), str(tmp_path / "a"))
    assert same_file("a\0", "a\0")
