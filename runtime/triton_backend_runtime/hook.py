"""Triton integration: what a patched ``triton/backends/__init__.py`` calls.

Two ways in, one code path:

(a) the upstreamable patch in ``hooks/`` (:data:`PATCH_BLOCK` replacing
    :data:`PATCH_ANCHOR`, the last line of Triton 3.9's ``backends/__init__.py``): when
    this package is importable, Triton asks :func:`triton_backends` for its table; when it
    is not, or the policy is ``off``, Triton runs its own ``_discover_backends()``
    unchanged;
(b) for an unmodified Triton from the package index, ``python -m triton_backend_runtime
    hook install`` writes a ``.pth`` file that imports :mod:`.autohook`, which applies
    the same patch in memory when ``triton.backends`` is imported.

Either way Triton's own loader (import ``<package>.compiler`` and ``.driver``, take the one
concrete subclass of each) loads every admitted backend; the registry decides which.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from . import registry as reg
from .vocab import LOADED, STRICT

PATCH_ANCHOR = "backends: dict[str, Backend] = _discover_backends()\n"
PATCH_BLOCK = '''\
def _load_backend(name: str, package: str) -> Backend:
    compiler = importlib.import_module(f"{package}.compiler")
    driver = importlib.import_module(f"{package}.driver")
    return Backend(_find_concrete_subclasses(compiler, BaseBackend),  # type: ignore
                   _find_concrete_subclasses(driver, DriverBase))  # type: ignore


def _registry_backends() -> Union[dict[str, Backend], None]:
    # An installed backend registry (triton-backend-runtime) verifies backends and decides
    # which load; without it, or when its policy is "off", discovery is unchanged.
    try:
        from triton_backend_runtime.hook import triton_backends
    except ImportError:
        return None
    return triton_backends(_load_backend, os.path.dirname(__file__))


_registered = _registry_backends()
backends: dict[str, Backend] = _discover_backends() if _registered is None else _registered
'''


def patch_source(source: str) -> str | None:
    """Triton's ``backends/__init__.py`` with the registry patch; None if the shape differs."""
    if source.count(PATCH_ANCHOR) != 1 or "_registry_backends" in source:
        return None
    return source.replace(PATCH_ANCHOR, PATCH_BLOCK)


def triton_backends(load: Callable[[str, str], Any], backends_dir: str | None = None) -> dict[str, Any] | None:
    """Triton's backend table as the registry admits it; None hands the choice back to Triton.

    Never raises: an internal error is reported as a warning; under ``strict`` the table is
    then empty (fail closed), otherwise Triton's own discovery runs (fail open).
    """
    registry = reg.get()
    try:
        table = registry.load(load, backends_dir)
        if table is None:
            return None
        registry.used_by_triton = True
        _after_load(registry)
        return table
    except Exception as exc:  # the registry must never be why import triton fails
        reg.emit(f"triton-backend-runtime: internal error, {exc!r}")
        return {} if registry.policy == STRICT else None


def _after_load(registry: reg.Registry) -> None:
    from .compilekey import install, manifest_digest

    items: list[reg.Entry | reg.PluginEntry] = [*registry.entries, *registry.plugins]
    used = [
        (item.dist.key, item.dist.version, registry.verdicts[item.dist.dist_info].envelope_sha256)
        for item in items
        if item.dist is not None and item.dist.dist_info in registry.verdicts and item.state == LOADED
    ]
    knobs = sys.modules.get("triton.knobs")
    if used and knobs is not None:
        registry.manifest_digest = manifest_digest(used)
        install(knobs, registry.manifest_digest)
    watch_driver(registry)


def watch_driver(registry: reg.Registry) -> None:
    """Wrap ``triton.runtime.driver._create_driver`` (now or when it is imported)."""
    module = sys.modules.get("triton.runtime.driver")
    if module is not None:
        _wrap(module, registry)
        return
    from .autohook import after_import

    after_import("triton.runtime.driver", lambda m: _wrap(m, registry))


def _wrap(module: Any, registry: reg.Registry) -> None:
    from .selection import wrap_create_driver

    original = getattr(module, "_create_driver", None)
    if original is not None and not hasattr(original, "__wrapped__"):
        module._create_driver = wrap_create_driver(original, registry)
