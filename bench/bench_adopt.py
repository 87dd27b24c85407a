"""``backend-packager adopt`` of an installed triton 3.9.0 against hashing its installed files,
and ``adopt --wheel-out`` against ``adopt``.

The reference, measured in the same run: sha256 of every file the installed RECORD lists
with a hash (about 1 GB), read in 1 MiB chunks, one thread, in Python (hashlib), with the
page cache warm. That is the least any check of the files against RECORD must do.
``adopt`` does that, plus the ELF scan of the native files, the plan, the signature and the
writes. Target: ratio <= 1.3 at the default ``--jobs`` (the core count); ``--jobs 1`` is
printed too: hashing alone then takes the reference's time, and the fixed costs (start-up,
encoding and signing the statement) come on top.

``adopt --wheel-out`` of the same installed distribution, measured in the same run, against
in-place ``adopt`` at the same ``--jobs`` (target: ratio <= 1.3): it checks the files as
adopt does, then streams them once into the wheel, deflating them on ``--jobs`` threads. Its
floor is printed too: the writer's deflate (1 MiB chunks primed with the 32 KiB before each)
of the same bytes on ``--jobs`` threads, no reading, hashing or writing (on few cores,
deflating is most of what it costs), for each engine installed (ISA-L, the ``fast`` extra,
which adopt uses where installed; zlib level 1), with the compressed size each gives.

Each in-place adopt run works on a fresh hard-linked copy of the site-packages (adopt replaces the
files it writes by renaming, so the copy shares every other file's pages), in a child
process; the best of three runs is kept, as for the reference. Run:
``python bench/bench_adopt.py`` (installs triton 3.9.0 into a venv), or
``python bench/bench_adopt.py --installed SITE_PACKAGES`` for a Triton installed there
(copied first: the installed one is never changed).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import best, fetch_wheel  # noqa: E402

from backend_packager.wheel import deflate  # noqa: E402
from backend_packager.wheel.deflate import Engine  # noqa: E402

RUNS = 3


def install(wheel: Path, root: Path) -> Path:
    """triton installed by pip into a new venv; returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True)
    return next((root / "venv" / "lib").glob("python*/site-packages"))


def hash_recorded(site: Path) -> int:
    """The reference: sha256 of every hashed RECORD row's file. Returns the bytes hashed."""
    (record,) = site.glob("triton-*.dist-info/RECORD")
    total = 0
    with record.open(newline="") as stream:
        for path, digest, _ in csv.reader(stream):
            if not digest or path.startswith("../"):  # script wrappers outside site-packages
                continue
            h = hashlib.sha256()
            with (site / path).open("rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
                    total += len(chunk)
    return total


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, every thread) of one child process: on a shared
    machine the CPU seconds hold still while the wall time follows the other users' load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def adopt(site: Path, key: Path, jobs: int, scratch: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``adopt`` child process on a fresh hard-linked copy of ``site``."""
    copy = scratch / f"site-{time.monotonic_ns()}"
    subprocess.run(["cp", "-al", str(site), str(copy)], check=True)
    spent = timed([sys.executable, "-m", "backend_packager", "adopt", "triton", "--site-packages", str(copy),
                   "--key", str(key), "--jobs", str(jobs), "-q"])
    subprocess.run(["rm", "-rf", str(copy)], check=True)
    return spent


def adopt_wheel_out(site: Path, key: Path, jobs: int, scratch: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``adopt --wheel-out`` child process (the install is only read)."""
    out = scratch / f"wheels-{time.monotonic_ns()}"
    spent = timed([sys.executable, "-m", "backend_packager", "adopt", "triton", "--site-packages", str(site),
                   "--key", str(key), "--jobs", str(jobs), "-q", "--wheel-out", str(out)])
    shutil.rmtree(out)
    return spent


def fastest(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The least wall time and the least CPU time of several runs."""
    return min(w for w, _ in runs), min(c for _, c in runs)


def deflate_recorded(site: Path, jobs: int, using: Engine) -> tuple[float, float, int]:
    """The floor of ``--wheel-out``'s extra work: seconds to deflate the files RECORD hashes,
    already in memory, one file at a time, as the writer does (its chunks, each primed with
    the 32 KiB before it, on ``jobs`` threads, with ``using``), with no reading, hashing or
    writing; wall and CPU seconds, and the bytes it gives."""

    (record,) = site.glob("triton-*.dist-info/RECORD")
    with record.open(newline="") as stream:
        paths = [site / path for path, digest, _ in csv.reader(stream) if digest and not path.startswith("../")]

    def one(data: bytes, at: int) -> int:
        history = data[max(0, at - deflate.WINDOW):at]
        return len(deflate.deflate_chunk(data[at:at + deflate.CHUNK], history, at + deflate.CHUNK >= len(data),
                                         using))

    elapsed = cpu = 0.0
    size = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for path in paths:
            data = path.read_bytes()
            start, start_cpu = time.perf_counter(), time.process_time()
            size += sum(pool.map(one, itertools.repeat(data), range(0, max(len(data), 1), deflate.CHUNK)))
            elapsed += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
    return elapsed, cpu, size


def copy_installed(installed: Path, root: Path) -> Path:
    """The installed triton's package and .dist-info, copied into a site of their own."""
    site = root / "site"
    site.mkdir()
    for part in [installed / "triton", *installed.glob("triton-*.dist-info")]:
        subprocess.run(["cp", "-a", str(part), str(site)], check=True)
    return site


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--installed", type=Path, metavar="SITE_PACKAGES", help="a Triton installed there")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="the second adopt run's --jobs (default: the core count, adopt's own default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        site = copy_installed(args.installed, root) if args.installed else install(fetch_wheel("triton==3.9.0"), root)
        (dist_info,) = site.glob("triton-*.dist-info")
        key = root / "bench.pem"
        subprocess.run([sys.executable, "-m", "backend_packager", "keygen", "-o", str(key)], check=True,
                       stdout=subprocess.DEVNULL)
        size = hash_recorded(site)  # warms the page cache for everyone
        t_ref = best(lambda: hash_recorded(site), RUNS)
        t_j1, _ = fastest([adopt(site, key, 1, root) for _ in range(RUNS)])
        t_jn, c_jn = fastest([adopt(site, key, args.jobs, root) for _ in range(RUNS)])
        t_w1, _ = fastest([adopt_wheel_out(site, key, 1, root) for _ in range(RUNS)])
        t_wn, c_wn = fastest([adopt_wheel_out(site, key, args.jobs, root) for _ in range(RUNS)])
        floors = {e.name: deflate_recorded(site, args.jobs, e) for e in deflate.engines()}
    used = deflate.engine().name
    t_deflate, c_deflate, _ = floors[used]
    print(f"installed: {dist_info.name} ({size / 1e6:.0f} MB in the files RECORD hashes)")
    print(f"sha256 of the installed files (reference) {t_ref:7.2f} s")
    print(f"adopt --jobs 1   {t_j1:7.2f} s   ratio {t_j1 / t_ref:.2f}")
    print(f"adopt --jobs {args.jobs}   {t_jn:7.2f} s   ratio {t_jn / t_ref:.2f} (target <= 1.3)")
    print(f"adopt --wheel-out --jobs 1   {t_w1:7.2f} s   ratio to adopt --jobs 1: {t_w1 / t_j1:.2f}")
    print(f"adopt --wheel-out --jobs {args.jobs}   {t_wn:7.2f} s   ratio to adopt --jobs {args.jobs}: "
          f"{t_wn / t_jn:.2f} (target <= 1.3)")
    for name, (t_floor, c_floor, packed) in floors.items():
        print(f"  deflating the files alone with {name}{' (what adopt uses)' if name == used else ''}: "
              f"{t_floor:7.2f} s on {args.jobs} threads, {c_floor:.2f} CPU-s, {packed / size:.3f} of their size")
    print(f"  of which at least: deflating the files ({used}) {t_deflate:7.2f} s "
          f"(adopt + deflate: ratio {(t_jn + t_deflate) / t_jn:.2f})")
    print(f"adopt --wheel-out --jobs {args.jobs} against that floor (adopt + deflate): "
          f"{t_wn / (t_jn + t_deflate):.2f}")
    print(f"CPU seconds: adopt {c_jn:.2f}, adopt --wheel-out {c_wn:.2f} (ratio {c_wn / c_jn:.2f}), deflate alone "
          f"{c_deflate:.2f}; (adopt + deflate) / adopt {(c_jn + c_deflate) / c_jn:.2f}")


if __name__ == "__main__":
    main()
