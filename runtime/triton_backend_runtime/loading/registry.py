"""The registry: one per process, it decides which backends and plugins Triton gets.

Lifecycle of a backend (``Entry.state``, see :mod:`.vocab`)::

    discovered -> verified | unverified | legacy | rejected      (verify)
               -> loaded | failed | excluded                     (admit, resolve, load)
               -> pending -> loaded | failed                     (plugins waiting for libtriton)
               -> selected                                       (the driver Triton picked)

``Entry.trust`` keeps the verification outcome after the state moves on. ``legacy`` is a
backend whose distribution has no manifest: it is loaded exactly as Triton 3.9 loads it
(under ``warn``) and marked legacy in every report, never dropped silently.

The visible order: discover, verify, admit (policy), resolve (:mod:`.conflicts`, a pure
function), locate (a backend whose package would be imported from anywhere but the
verified location is excluded), load, hand over. All public methods take one re-entrant
lock: two threads importing Triton at once load each backend once. ``verify`` and
``load`` are idempotent; :meth:`Registry.reset` forgets everything (for tests).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any

from ..base import (
    BAD_STATES,
    EXCLUDED,
    FAILED,
    LEGACY,
    LOADED,
    OFF,
    REJECTED,
    SELECTED,
    VERIFIED,
    CacheError,
    ConflictError,
    LoadError,
    PolicyError,
    Reason,
    TrustError,
    VerifyError,
    describe,
    reason_of,
    short_switch_interval,
)
from ..site import (
    DEFAULT_PACKAGE,
    Candidate,
    Discovery,
    Distribution,
    core_version,
    discover,
    locate_package,
    same_file,
    stat_identity,
)
from ..verification import REHASH_ENV, Verdict, VerifyCache, cache_file, context_digest
from . import policy as pol

if TYPE_CHECKING:  # the report's rows are made only for doctor and list, never at import
    from .report import Report
from .claims import claim_keys, claim_of, may_conflict
from .entries import NEVER_SERVED, BackendWarning, Entry, Loader, Plan, PluginEntry


class Registry:
    """State shared by Triton's import, ``doctor`` and tests; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.policy, complaint = pol.current()
            self.problems: list[Reason] = []
            self.notes: list[Reason] = []
            if complaint:
                self.problems.append(reason_of(PolicyError("value", pol.POLICY_ENV, complaint)))
            if f"{__package__}.hookorder" in sys.modules:  # loaded only where Triton came before the hook
                from .hookorder import FOUND

                self.problems += [found.reason() for found in FOUND]
            self.discovery: Discovery | None = None
            self.entries: list[Entry] = []
            self.plugins: list[PluginEntry] = []
            self.verdicts: dict[str, Verdict] = {}
            self.trust_sources: list[str] = []
            self.hashed_bytes = 0
            self.result: dict[str, Any] | None = None
            self.plan: Plan | None = None
            #: Sources of verified distributions (path -> the identity they were verified with)
            #: and their top-level packages: the Triton layer runs them as verified (.bytecode).
            self.verified_sources: dict[str, list[object]] = {}
            self.verified_tops: set[str] = set()
            self.used_by_triton = False
            self.manifest_digest: str | None = None
            #: Why the Triton core did not verify (set by :mod:`.core` before triton/__init__ runs).
            self.core: Reason | None = None
            #: Two installed distributions claiming the imported triton/__init__.py (.ownership).
            self.core_overlap: Any = None
            #: Each ``libtriton.so`` a verified manifest lists, with the identity it was hashed
            #: with (:func:`.verdictcache.identity`): what Triton loads is checked against it (.core).
            self.libtriton_verified: dict[str, list[object]] = {}

    # -- verify ---------------------------------------------------------------------------

    def verify(self, *, rehash: bool = False, backends_dir: str | None = None, in_tree: bool | None = None,
               package: str | None = None) -> None:
        """Discover and verify everything once; later calls return at once. ``in_tree``: the
        Triton scans its backend directories (3.0-3.3 always; later ones with
        TRITON_BACKENDS_IN_TREE=1, the default when None). ``package``: the Triton package
        (default: the one ``backends_dir`` belongs to, else ``triton``)."""
        with self._lock:
            if self.discovery is not None:
                return
            found = discover(backends_dir=backends_dir, in_tree=in_tree, package=package)
            self._contested_core(found)
            rehash = rehash or os.environ.get(REHASH_ENV, "") == "1"
            with short_switch_interval():  # hashing threads beside the manifest's decoding
                self.verdicts = self._verdicts(found, rehash)
            self.entries = [self._entry(c) for c in found.candidates]
            self._legacy_floors()
            self.plugins = [p for d in found.distributions for p in self._plugins(d)]
            self._check_contracts(self.plugins, triton_version(found.triton, found.package))
            self.discovery = found

    def _contested_core(self, found: Discovery) -> None:
        """Two RECORDs claim the triton/__init__.py that is imported: an install over another."""
        if len(found.core_claims) < 2:
            return
        from ..site import core_overlap

        self.core_overlap = core_overlap(found.core_claims)
        if self.core_overlap is not None:
            self.problems.append(self.core_overlap.reason(found.core_claims[0].dist_info))

    def _legacy_floors(self) -> None:
        """A version floor holds for releases without a manifest too (a downgrade to an
        unsigned release is still a rollback); read only when a floor is configured."""
        from ..trust import trust_sources

        legacy = [e for e in self.entries if e.trust == LEGACY and e.dist is not None]
        if not legacy or not any(os.path.basename(p) == "min-versions" for p in trust_sources()):
            return
        from ..trust import check_floor, load_trust_store

        store, _ = load_trust_store()
        for entry in legacy:
            assert entry.dist is not None
            try:
                check_floor(store, entry.dist.name, entry.dist.version, entry.dist.dist_info)
            except TrustError as exc:
                entry.trust = entry.state = REJECTED
                entry.reason = reason_of(exc)

    def _verdicts(self, found: Discovery, rehash: bool) -> dict[str, Verdict]:
        from ..trust import trust_sources

        with_manifest = [d for d in found.distributions if d.manifest]
        if not with_manifest:
            return {}
        self.trust_sources = trust_sources()
        libtriton = libtriton_path(found.triton, found.package)
        triton = found.triton
        extra = [triton.label() if triton else "-", libtriton or "-", str(stat_identity(libtriton or "")),
                 found.package]
        context = context_digest(self.trust_sources, extra)
        cache = VerifyCache(cache_file(), read=not rehash)
        verdicts: dict[str, Verdict] = {}
        ctx = None
        core = found.triton.dist_info if found.triton else None
        # The core first: its hashing then overlaps its own manifest's decoding, whatever sorts before it.
        for dist in sorted(with_manifest, key=lambda d: d.dist_info != core):
            verdict = cache.lookup(dist.dist_info, context)
            if verdict is None:
                ctx = ctx or self._context(found, libtriton, cache, rehash, dist)
                from ..verification import verify_distribution

                verdict = _overwritten(dist) or verify_distribution(dist, ctx)
                cache.store(dist.dist_info, context, verdict, ctx.hashes.taken)
            verdicts[dist.dist_info] = verdict
        if ctx is not None:
            ctx.hashes.close()
            cache.keep_hashes(ctx.hashes.entries)
            self.hashed_bytes = ctx.hashes.hashed_bytes
        cache.save()
        self.notes += [reason_of(n) for n in cache.notes]
        if any(v.lent for v in verdicts.values()):  # an add-on's files inside another's packages
            from .lending import settle

            verdicts = settle(verdicts, found.triton)
        self.verified_sources, self.verified_tops = _verified_sources(with_manifest, verdicts, cache)
        self.libtriton_verified = _verified_libtriton(with_manifest, verdicts, cache)
        return verdicts

    def _context(self, found: Discovery, libtriton: str | None, cache: VerifyCache, rehash: bool,
                 first: Distribution) -> Any:
        """What verification needs; ``first``'s files start hashing before anything else is
        loaded (the trust store, the verifier's modules): its largest file bounds a cold start."""
        from ..site import HashCache, hash_workers
        from ..verification import hash_ahead

        hashes, workers = HashCache(cache.hash_entries(), rehash), hash_workers()
        hash_ahead(first, hashes, workers)
        from ..trust import load_trust_store
        from ..verification import Context

        store, problems = load_trust_store()
        self.problems += [reason_of(p) for p in problems]
        return Context(store, triton_version(found.triton, found.package), libtriton, hashes, workers,
                       found.package, ahead=frozenset([first.dist_info]))

    def _entry(self, candidate: Candidate) -> Entry:
        verdict = self.verdicts.get(candidate.dist.dist_info) if candidate.dist else None
        entry = Entry(candidate.name, candidate.package, candidate.source, candidate.dist, candidate.order, verdict)
        if verdict is None:
            entry.trust = entry.state = LEGACY
            entry.note = "no manifest (a legacy wheel): Triton's own loading, nothing verified"
            return entry
        entry.trust = entry.state = verdict.status
        entry.reason, entry.note = verdict.problem, verdict.note
        claim = next((c for c in verdict.backends if c.name == candidate.name), None)
        if entry.trust != REJECTED and (claim is None or claim.package != candidate.package):
            entry.trust = entry.state = REJECTED
            signed = f"signed: {claim.package}" if claim else "the signed manifest declares no such backend"
            entry.reason = reason_of(PolicyError(
                "entry-point", entry.where(), f"backend {candidate.name} = {candidate.package} is not the one "
                f"the manifest vouches for ({signed})"
            ))
        entry.targets = list(claim.targets) if claim else []
        if entry.trust != REJECTED and claim is not None and claim.problem is not None:
            entry.trust = entry.state = REJECTED  # its signers may not declare this name
            entry.reason = claim.problem
        return entry

    def _plugins(self, dist: Distribution) -> list[PluginEntry]:
        verdict = self.verdicts.get(dist.dist_info)
        if verdict is None:
            return []
        return [
            PluginEntry(dist, p, verdict, trust=REJECTED if p.problem else verdict.status,
                        state=REJECTED if p.problem else verdict.status, reason=p.problem or verdict.problem,
                        note=verdict.note)
            for p in verdict.plugins
        ]

    def _check_contracts(self, plugins: list[PluginEntry], triton: str | None) -> None:
        """Each plugin's contract against the installed Triton, before anything is loaded. A
        broken contract is the cause of missing libtriton symbols, so it is the reason shown."""
        checked = [p for p in plugins if p.terms is not None
                   and (p.trust != REJECTED or (p.reason is not None and p.reason.code in _SYMPTOMS))]
        if not checked:
            return
        from ..verification import check_terms

        for plugin in checked:
            assert plugin.terms is not None
            try:
                check_terms(plugin.terms, triton, plugin.file)
            except VerifyError as exc:
                then = f" (so: {plugin.reason.code}: {plugin.reason.message[:300]})" if plugin.reason else ""
                plugin.trust = plugin.state = REJECTED
                plugin.reason = Reason(exc.code, exc.path, exc.detail + then)

    def missing_required(self) -> list[str]:
        """Why compiling must stop: each plugin with ``on-failure = "fail"`` that is not loaded."""
        with self._lock:
            return [
                f"plugin {p.terms.name if p.terms and p.terms.name else p.path} ({p.label()}) declares "
                f"on-failure = \"fail\" and is {p.state}: {p.reason.code if p.reason else '-'}: "
                f"{p.reason.message if p.reason else p.handed_over or p.note}"
                for p in self.plugins if p.required() and p.state in BAD_STATES
            ]

    # -- load -----------------------------------------------------------------------------

    def load(self, loader: Loader, backends_dir: str | None = None, in_tree: bool | None = None
             ) -> Plan | None:
        """Discover, verify, admit, resolve, locate and load: the plan for the Triton layer to
        act on (:mod:`..triton.integration`), or None when policy is ``off`` (Triton decides).
        Decided once: later calls return the same plan."""
        with self._lock:
            if self.policy == OFF:
                return None
            if self.plan is not None:
                return self.plan
            self.verify(backends_dir=backends_dir, in_tree=in_tree)
            self._rescan(in_tree, backends_dir)
            backends = self._admit(self.entries)
            plugins = self._admit(self.plugins)
            self._resolve(backends, plugins)
            result: dict[str, Any] = {}
            for entry in sorted(backends, key=lambda e: e.order):
                if entry.state != EXCLUDED and self._located(entry):
                    self._load_one(entry, loader, result)
            triton = self.discovery.triton if self.discovery else None
            package = self.discovery.package if self.discovery else DEFAULT_PACKAGE
            self._warn()
            self.result = result
            self.plan = Plan(result, [p for p in plugins if p.state != EXCLUDED], triton_version(triton, package),
                             triton)
            return self.plan

    def _rescan(self, in_tree: bool | None, backends_dir: str | None) -> None:
        """Verified before Triton's discovery ran (the core check), under the environment's
        discovery mode; a Triton that always scans its directories (3.0-3.3) then gets its
        candidates again, that way. Verdicts do not depend on it and are kept."""
        found = self.discovery
        if in_tree is None or found is None or found.in_tree == in_tree:
            return
        self.discovery = discover(backends_dir=backends_dir, in_tree=in_tree)
        self.entries = [self._entry(c) for c in self.discovery.candidates]
        self._legacy_floors()

    def _admit(self, items: list[Any]) -> list[Any]:
        allowed = pol.ADMITS[self.policy]
        admitted = []
        for item in items:
            if item.trust in allowed:
                admitted.append(item)
            elif item.state != EXCLUDED:
                item.state = EXCLUDED
                if item.reason is None or item.trust != REJECTED:
                    why = item.reason.message if item.reason else item.note or item.trust
                    item.reason = reason_of(PolicyError(
                        "not-verified", item.where(), f"policy {self.policy} admits only "
                        f"{', '.join(sorted(allowed))}; this one is {item.trust}: {why}"
                    ))
        return admitted

    def _resolve(self, backends: list[Entry], plugins: list[PluginEntry]) -> None:
        admitted: list[Entry | PluginEntry] = [*backends, *plugins]
        others = claim_keys([i for i in admitted if not self._is_core(i)])
        core = self._core_claims(others) if others else {}
        if not core and not may_conflict(backends, plugins):
            return  # nothing can conflict: the common case skips the rule, its import and the pins
        from ..trust import load_pins
        from .conflicts import resolve

        pinned, problems = load_pins()
        self.problems += [r for r in map(reason_of, problems) if r not in self.problems]
        pins = {key: pin.dist for key, pin in pinned.items() if pin.dist is not None}
        items: list[Entry | PluginEntry] = [*backends, *plugins]
        claims = [claim_of(i, item, self._is_core(item)) for i, item in enumerate(items)]
        for exclusion in resolve(claims[: len(backends)], claims[len(backends):], core, pins):
            item = items[exclusion.key]
            item.state = EXCLUDED
            item.reason = reason_of(ConflictError(exclusion.code, item.where(), exclusion.detail))

    def _is_core(self, item: Entry | PluginEntry) -> bool:
        triton = self.discovery.triton if self.discovery else None
        return triton is not None and item.dist is not None and item.dist.dist_info == triton.dist_info

    def _core_claims(self, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Which of ``wanted`` the Triton core claims, whatever became of its claim (excluded
        or not), each with the core's label: the core's names are its own (:mod:`.conflicts`).
        Only the kinds asked for are gathered (a bundled plugin's thousands of exports are not,
        unless another plugin's exports are in question)."""
        triton = self.discovery.triton if self.discovery else None
        if triton is None:
            return {}
        everything: list[Entry | PluginEntry] = [*self.entries, *self.plugins]
        items = [i for i in everything if self._is_core(i)]
        verdict = self.verdicts.get(triton.dist_info)
        declared = [(b.name, tuple(b.targets)) for b in verdict.backends] if verdict else []
        claimed = claim_keys(items, declared, {kind for kind, _ in wanted})
        return dict.fromkeys(sorted(claimed & wanted), triton.label())

    def _located(self, entry: Entry) -> bool:
        """Whether ``entry.package`` imports from the location that was verified."""
        if entry.dist is None or entry.trust == LEGACY:
            return True
        expected = os.path.join(entry.dist.root, *entry.package.split("."))
        try:
            found = locate_package(entry.package)
        except Exception as exc:  # a finder's failure: where it would be imported from is unknown
            entry.state = EXCLUDED
            entry.reason = reason_of(VerifyError(
                "shadowed", entry.package, f"cannot tell where {entry.package} would be imported from "
                f"({describe(exc)}), so not whether it is the verified {expected}"
            ))
            return False
        if found is not None and same_file(found, expected):
            return True
        entry.state = EXCLUDED
        entry.reason = reason_of(VerifyError(
            "shadowed", found or entry.package, f"{entry.package} would be imported from {found or 'nowhere'}, "
            f"not from the verified {expected} (an earlier sys.path entry shadows it)"
        ))
        return False

    def _load_one(self, entry: Entry, loader: Loader, result: dict[str, Any]) -> None:
        try:
            entry.backend = loader(entry.name, entry.package)
        except Exception as exc:  # a broken backend must never break the others
            entry.state = FAILED
            entry.reason = reason_of(LoadError("import", entry.package, describe(exc)))
            return
        entry.state = LOADED
        result[entry.name] = entry.backend

    def _warn(self) -> None:
        for problem in self.problems:
            emit(f"{problem.path}: {problem.message}")
        items: list[Entry | PluginEntry] = [*self.entries, *self.plugins]
        for item in items:
            if item.state in (EXCLUDED, FAILED) and item.reason and not self.never_served(item):
                kind, name = ("backend", item.name) if isinstance(item, Entry) else ("plugin", item.path)
                emit(f"Triton {kind} {name} ({item.label()}) {item.state}: {item.reason.path}: {item.reason.message}"
                     + _failure_policy(item))

    def never_served(self, item: Entry | PluginEntry) -> bool:
        """A plugin bundled with the Triton core that this core's own libtriton cannot serve
        (:data:`.entries.NEVER_SERVED`): never handed over, never loaded, and nothing the user
        can change makes it load, so no warning at every import (``doctor`` notes it)."""
        return (isinstance(item, PluginEntry) and self._is_core(item) and item.reason is not None
                and item.reason.code in NEVER_SERVED)

    # -- select ---------------------------------------------------------------------------

    def mark_selected(self, driver_class: type) -> None:
        with self._lock:
            for entry in self.entries:
                if entry.backend is not None and getattr(entry.backend, "driver", None) is driver_class:
                    entry.state = SELECTED

    # -- report ---------------------------------------------------------------------------

    def report(self) -> Report:
        """Everything, as typed rows; ``report().to_dict()`` is the ``list --json`` document."""
        from .report import Report, backend_row, core_row, plugin_row, renamed_cores

        with self._lock:
            found = self.discovery
            triton = found.triton if found else None
            return Report(
                policy=self.policy, used_by_triton=self.used_by_triton,
                discovery="in-tree" if found and found.in_tree else "entry-points",
                triton=triton.label() if triton else None,
                triton_core=core_row(found, libtriton_path(triton, found.package) if found else None),
                package=found.package if found else DEFAULT_PACKAGE, renamed_cores=renamed_cores(found),
                trust_sources=self.trust_sources or _trust_sources(), cache=cache_file(),
                manifest_digest=self.manifest_digest, core=self.core, problems=list(self.problems),
                notes=list(self.notes), backends=[backend_row(e, self.verdicts) for e in self.entries],
                plugins=[plugin_row(p, self.verdicts) for p in self.plugins],
            )

    def healthy(self) -> bool:
        items: list[Entry | PluginEntry] = [*self.entries, *self.plugins]
        return not self.problems and all(i.state not in BAD_STATES for i in items)


def _overwritten(dist: Distribution) -> Verdict | None:
    """A rejection, before any hashing, when another distribution installed over this one
    owns files its RECORD lists (``conflict.files``); None when the files are its own."""
    from ..site import overlaps_of

    for overlap in overlaps_of(dist):
        if overlap.on_disk is not None and overlap.on_disk is not dist:
            shared = [os.path.join(dist.root, *p.split("/")) for p in overlap.shared[:16]]
            files = [dist.dist_info, dist.manifest or dist.dist_info, overlap.second.dist_info, *shared]
            return Verdict(REJECTED, problem=overlap.reason(dist.dist_info), files=files)
    return None


def _verified_libtriton(dists: list[Distribution], verdicts: dict[str, Verdict],
                        cache: VerifyCache) -> dict[str, list[object]]:
    """Each ``<package>/_C/libtriton.so`` of a verified distribution: the identity it was hashed with."""
    found: dict[str, list[object]] = {}
    for dist in dists:
        if verdicts[dist.dist_info].status == VERIFIED:
            found.update((path, ident) for path, ident in cache.identities(dist.dist_info, "/_C/libtriton.so"))
    return found


def _verified_sources(dists: list[Distribution], verdicts: dict[str, Verdict], cache: VerifyCache
                      ) -> tuple[dict[str, list[object]], set[str]]:
    """The ``.py`` files of verified distributions with the identity each was hashed with, and
    their top-level packages: modules found there must run the verified source's code, never a
    pyc from ``__pycache__`` (the Triton layer's ``bytecode``)."""
    sources: dict[str, list[object]] = {}
    tops: set[str] = set()
    for dist in dists:
        if verdicts[dist.dist_info].status != VERIFIED:
            continue
        for path, ident in cache.identities(dist.dist_info, ".py"):
            if path.startswith(dist.root + os.sep):
                sources[path] = ident
                top = path[len(dist.root) + 1:].split(os.sep, 1)[0]
                tops.add(top[:-3] if top.endswith(".py") else top)
    return sources, tops


def emit(message: str) -> None:
    """A BackendWarning; under ``-W error`` one line on stderr instead of an exception, since
    the registry's warnings must never be what makes ``import triton`` fail."""
    try:
        warnings.warn(message, BackendWarning, stacklevel=4)
    except Warning:
        print(f"BackendWarning: {message}", file=sys.stderr)


#: Rejections that a plugin built for another Triton explains or repeats (its own contract is
#: then its reason: the distribution's Triton requirement, missing libtriton symbols).
_SYMPTOMS = ("verify.triton", "verify.symbols", "verify.libtriton")


def _failure_policy(item: Entry | PluginEntry) -> str:
    if not isinstance(item, PluginEntry) or item.terms is None or not item.terms.declared:
        return ""
    if item.required():
        return " (on-failure = \"fail\": compiling raises until it loads)"
    return " (on-failure = \"fallback\": kernels compile with the standard pipeline, without it)"


def _trust_sources() -> list[str]:
    """The trust files, also when no installed distribution has a manifest (then verification
    never needed them): a report must not say no key is trusted when one is."""
    from ..trust import trust_sources

    return trust_sources()


def triton_version(triton: Distribution | None, package: str = DEFAULT_PACKAGE) -> str | None:
    """The installed Triton's version as Triton reports it (``<package>.__version__``, read from
    the file), else its distribution's: a fork's distribution version need not be Triton's."""
    return None if triton is None else core_version(triton, package) or triton.version


def libtriton_path(triton: Distribution | None, package: str = DEFAULT_PACKAGE) -> str | None:
    if triton is None:
        return None
    path = os.path.join(triton.root, package, "_C", "libtriton.so")
    return path if os.path.isfile(path) else None


_REGISTRY = Registry()


def get() -> Registry:
    """The process-wide registry."""
    return _REGISTRY


def reset() -> None:
    """Forget everything (tests): the next load discovers and verifies again."""
    _REGISTRY.reset()


__all__ = [
    "BackendWarning", "CacheError", "Entry", "Plan", "PluginEntry", "Registry", "TrustError", "emit", "get",
    "locate_package", "reset",
]
