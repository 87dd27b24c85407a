"""`python -m build --wheel` of the setuptools example: with the packager's hook, against the
same project built by plain setuptools, measured alternately in the same run.

The hook adds: reading the configuration, loading the key, one streaming pass over the wheel
(hash + ELF scan), signing, and the raw-copy rewrite. Each build starts from a fresh copy
of the project (no ``build/`` left over), so both sides compile the C driver library.

Prints the medians and the ratio (hook / plain); target <= 1.10.
Run: ``python bench/bench_build.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "setuptools_backend"
TARGET = 1.10


def prepare(base: Path, hooked: bool) -> Path:
    project = base / ("hooked" if hooked else "plain")
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    if not hooked:
        pyproject = project / "pyproject.toml"
        text = pyproject.read_text().replace('build-backend = "backend_packager.build"',
                                             'build-backend = "setuptools.build_meta"')
        pyproject.write_text(text)
    return project


def build_once(base: Path, hooked: bool, env: dict[str, str]) -> float:
    project = prepare(base, hooked)
    out = base / "dist"
    cmd = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(project)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=project)
    elapsed = time.perf_counter() - start
    shutil.rmtree(project)
    shutil.rmtree(out)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="builds per side (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        base = Path(tmp)
        key = base / "bench.pem"
        exe = Path(sys.executable).parent / "backend-packager"
        subprocess.run([str(exe), "keygen", "-o", str(key)], check=True, capture_output=True)
        env = {**os.environ, "BACKEND_PACKAGER_SIGNING_KEY": str(key), "SOURCE_DATE_EPOCH": "1700000000"}
        build_once(base, True, env)  # warm-up: page cache, compiler, imports
        build_once(base, False, env)
        samples: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeat):
            for hooked in (True, False):  # alternate, so drift hits both sides alike
                samples[hooked].append(build_once(base, hooked, env))
    hooked, plain = statistics.median(samples[True]), statistics.median(samples[False])
    ratio = hooked / plain
    print(f"python -m build --wheel, setuptools example, median of {args.repeat}")
    print(f"  plain setuptools.build_meta : {plain * 1000:8.1f} ms")
    print(f"  backend_packager.build      : {hooked * 1000:8.1f} ms  (+{(hooked - plain) * 1000:.1f} ms)")
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"  ratio hook/plain            : {ratio:8.3f}  (target <= {TARGET:.2f}: {verdict})")


if __name__ == "__main__":
    main()
