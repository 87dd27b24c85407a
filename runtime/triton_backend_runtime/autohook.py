"""The opt-in hook for an unmodified Triton: a ``.pth`` file and an import finder.

``python -m triton_backend_runtime hook install`` writes :data:`PTH_NAME` into the
interpreter's ``site-packages``; ``site`` executes its one line at start-up, which calls
:func:`install`. That puts a finder at the front of ``sys.meta_path`` which does nothing
until ``triton.backends`` is imported; then it executes Triton's own source with the
registry patch of :mod:`.triton.patch` for its discovery shape applied in memory (the same
text as the patches in ``hooks/``). Already patched, the module runs as it is; of a shape the
registry does not know, it is refused under ``strict`` and runs unmodified, with a warning,
otherwise. ``hook uninstall`` deletes the file. The finder itself is
:mod:`.triton.importwatch`; this module only wires it at start-up.

The file's name sorts before every other ``.pth`` (``site`` runs them in sorted order): a
Triton imported before the finder is in place ran unverified, which :mod:`.hookorder`
reports (strict ends the process). ``docs/runtime/import-hook.md`` says what the hook cannot see.

Start-up cost is this module and the import watch: they import nothing beyond ``sys`` and
``os`` until Triton is imported.
"""

from __future__ import annotations

import os
import sys

# Not typing.TYPE_CHECKING: importing typing (and collections.abc) costs ~8 ms at every
# interpreter start-up, since the .pth line runs this module in every process.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["CORE_MODULE", "OLD_PTH_NAMES", "PATCHED_MODULE", "PTH_LINE", "PTH_NAME", "install", "pth_path", "site_dir"]

#: "+" sorts before digits, "_", "-" and letters: site runs the .pth files of a directory in
#: sorted order, and the hook must be in place before any other imports Triton (.hookorder).
PTH_NAME = "+triton_backend_runtime-hook.pth"
#: Names the hook's .pth had before: ``hook install`` and ``hook uninstall`` remove them.
OLD_PTH_NAMES = ("triton_backend_runtime-hook.pth",)
# One line (site runs .pth lines that start with "import"). When the runtime is gone but the
# .pth stayed, it says so once on stderr (site may process a venv's site-packages twice),
# naming the file and the command that removes it: strict would otherwise be silently
# unenforced. ``fullname`` is the .pth's path in site.addpackage, which execs the line.
PTH_LINE = (
    "import sys; exec('try:\\n import triton_backend_runtime.autohook as h\\n h.install()\\n"
    "except ImportError as e:\\n if not hasattr(sys, \"_triton_backend_hook_said\"):\\n"
    "  sys._triton_backend_hook_said = 1\\n"
    "  p = locals().get(\"fullname\") or \"+triton_backend_runtime-hook.pth\"\\n"
    "  sys.stderr.write(\"triton-backend-runtime: %s is installed but the runtime cannot be "
    "imported (%s): backends are not verified; remove it: rm %s (or reinstall triton-backend-runtime)\\\\n\" "
    "% (p, e, __import__(\"shlex\").quote(p)))\\nexcept Exception:\\n pass')\n"
)
PATCHED_MODULE = "triton.backends"
CORE_MODULE = "triton"


def install() -> None:
    """Called from the .pth file: verify the core before ``triton`` runs, patch
    ``triton.backends`` when it is imported. A Triton imported before this ran unverified:
    strict ends the process, warn warns (:mod:`.loading.hookorder`)."""
    from .triton import importwatch

    first = not importwatch.watching(CORE_MODULE)
    importwatch.before_exec(CORE_MODULE, _check_core)
    importwatch.replace_code(PATCHED_MODULE, _patched)
    importwatch.watch_tops(_maybe_triton, _arm_renamed)
    if first and CORE_MODULE in sys.modules:
        from .loading.hookorder import calling_pth, imported_early

        imported_early(CORE_MODULE, calling_pth())


def _check_core(spec: Any, package: str = CORE_MODULE) -> None:
    from .triton.core import check_core

    check_core(spec, package)  # raises ImportError under strict


def _maybe_triton(name: str) -> bool:
    """A top-level name that may be Triton released under another name (``tokenspeed_triton``,
    ``vendor_triton``): only these are looked at, so other imports cost nothing."""
    return "triton" in name.lower() and name != CORE_MODULE and not name.startswith("triton_backend_")


def _arm_renamed(name: str, spec: Any) -> None:
    """A package with Triton's core beside it (``<name>/_C/libtriton.so``) is a Triton, whatever
    it is called: its core is checked before it runs and its ``backends`` patched, as ``triton``'s."""
    origin = getattr(spec, "origin", None)
    locations = list(getattr(spec, "submodule_search_locations", None) or ())
    # a namespace package (its __init__.py deleted) has no origin: its directories decide
    where = [os.path.dirname(origin)] if isinstance(origin, str) else locations
    if locations and any(os.path.isfile(os.path.join(d, "_C", "libtriton.so")) for d in where):
        from .triton import importwatch

        importwatch.before_exec(name, lambda found: _check_core(found, name))
        importwatch.replace_code(f"{name}.backends", _patched)


def _patched(origin: str | None, verified: list[object] | None, get_source: Callable[[], str | None]) -> Any:
    from .triton.integration import patched_backends

    return patched_backends(origin, verified, get_source)


def site_dir() -> str:
    """Where ``hook install`` writes the .pth: this interpreter's purelib."""
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def pth_path(directory: str | None = None) -> str:
    return os.path.join(directory or site_dir(), PTH_NAME)
