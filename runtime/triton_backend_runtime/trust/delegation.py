"""TUF-style delegations applied to one release, after its signatures verified and its
payload was parsed: :func:`admit_signers` (scope, then floor), :func:`ungranted` (each
declared name) and :func:`check_floor` (floor alone, for manifests that grant no trust)."""

from __future__ import annotations

from collections.abc import Sequence

from ..base import TrustStoreError, canonicalize_name
from .floors import MAX_VERSION_CHARS
from .keys import TrustStore

__all__ = ["admit_signers", "check_floor", "ungranted"]


def admit_signers(store: TrustStore, keyids: Sequence[str], name: str, version: str, where: str) -> tuple[str, ...]:
    """The keyids whose (already verified) signatures count for release ``name`` ``version``.

    Call it after the signatures verified (``dsse.verify``) and the payload was parsed, with
    the signed name and version. Scope first: a key scoped to other names does not count;
    fewer than ``store.threshold`` left raises TrustStoreError code ``trust.scope``. Then the
    floor (:func:`check_floor`): ``trust.rollback``. Returns the counting keyids, in order.
    """
    wanted = canonicalize_name(name)[:200]
    admitted: list[str] = []
    outside: list[str] = []
    for keyid in dict.fromkeys(keyids):
        scope = store.scopes.get(keyid)
        (admitted if scope is None or wanted in scope.names else outside).append(keyid)
    if len(admitted) < store.threshold:
        why = [
            f"key {store.label(k)} may sign only {store.scopes[k].describe()} "
            f"(scope set in {', '.join(store.scopes[k].sources)})"
            for k in outside
        ]
        detail = "; ".join(why) or f"only {len(admitted)} valid signature(s)"
        raise TrustStoreError(
            "scope", where, f"{len(admitted)} of {store.threshold} required signatures count for {wanted}: {detail}"
        )
    check_floor(store, name, version, where)
    return tuple(admitted)


def ungranted(store: TrustStore, keyids: Sequence[str], kind: str, name: str) -> str | None:
    """Why the (already admitted) signers ``keyids`` may not declare ``kind`` ``name`` (fewer
    than ``store.threshold`` of them are granted it), or None when they may. An unscoped key
    may declare any name; a name of the Triton core is still the core's (:mod:`.conflicts`)."""
    signers = list(dict.fromkeys(keyids))
    granted = [k for k in signers if (scope := store.scopes.get(k)) is None or scope.grants_name(kind, name)]
    if len(granted) >= store.threshold:
        return None
    why = "; ".join(
        f"key {store.label(k)} may declare {store.scopes[k].describe_grants()} "
        f"(scope set in {', '.join(store.scopes[k].sources)})"
        for k in signers if k not in granted
    )
    return (f"{len(granted)} of {store.threshold} required signatures may declare {kind} {name[:100]!r}: "
            f"{why or 'no signature counts'}; grant it with trust add KEY --scope DIST,{kind}:NAME")


def check_floor(store: TrustStore, name: str, version: str, where: str) -> None:
    """Raise TrustStoreError code ``trust.rollback`` when ``version`` of ``name`` is below its floor.

    Applies to every manifest, signed or not (for one that grants no trust, pass the installed
    distribution's version). A version that is not PEP 440 cannot be shown to be above a floor
    and is refused; a name without a floor passes.
    """
    wanted = canonicalize_name(name)
    floor = store.floors.get(wanted)  # a floor exists only for a well-formed name: messages stay short
    if floor is None:
        return
    if floor.version is None:
        raise TrustStoreError(
            "rollback", where, f"the floor for {wanted} set in {floor.source} is unreadable; no release is admitted"
        )
    from packaging.version import Version

    shown = version[:100]
    try:
        if len(version) > MAX_VERSION_CHARS:
            raise ValueError(version)
        below = Version(version) < Version(floor.version)
    except ValueError:  # InvalidVersion, or a release number too long for int()
        raise TrustStoreError(
            "rollback", where, f"{wanted} version {shown!r} is not a PEP 440 version, so it cannot be shown to be "
            f"at or above the floor {floor.version} set in {floor.source}"
        ) from None
    if below:
        raise TrustStoreError(
            "rollback", where, f"{wanted} version {shown} is below the floor {floor.version} set in {floor.source}"
        )
