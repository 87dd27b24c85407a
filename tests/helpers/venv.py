"""A venv with the real triton==3.9.0 (and packaging, cryptography), shared by the runtime
tests through the session fixture ``venv`` in conftest.

The runtime comes from this repository through PYTHONPATH; each test's extra distributions
are installed with pip into directories of their own, put in front on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime"

PROBE = """
import json, sys, warnings
warnings.simplefilter("always")
import triton.backends as tb
table = {k: v.compiler.__module__ + "." + v.compiler.__name__ for k, v in tb.backends.items()}
try:
    from triton_backend_runtime.loading import registry
    report = registry.get().report().to_dict()
except ImportError:
    report = None
print(json.dumps({"table": table, "report": report}))
"""


@dataclass
class Venv:
    root: Path
    python: Path
    site: Path
    home: Path  # XDG config/cache for the tests: the user's own trust store stays out
    key: Path
    pub: Path

    def run(self, code: str, *paths: Path, runtime: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        pythonpath = [str(p) for p in paths] + ([str(RUNTIME)] if runtime else [])
        full = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
        full.update(
            PYTHONPATH=os.pathsep.join(pythonpath), XDG_CONFIG_HOME=str(self.home / "config"),
            TRITON_BACKEND_CACHE_DIR=str(self.home / "cache"), **env,
        )
        return subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, env=full)

    def json(self, code: str, *paths: Path, **env: str) -> Any:
        """Run ``code``, which prints one JSON document last; fail with its stderr."""
        done = self.run(code, *paths, **env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    def probe(self, *paths: Path, **env: str) -> dict[str, Any]:
        done = self.run(PROBE, *paths, **env)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]), stderr=done.stderr)

    def cli(self, *args: str, paths: tuple[Path, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
        code = f"import sys; from triton_backend_runtime.cli.main import main; sys.exit(main({list(args)!r}))"
        return self.run(code, *paths, **env)


def make_venv(root: Path, triton_wheel: Path) -> Venv:
    subprocess.run([sys.executable, "-m", "venv", str(root / "v")], check=True)
    python = root / "v" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(triton_wheel)], check=True)
    subprocess.run([*pip, "packaging", "cryptography"], check=True)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([str(python), "-c", purelib], text=True).strip())
    key = root / "keys" / "vendor.pem"
    key.parent.mkdir()
    assert run_cli("keygen", "-o", str(key), "--comment", "test vendor").returncode == 0
    env = Venv(root, python, site, root / "home", key, key.with_suffix(".pub"))
    install = env.cli("hook", "install")
    assert install.returncode == 0, install.stderr
    return env


def backend_rows(result: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [r for r in result["report"]["backends"] if r["name"] == name]


def cosigned_site(site: Path, out: Path, keys: list[Path]) -> Path:
    """A hard-linked copy of ``site`` whose triton manifest is signed by every key in ``keys``
    (the same statement, more signatures): a core that verifies under a higher threshold."""
    from triton_backend_runtime.manifest.model import MANIFEST_FILENAME
    from triton_backend_runtime.trust import dsse
    from triton_backend_runtime.trust.statement import manifest_from_statement

    from backend_packager.manifest import signing

    subprocess.run(["cp", "-al", str(site), str(out)], check=True)
    (envelope,) = out.glob(f"triton-*.dist-info/{MANIFEST_FILENAME}")
    data = envelope.read_bytes()
    manifest = manifest_from_statement(dsse.unverified_payload(dsse.decode(data, str(envelope))), str(envelope))
    envelope.unlink()  # a hard link: write a new file, never through the shared one
    envelope.write_bytes(signing.seal_with(manifest, [signing.load(k) for k in keys]))
    return out


def run_in(python: Path, code: str, *args: str, **env: str) -> Any:
    """Run ``code`` with ``python`` (a venv's, PATH bare), which prints one JSON document last."""
    result = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])
