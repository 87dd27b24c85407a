"""Ed25519 signing keys and DSSE signing of manifests (build side).

``keygen`` writes the private key as PKCS#8 PEM (encrypted when a passphrase is given, read
from an environment variable, never from the command line) and the public key as the one
line the runtime's trust store reads (see :mod:`triton_backend_runtime.trust.keys`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_backend_runtime.manifest import Manifest
from triton_backend_runtime.trust import PublicKey, dsse, keyid_of, parse_key_file, statement_bytes

from ..base import ConfigError, TrustError, atomic_write, read_input

__all__ = ["MAX_KEY_FILE", "PASSPHRASE_ENV", "SigningKey", "generate", "load", "seal", "seal_with", "take_env"]

#: A PEM Ed25519 key is a few hundred bytes; anything much larger is not one.
MAX_KEY_FILE = 64 << 10

#: Environment variable holding the passphrase of an encrypted private key.
PASSPHRASE_ENV = "BACKEND_PACKAGER_KEY_PASSPHRASE"


@dataclass(frozen=True)
class SigningKey:
    private: Any  # cryptography's Ed25519PrivateKey
    public: PublicKey


def _public_of(private: Any, comment: str, source: str) -> PublicKey:
    from cryptography.hazmat.primitives import serialization

    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PublicKey(keyid_of(raw), raw, comment, source)


def generate(private_path: Path, public_path: Path, comment: str, passphrase: bytes | None) -> PublicKey:
    """Write a new key pair; the private file is created with mode 0600."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    encryption: Any = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    public = _public_of(private, comment, str(public_path))
    atomic_write(private_path, pem, mode=0o600)
    atomic_write(public_path, (public.line() + "\n").encode("ascii"))
    return public


def load(path: Path, passphrase: bytes | None = None) -> SigningKey:
    """Read a PEM private key; its passphrase is ``passphrase``, else PASSPHRASE_ENV's."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = read_input(path, MAX_KEY_FILE)
    if _is_public_key(data):
        raise ConfigError("key", str(path), "is a public key; pass the private key (.pem)")
    if passphrase is None and os.environ.get(PASSPHRASE_ENV):
        passphrase = os.environ[PASSPHRASE_ENV].encode()
    try:
        private = serialization.load_pem_private_key(data, passphrase or None)
    except TypeError:
        raise ConfigError("key", str(path), f"the key is encrypted: set {PASSPHRASE_ENV}") from None
    except ValueError as exc:
        raise ConfigError("key", str(path), f"not a usable PEM private key ({exc})") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise ConfigError("key", str(path), f"expected an Ed25519 key, found {type(private).__name__}")
    return SigningKey(private, _public_of(private, "", str(path)))


def _is_public_key(data: bytes) -> bool:
    """A public key where the private one belongs: keygen's ``.pub`` line, or a PEM public key."""
    text = data.decode("utf-8", errors="replace")
    if "-----BEGIN PUBLIC KEY-----" in text:
        return True
    try:
        return bool(parse_key_file(text, "-"))
    except TrustError:
        return False


def take_env(name: str) -> str | None:
    """Read ``name`` from the environment and remove it, so that no child inherits it: from
    ``os.environ`` (and the C environment, which children get), and its bytes in the
    process's own environment block are overwritten with NULs, where ``/proc/PID/environ``
    of this process would still show them."""
    import ctypes
    import posix

    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        address = libc.getenv(name.encode())
        if address:  # where the value's bytes are: the startup block, or the heap (putenv)
            ctypes.memset(address, 0, len(ctypes.string_at(address)))
    except (OSError, AttributeError):
        pass
    value = os.environ.pop(name, None)  # and unsetenv(3)
    posix.environ.pop(name.encode(), None)  # os.environ's source, read once at startup
    return value


def seal(manifest: Manifest, key: SigningKey | None) -> bytes:
    """The envelope file for ``manifest``: signed by ``key``, or hash-only without one."""
    return seal_with(manifest, [key] if key is not None else [])


def seal_with(manifest: Manifest, keys: Sequence[SigningKey]) -> bytes:
    """The envelope signed by every key in ``keys``, in order (DSSE allows several
    signatures over one payload: a trust store with a threshold of N needs N of them)."""
    body = statement_bytes(manifest)
    message = dsse.pae(dsse.PAYLOAD_TYPE, body)
    signatures = tuple(dsse.Signature(k.public.keyid, k.private.sign(message)) for k in keys)
    return dsse.encode(dsse.Envelope(body, dsse.PAYLOAD_TYPE, signatures))
