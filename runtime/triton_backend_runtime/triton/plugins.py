"""Handing admitted plugin libraries to Triton.

By the time a plugin gets here it has passed verification: its hash, its Triton version
requirement and the symbols it needs from ``libtriton.so`` were all checked from the
manifest and the installed files, before anything was loaded. A mismatch therefore never
reaches ``dlopen``.

Triton 3.9 loads plugins explicitly: ``passes.plugin.extend_with(path)`` (passes),
``ir.extend_dialects_with(path)`` (dialects) and ``ir.builder.extend_with(path)`` (ops).
Each raises ``RuntimeError`` for a library it refuses (no entry point, another plugin API
or Triton version); the plugin is then ``failed`` with Triton's message. The decision:

* ``libtriton`` loaded and it has ``extend_with``: hand over now;
* ``libtriton`` loaded without ``extend_with`` (an older Triton): too late for
  ``TRITON_PLUGIN_PATHS``, which is read while ``libtriton`` loads: ``failed``, saying so;
* ``libtriton`` not loaded yet, and the installed Triton is 3.9 or later: wait for it
  (``pending``) and hand over with ``extend_with`` the moment it is imported. The 3.9.0
  wheel does not load ``TRITON_PLUGIN_PATHS`` libraries when ``libtriton`` is imported
  (checked: nothing is mapped after import, ``ir.load_dialects`` or a pass-manager run),
  so the variable would report a plugin as handed over that Triton never loads;
* ``libtriton`` not loaded yet, older Triton: extend ``TRITON_PLUGIN_PATHS``.

Plugins that Triton's own distribution ships (its test plugins) are verified and reported
but not loaded: whether to load them stays Triton's decision. Neither is a plugin whose
vendor declared ``phase = "explicit"``: its own code registers it.

The plugin contract (schema 1.2, :func:`check_terms`) is checked at verification, before any
``dlopen``: the installed Triton must be the release the library says it was built for
(``tritonGetPluginInfo``'s ``tritonVersion``, captured at build time; a local label such as
``+git1234`` aside) and lie in the vendor's declared range.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from ..base import FAILED, LOADED, LoadError, describe, reason_of
from ..base import PENDING as PENDING_STATE

if TYPE_CHECKING:
    from ..loading import PluginEntry
    from ..site import Distribution

PLUGIN_PATHS_ENV = "TRITON_PLUGIN_PATHS"
#: Triton's extension module, for the default package (a renamed Triton has its own).
LIBTRITON = "triton._C.libtriton"
#: The first Triton release whose libtriton has the ``extend_with`` functions.
EXTEND_WITH_SINCE = (3, 9)
EXTEND_WITH, PENDING = "extend_with", "extend_with, when libtriton is imported"


def hand_over(plugins: list[PluginEntry], triton_version: str | None, core: Distribution | None = None,
              package: str = "triton") -> None:
    """Give each admitted plugin to the Triton imported as ``package``, the best way it offers;
    those of ``core`` (the distribution ``import <package>`` imports, whatever its name) stay
    Triton's."""
    from .libtriton import module_name, when_loaded

    waiting: list[PluginEntry] = []
    for plugin in plugins:
        if core is not None and plugin.dist.dist_info == core.dist_info:
            plugin.handed_over = "not loaded: bundled with Triton itself"
            continue
        if plugin.terms is not None and plugin.terms.phase == "explicit":
            plugin.handed_over = "not loaded here: phase explicit (the vendor's code registers it)"
            continue
        libtriton = sys.modules.get(module_name(package))
        if libtriton is None and has_extend_with(triton_version):
            plugin.state, plugin.handed_over = PENDING_STATE, PENDING
            waiting.append(plugin)
            continue
        _give(plugin, libtriton)
    if waiting:

        def give_all(module: Any) -> None:
            for plugin in waiting:
                _give(plugin, module)

        when_loaded("hand-over", give_all, package)


def has_extend_with(version: str | None) -> bool:
    """Whether a Triton of this version has ``extend_with`` (release, not the module)."""
    parts = (version or "").split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= EXTEND_WITH_SINCE
    except (ValueError, IndexError):
        return False


def _give(plugin: PluginEntry, libtriton: Any) -> None:
    try:
        if libtriton is None:
            _add_plugin_path(plugin.file)
            plugin.handed_over = PLUGIN_PATHS_ENV
        elif hasattr(getattr(getattr(libtriton, "passes", None), "plugin", None), "extend_with"):
            _extend(libtriton, plugin.file)
            plugin.handed_over = EXTEND_WITH
        else:
            raise LoadError(
                "plugin-api", plugin.file, "libtriton is already loaded and this Triton has no extend_with "
                f"({PLUGIN_PATHS_ENV} is only read while libtriton loads)"
            )
    except Exception as exc:  # a plugin that fails must not break import triton
        plugin.state = FAILED
        plugin.reason = reason_of(
            exc if isinstance(exc, LoadError) else LoadError("plugin", plugin.file, describe(exc))
        )
        return
    plugin.state = LOADED


def _extend(libtriton: Any, path: str) -> None:
    # Passes, dialects, ops: three registries, each loading the library itself (dlopen
    # returns the same handle); a plugin with none of one kind registers nothing there.
    libtriton.passes.plugin.extend_with(path)
    libtriton.ir.extend_dialects_with(path)
    libtriton.ir.builder.extend_with(path)


def _add_plugin_path(path: str) -> None:
    paths = [p for p in os.environ.get(PLUGIN_PATHS_ENV, "").split(":") if p]
    if path not in paths:
        os.environ[PLUGIN_PATHS_ENV] = ":".join([*paths, path])
