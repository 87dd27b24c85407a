"""The verdict: what verifying one distribution found, one typed shape from verify to report.

:func:`.verify.verify_distribution` returns a :class:`Verdict`; the verification cache
stores it with :func:`.schema.encode` and reads it back with :func:`.schema.decode` (a
cache entry of the wrong shape is a miss, never a dropped backend); the registry keeps it
typed; only ``Registry.report()`` turns it into plain data.

The annotations are evaluated when the classes are made (no ``from __future__ import
annotations``): the cache's decoder reads them with ``typing.get_type_hints``, which would
otherwise compile every string annotation at each warm import (~1 ms).
"""

from dataclasses import field
from typing import TYPE_CHECKING

from ..base import Reason, Trust, record

if TYPE_CHECKING:  # the manifest's dataclasses are not imported on the warm path
    from ..manifest import Plugin

__all__ = [
    "BackendClaim", "KeylessIdentity", "PluginClaim", "PluginTerms", "UpstreamSigner", "Verdict", "plugin_terms"
]


@record()
class BackendClaim:
    """A backend the signed manifest vouches for."""

    name: str
    package: str
    targets: list[str] = field(default_factory=list)
    #: Why this one backend is refused while its distribution verified (its signers are not
    #: granted its name: ``trust.name``).
    problem: Reason | None = None


@record()
class PluginTerms:
    """A plugin's contract as the load side checks it (flattened from the manifest's
    ``Plugin.info`` and ``Plugin.contract``): what the library said, what its vendor declared."""

    captured: bool
    capture_note: str = ""
    name: str | None = None
    version: str | None = None
    built_for: str | None = None
    passes: list[str] = field(default_factory=list)
    dialects: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    declared: bool = False
    triton: str = ""
    phase: str = "import"
    placement: list[str] = field(default_factory=list)
    on_failure: str = "fallback"


@record()
class PluginClaim:
    """A plugin library the signed manifest vouches for, where it is installed."""

    path: str
    file: str
    api: str
    name: str | None
    exports: list[str] = field(default_factory=list)
    terms: PluginTerms | None = None
    #: Why this one library is refused while its distribution verified (a plugin bundled
    #: with the Triton core whose symbols that core's libtriton.so does not export).
    problem: Reason | None = None


def plugin_terms(plugin: "Plugin") -> PluginTerms | None:
    """None for a manifest before schema 1.2, which says neither."""
    info, contract = plugin.info, plugin.contract
    if info is None and contract is None:
        return None
    terms = PluginTerms(captured=bool(info and info.captured))
    if info is not None and info.captured:
        terms.name, terms.version, terms.built_for = info.name, info.version, info.triton_version
        terms.passes = [p.name for p in info.passes]
        terms.dialects = [d.name for d in info.dialects]
        terms.ops = list(info.ops)
    elif info is not None:
        terms.capture_note = f"{info.reason_code}: {info.reason}"
    if contract is not None:
        terms.declared, terms.triton, terms.phase = True, contract.triton, contract.phase
        terms.placement, terms.on_failure = [p.text() for p in contract.passes], contract.on_failure
    return terms


@record()
class KeylessIdentity:
    """Who signed keylessly (a verified Sigstore bundle): the certificate's OIDC issuer and SAN,
    and the trusted identity it counted under (its id and pattern)."""

    issuer: str
    san: str
    id: str
    pattern: str


@record()
class UpstreamSigner:
    """An upstream identity the manifest records (``provenance.upstream``): who signed the
    wheel before the mirror that re-signed it checked it (schema 1.5)."""

    issuer: str
    identity: str
    kind: str


@record()
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
    #: Code in this distribution's packages that another distribution's RECORD lists as it is
    #: on disk (an add-on writing into Triton's ``_C/``): that one's ``.dist-info`` -> the
    #: first such files (:mod:`.unlisted`). Verified only while each owner is.
    lent: dict[str, list[str]] = field(default_factory=dict)
    #: The trusted identity whose keyless signature verified and counted; None without one.
    keyless: KeylessIdentity | None = None
    #: The upstream identities the manifest records (``provenance.upstream``); [] before 1.5.
    upstream: list[UpstreamSigner] = field(default_factory=list)

