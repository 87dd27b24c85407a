"""Native code from outside the verified files: a core that fetches its library at import.

A real Triton fork ships a 0-byte ``_C/libtriton.so`` and has its ``__init__`` load the real
library from a user cache, by path, around the import system. A library the core's own modules
load by path (ctypes, an extension module by file) that is no verified file is
``verify.outside``: refused under strict before ``dlopen`` (its constructor never runs), warned
about under warn (:mod:`triton_backend_runtime.triton.nativeguard`). Real start-ups with the
``.pth`` hook (:mod:`helpers.hookvenv`), real libraries compiled by gcc, each with a constructor
that writes the file ``MARKER`` names: proof that it was opened.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.csrc import gcc
from helpers.disttree import TrustEnv, write_dist, write_record
from helpers.hookvenv import HookVenv, make_hook_venv

#: Loads the library FETCHED_LIB names, as the fork loads what it downloaded.
FETCHING_INIT = b"import ctypes, os\n_lib = ctypes.CDLL(os.environ['FETCHED_LIB'])\n"
#: Loads it as an extension module by file, the other way around the import system's search.
EXTENSION_INIT = (b"import importlib.util, os\n"
                  b"_spec = importlib.util.spec_from_file_location('fetched', os.environ['FETCHED_LIB'])\n"
                  b"importlib.util.module_from_spec(_spec)\n")
#: A bare soname: the system loader's search.
SONAME_INIT = b"import ctypes\n_libm = ctypes.CDLL('libm.so.6')\n"
#: Loads its own verified library the same way.
OWN_INIT = b"import ctypes, os\n_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), '_C', 'libtriton.so'))\n"


@pytest.fixture()
def venv(tmp_path: Path) -> HookVenv:
    return make_hook_venv(tmp_path / "venv")


#: A constructor that leaves a file behind: the library was opened (dlopen runs it).
CONSTRUCTOR = """#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void opened(void) {
    const char *marker = getenv("MARKER");
    FILE *f = marker ? fopen(marker, "w") : NULL;
    if (f) fclose(f);
}
int triton_version_major(void) { return 3; }
"""


@pytest.fixture()
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "opened"
    monkeypatch.setenv("MARKER", str(path))
    return path


def library(directory: Path, name: str = "libtriton.so") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "libtriton.c"
    source.write_text(CONSTRUCTOR)
    return gcc(directory / name, str(source))


def mapped_after(path: Path) -> str:
    """A start-up that imports triton, and says whether ``path`` is mapped afterwards."""
    return ("import sys\ntry:\n    import triton\nexcept ImportError as exc:\n    print('refused', exc)\n"
            f"print('mapped' if {str(path)!r}.encode() in open('/proc/self/maps', 'rb').read() else 'not mapped')\n")


def core(venv: HookVenv, env: TrustEnv, init: bytes, libtriton: bytes | Path,
         more: dict[str, bytes | Path] | None = None) -> None:
    files: dict[str, bytes | Path] = {"triton/__init__.py": b"__version__ = '3.9.0'\n" + init,
                                      "triton/_C/libtriton.so": libtriton, **(more or {})}
    dist = write_dist(venv.site, "triton", "3.9.0", backends={}, files=files)
    dist.sign(env.key)
    write_record(dist)


def test_a_libtriton_fetched_at_import_is_refused_under_strict_before_dlopen(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    fetched = library(tmp_path / "cache")
    monkeypatch.setenv("FETCHED_LIB", str(fetched))
    core(venv, env, FETCHING_INIT, b"")
    done = venv.run("-c", "import triton; print('imported')")
    assert done.returncode == 1 and "imported" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.core.CoreRejected: ") and last.endswith("(verify.outside)")
    assert str(fetched) in last and "(ctypes)" in last
    assert not marker.exists()  # refused before dlopen: its constructor never ran
    shown = venv.run("-c", mapped_after(fetched))
    assert shown.stdout.startswith("refused ") and shown.stdout.endswith("(verify.outside)\nnot mapped\n")
    assert not marker.exists()
    text, doc = venv.doctor()
    assert doc["triton_core"]["libtriton_bytes"] == 0 and "is empty (0 bytes)" in text.stdout
    assert doc["import"]["refused"]["code"] == "verify.outside" and text.returncode == 1
    assert not marker.exists()


def test_a_libtriton_fetched_at_import_is_warned_about_once_under_warn(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    monkeypatch.setenv("FETCHED_LIB", str(library(tmp_path / "cache")))
    core(venv, env, FETCHING_INIT, b"")
    warned = venv.run("-c", "import triton; print('imported')", policy="warn")
    assert warned.stdout == "imported\n" and warned.stderr.count("(verify.outside)") == 1, warned.stderr
    assert marker.exists()  # warn lets it load


def test_an_extension_module_loaded_by_file_at_import_is_refused_before_dlopen(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    fetched = library(tmp_path / "cache", "fetched.so")
    monkeypatch.setenv("FETCHED_LIB", str(fetched))
    core(venv, env, EXTENSION_INIT, library(tmp_path / "build"))
    done = venv.run("-c", mapped_after(fetched))
    assert done.stdout.startswith("refused ") and done.stdout.endswith("(verify.outside)\nnot mapped\n"), done
    assert "(an extension module)" in done.stdout and not marker.exists()


def test_a_bare_soname_is_the_loaders_search(venv: HookVenv, env: TrustEnv, tmp_path: Path) -> None:
    core(venv, env, SONAME_INIT, library(tmp_path / "build"))
    done = venv.run("-c", "import triton; print('imported')")
    assert done.stdout == "imported\n", done.stderr


def test_a_backends_driver_may_load_its_vendors_runtime_by_path(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    runtime = library(tmp_path / "opt" / "vendor" / "lib", "libvendorrt.so")
    monkeypatch.setenv("FETCHED_LIB", str(runtime))
    driver = b"import ctypes, os\n_rt = ctypes.CDLL(os.environ['FETCHED_LIB'])\n"
    core(venv, env, b"from .backends.vendor import driver\n", library(tmp_path / "build"),
         {"triton/backends/vendor/__init__.py": b"", "triton/backends/vendor/driver.py": driver})
    done = venv.run("-c", "import triton; print('imported')")
    assert done.stdout == "imported\n", done.stderr
    assert marker.exists()


def test_no_audit_hook_without_a_watched_core(venv: HookVenv, tmp_path: Path, marker: Path) -> None:
    lib = library(tmp_path / "cache")
    done = venv.run("-c", f"import ctypes, sys; ctypes.CDLL({str(lib)!r}); "
                          "print('triton_backend_runtime.triton.nativeguard' in sys.modules)")
    assert done.stdout == "False\n", done.stderr
    assert marker.exists()


def test_the_verified_libtriton_loaded_by_path_is_not_foreign(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, marker: Path
) -> None:
    core(venv, env, OWN_INIT, library(tmp_path / "build"))
    done = venv.run("-c", "import triton; print('imported')")
    assert done.stdout == "imported\n", done.stderr
    assert marker.exists()


def test_a_module_the_core_builds_and_loads_by_file_after_import_is_its_jit(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, marker: Path
) -> None:
    """Triton's ``runtime/build.py`` loads the launchers it compiled into its cache by file,
    after import: no manifest can list them, so the by-file rule holds only during import."""
    built = library(tmp_path / "triton-cache", "launcher.so")
    build = (b"import importlib.util\n"
             b"def load(path):\n"
             b"    spec = importlib.util.spec_from_file_location('launcher', path)\n"
             b"    return importlib.util.module_from_spec(spec)\n")
    core(venv, env, b"", library(tmp_path / "build"), {"triton/runtime/__init__.py": b"",
                                                       "triton/runtime/build.py": build})
    done = venv.run("-c", "import triton.runtime.build as b\ntry:\n    b.load(" + repr(str(built)) + ")\n"
                          "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    assert done.stdout.startswith("ImportError dynamic module does not define"), done
    assert marker.exists()


def test_a_library_a_core_module_loads_by_path_after_import_is_not_the_cores_fetch(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    """Triton's ``profiler/_rocm.py`` loads ``libhsa-runtime64.so.1`` by absolute path, after
    ``import triton``: the ctypes rule holds only while the core's ``__init__`` runs."""
    runtime = library(tmp_path / "opt" / "rocm" / "lib", "libhsa-runtime64.so.1")
    monkeypatch.setenv("FETCHED_LIB", str(runtime))
    profiler = b"import ctypes, os\n_hsa = ctypes.CDLL(os.environ['FETCHED_LIB'])\n"
    core(venv, env, b"", library(tmp_path / "build"), {"triton/profiler/__init__.py": profiler})
    done = venv.run("-c", "import triton.profiler; print('imported')")
    assert done.stdout == "imported\n", done.stderr
    assert marker.exists()
    warned = venv.run("-c", "import triton.profiler; print('imported')", policy="warn")
    assert warned.stdout == "imported\n" and "verify.outside" not in warned.stderr, warned.stderr


def test_a_library_fetched_by_a_module_the_cores_init_imports_is_refused(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    fetched = library(tmp_path / "cache")
    monkeypatch.setenv("FETCHED_LIB", str(fetched))
    core(venv, env, b"from . import _C\n", b"", {"triton/_C/__init__.py": FETCHING_INIT})
    done = venv.run("-c", mapped_after(fetched))
    assert done.stdout.startswith("refused ") and done.stdout.endswith("(verify.outside)\nnot mapped\n"), done
    assert not marker.exists()


def test_a_library_fetched_by_code_the_core_execs_is_refused(
    venv: HookVenv, env: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    """Code compiled from a string has a synthetic file name (``<string>``): the load is judged
    by the first frame of a real file, the core's ``__init__``."""
    fetched = library(tmp_path / "cache")
    monkeypatch.setenv("FETCHED_LIB", str(fetched))
    core(venv, env, b"exec(compile(" + repr(FETCHING_INIT.decode()).encode() + b", '<string>', 'exec'))\n", b"")
    done = venv.run("-c", mapped_after(fetched))
    assert done.stdout.startswith("refused ") and done.stdout.endswith("(verify.outside)\nnot mapped\n"), done
    assert "(ctypes)" in done.stdout and not marker.exists()
