"""Trusted public keys: Ed25519, raw 32-byte keys, keyids by the TUF convention.

A public key is one line of text::

    ed25519 <base64 of the raw 32-byte key> <keyid> [comment...]

where ``keyid`` is the hex sha256 of the raw key bytes. Raw keys keep PEM parsing (and the
~55 ms import of ``cryptography``'s serialization module) off the import path of Triton;
only the ed25519 module is imported, and only when a signature is actually checked.

A :class:`TrustStore` (:func:`load_trust_store` reads every trust location) holds keys, a
threshold (how many distinct trusted keys must sign; default 1), revoked keyids, which are
refused even when their key is present, and, after TUF's delegations, local state a signature
alone cannot carry:

- *scopes* (``scopes`` files): the distributions a key may sign and the names it may
  declare (:mod:`.scopes`);
- *floors* (``min-versions`` files): the lowest release of a distribution admitted
  (:mod:`.floors`);
- *pins* (``pins`` files): the distribution that owns a contested name (:mod:`.pins`);
- *identities* (``identities`` files): who may sign keylessly, with Sigstore, each under an id
  that scopes and revocations name as they name a keyid (:mod:`.identities`), and the pinned
  Sigstore trusted roots (``sigstore-root.json``) their bundles are verified against.

They apply after the signature verified and the payload was parsed (:mod:`.delegation`).
Merging never weakens: a key scoped in several places gets the intersection, a name with
several floors the highest, a name pinned to two distributions neither.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import field

from ..base import TrustStoreError, record
from .floors import Floor, parse_floors
from .identities import Identity, parse_identities
from .paths import (
    FLOORS_FILE,
    IDENTITIES_FILE,
    PINS_FILE,
    REVOKED_FILE,
    SCOPES_FILE,
    SIGSTORE_ROOT_FILE,
    THRESHOLD_FILE,
    trust_sources,
)
from .paths import read_trust_file as _read_text
from .pins import Pin, merge_pins, parse_pins
from .scopes import Scope, parse_scopes

__all__ = [
    "KEY_ALGORITHM", "MAX_THRESHOLD_DIGITS", "PublicKey", "TrustStore", "keyid_of", "load_trust_store",
    "parse_key_file", "parse_key_line"
]

KEY_ALGORITHM = "ed25519"
#: Digits of a threshold: more signatures than a DSSE envelope may carry (64) already fail closed.
MAX_THRESHOLD_DIGITS = 6


def keyid_of(raw: bytes) -> str:
    """TUF-style keyid: hex sha256 of the raw public key bytes."""
    return hashlib.sha256(raw).hexdigest()


@record(frozen=True)
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


@record()
class TrustStore:
    keys: dict[str, PublicKey] = field(default_factory=dict)
    threshold: int = 1
    #: Revoked keyids, or prefixes of them of 16 hex digits or more (:mod:`.revocation`).
    revoked: set[str] = field(default_factory=set)
    #: keyid -> the names it may sign; a keyid absent here may sign any name.
    scopes: dict[str, Scope] = field(default_factory=dict)
    #: normalised distribution name -> its rollback floor.
    floors: dict[str, Floor] = field(default_factory=dict)
    #: (kind, name) -> the distribution that owns it where it is contested.
    pins: dict[tuple[str, str], Pin] = field(default_factory=dict)
    #: Revoked id -> the ``file:line`` revoking it.
    revoked_at: dict[str, str] = field(default_factory=dict)
    #: Where a revocation could not be read (``file:line``, or a file): while any, no key counts.
    revocations_unreadable: list[str] = field(default_factory=list)
    #: Identity id -> the trusted Sigstore identity (:mod:`.identities`).
    identities: dict[str, Identity] = field(default_factory=dict)
    #: The pinned Sigstore trusted roots (``sigstore-root.json`` files), in trust-source order;
    #: none: the root sigstore-python ships.
    sigstore_roots: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls, keys: list[PublicKey], threshold: int = 1, revoked: set[str] | None = None,
        scopes: Mapping[str, Scope] | None = None, floors: Mapping[str, Floor] | None = None,
    ) -> TrustStore:
        revoked = {r.lower() for r in revoked or ()}
        return cls({k.keyid: k for k in keys}, threshold, revoked, dict(scopes or {}), dict(floors or {}))

    def check(self, keyid: str, signature: bytes, message: bytes) -> str | None:
        """None when ``signature`` by ``keyid`` over ``message`` is good; else why not."""
        if self.revocations_unreadable:
            return self.suspended()
        revoked = self.revoked_by(keyid)
        if revoked is not None:
            return f"key {keyid[:16]} is revoked ({revoked} in {self.revoked_at.get(revoked, 'the trust store')})"
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

    def revoked_by(self, keyid: str) -> str | None:
        """The revoked id (``keyid`` or a prefix of it) that revokes ``keyid``; None if none does."""
        from .revocation import revoking

        return revoking(self.revoked, keyid) if self.revoked else None

    def suspended(self) -> str | None:
        """Why no key counts (a revocation that could not be read: fail closed), or None."""
        if not self.revocations_unreadable:
            return None
        return (f"the revocation list is unreadable ({', '.join(self.revocations_unreadable[:3])}): no key "
                "counts until it is fixed")

    def merge_scopes(self, scopes: Mapping[str, Scope]) -> None:
        for keyid, scope in scopes.items():
            self.scopes[keyid] = self.scopes[keyid].narrow(scope) if keyid in self.scopes else scope

    def merge_floors(self, floors: Mapping[str, Floor]) -> None:
        for name, floor in floors.items():
            self.floors[name] = self.floors[name].higher(floor) if name in self.floors else floor

    def merge_pins(self, pins: Mapping[tuple[str, str], Pin]) -> list[TrustStoreError]:
        """Add ``pins``; the names now pinned to two distributions (from two files) are reported."""
        return merge_pins(self.pins, pins)

    def label(self, keyid: str) -> str:
        identity = self.identities.get(keyid)
        if identity is not None:
            return f"identity {identity.describe()}"
        key = self.keys.get(keyid)
        return f"{keyid[:16]} ({key.comment})" if key is not None and key.comment else keyid[:16]


def load_trust_store(env: Mapping[str, str] | None = None) -> tuple[TrustStore, list[TrustStoreError]]:
    """The trust store from every location, and the problems met on the way.

    A bad file is reported and skipped rather than raised: one broken key file must not
    stop the keys in the others from working (a missing key only ever refuses more). A bad
    line of a ``scopes`` or ``min-versions`` file is reported with its ``file:line``.
    """
    keys: list[PublicKey] = []
    store = TrustStore()
    problems: list[TrustStoreError] = []
    for path in trust_sources(env):
        if os.path.basename(path) == REVOKED_FILE:  # read whole or not at all: never in part
            problems += _load_revoked(store, path)
            continue
        try:
            text = _read_text(path)
            base = os.path.basename(path)
            if base == THRESHOLD_FILE:
                store.threshold = max(store.threshold, _threshold(text, path))
            elif base == SCOPES_FILE:
                scopes, found = parse_scopes(text, path)
                store.merge_scopes(scopes)
                problems += found
            elif base == FLOORS_FILE:
                floors, found = parse_floors(text, path)
                store.merge_floors(floors)
                problems += found
            elif base == PINS_FILE:
                pins, found = parse_pins(text, path)
                problems += found + store.merge_pins(pins)
            elif base == IDENTITIES_FILE:
                identities, found = parse_identities(text, path)
                store.identities.update((i.id, i) for i in identities if i.id not in store.identities)
                problems += found
            elif base == SIGSTORE_ROOT_FILE:
                store.sigstore_roots.append(path)  # parsed by sigstore, when a bundle is verified
            else:
                keys += parse_key_file(text, path)
        except TrustStoreError as exc:
            problems.append(exc)
    store.keys = {k.keyid: k for k in keys}
    return store, problems


def _load_revoked(store: TrustStore, path: str) -> list[TrustStoreError]:
    """Add a ``revoked`` file to ``store`` (:mod:`.revocation`). Read whole or not at all: a
    file that cannot be read, or only in part, makes the revocation list unreadable (fail closed)."""
    from .revocation import parse_revoked

    try:
        text = _read_text(path, rewrite=True)
    except TrustStoreError as exc:
        store.revocations_unreadable.append(path)
        return [TrustStoreError(exc.code.partition(".")[2], path, f"{exc.detail}; no signature counts until it is "
                                                                  "fixed")]
    found, problems = parse_revoked(text, path)
    for wanted, at in found.ids.items():
        store.revoked.add(wanted)
        store.revoked_at.setdefault(wanted, at)
    store.revocations_unreadable += found.unreadable
    return problems


def _threshold(text: str, path: str) -> int:
    found = text.strip()
    value = int(found) if re.fullmatch(rf"[0-9]{{1,{MAX_THRESHOLD_DIGITS}}}", found) else 0
    if value < 1:
        raise TrustStoreError("threshold", path, f"threshold must be a positive integer of at most "
                                                 f"{MAX_THRESHOLD_DIGITS} digits, found {found[:80]!r}")
    return value
