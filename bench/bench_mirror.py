"""``backend-packager mirror`` over 50 small backend wheels plus the real triton 3.9.0.

Reference, measured in the same run: the sum of migrating each wheel alone
(:func:`backend_packager.commands.migrate.migrate_wheel`, in this process, ``jobs`` = cores, as a
person running ``migrate`` on each wheel would get at best). Target: the first mirror run
(hashing every input and output, writing the index and the state besides) at a ratio of
1.0 or below, with ``--jobs`` = cores. Then the re-run over the unchanged mirror, in
seconds: in this process, and as the whole command (interpreter start included); and once
more with 100 wheels.

The small wheels are written here (a legacy backend: compiler.py, driver.py, a v2 plugin
compiled with gcc from tests/csrc/plugin_v2.c, a triton.backends entry point).
Run: ``python bench/bench_mirror.py [--small N]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _wheels import fetch_wheel  # noqa: E402

COMPILER = "from triton.backends.compiler import BaseBackend\n\n\nclass B{i}Backend(BaseBackend):\n    pass\n"
DRIVER = "from triton.backends.driver import DriverBase\n\n\nclass B{i}Driver(DriverBase):\n    pass\n"


def small_wheel(out: Path, i: int, plugin: bytes) -> Path:
    """A legacy backend wheel ``bench_backend_<i>`` of about 10 kB, valid per PEP 427."""
    name, pkg = f"bench_backend_{i}", f"bench_backend_{i}"
    info = f"{name}-1.0.dist-info"
    members = {
        f"{pkg}/__init__.py": b"",
        f"{pkg}/compiler.py": COMPILER.format(i=i).encode(),
        f"{pkg}/driver.py": DRIVER.format(i=i).encode(),
        f"{pkg}/lib/libbench_plugin.so": plugin,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[triton.backends]\nb{i} = {pkg}\n".encode(),
    }
    rows = [f"{path},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}" for path, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = out / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in members.items():
            archive.writestr(path, data)
    return wheel


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def plugin_library(tmp: Path) -> bytes:
    lib = tmp / "libbench_plugin.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,--build-id", "-o", str(lib),
                    str(ROOT / "tests" / "csrc" / "plugin_v2.c")], check=True)
    return lib.read_bytes()


def alone(wheels: list[Path], out: Path, key: object, jobs: int) -> tuple[float, float]:
    """The reference: each wheel migrated by itself, one after the other (wall, CPU seconds)."""
    from backend_packager.commands.migrate import migrate_wheel

    shutil.rmtree(out, ignore_errors=True)
    wall, cpu = 0.0, time.process_time()
    for wheel in wheels:
        start = time.perf_counter()
        outcome = migrate_wheel(wheel, out, key, jobs=jobs)  # type: ignore[arg-type]
        wall += time.perf_counter() - start
        assert outcome.error is None, outcome.error
    return wall, time.process_time() - cpu


def mirrored(src: Path, out: Path, key: object, jobs: int, fresh: bool = False) -> tuple[float, float, dict[str, int]]:
    """One mirror run (wall, CPU seconds, counts); ``fresh`` starts from an empty OUTDIR."""
    from backend_packager.commands.mirror import mirror

    if fresh:
        shutil.rmtree(out, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    run = mirror([src], out, key, jobs=jobs)  # type: ignore[arg-type]
    return time.perf_counter() - start, time.process_time() - cpu, run.counts()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=50, help="small wheels besides triton (default: 50)")
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs of each; the best is kept "
                        "(default: 2)")
    args = parser.parse_args()
    from backend_packager.manifest import signing

    jobs = os.cpu_count() or 1
    triton = fetch_wheel("triton==3.9.0")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        src = tmp / "src"
        src.mkdir()
        plugin = plugin_library(tmp)
        wheels = [small_wheel(src, i, plugin) for i in range(args.small)]
        shutil.copy(triton, src / triton.name)
        wheels.append(src / triton.name)
        signing.generate(tmp / "bench.pem", tmp / "bench.pub", "bench", None)
        key = signing.load(tmp / "bench.pem")
        alone(wheels[-1:], tmp / "warm", key, jobs)  # page cache and imports warm for both
        refs, firsts = [], []
        for _ in range(args.repeat):  # alternated, so that a busy moment of the machine hits both
            refs.append(alone(wheels, tmp / "alone", key, jobs))
            wall, cpu, counts = mirrored(src, tmp / "mirror", key, jobs, fresh=True)
            assert counts["migrated"] == len(wheels), counts
            firsts.append((wall, cpu))
        t_again, _, counts = mirrored(src, tmp / "mirror", key, jobs)
        assert counts["unchanged"] == len(wheels), counts
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "backend_packager", "mirror", str(src), "-o", str(tmp / "mirror"),
                        "--key", str(tmp / "bench.pem"), "--jobs", str(jobs)], check=True, stdout=subprocess.DEVNULL)
        t_cli = time.perf_counter() - start
        # the yardstick: an unchanged mirror of 100 wheels
        for i in range(args.small, 99):
            small_wheel(src, i, plugin)
        mirrored(src, tmp / "mirror", key, jobs)
        t_hundred, _, counts = mirrored(src, tmp / "mirror", key, jobs)
        assert counts["unchanged"] == 100, counts
    (ref_wall, ref_cpu), (first_wall, first_cpu) = min(refs), min(firsts)
    print(f"wheels: {args.small} small backend wheels + {triton.name}; --jobs {jobs}; best of {args.repeat}")
    print(f"migrate each alone, summed (reference) {ref_wall:7.2f} s   CPU {ref_cpu:6.2f} s")
    print(f"mirror, first run                      {first_wall:7.2f} s   CPU {first_cpu:6.2f} s   "
          f"ratio {first_wall / ref_wall:.2f} (target <= 1.0), CPU ratio {first_cpu / ref_cpu:.2f}")
    print(f"mirror, re-run, nothing changed        {t_again:7.3f} s   (in this process)")
    print(f"backend-packager mirror, re-run        {t_cli:7.3f} s   (the whole command, interpreter start included)")
    print(f"mirror, re-run of 100 unchanged wheels {t_hundred:7.3f} s   (in this process; target well under 1 s)")


if __name__ == "__main__":
    main()
