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
* `python -X importtime`: the runtime's own modules on the warm path;
* where valgrind is installed, the instructions each import executes (callgrind, one run of
  each): the same count on every run whatever else the machine does, so the warm ratio by
  instructions is the figure to compare between changes on a shared machine (it leaves out
  waiting for the disk, which the page cache makes small here); and, by the same count, two
  floors of what any hook with today's guarantees pays, each added to the unmodified import: an
  audit hook that returns at once (the native-code guard's hook is one), and a ``stat`` of every
  file the warm verdicts depend on.

With ``--wheel NAME==VERSION`` both venvs are made from that wheel instead: a renamed release
such as ``tokenspeed-triton==3.9.10.post20261028`` is measured as ``import tokenspeed_triton``
(the package `migrate --json` reports), guarded by the same .pth hook, its discovery against
``entry_points().select(group="tokenspeed_triton.backends")``. Repeated, each wheel is measured
in turn in one run, and the warm ratios of all of them are listed together at the end.

With ``--site-packages DIR`` nothing is downloaded, built or migrated: the Triton installed in
DIR, already adopted (its manifest signed), is measured as it is, with this interpreter (whose
site-packages DIR must be, the hook's .pth installed there by `hook install`), the key trusted
by the environment (TRITON_BACKEND_TRUSTED_KEYS or the trust store of `trust add`) and the
runtime importable (installed, or on PYTHONPATH). Every child then starts with ``-S`` and runs
``site.main()`` itself, which is what a normal start-up does; the unmodified reference skips the
hook's .pth there, so both import the same files and their start-ups differ by that .pth alone.
(TRITON_BACKEND_POLICY=off is not the reference: the .pth and the import watch still run.) The
hooked runs use TRITON_BACKEND_POLICY=strict and a verdict cache in a temporary
TRITON_BACKEND_CACHE_DIR, warmed by the first run.

Usage: python bench/bench_runtime.py [-n RUNS] [--wheel NAME==VERSION ... | --site-packages DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
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
#: The runtime's settings that each configuration sets itself (the trusted keys are kept).
RUNTIME_SETTINGS = ("TRITON_BACKEND_POLICY", "TRITON_BACKEND_REHASH", "TRITON_BACKEND_CACHE_DIR")

#: A child: the interpreter, its environment, and the code it runs at start-up after ``-S``
#: ("": a normal start-up, no ``-S``).
Config = tuple[Path, dict[str, str], str]

DISCOVERY = """
import time, sys
t0 = time.perf_counter()
if sys.argv[1] == "ours":
    from triton_backend_runtime.site.discovery import discover
    call = lambda: discover(package=sys.argv[2]).candidates
else:
    from importlib.metadata import entry_points
    call = lambda: list(entry_points().select(group=sys.argv[2] + ".backends"))
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


def setup(work: Path, requirement: str) -> tuple[dict[str, Path], Path, str]:
    """The plain and the hooked venv (see the module docstring); the public key; the Triton
    package the wheel holds."""
    wheel = fetch_wheel(requirement)
    key = work / "bench.pem"
    subprocess.run([str(PACKAGER), "keygen", "-o", str(key)], check=True, capture_output=True)
    migrated = subprocess.run([str(PACKAGER), "migrate", str(wheel), "-o", str(work / "signed"), "--key", str(key),
                               "--json"], check=True, capture_output=True, text=True)
    package: str = json.loads(migrated.stdout)["wheels"][0]["triton_package"]
    pythons = {
        "plain": make_venv(work / "plain", wheel),
        "hooked": make_venv(work / "hooked", work / "signed" / wheel.name),
    }
    subprocess.run([str(pythons["hooked"]), "-m", "triton_backend_runtime", "hook", "install"], check=True,
                   env=_env(work, [ROOT / "runtime"]), capture_output=True)
    (work / "empty").mkdir()
    return pythons, key.with_suffix(".pub"), package


def installed(site: Path, work: Path) -> dict[str, Config]:
    """The configurations of ``--site-packages`` mode (see the module docstring)."""
    from triton_backend_runtime.autohook import OLD_PTH_NAMES, PTH_NAME

    skip = (f"_add = site.addpackage\nsite.addpackage = lambda d, n, k: k if n in {(PTH_NAME, *OLD_PTH_NAMES)!r} "
            "else _add(d, n, k)\n")
    env = {k: v for k, v in os.environ.items() if k not in RUNTIME_SETTINGS}
    env["TRITON_BACKEND_CACHE_DIR"] = str(work / "cache")
    strict = {**env, "TRITON_BACKEND_POLICY": "strict"}
    python = Path(sys.executable)
    configs = {
        "unmodified": (python, env, f"import site\n{skip}site.main()\n"),
        "warm": (python, strict, "import site\nsite.main()\n"),
        "cold": (python, {**strict, "TRITON_BACKEND_REHASH": "1"}, "import site\nsite.main()\n"),
    }
    where = "import os, triton; assert os.path.realpath(triton.__file__).startswith(%r), triton.__file__\n"
    origin = os.path.realpath(site) + os.sep
    for name, config in configs.items():
        done = subprocess.run(command(config, where % origin), env=config[1], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name}: triton is not imported from {site} by {python}:\n{done.stderr}")
    return configs


def command(config: Config, code: str, *args: str, options: tuple[str, ...] = ()) -> list[str]:
    """The child's command line: ``-S`` and the configuration's start-up code first where it has one."""
    python, _, start = config
    if start:
        return [str(python), *options, "-S", "-c", start + code, *args]
    return [str(python), *options, "-c", code, *args]


def _env(work: Path, paths: list[Path], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
    env.update(PYTHONPATH=os.pathsep.join(map(str, paths)), TRITON_BACKEND_CACHE_DIR=str(work / "cache"),
               XDG_CONFIG_HOME=str(work / "config"), **extra)
    return env


def wall(config: Config, code: str) -> tuple[float, float]:
    """Wall time and the child's CPU time (user + system) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command(config, code), env=config[1], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(config: Config, code: str) -> int | None:
    """Instructions one child executes, counted by valgrind's callgrind; None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.out",
                               *command(config, code)], env=config[1], capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    return int(found.group(1)) if done.returncode == 0 and found else None


FILES = (
    "import json, sys\nfrom triton_backend_runtime.loading import registry\nimport {package}\n"
    "json.dump([f for v in registry.get().verdicts.values() for f in v.files], open(sys.argv[1], 'w'))\n"
)
AUDIT_FLOOR = "import sys\nsys.addaudithook(lambda event, args: None)\n"
STAT_FLOOR = "import json, os, sys\nfor path in json.load(open({files!r})):\n    os.path.exists(path)\n"


def floors(configs: dict[str, Config], imports: str, unmodified: int) -> None:
    """The two floors of the module docstring, by instructions, against the unmodified import."""
    with tempfile.TemporaryDirectory() as tmp:
        files = os.path.join(tmp, "files.json")
        package = imports.split()[-1]
        subprocess.run(command(configs["warm"], FILES.format(package=package), files), env=configs["warm"][1],
                       check=True, capture_output=True)
        count = len(json.load(open(files)))
        for what, code in (("an audit hook that returns at once", AUDIT_FLOOR),
                           (f"a stat of each of the {count} files", STAT_FLOOR.format(files=files))):
            spent = instructions(configs["unmodified"], code + imports)
            if spent:
                print(f"  floor, the unmodified import plus {what}: {spent / unmodified:.3f} by instructions")


def built(work: Path, requirement: str) -> tuple[dict[str, Config], str]:
    """The configurations of the default mode, two venvs from the real wheel ``requirement``;
    the Triton package it holds."""
    print(f"setting up a plain venv with {requirement} and a hooked one with its signed copy ...", file=sys.stderr)
    pythons, pub, package = setup(work, requirement)
    trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(pub), "TRITON_BACKEND_POLICY": "strict"}
    runtime = [ROOT / "runtime"]
    return {
        "unmodified": (pythons["plain"], _env(work, [work / "empty"]), ""),
        "warm": (pythons["hooked"], _env(work, runtime, **trusted), ""),
        "cold": (pythons["hooked"], _env(work, runtime, TRITON_BACKEND_REHASH="1", **trusted), ""),
    }, package


def measure(configs: dict[str, Config], package: str, runs: int) -> tuple[float, float]:
    """Every figure of the module docstring for ``import <package>``, printed; the warm ratio to
    the unmodified import, by wall time and by CPU time."""
    imports = f"import {package}"
    check = (
        f"import {package}.backends as b; from triton_backend_runtime.loading import registry as r; "
        "from triton_backend_runtime.triton import importwatch; g = r.get(); "
        "files = sum(len(v.files) for v in g.verdicts.values()); assert g.used_by_triton and g.core is None "
        f"and importwatch.watching({package!r}) and {{e.trust for e in g.entries}} == {{'verified'}}, "
        "g.report(); print(files, {v.coverage for v in g.verdicts.values()})"
    )
    hooked = subprocess.run(command(configs["warm"], check), env=configs["warm"][1], capture_output=True, text=True)
    if hooked.returncode != 0:
        raise SystemExit(f"the hooked import did not verify:\n{hooked.stderr}")
    print(f"hooked: {package} watched by the hook, every backend and the core verified; files the verdict "
          "depends on, coverage:", hooked.stdout.strip())
    reference = configs["unmodified"]
    plain = subprocess.run(command(reference, f"{imports}, sys; print('triton_backend_runtime' in sys.modules)"),
                           env=reference[1], capture_output=True, text=True)
    # Only the hook's own message counts: a preinstalled Triton may warn on import.
    assert plain.stdout.strip() == "False" and "triton-backend-runtime" not in plain.stderr, plain.stderr
    times: dict[str, list[float]] = {k: [] for k in configs}
    cpu: dict[str, list[float]] = {k: [] for k in configs}
    for config in configs.values():  # warm-up: page cache, bytecode, verdict cache
        wall(config, imports)
    # unmodified and warm alternate; the cold runs come after, on their own: one hashes a
    # gigabyte on every core, which slowed the run after it (unmodified, when interleaved)
    for group in (("unmodified", "warm"), ("cold",)):
        for _ in range(runs):
            for name in group:
                elapsed, used = wall(configs[name], imports)
                times[name].append(elapsed)
                cpu[name].append(used)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    for name in configs:
        spread = f"(min {min(times[name]) * 1e3:.1f}, max {max(times[name]) * 1e3:.1f})"
        print(f"{imports}, {name:<10}: median {med[name] * 1e3:7.1f} ms over {runs} runs {spread}, "
              f"CPU {med_cpu[name] * 1e3:.1f} ms")
    ratio = (med["warm"] / med["unmodified"], med_cpu["warm"] / med_cpu["unmodified"])
    print(f"ratio warm registry / unmodified {imports}: {ratio[0]:.3f} (target <= 1.05)")
    print(f"  the same by CPU time (user + system): {ratio[1]:.3f}")
    print(f"ratio cold (rehash) / warm: {med['cold'] / med['warm']:.2f}")
    counted = {name: instructions(configs[name], imports) for name in ("unmodified", "warm")}
    if counted["unmodified"] and counted["warm"]:
        print(f"  the same by instructions (callgrind, deterministic): {counted['warm'] / counted['unmodified']:.3f} "
              f"({counted['warm'] / 1e6:.1f} M / {counted['unmodified'] / 1e6:.1f} M)")
        floors(configs, imports, counted["unmodified"])
    else:
        print("  by instructions: not measured (valgrind is not installed)")

    disc = {}
    for which in ("ours", "entry_points"):
        out = subprocess.run(command(configs["warm"], DISCOVERY, which, package), env=configs["warm"][1],
                             capture_output=True, text=True, check=True).stdout.split()
        disc[which] = (float(out[0]), float(out[1]), int(out[2]))
    ours, theirs = disc["ours"], disc["entry_points"]
    print(f"discovery per call: ours {ours[1] * 1e3:.2f} ms, entry_points().select {theirs[1] * 1e3:.2f} ms, "
          f"ratio {ours[1] / theirs[1]:.2f} (both found {ours[2]} / {theirs[2]})")
    print(f"discovery first call incl. imports: ours {ours[0] * 1e3:.2f} ms, entry_points {theirs[0] * 1e3:.2f} "
          f"ms, ratio {ours[0] / theirs[0]:.2f}")

    done = subprocess.run(command(configs["warm"], imports, options=("-X", "importtime")),
                          env=configs["warm"][1], capture_output=True, text=True)
    rows = [line.split("|") for line in done.stderr.splitlines() if "triton_backend_runtime" in line]
    own = sum(int(r[0].split(":")[1]) for r in rows)
    print(f"-X importtime, warm: triton_backend_runtime modules (self) {own / 1e3:.1f} ms in {len(rows)} modules:")
    for row in rows:
        print(f"   {int(row[0].split(':')[1]) / 1e3:6.2f} ms  {row[2].strip()}")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=21, help="runs per configuration (default 21)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--wheel", action="append", metavar="NAME==VERSION",
                       help="the real wheel both venvs are made from (default triton==3.9.0; a renamed release "
                            "is imported by its own package name); repeat it to measure several in one run")
    where.add_argument("--site-packages", type=Path, metavar="DIR",
                       help="measure the adopted Triton installed in DIR, this interpreter's site-packages, as it is")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
        if args.site_packages:
            measure(installed(args.site_packages, Path(tmp)), "triton", args.n)
            return
        ratios = {}
        for number, requirement in enumerate(args.wheel or ["triton==3.9.0"]):
            work = Path(tmp) / str(number)
            work.mkdir()
            configs, package = built(work, requirement)
            print(f"== {requirement}: import {package}")
            ratios[requirement] = measure(configs, package, args.n)
        if len(ratios) > 1:
            print("warm / unmodified, wall and CPU, in this run:")
            for requirement, (by_wall, by_cpu) in ratios.items():
                print(f"  {requirement}: {by_wall:.3f}, {by_cpu:.3f}")


if __name__ == "__main__":
    main()
