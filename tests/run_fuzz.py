"""``make fuzz``: run the fuzz targets in rounds for as long as asked, then report.

    python tests/run_fuzz.py --seconds 600 [--examples 200]

Each round runs the hypothesis fuzz files of ``tests/fuzz`` (the packager's command line on crafted wheels and
manifests, the ELF scanner on crafted tables, the runtime on hostile installs, the runtime's
command line on hostile trust files and environments) with a new
seed and ``FUZZ_EXAMPLES`` examples per target. The report: rounds, command-line runs on
crafted wheels (recorded by the packager target through ``FUZZ_STATS``), failing rounds
with their seed (a failure is a traceback, an ``error.internal`` or a wrong exit code:
hypothesis prints the smallest example), runs over 10 s, and the peak resident memory of
any round. Exit 1 when any round failed or any run was slow.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Every module of tests/fuzz (searched recursively, so that a new target is never left out).
TARGETS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "fuzz").rglob("test_*.py"))
SLOW_SECONDS = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="total time budget (default: %(default)s)")
    parser.add_argument("--examples", type=int, default=200, help="examples per target per round")
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    stats = Path(tempfile.mkdtemp(prefix="fuzz-")) / "runs.jsonl"
    rounds, failed = 0, []
    while time.monotonic() < deadline - 5:
        seed = random.randrange(1 << 30)
        outcome = _round(seed, args.examples, stats, deadline - time.monotonic())
        rounds += 1
        if outcome not in ("passed", "out of time"):
            failed.append((seed, outcome))
        print(f"round {rounds} (seed {seed}): {outcome}", flush=True)
    runs = [json.loads(line) for line in stats.read_text().splitlines()] if stats.exists() else []
    slow = [r for r in runs if r["seconds"] > SLOW_SECONDS]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\n{rounds} rounds of {args.examples} examples per target; {len(runs)} command-line runs on crafted "
          f"wheels; failing rounds: {len(failed)}; runs over {SLOW_SECONDS:.0f} s: {len(slow)}; "
          f"slowest run: {max((r['seconds'] for r in runs), default=0):.2f} s; peak RSS of a round: {peak:.0f} MB")
    for seed, outcome in failed:
        print(f"  FAILED seed {seed}: {outcome} (rerun: FUZZ_SEED={seed} pytest --hypothesis-seed={seed} ...)")
    return 1 if failed or slow else 0


def _round(seed: int, examples: int, stats: Path, left: float) -> str:
    env = {**os.environ, "FUZZ_EXAMPLES": str(examples), "FUZZ_SEED": str(seed), "FUZZ_STATS": str(stats)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}",
               *TARGETS]
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=max(left, 1))
    except subprocess.TimeoutExpired:
        return "out of time"
    if done.returncode == 0:
        return "passed"
    failures = re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
    return f"failed: {', '.join(failures) or done.stdout[-400:]}"


if __name__ == "__main__":
    sys.exit(main())
