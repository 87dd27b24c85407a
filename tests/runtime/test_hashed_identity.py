"""What is cached is what was hashed, and the libtriton.so loaded is the one verified.

Each file is hashed from one descriptor, its identity (device, inode, size, mtime_ns,
ctime_ns) taken from that descriptor before and after the read; the verdict cache stores
those identities, never a ``stat`` made when the verdict is stored. The window is made
reproducible with :data:`installed.hash_observer`, called by the hashing thread after the
last read of a file and after its second ``fstat``: the tests write the file there (a real
write), and the check under test runs as it does in use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.csrc import CSRC, gcc
from helpers.disttree import Dist, TrustEnv, write_dist
from triton_backend_runtime.base.reason import Reason
from triton_backend_runtime.loading.registry import Entry, Registry
from triton_backend_runtime.site import installed
from triton_backend_runtime.site.fileidentity import identity
from triton_backend_runtime.site.installed import HashCache, hash_file
from triton_backend_runtime.verification.cache import VerifyCache
from triton_backend_runtime.verification.distribution import VerifyError
from triton_backend_runtime.verification.verdict import Verdict

pytestmark = pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")


@pytest.fixture(autouse=True)
def _forget_imported_backends() -> Iterator[None]:
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] == "demo_backend":
            sys.modules.pop(name, None)


def demo(reg: Registry) -> Entry:
    (found,) = [e for e in reg.entries if e.name == "demo"]
    return found


def append_once(target: Path, stage: str) -> list[str]:
    """An observer that appends to ``target`` once, at ``stage``; returns what it did."""
    done: list[str] = []

    def observe(path: str, when: str) -> None:
        if path == str(target) and when == stage and not done:
            with open(path, "ab") as file:
                file.write(b"\nRAN = 'written while verified'\n")
            done.append(path)

    installed.hash_observer = observe
    return done


@pytest.fixture()
def observer() -> Iterator[None]:
    yield
    installed.hash_observer = None


@pytest.mark.parametrize("stage", ["read", "done"])
def test_a_file_written_during_cold_verification_is_changed_and_not_cached(
        env: TrustEnv, site: Path, observer: None, stage: str) -> None:
    """Written after its bytes were read (``read``: the descriptor's second fstat differs) or
    after it was hashed (``done``: the end of verification finds it changed): the verdict is
    ``verify.changed``, nothing is cached for the distribution, and the next import verifies
    again (and finds what was written)."""
    dist = write_dist(site)
    dist.sign(env.key)
    compiler = dist.file("demo_backend/compiler.py")
    written = append_once(compiler, stage)
    first = env.registry(site, policy="strict")
    assert written == [str(compiler)]
    row = demo(first)
    assert row.reason is not None and (row.reason.code, row.reason.path) == ("verify.changed", str(compiler))
    assert (row.trust, row.state) == ("rejected", "excluded")
    cached = VerifyCache(str(env.cache_file()))
    assert str(dist.dist_info) not in cached.raw_verdicts
    installed.hash_observer = None
    again = demo(env.registry(site, policy="strict"))  # verified again: the file is longer than signed
    assert again.reason is not None and (again.reason.code, again.reason.path) == ("verify.size", str(compiler))


def test_a_manifest_rewritten_during_cold_verification_is_changed_and_not_cached(
        env: TrustEnv, site: Path, observer: None) -> None:
    """The manifest and the ``.dist-info`` are held to their identity from before they were
    read: the manifest rewritten while the backend's files are hashed (after it was read) is
    ``verify.changed`` naming it, and nothing is cached (a stat when the verdict is stored
    took the new manifest for the one verified)."""
    dist = write_dist(site)
    dist.sign(env.key)
    manifest = dist.manifest_path
    compiler = str(dist.file("demo_backend/compiler.py"))
    done: list[str] = []

    def rewrite(path: str, when: str) -> None:
        if path == compiler and when == "done" and not done:
            manifest.write_bytes(manifest.read_bytes() + b"\n")
            done.append(path)

    installed.hash_observer = rewrite
    row = demo(env.registry(site, policy="strict"))
    assert done == [compiler]
    assert row.reason is not None and (row.reason.code, row.reason.path) == ("verify.changed", str(manifest))
    assert str(dist.dist_info) not in VerifyCache(str(env.cache_file())).raw_verdicts
    installed.hash_observer = None
    assert demo(env.registry(site, policy="strict")).state == "loaded"  # verified again, as it is now


def test_an_unchanged_tree_is_cached_with_the_hashed_identities(env: TrustEnv, site: Path) -> None:
    """The baseline: nothing written, the verdict is cached, and its identities are those the
    digests were taken with; the warm import hashes nothing."""
    dist = write_dist(site)
    dist.sign(env.key)
    cold = env.registry(site, policy="strict")
    assert demo(cold).state == "loaded"
    compiler = str(dist.file("demo_backend/compiler.py"))
    cached = VerifyCache(str(env.cache_file()))
    assert cached.lookup(str(dist.dist_info), cached._entry(str(dist.dist_info))[0]) is not None  # type: ignore[index]
    assert dict(cached.identities(str(dist.dist_info)))[compiler] == identity(os.lstat(compiler))
    warm = env.registry(site, policy="strict")
    assert warm.hashed_bytes == 0 and demo(warm).state == "loaded"


def test_the_cache_stores_the_identity_hashed_never_a_later_stat(tmp_path: Path) -> None:
    """A file written between its hash and the store: the entry holds the identity hashed,
    so the written file no longer matches it (before, a stat at store time matched it)."""
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir(mode=0o700)
    module = tmp_path / "module.py"
    module.write_bytes(b"x = 1\n")
    hashes = HashCache()
    hashes.digests([(str(module), os.lstat(module))], 1)
    hashes.close()
    with open(module, "ab") as file:
        file.write(b"y = 2\n")
    cache = VerifyCache(str(cache_dir / "verify.json"))
    assert cache.store("dist-info", "context", Verdict("verified", files=[str(module)]), hashes.taken)
    assert cache.lookup("dist-info", "context") is None
    assert dict(cache.identities("dist-info"))[str(module)] == hashes.taken[str(module)]


def test_a_changed_verdict_is_not_stored(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir(mode=0o700)
    cache = VerifyCache(str(cache_dir / "verify.json"))
    verdict = Verdict("rejected", problem=Reason("verify.changed", "f", "changed while it was being hashed"))
    assert not cache.store("dist-info", "context", verdict, {})
    assert cache.lookup("dist-info", "context") is None


def test_hash_file_takes_the_identity_from_the_descriptor_before_and_after(tmp_path: Path, observer: None) -> None:
    library = tmp_path / "lib.so"
    library.write_bytes(b"\x7fELF" + b"a" * 4092)
    assert hash_file(str(library), 4096)[0] == identity(os.lstat(library))
    append_once(library, "read")
    with pytest.raises(VerifyError) as err:
        hash_file(str(library), 4096)
    assert (err.value.code, err.value.path) == ("verify.changed", str(library))


# -- libtriton.so: the file dlopen-ed is the file verified ---------------------------------

LOAD_PROBE = """
import os, sys
import triton_backend_runtime.autohook as hook
hook.install()
from triton_backend_runtime.loading import registry
registry.get().verify()
library = sys.argv[1]
if sys.argv[2] == "rewritten":
    data = open(library, "rb").read()
    with open(library, "r+b") as same:  # the same bytes, in place: the same inode, written since
        same.write(data)
elif sys.argv[2] != "keep":
    data = open(library, "rb").read() + (b"\\0" * 64 if sys.argv[2] == "tampered" else b"")
    with open(library + ".new", "wb") as new:
        new.write(data)
    os.replace(library + ".new", library)  # after verification, before Triton dlopens it
try:
    import triton
except ImportError as exc:
    print(str(exc))
    raise SystemExit(3)
print("loaded", triton._C.libtriton.__file__)
"""


def core_with_libtriton(site: Path, env: TrustEnv, tmp_path: Path) -> Dist:
    """A signed Triton core whose ``__init__`` imports its ``_C/libtriton.so`` (a real
    extension module compiled here), as Triton's does."""
    include = sysconfig.get_paths()["include"]
    library = gcc(tmp_path / "libtriton.so", str(CSRC / "libtriton_ext.c"), f"-I{include}")
    files: dict[str, bytes | Path] = {
        "triton/__init__.py": b"from triton._C import libtriton\n__version__ = '3.9.0'\n",
        "triton/_C/__init__.py": b"", "triton/_C/libtriton.so": library,
    }
    dist = write_dist(site, "triton", "3.9.0", backends={}, files=files)
    dist.sign(env.key)
    return dist


def probe(site: Path, policy: str, library: Path, change: str, *, relative: bool = False
          ) -> subprocess.CompletedProcess[str]:
    """The probe with ``site`` on PYTHONPATH; ``relative``: started in ``site`` instead, found
    through ``sys.path[0] == ""`` (``python -c``), as ``python -m`` in a checkout finds it."""
    run_env = {**os.environ, "PYTHONPATH": "" if relative else str(site), "TRITON_BACKEND_POLICY": policy}
    return subprocess.run([sys.executable, "-c", LOAD_PROBE, str(library), change], env=run_env,
                          capture_output=True, text=True, timeout=120, cwd=site if relative else None)


@pytest.mark.parametrize("change", ["replaced", "tampered", "rewritten"])
def test_a_libtriton_swapped_after_verification_is_caught_after_load_under_strict(
        env: TrustEnv, site: Path, tmp_path: Path, change: str) -> None:
    """Replaced by a copy (same bytes, another file: not what was hashed), by other bytes, or
    written in place between verification and Triton's dlopen: under strict ``import triton`` fails with one
    line naming the library and ``verify.changed``; under warn it loads, with a warning."""
    dist = core_with_libtriton(site, env, tmp_path)
    library = dist.file("triton/_C/libtriton.so")
    signed = library.read_bytes()
    kept = probe(site, "strict", library, "keep")
    assert kept.returncode == 0 and kept.stdout.split() == ["loaded", str(library)], kept.stderr
    done = probe(site, "strict", library, change)
    assert done.returncode == 3, done.stdout + done.stderr
    line = done.stdout.strip()
    assert "\n" not in line and str(library) in line and line.endswith("(verify.changed)"), line
    library.unlink()
    library.write_bytes(signed)  # as signed again, for the next probe to swap
    warned = probe(site, "warn", library, change)
    assert warned.returncode == 0 and "loaded" in warned.stdout, warned.stderr
    assert "verify.changed" in warned.stderr and str(library) in warned.stderr


def test_a_libtriton_swapped_is_caught_with_a_relative_sys_path(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    """A ``sys.path`` entry relative to the start (``""``: ``python -c`` or ``-m`` in a
    checkout): the module's origin is absolute, the verified path is not; the check still
    finds the verified identity, and strict still fails closed."""
    dist = core_with_libtriton(site, env, tmp_path)
    library = dist.file("triton/_C/libtriton.so")
    done = probe(site, "strict", library, "replaced", relative=True)
    assert done.returncode == 3 and done.stdout.strip().endswith("(verify.changed)"), done.stdout + done.stderr


def test_a_libtriton_loaded_as_verified_passes(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    from triton_backend_runtime.triton.core import loaded_reason

    dist = core_with_libtriton(site, env, tmp_path)
    library = str(dist.file("triton/_C/libtriton.so"))
    import ctypes

    ctypes.CDLL(library)
    verified = identity(os.lstat(library))
    assert loaded_reason(library, verified) is None
    other = [verified[0], int(verified[1]) + 1, *verified[2:]]  # type: ignore[call-overload]
    reason = loaded_reason(library, other)
    assert reason is not None and (reason.code, reason.path) == ("verify.changed", library)


def test_a_directory_is_kept_under_its_identity_before_it_was_listed(tmp_path: Path) -> None:
    """Code dropped into a walked directory after its listing: the identity kept is the one
    from before the listing, so the verdict no longer matches, and the end of verification
    finds it changed."""
    from triton_backend_runtime.site.installed import walk_files

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_bytes(b"")
    os.utime(package, ns=(10**18, 10**18))  # a past mtime: the drop below sets another, whatever the clock tick
    hashes = HashCache()
    assert [names for _, names in walk_files(str(package), [100], hashes.taken)] == [["__init__.py"]]
    (package / "dropped.py").write_bytes(b"print('not verified')\n")
    with pytest.raises(VerifyError) as err:
        hashes.unchanged([str(package)])
    assert (err.value.code, err.value.path) == ("verify.changed", str(package))
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir(mode=0o700)
    cache = VerifyCache(str(cache_dir / "verify.json"))
    cache.store("dist-info", "context", Verdict("verified", files=[str(package)]), hashes.taken)
    assert cache.lookup("dist-info", "context") is None
