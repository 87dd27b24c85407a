"""``trust add-identity``, ``trust remove-identity`` and ``trust root``: keyless signing
identities and the pinned Sigstore trusted root, in a trust directory."""

from __future__ import annotations

import argparse
import os
import re
from typing import TYPE_CHECKING

from ..base import TrustError
from .grammar import EXIT_OK, Report
from .inputs import UnusableInput

if TYPE_CHECKING:
    from ..trust import TrustStore

__all__ = ["MAX_ROOT_BYTES", "add_identity", "identity_lines", "pin_root", "remove_identity"]

#: A trusted root is a few KB (production's: ~7 KB); the trust store reads its trust files to a MiB.
MAX_ROOT_BYTES = 1024 * 1024


def add_identity(out: Report, directory: str, args: argparse.Namespace) -> int:
    from ..trust import SCOPES_FILE, parse_identity, parse_scope, set_identity, set_scope

    comment = " ".join(args.comment.split())
    try:
        identity = parse_identity(args.issuer, args.identity, "add-identity", comment)
        scope = parse_scope(args.scope, "--scope") if args.scope is not None else None
    except TrustError as exc:
        raise UnusableInput("identity" if exc.code == "trust.identity-format" else "name", exc.path,
                            exc.detail) from None
    os.makedirs(directory, exist_ok=True)
    if scope is not None:  # the scope first: a failure in between leaves a scope, never a wider identity
        set_scope(directory, identity.id, scope)
    replaced = set_identity(directory, identity)
    path = os.path.join(directory, "identities")
    out.facts = {"trusted_identity": {"id": identity.id, "issuer": identity.issuer, "identity": identity.pattern},
                 "file": path, "scope": scope.describe() if scope is not None else None,
                 "replaced": [line.strip() for line in replaced]}
    out.say(f"trusted identity {identity.id[:16]}: {identity.describe()} ({path})")
    if scope is not None:
        out.say(f"  scope: {scope.describe()}; may declare {scope.describe_grants()} "
                f"({os.path.join(directory, SCOPES_FILE)})")
    return EXIT_OK


def remove_identity(out: Report, directory: str, args: argparse.Namespace) -> int:
    from ..base import TrustStoreError
    from ..trust import IDENTITIES_FILE, identity_id, load_trust_store, remove_identity

    if args.id is not None and (args.issuer or args.identity):
        raise UnusableInput("identity", args.id, "give an ID, or --issuer and --identity, not both")
    if args.id is not None:
        wanted = args.id.lower()
        if not re.fullmatch(r"[0-9a-f]{8,64}", wanted):
            raise UnusableInput("identity", args.id[:100], "not an identity id (8 to 64 hex digits; trust list)")
    elif args.issuer and args.identity:
        wanted = identity_id(args.issuer, args.identity)
    else:
        raise UnusableInput("identity", "remove-identity", "give an ID, or --issuer and --identity")
    path = os.path.join(directory, IDENTITIES_FILE)
    removed = remove_identity(directory, wanted)
    if not removed:
        raise TrustStoreError("no-such-identity", path, f"no trusted identity matches {wanted[:64]}")
    still = [i.id for i in load_trust_store()[0].identities.values() if i.id.startswith(wanted)]
    out.facts = {"removed": [line.strip() for line in removed], "file": path, "still_trusted": still}
    out.say(f"removed {'; '.join(line.strip() for line in removed)} ({path})")
    for found in still:
        out.say(f"  note: identity {found[:16]} is still trusted from another trust directory (trust list)")
    return EXIT_OK


def pin_root(out: Report, directory: str, args: argparse.Namespace) -> int:
    """``trust root FILE``: a copy of the trusted root, checked to be one; ``--remove`` unpins."""
    from ..base import TrustStoreError
    from ..trust import SIGSTORE_ROOT_FILE, write_atomic

    path = os.path.join(directory, SIGSTORE_ROOT_FILE)
    if args.remove:
        if args.file is not None:
            raise UnusableInput("root", args.file, "give FILE or --remove, not both")
        if not os.path.lexists(path):
            raise TrustStoreError("no-root", path, "no Sigstore root is pinned here")
        os.unlink(path)
        out.facts = {"unpinned_root": path}
        out.say(f"unpinned the Sigstore root ({path}); without another, sigstore-python's own is used")
        return EXIT_OK
    if args.file is None:
        raise UnusableInput("root", "root", "give the trusted_root.json to pin, or --remove")
    data = _root_bytes(args.file)
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, data)
    import hashlib

    out.facts = {"root": path, "from": args.file, "sha256": hashlib.sha256(data).hexdigest()}
    out.say(f"pinned the Sigstore root from {args.file}: {path} (sha256 {out.facts['sha256'][:16]})")
    return EXIT_OK


def _root_bytes(file: str) -> bytes:
    """The root's bytes, refused unless it is JSON of a trusted root (and, with sigstore
    installed, one sigstore parses)."""
    import json

    from ..base import RegularFileError, read_regular

    try:
        data = read_regular(file, MAX_ROOT_BYTES)
    except RegularFileError as exc:
        raise UnusableInput("root", file, f"cannot read it: {exc.detail}") from None
    try:
        doc = json.loads(data.decode("utf-8"))  # the administrator's file, a MiB at most
    except (ValueError, UnicodeDecodeError, RecursionError):
        doc = None
    media = doc.get("mediaType") if isinstance(doc, dict) else None
    if not isinstance(media, str) or not media.startswith("application/vnd.dev.sigstore.trustedroot"):
        raise UnusableInput("root", file, "not a Sigstore trusted root (JSON with mediaType "
                                          "application/vnd.dev.sigstore.trustedroot+json...)")
    try:
        from sigstore_models.trustroot.v1 import TrustedRoot
    except ImportError:
        return data  # the extra is not installed: checked when a bundle is verified
    try:
        from sigstore.models import TrustedRoot as Checked

        Checked(TrustedRoot.from_json(data))
    except Exception as exc:  # whatever the parser raises: the file is not one
        from ..base import describe

        raise UnusableInput("root", file, f"not a Sigstore trusted root: {describe(exc)}") from None
    return data


def identity_lines(out: Report, store: TrustStore) -> list[dict[str, object]]:
    """``trust list``'s identities (JSON rows; lines said) and the pinned roots."""
    rows: list[dict[str, object]] = []
    for identity in sorted(store.identities.values(), key=lambda i: (i.issuer, i.pattern)):
        by = store.revoked_by(identity.id)
        scope = store.scopes.get(identity.id)
        rows.append({"id": identity.id, "issuer": identity.issuer, "identity": identity.pattern,
                     "comment": identity.comment, "source": identity.source,
                     "scope": scope.describe() if scope else None, "revoked": by is not None})
        state = f"  revoked ({by} in {store.revoked_at.get(by, '-')})" if by else ""
        where = f"  scope: {scope.describe()} ({', '.join(scope.sources)})" if scope else ""
        comment = f"  {identity.comment}" if identity.comment else ""
        out.say(f"identity {identity.id}  {identity.describe()}{comment}  ({identity.source}){where}{state}")
        if scope is not None:
            out.say(f"  may declare: {scope.describe_grants()}")
    for root in store.sigstore_roots:
        out.say(f"sigstore root {root}")
    if store.identities and not store.sigstore_roots:
        out.say("sigstore root: none pinned (sigstore-python's own production root)")
    return rows
