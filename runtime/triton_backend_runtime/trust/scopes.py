"""Scopes (``scopes`` files, ``KEYID ITEM[,ITEM...]``), after TUF's delegations: a scoped
key's signature counts only for the distributions named (``NAME`` or ``dist:NAME``, PEP
503-normalised), and may declare only the backend, pass, dialect and op names granted
(``backend:NAME``, ``pass:NAME``, ``dialect:NAME``, ``op:NAME``; ``KIND:*`` for any name of that
kind). A scoped key with no grant may declare none: a line written before grants existed still
scopes the distributions, and the key's backends and plugins are refused (``trust.name``) until
it is granted their names. An unscoped key counts for any distribution and may declare any name.

A key scoped in several places gets the intersection (of distributions and of grants). A
malformed line that still names a key is reported with its ``file:line`` and scopes the key to
the names that could be read (possibly none): skipping it would widen what the key may sign.
"""

from __future__ import annotations

import os
import re

from ..base import NAME_KINDS, TrustStoreError, canonicalize_name, record
from .editing import set_line
from .paths import SCOPES_FILE, content_lines
from .syntax import CLAIM_NAME, DIST_NAME

__all__ = ["Scope", "parse_scope", "parse_scope_names", "parse_scopes", "set_scope"]

_KEYID = re.compile(r"[0-9a-f]{64}")
#: What one scope item is, for messages.
_SCOPE_ITEM = f"a distribution name or KIND:NAME (KIND one of {', '.join(NAME_KINDS)})"


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
        return ("dist", canonicalize_name(item)) if DIST_NAME.fullmatch(item) else None
    kind = kind.lower()
    if kind == "dist":
        return ("dist", canonicalize_name(name)) if DIST_NAME.fullmatch(name) else None
    if kind in NAME_KINDS and (name == "*" or CLAIM_NAME.fullmatch(name)):
        return kind, name
    return None


@record(frozen=True)
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


def set_scope(directory: str, keyid: str, scope: Scope | frozenset[str]) -> list[str]:
    """Scope ``keyid`` to ``scope`` (or to distribution names alone, granting no name) in
    ``directory``'s scopes file (replacing its line there)."""
    scope = scope if isinstance(scope, Scope) else Scope(scope, ())
    items = [*sorted(scope.names), *(f"{k}:{n}" for k, n in sorted(scope.grants))]
    line = f"{keyid} {','.join(items)}"
    return set_line(os.path.join(directory, SCOPES_FILE), lambda first: first.lower() == keyid, line)
