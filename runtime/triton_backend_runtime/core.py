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
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .discovery import DEFAULT_PACKAGE, core_init
from .errors import PolicyError, VerifyError
from .verdict import Reason, reason_of
from .vocab import OFF, STRICT, VERIFIED

if TYPE_CHECKING:
    from .ownership import Overlap


#: The reason code of files owned by two distributions (:mod:`.ownership`).
CONFLICT = "conflict.files"


class CoreRejected(ImportError):
    """``import triton`` refused under strict: the core did not verify."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
        self.reason = reason


def check_core(spec: Any, package: str = DEFAULT_PACKAGE) -> Reason | None:
    """Verify the distribution ``spec`` (of ``package``) comes from; raise under strict."""
    from . import registry as reg

    registry = reg.get()
    if registry.policy == OFF or spec is None or not getattr(spec, "origin", None):
        return None
    registry.verify(package=package)
    reason = core_reason(registry, str(spec.origin))
    registry.core = reason
    if reason is not None and registry.policy == STRICT:
        raise CoreRejected(reason)
    if reason is not None:
        reg.emit(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
    # triton/__init__ is about to load libtriton: what it may load with it is decided now
    from .pluginguard import check_plugin_paths, guard

    guard(registry)
    check_plugin_paths(registry)  # raises under strict
    return reason


def core_reason(registry: Any, init_path: str) -> Reason | None:
    """Why the core at ``init_path`` is not verified; None when it is."""
    found = registry.discovery
    triton = found.triton if found else None
    root = os.path.dirname(os.path.dirname(init_path))
    init = core_init(found.package if found else DEFAULT_PACKAGE)
    if triton is None or not _same(triton.root, root):
        # no RECORD claims it: a manifest in that sys.path entry that lists it (no I/O)
        triton = next((d for d in _signed(registry) if _same(d.root, root) and _lists_core(registry, d, init)), None)
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


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _recorded(dist_info: str, init: str) -> bool:
    """Whether the installer's RECORD lists the core's ``__init__.py``: how the core's
    distribution is found when verification stopped before listing its files (a bad
    signature, say)."""
    from .discovery import read_small_text, record_row

    text = read_small_text(os.path.join(dist_info, "RECORD")) or ""
    return record_row(text, init) is not None


def _holds(files: list[str], path: str) -> bool:
    return path in files or any(_same(f, path) for f in files if os.path.basename(f) == "__init__.py")
