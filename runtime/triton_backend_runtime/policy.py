"""The load policy: one environment variable, ``TRITON_BACKEND_POLICY``.

``strict``
    Only verified backends and plugins load (signed by a trusted key, every check passed).
``warn`` (the default)
    Verified, unverified (a sound manifest not signed by a trusted key) and legacy (no
    manifest) backends load; rejected ones are excluded, each with a warning naming why.
``off``
    The registry steps aside: Triton discovers and loads backends exactly as it does
    without this package.

No policy makes ``import triton`` fail: a backend that is excluded or fails to import is
recorded with its reason (see ``python -m triton_backend_runtime doctor``) and the others
load. An unknown value is treated as ``warn``, with a warning.
"""

from __future__ import annotations

import os

POLICY_ENV = "TRITON_BACKEND_POLICY"
STRICT, WARN, OFF = "strict", "warn", "off"
POLICIES = (STRICT, WARN, OFF)

#: Which verification outcomes each policy lets load.
ADMITS = {STRICT: {"verified"}, WARN: {"verified", "unverified", "legacy"}, OFF: set()}


def current(env: dict[str, str] | os._Environ[str] | None = None) -> tuple[str, str | None]:
    """The policy in force, and a complaint when the variable held something unknown."""
    env = os.environ if env is None else env
    value = env.get(POLICY_ENV, "").strip().lower()
    if not value:
        return WARN, None
    if value in POLICIES:
        return value, None
    return WARN, f"{POLICY_ENV}={value!r} is not one of {', '.join(POLICIES)}; using {WARN}"
