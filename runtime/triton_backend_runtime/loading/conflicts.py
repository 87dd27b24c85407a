"""The conflict rule, as a pure function over claims.

A *name* here is anything two distributions can both claim and Triton keeps only one of: a
backend name (``conflict.name``; Triton 3.9 lets the last entry point win, silently), a target
in a backend's manifest (``conflict.target``), a strong symbol a plugin library exports
(other than the plugin API entry points every plugin defines: ``conflict.symbol``), and a
pass, dialect or op a plugin registers, as its captured ``tritonGetPluginInfo`` says
(Triton's registries are keyed by name: ``conflict.pass``, ``conflict.dialect``,
``conflict.op``). Who keeps a contested name, in this order:

1. the distribution the trust store pins it to (a ``pins`` file, ``trust pin NAME DIST``;
   see :mod:`.trust`), when that distribution claims it; a pinned backend's targets count as
   pinned with it;
2. the Triton core, for a name the core itself claims (its own backends and their targets,
   its bundled plugins' symbols and registrations), whatever became of the core's claim:
   another distribution never takes one unpinned, signed or not;
3. otherwise the claim trusted best (verified > unverified > legacy), when it is one
   distribution's. Two distributions trusted alike, neither the core nor pinned, are *both*
   excluded, and the reason says how to pin the owner: which one the user meant is not
   something the rule can know.

The order of distribution names never decides. ``sys.path`` order decides only between
installs of one distribution (one PEP 503 name in two ``sys.path`` entries: a ``--user``
install over the environment's), where the earlier wins because Python imports the earlier
one anyway; then manifest order, between two claims one distribution makes itself.

Every contested name is decided at once, from all of its claims (not one claim after
another), so the outcome does not depend on the order the claims come in; a claim that loses
any of its names is excluded, with the reason of the first it loses. Backend names are
decided before targets, among what is left, and plugin symbols before passes, dialects and
ops. :func:`resolve` returns who is excluded and why; the registry only applies the answer.

Two libraries of one distribution that claim exactly the same (the same exports, passes,
dialects and ops) are one library under two names, not a conflict: a wheel cannot hold a
symlink, so ``libX.so`` beside ``libX.so.24.0git`` is a copy (triton 3.9.0's bundled
``libMLIRDialectPlugin``). Both stay admitted; whichever Triton is handed loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..base import PIN_KINDS, RANK, record

__all__ = ["Claim", "Exclusion", "resolve"]

_RULE = "verified > unverified > legacy"
_PIN = "python -m triton_backend_runtime trust pin"
#: The reason code of each kind of name.
_CODES = {"backend": "name", "target": "target", "symbol": "symbol", "pass": "pass", "dialect": "dialect", "op": "op"}


@record(eq=False)  # compared by identity
class Claim:
    """What one admitted backend or plugin claims, and what the rule ranks it by."""

    key: int
    name: str
    trust: str
    path_order: int
    dist_key: str
    label: str
    targets: tuple[str, ...] = ()
    exports: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    dialects: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    #: Claimed by the Triton core's own distribution.
    core: bool = False

    def rank(self) -> tuple[int, int, int]:
        """Between claims of one distribution: trust, then ``sys.path`` order, then discovery
        order. Never between distributions' names."""
        return (_trust(self), self.path_order, self.key)


@record(eq=False)  # compared by identity
class Exclusion:
    key: int
    code: str
    detail: str


def resolve(backends: list[Claim], plugins: list[Claim], core: Mapping[tuple[str, str], str] | None = None,
            pins: Mapping[tuple[str, str], str] | None = None) -> list[Exclusion]:
    """Everyone the rule excludes: backend names, then targets among the rest; plugin
    symbols, then pass, dialect and op names among the rest. ``core``: each ``(kind, name)``
    the Triton core claims, with its label; ``pins``: each pinned ``(kind, name)`` with the
    normalised name of the distribution that owns it."""
    rule = _Rule(core or {}, pins or {})
    out = rule.step(backends, "backend", lambda c: (c.name,))
    gone = {e.key for e in out}
    out += rule.step([c for c in backends if c.key not in gone], "target", lambda c: c.targets)
    steps: list[tuple[str, Callable[[Claim], tuple[str, ...]]]] = [
        ("symbol", lambda c: c.exports), ("pass", lambda c: c.passes), ("dialect", lambda c: c.dialects),
        ("op", lambda c: c.ops),
    ]
    for kind, names in steps:
        excluded = rule.step([c for c in plugins if c.key not in gone], kind, names)
        gone |= {e.key for e in excluded}
        out += excluded
    return out


def _trust(claim: Claim) -> int:
    return RANK.get(claim.trust, len(RANK))


def _same_library(a: Claim, b: Claim) -> bool:
    """One distribution's copy of one plugin under a second name (see the module docstring)."""
    return (a.dist_key == b.dist_key and a.exports == b.exports and a.passes == b.passes
            and a.dialects == b.dialects and a.ops == b.ops)


def _who(kind: str, claim: Claim) -> str:
    return claim.label if kind in ("backend", "target") else f"plugin {claim.name} of {claim.label}"


def _what(kind: str, name: str) -> str:
    return f"strong symbol {name!r}" if kind == "symbol" else f"{kind} {name!r}"


def _choose(kind: str, name: str) -> str:
    """How the user settles a contested name."""
    if kind not in PIN_KINDS:
        return "uninstall the one you do not want"
    spec = name if kind == "backend" else f"{kind}:{name}"
    return f"to choose the owner: {_PIN} {spec} DIST"


@record(frozen=True)
class _Rule:
    core: Mapping[tuple[str, str], str]
    pins: Mapping[tuple[str, str], str]

    def step(self, claims: list[Claim], kind: str, names: Callable[[Claim], tuple[str, ...]]) -> list[Exclusion]:
        holders: dict[str, list[Claim]] = {}
        for claim in claims:
            for value in dict.fromkeys(names(claim)):
                holders.setdefault(value, []).append(claim)
        lost: dict[tuple[int, str], str] = {}
        for name, group in holders.items():
            for loser, why in self.decide(kind, name, group):
                lost[(loser.key, name)] = why
        out = []
        for claim in claims:
            first = next((lost[(claim.key, n)] for n in names(claim) if (claim.key, n) in lost), None)
            if first is not None:
                out.append(Exclusion(claim.key, _CODES[kind], first))
        return out

    def pinned(self, kind: str, name: str, claim: Claim) -> bool:
        """Whether the trust store pins ``name`` to ``claim``'s distribution; a backend's pin
        holds for the targets it declares (the core's backend it displaces takes its targets along)."""
        if self.pins.get((kind, name)) == claim.dist_key:
            return True
        return kind == "target" and self.pins.get(("backend", claim.name)) == claim.dist_key

    def decide(self, kind: str, name: str, group: list[Claim]) -> list[tuple[Claim, str]]:
        """The claims of ``group`` that lose ``name``, each with why."""
        what = _what(kind, name)
        owners = [c for c in group if self.pinned(kind, name, c)]
        if owners:
            why = f"{what} is pinned to {owners[0].dist_key} in the trust store"
            return _keep(kind, what, owners, group, why)
        label = self.core.get((kind, name)) or next((c.label for c in group if c.core), None)
        if label is not None:
            why = (f"{what} belongs to the Triton core ({label}); another distribution takes it only where the "
                   f"trust store pins it to that one ({_choose(kind, name)})")
            return _keep(kind, what, [c for c in group if c.core], group, why)
        best = min(_trust(c) for c in group)
        top = [c for c in group if _trust(c) == best]
        if len({c.dist_key for c in top}) > 1:
            alike = ", ".join(sorted({_who(kind, c) for c in top}))
            why = (f"{what} is claimed by {alike}, trusted alike ({top[0].trust}), and none is the Triton core: "
                   f"none of them gets it ({_choose(kind, name)})")
            return [(c, why) for c in group]
        return _keep(kind, what, top, group, "")


def _keep(kind: str, what: str, owners: list[Claim], group: list[Claim], why: str) -> list[tuple[Claim, str]]:
    """The best of ``owners`` (and its copies) keeps the name; every other claim loses it.
    ``why``: what makes the owners owners (a pin, the core; "" for trust alone)."""
    winner = min(owners, key=Claim.rank) if owners else None
    out = []
    for claim in group:
        if winner is None:
            out.append((claim, why))
        elif claim is winner or (kind != "backend" and _same_library(claim, winner)):
            continue  # a copy keeps what the library keeps (one backend name is one entry point, though)
        elif why and claim.dist_key != winner.dist_key:
            out.append((claim, f"{why}; {_who(kind, winner)} keeps it"))
        elif _trust(claim) != _trust(winner):
            out.append((claim, f"{what} is also claimed by {_who(kind, winner)}, which wins ({_RULE})"))
        else:
            order = "earlier on sys.path" if claim.path_order != winner.path_order else "earlier in its manifest"
            out.append((claim, f"{what} is also claimed by {_who(kind, winner)}, {order}, which wins"))
    return out
