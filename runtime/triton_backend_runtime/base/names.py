"""Distribution names and versions, compared as PEP 503 and PEP 440 say: one copy for both
distributions.

``canonicalize_name`` is ``packaging.utils.canonicalize_name`` (the same rule, checked equal by
a fuzz test), kept here because importing ``packaging.utils`` pulls in ``packaging.tags`` and
with it ``logging`` and ``subprocess``: 16-18 ms (``python -X importtime``, on top of the
runtime's own modules) on every warm ``import triton``, where this module costs 0.1 ms.
``packaging.version`` is imported lazily, only by :func:`same_version`.
"""

from __future__ import annotations

__all__ = ["canonicalize_name", "same_version"]


def canonicalize_name(name: str) -> str:
    """The PEP 503 normalised name: lower case, each run of ``-``, ``_`` and ``.`` one ``-``."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return value


def same_version(a: str, b: str) -> bool:
    """Whether two version strings name one PEP 440 version (``1.0`` is ``1.0.0``); strings that
    are not versions are compared as text."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except (InvalidVersion, ValueError):  # ValueError: a release number too long for int()
        return a == b
