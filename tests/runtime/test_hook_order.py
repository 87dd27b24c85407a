"""The hook is first, or strict says so.

A real interpreter start-up: a venv made in ``tmp_path`` (no pip), the runtime and its
dependencies on ``PYTHONPATH`` (not a site directory: their ``.pth`` files do not run), the
hook installed into the venv's ``site-packages`` by ``hook install``, and a signed Triton
core there whose ``compiler.py`` was edited after signing (strict refuses it when asked).
Another ``.pth`` in the same directory imports ``triton``; ``site`` runs them in sorted order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import packaging
import pytest
import triton_backend_runtime
from helpers.disttree import TrustEnv, write_dist
from triton_backend_runtime.autohook import OLD_PTH_NAMES, PTH_LINE, PTH_NAME

TAMPERED = b"import sys\nsys.stderr.write('TAMPERED COMPILER RAN\\n')\n"
MAIN = "try:\n    import triton\nexcept ImportError as exc:\n    print('refused:', exc)\nprint('went on')\n"
#: site runs ".pth" files in sorted(os.listdir()) order: one that sorts before the hook's.
EARLY = "(early).pth"


@dataclass
class Venv:
    root: Path
    site: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def run(self, *args: str, policy: str) -> subprocess.CompletedProcess[str]:
        paths = [Path(triton_backend_runtime.__file__).parents[1], Path(packaging.__file__).parents[1]]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), "TRITON_BACKEND_POLICY": policy}
        return subprocess.run([self.python, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture()
def venv(env: TrustEnv, tmp_path: Path) -> Venv:
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (site,) = root.glob("lib/python*/site-packages")
    made = Venv(root, site)
    installed = made.run("-m", "triton_backend_runtime", "hook", "install", policy="warn")
    assert installed.returncode == 0 and (site / PTH_NAME).exists(), installed.stderr
    files: dict[str, bytes | Path] = {"triton/__init__.py": b"from . import compiler\n",
                                      "triton/compiler.py": b"x = 1\n"}
    write_dist(site, "triton", "3.9.0", backends={}, files=files).sign(env.key)
    (site / "triton" / "compiler.py").write_bytes(TAMPERED)
    return made


def test_the_hook_sorts_before_the_pth_files_tools_write() -> None:
    names = ["00-first.pth", "_virtualenv.pth", "__editable__.demo-1.0.pth", "-dash.pth", "a1_coverage.pth",
             "distutils-precedence.pth", "easy-install.pth", "Zope-nspkg.pth", "~tilde.pth", *OLD_PTH_NAMES]
    assert sorted([*names, PTH_NAME])[0] == PTH_NAME
    assert PTH_NAME in PTH_LINE, "the line names its own file when the runtime is gone"


def test_hook_install_replaces_the_old_name_and_uninstall_removes_both(venv: Venv) -> None:
    old = venv.site / OLD_PTH_NAMES[0]
    old.write_text(PTH_LINE)
    done = venv.run("-m", "triton_backend_runtime", "hook", "install", policy="warn")
    assert done.returncode == 0 and not old.exists() and (venv.site / PTH_NAME).exists()
    assert f"removed {old}" in done.stdout
    old.write_text(PTH_LINE)
    done = venv.run("-m", "triton_backend_runtime", "hook", "uninstall", policy="warn")
    assert done.returncode == 0 and not old.exists() and not (venv.site / PTH_NAME).exists(), done.stdout


def test_a_pth_before_the_hook_importing_triton_stops_strict_with_one_line(venv: Venv) -> None:
    early = venv.site / EARLY
    early.write_text("import triton\n")
    done = venv.run("-c", MAIN, policy="strict")
    assert done.returncode == 1 and "went on" not in done.stdout, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"triton-backend-runtime: error: {early}: imported triton ("), done.stderr
    assert PTH_NAME in last and "(policy.hook-late)" in last and "Traceback" not in done.stderr


def test_a_pth_before_the_hook_importing_triton_warns_once_under_warn(venv: Venv) -> None:
    early = venv.site / EARLY
    early.write_text("import triton\n")
    done = venv.run("-c", MAIN, policy="warn")
    assert done.returncode == 0 and "went on" in done.stdout, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "policy.hook-late" in line]
    assert len(warnings) == 1 and str(early) in warnings[0], done.stderr


def test_doctor_reports_the_hook_position_and_the_early_import(venv: Venv) -> None:
    """The runtime's own CLI is let through under strict, to say what happened."""
    early = venv.site / EARLY
    early.write_text("import triton\n")
    text = venv.run("-m", "triton_backend_runtime", "doctor", policy="strict")
    assert text.returncode == 1, text.stdout + text.stderr
    assert f"hook: runs after 1 .pth file(s): {early}" in text.stdout
    assert f"hook: note: {early} runs before the hook and imports triton" in text.stdout
    assert f"triton was imported before the hook in this process, by {early} (policy.hook-late)" in text.stdout
    doc = json.loads(venv.run("-m", "triton_backend_runtime", "doctor", "--json", policy="strict").stdout)
    hook = doc["hook"]
    assert (hook["path"], hook["installed"], hook["first"]) == (str(venv.site / PTH_NAME), True, False)
    assert hook["before"] == [str(early)] and hook["before_importing"] == [str(early)]
    assert hook["imported_before_hook"]["by"] == [str(early)] and not doc["healthy"]
    assert "policy.hook-late" in [p["code"] for p in doc["problems"]]


def test_with_the_hook_first_a_pth_that_imports_triton_is_checked(venv: Venv) -> None:
    """The name that sorted after ``a_...``: with it, a tampered compiler ran unnoticed. Once
    ``hook install`` has replaced it, the hook runs first and the same ``.pth`` goes through it."""
    (venv.site / PTH_NAME).unlink()
    (venv.site / OLD_PTH_NAMES[0]).write_text(PTH_LINE)
    (venv.site / "a_early.pth").write_text("import triton\n")
    before = venv.run("-c", MAIN, policy="strict")
    assert "TAMPERED COMPILER RAN" in before.stderr  # the old order: ran before the hook
    assert venv.run("-m", "triton_backend_runtime", "hook", "install", policy="warn").returncode == 0
    after = venv.run("-c", MAIN, policy="strict")
    assert "TAMPERED COMPILER RAN" not in after.stderr, after.stderr
    assert "went on" in after.stdout and "refused:" in after.stdout and "(verify.size)" in after.stdout
    doctor = venv.run("-m", "triton_backend_runtime", "doctor", policy="strict")
    assert "hook: runs first of the .pth files" in doctor.stdout, doctor.stdout


def test_a_pth_left_without_its_runtime_names_itself_and_the_command_that_removes_it(venv: Venv) -> None:
    """One line at start-up, naming the file and a command that works as printed."""
    done = subprocess.run([venv.python, "-c", "pass"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    (line,) = done.stderr.splitlines()
    pth = venv.site / PTH_NAME
    assert line.startswith(f"triton-backend-runtime: {pth} is installed but the runtime cannot be imported")
    command = line.split("remove it: ", 1)[1].split(" (or reinstall", 1)[0]
    assert subprocess.run(command, shell=True, check=False).returncode == 0 and not pth.exists()
    again = subprocess.run([venv.python, "-c", "pass"], capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert again.stderr == ""
