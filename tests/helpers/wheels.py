"""Small real wheels for the runtime tests: legacy backends, broken backends, plugins; and
real wheels from the package index (:func:`fetch_wheel`, cached outside the repository by
``bench/_wheels.py``).

Written with zipfile and a correct RECORD (PEP 376/427: ``path,sha256=<urlsafe b64>,size``,
the RECORD row itself ``path,,``), then installed with pip like any other wheel.
:func:`resign` re-signs a signed wheel's manifest, edited or not, with several keys.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from triton_backend_runtime.manifest.model import MANIFEST_FILENAME, Manifest
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.statement import manifest_from_statement

from backend_packager.manifest import signing
from helpers.projects import ROOT, rezip


def _bench_wheels() -> object:
    """``bench/_wheels.py``, the one place that fetches and caches real wheels."""
    if "_wheels" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_wheels", ROOT / "bench" / "_wheels.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["_wheels"] = module
        spec.loader.exec_module(module)
    return sys.modules["_wheels"]


def fetch_wheel(requirement: str) -> Path:
    """The wheel ``requirement`` names (``triton==3.9.0``), downloaded once into the cache."""
    path: Path = _bench_wheels().fetch_wheel(requirement)  # type: ignore[attr-defined]
    return path

COMPILER = '''\
from triton.backends.compiler import BaseBackend


class {cls}Backend(BaseBackend):
    @staticmethod
    def supports_target(target):
        return target.backend == "{target}"

    def hash(self):
        return "{target}-1"

    def parse_options(self, options):
        return options

    def add_stages(self, stages, options, language):
        pass

    def load_dialects(self, context):
        pass

    def get_module_map(self):
        return {{}}
'''

DRIVER = '''\
from triton.backends.driver import DriverBase


class {cls}Driver(DriverBase):
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


def backend_files(package: str, cls: str, target: str, *, broken: bool = False) -> dict[str, bytes]:
    compiler = COMPILER.format(cls=cls, target=target)
    if broken:
        compiler = 'raise ImportError("demo backend is broken: libdemo_rt.so.3 not found")\n' + compiler
    return {
        f"{package}/__init__.py": b"",
        f"{package}/compiler.py": compiler.encode(),
        f"{package}/driver.py": DRIVER.format(cls=cls).encode(),
    }


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(
    out_dir: Path, name: str, version: str, files: dict[str, bytes], backends: dict[str, str] | None = None
) -> Path:
    """A platform wheel for this interpreter (cp311 linux_x86_64 style tag from packaging)."""
    from packaging.tags import sys_tags

    tag = next(iter(sys_tags()))
    escaped = name.replace("-", "_")  # PEP 427 file and directory names
    dist_info = f"{escaped}-{version}.dist-info"
    meta = {
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n\n"
        ).encode(),
    }
    if backends:
        lines = "".join(f"{k} = {v}\n" for k, v in backends.items())
        meta[f"{dist_info}/entry_points.txt"] = f"[triton.backends]\n{lines}".encode()
    members = {**files, **meta}
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in members.items())
    record += f"{dist_info}/RECORD,,\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{escaped}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            zf.writestr(path, data)
        zf.writestr(f"{dist_info}/RECORD", record)
    return wheel


def pip_install(python: Path, wheel: Path, target: Path) -> None:
    """Install into a directory that the tests put on PYTHONPATH (a site of its own)."""
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True, capture_output=True,
    )


def resign(
    wheel: Path, out_dir: Path, keys: Sequence[Path], edit: Callable[[Manifest], None] | None = None
) -> Path:
    """A copy of a wheel whose manifest is ``edit``-ed and signed by every key in ``keys``
    (PEM files), as a vendor with several signers would publish it; RECORD rewritten."""
    def change(members: dict[str, bytes]) -> None:
        name = next(n for n in members if n.endswith(f".dist-info/{MANIFEST_FILENAME}"))
        manifest = manifest_from_statement(dsse.unverified_payload(dsse.decode(members[name], name)), name)
        if edit is not None:
            edit(manifest)
        members[name] = signing.seal_with(manifest, [signing.load(k) for k in keys])

    out_dir.mkdir(parents=True, exist_ok=True)
    return rezip(wheel, out_dir / wheel.name, change)
