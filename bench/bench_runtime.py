"""What the runtime registry costs on `import triton`, as ratios measured in one run.

Sets up two venvs from the real triton==3.9.0 wheel:

* ``plain``: the wheel as published, installed with pip, no hook: the unmodified
  `import triton` (reference);
* ``hooked``: the same wheel migrated and signed by `backend-packager migrate` (a manifest
  listing every file of the wheel, ~600, coverage "all"), installed with pip, the runtime
  on PYTHONPATH, its .pth hook installed, the key trusted, TRITON_BACKEND_POLICY=strict:
  the core and every backend verified before they run.

Both import the same Triton files (only the .dist-info differs); the plain venv gets an
empty directory on PYTHONPATH so that both search a path of the same length. Then, runs
alternating between the unmodified and the warm import (the cold runs after them), median of N:

* `import triton`, hooked with a warm verdict cache, against plain (target: <= 1.05), by wall
  time and by the child's CPU time (user + system: less sensitive to other load on a shared
  machine; both medians);
* cold (TRITON_BACKEND_REHASH=1: every artifact hashed, every signature checked) against warm
  (bench/bench_verify.py measures cold verification against a parallel sha256);
* discovery alone against `importlib.metadata.entry_points().select(group="triton.backends")`,
  per call in one process, and first call including the module imports;
* `python -X importtime`: the runtime's own modules on the warm path.

Usage: python bench/bench_runtime.py [-n RUNS]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import fetch_wheel  # noqa: E402

PACKAGER = Path(sys.executable).parent / "backend-packager"

DISCOVERY = """
import time, sys
t0 = time.perf_counter()
if sys.argv[1] == "ours":
    from triton_backend_runtime.site.discovery import discover
    call = lambda: discover().candidates
else:
    from importlib.metadata import entry_points
    call = lambda: list(entry_points().select(group="triton.backends"))
found = call()
first = time.perf_counter() - t0
runs = []
for _ in range(50):
    t = time.perf_counter(); call(); runs.append(time.perf_counter() - t)
runs.sort()
print(first, runs[len(runs) // 2], len(found))
"""


def make_venv(path: Path, wheel: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True)
    subprocess.run([*pip, "packaging", "cryptography"], check=True)
    return python


def setup(work: Path) -> tuple[dict[str, Path], Path]:
    """The plain and the hooked venv (see the module docstring); the public key."""
    wheel = fetch_wheel("triton==3.9.0")
    key = work / "bench.pem"
    subprocess.run([str(PACKAGER), "keygen", "-o", str(key)], check=True, capture_output=True)
    subprocess.run([str(PACKAGER), "migrate", str(wheel), "-o", str(work / "signed"), "--key", str(key)],
                   check=True, capture_output=True)
    pythons = {
        "plain": make_venv(work / "plain", wheel),
        "hooked": make_venv(work / "hooked", work / "signed" / wheel.name),
    }
    subprocess.run([str(pythons["hooked"]), "-m", "triton_backend_runtime", "hook", "install"], check=True,
                   env=_env(work, [ROOT / "runtime"]), capture_output=True)
    (work / "empty").mkdir()
    return pythons, key.with_suffix(".pub")


def _env(work: Path, paths: list[Path], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
    env.update(PYTHONPATH=os.pathsep.join(map(str, paths)), TRITON_BACKEND_CACHE_DIR=str(work / "cache"),
               XDG_CONFIG_HOME=str(work / "config"), **extra)
    return env


def wall(python: Path, env: dict[str, str], code: str = "import triton") -> tuple[float, float]:
    """Wall time and the child's CPU time (user + system) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=21, help="runs per configuration (default 21)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
        work = Path(tmp)
        print("setting up a plain venv with triton 3.9.0 and a hooked one with its signed copy ...", file=sys.stderr)
        pythons, pub = setup(work)
        trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(pub), "TRITON_BACKEND_POLICY": "strict"}
        runtime = [ROOT / "runtime"]
        configs = {
            "unmodified": (pythons["plain"], _env(work, [work / "empty"])),
            "warm": (pythons["hooked"], _env(work, runtime, **trusted)),
            "cold": (pythons["hooked"], _env(work, runtime, TRITON_BACKEND_REHASH="1", **trusted)),
        }
        check = (
            "import triton.backends as b; from triton_backend_runtime.loading import registry as r; g = r.get(); "
            "files = sum(len(v.files) for v in g.verdicts.values()); assert g.used_by_triton and g.core is None "
            "and {e.trust for e in g.entries} == {'verified'}, g.report(); "
            "print(files, {v.coverage for v in g.verdicts.values()})"
        )
        python, env = configs["warm"]
        print("hooked: every backend and the core verified; files the verdict depends on, coverage:",
              subprocess.run([str(python), "-c", check], env=env, capture_output=True, text=True,
                             check=True).stdout.strip())
        plain = subprocess.run([str(pythons["plain"]), "-c", "import triton, sys; print('triton_backend_runtime' "
                                "in sys.modules)"], env=configs["unmodified"][1], capture_output=True, text=True)
        assert plain.stdout.strip() == "False" and not plain.stderr, plain.stderr
        times: dict[str, list[float]] = {k: [] for k in configs}
        cpu: dict[str, list[float]] = {k: [] for k in configs}
        for python, env in configs.values():  # warm-up: page cache, bytecode
            wall(python, env)
        # unmodified and warm alternate; the cold runs come after, on their own: one hashes a
        # gigabyte on every core, which slowed the run after it (unmodified, when interleaved)
        for group in (("unmodified", "warm"), ("cold",)):
            for _ in range(args.n):
                for name in group:
                    elapsed, used = wall(*configs[name])
                    times[name].append(elapsed)
                    cpu[name].append(used)
        med = {k: statistics.median(v) for k, v in times.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        for name in configs:
            spread = f"(min {min(times[name]) * 1e3:.1f}, max {max(times[name]) * 1e3:.1f})"
            print(f"import triton, {name:<10}: median {med[name] * 1e3:7.1f} ms over {args.n} runs {spread}, "
                  f"CPU {med_cpu[name] * 1e3:.1f} ms")
        print(f"ratio warm registry / unmodified import triton: {med['warm'] / med['unmodified']:.3f} (target <= 1.05)")
        print(f"  the same by CPU time (user + system):         {med_cpu['warm'] / med_cpu['unmodified']:.3f}")
        print(f"ratio cold (rehash) / warm:                      {med['cold'] / med['warm']:.2f}")

        disc = {}
        for which in ("ours", "entry_points"):
            code = DISCOVERY
            python, env = configs["warm"]
            out = subprocess.run([str(python), "-c", code, which], env=env, capture_output=True,
                                 text=True, check=True).stdout.split()
            disc[which] = (float(out[0]), float(out[1]), int(out[2]))
        ours, theirs = disc["ours"], disc["entry_points"]
        print(f"discovery per call: ours {ours[1] * 1e3:.2f} ms, entry_points().select {theirs[1] * 1e3:.2f} ms, "
              f"ratio {ours[1] / theirs[1]:.2f} (both found {ours[2]} / {theirs[2]})")
        print(f"discovery first call incl. imports: ours {ours[0] * 1e3:.2f} ms, entry_points {theirs[0] * 1e3:.2f} "
              f"ms, ratio {ours[0] / theirs[0]:.2f}")

        python, env = configs["warm"]
        done = subprocess.run([str(python), "-X", "importtime", "-c", "import triton"], env=env,
                              capture_output=True, text=True)
        rows = [line.split("|") for line in done.stderr.splitlines() if "triton_backend_runtime" in line]
        own = sum(int(r[0].split(":")[1]) for r in rows)
        print(f"-X importtime, warm: triton_backend_runtime modules (self) {own / 1e3:.1f} ms in {len(rows)} modules:")
        for row in rows:
            print(f"   {int(row[0].split(':')[1]) / 1e3:6.2f} ms  {row[2].strip()}")


if __name__ == "__main__":
    main()
