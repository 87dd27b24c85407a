"""The ``.pth`` hook runs first, or strict says so.

``site`` runs the ``.pth`` files of a site directory in ``sorted(os.listdir(...))`` order
(code-point order), the user site's before the system's. The hook's file,
:data:`.autohook.PTH_NAME`, starts with ``+`` (U+002B), which sorts before digits, ``_``,
``-`` and every letter: before every ``.pth`` that installers and tools write. Only names
starting with a space or one of ``!"#$%&'()*`` sort before it.

Whatever imports Triton before the hook's finder is in place runs Triton's ``__init__``,
its ``libtriton`` and (through ``triton.backends``) every backend without verification. So
when the hook starts and ``triton`` is already in ``sys.modules`` (:func:`imported_early`):

* ``strict``: this process does not go on. One line on stderr names the ``.pth`` that ran
  before the hook and the Triton it imported, then ``os._exit(1)``: ``site`` prints any
  exception from a ``.pth`` line and continues, and a ``SystemExit`` there is a fatal error
  with a traceback. The runtime's own CLI (``python -m triton_backend_runtime``) is let
  through, with the problem recorded, so that ``doctor`` can say what happened;
* ``warn``: one warning, and a problem in the registry's report;
* ``off``: nothing.

The ``.pth`` that imported it is found by reading the ``.pth`` files ``site`` processed
before the hook's: those that name the package first, else those with an ``import`` line.
:func:`position` is what ``doctor`` reports. What the hook cannot see at all (``python -S``,
an embedded interpreter without ``site``) is for the patch in ``hooks/``: see
``docs/runtime/import-hook.md``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import field
from typing import Any

from ..base import PolicyError, Reason, RegularFileError, printable, read_regular, reason_of, record

__all__ = [
    "CODE", "EarlyImport", "FOUND", "MAX_PTH_BYTES", "MAX_PTH_FILES", "calling_pth", "culprits", "imported_early",
    "naming", "position", "processed_before", "pth_files"
]

#: A ``.pth`` read to find who imported Triton: more is no ``.pth`` a tool writes.
MAX_PTH_BYTES = 64 * 1024
#: ``.pth`` files looked at in one site directory.
MAX_PTH_FILES = 1000
CODE = "policy.hook-late"


@record()
class EarlyImport:
    """``module`` was imported before the hook ran; ``culprits``: the ``.pth`` files that ran
    before it and could have done it (best first)."""

    module: str
    origin: str | None
    hook: str | None
    culprits: list[str] = field(default_factory=list)

    def reason(self) -> Reason:
        who = self.culprits[0] if self.culprits else self.origin or self.module
        by = "" if self.culprits else "code that ran before the hook (no .pth before it imports it) "
        return reason_of(PolicyError(
            "hook-late", who, f"{by}imported {self.module} ({self.origin or 'no file'}) before the backend hook "
            f"({self.hook or 'its .pth'}) ran: {self.module} and its backends ran unverified"
        ))


#: What :func:`imported_early` found in this process (``doctor`` reports it).
FOUND: list[EarlyImport] = []


def imported_early(module: str, hook: str | None) -> None:
    """Called by the hook when ``module`` is in ``sys.modules`` before it started: under
    strict end this process (but the runtime's CLI), under warn warn once."""
    from ..base import OFF, STRICT
    from . import policy as pol

    policy, _ = pol.current()
    if policy == OFF or FOUND:
        return
    found = EarlyImport(module, getattr(sys.modules.get(module), "__file__", None), hook,
                        culprits(processed_before(hook), module))
    FOUND.append(found)
    reason = found.reason()
    line = printable(f"{reason.path}: {reason.message} ({reason.code})")  # a file name may hold a newline
    if policy == STRICT and not _runtime_cli():
        sys.stderr.write(f"triton-backend-runtime: error: {line}; policy strict stops this process (remove that "
                         f"import, or set {pol.POLICY_ENV}=warn)\n")
        sys.stderr.flush()
        os._exit(1)
    # The registry takes FOUND when it starts; one that started before the hook (Triton and
    # its registry imported by an earlier .pth) is told here, without importing it from below.
    started = sys.modules.get(f"{__package__}.registry")
    if started is not None:
        started.get().problems.append(reason)
    if policy != STRICT:
        sys.stderr.write(f"triton-backend-runtime: {line}\n")


def _runtime_cli() -> bool:
    argv: list[str] = list(getattr(sys, "orig_argv", []))
    return any(a == "-m" and b == "triton_backend_runtime" for a, b in zip(argv, argv[1:], strict=False)) or (
        "-mtriton_backend_runtime" in argv)


def calling_pth() -> str | None:
    """The ``.pth`` file ``site`` is processing now (``site.addpackage``'s frame), if any."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "addpackage" and isinstance(frame.f_locals.get("fullname"), str):
            return str(frame.f_locals["fullname"])
        frame = frame.f_back
    return None


def pth_files(directory: str) -> list[str]:
    """The ``.pth`` names of ``directory`` in the order ``site`` processes them."""
    try:
        with os.scandir(directory) as entries:
            names = [e.name for _, e in zip(range(MAX_PTH_FILES), entries, strict=False)]
    except OSError:
        return []
    return sorted(n for n in names if n.endswith(".pth") and not n.startswith("."))


def processed_before(hook: str | None) -> list[str]:
    """The ``.pth`` files ``site`` processed before ``hook``: the earlier names in its
    directory, after those of the user site when that came first."""
    if hook is None:
        return []
    directory, name = os.path.split(hook)
    earlier: list[str] = []
    user = _user_site()
    if user and os.path.normpath(user) != os.path.normpath(directory):
        earlier += [os.path.join(user, n) for n in pth_files(user)]
    return earlier + [os.path.join(directory, n) for n in pth_files(directory) if n < name]


def _user_site() -> str | None:
    site = sys.modules.get("site")
    if site is None or not getattr(site, "ENABLE_USER_SITE", False):
        return None
    path = getattr(site, "USER_SITE", None)
    return path if isinstance(path, str) else None


def culprits(paths: list[str], module: str) -> list[str]:
    """Of ``paths``, those that name ``module`` in an ``import`` line, else those with one."""
    return naming(paths, module) or [p for p in paths if _imports(p)]


def naming(paths: list[str], module: str) -> list[str]:
    """Of ``paths``, the ``.pth`` files with an ``import`` line that names ``module``."""
    return [p for p in paths if any(module in line for line in _imports(p))]


def _imports(path: str) -> list[str]:
    """The lines of a ``.pth`` that ``site`` executes."""
    return [line for line in _text(path).splitlines() if line.startswith(("import ", "import\t"))]


def _text(path: str) -> str:
    try:
        return read_regular(path, MAX_PTH_BYTES, truncate=True).decode("utf-8", "replace")
    except RegularFileError:
        return ""


def position(hook: str, old_names: tuple[str, ...] = (), module: str = "triton") -> dict[str, Any]:
    """Where the hook's ``.pth`` stands (``doctor``): the ``.pth`` files that run before it,
    those of them that would import ``module``, a file of an old name left beside it, and
    what this process saw."""
    installed = os.path.exists(hook)
    before = processed_before(hook) if installed else []
    seen = FOUND[0] if FOUND else None
    olds = [p for n in old_names if os.path.lexists(p := os.path.join(os.path.dirname(hook), n))]
    return {
        "path": hook, "installed": installed, "first": not before if installed else None, "before": before,
        "before_importing": naming(before, module), "old_names": olds,
        "imported_before_hook": None if seen is None else {"module": seen.module, "origin": seen.origin,
                                                           "by": seen.culprits},
    }
