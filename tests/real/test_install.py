"""Installing and building like the ecosystem does.

- ``pip install ./runtime .`` from a clone gives both CLIs and nothing the build hook does not
  import (no jinja2, build, wheel or setuptools); ``init`` without its extra says so in one line.
- The wheelhouse (``make wheelhouse``: both distributions, wheels and sdists, built isolated)
  passes ``twine check --strict``, and the project's own build prints no setuptools warning.
- A vendor's isolated build of an ``init`` project, ``PIP_FIND_LINKS=... python -m build DIR``,
  run exactly as ``init`` says, from the directory the key was made in, gives a wheel that
  verifies.

Isolated environments install from the package index: these tests are marked
``triton_wheel`` (the network), like every test that downloads from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.triton_wheel

#: What the packager installs besides itself: its imports, and what they depend on.
RUNTIME_CLOSURE = {"triton-backend-runtime", "packaging", "cryptography", "cffi", "pycparser"}
#: cyclonedx-python-lib writes the SBOMs (PEP 770); the rest is its closure.
SBOM_CLOSURE = {"cyclonedx-python-lib", "license-expression", "boolean.py", "packageurl-python", "py-serializable",
                "defusedxml", "sortedcontainers", "typing_extensions"}
PACKAGER_CLOSURE = RUNTIME_CLOSURE | SBOM_CLOSURE | {"triton-backend-packager"}


def clean_env(**extra: str) -> dict[str, str]:
    # Byte-compiling switched off by the environment is a setuptools warning of its own.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    return env | extra


def clone(dest: Path) -> Path:
    """The repository as a fresh clone has it: no venv, no build outputs."""
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `make wheelhouse` puts in dist/, built from a clone into a directory of its own."""
    base = tmp_path_factory.mktemp("wheelhouse")
    source = clone(base / "src")
    out = base / "dist"
    for project in (source / "runtime", source):
        result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(project)],
                                capture_output=True, text=True, env=clean_env())
        assert result.returncode == 0, result.stderr[-3000:]
        warnings = [line for line in (result.stdout + result.stderr).splitlines()
                    if re.search(r"warning|deprecat", line, re.IGNORECASE)]
        assert warnings == [], f"{project.name}: setuptools warned:\n" + "\n".join(warnings)
    return out


def test_wheelhouse_holds_both_distributions_and_twine_passes(wheelhouse: Path) -> None:
    assert sorted(p.name for p in wheelhouse.iterdir()) == [
        "triton_backend_packager-0.1.0-py3-none-any.whl", "triton_backend_packager-0.1.0.tar.gz",
        "triton_backend_runtime-0.1.0-py3-none-any.whl", "triton_backend_runtime-0.1.0.tar.gz",
    ]
    for wheel, package in (("triton_backend_packager", "backend_packager"),
                           ("triton_backend_runtime", "triton_backend_runtime")):
        with zipfile.ZipFile(wheelhouse / f"{wheel}-0.1.0-py3-none-any.whl") as archive:
            assert f"{package}/py.typed" in archive.namelist()
    twine = Path(sys.executable).parent / "twine"
    result = subprocess.run([str(twine), "check", "--strict", *map(str, sorted(wheelhouse.iterdir()))],
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.count("PASSED") == 4, result.stdout + result.stderr


def installed(python: Path) -> set[str]:
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                             check=True).stdout
    return {row["name"].lower() for row in json.loads(listing)}


def test_pip_install_from_a_clone(tmp_path: Path) -> None:
    source = clone(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    bin_dir = tmp_path / "venv" / "bin"
    before = installed(bin_dir / "python")  # pip (and, before Python 3.12, setuptools) come with venv
    result = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "./runtime", "."],
                            cwd=source, capture_output=True, text=True, env=clean_env())
    assert result.returncode == 0, result.stderr[-3000:]
    added = installed(bin_dir / "python") - before
    assert added == PACKAGER_CLOSURE, added ^ PACKAGER_CLOSURE
    runtime = subprocess.run([str(bin_dir / "python"), "-m", "triton_backend_runtime", "--version"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert runtime.returncode == 0 and runtime.stdout.split()[-1] == "0.1.0", runtime
    keygen = subprocess.run([str(bin_dir / "backend-packager"), "keygen", "-o", str(tmp_path / "k.pem")],
                            capture_output=True, text=True)
    assert keygen.returncode == 0, keygen.stderr
    # init alone needs jinja2: without the extra, one line saying which extra to install.
    init = subprocess.run([str(bin_dir / "backend-packager"), "init", str(tmp_path / "p")], capture_output=True,
                          text=True)
    assert init.returncode != 0 and "Traceback" not in init.stderr
    assert "pip install 'triton-backend-packager[init]'" in init.stderr and not (tmp_path / "p").exists()
    # With the extra, init renders the templates installed with the wheel (not a source checkout's).
    extra = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", ".[init]"], cwd=source,
                           capture_output=True, text=True, env=clean_env())
    assert extra.returncode == 0, extra.stderr[-3000:]
    shutil.rmtree(source)
    init = subprocess.run([str(bin_dir / "backend-packager"), "init", str(tmp_path / "p")], capture_output=True,
                          text=True)
    assert init.returncode == 0, init.stderr
    assert (tmp_path / "p" / "pyproject.toml").is_file() and (tmp_path / "p" / "csrc" / "p_driver.c").is_file()


def test_vendor_build_as_init_says(tmp_path: Path, wheelhouse: Path) -> None:
    start = tmp_path / "work"
    start.mkdir()
    created = subprocess.run([str(Path(sys.executable).parent / "backend-packager"), "init", "vendor"],
                             capture_output=True, text=True, cwd=start)
    assert created.returncode == 0, created.stderr
    (hint,) = [line for line in created.stdout.splitlines() if line.startswith("next: ")]
    # The hint's commands, run in a shell from where init ran (init prints a build that needs
    # no index: it uses the packager that ran init; PIP_FIND_LINKS is the README's isolated way).
    commands = hint.removeprefix("next: ").split(" (")[0]
    env = clean_env(PIP_FIND_LINKS=str(wheelhouse), PATH=f"{Path(sys.executable).parent}{os.pathsep}"
                                                         f"{os.environ.get('PATH', '')}")
    env.pop("BACKEND_PACKAGER_SIGNING_KEY", None)
    result = subprocess.run(["bash", "-c", f"cd {start} && {commands}"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (wheel,) = (start / "vendor" / "dist").glob("*.whl")
    (public,) = start.glob("*.pub")
    check = run_cli("verify", str(wheel), "--trust", str(public))
    assert check.returncode == 0, check.stdout + check.stderr
