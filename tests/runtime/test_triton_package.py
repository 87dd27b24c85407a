"""The Triton package a backend belongs to: a backend located in a namespace ``triton/`` (no
``__init__.py``) or shadowed by a regular one, and the package a manifest was built for (a
backend built for a renamed Triton is not admitted to ``triton``). Dist-info trees in
``tmp_path`` with real signed manifests (:mod:`helpers.disttree`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from helpers import disttree
from helpers.csrc import ElfFixtures
from helpers.disttree import TrustEnv, entry, stub_loader, write_dist
from triton_backend_runtime.loading import registry
from triton_backend_runtime.loading.registry import Registry
from triton_backend_runtime.manifest import model as m

#: Trees found by the finders; what a test imports from its tree is forgotten after it.
_no_triton_imported = disttree.no_triton_imported


# -- a backend inside a namespace triton/ (no __init__.py) -------------------------------------


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


# -- the Triton package a manifest was built for (schema 1.2 triton_package) -------------------

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
