"""Registry gaps (issues 8 and 10): a backend in a namespace ``triton/``, the unlisted-code walk
of a distribution installed inside another's package, and the Triton package a manifest was
built for. Dist-info trees in ``tmp_path`` with real signed manifests (:mod:`helpers.disttree`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures
from helpers.disttree import Dist, TrustEnv, stub_loader, write_dist, write_record
from triton_backend_runtime import manifest as m
from triton_backend_runtime import registry
from triton_backend_runtime.registry import Entry, Registry


@pytest.fixture(autouse=True)
def _no_triton_imported(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """These trees are found by the finders, not through a ``triton`` already imported; what a
    test imports from its tree is forgotten after it."""
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name == "triton" or name.startswith("triton."):
            sys.modules.pop(name, None)


def entry(reg: Registry, name: str) -> Entry:
    (found,) = [e for e in reg.entries if e.name == name]
    return found


def code_of(item: Entry) -> str | None:
    return item.reason.code if item.reason else None


# -- 1. a backend inside a namespace triton/ (no __init__.py) ----------------------------------


def test_backend_in_a_namespace_triton_is_located(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"})
    assert not any((site / "triton" / d / "__init__.py").exists() for d in ("", "backends"))
    dist.sign(env.key)
    assert registry.locate_package("triton.backends.nsdemo") is None  # not on sys.path yet
    reg = env.registry(site, policy="strict")
    demo = entry(reg, "nsdemo")
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)
    assert registry.locate_package("triton.backends.nsdemo") == str(site / "triton" / "backends" / "nsdemo")


def test_backend_in_a_namespace_shadowed_by_a_regular_triton(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    """A regular ``triton`` package anywhere on sys.path wins over namespace portions: the
    backend would not be imported from where it was verified."""
    write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"}).sign(env.key)
    other = tmp_path / "other"
    (other / "triton" / "backends").mkdir(parents=True)
    (other / "triton" / "__init__.py").write_text("")
    (other / "triton" / "backends" / "__init__.py").write_text("")
    reg = env.registry(site, other, policy="warn")
    demo = entry(reg, "nsdemo")
    assert demo.state == "excluded" and demo.reason is not None and demo.reason.code == "verify.shadowed"


def test_a_location_that_cannot_be_found_is_a_reason(env: TrustEnv, site: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the finders raise, the backend gets a reason, and the others load."""
    write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"}).sign(env.key)
    write_dist(site, "demo-backend").sign(env.key)

    class Unlistable:
        def __iter__(self) -> Iterator[str]:
            raise KeyError("triton")  # what a namespace path of a parent not imported raises

    class Broken:
        def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
            if name != "triton":
                return None
            spec = ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = Unlistable()  # type: ignore[assignment]
            return spec

    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    reg = env.registry(site, policy="strict")
    assert entry(reg, "demo").state == "loaded"
    demo = entry(reg, "nsdemo")
    assert demo.state == "excluded" and demo.reason is not None and demo.reason.code == "verify.shadowed", demo.reason


# -- 2. the unlisted-code walk of a backend installed inside another distribution's package -----


def _triton_with_a_backend_inside(site: Path, env: TrustEnv) -> tuple[Dist, Dist]:
    """A Triton (RECORD only, as pip leaves it) and a fork's backend installed into its
    ``triton/backends/foo/``, signed: its manifest lists its own files only."""
    triton = write_dist(site, "triton", "3.9.0", backends={}, files={
        "triton/__init__.py": b"__version__ = '3.9.0'\n",
        "triton/backends/__init__.py": b"",
        "triton/language/core.py": b"def f():\n    pass\n",
        "triton/_C/libtriton.so": b"\x7fELF not really\n",
    })
    write_record(triton)
    foo = write_dist(site, "foo-backend", backends={"foo": "triton.backends.foo"}, files={
        "triton/backends/foo/lib/helper.py": b"X = 1\n",
    })
    own = [p for p in foo.wheel_paths() if p.startswith(("triton/backends/foo/", foo.dist_info.name + "/"))]
    foo.seal(foo.describe(own), env.key)
    write_record(foo)
    return triton, foo


def test_backend_inside_triton_does_not_list_tritons_files(env: TrustEnv, site: Path) -> None:
    _triton_with_a_backend_inside(site, env)
    reg = env.registry(site, policy="strict")
    foo = entry(reg, "foo")
    assert (foo.trust, foo.state, foo.reason) == ("verified", "loaded", None)
    files = next(v for k, v in reg.verdicts.items() if "foo_backend" in k).files
    assert str(site / "triton" / "language") not in files  # Triton's directories are not walked


@pytest.mark.parametrize("dropped", ["triton/backends/foo/evil.py", "triton/backends/foo/lib/sub/evil.so"])
def test_a_file_dropped_into_the_backends_own_directory_is_caught(env: TrustEnv, site: Path, dropped: str) -> None:
    _triton_with_a_backend_inside(site, env)
    assert entry(env.registry(site, policy="strict"), "foo").state == "loaded"  # the cache is warm
    path = site.joinpath(*dropped.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"import os\n")
    foo = entry(env.registry(site, policy="strict"), "foo")
    assert foo.trust == "rejected" and foo.reason is not None
    assert (foo.reason.code, foo.reason.path) == ("verify.unlisted", str(path))


def test_a_file_dropped_into_tritons_own_directory_is_not_the_backends(env: TrustEnv, site: Path) -> None:
    _triton_with_a_backend_inside(site, env)
    (site / "triton" / "backends" / "stray.py").write_text("")  # Triton's directory: its own verdict's
    foo = entry(env.registry(site, policy="strict"), "foo")
    assert (foo.trust, foo.state) == ("verified", "loaded")


@pytest.mark.parametrize("change", ["no-record", "init-edited"])
def test_a_package_no_one_else_owns_is_walked_whole(env: TrustEnv, site: Path, change: str) -> None:
    """Only another distribution's RECORD that describes the file on disk makes the package
    someone else's: without it, every file of it not listed is unlisted code (fail closed),
    also when the verdict was cached while the RECORD held."""
    triton, _ = _triton_with_a_backend_inside(site, env)
    assert entry(env.registry(site, policy="strict"), "foo").state == "loaded"
    init = site / "triton" / "__init__.py"
    if change == "no-record":
        (triton.dist_info / "RECORD").unlink()
    else:
        init.write_text("__version__ = '3.9.0'  # edited\n")
    foo = entry(env.registry(site, policy="strict"), "foo")
    assert foo.trust == "rejected" and foo.reason is not None and foo.reason.code == "verify.unlisted"
    assert foo.reason.path == str(site / "triton" / "_C" / "libtriton.so")


# -- 3. the Triton package a manifest was built for (schema 1.2 triton_package) ----------------

RENAMED = "tokenspeed_triton"


def load_as(env: TrustEnv, site: Path, package: str, policy: str = "strict") -> Registry:
    """The registry as ``<package>/backends/__init__.py`` calls it (the patch passes its
    directory), over ``site``."""
    env.monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    env.monkeypatch.setenv("TRITON_BACKEND_POLICY", policy)
    reg = Registry()
    reg.load(stub_loader, backends_dir=str(site / package / "backends"))
    return reg


def _built_for(package: str) -> Callable[[m.Manifest], None]:
    def edit(manifest: m.Manifest) -> None:
        manifest.triton_package = package

    return edit


@pytest.mark.parametrize("policy", ["strict", "warn"])
def test_a_backend_built_for_a_renamed_triton_is_not_admitted_to_triton(env: TrustEnv, site: Path,
                                                                         policy: str) -> None:
    write_dist(site).sign(env.key, edit=_built_for(RENAMED))
    demo = entry(env.registry(site, policy=policy), "demo")
    assert (demo.trust, demo.state) == ("rejected", "excluded") and demo.reason is not None
    assert demo.reason.code == "verify.triton-package"
    assert f"built for Triton imported as {RENAMED!r}; this Triton is imported as 'triton'" in demo.reason.message


def test_a_backend_built_for_the_renamed_triton_loads_there(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site, entry_points=False)
    (dist.dist_info / "entry_points.txt").write_text(f"[{RENAMED}.backends]\ndemo = demo_backend\n")
    dist.sign(env.key, edit=_built_for(RENAMED))
    demo = entry(load_as(env, site, RENAMED), "demo")
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)


def test_a_plugin_built_for_triton_is_not_handed_to_a_renamed_triton(env: TrustEnv, site: Path,
                                                                     elf_files: ElfFixtures) -> None:
    dist = write_dist(site, "plugin-pack", backends={}, files={"plugin_pack/libp.so": elf_files.plugin_shared})
    dist.sign(env.key)
    reg = load_as(env, site, RENAMED, policy="warn")
    (plugin,) = reg.plugins
    assert (plugin.trust, plugin.state) == ("rejected", "excluded") and plugin.reason is not None
    assert plugin.reason.code == "verify.triton-package" and plugin.handed_over == ""
    as_triton = Registry()
    as_triton.load(stub_loader)  # the same tree, imported as triton: admitted
    assert [p.trust for p in as_triton.plugins] == ["verified"]


def test_a_manifest_without_backends_or_plugins_holds_for_any_package(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site, "some-library", backends={}, files={"some_library/__init__.py": b""})
    dist.sign(env.key)
    reg = load_as(env, site, RENAMED)
    (verdict,) = reg.verdicts.values()
    assert (verdict.status, verdict.problem) == ("verified", None)


def test_the_package_is_part_of_the_cached_verdicts_context(env: TrustEnv, site: Path) -> None:
    write_dist(site).sign(env.key)
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    reg = load_as(env, site, RENAMED)
    (verdict,) = reg.verdicts.values()
    assert verdict.problem is not None and verdict.problem.code == "verify.triton-package"


@pytest.mark.parametrize("dropped", ["triton/backends/__init__.py", "triton/__init__.py"])
def test_an_init_dropped_above_a_backend_in_a_namespace_is_caught(env: TrustEnv, site: Path, dropped: str) -> None:
    """Importing ``triton.backends.nsdemo`` runs every ``__init__.py`` above it: one dropped into
    the namespace (turning it into a package) is unlisted code, also with the cache warm."""
    write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"}).sign(env.key)
    assert entry(env.registry(site, policy="strict"), "nsdemo").state == "loaded"
    path = site.joinpath(*dropped.split("/"))
    path.write_text("import os\n")
    demo = entry(env.registry(site, policy="strict"), "nsdemo")
    assert demo.trust == "rejected" and demo.reason is not None
    assert (demo.reason.code, demo.reason.path) == ("verify.unlisted", str(path))


# -- the verdict cache's file hashes (format 3) -------------------------------------------------


def test_a_verdict_verified_again_takes_file_hashes_from_the_cache(env: TrustEnv, site: Path) -> None:
    """A new file in a walked directory invalidates the verdict, not the hashes of the files
    that did not change: nothing is hashed again, before or after the file goes."""
    dist = write_dist(site)
    dist.sign(env.key)
    assert env.registry(site, policy="strict").hashed_bytes > 0
    stray = dist.file("demo_backend/stray.py")
    stray.write_text("")
    again = env.registry(site, policy="strict")
    assert code_of(entry(again, "demo")) == "verify.unlisted"
    assert again.hashed_bytes == 0
    stray.unlink()
    healed = env.registry(site, policy="strict")
    assert entry(healed, "demo").state == "loaded" and healed.hashed_bytes == 0
    compiler = dist.file("demo_backend/compiler.py")
    compiler.write_bytes(compiler.read_bytes().replace(b"'demo'", b"'dem0'"))  # same size, other bytes
    edited = env.registry(site, policy="strict")
    assert code_of(entry(edited, "demo")) == "verify.sha256"
    assert edited.hashed_bytes == compiler.stat().st_size  # that file only
