"""Upstream provenance (PEP 740) of a mirror's input wheel, checked before the mirror re-signs it.

A PEP 740 provenance object (the JSON PyPI serves at a file's ``provenance`` URL, or a
``<wheel>.provenance`` file beside a local wheel) holds attestation bundles, each a list of
attestations: a DSSE in-toto statement naming the wheel and its sha256, signed by a Fulcio
certificate and logged in Rekor. Each attestation is verified by ``pypi-attestations``
(``Attestation.verify``) against the wheel's own file name and sha256, offline, with the
Sigstore trust root sigstore-python ships (its production instance; offline mode reads the
root from sigstore-python's local TUF cache, seeded from the copy in the package). Its
certificate's OIDC issuer and SAN must match an identity the platform lists
(``--upstream-identity ISSUER=PATTERN``), by the runtime's own rule
(:func:`triton_backend_runtime.trust.identities.matches`: exact, or one trailing ``*``).

Every attestation of the provenance must verify and match; the identities they were signed
by are what the re-signed manifest records (``provenance.upstream``). pypi-attestations and
sigstore are imported only here, inside functions: a mirror run without identities never
loads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from triton_backend_runtime.manifest import UpstreamIdentity
from triton_backend_runtime.trust import Identity, certificate_issuer, parse_identity

from ..base import InputError, TrustError

if TYPE_CHECKING:
    from pypi_attestations import Attestation

__all__ = ["MAX_PROVENANCE_BYTES", "PROVENANCE_SUFFIX", "ProvenanceError", "check_provenance", "parse_upstream"]

#: A provenance file is read up to this (PyPI's hold one or two attestations, ~10 kB each).
MAX_PROVENANCE_BYTES = 1 << 20
#: The name of a local wheel's provenance: the wheel's file name and this.
PROVENANCE_SUFFIX = ".provenance"


class ProvenanceError(TrustError):
    """A wheel's upstream provenance that is missing, not valid, or signed by an unlisted identity."""

    code_prefix = "provenance"


def parse_upstream(text: str) -> Identity:
    """``ISSUER=PATTERN`` as ``--upstream-identity`` takes it; the pattern as ``trust add-identity``
    takes it (exact, or one trailing ``*``)."""
    issuer, sep, pattern = text.partition("=")
    if not sep:
        raise InputError("upstream-identity", "--upstream-identity", f"{text[:100]!r} is not ISSUER=PATTERN")
    return parse_identity(issuer, pattern, "--upstream-identity")


def check_provenance(data: bytes, filename: str, sha256: str, identities: Sequence[Identity],
                     where: str) -> list[UpstreamIdentity]:
    """The identities that signed the wheel ``filename`` of ``sha256``, each attestation of
    ``data`` verified (``provenance.invalid``) and signed by one of ``identities``
    (``provenance.identity``)."""
    attestations = _attestations(data, where)
    from pypi_attestations import Distribution

    dist = Distribution(name=filename, digest=sha256)
    found: list[UpstreamIdentity] = []
    for attestation in attestations:
        signer = _verify(attestation, dist, identities, where)
        if signer not in found:
            found.append(signer)
    return found


def _attestations(data: bytes, where: str) -> list[Attestation]:
    from pydantic import ValidationError
    from pypi_attestations import Provenance

    try:
        provenance = Provenance.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"msg": str(exc), "loc": ()}
        at = ".".join(str(p) for p in first.get("loc", ()))
        raise ProvenanceError("invalid", where, f"not a PEP 740 provenance object ({at}: {first['msg']})"[:500]) \
            from None
    found = [a for bundle in provenance.attestation_bundles for a in bundle.attestations]
    if not found:
        raise ProvenanceError("invalid", where, "the provenance holds no attestation")
    return found


def _verify(attestation: Attestation, dist: Any, identities: Sequence[Identity], where: str) -> UpstreamIdentity:
    policy = _Listed(identities)
    try:
        attestation.verify(policy, dist, offline=True)
    except Exception as exc:  # noqa: BLE001  (anything the library raises on this input is this wheel's)
        if policy.refused is not None:
            issuer, sans = policy.refused
            listed = "; ".join(f"{i.issuer}={i.pattern}" for i in identities)
            raise ProvenanceError("identity", where, f"attested by {', '.join(sans)[:300] or '(no SAN)'} issued by "
                                                     f"{issuer or '(none)'}, which no --upstream-identity matches "
                                                     f"({listed[:300]})") from None
        raise ProvenanceError("invalid", where, f"the attestation does not verify against this wheel "
                                                f"({type(exc).__name__}: {str(exc)[:300]})") from None
    assert policy.matched is not None
    return policy.matched


class _Listed:
    """sigstore's VerificationPolicy: the certificate's issuer and SAN against the listed
    identities; records who signed, or who was refused."""

    def __init__(self, identities: Sequence[Identity]) -> None:
        self.identities = identities
        self.matched: UpstreamIdentity | None = None
        self.refused: tuple[str | None, list[str]] | None = None

    def verify(self, cert: Any) -> None:
        from sigstore.errors import VerificationError

        issuer, sans = certificate_issuer(cert), _sans(cert)
        for identity in self.identities:
            san = next((s for s in sans if issuer is not None and identity.matches(issuer, s)), None)
            if san is not None and issuer is not None:
                self.matched = UpstreamIdentity(issuer=issuer, identity=san)
                return
        self.refused = (issuer, sans)
        raise VerificationError("no listed upstream identity matches the certificate")


def _sans(cert: Any) -> list[str]:
    from cryptography import x509

    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [*names.get_values_for_type(x509.UniformResourceIdentifier), *names.get_values_for_type(x509.RFC822Name)]
