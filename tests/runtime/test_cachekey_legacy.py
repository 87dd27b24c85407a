"""Cache isolation on Triton before 3.7: there ``compile()`` never asks the stages-inspection
hook for a key, so the manifests in use reach the on-disk key through each backend's
``hash()`` (``compilekey.salt_backends``). The salt on small classes and Triton-like tables,
as an attacker shapes them; the real releases: ``tests/real/test_cachekey_legacy_real.py``.
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from triton_backend_runtime.triton import compilekey
from triton_backend_runtime.triton.compilekey import PluginRequiredError, StagesHook, isolate, salt_backends

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
