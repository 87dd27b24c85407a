"""Cold verification of the real triton 3.9.0 signed keylessly (a Sigstore bundle) against the
same wheel signed with a key, measured in the same run (issue 21: the bundle check should add
milliseconds, not seconds).

Setup: the wheel migrated twice by `backend-packager migrate` with the same test key (and the
same SOURCE_DATE_EPOCH, so the same statement): once key-signed only (the reference), once with
a Sigstore bundle over that statement attached (`--sigstore-bundle`), the bundle made offline
by the tests' local Sigstore (tests/helpers/sigstoreca.py: CA, CT log, Rekor-like log). Each is
installed with `pip install --target` into its own site. The reference's key is trusted
(TRITON_BACKEND_TRUSTED_KEYS); for the keyless wheel no key is trusted, only the identity
(`trust add-identity`) and the local Sigstore's root (`trust root`), so the bundle alone admits it.

Then, alternating, each in a fresh process, files in the page cache (one warm-up of each):
`registry.verify(rehash=True)` (TRITON_BACKEND_REHASH: the verdict cache is not read, every
artifact is hashed, the signature checked), timed from the runtime's import to the end of the
call. Prints the median of each, their ratio (keyless / key) and difference, and the split of
the keyless extra in a fresh process of its own: the one-time import of the sigstore modules
the check needs (after the runtime's trust layer), the first `verify_bundle` (the trusted root
parsed), and `verify_bundle` again with everything imported and parsed (the bundle check itself).

Run: ``python bench/bench_keyless.py [-n RUNS]`` (needs the `sigstore` extra).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
# The local test Sigstore is a test helper (tests/helpers/sigstoreca.py), imported as the tests
# import it (``helpers.*``, tests/ on sys.path): a bench is not a test and has no conftest to do so.
sys.path.insert(0, str(ROOT / "tests"))

from _wheels import fetch_wheel  # noqa: E402
from helpers.sigstoreca import TEST_IDENTITY, TEST_ISSUER, make_local_sigstore  # noqa: E402

MANIFEST = "triton_backend.dsse.json"
BUNDLE = "triton_backend.sigstore.json"

OURS = """
import json, os, time
t0 = time.perf_counter()
from triton_backend_runtime.loading import registry
reg = registry.get()
reg.verify(rehash=True)
elapsed = time.perf_counter() - t0
verdict = next(v for k, v in reg.verdicts.items() if os.path.basename(k).startswith("triton-"))
print(json.dumps({"seconds": elapsed, "status": verdict.status, "problem": str(verdict.problem or ""),
                  "signers": verdict.signers, "keyless": verdict.keyless.san if verdict.keyless else None}))
"""

# The keyless extra alone: what the cold path imports for a bundle, then verify_bundle twice.
SPLIT = """
import base64, glob, json, os, statistics, sys, time
from triton_backend_runtime.trust import load_trust_store, verify_bundle
dist_info = glob.glob(os.path.join(sys.argv[1], "triton-*.dist-info"))[0]
bundle = os.path.join(dist_info, "triton_backend.sigstore.json")
data = open(bundle, "rb").read()
payload = base64.b64decode(json.load(open(os.path.join(dist_info, "triton_backend.dsse.json")))["payload"])
store, problems = load_trust_store()
t0 = time.perf_counter()
import sigstore, sigstore.errors, sigstore.models, sigstore.verify, sigstore_models.trustroot.v1
imported = time.perf_counter() - t0
t1 = time.perf_counter()
verify_bundle(data, payload, "triton", store, bundle)
first = time.perf_counter() - t1
again = []
for _ in range(5):
    t2 = time.perf_counter()
    verify_bundle(data, payload, "triton", store, bundle)
    again.append(time.perf_counter() - t2)
print(json.dumps({"import": imported, "first": first, "check": statistics.median(again), "bundle": len(data),
                  "payload": len(payload)}))
"""


def packager(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "backend_packager", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"backend-packager {args[0]} failed:\n{done.stderr}")


def payload_of(wheel: Path) -> bytes:
    """The statement payload of the manifest in ``wheel``: what a bundle must sign."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(f".dist-info/{MANIFEST}"))
        return base64.b64decode(json.loads(archive.read(name))["payload"])


def install(wheel: Path, site: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-index", "--target", str(site), str(wheel)], check=True)
    return site


def base_env(work: Path, name: str, site: Path) -> dict[str, str]:
    """A child's environment: no trust or runtime settings of this one, its own config and cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "runtime")]),
               XDG_CONFIG_HOME=str(work / name / "config"), TRITON_BACKEND_CACHE_DIR=str(work / name / "cache"))
    return env


def trust(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "triton_backend_runtime", "trust", *args, "--user"], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"trust {args[0]} failed:\n{done.stderr}")


def prepare(work: Path) -> tuple[dict[str, str], dict[str, str], Path]:
    """Both sites built and trusted: the key-signed one's environment, the keyless one's, and
    the keyless site."""
    wheel = fetch_wheel("triton==3.9.0")
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}  # both migrations sign the same statement
    key = work / "bench.pem"
    packager("keygen", "-o", str(key), env=env)
    packager("migrate", str(wheel), "-o", str(work / "key-wheel"), "--key", str(key), env=env)
    signed = work / "key-wheel" / wheel.name
    sigstore = make_local_sigstore(work / "sigstore")
    bundle = work / "triton.sigstore.json"
    bundle.write_bytes(sigstore.sign_dsse(payload_of(signed), identity=TEST_IDENTITY, issuer=TEST_ISSUER))
    packager("migrate", str(wheel), "-o", str(work / "keyless-wheel"), "--key", str(key),
             "--sigstore-bundle", str(bundle), env=env)
    keyed_site = install(signed, work / "key" / "site")
    keyless_site = install(work / "keyless-wheel" / wheel.name, work / "keyless" / "site")
    keyed = {**base_env(work, "key", keyed_site), "TRITON_BACKEND_TRUSTED_KEYS": str(key.with_suffix(".pub"))}
    keyless = base_env(work, "keyless", keyless_site)
    trust(keyless, "add-identity", "--issuer", TEST_ISSUER, "--identity", TEST_IDENTITY)
    trust(keyless, "root", str(sigstore.trusted_root_path))
    return keyed, keyless, keyless_site


def run_json(code: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def checked(result: dict[str, Any], keyless: bool) -> dict[str, Any]:
    """``result``, if triton verified the way this side should: by the bundle alone, or by the key."""
    if result["status"] != "verified" or (result["keyless"] == TEST_IDENTITY) != keyless:
        raise SystemExit(f"triton did not verify {'keylessly' if keyless else 'by its key'}: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=9, help="runs of each (default 9), after one warm-up")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-keyless-") as tmp:
        print("migrating triton 3.9.0 twice (key; key + Sigstore bundle) and installing both ...", file=sys.stderr)
        keyed, keyless, keyless_site = prepare(Path(tmp))
        checked(run_json(OURS, keyed), keyless=False)  # warm-ups: page cache, the runtime's bytecode
        first = checked(run_json(OURS, keyless), keyless=True)
        ours: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.n):
            for side, env in ((False, keyed), (True, keyless)):
                ours[side].append(checked(run_json(OURS, env), keyless=side)["seconds"])
        splits = [run_json(SPLIT, keyless, str(keyless_site)) for _ in range(max(3, args.n // 2))]
    t_key, t_keyless = statistics.median(ours[False]), statistics.median(ours[True])
    split = {k: statistics.median(s[k] for s in splits) for k in ("import", "first", "check")}
    print(f"triton 3.9.0, cold verification (REHASH), median of {args.n}; {os.cpu_count()} CPUs; "
          f"keyless signers {first['signers']}")
    print(f"key-signed (reference)        {t_key:6.3f} s   (min {min(ours[False]):.3f}, max {max(ours[False]):.3f})")
    print(f"keyless (identity only)       {t_keyless:6.3f} s   (min {min(ours[True]):.3f}, max {max(ours[True]):.3f})")
    print(f"ratio keyless / key: {t_keyless / t_key:.3f}; difference {(t_keyless - t_key) * 1e3:+.0f} ms")
    print(f"the keyless extra, alone (median of {len(splits)} processes; bundle {splits[0]['bundle']:,} bytes, "
          f"statement {splits[0]['payload']:,} bytes):")
    print(f"   {split['import'] * 1e3:8.1f} ms  import sigstore (once per process, cold path only)")
    print(f"   {split['first'] * 1e3:8.1f} ms  first verify_bundle (trusted root parsed)")
    print(f"   {split['check'] * 1e3:8.1f} ms  verify_bundle, everything imported and parsed (the bundle check)")


if __name__ == "__main__":
    main()
