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

With ``--upstream-root FILE`` (:func:`load_root`: an air-gapped or private Sigstore's
``trusted_root.json``) the attestations are verified against that root instead: pypi-attestations
verifies only against Sigstore's production or staging instance, so sigstore's ``Verifier``
for that root checks each attestation's bundle (:func:`_verify_with_root`), and the statement
is then checked as PEP 740 asks.

Every attestation of the provenance must verify and match; the identities they were signed
by are what the re-signed manifest records (``provenance.upstream``). pypi-attestations and
sigstore are imported only here, inside functions: a mirror run without identities never
loads them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from triton_backend_runtime.base import describe, jsonlimits, regularfile
from triton_backend_runtime.manifest import UpstreamIdentity
from triton_backend_runtime.trust import Identity, certificate_issuer, parse_identity

from ..base import InputError, TrustError

if TYPE_CHECKING:
    from pypi_attestations import Attestation

__all__ = [
    "MAX_PROVENANCE_BYTES", "MAX_ROOT_BYTES", "PROVENANCE_SUFFIX", "ProvenanceError", "UpstreamRoot",
    "check_provenance", "load_root", "parse_upstream",
]

#: A provenance file is read up to this (PyPI's hold one or two attestations, ~10 kB each).
MAX_PROVENANCE_BYTES = 1 << 20
#: A trusted root is read up to this (Sigstore's production one is ~10 kB).
MAX_ROOT_BYTES = 4 << 20
#: The name of a local wheel's provenance: the wheel's file name and this.
PROVENANCE_SUFFIX = ".provenance"
#: PEP 740: an attestation's payload is an in-toto Statement v1.
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
IN_TOTO_STATEMENT_V1 = "https://in-toto.io/Statement/v1"


@dataclass(frozen=True)
class UpstreamRoot:
    """The Sigstore trust root of ``--upstream-root``: its file, the sha256 of its bytes (a
    mirror's state records it: another root redoes every wheel), and sigstore's verifier for it."""

    path: str
    sha256: str
    verifier: Any  # sigstore.verify.Verifier: imported only when a root is given


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


def load_root(path: Path) -> UpstreamRoot:
    """The Sigstore trusted root in the file ``path`` (``trusted_root.json``, protobuf-specs
    JSON), read within bounds; one that cannot be read or is no trusted root is an input error
    (``input.upstream-root``) naming the file."""
    where = str(path)
    try:
        data = regularfile.read_regular(path, MAX_ROOT_BYTES)
        jsonlimits.loads(data, where, InputError, limit=MAX_ROOT_BYTES)
    except TrustError as exc:
        raise InputError("upstream-root", where, f"not a readable trusted root: {exc.detail}"[:500]) from None
    try:
        from sigstore.models import TrustedRoot
        from sigstore.verify import Verifier
        from sigstore_models.trustroot.v1 import TrustedRoot as Inner

        verifier = Verifier(trusted_root=TrustedRoot(Inner.from_json(data)))
    except ImportError as exc:
        raise InputError("upstream-root", where, f"sigstore is not installed ({describe(exc)}): pip install "
                                                 "'triton-backend-packager[sigstore]'") from None
    except Exception as exc:  # noqa: BLE001  (sigstore's own errors for a file that is no trusted root vary)
        raise InputError("upstream-root", where, f"not a Sigstore trusted root: {describe(exc)}"[:500]) from None
    return UpstreamRoot(where, hashlib.sha256(data).hexdigest(), verifier)


def check_provenance(data: bytes, filename: str, sha256: str, identities: Sequence[Identity],
                     where: str, root: UpstreamRoot | None = None) -> list[UpstreamIdentity]:
    """The identities that signed the wheel ``filename`` of ``sha256``, each attestation of
    ``data`` verified (``provenance.invalid``), against ``root`` if given (else Sigstore's
    production root), and signed by one of ``identities`` (``provenance.identity``)."""
    attestations = _attestations(data, where)
    from pypi_attestations import Distribution

    dist = Distribution(name=filename, digest=sha256)
    found: list[UpstreamIdentity] = []
    for attestation in attestations:
        signer = _verify(attestation, dist, identities, where, root)
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


def _verify(attestation: Attestation, dist: Any, identities: Sequence[Identity], where: str,
            root: UpstreamRoot | None) -> UpstreamIdentity:
    policy = _Listed(identities)
    try:
        if root is None:
            attestation.verify(policy, dist, offline=True)
        else:
            _verify_with_root(attestation, dist.name, dist.digest, policy, root, where)
    except ProvenanceError:
        raise
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


def _verify_with_root(attestation: Attestation, filename: str, sha256: str, policy: _Listed, root: UpstreamRoot,
                      where: str) -> None:
    """PEP 740's verification of one attestation of the wheel ``filename``, against ``root``:
    sigstore verifies its bundle (certificate chain, SCT, log entry, signing time, the
    envelope's signature) and the identity ``policy``; then its statement must be an in-toto
    Statement v1 attesting this file alone (PEP 740, "Attestation statement and signature
    formats"): exactly one subject, named by a valid wheel file name that is this wheel's
    (compared parsed, as names are normalized), with this file's sha256, and a predicate type
    PyPI knows (``pypi_attestations.AttestationType``)."""
    from pypi_attestations import AttestationType

    kind, payload = root.verifier.verify_dsse(attestation.to_bundle(), policy)
    if kind != IN_TOTO_PAYLOAD_TYPE:
        raise ProvenanceError("invalid", where, f"the attestation's payload is {kind[:100]!r}, not in-toto")
    statement = _statement(payload, where)
    subject = statement["subject"][0] if isinstance(statement["subject"][0], dict) else {}
    name, digest = subject.get("name"), subject.get("digest")
    if not isinstance(name, str) or _wheel_name(name) is None or _wheel_name(name) != _wheel_name(filename):
        raise ProvenanceError("invalid", where, f"the attestation's subject {str(name)[:200]!r} is not {filename}")
    if not isinstance(digest, dict) or digest.get("sha256") != sha256:
        raise ProvenanceError("invalid", where, "the attestation's subject digest is not this wheel's sha256")
    predicate = statement.get("predicateType")
    if predicate not in {t.value for t in AttestationType}:
        raise ProvenanceError("invalid", where, f"unknown attestation type {str(predicate)[:200]!r}")


def _statement(payload: bytes, where: str) -> dict[str, Any]:
    """The signed payload as an in-toto Statement v1 of exactly one subject."""
    try:
        statement = jsonlimits.loads(payload, where, ProvenanceError, limit=MAX_PROVENANCE_BYTES)
    except ProvenanceError as exc:
        raise ProvenanceError("invalid", where, f"the attestation's statement: {exc.detail}") from None
    subjects = statement.get("subject") if isinstance(statement, dict) else None
    if not isinstance(subjects, list) or len(subjects) != 1 or statement.get("_type") != IN_TOTO_STATEMENT_V1:
        raise ProvenanceError("invalid", where, "the attestation is not an in-toto Statement v1 of exactly one subject")
    return statement  # type: ignore[no-any-return]


def _wheel_name(filename: str) -> tuple[object, ...] | None:
    try:
        return parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None


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
