"""The conflict rule, as a pure function over claims.

Rank: verified < unverified < legacy; then the ``sys.path`` entry (earlier wins, as
Python's own import shadowing); then the distribution's normalised name; then discovery
order. :func:`resolve` applies it to what the policy admitted and returns who is excluded
and why; the registry only applies the answer.

* Two distributions declaring one backend name: the best keeps it (``conflict.name``).
  (Triton 3.9 lets the last entry point win, silently.)
* Two backends claiming one target in their manifests: the best keeps it (``conflict.target``).
* Plugin libraries exporting one strong symbol (other than the plugin API entry points
  every plugin defines): the best loads (``conflict.symbol``).
* Plugin libraries registering one pass, dialect or op name (as their captured
  ``tritonGetPluginInfo`` says): Triton's registries are keyed by name, so the best loads
  (``conflict.pass``, ``conflict.dialect``, ``conflict.op``).

Two libraries of one distribution that claim exactly the same (the same exports, passes,
dialects and ops) are one library under two names, not a conflict: a wheel cannot hold a
symlink, so ``libX.so`` beside ``libX.so.24.0git`` is a copy (triton 3.9.0's bundled
``libMLIRDialectPlugin``). Both stay admitted; whichever Triton is handed loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .vocab import RANK

_RULE = "rule: verified > unverified > legacy, then earlier on sys.path"


@dataclass(eq=False)  # compared by identity; no __eq__ to generate on every import
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

    def rank(self) -> tuple[int, int, str, int]:
        return (RANK.get(self.trust, len(RANK)), self.path_order, self.dist_key, self.key)


@dataclass(eq=False)  # compared by identity; no __eq__ to generate on every import
class Exclusion:
    key: int
    code: str
    detail: str


def resolve(backends: list[Claim], plugins: list[Claim]) -> list[Exclusion]:
    """Everyone the rule excludes: backend names, then targets among the rest; plugin
    symbols, then pass, dialect and op names among the rest."""
    out = _names(backends)
    gone = {e.key for e in out}
    out += _targets([c for c in backends if c.key not in gone])
    for step in (_symbols, _registered("pass", "passes"), _registered("dialect", "dialects"), _registered("op", "ops")):
        excluded = step([c for c in plugins if c.key not in gone])
        gone |= {e.key for e in excluded}
        out += excluded
    return out


def _names(claims: list[Claim]) -> list[Exclusion]:
    groups: dict[str, list[Claim]] = {}
    for claim in claims:
        groups.setdefault(claim.name, []).append(claim)
    out = []
    for name, group in groups.items():
        winner = min(group, key=Claim.rank)
        out += [Exclusion(c.key, "name", f"backend {name!r} is also declared by {winner.label}, which wins ({_RULE})")
                for c in group if c is not winner]
    return out


def _targets(claims: list[Claim]) -> list[Exclusion]:
    return _first_wins(claims, "target", lambda c: c.targets, lambda taken, first: (
        f"target {taken!r} is already claimed by backend {first.name!r} of {first.label}, which wins ({_RULE})"))


def _symbols(claims: list[Claim]) -> list[Exclusion]:
    return _first_wins(claims, "symbol", lambda c: c.exports, lambda taken, first: (
        f"exports {taken!r}, already exported by plugin {first.name} of {first.label}, which wins"))


def _registered(kind: str, field: str) -> Callable[[list[Claim]], list[Exclusion]]:
    def step(claims: list[Claim]) -> list[Exclusion]:
        return _first_wins(claims, kind, lambda c: getattr(c, field), lambda taken, first: (
            f"registers {kind} {taken!r}, already registered by plugin {first.name} of {first.label}, "
            f"which wins ({_RULE})"))

    return step


def _same_library(a: Claim, b: Claim) -> bool:
    """One distribution's copy of one plugin under a second name (see the module docstring)."""
    return (a.dist_key == b.dist_key and a.exports == b.exports and a.passes == b.passes
            and a.dialects == b.dialects and a.ops == b.ops)


def _first_wins(claims: list[Claim], code: str, keys: Callable[[Claim], tuple[str, ...]],
                detail: Callable[[str, Claim], str]) -> list[Exclusion]:
    """In rank order, a claim that takes no key already taken keeps all of its keys; one
    that does is excluded, naming the first key and its owner."""
    owner: dict[str, Claim] = {}
    out = []
    for claim in sorted(claims, key=Claim.rank):
        taken = [k for k in keys(claim) if k in owner and not _same_library(claim, owner[k])]
        if taken:
            out.append(Exclusion(claim.key, code, detail(taken[0], owner[taken[0]])))
            continue
        owner.update(dict.fromkeys(keys(claim), claim))
    return out
