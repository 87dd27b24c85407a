"""Migrating the real triton 3.9.0 wheel (286 MB; 1.04 GB inflated) against references.

References, measured in the same run:
- the lower bound of reading the wheel: inflating and sha256-hashing every member once, in
  Python (zipfile + hashlib). Targets: ratio <= 1.2 with --jobs 1 (plugin capture off, the
  default; bench_capture.py measures the capture's cost alone), lower with --jobs 2;
- ``auditwheel show`` of the same wheel (skipped with --no-auditwheel): target >= 20x faster;
- migrate without the PEP 770 SBOM (``Options(sbom=False)``, no command-line switch): migrate
  with it costs at most 2 % more (target ratio <= 1.02; its facts are already scanned). Both
  run the same way, in a child calling ``migrate_wheel``, alternately, the best of
  ``--sbom-runs`` each; wall and CPU seconds (CPU is steadier on a shared machine). Also the
  SBOM alone of 2k, 8k and 32k empty bitcode members (a hostile wheel): about linear.
Also prints the peak resident memory of each migrate run (it runs in a child process).
Run: ``python bench/bench_migrate.py [--no-auditwheel] [--sbom-only] [--sbom-runs N]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import best, fetch_wheel  # noqa: E402


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


#: One migration through the API, in a child: ``WHEEL OUT KEY JOBS SBOM(0|1)``.
_MIGRATE_API = """
import sys
from pathlib import Path
from backend_packager.commands.migrate import Options, migrate_wheel
from backend_packager.manifest import signing
wheel, out, key, jobs, sbom = sys.argv[1:]
done = migrate_wheel(Path(wheel), Path(out), signing.load(Path(key)), jobs=int(jobs), options=Options(sbom=sbom == "1"))
sys.exit(f"migrate failed: {done.error}" if done.error else 0)
"""


def migrate_api(wheel: Path, out: Path, jobs: int, key: Path, sbom: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one migration into ``out`` with or without the SBOM (a child process)."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _MIGRATE_API, str(wheel), str(out), str(key), str(jobs),
                    "1" if sbom else "0"], check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def sbom_alone(migrated: Path) -> float:
    """Seconds to make the SBOM of ``migrated``'s manifest (itself left out) and add it to the plan:
    what the SBOM adds to a migration, without the noise of two whole runs."""
    from triton_backend_runtime.manifest import MANIFEST_FILENAME
    from triton_backend_runtime.trust import dsse, manifest_from_statement

    from backend_packager.manifest import Injection, sbomfile

    with zipfile.ZipFile(migrated) as archive:
        dist_info = next(n.split("/")[0] for n in archive.namelist() if n.split("/")[0].endswith(".dist-info"))
        envelope = dsse.decode(archive.read(f"{dist_info}/{MANIFEST_FILENAME}"), "manifest")
    manifest = manifest_from_statement(dsse.unverified_payload(envelope), "manifest")
    member = sbomfile.sbom_member(dist_info)
    manifest = dataclasses.replace(manifest, sbom=None, artifacts=[a for a in manifest.artifacts if a.path != member])
    return best(lambda: sbomfile.with_sbom(Injection(manifest, {}), dist_info), 3)


def sbom_cost(wheel: Path, key: Path, runs: int) -> list[str]:
    """Migrate with the SBOM against without, alternately; the best of ``runs`` each: the lines to print."""
    with_sbom: list[tuple[float, float]] = []
    without: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        for _ in range(runs):
            without.append(migrate_api(wheel, out, 1, key, sbom=False))
            with_sbom.append(migrate_api(wheel, out, 1, key, sbom=True))
        alone = sbom_alone(out / wheel.name)
    wall = (min(w for w, _ in with_sbom), min(w for w, _ in without))
    cpu = (min(c for _, c in with_sbom), min(c for _, c in without))
    return [f"migrate --jobs 1 with SBOM    {wall[0]:7.2f} s wall {cpu[0]:7.2f} s CPU",
            f"migrate --jobs 1 without SBOM {wall[1]:7.2f} s wall {cpu[1]:7.2f} s CPU",
            f"with / without SBOM: wall {wall[0] / wall[1]:.3f}, CPU {cpu[0] / cpu[1]:.3f} (target <= 1.02; "
            f"best of {runs} each)",
            f"the SBOM alone (made and added to the plan) {alone:.3f} s: ratio {1 + alone / wall[1]:.3f} "
            "to migrate without it", sbom_scaling()]


def sbom_scaling(counts: tuple[int, ...] = (2_000, 8_000, 32_000)) -> str:
    """CPU seconds of the SBOM of a hostile wheel's ``count`` empty bitcode members: about linear
    (it was quadratic: cyclonedx's dependency registration and output scan every entry per file)."""
    from triton_backend_runtime.manifest import model as m

    from backend_packager.manifest.sbom import sbom_bytes

    empty = hashlib.sha256(b"").hexdigest()
    times = []
    for count in counts:
        artifacts = [m.Artifact(f"pkg/k{i:06d}.bc", empty, 0) for i in range(count)]
        start = time.process_time()
        sbom_bytes(artifacts, name="hostile", version="1")
        times.append(f"{count} {time.process_time() - start:.2f} s")
    return "SBOM of N empty .bc members (CPU, target about linear): " + ", ".join(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-auditwheel", action="store_true", help="skip the (slow) auditwheel reference")
    parser.add_argument("--sbom-only", action="store_true", help="only migrate with the SBOM against without")
    parser.add_argument("--sbom-runs", type=int, default=2, help="runs of each for the SBOM comparison")
    args = parser.parse_args()
    wheel = fetch_wheel("triton==3.9.0")
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "bench.pem"
        subprocess.run([sys.executable, "-m", "backend_packager", "keygen", "-o", str(key)], check=True,
                       stdout=subprocess.DEVNULL)
        read_everything(wheel)  # warm the page cache for everyone
        if args.sbom_only:
            print("\n".join(sbom_cost(wheel, key, args.sbom_runs)))
            return
        t_read = read_everything(wheel)
        t_j1, rss_j1 = migrate(wheel, 1, key)
        t_j2, rss_j2 = migrate(wheel, 2, key)
        sbom = sbom_cost(wheel, key, args.sbom_runs)
    print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB)")
    print(f"inflate+sha256 every member (reference) {t_read:7.2f} s")
    print(f"migrate --jobs 1   {t_j1:7.2f} s   ratio {t_j1 / t_read:.2f} (target <= 1.2)   peak RSS {rss_j1:.0f} MB")
    print(f"migrate --jobs 2   {t_j2:7.2f} s   ratio {t_j2 / t_read:.2f} (target < jobs 1)  peak RSS {rss_j2:.0f} MB")
    print("\n".join(sbom))
    if not args.no_auditwheel:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        t_aw = time.perf_counter() - start
        print(f"auditwheel show    {t_aw:7.2f} s   speed-up of migrate: --jobs 1 {t_aw / t_j1:.1f}x, "
              f"--jobs 2 {t_aw / t_j2:.1f}x (target >= 20x)")


if __name__ == "__main__":
    main()
