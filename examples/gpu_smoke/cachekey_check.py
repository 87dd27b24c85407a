"""Does the compile cache key follow the manifests in use? One tiny kernel, compiled (and
launched, where PyTorch and a GPU are there) by the installed Triton in five processes that
share one ``TRITON_CACHE_DIR``; prints each kernel's hash, then a verdict.

1. ``off``: ``TRITON_BACKEND_POLICY=off``, Triton's own key;
2. ``registry``: the registry in use, no signed backend beside the installed Triton;
3. ``demo-1.0``: beside it a signed backend ``cachekey-demo`` 1.0 (``triton.backends`` entry
   point, a target nothing has, a driver that is never active): a manifest in use;
4. ``demo-1.0-again``: the same, in a new process: the same hash, a cache hit;
5. ``demo-1.1``: the backend upgraded to 1.1: another hash, a miss.

The installed Triton is not changed: the demo backend is installed with ``pip --target`` into
directories of a scratch folder that is deleted at the end (``--keep`` keeps it), and the
import hook is loaded per process (``autohook.install()``), not through a ``.pth`` file.

Triton 3.4 and later discover the demo backend by its entry point; 3.0-3.3 scan only their own
directories and never see it (the script says so). Since Triton before 3.7 never asks the
stages-inspection hook for a key, there the key changes through the backends' ``hash()``.

Run from the repository root, with this project's two packages importable (installed, or the
checkout: ``runtime/`` and the root are put on ``PYTHONPATH`` when they are not) and
cryptography and packaging installed (see ``run.sh`` for a machine without an index):

    python3 examples/gpu_smoke/cachekey_check.py [--json] [--target cuda:90]

``--target`` compiles for that target instead of launching on the GPU (no GPU needed).

Exit 0 when the hashes behave as above, 1 when not, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = "cachekey_demo"

COMPILER = '''\
from triton.backends.compiler import BaseBackend


class CachekeyDemoBackend(BaseBackend):
    @staticmethod
    def supports_target(target):
        return target.backend == "cachekey-demo"

    def hash(self):
        return "cachekey-demo"

    def parse_options(self, options):
        return options

    def add_stages(self, stages, options, language=None):
        pass

    def load_dialects(self, context):
        pass

    def get_module_map(self):
        return {}
'''

DRIVER = '''\
from triton.backends.driver import DriverBase


class CachekeyDemoDriver(DriverBase):
    @staticmethod
    def is_active():
        return False

    def map_python_to_cpp_type(self, ty):
        return ty

    def get_current_target(self):
        return None

    def get_active_torch_device(self):
        return None

    def get_benchmarker(self):
        return None
'''

KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def store_one(x_ptr):
    tl.store(x_ptr, 1.0)
'''

# In each process: the registry's hook first (what the .pth line does), then Triton's own
# JIT path on a GPU (JITFunction.run returns the CompiledKernel), else compile() for the
# active target.
CHILD = '''\
import json, os, sys
import triton_backend_runtime.autohook as hook
hook.install()
import triton
import kernel
from triton.compiler import compiler

result = {"triton": triton.__version__}
asked = os.environ.get("CACHEKEY_CHECK_TARGET")
try:
    if asked:
        raise LookupError(f"compiled for {asked}, not launched")
    import torch
    x = torch.zeros(1, device="cuda")
    compiled = kernel.store_one[(1,)](x)
    torch.cuda.synchronize()
    result["ran"] = x.item() == 1.0
except Exception as exc:
    result["ran"] = f"{type(exc).__name__}: {exc}"[:300]
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver
    backend, _, arch = (asked or "").partition(":")
    target = GPUTarget(backend, int(arch), 32) if asked else driver.active.get_current_target()
    compiled = compiler.compile(compiler.ASTSource(kernel.store_one, {"x_ptr": "*fp32"}), target=target)
from triton_backend_runtime.loading import registry
import triton.backends as tb
report = registry.get().report().to_dict()
result.update(kernel=compiled.hash, digest=registry.get().manifest_digest, backends=sorted(tb.backends),
              demo=[(b["trust"], b["state"]) for b in report["backends"] if b["name"] == "cachekey-demo"],
              cached=len(os.listdir(os.environ["TRITON_CACHE_DIR"])))
print(json.dumps(result))
'''


def record_hash(data: bytes) -> str:
    """A RECORD hash field (PEP 376/427: sha256, urlsafe base64 without padding)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def demo_wheel(out: Path, version: str) -> Path:
    """The demo backend as a plain (legacy) wheel; ``migrate`` signs it."""
    dist_info = f"cachekey_demo-{version}.dist-info"
    files = {
        f"{DEMO}/__init__.py": b"",
        f"{DEMO}/compiler.py": COMPILER.encode(),
        f"{DEMO}/driver.py": DRIVER.encode(),
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: cachekey-demo\nVersion: {version}\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: cachekey_check\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n",
        f"{dist_info}/entry_points.txt": f"[triton.backends]\ncachekey-demo = {DEMO}\n".encode(),
    }
    rows = [f"{name},{record_hash(data)},{len(data)}" for name, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join([*rows, f"{dist_info}/RECORD,,"]) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"cachekey_demo-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def project_path() -> list[str]:
    """PYTHONPATH entries for this project's packages when they are not installed."""
    missing = [importlib.util.find_spec(name) is None for name in ("triton_backend_runtime", "backend_packager")]
    return [str(ROOT / "runtime"), str(ROOT)] if any(missing) else []


def tool(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])}: {(done.stderr or done.stdout).strip()[-500:]}")


def signed_sites(work: Path, env: dict[str, str]) -> dict[str, Path]:
    """The demo backend at 1.0 and 1.1, signed, each installed in a site of its own."""
    tool(env, "-m", "backend_packager", "keygen", "-o", str(work / "keys" / "demo.pem"), "--comment", "cachekey demo")
    sites = {}
    for version in ("1.0", "1.1"):
        wheel = demo_wheel(work / "plain", version)
        tool(env, "-m", "backend_packager", "migrate", str(wheel), "-o", str(work / "signed"),
             "--key", str(work / "keys" / "demo.pem"))
        site = work / f"site-{version}"
        tool(env, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target", str(site),
             str(work / "signed" / wheel.name))
        sites[version] = site
    return sites


def run_child(work: Path, env: dict[str, str], site: Path | None, **extra: str) -> dict[str, Any]:
    path = [str(p) for p in (site, work / "kernel") if p is not None]
    child = dict(env, PYTHONPATH=os.pathsep.join([*path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep), **extra)
    done = subprocess.run([sys.executable, "-c", CHILD], env=child, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["(no output)"])[-1][:500]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def verdict(runs: dict[str, dict[str, Any]]) -> list[str]:
    """What is wrong with the hashes; empty when they behave as the module docstring says."""
    k = {name: r["kernel"] for name, r in runs.items()}
    wrong = []
    if runs["registry"]["digest"] is None and k["registry"] != k["off"]:
        wrong.append("with no manifest in use the key is not Triton's own")
    if k["demo-1.0"] in (k["off"], k["registry"]):
        wrong.append("the demo backend's manifest did not change the key")
    if k["demo-1.0-again"] != k["demo-1.0"] or runs["demo-1.0-again"]["cached"] != runs["demo-1.0"]["cached"]:
        wrong.append("the same manifests in a new process did not give the same key (a cache hit)")
    if k["demo-1.1"] in (k["demo-1.0"], k["off"], k["registry"]):
        wrong.append("the upgraded demo backend did not change the key")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    parser.add_argument("--target", metavar="BACKEND:ARCH", help="compile for this target (e.g. cuda:90) "
                        "instead of launching on the active GPU: no GPU needed")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cachekey_check-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "CACHEKEY_CHECK_"))}
    base["PYTHONPATH"] = os.pathsep.join([*project_path(), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = dict(base, TRITON_CACHE_DIR=str(work / "cache"), TRITON_BACKEND_CACHE_DIR=str(work / "verdicts"),
               XDG_CONFIG_HOME=str(work / "config"), **({"CACHEKEY_CHECK_TARGET": args.target} if args.target else {}))
    try:
        (work / "cache").mkdir()
        (work / "kernel").mkdir()
        (work / "kernel" / "kernel.py").write_text(KERNEL)
        sites = signed_sites(work, env)
        trusted = {"TRITON_BACKEND_TRUSTED_KEYS": str(work / "keys" / "demo.pub")}
        runs = {
            "off": run_child(work, env, None, TRITON_BACKEND_POLICY="off"),
            "registry": run_child(work, env, None, **trusted),
            "demo-1.0": run_child(work, env, sites["1.0"], **trusted),
            "demo-1.0-again": run_child(work, env, sites["1.0"], **trusted),
            "demo-1.1": run_child(work, env, sites["1.1"], **trusted),
        }
    except (OSError, RuntimeError) as exc:
        print(f"cachekey_check: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"scratch kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    unusable = [f"{name}: {r['error']}" for name, r in runs.items() if "error" in r]
    if not unusable and not runs["demo-1.0"]["demo"]:
        unusable = ["this Triton does not discover backends by entry point (before 3.4): nothing to compare"]
    wrong = [] if unusable else verdict(runs)
    if args.json:
        print(json.dumps({"runs": runs, "unusable": unusable, "wrong": wrong}, indent=1))
    else:
        for name, r in runs.items():
            print(f"{name:15} {r.get('kernel', '-')}  digest {str(r.get('digest'))[:12]}  "
                  f"cached {r.get('cached', '-')}  ran {r.get('ran', '-')}  {r.get('error', '')}")
        print(f"isolated: {'yes' if not wrong else 'NO: ' + '; '.join(wrong)}" if not unusable
              else f"cachekey_check: error: {'; '.join(unusable)}")
    return 2 if unusable else 1 if wrong else 0

if __name__ == "__main__":
    sys.exit(main())
