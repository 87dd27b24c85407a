"""The Triton core, verified before ``triton/__init__.py`` runs.

``triton/__init__`` loads ``libtriton`` (and imports most of the package) before
``triton.backends`` is imported, so a check made only at backend discovery comes after the
core has run. The ``.pth`` hook's import finder (:mod:`.autohook`) therefore calls
:func:`check_core` with the spec of ``triton`` the import system is about to execute.

The core is the distribution whose files hold that ``triton/__init__.py`` (found by where
it is installed, not by the name ``triton``: forks install the package under other
names). It passes when that distribution's manifest verified (every file of it, with a
schema 1.1 manifest). Under ``strict`` anything else raises :class:`ImportError` naming
the file and the reason: the one case where a policy stops ``import triton``, since every
backend depends on the core. Under ``warn`` it is a warning; under ``off``, nothing.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import PolicyError, VerifyError
from .verdict import Reason, reason_of
from .vocab import OFF, STRICT, VERIFIED


class CoreRejected(ImportError):
    """``import triton`` refused under strict: the core did not verify."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
        self.reason = reason


def check_core(spec: Any) -> Reason | None:
    """Verify the distribution ``spec`` (of ``triton``) comes from; raise under strict."""
    from . import registry as reg

    registry = reg.get()
    if registry.policy == OFF or spec is None or not getattr(spec, "origin", None):
        return None
    registry.verify()
    reason = core_reason(registry, str(spec.origin))
    registry.core = reason
    if reason is None:
        return None
    if registry.policy == STRICT:
        raise CoreRejected(reason)
    reg.emit(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
    return reason


def core_reason(registry: Any, init_path: str) -> Reason | None:
    """Why the core at ``init_path`` is not verified; None when it is."""
    root = os.path.dirname(os.path.dirname(init_path))
    here = [d for d in (registry.discovery.distributions if registry.discovery else [])
            if d.manifest and d.dist_info in registry.verdicts and _same(d.root, root)]
    # The verdict's own file list first (every import, no I/O); the installer's RECORD only
    # when verification stopped before listing the files (a bad signature, say).
    owner = next((d for d in here if _holds(registry.verdicts[d.dist_info].files, init_path)), None)
    owner = owner or next((d for d in here if _recorded(d.dist_info)), None)
    if owner is not None:
        verdict = registry.verdicts[owner.dist_info]
        if verdict.status == VERIFIED:
            return None
        return verdict.problem or reason_of(PolicyError(
            "not-verified", owner.manifest or owner.dist_info, f"{owner.label()} is {verdict.status}: {verdict.note}"
        ))
    triton = registry.discovery.triton if registry.discovery else None
    if triton is not None and triton.manifest and not _same(triton.root, root):
        return reason_of(VerifyError(
            "shadowed", init_path, f"triton would be imported from {init_path}, not from the verified "
            f"{os.path.join(triton.root, 'triton', '__init__.py')} (an earlier sys.path entry shadows it)"
        ))
    return reason_of(PolicyError(
        "not-verified", init_path, "no signed manifest vouches for this file (a legacy or unknown Triton)"
    ))


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _recorded(dist_info: str) -> bool:
    """Whether the installer's RECORD lists triton/__init__.py: how the core's distribution is
    found when verification stopped before listing its files (a bad signature, say)."""
    from .discovery import read_small_text

    text = read_small_text(os.path.join(dist_info, "RECORD")) or ""
    return any(line.startswith("triton/__init__.py,") for line in text.splitlines())


def _holds(files: list[str], path: str) -> bool:
    return path in files or any(_same(f, path) for f in files if os.path.basename(f) == "__init__.py")
