"""One vocabulary for trust, state and policy, used by every load-side module.

``Literal`` types (not strings spread over modules) so that mypy catches a typo: a rank
or a state spelled wrong is a type error, not a backend that silently sorts last.
Like ``installer``'s ``Scheme``, these are plain names with a type around them.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "BAD_STATES", "DISCOVERED", "EXCLUDED", "FAILED", "LEGACY", "LOADED", "NAME_KINDS", "NameKind", "OFF",
    "PENDING", "PIN_KINDS", "Policy", "RANK", "REJECTED", "SELECTED", "STRICT", "State", "Trust", "UNVERIFIED",
    "VERIFIED", "WARN"
]

#: What verification said of a distribution (``discovered`` before it has run).
Trust = Literal["discovered", "verified", "unverified", "legacy", "rejected"]
DISCOVERED: Final = "discovered"
VERIFIED: Final = "verified"
UNVERIFIED: Final = "unverified"
LEGACY: Final = "legacy"
REJECTED: Final = "rejected"

#: Where a backend or plugin is in its lifecycle (see :mod:`.registry`).
State = Literal[
    "discovered", "verified", "unverified", "legacy", "rejected",
    "loaded", "failed", "excluded", "pending", "selected",
]
LOADED: Final = "loaded"
FAILED: Final = "failed"
EXCLUDED: Final = "excluded"
PENDING: Final = "pending"
SELECTED: Final = "selected"
#: States a report counts as a problem.
BAD_STATES: Final = frozenset({FAILED, EXCLUDED, REJECTED})

#: ``TRITON_BACKEND_POLICY``.
Policy = Literal["strict", "warn", "off"]
STRICT: Final = "strict"
WARN: Final = "warn"
OFF: Final = "off"

#: The conflict rule's first key: verified before unverified before legacy.
RANK: Final[dict[str, int]] = {VERIFIED: 0, UNVERIFIED: 1, LEGACY: 2}

#: The names a distribution claims that a trust store grants (``scopes``) or pins (``pins``):
#: a backend's entry-point name and a plugin's registrations (see :mod:`.trust`).
NameKind = Literal["backend", "pass", "dialect", "op"]
NAME_KINDS: Final[tuple[NameKind, ...]] = ("backend", "pass", "dialect", "op")
#: What a pin may also name: a backend's target (two backends claiming one target clash too).
PIN_KINDS: Final[tuple[str, ...]] = (*NAME_KINDS, "target")
