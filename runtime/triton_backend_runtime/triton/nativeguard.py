"""Native code the Triton core loads from outside the verified files, stopped before ``dlopen``.

A core whose ``_C/__init__.py`` downloads its library into a user cache and loads it by path
goes around the import system, so no finder sees it. CPython raises audit events before it
opens a library (PEP 578): ``ctypes.dlopen`` (the name) and, for an extension module,
``import`` with its file. One audit hook per process (installed only once a core is watched,
by :func:`watch_native`) looks at those two events and nothing else:

* only while the core's ``__init__`` (and what it imports) runs: that is where a core fetches
  its library, and the path from ``_C/__init__.py`` to the library mapped is checked there;
* the nearest Python frame outside ``ctypes`` (for an extension: outside ``importlib``'s
  frozen frames), skipping code compiled from a string (``<string>``, ``<stdin>``), must be a
  module of a watched core package, not of ``<package>/backends/``: backend drivers load their
  vendor's runtime (``libcuda``, ``libamdhip64``) by path;
* a bare name (no ``/``) is the system loader's search, as an extension module found by the
  import system's own search (``import``, ``importlib.import_module``) is Python's: allowed;
* anything else must be a file of a verified distribution (the same file: device and inode).

After import, loads are not judged here: Triton's own ``runtime/build.py`` loads the launchers
it compiled into its cache by file, and ``profiler/_rocm.py`` loads ``libhsa-runtime64.so.1``
by absolute path; no manifest can list either. What is mapped by the end of import is checked
once then (:func:`.core.check_mapped`); a library loaded later is not checked before it runs.
Code compiled under the name of a real file outside the package is judged as that file.

A library that fails: under strict, the core's refusal (``verify.outside``) raised from the
hook, so the library is never opened; under warn, one warning, and it loads. Any other error
in the hook is a warning: a hook that raised would break the load it watches.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..base import STRICT, VERIFIED, Reason, VerifyError, reason_of, record
from ..site import same_file
from . import importwatch

__all__ = ["Watched", "watch_native", "native_reason"]

#: The audit events that announce a ``dlopen``.
DLOPEN = "ctypes.dlopen"
EXTENSION = "import"
_FROZEN = "<frozen importlib."
#: How the file name of code compiled from a string (not from a file) starts.
_SYNTHETIC = "<"


@record()
class Watched:
    """What the hook acts on: the core packages (real directory with a trailing separator ->
    package name), those whose ``__init__`` is running, and how the core is refused."""

    registry: Any = None
    refuse: Callable[[Reason], BaseException] | None = None
    packages: dict[str, str] = field(default_factory=dict)
    importing: set[str] = field(default_factory=set)
    warned: set[str] = field(default_factory=set)
    busy: set[int] = field(default_factory=set)
    installed: bool = False


_WATCHED = Watched()


def watch_native(registry: Any, package: str, directory: str, refuse: Callable[[Reason], BaseException]) -> None:
    """Watch the libraries the core package in ``directory`` loads (the hook installed once per
    process); ``refuse(reason)`` is the exception that refuses the core under strict."""
    real = os.path.join(os.path.realpath(directory), "")
    _WATCHED.registry, _WATCHED.refuse = registry, refuse
    _WATCHED.packages[real] = package
    _WATCHED.importing.add(real)
    importwatch.after_import(package, lambda _module: _WATCHED.importing.discard(real))
    if not _WATCHED.installed:
        sys.addaudithook(_audit)
        _WATCHED.installed = True


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # every audit event of the process comes here: only two are of interest
    if event != DLOPEN and (event != EXTENSION or len(args) < 2 or args[1] is None):
        return
    import _thread

    me = _thread.get_ident()
    if me in _WATCHED.busy:  # what this hook does (a warning, an import) is not checked again
        return
    _WATCHED.busy.add(me)
    try:
        refusal = _judge(event, args, sys._getframe(1))
    except Exception as exc:  # a bug here must not be what breaks a load
        refusal = None
        _say(f"triton-backend-runtime: a native library load could not be checked ({type(exc).__name__}: {exc})")
    finally:
        _WATCHED.busy.discard(me)
    if refusal is not None:
        raise refusal


def _judge(event: str, args: tuple[Any, ...], frame: Any) -> BaseException | None:
    """The refusal to raise (strict), after any warning (warn); None to let the load go on."""
    registry = _WATCHED.registry
    name = args[0] if event == DLOPEN else args[1]
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if registry is None or not isinstance(name, str) or "/" not in name:
        return None  # the process itself (None), or a bare soname: the loader's search
    package = _caller_package(frame, event)
    if package is None:
        return None
    reason = native_reason(registry, package, name, "ctypes" if event == DLOPEN else "an extension module")
    if reason is None:
        return None
    registry.core = reason
    if registry.policy == STRICT and _WATCHED.refuse is not None:
        return _WATCHED.refuse(reason)
    if reason.path not in _WATCHED.warned:
        _WATCHED.warned.add(reason.path)
        registry.problems.append(reason)
        _say(f"triton core not verified: {reason.path}: {reason.message} ({reason.code})")
    return None


def _caller_package(frame: Any, event: str) -> str | None:
    """The watched core package whose own module (not a backend's) asked for the load, while
    its ``__init__`` runs."""
    skip = _ctypes_dir() if event == DLOPEN else _FROZEN
    while frame is not None:
        filename = frame.f_code.co_filename
        if event != DLOPEN and filename.startswith(_FROZEN) and frame.f_code.co_name == "_find_and_load":
            return None  # found by the import system's own search of sys.path
        # code compiled from a string (<string>, <stdin>) is judged by the real file that ran it
        if not (skip and filename.startswith(skip)) and not filename.startswith(_SYNTHETIC):
            break
        frame = frame.f_back
    if frame is None:
        return None
    real = os.path.realpath(frame.f_code.co_filename)
    for directory, package in _WATCHED.packages.items():
        if real.startswith(directory):
            inside = real[len(directory):]
            if inside.startswith("backends" + os.sep):
                return None  # a backend's driver loads its vendor's runtime
            if directory not in _WATCHED.importing:
                return None  # after import: Triton's JIT-built modules, the profiler's runtime
            return package
    return None


def _ctypes_dir() -> str | None:
    ctypes = sys.modules.get("ctypes")
    where = getattr(ctypes, "__file__", None)
    return os.path.join(os.path.dirname(where), "") if isinstance(where, str) else None


def native_reason(registry: Any, package: str, name: str, how: str) -> Reason | None:
    """Why ``name``, loaded by ``how`` from ``package``'s modules, may not be; None when it is a
    file of a verified distribution."""
    real = os.path.realpath(name)
    base = os.path.basename(real)
    for verdict in registry.verdicts.values():
        if verdict.status == VERIFIED and any(os.path.basename(f) == base and same_file(f, real)
                                              for f in verdict.files):
            return None
    return reason_of(VerifyError("outside", real, f"{package} loads native code ({how}) from outside the verified "
                                 "files: no verified distribution lists this file (fetched or planted at import)"))


def _say(message: str) -> None:
    from ..loading import emit

    emit(message)
