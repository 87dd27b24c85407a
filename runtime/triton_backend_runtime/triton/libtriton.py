"""What runs when Triton's ``libtriton`` extension is imported: registered here, run in one order.

Four steps act on ``<package>._C.libtriton`` the moment it is imported (or at once, when it
already is), always in this order, whichever registered first:

1. ``core`` (:mod:`.core`): the library mapped into the process is the file that was
   verified; under strict ``import triton`` fails before anything uses it.
2. ``guard`` (:mod:`.pluginguard`): Triton's own plugin loaders (``extend_with``...) admit
   only libraries the registry admitted, before any plugin is handed over.
3. ``hand-over`` (:mod:`.plugins`): admitted plugins given to Triton.
4. ``cache-key`` (:mod:`.integration`): the compile-cache key folded again, since a plugin
   that failed to load leaves it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from . import importwatch

__all__ = ["STEPS", "module_name", "when_loaded"]

STEPS = ("core", "guard", "hand-over", "cache-key")

_pending: dict[str, dict[str, list[Callable[[Any], None]]]] = {}


def module_name(package: str = "triton") -> str:
    return f"{package}._C.libtriton"


def when_loaded(step: str, action: Callable[[Any], None], package: str = "triton") -> None:
    """Run ``action(libtriton)`` as step ``step`` (one of :data:`STEPS`)."""
    if step not in STEPS:
        raise ValueError(f"unknown libtriton step {step!r}")
    name = module_name(package)
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        action(module)
        return
    steps = _pending.get(name)
    if steps is None:
        steps = _pending[name] = {}
        importwatch.after_import(name, lambda module: _run(name, module))
    steps.setdefault(step, []).append(action)


def _run(name: str, module: Any) -> None:
    steps = _pending.pop(name, {})
    for step in STEPS:
        for action in steps.get(step, []):
            action(module)
