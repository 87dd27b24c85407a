"""RFC 3161 timestamp responses for the tests, built as DER by hand.

cryptography and rfc3161-client parse and verify timestamp responses but neither issues one, so
the local Sigstore (``sigstoreca.py``) builds its TSA's answers here: a granted ``TimeStampResp``
whose token is a CMS SignedData (RFC 5652) over a ``TSTInfo``, with signed attributes
(content type, message digest), ECDSA P-256 with SHA-256, and the TSA certificate embedded.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

_SHA256_OID = "2.16.840.1.101.3.4.2.1"
_ECDSA_SHA256_OID = "1.2.840.10045.4.3.2"
_SIGNED_DATA_OID = "1.2.840.113549.1.7.2"
_TST_INFO_OID = "1.2.840.113549.1.9.16.1.4"
_CONTENT_TYPE_OID = "1.2.840.113549.1.9.3"
_MESSAGE_DIGEST_OID = "1.2.840.113549.1.9.4"
#: A TSA policy under the example enterprise number of RFC 5612.
TEST_POLICY_OID = "1.3.6.1.4.1.32473.1"


def timestamp_response(
    key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate, message: bytes, when: datetime, serial: int
) -> bytes:
    """A granted TimeStampResp (RFC 3161 2.4.2) stamping sha256(``message``) at ``when``."""
    tst_info = sequence(
        integer(1),
        oid(TEST_POLICY_OID),
        sequence(_algorithm(_SHA256_OID), octets(hashlib.sha256(message).digest())),
        integer(serial),
        der(0x18, when.astimezone(timezone.utc).strftime("%Y%m%d%H%M%SZ").encode()),
    )
    token = sequence(oid(_SIGNED_DATA_OID), der(0xA0, _signed_data(key, certificate, tst_info)))
    return sequence(sequence(integer(0)), token)


def _signed_data(key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate, tst_info: bytes) -> bytes:
    attributes = sorted(
        [
            sequence(oid(_CONTENT_TYPE_OID), der(0x31, oid(_TST_INFO_OID))),
            sequence(oid(_MESSAGE_DIGEST_OID), der(0x31, octets(hashlib.sha256(tst_info).digest()))),
        ]
    )
    # The signature covers the attributes encoded as a SET; the SignerInfo carries them [0] IMPLICIT.
    signature = key.sign(der(0x31, b"".join(attributes)), ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    issuer_and_serial = sequence(certificate.issuer.public_bytes(), integer(certificate.serial_number))
    signer_info = sequence(
        integer(1),
        issuer_and_serial,
        _algorithm(_SHA256_OID),
        der(0xA0, b"".join(attributes)),
        _algorithm(_ECDSA_SHA256_OID),
        octets(signature),
    )
    return sequence(
        integer(3),
        der(0x31, _algorithm(_SHA256_OID)),
        sequence(oid(_TST_INFO_OID), der(0xA0, octets(tst_info))),
        der(0xA0, certificate.public_bytes(serialization.Encoding.DER)),
        der(0x31, signer_info),
    )


def _algorithm(dotted: str) -> bytes:
    return sequence(oid(dotted))


def der(tag: int, content: bytes) -> bytes:
    """One DER TLV (single-byte tags only)."""
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def sequence(*parts: bytes) -> bytes:
    return der(0x30, b"".join(parts))


def octets(data: bytes) -> bytes:
    return der(0x04, data)


def integer(value: int) -> bytes:
    """A non-negative INTEGER, minimal two's complement."""
    return der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def oid(dotted: str) -> bytes:
    first, second, *rest = (int(arc) for arc in dotted.split("."))
    body = bytearray()
    for arc in [40 * first + second, *rest]:
        chunk = [arc & 0x7F]
        while arc := arc >> 7:
            chunk.append(0x80 | (arc & 0x7F))
        body.extend(reversed(chunk))
    return der(0x06, bytes(body))
