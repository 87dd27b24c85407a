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

Triton's discovery has had three shapes since 3.0, each with its patch in ``hooks/`` and
its :class:`Shape` here (found by the text of the file, never by a version number, since
forks carry their own):

* ``directory-scan`` (3.0-3.3): ``backends = _discover_backends()`` scans the directories
  under ``triton/backends/`` and loads ``compiler.py``/``driver.py`` by file path; the
  registry then discovers the same directories, and admitted backends are imported as
  ``triton.backends.<name>.compiler`` (through the import system, so that the verified
  source is what runs, never a pyc);
* ``entry-points`` (3.4-3.6): the ``triton.backends`` entry points only (no
  ``TRITON_BACKENDS_IN_TREE``, and no ``os`` imported by the module);
* ``entry-points-in-tree`` (3.7-3.9): entry points, or the directories with
  ``TRITON_BACKENDS_IN_TREE=1``.

A ``backends/__init__.py`` of any other shape cannot be wrapped: :func:`unwrappable` says
why, and under ``strict`` ``import triton`` fails with that one line (the registry is not in
use, so nothing would be verified); under ``warn`` it is a warning and a problem in ``doctor``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import BAD_STATES, LOADED, OFF, PENDING, STRICT, PolicyError
from .loading import registry as reg
from .verification import reason_of

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


#: 3.4-3.6: entry points only; the module imports no ``os``, and ignores TRITON_BACKENDS_IN_TREE.
ENTRY_POINTS_BLOCK = PATCH_BLOCK.replace(
    "    return triton_backends(_load_backend, os.path.dirname(__file__))\n",
    "    import os\n    return triton_backends(_load_backend, os.path.dirname(__file__), in_tree=False)\n",
)
#: 3.0-3.3: the directories under triton/backends/, no entry points, no annotations.
DIRECTORY_SCAN_ANCHOR = "backends = _discover_backends()\n"
DIRECTORY_SCAN_BLOCK = '''\
def _load_backend(name, package):
    # The registry admitted it; the import system loads it, so that its verified source runs.
    import importlib
    compiler = importlib.import_module(package + ".compiler")
    driver = importlib.import_module(package + ".driver")
    return Backend(_find_concrete_subclasses(compiler, BaseBackend),
                   _find_concrete_subclasses(driver, DriverBase))


def _registry_backends():
    # An installed backend registry (triton-backend-runtime) verifies backends and decides
    # which load; without it, or when its policy is "off", discovery is unchanged.
    try:
        from triton_backend_runtime.hook import triton_backends
    except ImportError:
        return None
    return triton_backends(_load_backend, os.path.dirname(__file__), in_tree=True)


_registered = _registry_backends()
backends = _discover_backends() if _registered is None else _registered
'''
#: The module calls the registry already (the patch in hooks/ applied to the file itself).
PATCHED_MARK = "_registry_backends"


@dataclass(eq=False, repr=False)  # compared by identity; no __eq__ or __repr__ made at every import
class Shape:
    """One shape of Triton's ``backends/__init__.py``: how to recognise it, its patch."""

    name: str
    releases: str
    anchor: str
    block: str
    #: Text the source must hold (True) or must not hold (False) besides the anchor.
    marks: tuple[tuple[str, bool], ...] = ()

    def fits(self, source: str) -> bool:
        return source.count(self.anchor) == 1 and all((mark in source) == want for mark, want in self.marks)


_IN_TREE_MARK = "TRITON_BACKENDS_IN_TREE"
SHAPES = (
    Shape("entry-points-in-tree", "3.7-3.9", PATCH_ANCHOR, PATCH_BLOCK, ((_IN_TREE_MARK, True),)),
    Shape("entry-points", "3.4-3.6", PATCH_ANCHOR, ENTRY_POINTS_BLOCK,
          ((_IN_TREE_MARK, False), ('entry_points().select(group="triton.backends")', True))),
    Shape("directory-scan", "3.0-3.3", DIRECTORY_SCAN_ANCHOR, DIRECTORY_SCAN_BLOCK,
          (("def _load_module(name, path):", True), ("entry_points", False))),
)


def shape_of(source: str) -> Shape | None:
    """The discovery shape of a Triton ``backends/__init__.py``; None for an unknown one."""
    if PATCHED_MARK in source:
        return None
    return next((shape for shape in SHAPES if shape.fits(source)), None)


def patch_source(source: str) -> str | None:
    """Triton's ``backends/__init__.py`` with the registry patch for its shape; None when the
    shape is unknown or the file is patched already."""
    shape = shape_of(source)
    return None if shape is None else source.replace(shape.anchor, shape.block)


def unwrappable(origin: str | None, source: str | None) -> str | None:
    """Why the registry cannot be put in front of this ``backends/__init__.py``; None when it
    can, or when the file itself calls the registry (patched from ``hooks/``)."""
    if source is not None and PATCHED_MARK in source:
        return None
    if source is not None and shape_of(source) is not None:
        return None
    known = ", ".join(f"{s.name} ({s.releases})" for s in SHAPES)
    what = "cannot be read" if source is None else "has a discovery shape the registry does not know"
    return (f"{origin or 'triton.backends'} {what} (known: {known}): backends are not verified, "
            "the registry is not in use")


class RegistryUnavailable(ImportError):
    """``import triton`` refused under strict: the registry cannot wrap this Triton's discovery."""

    def __init__(self, why: str) -> None:
        super().__init__(f"triton-backend-runtime: {why} (policy.unenforced)")


def refuse_unwrappable(origin: str | None, why: str) -> None:
    """Under strict raise :class:`RegistryUnavailable`; otherwise one warning, and a problem
    for ``doctor``: Triton then discovers its backends itself."""
    registry = reg.get()
    if registry.policy == STRICT:
        raise RegistryUnavailable(why)
    if registry.policy != OFF:
        registry.problems.append(reason_of(PolicyError("unenforced", origin or "triton.backends", why)))
        reg.emit(f"triton-backend-runtime: {why}")


def triton_backends(
    load: Callable[[str, str], Any], backends_dir: str | None = None, in_tree: bool | None = None
) -> dict[str, Any] | None:
    """Triton's backend table as the registry admits it; None hands the choice back to Triton.

    Never raises: an internal error is reported as a warning; under ``strict`` the table is
    then empty (fail closed), otherwise Triton's own discovery runs (fail open).
    """
    registry = reg.get()
    try:
        table = registry.load(load, backends_dir, in_tree)
        if table is None:
            return None
        registry.used_by_triton = True
        _after_load(registry)
        return table
    except Exception as exc:  # the registry must never be why import triton fails
        reg.emit(f"triton-backend-runtime: internal error, {exc!r}")
        return {} if registry.policy == STRICT else None


def _after_load(registry: reg.Registry) -> None:
    _fold_cache_key(registry)
    if any(p.state == PENDING for p in registry.plugins):
        from .autohook import after_import
        from .triton import LIBTRITON

        # after the hand-over registered before this: a plugin that then fails leaves the key
        after_import(LIBTRITON, lambda _module: _fold_cache_key(registry))
    watch_driver(registry)
    from .triton import guard

    guard(registry)  # a plugin package's own extend_with call is checked too


def _fold_cache_key(registry: reg.Registry) -> None:
    """The manifests and admitted plugins in use, into Triton's compile cache key."""
    from .triton import isolate, manifest_digest, plugin_keys

    items: list[reg.Entry | reg.PluginEntry] = [*registry.entries, *registry.plugins]
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
            reg.emit(f"triton-backend-runtime: backend {name}: its compiler class takes no new hash(), "
                     "so its compile cache key does not include the manifests in use")


def watch_driver(registry: reg.Registry) -> None:
    """Wrap ``triton.runtime.driver._create_driver`` (now or when it is imported)."""
    module = sys.modules.get("triton.runtime.driver")
    if module is not None:
        _wrap(module, registry)
        return
    from .autohook import after_import

    after_import("triton.runtime.driver", lambda m: _wrap(m, registry))


def _wrap(module: Any, registry: reg.Registry) -> None:
    from .triton import wrap_create_driver

    original = getattr(module, "_create_driver", None)
    if original is not None and not hasattr(original, "__wrapped__"):
        module._create_driver = wrap_create_driver(original, registry)
