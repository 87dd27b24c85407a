"""Triton's own plugin loading, guarded: a library the registry does not admit never loads.

The registry hands admitted plugins to Triton itself (:mod:`.plugins`), but other code can
load a library directly: a plugin package that registers itself from its own code
(``passes.plugin.extend_with(path)``, ``ir.extend_dialects_with(path)``,
``ir.builder.extend_with(path)``, Triton 3.9 on), or from a ``.pth`` file that puts it in
``TRITON_PLUGIN_PATHS`` before ``libtriton`` loads (older Tritons read the variable then).
A library built for another Triton is then ``dlopen``-ed and dies with SIGSEGV, even
though verification had already refused it.

With the registry active (policy ``strict`` or ``warn``):

* the three ``extend_with`` functions of ``libtriton`` are wrapped the moment it is
  imported; for a library that is not admitted they raise :class:`PluginRefused` (a
  ``RuntimeError``, as Triton's own refusals are) naming the reason, before ``dlopen``;
* ``TRITON_PLUGIN_PATHS`` is checked before ``triton/__init__`` runs (it loads
  ``libtriton``): under ``strict`` a library that is not admitted makes ``import triton``
  raise :class:`PluginPathRefused` (an ``ImportError``); under ``warn`` it is taken out of the
  variable, with a warning.

Not admitted: a plugin the registry rejected or excluded, or one whose trust the policy does
not admit; under ``strict`` also any library no verified manifest lists. Under ``warn`` a
library no manifest lists loads as Triton would load it (a legacy plugin).
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING, Any

from ..base import EXCLUDED, FAILED, OFF, REJECTED, STRICT, Reason
from ..site import same_file

if TYPE_CHECKING:
    from ..loading import Registry

__all__ = [
    "PLUGIN_PATHS_ENV", "PluginPathRefused", "PluginRefused", "check_plugin_paths", "guard", "refusal",
    "wrap_loaders"
]

PLUGIN_PATHS_ENV = "TRITON_PLUGIN_PATHS"


class PluginRefused(RuntimeError):
    """A plugin library Triton was asked to load is not admitted; it was not loaded."""

    def __init__(self, library: str, reason: Reason) -> None:
        super().__init__(f"plugin {library} not loaded: {reason.message} ({reason.code}: {reason.path})")
        self.library, self.reason = library, reason


class PluginPathRefused(ImportError):
    """``TRITON_PLUGIN_PATHS`` names a library that is not admitted (strict): ``import triton``
    fails before ``libtriton`` could load it."""

    def __init__(self, library: str, reason: Reason) -> None:
        super().__init__(f"{PLUGIN_PATHS_ENV} names {library}, which is not admitted: {reason.message} "
                         f"({reason.code}: {reason.path})")
        self.library, self.reason = library, reason


def refusal(path: str, registry: Registry) -> Reason | None:
    """Why the library at ``path`` must not load; None when it may."""
    from ..loading import policy as pol

    if registry.policy == OFF:
        return None
    entry = next((p for p in registry.plugins if same_file(p.file, path)), None)
    if entry is None:
        if registry.policy != STRICT:
            return None
        return Reason("policy.not-verified", path, "no verified manifest lists this library "
                      f"(policy {STRICT} loads only verified plugins)")
    if entry.trust == REJECTED or entry.state in (EXCLUDED, FAILED):
        return entry.reason or Reason("policy.not-verified", path, f"the registry {entry.state} it")
    if entry.trust not in pol.ADMITS[registry.policy]:
        return Reason("policy.not-verified", path, f"policy {registry.policy} does not admit a {entry.trust} plugin"
                      f"{': ' + entry.note if entry.note else ''}")
    return None


def guard(registry: Registry) -> None:
    """Wrap ``libtriton``'s loaders now, or the moment it is imported."""
    from .libtriton import when_loaded

    package = registry.discovery.package if registry.discovery else "triton"
    when_loaded("guard", lambda module: wrap_loaders(module, registry), package)


#: The wrappers installed in libtriton, which holds them only weakly (see :func:`wrap_loaders`).
_WRAPPERS: list[Any] = []


def wrap_loaders(libtriton: Any, registry: Registry) -> None:
    """``passes.plugin.extend_with``, ``ir.extend_dialects_with``, ``ir.builder.extend_with``
    (those this Triton has), each checking the library before the original loads it."""
    ir = getattr(libtriton, "ir", None)
    owners = [(getattr(getattr(libtriton, "passes", None), "plugin", None), "extend_with"),
              (ir, "extend_dialects_with"), (getattr(ir, "builder", None), "extend_with")]
    for owner, name in owners:
        original = getattr(owner, name, None)
        if original is None or hasattr(original, "__wrapped__"):
            continue
        checked = _checked(original, registry)
        _WRAPPERS.append(checked)
        # libtriton is a single-phase extension module: the interpreter keeps it past its final
        # collections, so it holds the wrapper weakly (a proxy; this module holds it). Held
        # strongly, the wrapper's globals would keep every module alive through those
        # collections (~4 ms at each exit). After this module is gone a call raises ReferenceError.
        proxy = weakref.proxy(checked)
        # ir.builder is a class: a plain function there would bind the instance as the path
        setattr(owner, name, staticmethod(proxy) if isinstance(owner, type) else proxy)


def _checked(original: Any, registry: Registry) -> Any:
    def extend_with(path: Any, *args: Any, **kwargs: Any) -> Any:
        library = os.fspath(path)
        reason = refusal(library, registry)
        if reason is not None:
            raise PluginRefused(library, reason)
        return original(path, *args, **kwargs)

    extend_with.__wrapped__ = original  # type: ignore[attr-defined]
    return extend_with


def check_plugin_paths(registry: Registry) -> None:
    """Before ``libtriton`` loads: every library in ``TRITON_PLUGIN_PATHS`` must be admitted
    (strict: raise; warn: the others are taken out of the variable, with a warning)."""
    text = os.environ.get(PLUGIN_PATHS_ENV, "")
    paths = [p for p in text.split(":") if p]
    refused = [(p, r) for p in paths if (r := refusal(p, registry)) is not None]
    if not refused:
        return
    if registry.policy == STRICT:
        raise PluginPathRefused(*refused[0])
    from ..loading import emit

    gone = {p for p, _ in refused}
    os.environ[PLUGIN_PATHS_ENV] = ":".join(p for p in paths if p not in gone)
    for path, reason in refused:
        emit(f"{PLUGIN_PATHS_ENV}: {path} taken out, not admitted: {reason.message} ({reason.code})")
