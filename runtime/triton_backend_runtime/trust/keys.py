"""Trusted public keys: Ed25519, raw 32-byte keys, keyids by the TUF convention.

A public key is one line of text::

    ed25519 <base64 of the raw 32-byte key> <keyid> [comment...]

where ``keyid`` is the hex sha256 of the raw key bytes. Raw keys keep PEM parsing (and the
~55 ms import of ``cryptography``'s serialization module) off the import path of Triton;
only the ed25519 module is imported, and only when a signature is actually checked.

A :class:`TrustStore` holds keys, a threshold (how many distinct trusted keys must sign;
default 1), revoked keyids, which are refused even when their key is present, and, after
TUF's delegations, local state a signature alone cannot carry:

- *scopes* (``scopes`` files, ``KEYID ITEM[,ITEM...]``): a scoped key's signature counts only
  for the distributions named (``NAME`` or ``dist:NAME``, PEP 503-normalised), and may declare
  only the backend, pass, dialect and op names granted (``backend:NAME``, ``pass:NAME``,
  ``dialect:NAME``, ``op:NAME``; ``KIND:*`` for any name of that kind). A scoped key with no
  grant may declare none: a line written before grants existed still scopes the distributions,
  and the key's backends and plugins are refused (``trust.name``) until it is granted their
  names. An unscoped key counts for any distribution and may declare any name.
- *floors* (``min-versions`` files, ``NAME VERSION``): a release of NAME below VERSION
  (PEP 440) is refused (rollback), signed or not.
- *pins* (``pins`` files, ``[KIND:]NAME DIST``): the distribution that owns a name claimed by
  more than one (the Triton core's own included); read by :mod:`.conflicts`' rule, never by
  verification. A pin only lets its distribution take a name: a bad pins line is reported and
  skipped, and a name pinned to two distributions is pinned to neither.

They apply after the signature verified and the payload was parsed, through
:func:`admit_signers` (scope, then floor), :func:`ungranted` (each declared name) and
:func:`check_floor` (floor alone, for manifests that grant no trust). Merging never weakens: a
key scoped in several places gets the intersection (of distributions and of grants), a name
with several floors the highest. A malformed line is reported with its
``file:line``; when it still names a key (or a distribution), it fails closed for that key
(scoped to the names that could be read, possibly none) or that name (no release admitted),
because skipping it would widen what the key may sign or drop the floor.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..base import NAME_KINDS, PIN_KINDS, TrustStoreError, canonicalize_name
from .paths import (
    FLOORS_FILE,
    PINS_FILE,
    REVOKED_FILE,
    SCOPES_FILE,
    THRESHOLD_FILE,
    TRUSTED_KEYS_ENV,
    content_lines,
    system_trust_dir,
    trust_sources,
    user_trust_dir,
)
from .paths import read_trust_file as _read_text

__all__ = [
    "FLOORS_FILE", "PINS_FILE", "SCOPES_FILE", "TRUSTED_KEYS_ENV", "Floor", "Pin", "PublicKey", "Scope", "TrustStore",
    "admit_signers", "check_floor", "keyid_of", "load_pins", "load_trust_store", "parse_floors",
    "parse_key_file", "parse_key_line", "parse_name", "parse_pin_name", "parse_pins", "parse_scope",
    "parse_scope_names", "parse_scopes", "pin_text", "remove_pin", "set_floor", "set_pin", "set_scope",
    "system_trust_dir", "trust_sources", "ungranted", "user_trust_dir", "write_atomic",
]

KEY_ALGORITHM = "ed25519"
#: A distribution name as PEP 508 allows it (before PEP 503 normalisation).
_NAME = re.compile(r"[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9]", re.IGNORECASE)
_KEYID = re.compile(r"[0-9a-f]{64}")
#: A backend, pass, dialect or op name a scope grants or a pin names (case-sensitive, as Triton
#: compares them); ``*`` in a grant stands for every name of its kind.
_CLAIM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
#: What one scope item or pin name is, for messages.
_SCOPE_ITEM = f"a distribution name or KIND:NAME (KIND one of {', '.join(NAME_KINDS)})"


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


def parse_name(text: str, where: str) -> str:
    """A distribution name (PEP 508 syntax), normalised; TrustStoreError('name-format') otherwise."""
    if not _NAME.fullmatch(text):
        raise TrustStoreError("name-format", where, f"{text[:80]!r} is not a distribution name")
    return canonicalize_name(text)


def parse_scope_names(text: str, where: str) -> frozenset[str]:
    """The distribution names of :func:`parse_scope`'s ``text``."""
    return parse_scope(text, where).names


def parse_scope(text: str, where: str) -> Scope:
    """``ITEM[,ITEM...]`` (commas or blanks between items): a scope as ``trust add --scope``
    takes it; a bad item, or no distribution, is an error (TrustStoreError ``name-format``)."""
    names: set[str] = set()
    grants: set[tuple[str, str]] = set()
    for item in (item for item in re.split(r"[,\s]+", text) if item):
        parsed = _scope_item(item)
        if parsed is None:
            raise TrustStoreError("name-format", where, f"{item[:80]!r} is not {_SCOPE_ITEM}")
        if parsed[0] == "dist":
            names.add(parsed[1])
        else:
            grants.add(parsed)
    if not names:
        raise TrustStoreError("name-format", where, "a scope names at least one distribution")
    return Scope(frozenset(names), (where,), frozenset(grants))


def _scope_item(item: str) -> tuple[str, str] | None:
    """``("dist", normalised name)`` or ``(kind, name)`` of one scope item; None when it is neither."""
    kind, colon, name = item.partition(":")
    if not colon:
        return ("dist", canonicalize_name(item)) if _NAME.fullmatch(item) else None
    kind = kind.lower()
    if kind == "dist":
        return ("dist", canonicalize_name(name)) if _NAME.fullmatch(name) else None
    if kind in NAME_KINDS and (name == "*" or _CLAIM_NAME.fullmatch(name)):
        return kind, name
    return None


def parse_pin_name(text: str, where: str) -> tuple[str, str]:
    """``[KIND:]NAME`` of a pin: ``(kind, name)``, a bare name being a backend's;
    TrustStoreError ``name-format`` otherwise (a pin names one name: no ``*``)."""
    kind, colon, name = text.partition(":")
    kind, name = (kind.lower(), name) if colon else ("backend", text)
    if kind not in PIN_KINDS or not _CLAIM_NAME.fullmatch(name):
        kinds = ", ".join(PIN_KINDS)
        raise TrustStoreError("name-format", where, f"{text[:80]!r} is not [KIND:]NAME (KIND one of {kinds}; "
                                                    "NAME of letters, digits and _ . + -)")
    return kind, name


def pin_text(kind: str, name: str) -> str:
    """How a pinned name is written: a backend's bare, any other ``KIND:NAME``."""
    return name if kind == "backend" else f"{kind}:{name}"


#: The longest version string parsed (PEP 440 sets none; real ones are a few dozen characters).
#: Longer is refused unparsed: a 5000-digit release number is past int()'s digit limit.
MAX_VERSION_CHARS = 200
#: Digits of a threshold: more signatures than a DSSE envelope may carry (64) already fail closed.
MAX_THRESHOLD_DIGITS = 6


def _valid_version(text: str) -> bool:
    from packaging.version import Version

    if len(text) > MAX_VERSION_CHARS:
        return False
    try:
        Version(text)
    except ValueError:  # InvalidVersion, or a release number too long for int()
        return False
    return True


@dataclass(frozen=True)
class Scope:
    """The normalised distribution names a key may sign, the ``(kind, name)`` grants of what
    its signatures may declare (``name`` ``*``: any of that kind), and the ``file:line`` that
    say so."""

    names: frozenset[str]
    sources: tuple[str, ...]
    grants: frozenset[tuple[str, str]] = frozenset()

    def allows(self, name: str) -> bool:
        return canonicalize_name(name) in self.names

    def grants_name(self, kind: str, name: str) -> bool:
        return (kind, name) in self.grants or (kind, "*") in self.grants

    def describe(self) -> str:
        return ", ".join(sorted(self.names)) or "no distribution"

    def describe_grants(self) -> str:
        return ", ".join(f"{k}:{n}" for k, n in sorted(self.grants)) or f"no {', '.join(NAME_KINDS)} name"

    def narrow(self, other: Scope) -> Scope:
        """Both scopes at once: the intersection (a scope never widens by being repeated)."""
        grants = {g for kind in NAME_KINDS for g in _meet(kind, self.grants, other.grants)}
        return Scope(self.names & other.names, self.sources + other.sources, frozenset(grants))


def _meet(kind: str, one: frozenset[tuple[str, str]], two: frozenset[tuple[str, str]]) -> set[tuple[str, str]]:
    """The grants of ``kind`` both allow: ``*`` meets anything as that thing."""
    a, b = {g for g in one if g[0] == kind}, {g for g in two if g[0] == kind}
    if (kind, "*") in a:
        return b
    return a if (kind, "*") in b else a & b


@dataclass(frozen=True)
class Pin:
    """The distribution a name is pinned to (normalised; None where pins disagree: then it is
    pinned to none), and the ``file:line`` that say so."""

    dist: str | None
    sources: tuple[str, ...]

    def describe(self) -> str:
        return self.dist if self.dist is not None else "nothing (the pins disagree)"

    def join(self, other: Pin) -> Pin:
        """Two pins of one name: the same distribution, or none (never the later one)."""
        return Pin(self.dist if self.dist == other.dist else None, self.sources + other.sources)


@dataclass(frozen=True)
class Floor:
    """The lowest admitted version of a distribution, and the ``file:line`` that sets it.

    ``version`` None: the line naming the distribution could not be read; nothing is admitted.
    """

    version: str | None
    source: str

    def describe(self) -> str:
        return self.version if self.version is not None else "unreadable"

    def higher(self, other: Floor) -> Floor:
        """The stricter of two floors (an unreadable one is the strictest; ties keep ``self``)."""
        if self.version is None or other.version is None:
            return self if self.version is None else other
        from packaging.version import Version

        return other if Version(other.version) > Version(self.version) else self


def parse_scopes(text: str, where: str) -> tuple[dict[str, Scope], list[TrustStoreError]]:
    """A ``scopes`` file: ``KEYID ITEM[,ITEM...]`` lines (items as :func:`parse_scope` takes
    them), ``#`` comments.

    A line with a keyid but unreadable items scopes that key to the distributions and grants
    that could be read (possibly none) and is reported; a line without a keyid is reported and
    skipped.
    """
    scopes: dict[str, Scope] = {}
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        fields = content.split(maxsplit=1)
        keyid = fields[0].lower()
        if not _KEYID.fullmatch(keyid):
            detail = f"expected 'KEYID ITEM[,ITEM...]' (64 hex digits), found {fields[0][:80]!r}; line skipped"
            problems.append(TrustStoreError("scope-format", at, detail))
            continue
        names: set[str] = set()
        grants: set[tuple[str, str]] = set()
        bad: list[str] = []
        for item in re.split(r"[,\s]+", fields[1]) if len(fields) > 1 else []:
            parsed = _scope_item(item) if item else None
            if parsed is None:
                bad += [item[:80]] if item else []
            elif parsed[0] == "dist":
                names.add(parsed[1])
            else:
                grants.add(parsed)
        scope = Scope(frozenset(names), (at,), frozenset(grants))
        if bad or not names:
            what = f"each item is {_SCOPE_ITEM}, not {', '.join(map(repr, bad))}" if bad else "no distribution named"
            detail = (f"{what}; key {keyid[:16]} is scoped to {scope.describe()} and may declare "
                      f"{scope.describe_grants()} until the line is fixed")
            problems.append(TrustStoreError("scope-format", at, detail))
        scopes[keyid] = scopes[keyid].narrow(scope) if keyid in scopes else scope
    return scopes, problems


def parse_pins(text: str, where: str) -> tuple[dict[tuple[str, str], Pin], list[TrustStoreError]]:
    """A ``pins`` file: ``[KIND:]NAME DIST`` lines, ``#`` comments. A bad line is reported and
    skipped (a pin only ever lets a distribution take a name: without it, less loads)."""
    pins: dict[tuple[str, str], Pin] = {}
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        fields = content.split()
        try:
            if len(fields) != 2 or not _NAME.fullmatch(fields[1]):
                raise TrustStoreError("pin-format", at, f"expected '[KIND:]NAME DIST', found {content[:120]!r}")
            key = parse_pin_name(fields[0], at)
        except TrustStoreError as exc:
            problems.append(TrustStoreError("pin-format", at, f"{exc.detail}; line skipped"))
            continue
        pin = Pin(canonicalize_name(fields[1]), (at,))
        pins[key] = pins[key].join(pin) if key in pins else pin
    for (kind, name), pin in pins.items():
        if pin.dist is None:
            problems.append(TrustStoreError("pin-format", pin.sources[0], f"{pin_text(kind, name)} is pinned to "
                                            f"different distributions ({', '.join(pin.sources)}); pinned to none"))
    return pins, problems


def parse_floors(text: str, where: str) -> tuple[dict[str, Floor], list[TrustStoreError]]:
    """A ``min-versions`` file: ``NAME VERSION`` lines (PEP 440 versions), ``#`` comments.

    A line that names a distribution but no valid version sets an unreadable floor (no release
    of it is admitted) and is reported; a line without a distribution name is reported and skipped.
    """
    floors: dict[str, Floor] = {}
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        fields = content.split()
        if not _NAME.fullmatch(fields[0]):
            detail = f"expected 'NAME VERSION', found {fields[0][:80]!r} where a distribution name goes; line skipped"
            problems.append(TrustStoreError("min-version-format", at, detail))
            continue
        name = canonicalize_name(fields[0])
        version: str | None = fields[1] if len(fields) == 2 else None
        if version is None or not _valid_version(version):
            found = " ".join(fields[1:])[:80]
            detail = (f"expected 'NAME VERSION' with a PEP 440 version, found {found!r}; "
                      f"no release of {name} is admitted until the line is fixed")
            problems.append(TrustStoreError("min-version-format", at, detail))
            version = None
        floor = Floor(version, at)
        floors[name] = floors[name].higher(floor) if name in floors else floor
    return floors, problems


@dataclass
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
        problems = []
        for key, pin in pins.items():
            mine = self.pins.get(key)
            self.pins[key] = pin if mine is None else mine.join(pin)
            if mine is not None and mine.dist is not None and self.pins[key].dist is None:
                problems.append(TrustStoreError("pin-format", pin.sources[0], f"{pin_text(*key)} is pinned to "
                                                f"different distributions ({', '.join(self.pins[key].sources)}); "
                                                "pinned to none"))
        return problems

    def label(self, keyid: str) -> str:
        key = self.keys.get(keyid)
        return f"{keyid[:16]} ({key.comment})" if key is not None and key.comment else keyid[:16]


def admit_signers(store: TrustStore, keyids: Sequence[str], name: str, version: str, where: str) -> tuple[str, ...]:
    """The keyids whose (already verified) signatures count for release ``name`` ``version``.

    Call it after the signatures verified (``dsse.verify``) and the payload was parsed, with
    the signed name and version. Scope first: a key scoped to other names does not count;
    fewer than ``store.threshold`` left raises TrustStoreError code ``trust.scope``. Then the
    floor (:func:`check_floor`): ``trust.rollback``. Returns the counting keyids, in order.
    """
    wanted = canonicalize_name(name)[:200]
    admitted: list[str] = []
    outside: list[str] = []
    for keyid in dict.fromkeys(keyids):
        scope = store.scopes.get(keyid)
        (admitted if scope is None or wanted in scope.names else outside).append(keyid)
    if len(admitted) < store.threshold:
        why = [
            f"key {store.label(k)} may sign only {store.scopes[k].describe()} "
            f"(scope set in {', '.join(store.scopes[k].sources)})"
            for k in outside
        ]
        detail = "; ".join(why) or f"only {len(admitted)} valid signature(s)"
        raise TrustStoreError(
            "scope", where, f"{len(admitted)} of {store.threshold} required signatures count for {wanted}: {detail}"
        )
    check_floor(store, name, version, where)
    return tuple(admitted)


def ungranted(store: TrustStore, keyids: Sequence[str], kind: str, name: str) -> str | None:
    """Why the (already admitted) signers ``keyids`` may not declare ``kind`` ``name`` (fewer
    than ``store.threshold`` of them are granted it), or None when they may. An unscoped key
    may declare any name; a name of the Triton core is still the core's (:mod:`.conflicts`)."""
    signers = list(dict.fromkeys(keyids))
    granted = [k for k in signers if (scope := store.scopes.get(k)) is None or scope.grants_name(kind, name)]
    if len(granted) >= store.threshold:
        return None
    why = "; ".join(
        f"key {store.label(k)} may declare {store.scopes[k].describe_grants()} "
        f"(scope set in {', '.join(store.scopes[k].sources)})"
        for k in signers if k not in granted
    )
    return (f"{len(granted)} of {store.threshold} required signatures may declare {kind} {name[:100]!r}: "
            f"{why or 'no signature counts'}; grant it with trust add KEY --scope DIST,{kind}:NAME")


def check_floor(store: TrustStore, name: str, version: str, where: str) -> None:
    """Raise TrustStoreError code ``trust.rollback`` when ``version`` of ``name`` is below its floor.

    Applies to every manifest, signed or not (for one that grants no trust, pass the installed
    distribution's version). A version that is not PEP 440 cannot be shown to be above a floor
    and is refused; a name without a floor passes.
    """
    wanted = canonicalize_name(name)
    floor = store.floors.get(wanted)  # a floor exists only for a well-formed name: messages stay short
    if floor is None:
        return
    if floor.version is None:
        raise TrustStoreError(
            "rollback", where, f"the floor for {wanted} set in {floor.source} is unreadable; no release is admitted"
        )
    from packaging.version import Version

    shown = version[:100]
    try:
        if len(version) > MAX_VERSION_CHARS:
            raise ValueError(version)
        below = Version(version) < Version(floor.version)
    except ValueError:  # InvalidVersion, or a release number too long for int()
        raise TrustStoreError(
            "rollback", where, f"{wanted} version {shown!r} is not a PEP 440 version, so it cannot be shown to be "
            f"at or above the floor {floor.version} set in {floor.source}"
        ) from None
    if below:
        raise TrustStoreError(
            "rollback", where, f"{wanted} version {shown} is below the floor {floor.version} set in {floor.source}"
        )


#: Trust files are a few lines each; no more than this of one is read.


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


def load_pins(env: Mapping[str, str] | None = None) -> tuple[dict[tuple[str, str], Pin], list[TrustStoreError]]:
    """The pins alone (what the conflict rule reads at load, without parsing any key)."""
    store = TrustStore()
    problems: list[TrustStoreError] = []
    for path in trust_sources(env):
        if os.path.basename(path) == PINS_FILE:
            try:
                pins, found = parse_pins(_read_text(path), path)
            except TrustStoreError as exc:
                problems.append(exc)
                continue
            problems += found + store.merge_pins(pins)
    return store.pins, problems


# Editing a trust directory (the ``trust`` command). Every write is atomic: a uniquely named
# temporary file in the same directory (never a name trust_sources lists), fsync, os.replace.


def write_atomic(path: str, data: bytes) -> None:
    """Replace a trust file at once (trust files are public: 0644 unless it exists)."""
    from ..base import write_atomic as write

    write(path, data)


def _set_line(path: str, matches: Callable[[str], bool], line: str) -> list[str]:
    """Put ``line`` in place of every line whose first field ``matches`` (comments and other
    lines kept as they are, a new line appended otherwise); returns the lines replaced."""
    text = _read_text(path, rewrite=True)
    kept: list[str] = []
    replaced: list[str] = []
    for old in text.splitlines():
        fields = old.split("#", 1)[0].split()
        if fields and matches(fields[0]):
            if not replaced:
                kept.append(line)
            replaced.append(old)
        else:
            kept.append(old)
    if not replaced:
        kept.append(line)
    write_atomic(path, ("\n".join(kept) + "\n").encode("utf-8"))
    return replaced


def set_scope(directory: str, keyid: str, scope: Scope | frozenset[str]) -> list[str]:
    """Scope ``keyid`` to ``scope`` (or to distribution names alone, granting no name) in
    ``directory``'s scopes file (replacing its line there)."""
    scope = scope if isinstance(scope, Scope) else Scope(scope, ())
    items = [*sorted(scope.names), *(f"{k}:{n}" for k, n in sorted(scope.grants))]
    line = f"{keyid} {','.join(items)}"
    return _set_line(os.path.join(directory, SCOPES_FILE), lambda first: first.lower() == keyid, line)


def _is_pin(kind: str, name: str) -> Callable[[str], bool]:
    def matches(first: str) -> bool:
        try:
            return parse_pin_name(first, "-") == (kind, name)
        except TrustStoreError:
            return False

    return matches


def set_pin(directory: str, kind: str, name: str, dist: str) -> list[str]:
    """Pin ``kind`` ``name`` to ``dist`` in ``directory``'s pins file (replacing its line there)."""
    line = f"{pin_text(kind, name)} {canonicalize_name(dist)}"
    return _set_line(os.path.join(directory, PINS_FILE), _is_pin(kind, name), line)


def remove_pin(directory: str, kind: str, name: str) -> list[str]:
    """Drop the pins of ``kind`` ``name`` from ``directory``'s pins file; returns the lines removed."""
    path = os.path.join(directory, PINS_FILE)
    matches = _is_pin(kind, name)
    kept: list[str] = []
    removed: list[str] = []
    for line in _read_text(path, rewrite=True).splitlines():
        fields = line.split("#", 1)[0].split()
        (removed if fields and matches(fields[0]) else kept).append(line)
    if removed:
        write_atomic(path, "".join(f"{line}\n" for line in kept).encode("utf-8"))
    return removed


def set_floor(directory: str, name: str, version: str) -> list[str]:
    """Set ``name``'s floor to ``version`` in ``directory``'s min-versions file (replacing its line)."""
    wanted = canonicalize_name(name)

    def matches(first: str) -> bool:
        return _NAME.fullmatch(first) is not None and canonicalize_name(first) == wanted

    return _set_line(os.path.join(directory, FLOORS_FILE), matches, f"{wanted} {version}")


def _threshold(text: str, path: str) -> int:
    found = text.strip()
    value = int(found) if re.fullmatch(rf"[0-9]{{1,{MAX_THRESHOLD_DIGITS}}}", found) else 0
    if value < 1:
        raise TrustStoreError("threshold", path, f"threshold must be a positive integer of at most "
                                                 f"{MAX_THRESHOLD_DIGITS} digits, found {found[:80]!r}")
    return value
