"""Cold verification of the real triton 3.9.0 (every file of the wheel listed, ~600 files,
~1 GB) against a parallel sha256 of the same files, measured in the same run.

Setup: the wheel migrated and signed by `backend-packager migrate`, installed with
`pip install --target`, the key trusted. Then, alternating, each in a fresh process, files
in the page cache (the first round of each is a warm-up):

* ours: `registry.verify(rehash=True)` (TRITON_BACKEND_REHASH: every artifact hashed, the
  signature checked, the manifest parsed, unlisted code searched), timed
  inside the process from the call, the runtime's lazy imports included;
* reference: sha256 of the same files (the manifest's artifact list, installed paths) with
  the same thread count (`installed.hash_workers()`), biggest first, 1 MiB reads.

Prints the median of each and the ratio (target <= 1.2), the single-thread sha256 and the
largest file alone (the floor for any thread count), and where our time goes: each step of
`verify._verify` timed by wrapping it (``--phases``, on by default).

With ``--site-packages DIR`` nothing is downloaded or migrated: the Triton installed in DIR,
already adopted (its manifest signed), is verified as it is, the key trusted by the environment
(TRITON_BACKEND_TRUSTED_KEYS or the trust store of `trust add`), the runtime importable
(installed, or on PYTHONPATH); DIR goes first on the children's PYTHONPATH and the verdict cache
into a temporary TRITON_BACKEND_CACHE_DIR (REHASH bypasses it anyway).

Run: ``python bench/bench_verify.py [-n RUNS] [--site-packages DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import signed_triton_site  # noqa: E402

#: The runtime's settings that the benchmark sets itself (the trusted keys are kept).
RUNTIME_SETTINGS = ("TRITON_BACKEND_POLICY", "TRITON_BACKEND_REHASH", "TRITON_BACKEND_CACHE_DIR")

OURS = """
import importlib.util, json, sys, time
t0 = time.perf_counter()
from triton_backend_runtime.loading import registry
from triton_backend_runtime.site.installed import hash_workers
reg = registry.get()
reg.verify(rehash=True)
elapsed = time.perf_counter() - t0
status = sorted({v.status for v in reg.verdicts.values()})
coverage = sorted({v.coverage for v in reg.verdicts.values()})
print(json.dumps({"seconds": elapsed, "hashed": reg.hashed_bytes, "workers": hash_workers(), "status": status,
                  "coverage": coverage, "triton": importlib.util.find_spec("triton").origin}))
"""

REFERENCE = """
import base64, hashlib, json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
site, manifest, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
envelope = json.load(open(manifest))
artifacts = json.loads(base64.b64decode(envelope["payload"]))["predicate"]["artifacts"]
files = sorted(((os.path.join(site, a["path"]), a["size"]) for a in artifacts), key=lambda f: -f[1])

def sha256(item):
    digest = hashlib.sha256()
    with open(item[0], "rb", buffering=0) as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()

t0 = time.perf_counter()
if workers > 1:
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(sha256, files))
else:
    [sha256(f) for f in files]
elapsed = time.perf_counter() - t0
t1 = time.perf_counter()
sha256(files[0])
largest = time.perf_counter() - t1
print(json.dumps({"seconds": elapsed, "files": len(files), "bytes": sum(s for _, s in files), "largest": largest,
                  "largest_name": os.path.relpath(files[0][0], site)}))
"""

# Each step of verify._verify, timed by replacing the module global it is called through.
PHASES = """
import json, time
from triton_backend_runtime.site import installed
from triton_backend_runtime.loading import registry
from triton_backend_runtime.verification import distribution as verify
times = {}
def timed(owner, name, label):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, name, wrapper)
for name in ("_hash_ahead", "read_bounded", "_check_signature", "_locate", "_claims",
             "_check_delegation", "_check_identity", "check_environment", "_check_artifacts",
             "check_unlisted", "_check_symbols"):
    if hasattr(verify, name):
        timed(verify, name, name)
for name in ("load", "manifest_of"):
    timed(verify.statement, name, f"statement.{name}")
timed(installed.HashCache, "digests", "  of which HashCache.digests (waiting for sha256 not done yet)")
timed(verify, "verify_distribution", "verify_distribution (all)")
t0 = time.perf_counter()
registry.get().verify(rehash=True)
times["registry.verify (all, imports included)"] = time.perf_counter() - t0
print(json.dumps(times))
"""


def environment(work: Path, site: Path, pub: Path | None) -> dict[str, str]:
    """The children's environment: the built site and its key, or (``pub`` None) the
    installed site with the trust of this environment."""
    if pub is None:
        env = {k: v for k, v in os.environ.items() if k not in RUNTIME_SETTINGS}
        paths = [str(site), *filter(None, [env.get("PYTHONPATH")])]
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
        paths = [str(site), str(ROOT / "runtime")]
        env.update(TRITON_BACKEND_TRUSTED_KEYS=str(pub), XDG_CONFIG_HOME=str(work / "config"))
    env.update(PYTHONPATH=os.pathsep.join(paths), TRITON_BACKEND_CACHE_DIR=str(work / "cache"))
    return env


def manifest_of(site: Path) -> Path:
    """Triton's signed manifest in ``site``."""
    found = sorted(site.glob("triton-*.dist-info/triton_backend.dsse.json"))
    if not found:
        raise SystemExit(f"no adopted Triton in {site}: no triton-*.dist-info/triton_backend.dsse.json")
    return found[0]


def run_json(code: str, env: dict[str, str], *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=9, help="runs of each (default 9), after one warm-up")
    parser.add_argument("--no-phases", action="store_true", help="skip the per-step breakdown")
    parser.add_argument("--site-packages", type=Path, metavar="DIR",
                        help="verify the adopted Triton installed in DIR as it is (nothing downloaded or migrated)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        work = Path(tmp)
        pub: Path | None = None
        if args.site_packages:
            site = args.site_packages.resolve()
        else:
            print("migrating and installing the signed triton 3.9.0 ...", file=sys.stderr)
            site, pub = signed_triton_site(work)
        env = environment(work, site, pub)
        manifest = manifest_of(site)
        first = run_json(OURS, env)  # warm-up: page cache, bytecode of the runtime
        if first["status"] != ["verified"]:
            raise SystemExit(f"triton did not verify: {first}")
        if not os.path.realpath(first["triton"]).startswith(str(site) + os.sep):
            raise SystemExit(f"triton is imported from {first['triton']}, not from {site}")
        workers = first["workers"]
        label = f"{manifest.parent.name.removesuffix('.dist-info').replace('-', ' ', 1)} signed, coverage " + \
            ", ".join(first["coverage"])
        run_json(REFERENCE, env, str(site), str(manifest), str(workers))
        ours, ref, ref1 = [], [], []
        largest = []
        for _ in range(args.n):
            ours.append(run_json(OURS, env)["seconds"])
            r = run_json(REFERENCE, env, str(site), str(manifest), str(workers))
            ref.append(r["seconds"])
            largest.append(r["largest"])
            ref1.append(run_json(REFERENCE, env, str(site), str(manifest), "1")["seconds"])
        t_ours, t_ref, t_ref1 = statistics.median(ours), statistics.median(ref), statistics.median(ref1)
        print(f"{label}: {r['files']} files, {r['bytes'] / 1e9:.2f} GB; "
              f"{workers} hash threads (installed.hash_workers()); {os.cpu_count()} CPUs; median of {args.n}")
        print(f"cold verification (REHASH)            {t_ours:6.2f} s   (min {min(ours):.2f}, max {max(ours):.2f})")
        print(f"parallel sha256, {workers} threads (reference)  {t_ref:6.2f} s   "
              f"(min {min(ref):.2f}, max {max(ref):.2f})")
        print(f"ratio cold verification / parallel sha256: {t_ours / t_ref:.2f} (target <= 1.2)")
        print(f"sha256, 1 thread                      {t_ref1:6.2f} s;  largest file alone "
              f"({r['largest_name']}) {statistics.median(largest):.2f} s")
        if not args.no_phases:
            samples = [run_json(PHASES, env) for _ in range(3)]
            print("where the cold verification's time goes (median of 3, steps of verify._verify):")
            for label in samples[0]:
                value = statistics.median(s.get(label, 0.0) for s in samples)
                print(f"   {value * 1e3:8.1f} ms  {label}")


if __name__ == "__main__":
    main()
