"""Registry gaps (issues 8 and 10): a backend in a namespace ``triton/``, the unlisted-code walk
of a distribution installed inside another's package, and the Triton package a manifest was
built for. Dist-info trees in ``tmp_path`` with real signed manifests (:mod:`helpers.disttree`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from helpers.disttree import Dist, TrustEnv, write_dist, write_record
from triton_backend_runtime import registry
from triton_backend_runtime.registry import Entry, Registry


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TrustEnv:
    return TrustEnv.make(tmp_path, monkeypatch)


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    return path


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


# -- 1. a backend inside a namespace triton/ (no __init__.py) ----------------------------------


def test_backend_in_a_namespace_triton_is_located(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"})
    assert not (site / "triton" / "__init__.py").exists() and not (site / "triton" / "backends" / "__init__.py").exists()
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
