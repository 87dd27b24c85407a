"""Where benchmarks and tests find real wheels from the package index (cached, never in the repo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("BACKEND_PACKAGER_WHEEL_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "triton-backend-packager" / "wheels"


def fetch_wheel(requirement: str) -> Path:
    """Download ``name==version`` once (no dependencies) and return the cached wheel."""
    name, _, version = requirement.partition("==")
    target = cache_dir()
    prefix = name.replace("-", "_")
    found = sorted(target.glob(f"{prefix}-{version}-*.whl"))
    if found:
        return found[0]
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(target), requirement],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found = sorted(target.glob(f"{prefix}-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip downloaded no wheel for {requirement} into {target}")
    return found[0]
