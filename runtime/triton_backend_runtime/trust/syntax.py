"""The names the trust files are written in: distribution names (PEP 508, compared PEP 503
normalised) and the backend, pass, dialect and op names a scope grants or a pin names."""

from __future__ import annotations

import re

from ..base import TrustStoreError, canonicalize_name

__all__ = ["CLAIM_NAME", "DIST_NAME", "parse_name"]

#: A distribution name as PEP 508 allows it (before PEP 503 normalisation).
DIST_NAME = re.compile(r"[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9]", re.IGNORECASE)
#: A backend, pass, dialect or op name a scope grants or a pin names (case-sensitive, as Triton
#: compares them); ``*`` in a grant stands for every name of its kind.
CLAIM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")


def parse_name(text: str, where: str) -> str:
    """A distribution name (PEP 508 syntax), normalised; TrustStoreError('name-format') otherwise."""
    if not DIST_NAME.fullmatch(text):
        raise TrustStoreError("name-format", where, f"{text[:80]!r} is not a distribution name")
    return canonicalize_name(text)
