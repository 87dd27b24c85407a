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
  ``TRITON_PLUGIN_PATHS``, which is read while ``libtriton`` loads: ``failed``, saying so,
  unless the plugin's own code loaded the library already;
* ``libtriton`` not loaded yet, and the installed Triton is 3.9 or later: wait for it
  (``pending``) and hand over with ``extend_with`` the moment it is imported. The 3.9.0
  wheel does not load ``TRITON_PLUGIN_PATHS`` libraries when ``libtriton`` is imported
  (checked: nothing is mapped after import, ``ir.load_dialects`` or a pass-manager run),
  so the variable would report a plugin as handed over that Triton never loads;
* ``libtriton`` not loaded yet, older Triton: extend ``TRITON_PLUGIN_PATHS``, ``pending``
  until ``libtriton`` is imported.

A plugin is ``loaded`` only when its library is mapped into this process (:mod:`.mapped`:
the file's device and inode in ``/proc/self/maps``), and ``handed_over`` says so
(``extend_with; mapped (/proc/self/maps)``); an ``extend_with`` that returns, or a
``libtriton`` imported with the variable set, without the library mapped is ``failed``
(``load.plugin``). Where the table cannot be read (not Linux) a plugin handed over is
``loaded`` as Triton accepted it, ``handed_over`` ending ``not checked``.

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
from .mapped import is_mapped

if TYPE_CHECKING:
    from ..loading import PluginEntry
    from ..site import Distribution

__all__ = [
    "EXTEND_WITH", "EXTEND_WITH_SINCE", "LIBTRITON", "OWN_CODE", "PATHS_PENDING", "PENDING", "PLUGIN_PATHS_ENV",
    "PROOF", "UNCHECKED", "hand_over", "has_extend_with"
]

PLUGIN_PATHS_ENV = "TRITON_PLUGIN_PATHS"
#: Triton's extension module, for the default package (a renamed Triton has its own).
LIBTRITON = "triton._C.libtriton"
#: The first Triton release whose libtriton has the ``extend_with`` functions.
EXTEND_WITH_SINCE = (3, 9)
EXTEND_WITH, PENDING = "extend_with", "extend_with, when libtriton is imported"
PATHS_PENDING = f"{PLUGIN_PATHS_ENV}, read when libtriton is imported"
#: A plugin mapped with no hand-over of ours: its package loaded the library (Triton 3.8 and older).
OWN_CODE = "loaded by its own code"
#: What ``handed_over`` ends with: the proof that the library is in this process, or why none.
PROOF, UNCHECKED = "mapped (/proc/self/maps)", "not checked (/proc/self/maps or the file unreadable)"


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
        if libtriton is not None:
            _give(plugin, libtriton)
        elif _wait(plugin, has_extend_with(triton_version)):
            waiting.append(plugin)
    if waiting:

        def give_all(module: Any) -> None:
            for plugin in waiting:
                if plugin.state != PENDING_STATE:  # decided otherwise meanwhile
                    continue
                if plugin.handed_over == PENDING:
                    _give(plugin, module)
                else:  # libtriton has read TRITON_PLUGIN_PATHS: loaded, if it mapped the library
                    _settle(plugin, PLUGIN_PATHS_ENV, f"libtriton was imported with it in {PLUGIN_PATHS_ENV}")

        when_loaded("hand-over", give_all, package)


def has_extend_with(version: str | None) -> bool:
    """Whether a Triton of this version has ``extend_with`` (release, not the module)."""
    parts = (version or "").split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= EXTEND_WITH_SINCE
    except (ValueError, IndexError):
        return False


def _wait(plugin: PluginEntry, extend_with: bool) -> bool:
    """``pending`` until libtriton is imported: then handed over with ``extend_with``, or read
    from ``TRITON_PLUGIN_PATHS`` (set now). False when it failed instead."""
    try:
        if not extend_with:
            _add_plugin_path(plugin.file)
    except Exception as exc:  # a plugin that fails must not break import triton
        _fail(plugin, exc)
        return False
    plugin.state, plugin.handed_over = PENDING_STATE, PENDING if extend_with else PATHS_PENDING
    return True


def _give(plugin: PluginEntry, libtriton: Any) -> None:
    """Hand ``plugin`` to a loaded libtriton: ``extend_with``, or (an older Triton, whose
    ``TRITON_PLUGIN_PATHS`` was read already) nothing left to do but see whether the plugin's
    own code loaded it."""
    try:
        if hasattr(getattr(getattr(libtriton, "passes", None), "plugin", None), "extend_with"):
            _extend(libtriton, plugin.file)
            _settle(plugin, EXTEND_WITH, "extend_with returned")
            return
        mapped = is_mapped(plugin.file)
        if mapped:
            plugin.state, plugin.handed_over = LOADED, f"{OWN_CODE}; {PROOF}"
            return
        if mapped is None:
            plugin.handed_over = UNCHECKED
        raise LoadError(
            "plugin-api", plugin.file, "libtriton is already loaded and this Triton has no extend_with "
            f"({PLUGIN_PATHS_ENV} is only read while libtriton loads)"
        )
    except Exception as exc:  # a plugin that fails must not break import triton
        _fail(plugin, exc)


def _settle(plugin: PluginEntry, how: str, done: str) -> None:
    """After ``how`` handed ``plugin`` over: loaded only where its library is mapped into this
    process, the proof said in ``handed_over``; where that cannot be known, loaded as before."""
    mapped = is_mapped(plugin.file)
    if mapped is False:
        plugin.handed_over = how
        _fail(plugin, LoadError("plugin", plugin.file, f"{done}, but the library is not mapped in this process "
                                "(/proc/self/maps): Triton did not load it"))
        return
    plugin.state, plugin.handed_over = LOADED, f"{how}; {PROOF if mapped else UNCHECKED}"


def _fail(plugin: PluginEntry, exc: Exception) -> None:
    plugin.state = FAILED
    plugin.reason = reason_of(exc if isinstance(exc, LoadError) else LoadError("plugin", plugin.file, describe(exc)))


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
