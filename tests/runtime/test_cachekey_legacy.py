"""Cache isolation on Triton before 3.7 (issue 11, item 4): there ``compile()`` never asks
the stages-inspection hook for a key, so the manifests in use reach the on-disk key through
each backend's ``hash()`` (``compilekey.salt_backends``).

Quick tests: the salt on small classes and Triton-like tables. With the real wheels: which
releases' ``compiler.py`` asks the hook (read from each wheel), and, in venvs with the real
triton 3.2.0 (directory-scan era) and 3.6.0 (entry-point era), the key Triton itself forms:
``make_backend(GPUTarget("cuda", 90, 32)).hash()`` and the hash of a kernel that
``triton.compiler.compile`` builds on the CPU for that target, with its cache directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.projects import ROOT
from helpers.scratch import session_dir
from helpers.venv import Venv, cosigned_site, make_venv, migrate
from helpers.wheels import fetch_wheel, pip_install
from triton_backend_runtime import compilekey
from triton_backend_runtime.compilekey import PluginRequiredError, StagesHook, isolate, salt_backends

# -- without Triton ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:  # the shape of Triton's own (frozen since 3.0)
    compiler: Any
    driver: Any = None


def fresh_class(name: str = "DemoBackend", value: str = "demo-1") -> type:
    """A new class per test: salting is in place, and must not leak between tests."""
    return type(name, (), {"hash": lambda self: value})


def test_salted_hash_ends_with_the_digest_and_follows_it() -> None:
    demo = fresh_class()
    table = {"demo": Backend(demo)}
    assert salt_backends(table, "d1") == []
    assert table["demo"].compiler is demo and demo.__name__ == "DemoBackend"  # identity kept
    assert demo().hash() == "demo-1-backend-manifests-d1"
    assert salt_backends(table, "d2") == []  # folded again (a plugin loaded later): no second suffix
    assert demo().hash() == "demo-1-backend-manifests-d2"


def test_salt_reaches_inherited_and_static_hashes() -> None:
    base = fresh_class("Base", "base-7")
    child = type("Child", (base,), {})
    static = type("Static", (), {"hash": staticmethod(lambda: "static-3")})
    assert salt_backends({"child": Backend(child), "static": Backend(static)}, "d") == []
    assert child().hash() == "base-7-backend-manifests-d"
    assert base().hash() == "base-7"  # only the class in the table is changed
    assert static().hash() == "static-3-backend-manifests-d"


class Frozen(type):
    def __setattr__(cls, name: str, value: Any) -> None:
        raise TypeError(f"{cls.__name__} is frozen")


def test_what_cannot_be_salted_is_named() -> None:
    frozen = Frozen("Locked", (), {"hash": lambda self: "locked"})
    table = {"locked": Backend(frozen), "builtin": Backend(int), "none": Backend(None),
             "nohash": Backend(type("Plain", (), {})), "odd": object(), "ok": Backend(fresh_class())}
    # int has __hash__, not hash; a C type refuses new attributes anyway
    assert salt_backends(table, "d") == ["locked", "builtin", "none", "nohash", "odd"]
    assert frozen().hash() == "locked"


def test_a_missing_required_plugin_stops_the_key() -> None:
    demo = fresh_class()
    problems: list[str] = ["plugin p (p 1.0) declares on-failure = \"fail\" and is excluded: verify.plugin-range"]
    salt_backends({"demo": Backend(demo)}, "d", lambda: problems)
    with pytest.raises(PluginRequiredError) as caught:
        demo().hash()
    assert caught.value.code == "load.plugin-required" and "verify.plugin-range" in str(caught.value)
    problems.clear()  # loaded after all: compiling goes on
    assert demo().hash() == "demo-1-backend-manifests-d"


def fake_triton(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, compiler: str | None,
                knobs: bool) -> None:
    """A package ``name`` as a Triton in the middle of its import: its ``compiler.py`` on
    disk (not imported), its ``knobs`` module or none."""
    root = tmp_path / name
    (root / "compiler").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    if compiler == FIFO:
        os.mkfifo(root / "compiler" / "compiler.py")
    elif compiler is not None:
        (root / "compiler" / "compiler.py").write_text(compiler)
    package = types.ModuleType(name)
    package.__file__ = str(root / "__init__.py")
    monkeypatch.setitem(sys.modules, name, package)
    if knobs:
        module = types.ModuleType(f"{name}.knobs")
        module.runtime = types.SimpleNamespace(add_stages_inspection_hook=None)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, f"{name}.knobs", module)


READS = "    key = get_cache_key(src, backend, options, env_vars=env_vars)\n" \
        "    if knobs.runtime.add_stages_inspection_hook is not None:\n" \
        "        inspect_stages_key, inspect_stages_hash = knobs.runtime.add_stages_inspection_hook()\n"
IGNORES = "    key = get_cache_key(src, backend, options, env_vars=env_vars)\n"
FIFO = "(a FIFO: never waited on)"


@pytest.mark.parametrize(("compiler", "knobs", "hooked", "salted"), [
    (READS, True, True, False),  # 3.7-3.9: the hook alone
    (IGNORES, True, True, True),  # 3.4-3.6: the knob exists, compile() does not read it
    (None, True, True, True),  # compiler.py unreadable: salted, the safe side
    (FIFO, True, True, True),
    (READS * 30_000, True, True, True),  # over the read limit: salted
    (IGNORES, False, False, True),  # 3.0-3.3: no knobs at all
])
def test_isolate_uses_the_hook_where_compile_reads_it_else_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiler: str | None, knobs: bool, hooked: bool, salted: bool
) -> None:
    fake_triton(tmp_path, monkeypatch, "faketriton", compiler, knobs)
    demo = fresh_class()
    assert isolate("faketriton", {"demo": Backend(demo)}, "d1") == []
    hook = sys.modules["faketriton.knobs"].runtime.add_stages_inspection_hook if knobs else None
    assert isinstance(hook, StagesHook) == hooked
    assert demo().hash() == ("demo-1-backend-manifests-d1" if salted else "demo-1")


# -- the real wheels ---------------------------------------------------------------------------


@pytest.mark.triton_wheel
@pytest.mark.parametrize(("requirement", "reads"), [
    ("triton==3.0.0", False), ("triton==3.2.0", False), ("triton==3.3.0", False), ("triton==3.4.0", False),
    ("triton==3.5.0", False), ("triton==3.6.0", False), ("fbtriton==3.7.4", True), ("triton==3.8.0", True),
    ("triton==3.9.0", True), ("triton-pascal==3.1.0", False), ("triton-ascend==3.2.0", False),
])
def test_which_releases_compile_reads_the_hook(requirement: str, reads: bool, tmp_path: Path) -> None:
    """The text test against each real ``compiler.py``; 3.4-3.6 do mention the knob (in their
    backends' ``add_stages``), never as a key."""
    with zipfile.ZipFile(fetch_wheel(requirement)) as archive:
        archive.extract("triton/compiler/compiler.py", tmp_path)
    assert compilekey.compile_reads_hook(str(tmp_path / "triton")) is reads


KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def store_one(x_ptr):
    tl.store(x_ptr, 1.0)
'''

# Triton's own code forms the key: make_backend's instance, compile() for a target given,
# which needs no GPU (ptxas is a host binary; the kernel is not loaded until launched).
PROBE = '''\
import json, os
from triton.backends.compiler import GPUTarget
from triton.compiler import compiler
import kernel

target = GPUTarget("cuda", 90, 32)
compiled = compiler.compile(compiler.ASTSource(kernel.store_one, {"x_ptr": "*fp32"}), target=target)
try:
    from triton_backend_runtime import registry
    digest = registry.get().manifest_digest
except ImportError:
    digest = None
print(json.dumps({"hash": compiler.make_backend(target).hash(), "kernel": compiled.hash, "digest": digest,
                  "cached": sorted(os.listdir(os.environ["TRITON_CACHE_DIR"]))}))
'''


@dataclass
class Legacy:
    requirement: str
    venv: Venv
    kernel: Path  # the directory of kernel.py
    signed: Path  # the triton wheel migrated, signed by the venv's key, in a site of its own
    cosigned: Path  # the same, its manifest signed by a second key as well
    cache: Path

    def key(self, *paths: Path, **env: str) -> dict[str, Any]:
        result: dict[str, Any] = self.venv.json(PROBE, *paths, self.kernel, TRITON_CACHE_DIR=str(self.cache), **env)
        return result


@pytest.fixture(scope="module", params=["triton==3.2.0", "triton==3.6.0"])
def legacy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Legacy]:
    """A venv with the real Triton of one era; removed when its tests are done (~2 GB)."""
    wheel = fetch_wheel(request.param)
    root = session_dir(tmp_path_factory, request.param.replace("==", "-"))
    try:
        venv = make_venv(root, wheel)
        signed = migrate(wheel, root / "wheels", venv.key)
        pip_install(venv.python, signed, root / "signed")
        second = root / "keys" / "second.pem"
        assert run_cli("keygen", "-o", str(second), "--comment", "second signer").returncode == 0
        cosigned = cosigned_site(root / "signed", root / "cosigned", [venv.key, second])
        (root / "kernel").mkdir()
        (root / "kernel" / "kernel.py").write_text(KERNEL)
        (root / "cache").mkdir()
        yield Legacy(request.param, venv, root / "kernel", root / "signed", cosigned, root / "cache")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.triton_wheel
def test_the_key_triton_forms_changes_with_the_manifest(legacy: Legacy) -> None:
    trusted = {"TRITON_BACKEND_POLICY": "strict", "TRITON_BACKEND_TRUSTED_KEYS": str(legacy.venv.pub)}
    own = legacy.key(TRITON_BACKEND_POLICY="off")  # Triton's own key
    assert own["digest"] is None and len(own["cached"]) == 1
    # legacy only (no manifest in use): the key is Triton's own, a cache hit
    plain = legacy.key()
    assert (plain["hash"], plain["kernel"], plain["digest"]) == (own["hash"], own["kernel"], None)
    assert plain["cached"] == own["cached"]
    # the signed core in use: the backend's hash ends with the digest, the kernel misses
    one = legacy.key(legacy.signed, **trusted)
    assert one["digest"] and one["hash"] == f"{own['hash']}-backend-manifests-{one['digest']}"
    assert one["kernel"] != own["kernel"] and len(one["cached"]) == len(own["cached"]) + 1
    # the same manifests in another process: the same key, a hit
    again = legacy.key(legacy.signed, **trusted)
    assert (again["hash"], again["kernel"], again["cached"]) == (one["hash"], one["kernel"], one["cached"])
    # the manifest changed (signed again, by two keys): a new digest, a miss
    other = legacy.key(legacy.cosigned, **trusted)
    assert other["digest"] not in (None, one["digest"]) and other["hash"].endswith(other["digest"])
    assert other["kernel"] not in (own["kernel"], one["kernel"])
    assert len(other["cached"]) == len(one["cached"]) + 1


@pytest.mark.triton_wheel
def test_the_gpu_check_script_on_the_cpu(legacy: Legacy) -> None:
    """``examples/gpu_smoke/cachekey_check.py`` (run on the GPU machine by hand), here compiling
    for a target instead of launching: a signed backend's upgrade misses, entry-point era only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
    done = subprocess.run([str(legacy.venv.python), str(ROOT / "examples" / "gpu_smoke" / "cachekey_check.py"),
                           "--target", "cuda:90", "--json"], capture_output=True, text=True, env=env)
    report = json.loads(done.stdout)
    if legacy.requirement == "triton==3.2.0":  # directory-scan: no entry points
        assert done.returncode == 2 and "by entry point" in report["unusable"][0], done.stdout
        return
    assert done.returncode == 0 and report["wrong"] == [] and report["unusable"] == [], done.stdout
    runs = report["runs"]
    assert runs["demo-1.0"]["demo"] == [["verified", "loaded"]]
    assert len({runs[name]["kernel"] for name in ("off", "demo-1.0", "demo-1.1")}) == 3


# -- the salting of a compiler's hash(), as an attacker shapes the classes -----------------


def test_a_subclass_salted_after_its_base_carries_the_digest_once() -> None:
    """Two backends whose compiler classes inherit one ``hash()``: the key holds the digest
    once whichever is salted first (the table's order must not change the key)."""

    class Base:
        def hash(self) -> str:
            return "base"

    class Child(Base):
        pass

    assert compilekey.salt_backends({"a": type("B", (), {"compiler": Base}),
                                     "b": type("B", (), {"compiler": Child})}, "d1") == []
    assert Child().hash() == Base().hash() == "base-backend-manifests-d1"
    compilekey.salt_backends({"a": type("B", (), {"compiler": Base})}, "d2")
    assert Base().hash() == "base-backend-manifests-d2"


def test_a_class_that_drops_the_new_hash_silently_is_named() -> None:
    """A metaclass whose ``__setattr__`` ignores the assignment raises nothing: the class is
    still reported as one whose key the manifests do not reach (the registry warns)."""

    class Deaf(type):
        def __setattr__(cls, name: str, value: object) -> None:
            pass

    class Compiler(metaclass=Deaf):
        def hash(self) -> str:
            return "raw"

    class Plain:
        def hash(self) -> str:
            return "plain"

    assert compilekey.salt_backends({"deaf": type("B", (), {"compiler": Compiler}),
                                     "plain": type("B", (), {"compiler": Plain})}, "d") == ["deaf"]
    assert Compiler().hash() == "raw" and Plain().hash() == "plain-backend-manifests-d"


def test_a_hook_call_in_a_comment_or_string_does_not_skip_the_salting(tmp_path: Path) -> None:
    """Only a call of the hook in code is one ``compile()`` makes: mentioned in a comment (a
    fork's note, a 3.6 compiler.py documenting 3.7), the ``hash()`` salting stays."""
    compiler = tmp_path / "triton" / "compiler"
    compiler.mkdir(parents=True)
    (compiler / "compiler.py").write_text(
        "# 3.7 calls knobs.runtime.add_stages_inspection_hook() here\n"
        "def compile(src):\n    hook = knobs.runtime.add_stages_inspection_hook\n"
        "    if hook is not None:\n        hook(src, stages)\n")
    assert compilekey.compile_reads_hook(str(tmp_path / "triton")) is False
    (compiler / "compiler.py").write_text(
        "def compile(src):\n    if knobs.runtime.add_stages_inspection_hook is not None:\n"
        "        key, h = knobs.runtime.add_stages_inspection_hook()\n")
    assert compilekey.compile_reads_hook(str(tmp_path / "triton")) is True
