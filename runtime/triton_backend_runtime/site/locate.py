"""Where ``import package`` would load a package from, found without running any of it."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["locate_package"]


def locate_package(package: str) -> str | None:
    """The directory ``import package`` would load from, found without running any of it:
    parents already imported are asked for their ``__path__``; others are searched by the
    finders as the import system would (a top level by every finder on ``sys.meta_path``)."""
    import importlib.machinery

    parts = package.split(".")
    search: list[str] = []
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None) if module is not None else None
        if spec is not None or depth == 1:
            spec = spec or _find_spec(name, None)
            if spec is None or not spec.submodule_search_locations:
                return None
            search = list(spec.submodule_search_locations)
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, search)
        except KeyError:
            # no module or regular package of that name, but namespace portions (PEP 420): the
            # path object of a namespace whose parent is not imported looks the parent up in
            # sys.modules and fails. Its portions are the directories of that name in the
            # parent's locations, as the path finder found them.
            search = [p for entry in search if os.path.isdir(p := os.path.join(entry, parts[depth - 1]))]
            continue
        if spec is None or not spec.submodule_search_locations:
            return None
        search = list(spec.submodule_search_locations)
    return search[0] if search else None


def _find_spec(name: str, path: list[str] | None) -> Any:
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except Exception:  # a broken finder is the import system's problem, not a location
            continue
        if spec is not None:
            return spec
    return None
