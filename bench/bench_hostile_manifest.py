"""A cold `import triton` with a hostile manifest present, against the same cold import without it.

Setup, as bench/bench_verify.py: the real triton 3.9.0 wheel migrated and signed by
`backend-packager migrate`, installed with `pip install --target` into a site directory, the
runtime's .pth hook installed there (`hook install --site`), the key trusted,
TRITON_BACKEND_POLICY=strict. In the same site, a distribution `aaa-hostile` whose manifest
takes one of the shapes below; its name sorts first (the registry verifies the core first all
the same). Between runs its .dist-info is renamed in and out.

Each run is a fresh process, `site.addsitedir(SITE); import triton`, with an empty verdict
cache: cold, every artifact hashed and every signature checked. For each shape, runs with and
without it alternate; median of N each (wall time, and the child's CPU time); the ratio per
shape, then the worst (target <= 1.2).

Shapes (hash-only unless said; built from Triton's own signed statement, renamed):
* tags-100k, tags-400k: 100,000 or 400,000 wheel tags (what cost 40 s or 90 s when every tag met
  every interpreter tag);
* values-at-budget: as many JSON values as MAX_UNSIGNED_MANIFEST_VALUES lets through, as import
  objects of one library made a plugin, with MAX_UNSIGNED_LOOKUP_BYTES of names to look up in
  libtriton.so; every artifact Triton's own (right sizes and sha256), so the whole check runs;
* bytes-at-budget: MAX_UNSIGNED_MANIFEST_BYTES, long strings in a key readers ignore;
* tags-at-cap: MAX_TAGS tags of MAX_TAG_PARTS dotted parts in each field, none of this Python's;
* forged-signature: a MAX_MANIFEST_BYTES payload with MAX_SIGNATURES signatures that name the
  trusted key and are not its (the payload is decoded and one signature checked: the worst an
  envelope can make a verification do before its payload is parsed).

Usage: python bench/bench_hostile_manifest.py [-n RUNS] [--shapes NAME,...]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "runtime"))

from _wheels import signed_triton_site  # noqa: E402
from triton_backend_runtime.manifest import model as m  # noqa: E402
from triton_backend_runtime.trust import dsse  # noqa: E402
from triton_backend_runtime.verification.environment import MAX_TAG_PARTS  # noqa: E402

NAME, VERSION = "aaa-hostile", "1.0"
INFO = "aaa_hostile-1.0.dist-info"
IMPORT = """
import site, sys
site.addsitedir(sys.argv[1])
import triton
"""
CHECK = IMPORT + """
import json
from triton_backend_runtime.loading import registry
reg = registry.get()
print(json.dumps({"used": reg.used_by_triton, "entries": sorted({e.trust for e in reg.entries}),
                  "verdicts": {k.rsplit("/", 1)[-1]: [v.status, v.problem.code if v.problem else None,
                                                      (v.problem.message if v.problem else "")[:160]]
                               for k, v in reg.verdicts.items()}}))
"""


def setup(work: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The site with the signed Triton and the hook; the public key; Triton's signed statement."""
    site, pub = signed_triton_site(work)
    subprocess.run([sys.executable, "-m", "triton_backend_runtime", "hook", "install", "--site", str(site)],
                   check=True, capture_output=True)
    envelope = json.loads((site / "triton-3.9.0.dist-info" / m.MANIFEST_FILENAME).read_bytes())
    return site, pub, json.loads(base64.b64decode(envelope["payload"]))


def renamed(triton: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(triton))
    doc["predicate"].update(name=NAME, version=VERSION)
    return doc


def values(body: bytes) -> int:
    from triton_backend_runtime.base.jsonlimits import _NOT_BRACKETS, _outside_strings

    outside = _outside_strings(body)
    return outside.count(b",") + len(outside.translate(None, _NOT_BRACKETS)) // 2 + 1


def tags(count: int) -> Callable[[dict[str, Any], str], bytes]:
    def shape(triton: dict[str, Any], keyid: str) -> bytes:
        doc = renamed(triton)
        doc["predicate"]["tags"] = doc["predicate"]["tags"][:1] * count
        return seal(doc)

    return shape


def values_at_budget(triton: dict[str, Any], keyid: str) -> bytes:
    doc = renamed(triton)
    plugin = next(a for a in doc["predicate"]["artifacts"] if a["path"] == "triton/plugins/libTritonPluginsTestLib.so")
    room = m.MAX_UNSIGNED_LOOKUP_BYTES - 20_000  # Triton's own plugins have 17 KB of names looked up
    names = [f"hostile_{n:06d}".ljust(200, "x") for n in range(room // 200)]
    plugin["elf"]["imports"] += [{"name": n, "weak": False, "version": None, "library": None} for n in names]
    weak = {"name": "w", "weak": True, "version": None, "library": None}  # not looked up: decoded only
    spare = m.MAX_UNSIGNED_MANIFEST_VALUES - values(json.dumps(doc).encode()) - 1000
    plugin["elf"]["imports"] += [weak] * (spare // 5)
    return seal(doc)


def bytes_at_budget(triton: dict[str, Any], keyid: str) -> bytes:
    doc = renamed(triton)
    room = m.MAX_UNSIGNED_MANIFEST_BYTES - len(json.dumps(doc).encode()) - 10_000
    doc["ignored"] = ["x" * 1000] * (room // 1003)
    return seal(doc)


def tags_at_cap(triton: dict[str, Any], keyid: str) -> bytes:
    doc = renamed(triton)
    tag = "-".join(".".join(f"zz{field}{n}" for n in range(MAX_TAG_PARTS)) for field in range(3))
    doc["predicate"]["tags"] = [tag] * m.MAX_TAGS
    return seal(doc)


def trusted_keyid(triton: dict[str, Any], keyid: str) -> bytes:
    body = json.dumps(renamed(triton)).encode()
    body += b" " * (m.MAX_MANIFEST_BYTES - len(body))
    forged = tuple(dsse.Signature(keyid, bytes(64)) for _ in range(dsse.MAX_SIGNATURES))
    return dsse.encode(dsse.Envelope(body, dsse.PAYLOAD_TYPE, forged))


def seal(doc: dict[str, Any]) -> bytes:
    return dsse.encode(dsse.Envelope(json.dumps(doc).encode(), dsse.PAYLOAD_TYPE, ()))


SHAPES: dict[str, Callable[[dict[str, Any], str], bytes]] = {
    "tags-100k": tags(100_000), "tags-400k": tags(400_000), "values-at-budget": values_at_budget,
    "bytes-at-budget": bytes_at_budget, "tags-at-cap": tags_at_cap, "forged-signature": trusted_keyid,
}


def place(site: Path, envelope: bytes) -> tuple[Path, Path]:
    """The hostile distribution's .dist-info, written aside: (where it is read, where it waits)."""
    present, aside = site / INFO, site / f"{INFO}.off"
    for path in (present, aside):
        shutil.rmtree(path, ignore_errors=True)
    aside.mkdir()
    (aside / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n\n")
    (aside / m.MANIFEST_FILENAME).write_bytes(envelope)
    return present, aside


def run(code: str, site: Path, env: dict[str, str], cache: Path) -> tuple[float, float, str]:
    """One cold run: wall time, the child's CPU time, its stdout."""
    shutil.rmtree(cache, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, str(site)], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=7, help="runs of each configuration per shape (default 7)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes (default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        work = Path(tmp)
        print("migrating and installing the signed triton 3.9.0 ...", file=sys.stderr)
        site, pub, triton = setup(work)
        keyid = pub.read_text().split()[2]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
        env.update(PYTHONPATH=str(ROOT / "runtime"), TRITON_BACKEND_TRUSTED_KEYS=str(pub),
                   TRITON_BACKEND_CACHE_DIR=str(work / "cache"), XDG_CONFIG_HOME=str(work / "config"),
                   TRITON_BACKEND_POLICY="strict")
        cache = work / "cache"
        for _ in range(2):  # warm-up: page cache, bytecode
            run(IMPORT, site, env, cache)
        print(f"cold `import triton` (empty verdict cache, {os.cpu_count()} CPUs), median of {args.n} runs each, "
              "alternating with and without the hostile distribution:")
        worst = ("", 0.0)
        for name in args.shapes.split(","):
            envelope = SHAPES[name](triton, keyid)
            present, aside = place(site, envelope)
            aside.rename(present)
            seen = json.loads(run(CHECK, site, env, cache)[2])
            verdict = seen["verdicts"].get(INFO)
            assert seen["used"] and seen["verdicts"]["triton-3.9.0.dist-info"][0] == "verified", seen
            run(IMPORT, site, env, cache)  # warm-up of this manifest's pages
            present.rename(aside)
            times: dict[str, list[float]] = {"without": [], "with": []}
            cpu: dict[str, list[float]] = {"without": [], "with": []}
            for _ in range(args.n):
                for config in ("without", "with"):
                    if config == "with":
                        aside.rename(present)
                    wall, used, _ = run(IMPORT, site, env, cache)
                    if config == "with":
                        present.rename(aside)
                    times[config].append(wall)
                    cpu[config].append(used)
            med = {k: statistics.median(v) for k, v in times.items()}
            med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
            ratio = med["with"] / med["without"]
            worst = max(worst, (name, ratio), key=lambda item: item[1])
            print(f"  {name:<20} manifest {len(envelope) / 1e6:5.1f} MB: with {med['with'] * 1e3:6.0f} ms, "
                  f"without {med['without'] * 1e3:6.0f} ms: ratio {ratio:.3f} (CPU {med_cpu['with'] * 1e3:.0f} / "
                  f"{med_cpu['without'] * 1e3:.0f} ms: {med_cpu['with'] / med_cpu['without']:.3f})")
            print(f"  {'':<20} its verdict: {verdict[0]}, {verdict[1]}: {verdict[2]}")
            shutil.rmtree(aside)
        print(f"worst: {worst[0]}, ratio {worst[1]:.3f} (target <= 1.2)")


if __name__ == "__main__":
    main()
