"""Where benchmarks and tests find real wheels from the package index (cached, never in the repo)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
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


def signed_triton_site(work: Path) -> tuple[Path, Path]:
    """triton 3.9.0 migrated with a fresh key and installed into ``work/site`` (pip
    ``--target``): the site, and the public key that trusts it."""
    wheel = fetch_wheel("triton==3.9.0")
    key = work / "bench.pem"
    packager = [sys.executable, "-m", "backend_packager"]
    subprocess.run([*packager, "keygen", "-o", str(key)], check=True, capture_output=True)
    subprocess.run([*packager, "migrate", str(wheel), "-o", str(work / "signed"), "--key", str(key)],
                   check=True, capture_output=True)
    site = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-index", "--target", str(site), str(work / "signed" / wheel.name)], check=True)
    return site, key.with_suffix(".pub")


def best(run: Callable[[], object], runs: int) -> float:
    """The fastest of ``runs`` timed calls of ``run``, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)
