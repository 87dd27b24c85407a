"""The signing key on the command line: where ``keygen`` writes a pair, and which key
``migrate``, ``adopt`` and ``mirror`` sign with (``--key`` or the environment); and how they
sign keylessly (``--sigstore`` with an OIDC identity, or ``--sigstore-bundle``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from triton_backend_runtime.base import regularfile

from .base import InputError

__all__ = ["NO_TOKEN", "key_paths", "keyless_signing", "signing_key"]

#: What to do when ``--sigstore`` finds no identity token.
NO_TOKEN = ("no OIDC identity token: give --identity-token FILE, set BACKEND_PACKAGER_IDENTITY_TOKEN, or run "
            "in CI with an ambient credential (GitHub Actions: permissions: id-token: write)")


def key_paths(private: Path) -> tuple[Path, Path]:
    """The private key's path and its public twin's (``.pub`` beside it), refusing any
    choice where writing one would destroy the other."""
    public = private.with_suffix(".pub")
    if private.suffix == ".pub":
        raise InputError("key-path", str(private), "ends in .pub, the name of the public twin: the public key "
                         "would overwrite the private one (use e.g. -o vendor.pem)")
    if private.is_dir():
        raise InputError("key-path", str(private), "is a directory: give the private key's file name")
    if private.exists() and public.exists() and os.path.samefile(private, public):
        raise InputError("key-path", str(private), f"is the same file as {public}: the public key would "
                         "overwrite the private one")
    return private, public


def signing_key(path: Path | None) -> Any:
    """The key from --key, else from BACKEND_PACKAGER_SIGNING_KEY, else None (hash-only).
    Called before any input is opened: the key's path and its passphrase are taken out of
    the environment first, so that no child (and nothing that reads this process's
    ``/proc/PID/environ``) finds them. A key that cannot be used (a public key among them)
    is unusable input, ``input.key``, on every command."""
    from .base import ConfigError
    from .manifest import SIGNING_KEY_ENV, signing

    named = signing.take_env(SIGNING_KEY_ENV)
    passphrase = signing.take_env(signing.PASSPHRASE_ENV)
    if path is None and named:
        path = Path(named)
    if path is None:
        return None
    try:
        return signing.load(path, passphrase.encode() if passphrase else None)
    except ConfigError as exc:
        raise InputError("key", exc.path, exc.detail) from None


def keyless_signing(args: argparse.Namespace, *, attach: bool = True) -> Any:
    """The :class:`~backend_packager.manifest.keyless.Keyless` that ``--sigstore`` or
    ``--sigstore-bundle`` ask for, else None. Like the key, read before any input is opened:
    the token's environment variable is taken out of the environment whether used or not, a
    command without a token fails here (``input.sigstore``), before any work."""
    from .manifest import keyless as kl
    from .manifest import signing

    named = signing.take_env(kl.IDENTITY_TOKEN_ENV)
    bundle: Path | None = getattr(args, "sigstore_bundle", None) if attach else None
    if args.sigstore and bundle is not None:
        raise InputError("usage", "--sigstore-bundle", "give --sigstore (sign now) or --sigstore-bundle (attach), "
                         "not both")
    if bundle is not None:
        data = _read(bundle, kl.MAX_BUNDLE_BYTES, "bundle")
        kl.check_bundle(data, None, str(bundle))  # a bundle at all, before any work; its payload per wheel
        return kl.Keyless(bundle=data, source=str(bundle))
    if not args.sigstore:
        if args.identity_token is not None or args.sigstore_staging:
            raise InputError("usage", "--identity-token" if args.identity_token else "--sigstore-staging",
                             "only with --sigstore")
        return None
    kl.require_sigstore("--sigstore")
    if args.identity_token is not None:
        source, ambient = str(args.identity_token), False
        token = _read(args.identity_token, kl.MAX_TOKEN_BYTES, "token")
    elif named:
        token, source, ambient = named.encode(), kl.IDENTITY_TOKEN_ENV, False
    else:
        token, source, ambient = (kl.detect_ambient() or "").encode(), "ambient credential", True
    text = token.decode("utf-8", "replace").strip()
    if not text:
        raise InputError("sigstore", source if source != "ambient credential" else "--sigstore", NO_TOKEN)
    problem = kl.token_problem(text)
    if problem is not None:
        raise InputError("sigstore", source, f"not a usable OIDC identity token: {problem}")
    return kl.Keyless(token=text, ambient=ambient, staging=args.sigstore_staging, source=source)


def _read(path: Path, limit: int, what: str) -> bytes:
    """A bundle or token file given on the command line, whole and bounded; a bundle too big is
    ``sigstore.bundle``, like any other that is not one."""
    from .base import KeylessError

    try:
        return regularfile.read_regular(path, limit)
    except regularfile.RegularFileError as exc:
        if exc.reason == "too-big" and what == "bundle":
            raise KeylessError("bundle", str(path), f"{exc.detail}: not a Sigstore bundle") from None
        raise InputError(exc.reason, exc.path, exc.detail) from None
