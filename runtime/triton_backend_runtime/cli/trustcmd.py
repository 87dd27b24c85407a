"""``trust``: add, remove, pin, min-version, revoke and list the keys this Python trusts; the
keyless signing identities and the Sigstore root are :mod:`.identitycmd`'s."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base import TrustError
from .grammar import EXIT_FAILED, EXIT_OK, Report
from .inputs import MAX_KEY_FILE, PROG, UnusableInput, public_key_file

if TYPE_CHECKING:
    from ..trust import TrustStore

__all__ = ["cmd_trust"]

_IDENTITY_ACTIONS = ("add-identity", "remove-identity", "root")


def cmd_trust(args: argparse.Namespace) -> int:
    from ..trust import SCOPES_FILE, parse_scope, set_scope, system_trust_dir, user_trust_dir, write_atomic

    out = Report(args.json)
    if args.action == "list":
        return out.end(_trust_list(out))
    directory = user_trust_dir() if args.user else system_trust_dir()
    if args.action == "min-version":
        return out.end(_trust_min_version(out, directory, args.dist, args.version))
    if args.action == "remove":
        return out.end(_trust_remove(out, directory, args.key))
    if args.action in ("revoke", "unrevoke"):
        return out.end(_trust_revoke(out, directory, args.keyid, revoke=args.action == "revoke"))
    if args.action in ("pin", "unpin"):
        return out.end(_trust_pin(out, directory, args.name, getattr(args, "dist", None)))
    if args.action in _IDENTITY_ACTIONS:
        from . import identitycmd

        handler = {"add-identity": identitycmd.add_identity, "remove-identity": identitycmd.remove_identity,
                   "root": identitycmd.pin_root}[args.action]
        return out.end(handler(out, directory, args))
    text, keys = public_key_file(args.key)
    try:
        scope = parse_scope(args.scope, "--scope") if args.scope is not None else None
    except TrustError as exc:
        raise UnusableInput("name", exc.path, exc.detail) from None
    os.makedirs(directory, exist_ok=True)
    # The scope goes in before the key: a failure in between leaves a scope, never a wider key.
    if scope is not None:
        for key in keys:
            set_scope(directory, key.keyid, scope)
    target = os.path.join(directory, f"{keys[0].keyid[:16]}.pub")
    write_atomic(target, text.encode("utf-8"))
    out.facts = {"trusted": [key.keyid for key in keys], "file": target,
                 "scope": scope.describe() if scope is not None else None}
    out.say(f"trusted {len(keys)} key(s) from {args.key}: {target}")
    if scope is not None:
        where = os.path.join(directory, SCOPES_FILE)
        out.say(f"  scope: {scope.describe()}; may declare {scope.describe_grants()} ({where})")
    return out.end(EXIT_OK)


def _trust_pin(out: Report, directory: str, name: str, dist: str | None) -> int:
    """``trust pin NAME DIST`` (``dist`` given) or ``trust unpin NAME``, in ``directory``."""
    from ..base import TrustStoreError
    from ..trust import PINS_FILE, load_pins, parse_name, parse_pin_name, pin_text, remove_pin, set_pin

    try:
        kind, value = parse_pin_name(name, "pin")
        owner = parse_name(dist, "pin") if dist is not None else None
    except TrustError as exc:
        raise UnusableInput("name", exc.path, exc.detail) from None
    spec, path = pin_text(kind, value), os.path.join(directory, PINS_FILE)
    if owner is None:
        removed = remove_pin(directory, kind, value)
        if not removed:
            raise TrustStoreError("not-pinned", path, f"{spec} is not pinned here")
        out.facts = {"unpinned": spec, "file": path}
        out.say(f"unpinned {spec} ({path})")
    else:
        os.makedirs(directory, exist_ok=True)
        replaced = set_pin(directory, kind, value, owner)
        out.facts = {"pinned": spec, "dist": owner, "file": path, "replaced": [line.strip() for line in replaced]}
        out.say(f"pinned {spec} to {owner}: where it is contested, {owner} keeps it ({path})")
        if replaced:
            out.say(f"  replaced: {'; '.join(line.strip() for line in replaced)}")
    pins, _ = load_pins()
    now = pins.get((kind, value))
    if now is not None and now.dist != owner:
        out.facts["pinned_elsewhere"] = now.describe()
        out.say(f"  note: {spec} is pinned to {now.describe()} by {', '.join(now.sources)}")
    return EXIT_OK


def _trust_min_version(out: Report, directory: str, dist: str, version: str) -> int:
    from packaging.version import InvalidVersion, Version

    from ..trust import FLOORS_FILE, MAX_VERSION_CHARS, parse_name, set_floor

    try:
        name = parse_name(dist, "min-version")
        if len(version) > MAX_VERSION_CHARS:  # before parsing: a 5000-digit release is past int()'s limit
            raise InvalidVersion(version)
        Version(version)
    except TrustError as exc:
        raise UnusableInput("name", exc.path, exc.detail) from None
    except (InvalidVersion, ValueError):  # ValueError: a release number too long for int()
        raise UnusableInput("version", "min-version", f"{version[:80]!r} is not a PEP 440 version of at most "
                                                      f"{MAX_VERSION_CHARS} characters") from None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, FLOORS_FILE)
    replaced = set_floor(directory, name, version)
    out.facts = {"dist": name, "min_version": version, "file": path, "replaced": [line.strip() for line in replaced]}
    out.say(f"floor for {name}: releases below {version} are refused ({path})")
    if replaced:
        out.say(f"  replaced: {'; '.join(line.strip() for line in replaced)}")
    return EXIT_OK


def _trust_list(out: Report) -> int:
    from ..trust import load_trust_store, pin_text

    store, problems = load_trust_store()
    keys = []
    for key in store.keys.values():
        if store.suspended() or store.revoked_by(key.keyid):
            continue  # not in effect: listed with the revocations
        scope = store.scopes.get(key.keyid)
        keys.append({"keyid": key.keyid, "comment": key.comment, "source": key.source,
                     "scope": scope.describe() if scope else None})
        where = f"  scope: {scope.describe()} ({', '.join(scope.sources)})" if scope else ""
        out.say(f"{key.keyid}  {key.comment}  ({key.source}){where}")
        if scope is not None:
            out.say(f"  may declare: {scope.describe_grants()}")
    from .identitycmd import identity_lines

    identities = identity_lines(out, store)
    for keyid, scope in store.scopes.items():
        if keyid not in store.keys and keyid not in store.identities:
            out.say(f"scope {keyid}: {scope.describe()} ({', '.join(scope.sources)}; no such trusted key)")
    for name, floor in sorted(store.floors.items()):
        out.say(f"min-version {name} {floor.describe()}  ({floor.source})")
    for (kind, value), pin in sorted(store.pins.items()):
        out.say(f"pin {pin_text(kind, value)} {pin.describe()}  ({', '.join(pin.sources)})")
    revocations = _revocation_lines(store)
    for line in revocations:
        out.say(line)
    if store.threshold > 1:
        out.say(f"threshold {store.threshold}")
    out.facts = {
        "keys": keys, "identities": identities, "sigstore_roots": store.sigstore_roots,
        "threshold": store.threshold, "revocations": revocations,
        "min_versions": {name: floor.describe() for name, floor in sorted(store.floors.items())},
        "pins": {pin_text(kind, value): pin.describe() for (kind, value), pin in sorted(store.pins.items())},
        "problems": [problem.as_dict() for problem in problems],
    }
    for problem in problems:
        print(f"{PROG}: error: {problem} ({problem.code})", file=sys.stderr)
    return EXIT_FAILED if problems else EXIT_OK


def _trust_remove(out: Report, directory: str, target: str) -> int:
    wanted = _keyids(target)
    files = {path: _key_lines(path) for path in _pub_files(directory)}
    removed = {keyid for lines in files.values() for _, keyid in lines if keyid is not None and wanted(keyid)}
    if not removed:
        from ..base import TrustStoreError

        raise TrustStoreError("no-such-key", directory, f"no trusted key matches {target}")
    if len(removed) > 1 and not os.path.lexists(target):  # refused before anything is removed
        raise UnusableInput("ambiguous", target, f"the prefix matches {len(removed)} keys "
                                                 f"({', '.join(sorted(removed))}); give more digits")
    for path, lines in files.items():
        _drop_lines(path, lines, removed)
    for keyid in sorted(removed):
        out.say(f"removed {keyid} from {directory}")
    from ..trust import load_trust_store

    still = sorted(k for k in load_trust_store()[0].keys if k in removed)
    out.facts = {"removed": sorted(removed), "directory": directory, "still_trusted": still}
    for keyid in still:
        out.say(f"  note: {keyid} is still trusted from another trust directory (trust list shows where)")
    return EXIT_OK


def _keyids(target: str) -> Callable[[str], bool]:
    """What ``target`` names: the keys of a file when something is there (a FIFO or a
    directory too, refused as such), else a keyid or a prefix of one."""
    if os.path.lexists(target):
        exact = {key.keyid for key in public_key_file(target)[1]}
        return exact.__contains__
    prefix = target.lower()
    if not re.fullmatch(r"[0-9a-f]{8,64}", prefix):
        raise UnusableInput("key", target, "neither a key file nor a keyid (8 to 64 hex digits)")
    return lambda keyid: keyid.startswith(prefix)


def _pub_files(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return sorted(e.path for e in entries if e.name.endswith(".pub") and e.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return []


def _key_lines(path: str) -> list[tuple[str, str | None]]:
    """The lines of a trust directory's ``.pub`` file, each with the keyid it holds, if any."""
    from ..base import RegularFileError, TrustStoreError, read_regular

    try:
        data = read_regular(path, MAX_KEY_FILE)
    except RegularFileError as exc:
        if exc.reason == "too-big":  # rewriting only the first MiB would lose the rest
            raise UnusableInput("too-big", path, f"{exc.detail}: not a key file this command rewrites") from None
        raise TrustStoreError("read", path, f"cannot read trust file: {exc.detail}") from None
    return [(line, _keyid_of_line(line, path)) for line in data.decode("utf-8", errors="replace").splitlines()]


def _drop_lines(path: str, lines: list[tuple[str, str | None]], keyids: set[str]) -> None:
    """Rewrite ``path`` without the key lines of ``keyids`` at once, or remove it when no key
    is left in it. Lines that are not keys are kept as they are."""
    from ..trust import write_atomic

    kept = [(line, keyid) for line, keyid in lines if keyid not in keyids]
    if len(kept) == len(lines):
        return
    if any(keyid is not None for _, keyid in kept):
        write_atomic(path, ("\n".join(line for line, _ in kept) + "\n").encode("utf-8"))
    else:
        os.unlink(path)


def _keyid_of_line(line: str, where: str) -> str | None:
    from ..trust import parse_key_line

    if not line.strip() or line.lstrip().startswith("#"):
        return None
    try:
        return parse_key_line(line.strip(), where).keyid
    except TrustError:
        return None


def _trust_revoke(out: Report, directory: str, text: str, *, revoke: bool) -> int:
    """``trust revoke KEYID`` or ``trust unrevoke KEYID`` in ``directory``'s revoked file."""
    from ..base import TrustStoreError
    from ..trust import REVOKED_FILE, load_trust_store, revocation

    wanted = revocation.parse_id(text)
    if wanted is None:
        raise UnusableInput("keyid", text[:100], f"not a keyid: {revocation.MIN_PREFIX_HEX} to "
                                                 f"{revocation.KEYID_HEX} hex digits ('keyid:' allowed)")
    path = os.path.join(directory, REVOKED_FILE)
    if revoke:
        os.makedirs(directory, exist_ok=True)
        already = revocation.add(path, wanted)
        out.facts = {"revoked": wanted, "file": path, "already": already is not None}
        if already is not None:
            out.say(f"already revoked: {path}:{already[1]}: {already[0].strip()}")
        else:
            out.say(f"revoked {wanted} ({path})")
    else:
        removed = revocation.remove(path, wanted)
        if not removed:
            raise TrustStoreError("not-revoked", path, f"no revocation of {wanted} here")
        out.facts = {"unrevoked": wanted, "file": path, "removed": [line.strip() for line in removed]}
        out.say(f"took back {'; '.join(line.strip() for line in removed)} ({path})")
    store, _ = load_trust_store()
    keys = [k for k in store.keys.values() if k.keyid.startswith(wanted) or wanted.startswith(k.keyid)]
    for key in keys:
        by = store.revoked_by(key.keyid)
        state = f"revoked ({by} in {store.revoked_at.get(by, '-')})" if by else "trusted: its signatures count"
        comment = f" {key.comment}" if key.comment else ""
        out.say(f"  key {key.keyid}{comment} ({key.source}): {state}")
    out.facts["keys"] = [{"keyid": key.keyid, "revoked": bool(store.revoked_by(key.keyid))} for key in keys]
    identities = [i for i in store.identities.values() if i.id.startswith(wanted) or wanted.startswith(i.id)]
    for identity in identities:
        state = "revoked" if store.revoked_by(identity.id) else "trusted: its keyless signatures count"
        out.say(f"  identity {identity.id} {identity.describe()} ({identity.source}): {state}")
    out.facts["identities"] = [{"id": i.id, "revoked": bool(store.revoked_by(i.id))} for i in identities]
    if not keys and not identities:
        then = " now: a key with it is refused when added" if revoke else ""
        out.say(f"  no trusted key has this keyid{then}")
    if store.suspended():
        out.say(f"  note: {store.suspended()} (trust list shows the line)")
    return EXIT_OK


def _revocation_lines(store: TrustStore) -> list[str]:
    """What the revocations do, for ``trust list``: the keys they revoke; a revocation that
    matches no trusted key says so, never shown as a revoked key."""
    from ..trust import revoking

    lines = []
    reason = store.suspended()
    for key in store.keys.values():
        by = revoking(store.revoked, key.keyid)
        if by is not None:
            lines.append(f"revoked {key.keyid}  {key.comment}  ({key.source}; by {by} in {store.revoked_at.get(by)})")
        elif reason is not None:
            lines.append(f"suspended {key.keyid}  {key.comment}  ({key.source}): {reason}")
    matched = {revoking(store.revoked, k) for k in [*store.keys, *store.identities]}
    for wanted in sorted(set(store.revoked) - matched):
        lines.append(f"revocation {wanted} ({store.revoked_at.get(wanted, '-')}): matches no trusted key, "
                     "revokes nothing now (a key with it is refused when added)")
    if reason is not None and not store.keys:
        lines.append(f"no key counts: {reason}")
    return lines
