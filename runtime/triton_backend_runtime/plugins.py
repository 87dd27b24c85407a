"""Handing admitted plugin libraries to Triton.

By the time a plugin gets here it has passed verification: its hash, its Triton version
requirement and the symbols it needs from ``libtriton.so`` were all checked from the
manifest and the installed files, before anything was loaded. A mismatch therefore never
reaches ``dlopen``.

Triton 3.9 loads plugins explicitly: ``passes.plugin.extend_with(path)`` (passes),
``ir.extend_dialects_with(path)`` (dialects) and ``ir.builder.extend_with(path)`` (ops).
Where the installed Triton lacks them, ``TRITON_PLUGIN_PATHS`` (colon-separated, read
while ``libtriton`` loads) is extended instead, which only works before ``libtriton`` is
imported. Plugins that Triton's own distribution ships (its test plugins) are verified
and reported but not loaded: whether to load them stays Triton's decision.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .errors import LoadError

if TYPE_CHECKING:
    from .registry import PluginEntry

PLUGIN_PATHS_ENV = "TRITON_PLUGIN_PATHS"
_BUNDLED = "triton"


def hand_over(plugins: list[PluginEntry]) -> None:
    """Give each admitted plugin to Triton the best way the installed Triton offers."""
    for plugin in plugins:
        if plugin.dist.key == _BUNDLED:
            plugin.handed_over = "not loaded: bundled with Triton itself"
            continue
        libtriton = sys.modules.get("triton._C.libtriton")
        try:
            if libtriton is not None and hasattr(getattr(libtriton.passes, "plugin", None), "extend_with"):
                _extend(libtriton, plugin.file)
                plugin.handed_over = "extend_with"
            elif libtriton is None:
                _add_plugin_path(plugin.file)
                plugin.handed_over = PLUGIN_PATHS_ENV
            else:
                raise LoadError(
                    "plugin-api", plugin.file, "libtriton is already loaded and this Triton has no extend_with"
                )
        except Exception as exc:  # a plugin that fails must not break import triton
            plugin.state = "failed"
            plugin.reason = (
                exc.as_dict() if isinstance(exc, LoadError)
                else LoadError("plugin", plugin.file, f"{type(exc).__name__}: {exc}").as_dict()
            )
            continue
        plugin.state = "loaded"


def _extend(libtriton: object, path: str) -> None:
    lt: object = libtriton
    lt.passes.plugin.extend_with(path)  # type: ignore[attr-defined]
    lt.ir.extend_dialects_with(path)  # type: ignore[attr-defined]
    lt.ir.builder.extend_with(path)  # type: ignore[attr-defined]


def _add_plugin_path(path: str) -> None:
    paths = [p for p in os.environ.get(PLUGIN_PATHS_ENV, "").split(":") if p]
    if path not in paths:
        os.environ[PLUGIN_PATHS_ENV] = ":".join([*paths, path])
