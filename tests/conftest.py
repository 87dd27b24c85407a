"""Shared fixtures: ELF files compiled from tests/csrc with gcc, real wheels from the index.
The code behind them lives in ``tests/helpers`` (a test module imports helpers, never this file)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import projects
from helpers import venv as triton_venv
from helpers.cli import migrate
from helpers.csrc import ElfFixtures, compile_all
from helpers.disttree import TrustEnv
from helpers.scratch import SESSION_DIRS, session_dir
from helpers.wheels import fetch_wheel, pip_install
from hypothesis import settings

# No per-example deadline: CI and this machine are shared, and a test that fails because one
# example ran slowly once (a 200 ms deadline, hit at 403 ms under load) says nothing about the
# code. Speed is measured by bench/, never by tests.
settings.register_profile("shared-machines", deadline=None)
settings.load_profile("shared-machines")


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


@pytest.fixture(scope="session")
def elf_files(tmp_path_factory: pytest.TempPathFactory) -> ElfFixtures:
    return compile_all(session_dir(tmp_path_factory, "elf"))


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
    from backend_packager.scanning.artifacts import HASH_IN_CHILD

    path = tmp_path / "libbig.so"
    path.write_bytes(elf_files.exports.read_bytes() + os.urandom(1 << 16) * (HASH_IN_CHILD >> 16))
    return path


@pytest.fixture()
def forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The pids os.fork returned in the parent (the real fork, counted). The scanner forks only
    while its process has one thread: a pytest-xdist worker (``make test-quick``) has more, so
    these tests run where it has one (``make test``, CI)."""
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        pytest.skip("the fork path needs a one-thread process; this test runner has more threads")
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
    out = session_dir(tmp_path_factory, "migrated")
    wheel = migrate(triton_wheel, out / "wheels", venv.key, "--capture-plugins").signed()
    pip_install(venv.python, wheel, out / "site")
    return out / "site"
