"""Where the trust store is read from (kept apart from :mod:`.trust` so that listing the
files, which every ``import triton`` does, imports nothing heavy).

A trust directory holds ``*.pub`` files (key lines, see :mod:`.trust`), an optional ``revoked``
file (one keyid per line; ``#`` comments), an optional ``threshold`` file (an integer), an
optional ``scopes`` file (``KEYID ITEM[,ITEM...]`` lines: the distributions a key may sign and
the backend, pass, dialect and op names it may declare, as TUF delegations scope a role), an
optional ``min-versions`` file (``NAME VERSION`` lines: rollback floors) and an optional ``pins``
file (``[KIND:]NAME DIST`` lines: the distribution that owns a contested name), an optional
``identities`` file (``ISSUER PATTERN`` lines: who may sign keylessly, :mod:`.identities`) and an
optional ``sigstore-root.json`` (the Sigstore trusted root bundles are verified against, pinned by
``trust root``). Three places are read, all of them, in this order:

1. the system directory ``<sys.prefix>/etc/triton-backend/trusted`` (one per environment);
2. the user directory ``$XDG_CONFIG_HOME/triton-backend/trusted`` (``~/.config`` default);
3. ``TRITON_BACKEND_TRUSTED_KEYS``: key files or trust directories, ``os.pathsep``-separated.

Keys add up, revocations add up (a keyid revoked anywhere is refused everywhere), the
highest threshold configured anywhere applies, a key scoped in several places may sign only
the names every one of them allows (the intersection), the highest floor of a name
applies, and a name pinned to two different distributions is pinned to neither: no location
can weaken another.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from ..base import TrustStoreError

__all__ = [
    "FLOORS_FILE", "IDENTITIES_FILE", "MAX_TRUST_FILE", "PINS_FILE", "REVOKED_FILE", "SCOPES_FILE",
    "SIGSTORE_ROOT_FILE", "THRESHOLD_FILE", "TRUSTED_KEYS_ENV", "TRUST_FILES", "TRUST_SUBDIR", "content_lines",
    "read_trust_file", "system_trust_dir", "trust_sources", "user_trust_dir"
]

#: Environment variable naming extra key files or trust directories.
TRUSTED_KEYS_ENV = "TRITON_BACKEND_TRUSTED_KEYS"
TRUST_SUBDIR = ("triton-backend", "trusted")
#: A trust file read at import is cut here; one to rewrite must fit whole.
MAX_TRUST_FILE = 1024 * 1024
#: Per-directory files besides ``*.pub`` keys; a file named directly in the variable is read
#: by its base name too (so ``.../scopes`` there is a scopes file, anything else a key file).
REVOKED_FILE = "revoked"
THRESHOLD_FILE = "threshold"
SCOPES_FILE = "scopes"
FLOORS_FILE = "min-versions"
#: Listed here, so its bytes are part of the verdict cache's context: a pin change is a new context.
PINS_FILE = "pins"
#: Trusted Sigstore identities, and the pinned Sigstore trusted root (listed, so a change of
#: either is a new verdict-cache context).
IDENTITIES_FILE = "identities"
SIGSTORE_ROOT_FILE = "sigstore-root.json"
TRUST_FILES = (REVOKED_FILE, THRESHOLD_FILE, SCOPES_FILE, FLOORS_FILE, PINS_FILE, IDENTITIES_FILE, SIGSTORE_ROOT_FILE)


def system_trust_dir() -> str:
    import sys

    return os.path.join(sys.prefix, "etc", *TRUST_SUBDIR)


def user_trust_dir(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, *TRUST_SUBDIR)


def trust_sources(env: Mapping[str, str] | None = None) -> list[str]:
    """Every file the trust store is read from, in order; missing locations are skipped.

    Listing is cheap (no parsing, no cryptography): the verification cache keys on the
    bytes of exactly these files.
    """
    env = os.environ if env is None else env
    places = [system_trust_dir(), user_trust_dir(env)]
    places += [p for p in env.get(TRUSTED_KEYS_ENV, "").split(os.pathsep) if p]
    files: list[str] = []
    for place in places:
        if os.path.isdir(place):
            try:
                names = sorted(os.listdir(place))
            except OSError:
                continue
            files += [os.path.join(place, n) for n in names if n.endswith(".pub") or n in TRUST_FILES]
        elif os.path.isfile(place):
            files.append(place)
    return files


def read_trust_file(path: str, *, rewrite: bool = False) -> str:
    """A trust file's text: its first MiB, or, to ``rewrite`` it, all of it or an error ("" for
    no file). Opened without blocking: a FIFO named ``x.pub`` in a trust directory hung every
    ``import triton`` and ``trust list``."""
    from ..base import RegularFileError, read_regular

    try:
        return read_regular(path, MAX_TRUST_FILE, truncate=not rewrite).decode("utf-8")
    except RegularFileError as exc:
        if rewrite and exc.reason == "missing":
            return ""
        raise TrustStoreError("read", path, f"cannot read trust file: {exc.detail}") from None
    except UnicodeDecodeError:
        raise TrustStoreError("read", path, "cannot read trust file: not UTF-8 text") from None


def content_lines(text: str, where: str) -> Iterator[tuple[str, str]]:
    """A trust file's lines that say something: ``(file:line, content)``, the content being
    the line without its ``#`` comment, stripped (the format of every trust file but key
    files, whose comments are the key's own)."""
    for number, line in enumerate(text.splitlines(), 1):
        content = line.split("#", 1)[0].strip()
        if content:
            yield f"{where}:{number}", content
