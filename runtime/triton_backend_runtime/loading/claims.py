"""What each admitted backend and plugin claims, gathered for the conflict rule
(:mod:`.conflicts`), and whether the rule could exclude anything at all: the common case
(nothing claimed twice) skips the rule, its import and the pins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .entries import Entry, PluginEntry

__all__ = ["claim_keys", "claim_of", "may_conflict"]


def claim_of(key: int, item: Entry | PluginEntry, core: bool) -> Any:
    """``item`` as the conflict rule sees it (``key``: its index among the items)."""
    from .conflicts import Claim

    dist = item.dist
    order = dist.order if dist else 1 << 30
    dist_key = dist.key if dist else ""
    if isinstance(item, Entry):
        return Claim(key, item.name, item.trust, order, dist_key, item.label(), targets=tuple(item.targets),
                     core=core)
    terms = item.terms
    return Claim(key, item.path, item.trust, order, dist_key, item.label(), exports=tuple(item.exports),
                 passes=tuple(terms.passes) if terms else (), dialects=tuple(terms.dialects) if terms else (),
                 ops=tuple(terms.ops) if terms else (), core=core)


def claim_keys(items: list[Entry | PluginEntry], declared: Sequence[tuple[str, tuple[str, ...]]] = (),
               kinds: set[str] | None = None) -> set[tuple[str, str]]:
    """Every ``(kind, name)`` the items claim (the kinds of :mod:`.conflicts`; only ``kinds``
    when given), and the ``(backend name, targets)`` pairs of ``declared``."""
    keys: set[tuple[str, str]] = set()
    for name, targets in declared:
        keys.add(("backend", name))
        keys.update(("target", t) for t in targets)
    for item in items:
        if isinstance(item, Entry):
            keys.add(("backend", item.name))
            keys.update(("target", t) for t in item.targets)
            continue
        _, exports, passes, dialects, ops = _library(item)
        for kind, names in (("symbol", exports), ("pass", passes), ("dialect", dialects), ("op", ops)):
            if names and (kinds is None or kind in kinds):
                keys.update((kind, n) for n in names)
    return keys


def may_conflict(backends: list[Entry], plugins: list[PluginEntry]) -> bool:
    """Whether :func:`.conflicts.resolve` could exclude anything among the admitted: some name
    is claimed twice (the core's names claimed by others are looked for apart). One
    distribution's copies of one library (the same exports, passes, dialects and ops: a wheel
    holds no symlinks) count once, as the rule counts them: triton 3.9.0 bundles
    ``libMLIRDialectPlugin.so`` and ``.so.24.0git``, and its warm import then skips the rule."""
    if _repeats([e.name for e in backends]) or _repeats([t for e in backends for t in e.targets]):
        return True
    libraries = list(dict.fromkeys(_library(p) for p in plugins))
    return any(_repeats([name for library in libraries for name in library[kind]]) for kind in range(1, 5))


def _library(plugin: PluginEntry) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What the conflict rule compares of a plugin (``conflicts._same_library``), its
    distribution first: exports, passes, dialects, ops."""
    terms = plugin.terms
    if terms is None:
        return plugin.dist.key, tuple(plugin.exports), (), (), ()
    return plugin.dist.key, tuple(plugin.exports), tuple(terms.passes), tuple(terms.dialects), tuple(terms.ops)


def _repeats(items: list[str]) -> bool:
    return len(set(items)) != len(items)
