"""The verdict: what verifying one distribution found, one typed shape from verify to report.

:func:`.verify.verify_distribution` returns a :class:`Verdict`; the verification cache
stores it with :func:`.schema.encode` and reads it back with :func:`.schema.decode` (a
cache entry of the wrong shape is a miss, never a dropped backend); the registry keeps it
typed; only ``Registry.report()`` turns it into plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import TrustError
from .vocab import Trust


@dataclass
class Reason:
    """Why something is not admitted: a stable code, the file it is about, the cause."""

    code: str
    path: str
    message: str


@dataclass
class BackendClaim:
    """A backend the signed manifest vouches for."""

    name: str
    package: str
    targets: list[str] = field(default_factory=list)


@dataclass
class PluginClaim:
    """A plugin library the signed manifest vouches for, where it is installed."""

    path: str
    file: str
    api: str
    name: str | None
    exports: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    """The outcome for one distribution with a manifest."""

    status: Trust
    signers: list[str] = field(default_factory=list)
    problem: Reason | None = None
    note: str = ""
    envelope_sha256: str = ""
    coverage: str = ""
    #: How the signatures were judged, apart from any later reason for rejection: "trusted"
    #: (a trusted key's signature verified), "untrusted" (no trusted signer), "unsigned"
    #: (hash-only), "" (not reached: the envelope itself was refused).
    signature: str = ""
    backends: list[BackendClaim] = field(default_factory=list)
    plugins: list[PluginClaim] = field(default_factory=list)
    #: Every file and directory the outcome depends on, the one that failed included.
    files: list[str] = field(default_factory=list)


def reason_of(exc: TrustError) -> Reason:
    return Reason(exc.code, exc.path, exc.detail)
