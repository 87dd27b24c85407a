"""Scan libtriton.so (triton 3.9.0) against references measured in the same run.

In process:
- ``scan_elf`` against ``nm -D --defined-only`` on the same file, its output read through
  a pipe (target <= 1.0);
- against iterating the same file's .dynsym through pyelftools' symbol objects
  (target >= 20x faster).

Whole processes, what a user waits for:
- ``backend-packager scan --json libtriton.so`` (hash, scan, JSON) against
  ``openssl dgst -sha256`` plus ``nm -D --defined-only`` of the same file, run one after
  the other (target <= 0.8). Runs alternate, so a change in machine load hits both.

The floor of that last ratio, printed beside it: a process can end no sooner than its
start-up (the interpreter and the imports ``scan`` needs) plus the longer of the hash and
the scan, which run side by side (the hash in a forked child). hashlib's sha256 is the
same libcrypto that ``openssl dgst`` runs, so ours is ``openssl dgst`` plus the start-up,
against ``openssl dgst`` plus ``nm``: below 0.8 only where ``nm`` takes longer than a
quarter of the hash plus the start-up.

Prints ratios (ours / reference); lower is better, medians of ``--repeat`` runs.
Run: ``python bench/bench_scan.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import fetch_wheel  # noqa: E402

from backend_packager.scanning.elf import scan_elf  # noqa: E402

MEMBER = "triton/_C/libtriton.so"


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median of ``repeat`` runs, after one warm-up (page cache, imports)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--lib", type=Path, help="an installed libtriton.so instead of triton 3.9.0's from the "
                        "index (a machine with no index, e.g. the GPU machine's preinstalled Triton)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.lib:
            lib = Path(tmp) / "libtriton.so"
            lib.write_bytes(args.lib.read_bytes())
        else:
            with zipfile.ZipFile(fetch_wheel("triton==3.9.0")) as archive:
                lib = Path(archive.extract(MEMBER, tmp))

        def ours() -> int:
            with lib.open("rb") as stream:
                return scan_elf(stream, str(lib)).exports.count

        def nm() -> int:
            out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, check=True).stdout
            return out.count(b"\n")

        def pyelftools() -> int | None:
            # The same facts as ours, through pyelftools' symbol objects: exports with type and
            # binding, imports with weak/strong and their version index, sorted export names.
            try:
                from elftools.elf.elffile import ELFFile
            except ImportError:  # a test-extra dependency; the GPU machine has no index to get it
                return None

            with lib.open("rb") as stream:
                elf = ELFFile(stream)
                dynsym = elf.get_section_by_name(".dynsym")
                versym = elf.get_section_by_name(".gnu.version")
                exports, imports = [], []
                for index, sym in enumerate(dynsym.iter_symbols()):
                    bind, kind = sym["st_info"]["bind"], sym["st_info"]["type"]
                    if index == 0 or bind == "STB_LOCAL":
                        continue
                    if sym["st_shndx"] == "SHN_UNDEF":
                        version = versym.get_symbol(index)["ndx"] if versym else None
                        imports.append((sym.name, bind == "STB_WEAK", version))
                    else:
                        exports.append((sym.name, kind, bind))
                exports.sort()
                return len(exports)

        process = _whole_processes(lib, args.repeat)
        startup = _startup(lib, args.repeat)
        t_hash = timed(lambda: _sha256(lib), args.repeat)
        counts = f"ours={ours()} nm={nm()} pyelftools={pyelftools()}"
        print(f"libtriton.so: {lib.stat().st_size / 1e6:.0f} MB; exports {counts}")
        t_ours = timed(ours, args.repeat)
        t_nm = timed(nm, args.repeat)
        t_elftools = timed(pyelftools, 3) if pyelftools() is not None else None
    print(f"scan_elf                 {t_ours * 1000:8.1f} ms")
    print(f"nm -D --defined-only     {t_nm * 1000:8.1f} ms   ratio ours/nm = {t_ours / t_nm:.2f}  (target <= 1.0)")
    if t_elftools is not None:
        speedup = t_elftools / t_ours
        print(f"pyelftools iter_symbols  {t_elftools * 1000:8.1f} ms   speed-up = {speedup:.1f}x  (target >= 20x)")
    t_scan, t_ref = process
    print(f"scan --json (process)    {t_scan * 1000:8.1f} ms")
    print(f"openssl dgst + nm -D     {t_ref * 1000:8.1f} ms   ratio = {t_scan / t_ref:.2f}  (target <= 0.8)")
    floor = startup + max(t_hash, t_ours)
    print(f"floor: start-up {startup * 1000:.1f} ms + max(sha256 {t_hash * 1000:.1f} ms, scan_elf "
          f"{t_ours * 1000:.1f} ms) = {floor * 1000:.1f} ms   floor ratio = {floor / t_ref:.2f}")


def _sha256(lib: Path) -> str:
    """The hash as the scan's child runs it: 256 KiB blocks read into one buffer."""
    digest, buffer = hashlib.sha256(), bytearray(256 << 10)
    view = memoryview(buffer)
    with lib.open("rb") as stream:
        while count := stream.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def _startup(lib: Path, repeat: int) -> float:
    """Median wall time of a process that starts and imports what ``scan`` imports, no more."""
    code = "import backend_packager.cli, backend_packager.commands.scan"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(lib.parent / "pycache")
    return timed(lambda: subprocess.run([sys.executable, "-c", code], check=True, env=env), repeat)


def _whole_processes(lib: Path, repeat: int) -> tuple[float, float]:
    """Medians of ``scan --json`` and of ``openssl dgst -sha256`` + ``nm -D``, alternating."""
    script = Path(sys.executable).with_name("backend-packager")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "backend_packager"]
    # Compiled bytecode cached as an installed package has it, but outside the tree.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(lib.parent / "pycache")
    ours = [*cli, "scan", "--json", str(lib)]
    refs = [["openssl", "dgst", "-sha256", str(lib)], ["nm", "-D", "--defined-only", str(lib)]]

    cpu: dict[str, list[float]] = {"ours": [], "refs": []}

    def run(key: str, *commands: list[str]) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        for command in commands:
            subprocess.run(command, stdout=subprocess.DEVNULL, check=True, env=env)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[key].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        return elapsed

    run("ours", ours), run("refs", *refs)  # warm-up: page cache, .pyc files
    samples = [(run("ours", ours), run("refs", *refs)) for _ in range(repeat)]
    # CPU time (user + system, threads summed) changes less with the machine's load than
    # wall time does; the hash thread makes ours higher than its wall time on two cores.
    print(f"cpu time: scan --json {statistics.median(cpu['ours'][1:]):.2f} s, "
          f"openssl dgst + nm -D {statistics.median(cpu['refs'][1:]):.2f} s")
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


if __name__ == "__main__":
    main()
