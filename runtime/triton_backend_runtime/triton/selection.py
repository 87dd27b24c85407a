"""Driver selection with Triton's semantics, and an error that says why it failed.

Triton 3.9 (``triton/runtime/driver.py``): ``TRITON_DEFAULT_BACKEND`` names the backend
(unknown or inactive raises); otherwise exactly one loaded driver must be active. Its
errors ("0 active drivers ([]). There should only be one.") say nothing about why.
:func:`wrap_create_driver` keeps the semantics and Triton's own function, and when it
raises, raises :class:`SelectionError` (a ``RuntimeError``, as before) listing every
backend the registry saw: its distribution, state, and why it is or is not active.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..base import SelectionError, describe
from ..loading import Registry

__all__ = ["DEFAULT_BACKEND_ENV", "explain", "probe_active", "wrap_create_driver"]

DEFAULT_BACKEND_ENV = "TRITON_DEFAULT_BACKEND"


def probe_active(registry: Registry) -> None:
    """Ask every loaded driver ``is_active()``; a driver that raises counts as inactive."""
    for entry in registry.entries:
        driver = getattr(entry.backend, "driver", None)
        if driver is None:
            continue
        try:
            entry.active = bool(driver.is_active())
        except Exception as exc:
            entry.active = False
            entry.inactive_reason = f"is_active() raised {describe(exc)}"


def explain(registry: Registry, headline: str) -> str:
    """``headline``, then one line per backend with its state and reason."""
    probe_active(registry)
    lines = [headline]
    for e in registry.entries:
        dist = e.dist.label() if e.dist else "no distribution"
        if e.backend is not None:
            why = "active" if e.active else f"driver {e.backend.driver.__name__} is not active"
            if e.inactive_reason and not e.active:
                why += f" ({e.inactive_reason})"
        elif e.reason:
            why = f"{e.reason.path}: {e.reason.message}"
        else:
            why = e.note or "not loaded"
        lines.append(f"  {e.name} [{dist}, {e.trust}, {e.state}]: {why}")
    if not registry.entries:
        lines.append("  no backend was discovered (no triton.backends entry point on sys.path)")
    return "\n".join(lines)


def wrap_create_driver(original: Callable[[], Any], registry: Registry) -> Callable[[], Any]:
    """Triton's ``_create_driver``, with the explanation on failure and the choice recorded."""

    def _create_driver() -> Any:
        try:
            driver = original()
        except RuntimeError as exc:
            selected = os.environ.get(DEFAULT_BACKEND_ENV)
            where = f"{DEFAULT_BACKEND_ENV}={selected}" if selected else "driver selection"
            raise SelectionError("driver", where, explain(registry, str(exc))) from exc
        registry.mark_selected(type(driver))
        return driver

    _create_driver.__wrapped__ = original  # type: ignore[attr-defined]
    return _create_driver
