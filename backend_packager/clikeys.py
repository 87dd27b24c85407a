"""The signing key on the command line: where ``keygen`` writes a pair, and which key
``migrate``, ``adopt`` and ``mirror`` sign with (``--key`` or the environment)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import InputError

__all__ = ["key_paths", "signing_key"]


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
