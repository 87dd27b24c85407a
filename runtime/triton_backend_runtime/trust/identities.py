"""Trusted signing identities (``identities`` files): who may sign keylessly, with Sigstore.

One identity a line, ``#`` comments::

    ISSUER PATTERN [comment...]

``ISSUER`` is the OIDC issuer the Fulcio certificate records (``https://token.actions.
githubusercontent.com``), compared exactly. ``PATTERN`` is matched against the certificate's
subject alternative name (SAN), anchored at both ends, case-sensitive:

- without ``*``: the exact SAN (``https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1.0``,
  or ``release@example.com``);
- with one ``*``, as its last character: the SAN is the text before the ``*`` followed by one
  or more of ``A-Z a-z 0-9 . _ + -``: the ``*`` stays inside the last path segment (never a
  ``/``, ``@``, ``:``, ``%``, ``?`` or ``#``), so ``...release.yml@refs/tags/*`` matches every
  tag ``v1.2.3`` of that workflow and nothing below or beside it. The text before the ``*``
  must be an ``https://`` URI with a host and at least one whole path segment before the one
  the ``*`` ends (``https://github.com/org/*``, never ``https://github.com/*``): a pattern
  never names a whole host.

No other wildcard and no regular expression: what a pattern admits is read off its text.

Each identity has an id, the hex sha256 of ``issuer NUL pattern`` under a domain tag, written
like a keyid: ``scopes`` lines and ``revoked`` lines name it exactly as they name a key, so an
identity is scoped, granted names and revoked the way a key is, and a verified identity
counts as one signer toward the threshold.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable

from ..base import TrustStoreError, record
from .paths import IDENTITIES_FILE, content_lines

__all__ = [
    "ALLOWED_WILDCARD", "Identity", "MAX_PATTERN_CHARS", "identity_id", "matches", "most_specific",
    "parse_identities", "parse_identity", "remove_identity", "set_identity", "sigstore_state"
]

#: What a trailing ``*`` stands for: one or more of these, never a separator.
ALLOWED_WILDCARD = re.compile(r"[A-Za-z0-9._+-]+")
MAX_PATTERN_CHARS = 1024
_ISSUER = re.compile(r"[a-z][a-z0-9+.-]*://[^\s/]+(/\S*)?", re.IGNORECASE)
#: The text before a ``*``: https, a host, at least one whole path segment, no other ``*``.
_PREFIX = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?/[^\s*/]+/[^\s*]*")
_ID_TAG = b"triton-backend sigstore identity v1\0"


def identity_id(issuer: str, pattern: str) -> str:
    """The id ``scopes`` and ``revoked`` lines name an identity by (64 hex digits)."""
    return hashlib.sha256(_ID_TAG + issuer.encode("utf-8") + b"\0" + pattern.encode("utf-8")).hexdigest()


@record(frozen=True)
class Identity:
    """A trusted identity: the OIDC issuer, the SAN pattern, and where it was read."""

    issuer: str
    pattern: str
    comment: str = ""
    source: str = ""

    @property
    def id(self) -> str:
        return identity_id(self.issuer, self.pattern)

    def matches(self, issuer: str, san: str) -> bool:
        return issuer == self.issuer and matches(self.pattern, san)

    def line(self) -> str:
        return f"{self.issuer} {self.pattern} {self.comment}".rstrip()

    def describe(self) -> str:
        return f"{self.pattern} (issuer {self.issuer})"


def matches(pattern: str, san: str) -> bool:
    """Whether ``san`` is what ``pattern`` admits (module docstring); anchored, never a regex."""
    if not pattern.endswith("*"):
        return san == pattern
    prefix = pattern[:-1]
    return san.startswith(prefix) and ALLOWED_WILDCARD.fullmatch(san[len(prefix):]) is not None


def _pattern_problem(pattern: str) -> str | None:
    blank = any(c.isspace() for c in pattern) or "#" in pattern  # '#' starts a trust file's comment
    if not pattern or len(pattern) > MAX_PATTERN_CHARS or not pattern.isprintable() or blank:
        return f"an identity is 1 to {MAX_PATTERN_CHARS} printable characters without blanks or '#'"
    if "*" not in pattern:
        return None
    if pattern.count("*") > 1 or not pattern.endswith("*"):
        return "a pattern has one '*', as its last character"
    if not _PREFIX.fullmatch(pattern[:-1]):
        return "before the '*' goes an https:// URI with a host and at least one whole path segment"
    return None


def parse_identity(issuer: str, pattern: str, where: str, comment: str = "") -> Identity:
    """An identity as ``trust add-identity`` takes it; TrustStoreError ``identity-format`` otherwise."""
    if len(issuer) > MAX_PATTERN_CHARS or not _ISSUER.fullmatch(issuer) or "#" in issuer:
        raise TrustStoreError("identity-format", where, f"issuer {issuer[:100]!r} is not a URL (SCHEME://HOST[/PATH])")
    problem = _pattern_problem(pattern)
    if problem is not None:
        raise TrustStoreError("identity-format", where, f"{pattern[:100]!r}: {problem}")
    return Identity(issuer, pattern, comment, where)


def parse_identities(text: str, where: str) -> tuple[list[Identity], list[TrustStoreError]]:
    """An ``identities`` file; a malformed line is reported with its ``file:line`` and trusts
    nothing (skipping it refuses more, never less)."""
    found: list[Identity] = []
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        fields = content.split(maxsplit=2)
        if len(fields) < 2:
            problems.append(TrustStoreError("identity-format", at, "expected 'ISSUER PATTERN [comment]'; line skipped"))
            continue
        try:
            found.append(parse_identity(fields[0], fields[1], at, fields[2] if len(fields) > 2 else ""))
        except TrustStoreError as exc:
            problems.append(TrustStoreError("identity-format", at, f"{exc.detail}; line skipped"))
    return found, problems


def sigstore_state() -> str:
    """Which sigstore a keyless verdict was reached with, without importing it: its ``__init__.py``
    as found on ``sys.path`` and that file's identity (a reinstall or upgrade changes it)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("sigstore")
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None and spec.origin else ""
    try:
        st = os.stat(origin) if origin else None
    except OSError:
        st = None
    return f"sigstore:{origin}:{st.st_ino if st else '-'}:{st.st_size if st else '-'}:{st.st_mtime_ns if st else '-'}"


def most_specific(candidates: list[Identity]) -> Identity | None:
    """The identity a certificate is counted under when several match it: an exact SAN before a
    pattern, a longer pattern before a shorter, then the smaller id (one signer, one scope)."""
    ranked = sorted(candidates, key=lambda i: (i.pattern.endswith("*"), -len(i.pattern), i.id))
    return ranked[0] if ranked else None


def set_identity(directory: str, identity: Identity) -> list[str]:
    """Trust ``identity`` in ``directory``'s identities file: a line with its issuer and pattern
    is replaced in place (its comment updated), else the line is appended; the lines replaced."""
    return _rewrite(directory, lambda fields: fields[:2] == [identity.issuer, identity.pattern], identity.line())


def remove_identity(directory: str, wanted: str) -> list[str]:
    """Remove the identities whose id starts with ``wanted`` (lower-case hex) from
    ``directory``'s identities file; the lines removed."""
    return _rewrite(directory, lambda fields: len(fields) >= 2 and identity_id(*fields[:2]).startswith(wanted), None)


def _rewrite(directory: str, hit: Callable[[list[str]], bool], line: str | None) -> list[str]:
    """The identities file with the lines ``hit`` picks replaced by ``line`` (the first one; the
    others dropped) or, ``line`` None, removed; written atomically when anything changes."""
    from .editing import write_atomic
    from .paths import read_trust_file

    path = os.path.join(directory, IDENTITIES_FILE)
    kept: list[str] = []
    found: list[str] = []
    for old in read_trust_file(path, rewrite=True).splitlines():
        if hit(old.split("#", 1)[0].split()):
            if line is not None and not found:
                kept.append(line)
            found.append(old)
        else:
            kept.append(old)
    if line is not None and not found:
        kept.append(line)
    if found or line is not None:
        write_atomic(path, "".join(f"{text}\n" for text in kept).encode("utf-8"))
    return found
