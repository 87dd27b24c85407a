"""Whether a backend's code is among the files of the distribution that would sign it, and
whether it sits inside a Triton package that distribution does not provide.

Triton imports ``<package>.compiler`` and ``<package>.driver`` for each backend; each counts
as present as a source file (``compiler.py``), a package (``compiler/__init__.py``), a
sourceless ``compiler.pyc`` or an extension module (``compiler[.<tag>].so``). Entry points
alone are not code: a pure-Python overlay may declare Triton's own ``amd`` and ``nvidia``
without carrying them, and signing those would vouch for files the manifest does not cover.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triton_backend_runtime.manifest import model as m

__all__ = ["MODULES", "MissingCode", "inside_foreign_package", "missing_code"]

#: The modules Triton imports from a backend's package.
MODULES = ("compiler", "driver")
#: A file path -> the module it is imported as (``a/b.py``, ``a/b/__init__.py``, ``a/b.pyc``,
#: ``a/b.cpython-311-x86_64-linux-gnu.so`` -> ``a/b``).
_MODULE_FILE = re.compile(r"^(?P<module>.+?)(?:/__init__\.py|\.py|\.pyc|(?:\.[^./]+)?\.(?:so|pyd))$")


@dataclass(frozen=True)
class MissingCode:
    """A backend whose package lacks modules Triton imports; ``absent``: the ``.py`` paths
    that were looked for (other forms counted too)."""

    backend: str
    package: str
    absent: list[str]

    def describe(self) -> str:
        return f"{self.backend!r} (package {self.package}: no {', '.join(self.absent)})"


def missing_code(backends: list[m.Backend], names: list[str]) -> list[MissingCode]:
    """The backends whose compiler or driver module is not among ``names`` (the files)."""
    modules = {match["module"] for name in names if (match := _MODULE_FILE.match(name))}
    missing = []
    for backend in backends:
        base = backend.package.replace(".", "/")
        absent = [f"{base}/{module}.py" for module in MODULES if f"{base}/{module}" not in modules]
        if absent:
            missing.append(MissingCode(backend.name, backend.package, absent))
    return missing


def inside_foreign_package(backends: list[m.Backend], names: list[str], package: str) -> list[str]:
    """The backends whose package is inside the Triton ``package`` while the distribution has
    no ``<package>/__init__.py``: code added to another distribution's package (an overlay, or
    an add-on of the directory-scan era). A Triton package is never a namespace package, so
    its ``__init__.py`` belongs to whichever distribution provides it."""
    if f"{package}/__init__.py" in names:
        return []
    return [b.name for b in backends if b.package == package or b.package.startswith(f"{package}.")]
