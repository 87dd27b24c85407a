"""DSSE envelopes (Dead Simple Signing Envelope, v1) carrying the signed manifest.

Envelope: ``{"payload": <base64>, "payloadType": <str>, "signatures": [{"keyid", "sig"}]}``.
A signature covers the pre-authentication encoding (PAE) of the type and the payload::

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

with lengths in bytes as ASCII decimal. :func:`verify` checks signatures before anything
looks inside the payload and returns only the verified bytes, which are all a caller may
parse. An envelope with no signatures is a *hash-only* manifest: :func:`unverified_payload`
reads it for reports, and verification refuses it.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Callable

from ..base import ManifestError, SignatureError, jsonlimits, record
from .keys import TrustStore

__all__ = [
    "Envelope", "MAX_ENVELOPE_BYTES", "MAX_SIGNATURES", "PAYLOAD_TYPE", "Signature", "Verified", "decode", "encode",
    "pae", "unverified_payload", "verify",
]

#: Our own versioned media type; not in-toto's, so no other tool mistakes it for theirs.
PAYLOAD_TYPE = "application/vnd.triton-backend.statement.v1+json"
#: Envelopes bigger than this are refused unread (endless-data defence): a MAX_MANIFEST_BYTES
#: payload in base64 (4/3), and room for the signatures.
MAX_ENVELOPE_BYTES = 12 * 1024 * 1024
#: More signatures than any threshold needs is an attempt to make verification slow.
MAX_SIGNATURES = 64


@record(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@record(frozen=True)
class Envelope:
    payload: bytes
    payload_type: str
    signatures: tuple[Signature, ...]


@record(frozen=True)
class Verified:
    """Payload bytes whose signatures were checked, and the keys that signed them."""

    payload: bytes
    keyids: tuple[str, ...]


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def encode(envelope: Envelope) -> bytes:
    doc = {
        "payload": base64.b64encode(envelope.payload).decode("ascii"),
        "payloadType": envelope.payload_type,
        "signatures": [
            {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")} for s in envelope.signatures
        ],
    }
    return json.dumps(doc, sort_keys=True, indent=1).encode("ascii") + b"\n"


def decode(data: bytes, where: str, *,
           payload_limit: Callable[[tuple[Signature, ...]], tuple[int, str] | None] | None = None) -> Envelope:
    """Parse the envelope's outer JSON (not the payload), within size, depth and type bounds.

    ``payload_limit``, given the signatures, may answer ``(bytes, name of the cap)``: a bigger
    payload is refused (ManifestError ``manifest.limit``) before it is base64-decoded."""
    doc = jsonlimits.loads(data, where, SignatureError, limit=MAX_ENVELOPE_BYTES)
    if not isinstance(doc, dict):
        raise SignatureError("malformed", where, "not a DSSE envelope: not a JSON object")
    kind, payload, sigs = doc.get("payloadType"), doc.get("payload"), doc.get("signatures")
    if not isinstance(kind, str) or not isinstance(payload, str) or not isinstance(sigs, list):
        raise SignatureError("malformed", where, "not a DSSE envelope: payload, payloadType (strings) and "
                             "signatures (a list) are required")
    if len(sigs) > MAX_SIGNATURES:
        raise SignatureError("malformed", where, f"{len(sigs)} signatures; the limit is {MAX_SIGNATURES}")
    signatures = tuple(_signature(s, where) for s in sigs)
    limit = payload_limit(signatures) if payload_limit is not None else None
    size = len(payload) // 4 * 3 - payload[-2:].count("=")  # what it decodes to, when it is base64
    if limit is not None and size > limit[0]:
        raise ManifestError("limit", where, f"a payload of {size:,} bytes that no trusted key signed; the limit "
                            f"is {limit[0]:,} ({limit[1]})")
    return Envelope(_b64(payload, where), kind, signatures)


def _b64(text: str, where: str) -> bytes:
    try:
        if sys.version_info >= (3, 11):  # strict_mode: the alphabet checked in C, ~6x the regex's speed
            return binascii.a2b_base64(text, strict_mode=True)
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SignatureError("malformed", where, f"not a DSSE envelope: bad base64 ({exc})") from None


def _signature(item: object, where: str) -> Signature:
    if not isinstance(item, dict) or not isinstance(item.get("keyid"), str) or not isinstance(item.get("sig"), str):
        raise SignatureError("malformed", where, "not a DSSE envelope: a signature needs keyid and sig strings")
    return Signature(item["keyid"][:128], _b64(item["sig"], where))


def verify(envelope: Envelope, trust: TrustStore, where: str, also: tuple[str, ...] = ()) -> Verified:
    """Check the envelope against the trust store; return the payload only if it holds.

    Passes when at least ``trust.threshold`` distinct trusted, non-revoked keys signed it,
    counting ``also``: signers of this same payload already verified otherwise (a trusted
    identity's keyless signature, :mod:`.sigstorebundle`), listed after the keys.
    """
    if envelope.payload_type != PAYLOAD_TYPE:
        raise SignatureError("payload-type", where, f"payloadType {envelope.payload_type!r}, expected {PAYLOAD_TYPE!r}")
    if not envelope.signatures and not also:
        raise SignatureError("unsigned", where, "the manifest is not signed (hash-only)")
    message = pae(envelope.payload_type, envelope.payload)
    good: list[str] = []
    problems: list[str] = []
    checked: set[str] = set()
    for signature in envelope.signatures:
        if signature.keyid in checked:  # one check a key: 64 copies of one keyid cost 64 hashes of the payload
            continue
        checked.add(signature.keyid)
        problem = trust.check(signature.keyid, signature.sig, message)
        if problem is None:
            good.append(signature.keyid)
        else:
            problems.append(problem)
    good += [signer for signer in also if signer not in good]
    if len(good) < trust.threshold:
        detail = "; ".join(problems) or "no valid signature"
        raise SignatureError(
            "signature", where, f"{len(good)} of {trust.threshold} required signatures valid: {detail}"
        )
    return Verified(envelope.payload, tuple(good))


def unverified_payload(envelope: Envelope) -> bytes:
    """The payload without any check: for reports and hash-only manifests, never for trust."""
    return envelope.payload
