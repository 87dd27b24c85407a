"""A plugin's contract against the installed Triton: what it was built for and what its vendor
declared (schema 1.2), checked before anything is loaded (``verify.plugin-triton``,
``verify.plugin-range``)."""

from __future__ import annotations

from ..base import VerifyError
from .verdict import PluginTerms

__all__ = ["check_terms"]


def check_terms(terms: PluginTerms, triton_version: str | None, where: str) -> None:
    """The installed Triton against what the plugin was built for and what its vendor
    declared (``verify.plugin-triton``, ``verify.plugin-range``); nothing is loaded."""
    if _same_plain_release(terms, triton_version):
        return  # the common case (Triton's own bundled plugins): no version parsing at import
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if (terms.built_for or terms.triton) and triton_version is None:
        raise VerifyError("plugin-triton", where, "Triton is not installed")
    if not triton_version:
        return
    try:
        installed = Version(triton_version)
    except InvalidVersion:
        raise VerifyError("plugin-triton", where, f"the installed Triton's version {triton_version!r} is not "
                          "PEP 440: the plugin's contract cannot hold") from None
    if terms.built_for is not None and _release(terms.built_for) != installed.release:
        raise VerifyError("plugin-triton", where, f"plugin {terms.name} {terms.version} was built for Triton "
                          f"{terms.built_for[:60]}; installed is {triton_version} (not loaded: Triton would refuse it "
                          "after dlopen, or crash)")
    try:
        declared = SpecifierSet(terms.triton)
    except InvalidSpecifier:
        raise VerifyError("plugin-range", where, f"declared range {terms.triton[:60]!r} is not PEP 440") from None
    if terms.triton and not declared.contains(installed, prereleases=True):
        raise VerifyError("plugin-range", where, f"plugin {terms.name or ''} declares Triton {terms.triton}; "
                          f"installed is {triton_version}")


def _same_plain_release(terms: PluginTerms, triton_version: str | None) -> bool:
    """No declared range, the installed Triton a plain PEP 440 version, and the plugin built for
    none or for exactly the installed release (local ``+...`` parts aside): the full check would
    pass, without importing ``packaging`` (4-6 ms of a warm import)."""
    if terms.triton or not triton_version or not _plain_version(triton_version):
        return False
    if terms.built_for is None:
        return True  # Triton's own bundled plugins: only the installed version is parsed
    return (_plain_version(terms.built_for)
            and terms.built_for.split("+", 1)[0] == triton_version.split("+", 1)[0])


def _plain_version(version: str) -> bool:
    """Dotted ASCII digits with an optional PEP 440 local part: a subset of what ``packaging``
    parses, so any version this accepts is valid there too."""
    release, plus, local = version.partition("+")
    # A local part is ASCII letter-and-digit runs joined by single "-", "_" or ".".
    local_parts = local.replace("-", ".").replace("_", ".").split(".") if plus else []
    return (all(part.isascii() and part.isdigit() for part in release.split("."))
            and all(part.isascii() and part.isalnum() for part in local_parts))


def _release(version: str) -> tuple[int, ...] | None:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).release
    except InvalidVersion:
        return None
