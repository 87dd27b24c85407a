"""Both command lines as a user runs them: the packager's console script, and the runtime's
``python -m triton_backend_runtime`` in a child whose only site is the one given."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.projects import Keypair


def run_on_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """``backend-packager ARGS`` with stderr on a pseudo-terminal (where progress bars are
    drawn): its exit status, everything it wrote there, and its stdout."""
    import os
    import pty

    master, slave = pty.openpty()
    exe = Path(sys.executable).parent / "backend-packager"
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    screen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    stdout, _ = proc.communicate()
    return proc.returncode, screen, stdout


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``backend-packager ARGS`` from this venv, its output captured as text."""
    exe = Path(sys.executable).parent / "backend-packager"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


@dataclass(frozen=True)
class Migration:
    """One ``backend-packager migrate`` run: what it printed and exited with, and where it writes."""

    returncode: int
    stdout: str
    stderr: str
    wheel: Path  # the signed wheel's path, when the source is one wheel

    @property
    def outcome(self) -> dict[str, Any]:
        """The first wheel's outcome in the ``--json`` document."""
        doc: dict[str, Any] = json.loads(self.stdout)["wheels"][0]
        return doc

    def signed(self) -> Path:
        """The signed wheel; the run must have succeeded."""
        assert self.returncode == 0, self.stderr
        return self.wheel


def migrate(source: Path, out: Path, key: Keypair | Path | None, *args: str) -> Migration:
    """``backend-packager migrate SOURCE -o OUT [--key KEY] ARGS``; never a traceback."""
    keys = [] if key is None else ["--key", str(key.private if isinstance(key, Keypair) else key)]
    proc = run_cli("migrate", str(source), "-o", str(out), *keys, *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    return Migration(proc.returncode, proc.stdout, proc.stderr, out / source.name)


def environment(site: Path, key: Keypair, home: Path) -> dict[str, str]:
    """Only ``site`` besides this interpreter's packages; the vendor's key trusted; strict."""
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "TRITON_BACKEND_POLICY": "strict",
            "TRITON_BACKEND_TRUSTED_KEYS": str(key.public), "XDG_CONFIG_HOME": str(home / "config"),
            "TRITON_BACKEND_CACHE_DIR": str(home / "cache"), "HOME": str(home)}


def runtime(site: Path, key: Keypair, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The runtime's CLI in a child under :func:`environment`; never a traceback."""
    proc = subprocess.run([sys.executable, "-m", "triton_backend_runtime", *args], capture_output=True, text=True,
                          env=environment(site, key, home), cwd=home, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def doctor_json(site: Path, key: Keypair, home: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``doctor --json ARGS``: its exit code and document."""
    proc = runtime(site, key, home, "doctor", "--json", *args)
    doc: dict[str, Any] = json.loads(proc.stdout)
    return proc.returncode, doc
