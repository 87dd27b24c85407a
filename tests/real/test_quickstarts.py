"""The README's two quick starts run as written, line by line in one ``bash -e`` session, in a
fresh copy of the repository, as a newcomer would paste them. They install from the package
index and the platform one uses the real triton 3.9.0. Only the environment differs: the
cached triton wheel is offered to pip first (PIP_FIND_LINKS), the user's trust store and
caches are moved under tmp_path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.readme import ROOT, quickstart


def fresh_clone(dest: Path) -> Path:
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "wheelhouse", "wheels", "*.egg-info",
                                    "__pycache__", ".*_cache")
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def run_quickstart(name: str, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    clone = fresh_clone(tmp_path / "clone")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRITON_", "BACKEND_PACKAGER_", "PYTHON", "VIRTUAL_ENV", "XDG_"))}
    env |= {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"), **extra}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    script = "set -e\n" + "\n".join(quickstart(name)) + "\n"
    return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True)


@pytest.mark.triton_wheel
def test_vendor_quickstart_runs_as_written(tmp_path: Path) -> None:
    result = run_quickstart("vendor", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = (tmp_path / "clone" / "my-backend" / "dist").glob("*.whl")
    assert f"OK   my-backend/dist/{wheel.name}: signed by" in result.stdout


@pytest.mark.triton_wheel
def test_platform_quickstart_runs_as_written(tmp_path: Path, triton_wheel: Path) -> None:
    found = " ".join(filter(None, [str(triton_wheel.parent), os.environ.get("PIP_FIND_LINKS", "")]))
    result = run_quickstart("platform", tmp_path, PIP_FIND_LINKS=found)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "policy:      strict" in result.stdout
    assert re.search(r"nvidia\s+triton 3\.9\.0\s+\[verified, loaded", result.stdout), result.stdout[-3000:]
