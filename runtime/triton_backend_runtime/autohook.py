"""The opt-in hook for an unmodified Triton: a ``.pth`` file and an import finder.

``python -m triton_backend_runtime hook install`` writes :data:`PTH_NAME` into the
interpreter's ``site-packages``; ``site`` executes its one line at start-up, which calls
:func:`install`. That puts a finder at the front of ``sys.meta_path`` which does nothing
until ``triton.backends`` is imported; then it executes Triton's own source with the
registry patch of :mod:`.hook` for its discovery shape applied in memory (the same text as
the patches in ``hooks/``). Already patched, the module runs as it is; of a shape the
registry does not know, it is refused under ``strict`` (:func:`.hook.refuse_unwrappable`)
and runs unmodified, with a warning, otherwise. ``hook uninstall`` deletes the file.

The file's name sorts before every other ``.pth`` (``site`` runs them in sorted order): a
Triton imported before the finder is in place ran unverified, which :mod:`.hookorder`
reports (strict ends the process). ``docs/runtime/import-hook.md`` says what the hook cannot see.

Start-up cost is this module alone: it imports nothing beyond ``sys`` and ``os`` until
Triton is imported.
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

#: "+" sorts before digits, "_", "-" and letters: site runs the .pth files of a directory in
#: sorted order, and the hook must be in place before any other imports Triton (.hookorder).
PTH_NAME = "+triton_backend_runtime-hook.pth"
#: Names the hook's .pth had before: ``hook install`` and ``hook uninstall`` remove them.
OLD_PTH_NAMES = ("triton_backend_runtime-hook.pth",)
# One line (site runs .pth lines that start with "import"). When the runtime is gone but the
# .pth stayed, it says so once on stderr (site may process a venv's site-packages twice):
# strict would otherwise be silently unenforced.
PTH_LINE = (
    "import sys; exec('try:\\n import triton_backend_runtime.autohook as h\\n h.install()\\n"
    "except ImportError as e:\\n if not hasattr(sys, \"_triton_backend_hook_said\"):\\n"
    "  sys._triton_backend_hook_said = 1\\n"
    "  sys.stderr.write(\"triton-backend-runtime: %s is installed but the runtime cannot be "
    "imported (%s): backends are not verified; reinstall triton-backend-runtime or delete the .pth file\\\\n\" "
    "% (\"+triton_backend_runtime-hook.pth\", e))\\nexcept Exception:\\n pass')\n"
)
PATCHED_MODULE = "triton.backends"
CORE_MODULE = "triton"

_callbacks: dict[str, list[Callable[[Any], None]]] = {}
_state = {"patch": False, "core": False}
#: Verified sources (installed path -> identity when verified) and their top-level packages:
#: modules found there run the verified source's code, never a __pycache__ pyc (.bytecode).
_sources: dict[str, list[object]] = {}
_guarded: set[str] = set()


class _Finder:
    """Finds nothing itself: wraps the loader the other finders return for watched modules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        watched = (_state["patch"] and fullname == PATCHED_MODULE) or (_state["core"] and fullname == CORE_MODULE)
        if fullname not in _callbacks and not watched and fullname.partition(".")[0] not in _guarded:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)  # type: ignore[assignment]
                return spec
        return None


class _Loader:
    def __init__(self, inner: Any, fullname: str) -> None:
        self.inner = inner
        self.fullname = fullname

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if _state["core"] and self.fullname == CORE_MODULE:
            from .triton import check_core

            check_core(spec)  # raises ImportError under strict
        origin = getattr(spec, "origin", None)
        verified = _sources.get(origin) if isinstance(origin, str) else None
        code = self._patched(module, origin, verified) if self.fullname == PATCHED_MODULE else None
        if code is None and verified is not None:
            code = _verified_code(origin, verified)  # type: ignore[arg-type]
        if code is None:
            self.inner.exec_module(module)
        else:
            exec(code, module.__dict__)
        for callback in _callbacks.pop(self.fullname, []):
            callback(module)

    def _patched(self, module: Any, origin: str | None, verified: list[object] | None) -> Any:
        if not _state["patch"]:
            return None
        from .hook import patch_source

        if verified is not None and origin is not None:
            from .triton import verified_source

            data = _verified(verified_source, origin, verified)  # the bytes that were verified
            source = data.decode("utf-8") if data is not None else self.inner.get_source(self.fullname)
        else:
            source = self.inner.get_source(self.fullname)
        patched = patch_source(source) if source else None
        if patched is None:
            from .hook import refuse_unwrappable, unwrappable

            why = unwrappable(origin, source)
            if why is not None:
                refuse_unwrappable(origin, why)  # raises under strict
            return None
        return compile(patched, origin or "<triton.backends>", "exec", dont_inherit=True)


def _verified_code(origin: str, verified: list[object]) -> Any:
    from .triton import code_for

    return _verified(code_for, origin, verified)


def _verified(read: Callable[[str, list[object]], Any], origin: str, verified: list[object]) -> Any:
    """``read(origin, verified)``; a source changed since it was verified is refused under
    strict and, under warn, imported as Python would (None) with a warning."""
    from .triton import SourceChanged

    try:
        return read(origin, verified)
    except SourceChanged as exc:
        from .base import STRICT
        from .loading import registry

        if registry.get().policy == STRICT:
            raise
        registry.emit(str(exc))
        return None


def guard(sources: dict[str, list[object]], tops: set[str]) -> None:
    """Run these verified sources' code, not their pycs (see :mod:`.bytecode`)."""
    _sources.update(sources)
    _guarded.update(tops)


_FINDER = _Finder()


def _ensure_finder() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def install() -> None:
    """Called from the .pth file: verify the core before ``triton`` runs, patch
    ``triton.backends`` when it is imported. A Triton imported before this ran unverified:
    strict ends the process, warn warns (:mod:`.hookorder`)."""
    first = not _state["core"]
    _state["patch"] = True
    _state["core"] = True
    _ensure_finder()
    if first and CORE_MODULE in sys.modules:
        from .loading import calling_pth, imported_early

        imported_early(CORE_MODULE, calling_pth())


def after_import(name: str, callback: Callable[[Any], None]) -> None:
    """Run ``callback(module)`` once ``name`` has been executed (now, if it already was)."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    _callbacks.setdefault(name, []).append(callback)
    _ensure_finder()


def site_dir() -> str:
    """Where ``hook install`` writes the .pth: this interpreter's purelib."""
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def pth_path(directory: str | None = None) -> str:
    return os.path.join(directory or site_dir(), PTH_NAME)
