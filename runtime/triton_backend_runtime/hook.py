"""Triton integration: what a patched ``triton/backends/__init__.py`` calls.

Two ways in, one code path:

(a) the upstreamable patch in ``hooks/`` (:data:`.triton.patch.PATCH_BLOCK` replacing
    :data:`.triton.patch.PATCH_ANCHOR`, the last line of Triton 3.9's
    ``backends/__init__.py``): when this package is importable, Triton asks
    :func:`triton_backends` for its table; when it is not, or the policy is ``off``, Triton
    runs its own ``_discover_backends()`` unchanged;
(b) for an unmodified Triton from the package index, ``python -m triton_backend_runtime
    hook install`` writes a ``.pth`` file that imports :mod:`.autohook`, which applies
    the same patch in memory when ``triton.backends`` is imported.

Either way Triton's own loader (import ``<package>.compiler`` and ``.driver``, take the one
concrete subclass of each) loads every admitted backend; the registry decides which
(:mod:`.loading.registry`) and the Triton layer acts on its plan (:mod:`.triton.integration`).
The patches name this module and this function: they stay here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import STRICT
from .loading import emit, get
from .triton import admit

__all__ = ["triton_backends"]


def triton_backends(
    load: Callable[[str, str], Any], backends_dir: str | None = None, in_tree: bool | None = None
) -> dict[str, Any] | None:
    """Triton's backend table as the registry admits it; None hands the choice back to Triton.

    Never raises: an internal error is reported as a warning; under ``strict`` the table is
    then empty (fail closed), otherwise Triton's own discovery runs (fail open).
    """
    registry = get()
    try:
        table = admit(registry, load, backends_dir, in_tree)
        if table is None:
            return None
        registry.used_by_triton = True
        return table
    except Exception as exc:  # the registry must never be why import triton fails
        emit(f"triton-backend-runtime: internal error, {exc!r}")
        return {} if registry.policy == STRICT else None
