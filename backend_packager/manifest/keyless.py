"""Keyless signing of the manifest's statement: a Sigstore bundle, made or attached (build side).

The payload a key signs (:func:`triton_backend_runtime.trust.statement_bytes`) is signed again
through sigstore-python: Fulcio certifies an ephemeral key for an OIDC identity, Rekor logs the
signature, and the result is a Sigstore bundle (v0.3) whose DSSE payload is that payload byte for
byte. It goes beside the manifest as ``triton_backend.sigstore.json``. An existing bundle may be
attached instead (a rebuild, or signing done elsewhere) when it carries exactly this payload.

sigstore is imported here only, and only when a bundle is made or checked. The identity token is
a credential: it is read before any input is opened, taken out of the environment so no child
inherits it, and used only in this (the signer's) process, as the signing key is.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from triton_backend_runtime.base import describe, jsonlimits
from triton_backend_runtime.manifest import Manifest
from triton_backend_runtime.trust import MAX_BUNDLE_BYTES, statement_bytes

from ..base import KeylessError, TrustError

__all__ = [
    "EXTRA_HINT", "IDENTITY_TOKEN_ENV", "IN_TOTO_PAYLOAD_TYPE", "Keyless", "MAX_BUNDLE_BYTES", "MAX_TOKEN_BYTES",
    "bundle_for", "check_bundle", "detect_ambient", "keyless_files", "require_sigstore", "token_problem"
]

#: (MAX_BUNDLE_BYTES is the runtime's: a bundle it would refuse unread is refused here too.)
#: An OIDC token is a JWT of a few KiB.
MAX_TOKEN_BYTES = 64 << 10
#: Environment variable holding an OIDC identity token (the token itself, never a path).
IDENTITY_TOKEN_ENV = "BACKEND_PACKAGER_IDENTITY_TOKEN"
#: What sigstore's DSSE signing sets; the payload under it is ours, byte for byte.
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
EXTRA_HINT = "pip install 'triton-backend-packager[sigstore]'"


@dataclass
class _Session:
    """One Fulcio certificate for a run's bundles (a mirror signs many wheels on threads)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    signer: Any = None


@dataclass(frozen=True)
class Keyless:
    """How the statement gets its bundle: signed now for ``token``'s identity (``ambient``: the
    CI's own credential, fetched again if it expired), or ``bundle`` attached as given."""

    token: str | None = field(default=None, repr=False)
    ambient: bool = False
    staging: bool = False
    bundle: bytes | None = field(default=None, repr=False)
    source: str = ""  # where the token or bundle came from, for messages
    _session: _Session = field(default_factory=_Session, repr=False, compare=False)


def require_sigstore(where: str) -> None:
    """Fail before any work when sigstore-python is not installed."""
    import importlib.util

    if importlib.util.find_spec("sigstore") is None:
        raise KeylessError("missing", where, f"keyless signing needs sigstore-python: {EXTRA_HINT}")


def detect_ambient() -> str | None:
    """The CI's ambient OIDC credential (GitHub Actions with ``id-token: write``, and the others
    sigstore-python knows), or None."""
    from sigstore.oidc import detect_credential

    try:
        token: str | None = detect_credential()
    except Exception as exc:  # sigstore's IdentityError and the network's: said as one line
        raise KeylessError("identity", "ambient credential", f"cannot get the CI's OIDC token: {describe(exc)}") \
            from None
    return token


def keyless_files(manifest: Manifest, keyless: Keyless | None, path: str, where: str) -> dict[str, bytes]:
    """``{path: bundle}`` for ``manifest``'s statement, or nothing without ``keyless``."""
    if keyless is None:
        return {}
    return {path: bundle_for(keyless, statement_bytes(manifest), where)}


def bundle_for(keyless: Keyless, payload: bytes, where: str) -> bytes:
    """The bundle for ``payload``: the attached one, checked, or a new one signed now."""
    if keyless.bundle is not None:
        check_bundle(keyless.bundle, payload, keyless.source)
        return keyless.bundle
    return _sign(keyless, payload, where)


def _sign(keyless: Keyless, payload: bytes, where: str) -> bytes:
    from sigstore.dsse import Statement

    try:
        with keyless._session.lock:
            signer = _signer(keyless)
            bundle = signer.sign_dsse(Statement(payload))
        data: bytes = bundle.to_json().encode("utf-8")
    except TrustError:
        raise
    except Exception as exc:  # Fulcio, Rekor, the network, an expired token: this wheel's failure
        raise KeylessError("sign", where, f"Sigstore signing failed: {describe(exc)}") from None
    check_bundle(data, payload, where)  # what sigstore made is what the runtime will read
    return data


def _signer(keyless: Keyless) -> Any:
    """sigstore's Signer for this run, made once: its certificate serves every bundle while valid."""
    if keyless._session.signer is not None:
        return keyless._session.signer
    from sigstore.models import ClientTrustConfig
    from sigstore.sign import SigningContext

    config = ClientTrustConfig.staging() if keyless.staging else ClientTrustConfig.production()
    context = SigningContext.from_trust_config(config)
    with context.signer(_identity(keyless), cache=True) as signer:
        keyless._session.signer = signer
    return signer


def _identity(keyless: Keyless) -> Any:
    """sigstore's IdentityToken; an ambient one that expired meanwhile (a long build outlives a
    CI token) fetched again."""
    from sigstore.oidc import IdentityError, IdentityToken

    try:
        return IdentityToken(keyless.token or "")
    except IdentityError:
        if not keyless.ambient:
            raise
    return IdentityToken(detect_ambient() or "")


def token_problem(token: str) -> str | None:
    """Why ``token`` is not an identity token sigstore can sign with now (not a JWT, no
    ``aud``/``sub``/``iss``, expired), or None: said before any work, not at the first wheel."""
    from sigstore.oidc import IdentityToken

    try:
        IdentityToken(token)
    except Exception as exc:  # sigstore's IdentityError, and jwt's for what is not a JWT at all
        return describe(exc)
    return None


def check_bundle(data: bytes, payload: bytes | None, where: str) -> None:
    """``data`` is a Sigstore bundle (within bounds, as sigstore parses it) of a DSSE statement
    whose payload is ``payload`` byte for byte (any, without one: a bundle given is checked
    before any work); else ``sigstore.bundle`` or ``sigstore.statement``. Who signed it is not
    checked here: that is the runtime's trust policy."""
    try:
        jsonlimits.loads(data, where, KeylessError, limit=MAX_BUNDLE_BYTES)
    except KeylessError as exc:
        raise KeylessError("bundle", where, f"not a Sigstore bundle: {exc.detail}") from None
    require_sigstore(where)
    from sigstore.models import Bundle

    try:
        bundle = Bundle.from_json(data)
    except Exception as exc:  # sigstore's InvalidBundle, pydantic's, cryptography's: one reason
        raise KeylessError("bundle", where, f"not a Sigstore bundle: {describe(exc)}") from None
    envelope = bundle._inner.dsse_envelope
    if envelope is None:
        raise KeylessError("bundle", where, "the bundle signs a message, not a DSSE statement")
    if payload is None:
        return
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE or bytes(envelope.payload) != payload:
        raise KeylessError("statement", where, "the bundle signs another statement than this manifest's "
                           f"(payload sha256 {hashlib.sha256(bytes(envelope.payload)).hexdigest()[:16]}, "
                           f"the manifest's {hashlib.sha256(payload).hexdigest()[:16]})")
