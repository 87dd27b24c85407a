"""The Triton layer acting on the registry's decisions.

:mod:`..loading.registry` decides and returns a :class:`~..loading.Plan`; this module acts on
it, on Triton's objects: verified sources guarded (:mod:`.importwatch`, :mod:`.bytecode`),
plugins handed over (:mod:`.plugins`), the compile-cache key folded (:mod:`.compilekey`),
driver creation wrapped (:mod:`.selection`), Triton's own plugin loading guarded
(:mod:`.pluginguard`). What runs when libtriton loads is ordered by :mod:`.libtriton`.

It also holds what the ``.pth`` hook does with ``triton.backends``: the registry patch for its
shape (:mod:`.patch`) compiled from the verified source, or, for a shape the registry does not
know, a refusal under strict (:class:`RegistryUnavailable`) and a warning otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..base import BAD_STATES, LOADED, OFF, PENDING, STRICT, PolicyError, Reason, reason_of
from ..loading import Entry, Plan, PluginEntry, Registry, emit, get
from . import importwatch
from .bytecode import verified_source
from .libtriton import when_loaded
from .patch import patch_source, unwrappable
from .pluginguard import guard
from .plugins import hand_over
from .sources import guard_sources, verified_or_none

__all__ = ["RegistryUnavailable", "act", "admit", "guard_sources", "patched_backends", "refuse_unwrappable",
           "watch_driver"]


def admit(registry: Registry, load: Callable[[str, str], Any], backends_dir: str | None = None,
          in_tree: bool | None = None) -> dict[str, Any] | None:
    """The registry's plan, acted on: Triton's backend table, or None (policy ``off``)."""
    plan = registry.load(load, backends_dir, in_tree)
    if plan is None:
        return None
    act(plan, registry)
    return plan.backends


def patched_backends(origin: str | None, verified: list[object] | None, get_source: Callable[[], str | None]) -> Any:
    """The code to run for ``triton.backends``: its source (the verified bytes when it was
    verified) with the registry patch; None runs the module as it is (already patched, or of
    an unknown shape, which is refused under strict)."""
    if verified is not None and origin is not None:
        data = verified_or_none(verified_source, origin, verified)
        source = data.decode("utf-8") if data is not None else get_source()
    else:
        source = get_source()
    patched = patch_source(source) if source else None
    if patched is None:
        why = unwrappable(origin, source)
        if why is not None:
            refuse_unwrappable(origin, why)  # raises under strict
        return None
    return compile(patched, origin or "<triton.backends>", "exec", dont_inherit=True)


class RegistryUnavailable(ImportError):
    """``import triton`` refused under strict: the registry cannot wrap this Triton's discovery."""

    def __init__(self, why: str, origin: str | None = None) -> None:
        super().__init__(f"triton-backend-runtime: {why} (policy.unenforced)")
        self.reason = Reason("policy.unenforced", origin or "triton.backends", why)


def refuse_unwrappable(origin: str | None, why: str) -> None:
    """Under strict raise :class:`RegistryUnavailable`; otherwise one warning, and a problem
    for ``doctor``: Triton then discovers its backends itself."""
    registry = get()
    if registry.policy == STRICT:
        raise RegistryUnavailable(why, origin)
    if registry.policy != OFF:
        registry.problems.append(reason_of(PolicyError("unenforced", origin or "triton.backends", why)))
        emit(f"triton-backend-runtime: {why}")


def act(plan: Plan, registry: Registry) -> None:
    """Act on what the registry decided: verified sources guarded, plugins handed over, the
    compile-cache key folded, the driver watched, Triton's own plugin loading guarded. Once
    per plan."""
    if plan.acted:
        return
    plan.acted = True
    guard_sources(registry)
    package = registry.discovery.package if registry.discovery else "triton"
    hand_over(plan.plugins, plan.triton_version, plan.core, package)
    _fold_cache_key(registry)
    if any(p.state == PENDING for p in registry.plugins):
        # after the hand-over: a plugin that then fails leaves the key
        when_loaded("cache-key", lambda _module: _fold_cache_key(registry), package)
    watch_driver(registry)
    guard(registry)  # a plugin package's own extend_with call is checked too
    if registry.policy != OFF and registry.core is None and registry.libtriton_verified:
        from .core import check_mapped

        check_mapped(registry, package)  # a library loaded since triton/__init__ ran


def _fold_cache_key(registry: Registry) -> None:
    """The manifests and admitted plugins in use, into Triton's compile cache key."""
    from .compilekey import isolate, manifest_digest, plugin_keys  # only where some manifest is in use

    items: list[Entry | PluginEntry] = [*registry.entries, *registry.plugins]
    used = [
        (item.dist.key, item.dist.version, registry.verdicts[item.dist.dist_info].envelope_sha256)
        for item in items
        if item.dist is not None and item.dist.dist_info in registry.verdicts and item.state == LOADED
    ]
    # admitted: handed over (or about to be), or registered by the vendor's own code (phase explicit)
    admitted = [p for p in registry.plugins if p.state in (LOADED, PENDING)
                or (p.terms is not None and p.terms.phase == "explicit" and p.state not in BAD_STATES)]
    required = any(p.required() for p in registry.plugins)  # compiling checks them on every call
    if used or required:
        registry.manifest_digest = manifest_digest(used, plugin_keys(admitted, registry.verdicts))
        package = registry.discovery.package if registry.discovery else "triton"
        missing = registry.missing_required if required else None
        for name in isolate(package, registry.result or {}, registry.manifest_digest, missing):
            emit(f"triton-backend-runtime: backend {name}: its compiler class takes no new hash(), "
                     "so its compile cache key does not include the manifests in use")


def watch_driver(registry: Registry) -> None:
    """Wrap ``triton.runtime.driver._create_driver`` (now or when it is imported)."""
    module = sys.modules.get("triton.runtime.driver")
    if module is not None:
        _wrap(module, registry)
        return
    importwatch.after_import("triton.runtime.driver", lambda m: _wrap(m, registry))


def _wrap(module: Any, registry: Registry) -> None:
    from .selection import wrap_create_driver

    original = getattr(module, "_create_driver", None)
    if original is not None and not hasattr(original, "__wrapped__"):
        module._create_driver = wrap_create_driver(original, registry)
