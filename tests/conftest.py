"""Shared fixtures: ELF files compiled from tests/csrc with gcc, real wheels from the index."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CSRC = Path(__file__).resolve().parent / "csrc"
sys.path.insert(0, str(ROOT / "bench"))

import projects  # noqa: E402
import triton_venv  # noqa: E402
from _wheels import fetch_wheel  # noqa: E402
from helpers.disttree import TrustEnv  # noqa: E402
from triton_venv import run_cli  # noqa: E402,F401  (tests import it from here)

# Directories of session-scoped fixtures: they outlive the module that first asked for them.
SESSION_DIRS: set[Path] = set()


def session_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """``factory.mktemp(name)`` for a session-scoped fixture, kept until the session ends."""
    directory = factory.mktemp(name)
    SESSION_DIRS.add(directory)
    return directory


@pytest.fixture(scope="module", autouse=True)
def _module_scratch_removed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Remove what a module's tests and fixtures put under the base temp directory once the
    module is done, unless one of its tests failed. Real Triton venvs and migrated wheels are
    hundreds of MB each: kept for the whole run they filled a CI disk (21 GB a run)."""
    root = tmp_path_factory.getbasetemp()
    before = set(root.iterdir())
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed != failed:
        return
    for entry in set(root.iterdir()) - before - SESSION_DIRS:
        shutil.rmtree(entry, ignore_errors=True)


@dataclass
class ElfFixtures:
    dir: Path
    exports: Path
    plugin_v2: Path
    plugin_v1: Path
    plugin_shared: Path  # a v2 plugin Triton 3.9 accepts, exporting a strong symbol
    pyext: Path
    runpath: Path
    rpath: Path
    versioned: Path
    truncated: Path
    not_elf: Path


def gcc(out: Path, *args: str) -> Path:
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-Wl,--build-id", "-o", str(out), *args]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def elf_files(tmp_path_factory: pytest.TempPathFactory) -> ElfFixtures:
    d = session_dir(tmp_path_factory, "elf")
    exports = gcc(d / "libexports.so", str(CSRC / "exports.c"), "-lm", "-lpthread")
    plugin_v2 = gcc(d / "libdemo_plugin.so", str(CSRC / "plugin_v2.c"))
    plugin_v1 = gcc(d / "libold_plugin.so", str(CSRC / "plugin_v1.c"))
    plugin_shared = gcc(d / "libshared_plugin.so", str(CSRC / "plugin_shared.c"))
    include = sysconfig.get_paths()["include"]
    pyext = gcc(d / "fastmod.cpython-ext.so", str(CSRC / "pyext.c"), f"-I{include}")
    runpath = gcc(
        d / "librunpath.so.1", str(CSRC / "runpath.c"), f"-L{d}", "-lexports",
        "-Wl,-soname,librunpath.so.1", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib:/opt/demo/lib",
    )
    rpath = gcc(
        d / "librpath.so", str(CSRC / "runpath.c"), f"-L{d}", "-lexports",
        "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN",
    )
    versioned = gcc(
        d / "libversioned.so", str(CSRC / "versioned.c"), f"-Wl,--version-script={CSRC / 'versioned.map'}"
    )
    truncated = d / "libtruncated.so"
    truncated.write_bytes(exports.read_bytes()[: exports.stat().st_size // 2])
    not_elf = d / "libnotelf.so"
    not_elf.write_text("this is a text file, not a shared library\n")
    return ElfFixtures(
        d, exports, plugin_v2, plugin_v1, plugin_shared, pyext, runpath, rpath, versioned, truncated, not_elf
    )


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TrustEnv:
    """Trust files of this test's own (a key trusted, policy and cache under tmp_path)."""
    return TrustEnv.make(tmp_path, monkeypatch)


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """An empty site-packages directory for dist-info trees."""
    path = tmp_path / "site"
    path.mkdir()
    return path


@pytest.fixture()
def big_elf(elf_files: ElfFixtures, tmp_path: Path) -> Path:
    """A real library with HASH_IN_CHILD bytes of trailing data (what debug sections add): the
    scan hashes it in a forked child."""
    from backend_packager.artifacts import HASH_IN_CHILD

    path = tmp_path / "libbig.so"
    path.write_bytes(elf_files.exports.read_bytes() + os.urandom(1 << 16) * (HASH_IN_CHILD >> 16))
    return path


@pytest.fixture()
def forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The pids os.fork returned in the parent (the real fork, counted)."""
    pids: list[int] = []
    real = os.fork

    def counted() -> int:
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counted)
    yield pids
    for pid in pids:  # every child was reaped: waitpid on it again fails
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def patched_copy(src: Path, dst: Path, offset: int, value: bytes) -> Path:
    """A copy of ``src`` with ``value`` written at ``offset``: 32-bit, big-endian, foreign files."""
    shutil.copyfile(src, dst)
    with dst.open("r+b") as stream:
        stream.seek(offset)
        stream.write(value)
    return dst


@pytest.fixture(scope="session")
def triton_wheel() -> Path:
    return fetch_wheel("triton==3.9.0")


@pytest.fixture(scope="session")
def signing_key(tmp_path_factory: pytest.TempPathFactory) -> projects.Keypair:
    return projects.keygen(session_dir(tmp_path_factory, "keys"), "vendor")


@pytest.fixture(scope="session")
def example_wheels(tmp_path_factory: pytest.TempPathFactory, signing_key: projects.Keypair) -> dict[str, Path]:
    """Each example under examples/, built once with `python -m build --wheel` and signed."""
    wheels = {}
    for name in ("setuptools_backend", "scikit_build_backend"):
        base = session_dir(tmp_path_factory, name)
        project = projects.copy_example(name, base / "src")
        wheels[name] = projects.built_wheel(project, base / "dist", projects.build_env(signing_key))
    return wheels


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory, triton_wheel: Path) -> Iterator[triton_venv.Venv]:
    """One venv with the real triton for every runtime test module (installing costs ~20 s)."""
    env = triton_venv.make_venv(session_dir(tmp_path_factory, "venv"), triton_wheel)
    yield env
    env.cli("hook", "uninstall")


@pytest.fixture(scope="session")
def migrated(venv: triton_venv.Venv, triton_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The triton wheel migrated and signed with the venv's key, installed in a site of its
    own: under strict, a verified core (what `import triton` needs before any backend)."""
    from runtime_wheels import pip_install

    out = session_dir(tmp_path_factory, "migrated")
    wheel = triton_venv.migrate(triton_wheel, out / "wheels", venv.key)
    pip_install(venv.python, wheel, out / "site")
    return out / "site"
