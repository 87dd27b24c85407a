"""A small directory-scan-era backend installed with pip, for ``adopt``: ``triton/backends/forkgpu/``
with a real shared library compiled by gcc and a console script, no ``triton.backends`` entry
points; fixtures that install it once per module and copy its site-packages per test; a
package of plugins installed beside a stub libtriton.

Test modules take the fixtures by assignment (``fork_wheel, pristine, site, trust =
adopted.fork_wheel, ...``), which makes pytest register them there.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import run_cli
from helpers.csrc import ElfFixtures, Libs
from helpers.disttree import TrustEnv
from helpers.projects import fresh_venv, pip_install
from helpers.wheels import backend_files, write_wheel
from helpers.wheels import pip_install as install_into

NAME = "triton-fork"


DIST_INFO = "triton_fork-1.0.dist-info"


PACKAGE = "triton/backends/forkgpu"


SCRIPTS = "[console_scripts]\nforkgpu-info = triton.backends.forkgpu:main\n"


@pytest.fixture(scope="module")
def fork_wheel(tmp_path_factory: pytest.TempPathFactory, elf_files: ElfFixtures) -> Path:
    """The fork: Python sources, a native library, a console script; not Root-Is-Purelib."""
    files = backend_files(PACKAGE, "Fork", "forkgpu")
    files[f"{PACKAGE}/__init__.py"] = b"def main():\n    print('forkgpu')\n"
    files[f"{PACKAGE}/lib/libfork_driver.so"] = elf_files.exports.read_bytes()
    files[f"{DIST_INFO}/entry_points.txt"] = SCRIPTS.encode()
    return write_wheel(tmp_path_factory.mktemp("wheels"), NAME, "1.0", files)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, fork_wheel: Path) -> Path:
    """The fork installed by pip into a venv (bytecode compiled, a script wrapper in bin/):
    its site-packages directory."""
    base = tmp_path_factory.mktemp("adopt")
    python = fresh_venv(base / "venv")
    pip_install(python, str(fork_wheel))
    site = next((base / "venv" / "lib").glob("python*/site-packages"))
    assert (base / "venv" / "bin" / "forkgpu-info").exists()
    return site


@pytest.fixture
def site(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the installed venv for one test to change: ``<copy>/lib/pythonX.Y/site-packages``."""
    venv = pristine.parents[2]
    shutil.copytree(venv, tmp_path / "venv", symlinks=True)
    return tmp_path / "venv" / pristine.relative_to(venv)


@pytest.fixture
def trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TrustEnv:
    return TrustEnv.make(tmp_path / "trust-env", monkeypatch)


def key_file(env: TrustEnv) -> Path:
    return env.root / "keys" / "vendor.pem"


def cli_adopt(site: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("adopt", NAME, "--site-packages", str(site), "--json", *args)
    return done.returncode, json.loads(done.stdout)


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes (symlinks as their target)."""
    out = {}
    for here, _, names in os.walk(directory):
        for name in names:
            full = Path(here) / name
            out[str(full)] = os.readlink(full).encode() if full.is_symlink() else full.read_bytes()
    return out


def plugpack(elf_files: ElfFixtures, tmp_path: Path, *, triton: bool = True) -> tuple[Path, Path]:
    """Three plugins installed with pip: one answers alone, one needs libtriton.so (a stub,
    installed beside it as triton 3.9.0), one speaks plugin API v1 (not called). Returns the
    wheel and the site-packages directory."""

    libs = Libs(tmp_path / "libs")
    files = {"plugpack/__init__.py": b"", "plugpack/libshared.so": elf_files.plugin_shared.read_bytes(),
             "plugpack/libold.so": elf_files.plugin_v1.read_bytes(),
             "plugpack/libcontract.so": libs.plugin("needs-libtriton").read_bytes()}
    wheel = write_wheel(tmp_path / "wheels", "plugpack", "1.0", files)
    stub = write_wheel(tmp_path / "wheels", "triton", "3.9.0", {
        "triton/__init__.py": b'__version__ = "3.9.0"\n', "triton/_C/libtriton.so": libs.stub.read_bytes()})
    site = tmp_path / "site"
    for each in (wheel, stub) if triton else (wheel,):
        install_into(Path(sys.executable), each, site)
    return wheel, site
