"""One vocabulary for trust, state and policy, used by every load-side module.

``Literal`` types (not strings spread over modules) so that mypy catches a typo: a rank
or a state spelled wrong is a type error, not a backend that silently sorts last.
Like ``installer``'s ``Scheme``, these are plain names with a type around them.
"""

from __future__ import annotations

from typing import Final, Literal

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
