"""The registry: one per process, it decides which backends and plugins Triton gets.

Lifecycle of a backend (``Entry.state``)::

    discovered -> verified | unverified | legacy | rejected      (verify)
               -> loaded | failed | excluded                     (load: policy, conflicts, import)
               -> pending -> loaded | failed                     (plugins waiting for libtriton)
               -> selected                                       (the driver Triton picked)

``Entry.trust`` keeps the verification outcome after the state moves on. ``legacy`` is a
backend whose distribution has no manifest: it is loaded exactly as Triton 3.9 loads it
(under ``warn``) and marked legacy in every report, never dropped silently.

Conflicts are resolved by one rule, applied to the backends and plugins the policy admits:

    rank: verified < unverified < legacy; then the sys.path entry (earlier wins, as Python's
    own import shadowing); then the distribution's normalised name; then discovery order.

* Two distributions declaring the same backend name: the best by this rule keeps it; the
  others are excluded with a ``conflict.name`` reason naming the winner. (Triton 3.9 lets
  the last entry point win, silently.)
* Two backends claiming the same target in their manifests: the best keeps the target;
  the other backend is excluded (``conflict.target``).
* Plugin libraries exporting the same strong symbol (other than the plugin API entry
  points every plugin defines): the best loads, the other is excluded (``conflict.symbol``).

All public methods take one re-entrant lock: two threads importing Triton at once load
each backend once. ``verify`` and ``load`` are idempotent; :meth:`Registry.reset` forgets
everything (for tests).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import policy as pol
from .cache import REHASH_ENV, VerifyCache, cache_file, context_digest, stat_identity
from .discovery import Candidate, Discovery, Distribution, discover
from .errors import ConflictError, LoadError, PolicyError, TrustError

Loader = Callable[[str, str], Any]
_RANK = {"verified": 0, "unverified": 1, "legacy": 2}


class BackendWarning(UserWarning):
    """A backend or plugin was excluded or failed; the message says which and why."""


@dataclass
class Entry:
    """One backend: where it came from, what verification said, where it is now."""

    name: str
    package: str
    source: str
    dist: Distribution | None
    order: int
    trust: str = "discovered"
    state: str = "discovered"
    reason: dict[str, str] | None = None
    note: str = ""
    signers: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    backend: Any = None
    active: bool | None = None
    inactive_reason: str = ""

    def where(self) -> str:
        return self.dist.dist_info if self.dist else self.package

    def label(self) -> str:
        return self.dist.label() if self.dist else "(no distribution)"


@dataclass
class PluginEntry:
    dist: Distribution
    path: str
    file: str
    api: str
    name: str | None
    trust: str
    exports: list[str]
    state: str = "discovered"
    reason: dict[str, str] | None = None
    signers: list[str] = field(default_factory=list)
    handed_over: str = ""
    note: str = ""


def _rule(item: Entry | PluginEntry, order: int) -> tuple[int, int, str, int]:
    dist = item.dist
    return (_RANK.get(item.trust, 9), dist.order if dist else 1 << 30, dist.key if dist else "", order)


class Registry:
    """State shared by Triton's import, ``doctor`` and tests; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.policy, complaint = pol.current()
            self.problems: list[dict[str, str]] = []
            if complaint:
                self.problems.append(PolicyError("value", pol.POLICY_ENV, complaint).as_dict())
            self.discovery: Discovery | None = None
            self.entries: list[Entry] = []
            self.plugins: list[PluginEntry] = []
            self.verdicts: dict[str, dict[str, Any]] = {}
            self.trust_sources: list[str] = []
            self.hashed_bytes = 0
            self.result: dict[str, Any] | None = None
            self.used_by_triton = False
            self.manifest_digest: str | None = None

    # -- verify ---------------------------------------------------------------------------

    def verify(self, *, rehash: bool = False, backends_dir: str | None = None) -> None:
        """Discover and verify everything once; later calls return at once."""
        import os

        with self._lock:
            if self.discovery is not None:
                return
            found = discover(backends_dir=backends_dir)
            rehash = rehash or os.environ.get(REHASH_ENV, "") == "1"
            self.verdicts = self._verdicts(found, rehash)
            self.entries = [self._entry(c) for c in found.candidates]
            self.plugins = [p for d in found.distributions for p in self._plugins(d)]
            self.discovery = found

    def _verdicts(self, found: Discovery, rehash: bool) -> dict[str, dict[str, Any]]:
        from .trustpaths import trust_sources

        with_manifest = [d for d in found.distributions if d.manifest]
        if not with_manifest:
            return {}
        self.trust_sources = trust_sources()
        triton = found.triton
        libtriton = _libtriton(triton)
        extra = [triton.label() if triton else "-", libtriton or "-", str(stat_identity(libtriton or ""))]
        context = context_digest(self.trust_sources, extra)
        cache = VerifyCache(cache_file(), enabled=not rehash)
        verdicts: dict[str, dict[str, Any]] = {}
        ctx = None
        for dist in with_manifest:
            cached = cache.lookup(dist.dist_info, context)
            if cached is None:
                ctx = ctx or self._context(triton, libtriton, cache, rehash)
                from .verify import verify_distribution

                verdict = verify_distribution(dist, ctx)
                cached = asdict(verdict)
                cache.store(dist.dist_info, context, cached, [dist.dist_info, *verdict.files])
            verdicts[dist.dist_info] = cached
        if ctx is not None:
            cache.hashes = ctx.hashes.entries
            self.hashed_bytes = ctx.hashes.hashed_bytes
        cache.save()
        return verdicts

    def _context(self, triton: Distribution | None, libtriton: str | None, cache: VerifyCache, rehash: bool) -> Any:
        from .trust import load_trust_store
        from .verify import Context, HashCache

        store, problems = load_trust_store()
        self.problems += [p.as_dict() for p in problems]
        return Context(store, triton.version if triton else None, libtriton, HashCache(cache.hashes, rehash))

    def _entry(self, candidate: Candidate) -> Entry:
        entry = Entry(candidate.name, candidate.package, candidate.source, candidate.dist, candidate.order)
        verdict = self.verdicts.get(candidate.dist.dist_info) if candidate.dist else None
        if verdict is None:
            entry.trust = entry.state = "legacy"
            entry.note = "no manifest (a legacy wheel): Triton's own loading, nothing verified"
            return entry
        entry.trust = entry.state = verdict["status"]
        entry.reason, entry.note, entry.signers = verdict["problem"], verdict["note"], verdict["signers"]
        claims = {c["name"]: c for c in verdict["backends"]}
        claim = claims.get(candidate.name)
        if entry.trust != "rejected" and (claim is None or claim["package"] != candidate.package):
            entry.trust = entry.state = "rejected"
            signed = f"signed: {claim['package']}" if claim else "the signed manifest declares no such backend"
            entry.reason = PolicyError(
                "entry-point", entry.where(), f"backend {candidate.name} = {candidate.package} is not the one "
                f"the manifest vouches for ({signed})"
            ).as_dict()
        entry.targets = list(claim["targets"]) if claim else []
        return entry

    def _plugins(self, dist: Distribution) -> list[PluginEntry]:
        verdict = self.verdicts.get(dist.dist_info)
        if not verdict:
            return []
        return [
            PluginEntry(
                dist, p["path"], p["file"], p["api"], p["name"], verdict["status"], p["exports"],
                verdict["status"], verdict["problem"], verdict["signers"], note=verdict["note"],
            )
            for p in verdict["plugins"]
        ]

    # -- load -----------------------------------------------------------------------------

    def load(self, loader: Loader, backends_dir: str | None = None) -> dict[str, Any] | None:
        """The backend table for Triton, or None when policy is ``off`` (Triton decides)."""
        with self._lock:
            if self.policy == pol.OFF:
                return None
            if self.result is not None:
                return self.result
            self.verify(backends_dir=backends_dir)
            admitted = self._admit(self.entries)
            self._resolve_names(admitted)
            self._resolve_targets([e for e in admitted if e.state not in ("excluded",)])
            result: dict[str, Any] = {}
            for entry in sorted(self.entries, key=lambda e: e.order):
                if entry in admitted and entry.state != "excluded":
                    self._load_one(entry, loader, result)
            self._resolve_plugins(self._admit(self.plugins))
            self._warn()
            self.result = result
            return result

    def _admit(self, items: list[Any]) -> list[Any]:
        allowed = pol.ADMITS[self.policy]
        admitted = []
        for item in items:
            if item.trust in allowed:
                admitted.append(item)
            elif item.state != "excluded":
                item.state = "excluded"
                if item.reason is None or item.trust != "rejected":
                    why = item.reason["message"] if item.reason else item.note or item.trust
                    item.reason = PolicyError(
                        "not-verified", _where(item), f"policy {self.policy} admits only "
                        f"{', '.join(sorted(allowed))}; this one is {item.trust}: {why}"
                    ).as_dict()
        return admitted

    def _resolve_names(self, admitted: list[Entry]) -> None:
        groups: dict[str, list[Entry]] = {}
        for entry in admitted:
            groups.setdefault(entry.name, []).append(entry)
        for name, group in groups.items():
            winner = min(group, key=lambda e: _rule(e, e.order))
            for loser in group:
                if loser is not winner:
                    self._exclude(loser, "name", f"backend {name!r} is also declared by {winner.label()}, "
                                  "which wins (rule: verified > unverified > legacy, then earlier on sys.path)")

    def _resolve_targets(self, admitted: list[Entry]) -> None:
        owner: dict[str, Entry] = {}
        for entry in sorted(admitted, key=lambda e: _rule(e, e.order)):
            taken = [t for t in entry.targets if t in owner]
            if taken:
                first = owner[taken[0]]
                self._exclude(entry, "target", f"target {taken[0]!r} is already claimed by backend "
                              f"{first.name!r} of {first.label()}, which wins (rule: verified first, then sys.path)")
                continue
            for target in entry.targets:
                owner[target] = entry

    def _resolve_plugins(self, admitted: list[PluginEntry]) -> None:
        owner: dict[str, PluginEntry] = {}
        keep: list[PluginEntry] = []
        for _index, plugin in sorted(enumerate(admitted), key=lambda p: _rule(p[1], p[0])):
            clash = [s for s in plugin.exports if s in owner]
            if clash:
                self._exclude(plugin, "symbol", f"exports {clash[0]!r}, already exported by plugin "
                              f"{owner[clash[0]].path} of {owner[clash[0]].dist.label()}, which wins")
                continue
            owner.update(dict.fromkeys(plugin.exports, plugin))
            keep.append(plugin)
        from .plugins import hand_over

        triton = self.discovery.triton if self.discovery else None
        hand_over(keep, triton.version if triton else None)

    def _exclude(self, item: Entry | PluginEntry, code: str, detail: str) -> None:
        item.state = "excluded"
        item.reason = ConflictError(code, _where(item), detail).as_dict()

    def _load_one(self, entry: Entry, loader: Loader, result: dict[str, Any]) -> None:
        try:
            entry.backend = loader(entry.name, entry.package)
        except Exception as exc:  # a broken backend must never break the others
            entry.state = "failed"
            entry.reason = LoadError("import", entry.package, _describe(exc)).as_dict()
            return
        entry.state = "loaded"
        result[entry.name] = entry.backend

    def _warn(self) -> None:
        items: list[Entry | PluginEntry] = [*self.entries, *self.plugins]
        for item in items:
            if item.state in ("excluded", "failed") and item.reason:
                kind = "backend" if isinstance(item, Entry) else "plugin"
                name = item.name if isinstance(item, Entry) else item.path
                dist = item.dist.label() if item.dist else "no distribution"
                warnings.warn(
                    f"Triton {kind} {name} ({dist}) {item.state}: {item.reason['path']}: {item.reason['message']}",
                    BackendWarning,
                    stacklevel=3,
                )

    # -- select ---------------------------------------------------------------------------

    def mark_selected(self, driver_class: type) -> None:
        with self._lock:
            for entry in self.entries:
                if entry.backend is not None and getattr(entry.backend, "driver", None) is driver_class:
                    entry.state = "selected"

    # -- report ---------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """Everything, as plain JSON-able data: the ``list --json`` document."""
        with self._lock:
            return {
                "policy": self.policy,
                "used_by_triton": self.used_by_triton,
                "discovery": "in-tree" if self.discovery and self.discovery.in_tree else "entry-points",
                "triton": self.discovery.triton.label() if self.discovery and self.discovery.triton else None,
                "trust_sources": self.trust_sources,
                "cache": cache_file(),
                "manifest_digest": self.manifest_digest,
                "problems": self.problems,
                "backends": [_backend_row(e) for e in self.entries],
                "plugins": [_plugin_row(p) for p in self.plugins],
            }


def _where(item: Entry | PluginEntry) -> str:
    return item.where() if isinstance(item, Entry) else item.file


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        text += f" (caused by {type(cause).__name__}: {cause})"
    return text


def _dist_row(dist: Distribution | None) -> dict[str, Any]:
    if dist is None:
        return {"distribution": None, "version": None, "dist_info": None, "manifest": None}
    return {"distribution": dist.name, "version": dist.version, "dist_info": dist.dist_info, "manifest": dist.manifest}


def _backend_row(e: Entry) -> dict[str, Any]:
    return {
        "name": e.name, "package": e.package, "source": e.source, **_dist_row(e.dist),
        "trust": e.trust, "state": e.state, "active": e.active, "signers": e.signers,
        "targets": e.targets, "note": e.note, "reason": e.reason,
    }


def _plugin_row(p: PluginEntry) -> dict[str, Any]:
    return {
        "path": p.path, "file": p.file, "api": p.api, "name": p.name, **_dist_row(p.dist),
        "trust": p.trust, "state": p.state, "signers": p.signers, "handed_over": p.handed_over,
        "reason": p.reason,
    }


def _libtriton(triton: Distribution | None) -> str | None:
    import os

    if triton is None:
        return None
    path = os.path.join(triton.root, "triton", "_C", "libtriton.so")
    return path if os.path.isfile(path) else None


_REGISTRY = Registry()


def get() -> Registry:
    """The process-wide registry."""
    return _REGISTRY


def reset() -> None:
    """Forget everything (tests): the next load discovers and verifies again."""
    _REGISTRY.reset()


__all__ = ["BackendWarning", "Entry", "PluginEntry", "Registry", "TrustError", "get", "reset"]
