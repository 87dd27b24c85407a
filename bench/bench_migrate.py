"""Migrating the real triton 3.9.0 wheel (286 MB; 1.04 GB inflated) against references.

References, measured in the same run:
- the lower bound of reading the wheel: inflating and sha256-hashing every member once, in
  Python (zipfile + hashlib). Targets: ratio <= 1.3 with --jobs 1, lower with --jobs 2;
- ``auditwheel show`` of the same wheel (skipped with --no-auditwheel): target >= 20x faster.
Also prints the peak resident memory of each migrate run (it runs in a child process).
Run: ``python bench/bench_migrate.py [--no-auditwheel]``.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import fetch_wheel  # noqa: E402


def read_everything(wheel: Path) -> float:
    start = time.perf_counter()
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            digest = hashlib.sha256()
            with archive.open(info) as stream:
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
    return time.perf_counter() - start


def migrate(wheel: Path, jobs: int, key: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one `backend-packager migrate` child process."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "backend_packager", "migrate", str(wheel), "-o", out,
             "--jobs", str(jobs), "--key", str(key)],
            check=True, stdout=subprocess.DEVNULL,
        )
        elapsed = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-auditwheel", action="store_true", help="skip the (slow) auditwheel reference")
    args = parser.parse_args()
    wheel = fetch_wheel("triton==3.9.0")
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "bench.pem"
        subprocess.run([sys.executable, "-m", "backend_packager", "keygen", "-o", str(key)], check=True,
                       stdout=subprocess.DEVNULL)
        read_everything(wheel)  # warm the page cache for everyone
        t_read = read_everything(wheel)
        t_j1, rss_j1 = migrate(wheel, 1, key)
        t_j2, rss_j2 = migrate(wheel, 2, key)
    print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB)")
    print(f"inflate+sha256 every member (reference) {t_read:7.2f} s")
    print(f"migrate --jobs 1   {t_j1:7.2f} s   ratio {t_j1 / t_read:.2f} (target <= 1.3)   peak RSS {rss_j1:.0f} MB")
    print(f"migrate --jobs 2   {t_j2:7.2f} s   ratio {t_j2 / t_read:.2f} (target < jobs 1)  peak RSS {rss_j2:.0f} MB")
    if not args.no_auditwheel:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        t_aw = time.perf_counter() - start
        print(f"auditwheel show    {t_aw:7.2f} s   speed-up of migrate: --jobs 1 {t_aw / t_j1:.1f}x, "
              f"--jobs 2 {t_aw / t_j2:.1f}x (target >= 20x)")


if __name__ == "__main__":
    main()
