"""The keyless signature: a Sigstore bundle (``triton_backend.sigstore.json``) verified offline.

The bundle (v0.3 JSON) carries a DSSE envelope of type ``application/vnd.in-toto+json`` whose
payload is byte for byte the statement the manifest's envelope carries, a Fulcio certificate
naming who signed (OIDC issuer and subject alternative name), and the transparency-log entry.
:func:`verify_bundle` reads it within bounds (:mod:`..base.jsonlimits`), then hands it to
sigstore-python's ``Verifier`` with the pinned trusted root (``sigstore-root.json``, or the root
sigstore-python ships): the chain at the signed time, the SCT, the log's inclusion proof and
checkpoint, the signature. The certificate's identity is matched against the trust store's
identities (:mod:`.identities`) inside that verification, and the payload against the manifest's.

Nothing of sigstore is imported until a bundle is verified (cold path, and only with an
identity trusted). Every failure is a :class:`SigstoreError` (``sigstore.*``) for that
distribution alone: never an exception of sigstore's, never a traceback.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ..base import TrustError, canonicalize_name, describe, jsonlimits, record
from .dsse import MAX_ENVELOPE_BYTES
from .identities import Identity, most_specific

if TYPE_CHECKING:
    from .keys import TrustStore

__all__ = [
    "IN_TOTO_PAYLOAD_TYPE", "KeylessSigner", "MAX_BUNDLE_BYTES", "MAX_BUNDLE_VALUES", "SHIPPED_ROOT", "SigstoreError",
    "certificate_issuer", "verify_bundle",
]

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
#: A bundle carries the statement (base64, as the manifest's envelope does) plus a certificate
#: and a log entry of a few KB: bigger is refused unread.
MAX_BUNDLE_BYTES = MAX_ENVELOPE_BYTES + 256 * 1024
#: JSON values a bundle may hold (:func:`.jsonlimits.loads`): a real one is a few dozen (its
#: payload is one base64 string, an inclusion proof a few dozen hashes), so this is checked
#: before sigstore's parser builds objects of a bundle that is megabytes of tiny values.
MAX_BUNDLE_VALUES = 1000
#: The production trusted root sigstore-python ships (package data of ``sigstore._store``).
SHIPPED_ROOT = ("sigstore._store", "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev", "trusted_root.json")
#: Fulcio's certificate extensions naming the OIDC issuer: v2 (DER UTF8String), then v1 (raw).
_ISSUER_V2 = "1.3.6.1.4.1.57264.1.8"
_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"


class SigstoreError(TrustError):
    """A keyless signature (Sigstore bundle) that cannot be accepted."""

    code_prefix = "sigstore"


@record(frozen=True)
class KeylessSigner:
    """Who signed keylessly: the certificate's issuer and SAN, and the trusted identity
    (its id, as scopes and revocations name it, and its pattern) it was counted under."""

    id: str
    issuer: str
    san: str
    pattern: str

    def text(self) -> str:
        return f"{self.san} (issuer {self.issuer})"


def verify_bundle(data: bytes, payload: bytes, name: str, store: TrustStore, where: str) -> KeylessSigner:
    """Verify the bundle ``data`` offline against the store's pinned trusted root (or the one
    sigstore-python ships), its certificate's identity against the store's identities, and its
    DSSE payload against ``payload`` (the manifest's statement) of distribution ``name``.

    Returns the signer; raises SigstoreError (``sigstore.*``), never anything else."""
    doc = _loads(data, where)
    if not isinstance(doc, dict) or not isinstance(doc.get("mediaType"), str):
        raise SigstoreError("bundle", where, "not a Sigstore bundle: a JSON object with a mediaType is required")
    try:
        import sigstore  # noqa: F401  (the optional extra)
    except ImportError:
        raise SigstoreError("missing", where, "sigstore-python is not installed (the runtime's 'sigstore' extra): "
                                              "the keyless signature is not checked and does not count") from None
    try:
        return _verify(data, payload, name, store, where)
    except TrustError:
        raise
    except Exception as exc:  # hostile input: whatever sigstore raised is this bundle's reason, only
        code, what = _classify(exc)
        raise SigstoreError(code, where, f"{what}: {describe(exc)}"[:500]) from None


def _loads(data: bytes, where: str) -> Any:
    """The bundle's JSON within :data:`MAX_BUNDLE_BYTES` and :data:`MAX_BUNDLE_VALUES`; too
    many values is ``sigstore.too-large``, as too many bytes is."""
    try:
        return jsonlimits.loads(data, where, SigstoreError, limit=MAX_BUNDLE_BYTES,
                                max_values=(MAX_BUNDLE_VALUES, "MAX_BUNDLE_VALUES"))
    except SigstoreError as exc:
        if not exc.code.endswith(".limit"):  # the value budget's: not a code of its own
            raise
        raise SigstoreError("too-large", where, exc.detail) from None


def _verify(data: bytes, payload: bytes, name: str, store: TrustStore, where: str) -> KeylessSigner:
    from sigstore.errors import VerificationError
    from sigstore.models import Bundle, InvalidBundle
    from sigstore.verify import Verifier

    try:
        bundle = Bundle.from_json(data)
    except (InvalidBundle, ValueError, TypeError, KeyError) as exc:
        raise SigstoreError("bundle", where, f"not a valid Sigstore bundle: {describe(exc)}"[:500]) from None
    failures: list[SigstoreError] = []
    for root_where, root in _roots(store, where):
        policy = _Policy(store, where)
        try:
            kind, signed = Verifier(trusted_root=root).verify_dsse(bundle, policy)
        except VerificationError as exc:
            if policy.problem is not None:
                raise policy.problem from None  # the identity: the same whichever root
            code, what = _classify(exc)
            failures.append(SigstoreError(code, where, f"{what} (root {root_where}): {describe(exc)}"[:500]))
            continue
        assert policy.signer is not None
        _check_payload(kind, signed, payload, name, where)
        return policy.signer
    raise failures[0]


class _Policy:
    """sigstore's VerificationPolicy: the certificate's issuer and SAN against the trust
    store's identities; records who signed, or why not (an error of ours, not a message)."""

    def __init__(self, store: TrustStore, where: str) -> None:
        self.store, self.where = store, where
        self.signer: KeylessSigner | None = None
        self.problem: SigstoreError | None = None

    def verify(self, cert: Any) -> None:
        from sigstore.errors import VerificationError

        issuer, san = certificate_issuer(cert), _san(cert)
        try:
            self.signer = _admit(self.store, issuer, san, self.where)
        except SigstoreError as exc:
            self.problem = exc
            raise VerificationError(exc.detail) from None


def _admit(store: TrustStore, issuer: str | None, san: str | None, where: str) -> KeylessSigner:
    """The trusted identity a certificate of ``issuer`` and ``san`` is counted under."""
    shown = f"{(san or '(none)')[:300]!r} issued by {(issuer or '(none)')[:200]!r}"
    if issuer is None or san is None:
        raise SigstoreError("certificate", where, f"the certificate names no OIDC issuer or SAN ({shown})")
    same_issuer = [i for i in store.identities.values() if i.issuer == issuer]
    if not same_issuer:
        trusted = sorted({i.issuer for i in store.identities.values()})
        raise SigstoreError("issuer", where, f"signed by {shown}: no identity of that issuer is trusted "
                                             f"(trusted issuers: {', '.join(trusted)[:300]})")
    matching: list[Identity] = [i for i in same_issuer if i.matches(issuer, san)]
    if not matching:
        raise SigstoreError("identity", where, f"signed by {shown}, which no trusted identity matches "
                                               f"({'; '.join(i.pattern for i in same_issuer)[:300]})")
    for identity in matching:
        by = store.revoked_by(identity.id)
        if by is not None or store.suspended():
            why = store.suspended() or f"{by} in {store.revoked_at.get(by or '', 'the trust store')}"
            raise SigstoreError("revoked", where, f"signed by {shown}: identity {identity.id[:16]} "
                                                  f"({identity.pattern}) is revoked ({why})")
    chosen = most_specific(matching)
    assert chosen is not None
    return KeylessSigner(chosen.id, issuer, san, chosen.pattern)


def certificate_issuer(cert: Any) -> str | None:
    """The OIDC issuer a Fulcio certificate names (its v2 extension, else v1), or None."""
    from cryptography import x509

    for oid, der in ((_ISSUER_V2, True), (_ISSUER_V1, False)):
        try:
            raw = cert.extensions.get_extension_for_oid(x509.ObjectIdentifier(oid)).value.value
        except x509.ExtensionNotFound:
            continue
        text = _der_utf8(raw) if der else raw.decode("utf-8", errors="replace")
        if text:
            return text
    return None


def _der_utf8(raw: bytes) -> str | None:
    """A DER UTF8String's text (tag 0x0C, short or long length), or None."""
    if len(raw) < 2 or raw[0] != 0x0C:
        return None
    length, start = raw[1], 2
    if length & 0x80:
        count = length & 0x7F
        length, start = int.from_bytes(raw[2:2 + count], "big"), 2 + count
    body = raw[start:start + length]
    return body.decode("utf-8", errors="replace") if len(body) == length else None


def _san(cert: Any) -> str | None:
    """The certificate's one SAN: a URI or an e-mail address (Fulcio writes exactly one)."""
    from cryptography import x509

    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    found = [*names.get_values_for_type(x509.UniformResourceIdentifier), *names.get_values_for_type(x509.RFC822Name)]
    return found[0] if len(found) == 1 else None


def _check_payload(kind: str, signed: bytes, payload: bytes, name: str, where: str) -> None:
    if kind != IN_TOTO_PAYLOAD_TYPE:
        raise SigstoreError("statement", where, f"the bundle's payloadType is {kind[:100]!r}, "
                                                f"not {IN_TOTO_PAYLOAD_TYPE}")
    if signed == payload:
        return
    other = _statement_name(signed, where)
    if other is not None and canonicalize_name(other) != canonicalize_name(name):
        raise SigstoreError("swapped", where, f"the bundle signs a statement of {other[:100]!r}, not of {name}: "
                                              "a bundle taken from another distribution")
    theirs, ours = hashlib.sha256(signed).hexdigest()[:16], hashlib.sha256(payload).hexdigest()[:16]
    raise SigstoreError("statement", where, f"the bundle signs another statement than the manifest's (sha256 {theirs}, "
                                            f"the manifest's {ours})")


def _statement_name(signed: bytes, where: str) -> str | None:
    """The distribution a signed statement names, read within bounds; None if it names none."""
    from . import statement

    try:
        predicate = statement.load(signed, where).get("predicate")
    except TrustError:
        return None
    name = predicate.get("name") if isinstance(predicate, dict) else None
    return name if isinstance(name, str) else None


#: Trusted roots parsed in this process, by the sha256 of their bytes.
_PARSED: dict[str, Any] = {}


def _roots(store: TrustStore, where: str) -> list[tuple[str, Any]]:
    """The trusted roots to verify against: every pinned one, in order, else the shipped one."""
    if store.sigstore_roots:
        return [(path, _root(_read_root(path, where), path, where)) for path in store.sigstore_roots]
    import importlib.resources

    package, *parts = SHIPPED_ROOT
    try:
        data = importlib.resources.files(package).joinpath(*parts).read_bytes()
    except (OSError, ModuleNotFoundError) as exc:
        raise SigstoreError("root", where, f"no root pinned, and sigstore-python's own is unreadable: "
                                           f"{describe(exc)}") from None
    return [("sigstore-python's production root", _root(data, "sigstore-python's production root", where))]


def _read_root(path: str, where: str) -> bytes:
    from .paths import read_trust_file

    try:
        return read_trust_file(path, rewrite=True).encode("utf-8")
    except TrustError as exc:
        raise SigstoreError("root", where, f"the pinned root {path} is unreadable: {exc.detail}") from None


def _root(data: bytes, label: str, where: str) -> Any:
    key = hashlib.sha256(data).hexdigest()
    if key not in _PARSED:
        try:
            jsonlimits.loads(data, label, SigstoreError, limit=len(data) + 1)
        except SigstoreError as exc:
            raise SigstoreError("root", where, f"the trusted root {label} is not JSON: {exc.detail}") from None
        try:
            from sigstore.models import TrustedRoot
            from sigstore_models.trustroot.v1 import TrustedRoot as Inner

            _PARSED[key] = TrustedRoot(Inner.from_json(data))
        except Exception as exc:  # a root that is not one: every bundle fails, each with this reason
            raise SigstoreError("root", where, f"the trusted root {label} is not a Sigstore trusted root: "
                                               f"{describe(exc)}"[:500]) from None
    return _PARSED[key]


#: What sigstore's messages say, to the reason code (its exceptions are one class for all).
_KINDS = (
    ("expired", ("not valid at validation time", "expired at time of signing")),
    ("certificate", ("certificate", "cert ", "chain", "sct", "key usage", "extended usage", "x509")),
    ("timestamp", ("timestamp", "verified time")),
    ("tlog", ("log entry", "inclusion", "checkpoint", "set:", "rekor", "merkle", "tlog", "log index")),
    ("signature", ("dsse", "signature")),
)
_WHAT = {"expired": "the signing certificate was not valid when the signature was logged or stamped",
         "certificate": "the signing certificate does not hold", "timestamp": "no verified signing time",
         "tlog": "the transparency-log entry does not hold", "signature": "the bundle's signature does not hold",
         "bundle": "not a valid Sigstore bundle", "verify": "the bundle does not verify"}


def _classify(exc: BaseException) -> tuple[str, str]:
    """The reason code and its wording for an exception sigstore raised."""
    from sigstore.errors import CertValidationError
    from sigstore.models import InvalidBundle

    if isinstance(exc, InvalidBundle):
        return "bundle", _WHAT["bundle"]
    text = describe(exc, 1000).lower()
    if isinstance(exc, CertValidationError) and _KINDS[0][1][0] not in text:
        return "certificate", _WHAT["certificate"]
    code = next((code for code, words in _KINDS if any(w in text for w in words)), "verify")
    return code, _WHAT[code]
