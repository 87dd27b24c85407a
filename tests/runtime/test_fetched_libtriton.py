"""Native code from outside the verified files: a core that fetches its library at import.

A real Triton fork ships a 0-byte ``_C/libtriton.so`` and has its ``__init__`` load the real
library from a user cache, by path, around the import system. The libraries this process has
mapped are checked after ``<package>/__init__`` runs: a ``libtriton`` that is not the verified
file is ``verify.outside``, refused under strict. Real start-ups with the ``.pth`` hook
(:mod:`helpers.hookvenv`), real libraries compiled by gcc.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.csrc import gcc
from helpers.disttree import TrustEnv, write_dist, write_record
from helpers.hookvenv import HookVenv, make_hook_venv

#: Loads the library FETCHED_LIB names, as the fork loads what it downloaded.
FETCHING_INIT = b"import ctypes, os\n_lib = ctypes.CDLL(os.environ['FETCHED_LIB'])\n"
#: Loads its own verified library the same way.
OWN_INIT = b"import ctypes, os\n_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), '_C', 'libtriton.so'))\n"


@pytest.fixture()
def venv(tmp_path: Path) -> HookVenv:
    return make_hook_venv(tmp_path / "venv")


def library(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "libtriton.c"
    source.write_text("int triton_version_major(void) { return 3; }\n")
    return gcc(directory / "libtriton.so", str(source))


def core(venv: HookVenv, env: TrustEnv, init: bytes, libtriton: bytes | Path) -> None:
    files: dict[str, bytes | Path] = {"triton/__init__.py": b"__version__ = '3.9.0'\n" + init,
                                      "triton/_C/libtriton.so": libtriton}
    dist = write_dist(venv.site, "triton", "3.9.0", backends={}, files=files)
    dist.sign(env.key)
    write_record(dist)


def test_a_libtriton_fetched_at_import_is_refused_under_strict(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FETCHED_LIB", str(library(tmp_path / "cache")))
    core(venv, env, FETCHING_INIT, b"")
    done = venv.run("-c", "import triton; print('imported')")
    assert done.returncode == 1 and "imported" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.core.CoreRejected: ") and last.endswith("(verify.outside)")
    assert str(tmp_path / "cache" / "libtriton.so") in last
    warned = venv.run("-c", "import triton; print('imported')", policy="warn")
    assert warned.stdout == "imported\n" and "(verify.outside)" in warned.stderr
    text, doc = venv.doctor()
    assert doc["triton_core"]["libtriton_bytes"] == 0 and "is empty (0 bytes)" in text.stdout
    assert doc["import"]["refused"]["code"] == "verify.outside" and text.returncode == 1


def test_the_verified_libtriton_loaded_by_path_is_not_foreign(venv: HookVenv, env: TrustEnv, tmp_path: Path) -> None:
    core(venv, env, OWN_INIT, library(tmp_path / "build"))
    done = venv.run("-c", "import triton; print('imported')")
    assert done.stdout == "imported\n", done.stderr
