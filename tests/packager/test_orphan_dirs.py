"""The sweep of scratch directories a killed run left (``fsutil.remove_orphan_dirs``): only
ours, only of dead processes, never through a link, never another user's."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from backend_packager.base import fsutil

PREFIX = "backend-packager-sweep-"


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
