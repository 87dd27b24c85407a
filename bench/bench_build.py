"""`python -m build --wheel` of the setuptools example: with the packager's hook, against the
same project built by plain setuptools, measured alternately in the same run.

The hook adds: reading the configuration, loading the key, one streaming pass over the wheel
(hash + ELF scan), signing, and the raw-copy rewrite. Each build starts from a fresh copy
of the project (no ``build/`` left over), so both sides compile the C driver library.

Prints the medians and the ratio (hook / plain); target <= 1.10.

Then the isolated build a vendor runs, ``PIP_FIND_LINKS=wheelhouse python -m build PROJECT``
(sdist, then the wheel from it, each in a fresh environment), of a project from
``backend-packager init``, against ``python -m build`` of the same project with plain
setuptools (its ``build-backend`` and requirements changed back), alternately; and the
isolated environment alone: packages installed and seconds, packager against setuptools.
The wheelhouse is built first, as ``make wheelhouse`` builds it. Target <= 1.30.
Run: ``python bench/bench_build.py [--repeat N] [--isolated-repeat N]`` (0 skips a part).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "setuptools_backend"
TARGET = 1.10
ISOLATED_TARGET = 1.30
HOOK_REQUIREMENT = '"triton-backend-packager>='


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
    parser.add_argument("--isolated-repeat", type=int, default=3,
                        help="isolated builds per side (default: %(default)s)")
    args = parser.parse_args()
    if args.repeat > 0:
        in_venv(args.repeat)
    if args.isolated_repeat > 0:
        isolated(args.isolated_repeat)


def in_venv(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        base = Path(tmp)
        key = base / "bench.pem"
        exe = Path(sys.executable).parent / "backend-packager"
        subprocess.run([str(exe), "keygen", "-o", str(key)], check=True, capture_output=True)
        env = {**os.environ, "BACKEND_PACKAGER_SIGNING_KEY": str(key), "SOURCE_DATE_EPOCH": "1700000000"}
        build_once(base, True, env)  # warm-up: page cache, compiler, imports
        build_once(base, False, env)
        samples: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeat):
            for hooked in (True, False):  # alternate, so drift hits both sides alike
                samples[hooked].append(build_once(base, hooked, env))
    hooked, plain = statistics.median(samples[True]), statistics.median(samples[False])
    ratio = hooked / plain
    print(f"python -m build --wheel, setuptools example, median of {repeat}")
    print(f"  plain setuptools.build_meta : {plain * 1000:8.1f} ms")
    print(f"  backend_packager.build      : {hooked * 1000:8.1f} ms  (+{(hooked - plain) * 1000:.1f} ms)")
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"  ratio hook/plain            : {ratio:8.3f}  (target <= {TARGET:.2f}: {verdict})")



# -- the isolated build a vendor runs ----------------------------------------------------


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")


def make_wheelhouse(out: Path) -> None:
    """Both distributions, built isolated as `make wheelhouse` builds them."""
    for project in (ROOT / "runtime", ROOT):
        run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(project)])


def init_projects(base: Path) -> tuple[Path, Path]:
    """A project from `backend-packager init`, and its plain-setuptools twin."""
    exe = Path(sys.executable).parent / "backend-packager"
    hooked = base / "vendor"
    run([str(exe), "init", str(hooked)])
    plain = base / "plain"
    shutil.copytree(hooked, plain)
    pyproject = plain / "pyproject.toml"
    text = pyproject.read_text().replace('build-backend = "backend_packager.build"',
                                         'build-backend = "setuptools.build_meta"')
    start = text.index(HOOK_REQUIREMENT)
    text = text[:start].rstrip(", ") + text[text.index('"', start + len(HOOK_REQUIREMENT)) + 1:]
    pyproject.write_text(text)
    return hooked, plain


def isolated_once(project: Path, env: dict[str, str]) -> float:
    for leftover in ("dist", "build"):
        shutil.rmtree(project / leftover, ignore_errors=True)
    start = time.perf_counter()
    run([sys.executable, "-m", "build", str(project)], env=env, cwd=project.parent)
    return time.perf_counter() - start


def env_once(base: Path, requirements: list[str], wheelhouse: Path) -> tuple[float, int]:
    """What the frontend does per hook call: a fresh venv and pip installing the requirements."""
    target = base / "env"
    shutil.rmtree(target, ignore_errors=True)
    start = time.perf_counter()
    run([sys.executable, "-m", "venv", "--without-pip", str(target)])
    run([sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install", "-q",
         "--find-links", str(wheelhouse), *requirements], env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    elapsed = time.perf_counter() - start
    listing = subprocess.run([sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "list",
                              "--format=json"], capture_output=True, text=True, check=True).stdout
    return elapsed, len(json.loads(listing))


def isolated(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-build-isolated-") as tmp:
        base = Path(tmp)
        wheelhouse = base / "wheelhouse"
        make_wheelhouse(wheelhouse)
        hooked_project, plain_project = init_projects(base)
        run([str(Path(sys.executable).parent / "backend-packager"), "keygen", "-o", str(base / "vendor.pem")])
        # The wheelhouse first; find-links already configured (a local mirror) stay usable.
        links = " ".join(filter(None, [str(wheelhouse), os.environ.get("PIP_FIND_LINKS", "")]))
        env = {**os.environ, "PIP_FIND_LINKS": links, "BACKEND_PACKAGER_SIGNING_KEY": "vendor.pem",
               "SOURCE_DATE_EPOCH": "1700000000", "PWD": str(base)}
        isolated_once(hooked_project, env)  # warm-up: pip's cache, the page cache
        isolated_once(plain_project, env)
        builds: dict[bool, list[float]] = {True: [], False: []}
        envs: dict[bool, list[float]] = {True: [], False: []}
        counts = {}
        for _ in range(repeat):
            for hooked in (True, False):
                builds[hooked].append(isolated_once(hooked_project if hooked else plain_project, env))
                reqs = ["setuptools>=61", *(["triton-backend-packager"] if hooked else [])]
                seconds, counts[hooked] = env_once(base, reqs, wheelhouse)
                envs[hooked].append(seconds)
    med = {h: statistics.median(builds[h]) for h in (True, False)}
    env_med = {h: statistics.median(envs[h]) for h in (True, False)}
    ratio = med[True] / med[False]
    print(f"\nisolated python -m build (sdist, then wheel), `backend-packager init` project, median of {repeat}")
    print(f"  build env, plain setuptools : {env_med[False]:8.2f} s  {counts[False]} packages")
    print(f"  build env, packager         : {env_med[True]:8.2f} s  {counts[True]} packages")
    print(f"  plain setuptools.build_meta : {med[False]:8.2f} s")
    print(f"  backend_packager.build      : {med[True]:8.2f} s  (+{med[True] - med[False]:.2f} s)")
    verdict = "met" if ratio <= ISOLATED_TARGET else "MISSED"
    print(f"  ratio hook/plain            : {ratio:8.3f}  (target <= {ISOLATED_TARGET:.2f}: {verdict})")


if __name__ == "__main__":
    main()
