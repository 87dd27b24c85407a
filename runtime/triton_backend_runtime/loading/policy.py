"""The load policy: one environment variable, ``TRITON_BACKEND_POLICY``.

``strict``
    Only verified backends and plugins load (signed by a trusted key, every check passed).
``warn`` (the default)
    Verified, unverified (a sound manifest not signed by a trusted key) and legacy (no
    manifest) backends load; rejected ones are excluded, each with a warning naming why.
``off``
    The registry steps aside: Triton discovers and loads backends exactly as it does
    without this package.

An unknown value (``strcit``) means ``strict``, with a warning naming the value: whoever set
the variable asked for something, and the safe reading of a typo is the strictest one.
No policy makes a *backend* break ``import triton``: one that is excluded or fails to
import is recorded with its reason and the others load. The one exception is the Triton
core itself under ``strict`` (see :mod:`.core`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..base import LEGACY, OFF, STRICT, UNVERIFIED, VERIFIED, WARN, Policy

__all__ = ["ADMITS", "POLICIES", "POLICY_ENV", "current"]

POLICY_ENV = "TRITON_BACKEND_POLICY"
POLICIES: tuple[Policy, ...] = (STRICT, WARN, OFF)

#: Which verification outcomes each policy lets load.
ADMITS: dict[Policy, frozenset[str]] = {
    STRICT: frozenset({VERIFIED}), WARN: frozenset({VERIFIED, UNVERIFIED, LEGACY}), OFF: frozenset()
}


def current(env: Mapping[str, str] | None = None) -> tuple[Policy, str | None]:
    """The policy in force, and a complaint when the variable held something unknown."""
    env = os.environ if env is None else env
    value = env.get(POLICY_ENV, "").strip().lower()
    if not value:
        return WARN, None
    for policy in POLICIES:
        if value == policy:
            return policy, None
    return STRICT, f"{POLICY_ENV}={value[:40]!r} is not one of {', '.join(POLICIES)}; using {STRICT}"
