"""A local Sigstore for the tests: a Fulcio-like CA, a CT log, a Rekor-like log and a TSA, offline.

:func:`make_local_sigstore` derives every key from a seed (the same seed gives the same keys and
the same ``trusted_root.json``; another seed is another, untrusted, Sigstore) and writes a
``trusted_root.json`` in the protobuf-specs JSON form that ``sigstore.models.TrustedRoot.from_file``
reads. :meth:`LocalSigstore.sign_dsse` makes what Fulcio, the CT log and Rekor v1 would make
together for one DSSE signing, as a bundle v0.3 (JSON bytes) that sigstore-python 4.5.1's real
``Verifier`` accepts offline:

- a short-lived leaf certificate (empty subject, critical SAN, code-signing EKU, the Fulcio OIDC
  issuer extensions 1.3.6.1.4.1.57264.1.1 and .1.8) issued by the intermediate (or the root);
- an embedded SCT (RFC 6962 section 3.2) signed by the CT log key over the precertificate TBS,
  which is the final TBS without the SCT extension, as sigstore rebuilds it;
- a DSSE envelope (in-toto payload type) signed with the leaf key over PAE;
- a Rekor v1 ``dsse/0.0.1`` entry: canonical body, integrated time, an inclusion promise (SET)
  and an inclusion proof in a small RFC 6962 Merkle tree, with a checkpoint signed note whose
  key hint is the first four bytes of the log ID, as sigstore-python checks it;
- with ``timestamped_at``, an RFC 3161 signed timestamp over the signature from the local TSA
  (``rfc3161.py`` builds it), the other source of verified time sigstore accepts.

Signatures are deterministic (RFC 6979 ECDSA), so a bundle is a pure function of the seed and
the arguments. Each :class:`Tamper` breaks one thing, so that a test can show a failure for its
own reason; an expired certificate is ``integrated_at`` (or ``timestamped_at``) outside the
certificate's validity. sigstore skips a signed timestamp it cannot verify when another source
of time (the inclusion promise) remains, so ``Tamper.TIMESTAMP_KEY`` shows only with ``NO_PROMISE``.

Every URL in the trust root is under ``.test`` (never resolves): sigstore's offline verification
needs none of them. Not built: Rekor v2 ``hashedrekord/0.0.2`` entries, message-signature
(non-DSSE) bundles, and Fulcio's GitHub workflow extensions (1.3.6.1.4.1.57264.1.2-.22).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from helpers.rfc3161 import der, timestamp_response

if TYPE_CHECKING:
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
TRUSTED_ROOT_MEDIA_TYPE = "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
TRUSTED_ROOT_FILENAME = "trusted_root.json"

#: A GitHub Actions-like identity and issuer, for tests that do not care which.
TEST_IDENTITY = "https://github.com/vendor/backend/.github/workflows/release.yml@refs/tags/v1.0.0"
TEST_ISSUER = "https://token.actions.githubusercontent.com"

#: Signing time when none is given: fixed, so bundles are reproducible; inside the CA's validity.
DEFAULT_SIGNED_AT = datetime(2026, 1, 15, 12, 0, 0, tzinfo=timezone.utc)
CA_NOT_BEFORE = datetime(2025, 1, 1, tzinfo=timezone.utc)
CA_NOT_AFTER = datetime(2035, 1, 1, tzinfo=timezone.utc)

_OIDC_ISSUER_OID = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_OIDC_ISSUER_V2_OID = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SCT_LIST_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_SHA256 = hashes.SHA256()


class Tamper(Enum):
    """One thing :meth:`LocalSigstore.sign_dsse` breaks on purpose."""

    PROOF_HASH = "proof-hash"  # one hash of the inclusion proof altered
    CHECKPOINT_ROOT = "checkpoint-root"  # the checkpoint signs another tree's root
    CHECKPOINT_KEY = "checkpoint-key"  # the checkpoint is signed by a key the root does not list
    PROMISE_KEY = "promise-key"  # the inclusion promise (SET) is signed by a stranger
    NO_PROMISE = "no-promise"  # no inclusion promise and no signed timestamp: no verified time
    SCT_KEY = "sct-key"  # the embedded SCT is signed by a CT log the root does not list
    NO_SCT = "no-sct"  # the leaf certificate has no SCT extension
    UNTRUSTED_CA = "untrusted-ca"  # the leaf is issued by a CA outside the trust root
    NO_CODE_SIGNING = "no-code-signing"  # the leaf's EKU lacks code signing
    PAYLOAD_SWAPPED = "payload-swapped"  # the envelope's payload replaced after signing
    ENVELOPE_RESIGNED = "envelope-resigned"  # payload replaced and re-signed; the log keeps the first
    TIMESTAMP_KEY = "timestamp-key"  # the signed timestamp comes from a TSA the root does not list


@dataclass(frozen=True)
class Authority:
    """A certificate and the key that signs as it."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate


@dataclass(frozen=True)
class LocalSigstore:
    """A seeded Sigstore: CA chain, Rekor-like log key, CT log key, and the trust root naming them."""

    seed: str
    trusted_root_path: Path
    root: Authority
    intermediate: Authority | None
    rekor_key: ec.EllipticCurvePrivateKey
    ct_key: ec.EllipticCurvePrivateKey
    tsa_root: Authority | None
    tsa: Authority | None
    log_name: str = "rekor.local.test"

    @property
    def issuer(self) -> Authority:
        """The authority that issues leaf certificates."""
        return self.intermediate or self.root

    def trusted_root(self) -> TrustedRoot:
        """The trust root as sigstore reads it from disk."""
        from sigstore.models import TrustedRoot

        return TrustedRoot.from_file(str(self.trusted_root_path))

    def verifier(self) -> Verifier:
        """sigstore's own offline verifier over this trust root."""
        from sigstore.verify import Verifier

        return Verifier(trusted_root=self.trusted_root())

    def sign_dsse(
        self,
        payload: bytes,
        *,
        identity: str,
        issuer: str,
        signed_at: datetime = DEFAULT_SIGNED_AT,
        lifetime: timedelta = timedelta(minutes=10),
        integrated_at: datetime | None = None,
        timestamped_at: datetime | None = None,
        payload_type: str = IN_TOTO_PAYLOAD_TYPE,
        tree_size: int = 5,
        log_index: int = 3,
        tamper: Tamper | Iterable[Tamper] = (),
    ) -> bytes:
        """A bundle v0.3 (JSON bytes) of a DSSE envelope of ``payload``, signed for ``identity``
        (the SAN: a URI, or an email when it has ``@`` and no ``:``) as issued by ``issuer``.

        The leaf is valid from ``signed_at`` for ``lifetime``; the log integrates the entry at
        ``integrated_at`` (default: 30 s after ``signed_at``), as entry ``log_index`` of a tree
        of ``tree_size`` leaves; with ``timestamped_at``, the TSA stamps the signature then.
        ``tamper`` breaks one thing, or several at once."""
        if not 0 <= log_index < tree_size:
            raise ValueError(f"log_index {log_index} outside a tree of {tree_size}")
        tag = hashlib.sha256(b"\0".join([payload, identity.encode(), issuer.encode(), _iso(signed_at).encode()]))
        leaf_key = _derive_key(self.seed, "leaf/" + tag.hexdigest())
        broken = frozenset([tamper] if isinstance(tamper, Tamper) else tamper)
        certificate = self._leaf_certificate(leaf_key, identity, issuer, signed_at, lifetime, broken)
        envelope = _envelope(leaf_key, payload_type, payload)
        logged = envelope
        if broken & {Tamper.PAYLOAD_SWAPPED, Tamper.ENVELOPE_RESIGNED}:
            resign = leaf_key if Tamper.ENVELOPE_RESIGNED in broken else None
            envelope = _swap_payload(envelope, payload + b"\n", resign)
        when = integrated_at or signed_at + timedelta(seconds=30)
        entry = self._tlog_entry(_dsse_body(logged, certificate), when, tree_size, log_index, broken)
        bundle = {
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {
                "certificate": {"rawBytes": _b64(certificate.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [entry],
                "timestampVerificationData": self._timestamps(envelope, timestamped_at, broken),
            },
            "dsseEnvelope": envelope,
        }
        return json.dumps(bundle, indent=1).encode()

    def _timestamps(self, envelope: dict[str, Any], when: datetime | None, broken: frozenset[Tamper]) -> dict[str, Any]:
        if when is None:
            return {}
        tsa = _make_tsa(self.seed + "/stranger", None) if Tamper.TIMESTAMP_KEY in broken else self.tsa
        if tsa is None:
            raise ValueError("timestamped_at needs a LocalSigstore made with tsa=True")
        signature = base64.b64decode(envelope["signatures"][0]["sig"])
        serial = int.from_bytes(hashlib.sha256(signature).digest()[:8], "big")
        response = timestamp_response(tsa.key, tsa.certificate, signature, when, serial)
        return {"rfc3161Timestamps": [{"signedTimestamp": _b64(response)}]}

    def _leaf_certificate(
        self,
        key: ec.EllipticCurvePrivateKey,
        identity: str,
        issuer: str,
        signed_at: datetime,
        lifetime: timedelta,
        broken: frozenset[Tamper],
    ) -> x509.Certificate:
        authority = self.issuer
        if Tamper.UNTRUSTED_CA in broken:
            authority = _make_authority(self.seed + "/stranger", "stranger", None)
        usage = (
            ExtendedKeyUsageOID.CLIENT_AUTH if Tamper.NO_CODE_SIGNING in broken else ExtendedKeyUsageOID.CODE_SIGNING
        )
        name: x509.GeneralName = (
            x509.RFC822Name(identity)
            if "@" in identity and ":" not in identity
            else x509.UniformResourceIdentifier(identity)
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(authority.certificate.subject)
            .public_key(key.public_key())
            .serial_number(_serial(self.seed, "leaf", key))
            .not_valid_before(signed_at)
            .not_valid_after(signed_at + lifetime)
            .add_extension(_key_usage(digital_signature=True), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(_authority_key_id(authority), critical=False)
            .add_extension(x509.SubjectAlternativeName([name]), critical=True)
            .add_extension(x509.UnrecognizedExtension(_OIDC_ISSUER_OID, issuer.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(_OIDC_ISSUER_V2_OID, _der_utf8(issuer)), critical=False)
        )
        precertificate = _sign_certificate(builder, authority.key)
        if Tamper.NO_SCT in broken:
            return precertificate
        ct_key = _derive_key(self.seed, "stranger-ct") if Tamper.SCT_KEY in broken else self.ct_key
        sct = _sct_extension(precertificate.tbs_certificate_bytes, authority.certificate, ct_key, signed_at)
        return _sign_certificate(builder.add_extension(sct, critical=False), authority.key)

    def _tlog_entry(
        self, body: bytes, integrated_at: datetime, tree_size: int, log_index: int, broken: frozenset[Tamper]
    ) -> dict[str, Any]:
        log_id = _key_id(self.rekor_key.public_key())
        leaves = [_leaf_hash(f"{self.seed} other entry {i}".encode()) for i in range(tree_size)]
        leaves[log_index] = _leaf_hash(body)
        root_hash = _tree_hash(leaves)
        proof = _audit_path(log_index, leaves)
        if Tamper.PROOF_HASH in broken:
            if not proof:
                raise ValueError("Tamper.PROOF_HASH needs a tree of more than one leaf")
            proof[0] = hashlib.sha256(proof[0]).digest()
        signed_root = hashlib.sha256(root_hash).digest() if Tamper.CHECKPOINT_ROOT in broken else root_hash
        checkpoint_key = _derive_key(self.seed, "stranger-rekor") if Tamper.CHECKPOINT_KEY in broken else self.rekor_key
        integrated_time = int(integrated_at.timestamp())
        entry: dict[str, Any] = {
            "logIndex": str(log_index),
            "logId": {"keyId": _b64(log_id)},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionProof": {
                "logIndex": str(log_index),
                "rootHash": _b64(root_hash),
                "treeSize": str(tree_size),
                "hashes": [_b64(h) for h in proof],
                "checkpoint": {"envelope": self._checkpoint(checkpoint_key, log_id, tree_size, signed_root)},
            },
            "canonicalizedBody": _b64(body),
        }
        if Tamper.NO_PROMISE not in broken:
            promise_key = _derive_key(self.seed, "stranger-rekor") if Tamper.PROMISE_KEY in broken else self.rekor_key
            promise = _canonical(
                {"body": _b64(body), "integratedTime": integrated_time, "logID": log_id.hex(), "logIndex": log_index}
            )
            entry["inclusionPromise"] = {"signedEntryTimestamp": _b64(_ecdsa(promise_key, promise))}
        return entry

    def _checkpoint(self, key: ec.EllipticCurvePrivateKey, log_id: bytes, size: int, root_hash: bytes) -> str:
        """A signed note (transparency-dev checkpoint); sigstore-python matches its key hint to
        the first four bytes of the entry's log ID."""
        note = f"{self.log_name} - {int.from_bytes(log_id[:8], 'big')}\n{size}\n{_b64(root_hash)}\n"
        signature = _b64(log_id[:4] + _ecdsa(key, note.encode()))
        return f"{note}\n\u2014 {self.log_name} {signature}\n"


def make_local_sigstore(
    directory: Path, *, seed: str = "local", intermediate: bool = True, tsa: bool = True
) -> LocalSigstore:
    """Derive a Sigstore from ``seed`` and write its ``trusted_root.json`` into ``directory``;
    ``tsa`` adds a timestamp authority (used only by bundles that carry a signed timestamp)."""
    root = _make_authority(seed, "root", None)
    middle = _make_authority(seed, "intermediate", root) if intermediate else None
    tsa_root = _make_authority(seed, "tsa-root", None) if tsa else None
    local = LocalSigstore(
        seed=seed,
        trusted_root_path=directory / TRUSTED_ROOT_FILENAME,
        root=root,
        intermediate=middle,
        rekor_key=_derive_key(seed, "rekor"),
        ct_key=_derive_key(seed, "ct"),
        tsa_root=tsa_root,
        tsa=_make_tsa(seed, tsa_root) if tsa_root else None,
    )
    directory.mkdir(parents=True, exist_ok=True)
    local.trusted_root_path.write_text(json.dumps(_trusted_root(local), indent=1) + "\n")
    return local


def pep740_provenance(local: LocalSigstore, filename: str, sha256: str, *, identity: str = TEST_IDENTITY,
                      issuer: str = TEST_ISSUER, repository: str = "vendor/backend") -> bytes:
    """A PEP 740 provenance object (JSON bytes, as PyPI serves it) holding one publish
    attestation of the file ``filename`` of ``sha256``: an in-toto Statement v1 signed by
    ``local`` for ``identity``, converted by pypi-attestations, with a GitHub publisher."""
    from pypi_attestations import Attestation, AttestationBundle, GitHubPublisher, Provenance
    from sigstore.models import Bundle

    statement = {"_type": "https://in-toto.io/Statement/v1",
                 "subject": [{"name": filename, "digest": {"sha256": sha256}}],
                 "predicateType": "https://docs.pypi.org/attestations/publish/v1", "predicate": None}
    bundle = Bundle.from_json(local.sign_dsse(json.dumps(statement).encode(), identity=identity, issuer=issuer))
    publisher = GitHubPublisher(repository=repository, workflow="release.yml")
    attestations = [Attestation.from_bundle(bundle)]
    provenance = Provenance(attestation_bundles=[AttestationBundle(publisher=publisher, attestations=attestations)])
    return provenance.model_dump_json().encode()


def _trusted_root(local: LocalSigstore) -> dict[str, Any]:
    chain = [a for a in (local.intermediate, local.root) if a is not None]
    authorities = []
    if local.tsa and local.tsa_root:
        authorities.append(_authority_entry("tsa", "https://tsa.local.test", [local.tsa, local.tsa_root]))
    return {
        "mediaType": TRUSTED_ROOT_MEDIA_TYPE,
        "tlogs": [_log_instance("https://rekor.local.test", local.rekor_key)],
        "certificateAuthorities": [_authority_entry("root", "https://fulcio.local.test", chain)],
        "ctlogs": [_log_instance("https://ctfe.local.test", local.ct_key)],
        "timestampAuthorities": authorities,
    }


def _authority_entry(name: str, uri: str, chain: list[Authority]) -> dict[str, Any]:
    """A protobuf-specs CertificateAuthority: the chain from leaf (or intermediate) to root."""
    return {
        "subject": {"organization": "local-sigstore.test", "commonName": name},
        "uri": uri,
        "certChain": {
            "certificates": [{"rawBytes": _b64(a.certificate.public_bytes(serialization.Encoding.DER))} for a in chain]
        },
        "validFor": {"start": _iso(CA_NOT_BEFORE)},
    }


def _log_instance(url: str, key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "baseUrl": url,
        "hashAlgorithm": "SHA2_256",
        "publicKey": {
            "rawBytes": _b64(spki),
            "keyDetails": "PKIX_ECDSA_P256_SHA_256",
            "validFor": {"start": _iso(CA_NOT_BEFORE)},
        },
        "logId": {"keyId": _b64(_key_id(key.public_key()))},
    }


def _make_authority(seed: str, role: str, parent: Authority | None) -> Authority:
    """A CA certificate shaped like Fulcio's: the root self-signed, the intermediate under it."""
    key = _derive_key(seed, role)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "local-sigstore.test"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"{seed} {role}"),
        ]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(parent.certificate.subject if parent else subject)
        .public_key(key.public_key())
        .serial_number(_serial(seed, role, key))
        .not_valid_before(CA_NOT_BEFORE)
        .not_valid_after(CA_NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0 if parent else 1), critical=True)
        .add_extension(_key_usage(key_cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if parent:
        builder = builder.add_extension(_authority_key_id(parent), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    return Authority(key, _sign_certificate(builder, parent.key if parent else key))


def _make_tsa(seed: str, root: Authority | None) -> Authority:
    """A timestamping leaf as RFC 3161 2.3 wants it (sole, critical EKU id-kp-timeStamping),
    under ``root``, or self-issued when there is none (a stranger)."""
    key = _derive_key(seed, "tsa")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{seed} tsa")])
    issuer = root or _make_authority(seed, "tsa-root", None)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.certificate.subject)
        .public_key(key.public_key())
        .serial_number(_serial(seed, "tsa", key))
        .not_valid_before(CA_NOT_BEFORE)
        .not_valid_after(CA_NOT_AFTER)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_id(issuer), critical=False)
    )
    return Authority(key, _sign_certificate(builder, issuer.key))


def _sct_extension(
    tbs_precertificate: bytes, issuer: x509.Certificate, ct_key: ec.EllipticCurvePrivateKey, when: datetime
) -> x509.UnrecognizedExtension:
    """An embedded SCT list (RFC 6962 3.2-3.3) for a precertificate entry, built as raw DER
    because cryptography parses SCTs but does not build them."""
    timestamp = int(when.timestamp()) * 1000
    issuer_key_hash = _key_id(issuer.public_key())
    signed = (
        struct.pack("!BBQH", 0, 0, timestamp, 1)  # v1, certificate_timestamp, time, precert_entry
        + issuer_key_hash
        + len(tbs_precertificate).to_bytes(3, "big")
        + tbs_precertificate
        + struct.pack("!H", 0)  # no extensions
    )
    signature = _ecdsa(ct_key, signed)
    sct = (
        struct.pack("!B", 0)
        + _key_id(ct_key.public_key())
        + struct.pack("!QH", timestamp, 0)
        + struct.pack("!BBH", 4, 3, len(signature))  # sha256, ecdsa
        + signature
    )
    serialized = struct.pack("!H", len(sct)) + sct
    return x509.UnrecognizedExtension(_SCT_LIST_OID, der(0x04, struct.pack("!H", len(serialized)) + serialized))


def _envelope(key: ec.EllipticCurvePrivateKey, payload_type: str, payload: bytes) -> dict[str, Any]:
    signature = _ecdsa(key, _pae(payload_type, payload))
    return {"payload": _b64(payload), "payloadType": payload_type, "signatures": [{"sig": _b64(signature)}]}


def _swap_payload(envelope: dict[str, Any], payload: bytes, key: ec.EllipticCurvePrivateKey | None) -> dict[str, Any]:
    """The envelope with another payload: its old signature kept, or a new one by ``key``."""
    if key is not None:
        return _envelope(key, envelope["payloadType"], payload)
    return {**envelope, "payload": _b64(payload)}


def _dsse_body(envelope: dict[str, Any], certificate: x509.Certificate) -> bytes:
    """The canonical Rekor ``dsse/0.0.1`` entry body for an envelope signed by ``certificate``."""
    payload = base64.b64decode(envelope["payload"])
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    return _canonical(
        {
            "apiVersion": "0.0.1",
            "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(_canonical(envelope)).hexdigest()},
                "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
                "signatures": [{"signature": s["sig"], "verifier": _b64(pem)} for s in envelope["signatures"]],
            },
        }
    )


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _split(size: int) -> int:
    """The largest power of two below ``size`` (RFC 6962 2.1)."""
    return 1 << ((size - 1).bit_length() - 1)


def _tree_hash(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return hashlib.sha256(b"\x01" + _tree_hash(leaves[:k]) + _tree_hash(leaves[k:])).digest()


def _audit_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 PATH(m, D[n]), leaf level first."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return _audit_path(index, leaves[:k]) + [_tree_hash(leaves[k:])]
    return _audit_path(index - k, leaves[k:]) + [_tree_hash(leaves[:k])]


def _derive_key(seed: str, label: str) -> ec.EllipticCurvePrivateKey:
    digest = hashlib.sha256(f"{seed}/{label}".encode()).digest()
    return ec.derive_private_key(int.from_bytes(digest, "big") % (_P256_ORDER - 1) + 1, ec.SECP256R1())


def _serial(seed: str, role: str, key: ec.EllipticCurvePrivateKey) -> int:
    digest = hashlib.sha256(f"{seed}/{role}/".encode() + _key_id(key.public_key())).digest()
    return int.from_bytes(digest[:16], "big") | 1


def _key_id(key: PublicKeyTypes) -> bytes:
    """RFC 6962 key ID: sha256 of the DER SubjectPublicKeyInfo (sigstore's log and CT key IDs)."""
    return hashlib.sha256(
        key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    ).digest()


def _key_usage(*, digital_signature: bool = False, key_cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=key_cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _authority_key_id(authority: Authority) -> x509.AuthorityKeyIdentifier:
    ski = authority.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _sign_certificate(builder: x509.CertificateBuilder, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    return builder.sign(key, _SHA256, ecdsa_deterministic=True)


def _ecdsa(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    return key.sign(data, ec.ECDSA(_SHA256, deterministic_signing=True))


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(payload), payload)


def _der_utf8(text: str) -> bytes:
    return der(0x0C, text.encode())


def _canonical(value: Any) -> bytes:
    """RFC 8785 JSON for the ASCII strings and integers used here (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
