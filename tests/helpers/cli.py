"""The packager's console script, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``backend-packager ARGS`` from this venv, its output captured as text."""
    exe = Path(sys.executable).parent / "backend-packager"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)
