"""Triton released under another package name (``tokenspeed_triton``, ``vendor_triton``):
the files of a renamed core of the directory-scan era, of its backends, their entry points,
and ``migrate --json`` on one such wheel."""

from __future__ import annotations

#: A vendor release for TokenSpeed: package ``tokenspeed_triton``, group ``tokenspeed_triton.backends``.
TOKENSPEED = "tokenspeed-triton==3.9.10.post20261028"


BASE_COMPILER = "class BaseBackend:\n    pass\n"


BASE_DRIVER = "class DriverBase:\n    pass\n"


COMPILER = "from {base}.compiler import BaseBackend\n\n\nclass {cls}Backend(BaseBackend):\n    pass\n"


DRIVER = "from {base}.driver import DriverBase\n\n\nclass {cls}Driver(DriverBase):\n    pass\n"


#: Triton's ``backends/__init__.py`` of the entry-points shape (3.4-3.6), reading GROUP.
ENTRY_POINTS_BACKENDS = '''\
import importlib
import inspect
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Union

from .compiler import BaseBackend
from .driver import DriverBase


def _find_concrete_subclasses(module, base):
    found = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, base) and c is not base]
    if len(found) != 1:
        raise RuntimeError(f"{module.__name__}: {len(found)} subclasses of {base.__name__}")
    return found[0]


@dataclass(frozen=True)
class Backend:
    compiler: type
    driver: type


def _discover_backends():
    # TRITON_BACKENDS_IN_TREE is not read here: entry points only
    found = {}
    for point in entry_points().select(group="GROUP"):
        compiler = importlib.import_module(f"{point.value}.compiler")
        driver = importlib.import_module(f"{point.value}.driver")
        found[point.name] = Backend(_find_concrete_subclasses(compiler, BaseBackend),
                                    _find_concrete_subclasses(driver, DriverBase))
    return found


backends: dict[str, Backend] = _discover_backends()
'''


def backends_init(group: str) -> str:
    """A ``backends/__init__.py`` of Triton's entry-points shape reading ``group``, unpatched."""
    return ENTRY_POINTS_BACKENDS.replace("GROUP", group)


def backend(package: str, cls: str, base: str) -> dict[str, bytes]:
    """compiler.py and driver.py of one backend package, subclassing ``base``'s classes."""
    path = package.replace(".", "/")
    return {
        f"{path}/__init__.py": b"",
        f"{path}/compiler.py": COMPILER.format(base=base, cls=cls).encode(),
        f"{path}/driver.py": DRIVER.format(base=base, cls=cls).encode(),
    }


def renamed_core(package: str, *names: str) -> dict[str, bytes]:
    """A renamed Triton of the directory-scan era: ``<package>/backends/<name>/`` per backend."""
    files = {
        f"{package}/__init__.py": b"__version__ = '3.3.0'\n",
        f"{package}/backends/__init__.py": b"",
        f"{package}/backends/compiler.py": BASE_COMPILER.encode(),
        f"{package}/backends/driver.py": BASE_DRIVER.encode(),
    }
    for name in names:
        files |= backend(f"{package}.backends.{name}", name.title(), f"{package}.backends")
    return files


def entry_points(dist_info: str, group: str, points: dict[str, str]) -> dict[str, bytes]:
    lines = "".join(f"{name} = {value}\n" for name, value in points.items())
    return {f"{dist_info}/entry_points.txt": f"[{group}]\n{lines}".encode()}
