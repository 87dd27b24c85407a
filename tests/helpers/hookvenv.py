"""A real interpreter start-up with the ``.pth`` hook: a venv made in ``tmp_path`` (no pip), the
runtime and its dependencies on ``PYTHONPATH`` (not a site directory: their ``.pth`` files do
not run), and the hook installed into the venv's ``site-packages`` by ``hook install``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import packaging
import triton_backend_runtime
from triton_backend_runtime.autohook import PTH_NAME


@dataclass
class HookVenv:
    root: Path
    site: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def run(self, *args: str, policy: str = "strict") -> subprocess.CompletedProcess[str]:
        paths = [Path(triton_backend_runtime.__file__).parents[1], Path(packaging.__file__).parents[1]]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), "TRITON_BACKEND_POLICY": policy}
        return subprocess.run([self.python, *args], env=env, capture_output=True, text=True, timeout=120)

    def doctor(self, *args: str, policy: str = "strict") -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        """``doctor`` as text, and ``doctor --json`` (which must exit the same way)."""
        text = self.run("-m", "triton_backend_runtime", "doctor", *args, policy=policy)
        done = self.run("-m", "triton_backend_runtime", "doctor", "--json", *args, policy=policy)
        assert done.returncode == text.returncode, (text.stdout, done.stdout)
        return text, json.loads(done.stdout)


def make_hook_venv(root: Path) -> HookVenv:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (site,) = root.glob("lib/python*/site-packages")
    made = HookVenv(root, site)
    installed = made.run("-m", "triton_backend_runtime", "hook", "install", policy="warn")
    assert installed.returncode == 0 and (site / PTH_NAME).exists(), installed.stderr
    return made
