"""Trusted public keys: Ed25519, raw 32-byte keys, keyids by the TUF convention.

A public key is one line of text::

    ed25519 <base64 of the raw 32-byte key> <keyid> [comment...]

where ``keyid`` is the hex sha256 of the raw key bytes. Raw keys keep PEM parsing (and the
~55 ms import of ``cryptography``'s serialization module) off the import path of Triton;
only the ed25519 module is imported, and only when a signature is actually checked.

A :class:`TrustStore` holds keys, a threshold (how many distinct trusted keys must sign;
default 1) and revoked keyids, which are refused even when their key is present.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import TrustStoreError
from .trustpaths import TRUSTED_KEYS_ENV, system_trust_dir, trust_sources, user_trust_dir

__all__ = [
    "TRUSTED_KEYS_ENV", "PublicKey", "TrustStore", "keyid_of", "load_trust_store", "parse_key_file", "parse_key_line",
    "system_trust_dir", "trust_sources", "user_trust_dir",
]

KEY_ALGORITHM = "ed25519"


def keyid_of(raw: bytes) -> str:
    """TUF-style keyid: hex sha256 of the raw public key bytes."""
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class PublicKey:
    keyid: str
    raw: bytes
    comment: str = ""
    source: str = ""

    def line(self) -> str:
        text = f"{KEY_ALGORITHM} {base64.b64encode(self.raw).decode('ascii')} {self.keyid}"
        return f"{text} {self.comment}".rstrip()


def parse_key_line(line: str, where: str) -> PublicKey:
    """Parse one public-key line; the keyid must match the key it names."""
    parts = line.split(maxsplit=3)
    if len(parts) < 3 or parts[0] != KEY_ALGORITHM:
        raise TrustStoreError("key-format", where, f"expected '{KEY_ALGORITHM} <base64 key> <keyid> [comment]'")
    try:
        raw = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise TrustStoreError("key-format", where, "the key is not valid base64") from None
    if len(raw) != 32:
        raise TrustStoreError("key-format", where, f"an Ed25519 key is 32 bytes, this one is {len(raw)}")
    if parts[2] != keyid_of(raw):
        raise TrustStoreError("keyid", where, f"keyid {parts[2]} does not match the key (sha256 is {keyid_of(raw)})")
    return PublicKey(parts[2], raw, parts[3] if len(parts) > 3 else "", where)


def parse_key_file(text: str, where: str) -> list[PublicKey]:
    """Every non-blank, non-comment line of a key file."""
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            keys.append(parse_key_line(line.strip(), f"{where}:{number}"))
    return keys


@dataclass
class TrustStore:
    keys: dict[str, PublicKey] = field(default_factory=dict)
    threshold: int = 1
    revoked: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, keys: list[PublicKey], threshold: int = 1, revoked: set[str] | None = None) -> TrustStore:
        return cls({k.keyid: k for k in keys}, threshold, set(revoked or ()))

    def check(self, keyid: str, signature: bytes, message: bytes) -> str | None:
        """None when ``signature`` by ``keyid`` over ``message`` is good; else why not."""
        if keyid in self.revoked:
            return f"key {keyid[:16]} is revoked"
        key = self.keys.get(keyid)
        if key is None:
            return f"key {keyid[:16]} is not trusted"
        # Imported here: ~25 ms, paid only when a signature is actually checked.
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(key.raw).verify(signature, message)
        except InvalidSignature:
            return f"signature by key {keyid[:16]} does not match the manifest"
        return None


def load_trust_store(env: Mapping[str, str] | None = None) -> tuple[TrustStore, list[TrustStoreError]]:
    """The trust store from every location, and the problems met on the way.

    A bad file is reported and skipped rather than raised: one broken key file must not
    stop the keys in the others from working (a missing key only ever refuses more).
    """
    keys: list[PublicKey] = []
    revoked: set[str] = set()
    threshold = 1
    problems: list[TrustStoreError] = []
    for path in trust_sources(env):
        try:
            text = _read_text(path)
            base = os.path.basename(path)
            if base == "revoked":
                revoked |= {line.split()[0] for line in text.splitlines() if line.strip() and line[0] != "#"}
            elif base == "threshold":
                threshold = max(threshold, _threshold(text, path))
            else:
                keys += parse_key_file(text, path)
        except TrustStoreError as exc:
            problems.append(exc)
    return TrustStore.of(keys, threshold, revoked), problems


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read(1024 * 1024)
    except (OSError, UnicodeDecodeError) as exc:
        raise TrustStoreError("read", path, f"cannot read trust file: {exc}") from None


def _threshold(text: str, path: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise TrustStoreError("threshold", path, f"threshold must be a positive integer, found {text.strip()!r}")
    return value
