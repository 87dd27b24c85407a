"""Revoked keys: the ``revoked`` files of the trust store, read so that a revocation never fails open.

A ``revoked`` file holds one key id a line, ``#`` comments. An id is the full keyid (64 hex
digits, the sha256 of the raw key) or a prefix of it of at least :data:`MIN_PREFIX_HEX` digits
(the 16 every tool prints), in any case, optionally written ``keyid:ID`` as ``keygen`` prints it.
A key is revoked when its keyid starts with a revoked id: a prefix revokes every key that has
it, known now or added later (a key cannot be made to escape a prefix someone revoked; making
a second key share 16 hex digits with a key one does not own costs 2**64 hashes).

A revocation that cannot be read must not leave the key it meant trusted, yet which key that
was is unknown. So a malformed line is reported with its ``file:line`` and:

- when it still starts with an id (``0123456789abcdef-typo``), that id is revoked;
- otherwise (and for a ``revoked`` file that cannot be read whole) the revocation list is
  *unreadable*: no signature counts until it is fixed. A distribution signed by a trusted key
  is then unverified, which ``strict`` excludes and ``warn`` loads with the warning.

Only stdlib: read on every ``import triton`` that verifies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..base import TrustStoreError, record
from .paths import content_lines

__all__ = ["MIN_PREFIX_HEX", "Revocations", "add", "covering", "parse_id", "parse_revoked", "remove", "revoking"]

#: The shortest prefix of a keyid a revocation may name: the 16 hex digits the tools print.
MIN_PREFIX_HEX = 16
KEYID_HEX = 64
_ID = re.compile(rf"(?:keyid:\s*)?([0-9a-f]{{{MIN_PREFIX_HEX},{KEYID_HEX}}})", re.IGNORECASE)
#: An id at the start of a line that holds more (what a malformed line still names).
_LEADING_ID = re.compile(rf"(?:keyid:\s*)?([0-9a-f]{{{MIN_PREFIX_HEX},{KEYID_HEX}}})(?![0-9a-f])", re.IGNORECASE)


def parse_id(text: str) -> str | None:
    """``text`` as a revoked id (lower-case hex, ``keyid:`` dropped), or None when it is not one."""
    found = _ID.fullmatch(text.strip()) if len(text) <= 2 * KEYID_HEX else None
    return found.group(1).lower() if found else None


def revoking(revoked: Iterable[str] | Mapping[str, str], keyid: str) -> str | None:
    """The revoked id that revokes ``keyid`` (the keyid itself or a prefix of it), or None.

    At most 49 lookups (one per prefix length), however many ids are revoked."""
    ids = revoked if isinstance(revoked, set | frozenset | dict) else set(revoked)
    wanted = keyid.lower()
    for length in range(MIN_PREFIX_HEX, min(len(wanted), KEYID_HEX) + 1):
        if wanted[:length] in ids:
            return wanted[:length]
    return None


def covering(ids: Iterable[str], wanted: str) -> list[str]:
    """The ids among ``ids`` that revoke what ``wanted`` names, or that ``wanted`` revokes: one
    is a prefix of the other (what ``trust unrevoke`` takes back)."""
    return [i for i in ids if i.startswith(wanted) or wanted.startswith(i)]


@record()
class Revocations:
    """Revoked ids with the ``file:line`` revoking each, and where a revocation was unreadable."""

    ids: dict[str, str]
    unreadable: list[str]


def parse_revoked(text: str, where: str) -> tuple[Revocations, list[TrustStoreError]]:
    """A ``revoked`` file's lines (see the module docstring); each malformed one is reported."""
    found = Revocations({}, [])
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        wanted = parse_id(content)
        if wanted is not None:
            found.ids.setdefault(wanted, at)
            continue
        leading = _LEADING_ID.match(content)
        expected = f"expected one keyid a line ({MIN_PREFIX_HEX} to {KEYID_HEX} hex digits, 'keyid:' allowed)"
        if leading is not None:
            wanted = leading.group(1).lower()
            found.ids.setdefault(wanted, at)
            detail = (f"{expected}, found {content[:100]!r}; keys whose keyid starts with {wanted} are revoked "
                      "until the line is fixed")
        else:
            found.unreadable.append(at)
            detail = f"{expected}, found {content[:100]!r}; no signature counts until the line is fixed"
        problems.append(TrustStoreError("revoked-format", at, detail))
    return found, problems


# Editing a trust directory's ``revoked`` file (``trust revoke`` / ``trust unrevoke``): read
# whole or refused, comments and other lines kept as they are, replaced atomically.


def _lines(path: str) -> list[str]:
    from .paths import read_trust_file

    return read_trust_file(path, rewrite=True).splitlines()


def _id_of(line: str) -> str | None:
    content = line.split("#", 1)[0].strip()
    return parse_id(content) if content else None


def add(path: str, wanted: str) -> tuple[str, int] | None:
    """Revoke ``wanted`` in the ``revoked`` file ``path``: a line is appended, unless a line
    there already revokes it; then that line and its number are returned and nothing is written."""
    from ..base import write_atomic

    lines = _lines(path)
    for number, line in enumerate(lines, 1):
        known = _id_of(line)
        if known is not None and wanted.startswith(known):
            return line, number
    write_atomic(path, "".join(f"{line}\n" for line in [*lines, wanted]).encode("utf-8"))
    return None


def remove(path: str, wanted: str) -> list[str]:
    """Take back the revocations in ``path`` that :func:`covering` ``wanted``; the lines removed."""
    from ..base import write_atomic

    kept: list[str] = []
    removed: list[str] = []
    for line in _lines(path):
        known = _id_of(line)
        (removed if known is not None and covering([known], wanted) else kept).append(line)
    if removed:
        write_atomic(path, "".join(f"{line}\n" for line in kept).encode("utf-8"))
    return removed
