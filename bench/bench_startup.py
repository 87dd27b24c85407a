"""Start-up of ``backend-packager scan --json FILE``: the time until the first byte is hashed.

Every figure is a median of N runs, each in a fresh child process:
- the wall time from starting the child to its first sha256 call, against the reference
  ``python -c pass`` (start-up and exit of a bare interpreter) measured in the same run;
- from ``python -X importtime``, the milliseconds of the imports made before that first call:
  the package's own (everything after the interpreter's ``site``; target <= 60 ms) and the
  total (the interpreter's start-up imports included).
The first sha256 call is found by replacing ``hashlib.sha256`` before the package is imported.
The children write and read bytecode in a temporary ``PYTHONPYCACHEPREFIX``, as an installed
package's is compiled once (``PYTHONDONTWRITEBYTECODE`` would compile every edited module at
every start).
Run: ``python bench/bench_startup.py [-n RUNS] [FILE]`` (default: the smallest extension
module of this interpreter).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

MARK = "bench-startup: first sha256 at"

# Runs the console script's code as `python -m backend_packager` does, after wrapping
# hashlib.sha256 so that its first call reports the monotonic clock (shared by processes).
PROBE = f"""
import hashlib, sys, time
real = hashlib.sha256
def first(*args, **kwargs):
    global first_seen
    if not first_seen:
        first_seen = True
        sys.stderr.write(f"{MARK} {{time.monotonic_ns()}}\\n")
        sys.stderr.flush()
    return real(*args, **kwargs)
first_seen = False
hashlib.sha256 = first
import runpy
sys.argv[0] = "backend-packager"
runpy.run_module("backend_packager", run_name="__main__", alter_sys=True)
"""


def default_file() -> Path:
    found = sorted(Path(sysconfig.get_config_var("DESTSHARED")).glob("*.so"), key=lambda p: p.stat().st_size)
    if not found:
        raise SystemExit("no extension module found: name a shared library")
    return found[0]


def bare_start(env: dict[str, str]) -> float:
    start = time.monotonic_ns()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    return (time.monotonic_ns() - start) / 1e6


def to_first_hash(file: Path, importtime: bool, env: dict[str, str]) -> tuple[float, str]:
    """Milliseconds from starting the child to its first sha256 call, and its stderr."""
    flags = ["-X", "importtime"] if importtime else []
    start = time.monotonic_ns()
    child = subprocess.run([sys.executable, *flags, "-c", PROBE, "scan", "--json", str(file)],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    for line in child.stderr.splitlines():
        if line.startswith(MARK):
            return (int(line.split()[-1]) - start) / 1e6, child.stderr
    raise SystemExit(f"the scan hashed nothing:\n{child.stderr}")


def import_ms(stderr: str) -> tuple[float, float]:
    """The package's and all imports' milliseconds before the first hash: top-level rows of
    ``-X importtime`` (``runpy`` is the probe's, not the package's)."""
    own = total = 0.0
    after_site = False
    for line in stderr.splitlines():
        if line.startswith(MARK):
            break
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith("  ") or not cumulative.strip().isdigit():
            continue  # nested: counted in its parent's cumulative; or the header
        ms = int(cumulative) / 1000
        name = name.strip()
        if name == "runpy":
            continue
        total += ms
        if after_site:
            own += ms
        after_site = after_site or name == "site"
    return own, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--runs", type=int, default=21, help="runs of each measurement (default 21)")
    parser.add_argument("file", nargs="?", type=Path, help="the file to scan")
    args = parser.parse_args()
    file = args.file or default_file()
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        to_first_hash(file, False, env)  # compiles the bytecode and warms the page cache
        bare_start(env)
        bare = statistics.median(bare_start(env) for _ in range(args.runs))
        wall = statistics.median(to_first_hash(file, False, env)[0] for _ in range(args.runs))
        imports = [import_ms(to_first_hash(file, True, env)[1]) for _ in range(args.runs)]
    own = statistics.median(i[0] for i in imports)
    total = statistics.median(i[1] for i in imports)
    print(f"scanned: {file} ({file.stat().st_size} bytes), median of {args.runs} runs")
    print(f"python -c pass (reference)         {bare:7.1f} ms")
    print(f"scan --json, start to first hash   {wall:7.1f} ms   ratio {wall / bare:.2f}")
    print(f"-X importtime before first hash: package {own:6.1f} ms (target <= 60), with interpreter start-up "
          f"{total:6.1f} ms")


if __name__ == "__main__":
    main()
