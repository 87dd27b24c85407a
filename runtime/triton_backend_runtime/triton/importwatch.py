"""Watching imports: a check before a module runs, other code in its place, callbacks after.

One finder at the front of ``sys.meta_path`` finds nothing itself: for a watched module it
wraps the loader the other finders return. Executing that module then

1. runs the checks registered with :func:`before_exec` (the Triton core's verification, which
   raises ``ImportError`` under strict before ``triton/__init__.py`` runs);
2. runs the code a :func:`replace_code` provider gives (the registry patch of
   ``triton.backends``), else, for a source :func:`guard` was told was verified, the code its
   reader gives (compiled from the verified bytes, never a ``__pycache__`` pyc), else the
   module as Python would;
3. runs, once, the callbacks registered with :func:`after_import`.

This module imports nothing of this package (the layers above register what runs), and
nothing beyond ``sys``: the ``.pth`` hook imports it in every Python process.
"""

from __future__ import annotations

import sys

# Not typing.TYPE_CHECKING: importing typing costs milliseconds at every interpreter start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    #: ``provider(origin, verified, get_source)``: code to run instead, or None.
    Provider = Callable[[str | None, "list[object] | None", Callable[[], "str | None"]], Any]
    #: ``reader(origin, verified)``: the code compiled from the verified source, or None.
    Reader = Callable[[str, "list[object]"], Any]

__all__ = ["after_import", "before_exec", "guard", "replace_code", "watch_tops", "watching"]

_before: dict[str, Callable[[Any], None]] = {}
_replace: dict[str, Provider] = {}
_after: dict[str, list[Callable[[Any], None]]] = {}
#: Verified sources (installed path -> identity when verified) and their top-level packages.
_sources: dict[str, list[object]] = {}
_guarded: set[str] = set()
_reader: list[Reader] = []
#: Top-level names worth a look (a cheap test of the name), and what to do with their spec.
_tops: list[tuple[Callable[[str], bool], Callable[[str, Any], None]]] = []


def before_exec(name: str, check: Callable[[Any], None]) -> None:
    """Call ``check(spec)`` before ``name`` is executed, at every import of it."""
    _before[name] = check
    _ensure_finder()


def replace_code(name: str, provider: Provider) -> None:
    """Execute what ``provider`` gives in place of ``name``'s own code (None: its own)."""
    _replace[name] = provider
    _ensure_finder()


def after_import(name: str, callback: Callable[[Any], None]) -> None:
    """Run ``callback(module)`` once ``name`` has been executed (now, if it already was)."""
    module = sys.modules.get(name)
    # a module being executed is in sys.modules already (importlib marks its spec
    # _initializing): the callback waits for the end of that execution
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        callback(module)
        return
    _after.setdefault(name, []).append(callback)
    _ensure_finder()


def guard(sources: dict[str, list[object]], tops: set[str], reader: Reader) -> None:
    """Run these verified sources' code as ``reader`` gives it, not their pycs."""
    _sources.update(sources)
    _guarded.update(tops)
    _reader[:] = [reader]


def watch_tops(select: Callable[[str], bool], arm: Callable[[str, Any], None]) -> None:
    """For each top-level module whose name ``select`` accepts, call ``arm(name, spec)`` when it
    is found, before it runs: ``arm`` may watch it (:func:`before_exec`...). Only names that
    pass ``select`` cost a lookup; the others are not looked at."""
    _tops[:] = [(select, arm)]
    _ensure_finder()


def watching(name: str) -> bool:
    """Whether a check runs before ``name`` is executed."""
    return name in _before


class _Finder:
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if (fullname not in _after and fullname not in _before and fullname not in _replace
                and fullname.partition(".")[0] not in _guarded):
            if "." in fullname or not _tops or not _tops[0][0](fullname):
                return None
            spec = self._find(fullname, path, target)
            if spec is not None:
                _tops[0][1](fullname, spec)
                if fullname in _before:
                    _wrap(spec, fullname)
            return spec
        spec = self._find(fullname, path, target)
        if spec is not None:
            _wrap(spec, fullname)
        return spec

    def _find(self, fullname: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


def _wrap(spec: Any, fullname: str) -> None:
    """Its loader wrapped, so that the checks run around its execution. A namespace package
    (no ``__init__.py``: no loader yet, nothing of its own to execute) is checked now."""
    if spec.loader is None and spec.submodule_search_locations is not None:
        check = _before.get(fullname)
        if check is not None:
            check(spec)
    elif spec.loader is not None and hasattr(spec.loader, "exec_module"):
        spec.loader = _Loader(spec.loader, fullname)


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
        check = _before.get(self.fullname)
        if check is not None:
            check(spec)
        origin = getattr(spec, "origin", None)
        verified = _sources.get(origin) if isinstance(origin, str) else None
        provider = _replace.get(self.fullname)
        code = provider(origin, verified, self._source) if provider is not None else None
        if code is None and verified is not None and _reader:
            code = _reader[0](origin, verified)  # type: ignore[arg-type]
        if code is None:
            self.inner.exec_module(module)
        else:
            exec(code, module.__dict__)
        for callback in _after.pop(self.fullname, []):
            callback(module)

    def _source(self) -> str | None:
        source: str | None = self.inner.get_source(self.fullname)
        return source


_FINDER = _Finder()


def _ensure_finder() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
