"""The Triton core, verified before ``triton/__init__.py`` runs.

``triton/__init__`` loads ``libtriton`` (and imports most of the package) before
``triton.backends`` is imported, so a check made only at backend discovery comes after the
core has run. The ``.pth`` hook's import finder (:mod:`.autohook`) therefore calls
:func:`check_core` with the spec of ``triton`` the import system is about to execute.

The core is the distribution whose files hold that ``triton/__init__.py`` (found by where
it is installed, not by the name ``triton``: forks install the package under other
names; a vendor release that renames the package holds ``<package>/__init__.py``). It
passes when that distribution's manifest verified (every file of it, with a schema 1.1
manifest). Under ``strict`` anything else raises :class:`ImportError` naming
the file and the reason: the one case where a policy stops ``import triton``, since every
backend depends on the core. Under ``warn`` it is a warning; under ``off``, nothing.

Verification hashes ``libtriton.so``; ``triton/__init__`` then ``dlopen``-s it by name, later.
A library replaced or written in between would run unverified, so once Triton has loaded it
(:func:`check_loaded`, called after ``triton._C.libtriton`` is imported) the file mapped into
the process must have the identity that was hashed: ``verify.changed`` otherwise (strict:
``import triton`` fails; warn: a warning). A library the core's own modules load by path
(``ctypes``, an extension module by file) must be a verified file before it is opened
(:mod:`.nativeguard`, ``verify.outside``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..base import OFF, STRICT, VERIFIED, PolicyError, Reason, VerifyError, reason_of
from ..site import DEFAULT_PACKAGE, core_init, identity, same_file

if TYPE_CHECKING:
    from ..site import Overlap
    from .mapped import Lookup

__all__ = ["CONFLICT", "CoreRejected", "check_core", "check_loaded", "check_mapped", "core_reason", "loaded_reason"]


#: The reason code of files owned by two distributions (:mod:`.ownership`).
CONFLICT = "conflict.files"


class CoreRejected(ImportError):
    """``import triton`` refused under strict: the core did not verify."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
        self.reason = reason


def check_core(spec: Any, package: str = DEFAULT_PACKAGE) -> Reason | None:
    """Verify the distribution ``spec`` (of ``package``) comes from; raise under strict."""
    from ..loading import registry as reg

    registry = reg.get()
    origin = _init_of(spec)
    if registry.policy == OFF or origin is None:
        return None
    registry.verify(package=package)
    from .sources import guard_sources

    guard_sources(registry)  # before triton/__init__ runs any of its modules
    reason = core_reason(registry, origin)
    registry.core = reason
    if reason is not None and registry.policy == STRICT:
        raise CoreRejected(reason)
    if reason is not None:
        reg.emit(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
    # triton/__init__ is about to load libtriton: what it may load with it is decided now
    from .pluginguard import check_plugin_paths, guard

    guard(registry)
    check_plugin_paths(registry)  # raises under strict
    from .nativeguard import watch_native

    watch_native(registry, package, os.path.dirname(origin), CoreRejected)  # libraries loaded by path, before dlopen
    verified = _verified_identity(registry, os.path.join(os.path.dirname(origin), "_C", "libtriton.so"))
    if reason is None and verified is not None:
        from .libtriton import when_loaded

        when_loaded("core", lambda module: check_loaded(module, verified, registry), package)
    if reason is None:
        from .importwatch import after_import

        after_import(package, lambda _module: check_mapped(registry, package))
    return reason


def _init_of(spec: Any) -> str | None:
    """The ``__init__.py`` the core is imported from. A namespace package (the file deleted,
    or never there) has none: the one that would be there in its first directory is checked,
    so that a core with its ``__init__.py`` removed is not a core that is never checked."""
    origin = getattr(spec, "origin", None)
    if isinstance(origin, str) and origin:
        return origin
    locations = list(getattr(spec, "submodule_search_locations", None) or ())
    return os.path.join(str(locations[0]), "__init__.py") if locations else None


def check_mapped(registry: Any, package: str = DEFAULT_PACKAGE) -> None:
    """After ``<package>/__init__`` ran (and again when the backends are loaded): every
    ``libtriton`` this process has mapped must be a verified one. A core whose
    ``_C/__init__.py`` fetches its library at import (a 0-byte ``libtriton.so`` in the wheel)
    and loads it by path from a cache goes around the import system's finders, so the check
    of the ``_C.libtriton`` import never runs; the mappings show what was loaded. This is
    after ``dlopen``: its constructors have run, but under strict nothing imports the core.
    Only a core whose verified ``libtriton.so`` is empty is scanned: one with its library in
    the wheel has that library checked as ``<package>._C.libtriton`` is imported."""
    from ..loading import registry as reg
    from .mapped import DELETED, lookup

    if not any(ident[2] == 0 for ident in registry.libtriton_verified.values()):
        return  # a core with its library in the wheel: the check of the _C.libtriton import holds
    verified = [(int(v[0]), int(v[1]), os.fsencode(os.path.realpath(p)))
                for p, v in registry.libtriton_verified.items()]
    lookup_ = lookup(lambda m: _foreign_libtriton(m, verified))
    if lookup_.found is not None:
        path = lookup_.found.path.removesuffix(DELETED).decode("utf-8", "replace")
        reason = reason_of(VerifyError("outside", path, f"{package} mapped a libtriton from outside the verified "
                                       "files (fetched or planted at import; the verified libtriton.so is not it)"))
    elif not lookup_.complete:  # unreadable or past its bounds: what was loaded is not known
        reason = reason_of(VerifyError("outside", "/proc/self/maps", f"{package} fetches its libtriton at import, "
                                       "and this process's mappings could not be read whole to check it"))
    else:
        return
    registry.core = reason
    if registry.policy == STRICT:
        raise CoreRejected(reason)
    # the audit hook (.nativeguard) may have warned about this library before it was opened
    if not any(p.code == reason.code and p.path == reason.path for p in registry.problems):
        registry.problems.append(reason)
        reg.emit(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")


def _foreign_libtriton(mapping: Any, verified: list[tuple[int, int, bytes]]) -> bool:
    """A mapping of a file named like Triton's library that is none of the verified ones
    (device, inode and real path: :func:`.mapped.same_file`)."""
    from .mapped import DELETED, same_file

    name = os.path.basename(mapping.path.removesuffix(DELETED))
    if not (name.startswith(b"libtriton") and b".so" in name):
        return False
    return not any(same_file(mapping, device, inode, real) for device, inode, real in verified)


def _verified_identity(registry: Any, lib: str) -> list[object] | None:
    """The identity ``lib`` was verified with. The spec's origin is absolute, a verified path
    is as its ``sys.path`` entry was written (``""`` is ``.``): the same file either way."""
    table: dict[str, list[object]] = registry.libtriton_verified
    found = table.get(lib)
    if found is None:
        found = next((ident for path, ident in table.items() if same_file(path, lib)), None)
    return found


def check_loaded(module: Any, verified: list[object], registry: Any) -> None:
    """After ``dlopen``: the ``libtriton.so`` mapped into this process must be the file that
    was verified (replaced or written in between, it is not). Raises :class:`CoreRejected`
    under strict (``import triton`` fails; the library stays mapped but nothing uses it), warns
    under warn."""
    from ..loading import registry as reg

    path = getattr(module, "__file__", None)
    reason = loaded_reason(path, verified) if isinstance(path, str) else None
    if reason is None:
        return
    registry.core = reason
    if registry.policy == STRICT:
        raise CoreRejected(reason)
    registry.problems.append(reason)
    reg.emit(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")


def loaded_reason(path: str, verified: list[object]) -> Reason | None:
    """Why the library mapped from ``path`` is not the file of identity ``verified``.

    ``/proc/self/maps`` names the device and inode of each mapping; ``/proc/self/map_files``
    stats the very file mapped (where this user may: root, or ``CAP_CHECKPOINT_RESTORE``).
    Otherwise the mapping's inode must be the verified one and the file at ``path`` must
    still have the verified identity (so it was not written in place either). The device
    number of an overlay (containers) differs between the two views: a mismatch is accepted
    where the file's own device is an anonymous one (major 0) and all else matches."""
    mapped = _mapping(path)
    if not mapped.known:  # no /proc (or past its bounds): the file at the path must still be the one verified
        now = _identity(path)
        return None if now == verified else _changed(path, _show(now), verified)
    if mapped.found is None:
        return reason_of(VerifyError("changed", path, "the libtriton.so imported is not mapped in this process "
                                     "under its path: what was loaded cannot be checked"))
    span, dev, ino = mapped.found.span, mapped.found.device, mapped.found.inode
    shown = f"device {os.major(dev)}:{os.minor(dev)}, inode {ino}"
    try:
        exact = identity(os.stat(f"/proc/self/map_files/{span}"))
    except OSError:
        exact = None
    if exact is not None:
        return None if exact == verified else _changed(path, _show(exact), verified)
    now = _identity(path)
    vdev = int(verified[0])  # type: ignore[call-overload]
    same_dev = dev == vdev or (os.major(vdev) == 0 and now is not None and now[0] == vdev)
    if ino == verified[1] and same_dev and now == verified:
        return None
    return _changed(path, shown, verified)


def _mapping(path: str) -> Lookup:
    """The first mapping of ``path`` in this process, found by its path: its device and inode
    are what is checked."""
    from .mapped import DELETED, lookup

    real = os.fsencode(os.path.realpath(path))
    return lookup(lambda m: m.path in (real, real + DELETED))


def _identity(path: str) -> list[object] | None:
    try:
        return identity(os.stat(path))
    except OSError:
        return None


def _show(ident: list[object] | None) -> str:
    if ident is None:
        return "gone"
    dev = int(ident[0])  # type: ignore[call-overload]
    return f"device {os.major(dev)}:{os.minor(dev)}, inode {ident[1]}, size {ident[2]}, mtime_ns {ident[3]}"


def _changed(path: str, loaded: str, verified: list[object]) -> Reason:
    return reason_of(VerifyError("changed", path, f"the libtriton.so loaded ({loaded}) is not the file verified "
                                 f"({_show(verified)}): replaced or written after it was verified"))


def core_reason(registry: Any, init_path: str) -> Reason | None:
    """Why the core at ``init_path`` is not verified; None when it is."""
    found = registry.discovery
    triton = found.triton if found else None
    root = os.path.dirname(os.path.dirname(init_path))
    init = core_init(found.package if found else DEFAULT_PACKAGE)
    if triton is None or not same_file(triton.root, root):
        # no RECORD claims it: a manifest in that sys.path entry that lists it (no I/O)
        triton = next((d for d in _signed(registry) if same_file(d.root, root) and _lists_core(registry, d, init)),
                      None)
    if triton is not None:
        return _owner_reason(registry, triton, init_path)
    # No installed distribution owns the file imported (it is not where an installer put
    # it); a signed Triton elsewhere on sys.path is then shadowed.
    signed = next((d for d in _signed(registry) if _lists_core(registry, d, init) or _recorded(d.dist_info, init)),
                  None)
    if signed is not None:
        return reason_of(VerifyError(
            "shadowed", init_path, f"{init.split('/')[0]} would be imported from {init_path}, not from the verified "
            f"{os.path.join(signed.root, *init.split('/'))} (an earlier sys.path entry shadows it)"
        ))
    return reason_of(PolicyError(
        "not-verified", init_path, "no installed distribution's RECORD lists this file (not installed by an "
        "installer, or an unknown Triton)"
    ))


def _owner_reason(registry: Any, triton: Any, init_path: str) -> Reason | None:
    """The core's distribution found (by RECORD, the one the file on disk matches): its verdict."""
    verdict = registry.verdicts.get(triton.dist_info) if triton.manifest else None
    if verdict is not None and verdict.status == VERIFIED:
        if _holds(verdict.files, init_path):
            return None
        return reason_of(PolicyError("not-verified", init_path, f"the manifest of {triton.label()} does not list it"))
    contested: Overlap | None = registry.core_overlap
    if contested is not None and (verdict is None or verdict.problem is None or verdict.problem.code != CONFLICT):
        return contested.reason(init_path)
    if verdict is None:
        return reason_of(PolicyError(
            "not-verified", init_path, f"{triton.label()} has no signed manifest (a legacy or unknown Triton)"
        ))
    return verdict.problem or reason_of(PolicyError(
        "not-verified", triton.manifest, f"{triton.label()} is {verdict.status}: {verdict.note}"
    ))


def _signed(registry: Any) -> list[Any]:
    return [d for d in (registry.discovery.distributions if registry.discovery else []) if d.manifest]


def _lists_core(registry: Any, dist: Any, init: str) -> bool:
    verdict = registry.verdicts.get(dist.dist_info)
    return verdict is not None and os.path.join(dist.root, *init.split("/")) in verdict.files


def _recorded(dist_info: str, init: str) -> bool:
    """Whether the installer's RECORD lists the core's ``__init__.py``: how the core's
    distribution is found when verification stopped before listing its files (a bad
    signature, say)."""
    from ..site import read_small_text, record_row

    text = read_small_text(os.path.join(dist_info, "RECORD")) or ""
    return record_row(text, init) is not None


def _holds(files: list[str], path: str) -> bool:
    return path in files or any(same_file(f, path) for f in files if os.path.basename(f) == "__init__.py")
