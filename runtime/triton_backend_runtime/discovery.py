"""Discovery: every backend Triton 3.9 would find, mapped to its distribution and manifest.

Triton 3.9 (``triton/backends/__init__.py``) finds backends in one of two ways:

* by default, ``importlib.metadata.entry_points().select(group="triton.backends")``: every
  entry point of every distribution on ``sys.path``, where a distribution name seen twice
  counts once (the first on ``sys.path``, as ``importlib.metadata`` de-duplicates);
* with ``TRITON_BACKENDS_IN_TREE=1``, every directory under ``triton/backends/`` whose
  name does not start with ``__``.

Here the ``entry_points.txt`` files (the format of the entry-points specification of the
PyPA, INI with ``=``) are read directly, once per process: one directory listing per
``sys.path`` entry and a small read per distribution, instead of building every
distribution object ``entry_points()`` builds (6-18 ms a call). Distributions that carry a
manifest (``.dist-info/triton_backend.dsse.json``) are found too, even without a backend
entry point: they may ship plugin libraries.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from .layout import BACKENDS_GROUP as BACKENDS_GROUP
from .layout import MANIFEST_FILENAME as MANIFEST_FILENAME

IN_TREE_ENV = "TRITON_BACKENDS_IN_TREE"
TRITON_DISTRIBUTION = "triton"


@dataclass
class Distribution:
    """One installed distribution, as far as backends are concerned."""

    name: str
    version: str
    dist_info: str
    root: str = ""
    order: int = 0
    manifest: str | None = None
    backends: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return canonical(self.name)

    def label(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(eq=False)  # compared by identity; no __eq__ to generate on every import
class Candidate:
    """One backend as Triton would find it: a name and the package it imports."""

    name: str
    package: str
    source: str  # "entry-point" or "in-tree"
    dist: Distribution | None
    order: int


@dataclass(eq=False)  # compared by identity; no __eq__ to generate on every import
class Discovery:
    """What one pass over ``sys.path`` found."""

    candidates: list[Candidate]
    distributions: list[Distribution]  # every one with a backend or a manifest, path order
    triton: Distribution | None
    in_tree: bool


def canonical(name: str) -> str:
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def discover(
    path: list[str] | None = None, *, in_tree: bool | None = None, backends_dir: str | None = None
) -> Discovery:
    """Find backends the way Triton 3.9 does; ``in_tree`` defaults to TRITON_BACKENDS_IN_TREE."""
    if in_tree is None:
        in_tree = os.environ.get(IN_TREE_ENV, "") == "1"
    dists = _distributions(sys.path if path is None else path)
    triton = next((d for d in dists if d.key == TRITON_DISTRIBUTION), None)
    if in_tree:
        candidates = _in_tree(backends_dir or _backends_dir(triton), triton)
    else:
        pairs = [(name, value, d) for d in dists for name, value in d.backends.items()]
        candidates = [Candidate(n, v, "entry-point", d, i) for i, (n, v, d) in enumerate(pairs)]
    wanted = [d for d in dists if d.backends or d.manifest or d is triton]
    return Discovery(candidates, wanted, triton, in_tree)


def _distributions(path: list[str]) -> list[Distribution]:
    """Distributions on ``path`` in importlib.metadata's order, the first of each name only."""
    seen: set[str] = set()
    found: list[Distribution] = []
    for order, entry in enumerate(path):
        root = entry or "."
        try:
            names = os.listdir(root)
        except OSError:
            continue
        infos = [n for n in names if n.endswith(".dist-info")] + [n for n in names if n.endswith(".egg-info")]
        for info in infos:
            stem = info.rsplit(".", 1)[0]
            name, _, version = stem.partition("-")
            if canonical(name) in seen:
                continue
            seen.add(canonical(name))
            dist = _inspect(os.path.join(root, info), name, version.partition("-")[0], root, order)
            if dist is not None:
                found.append(dist)
    return found


def _inspect(dist_info: str, name: str, version: str, root: str, order: int) -> Distribution | None:
    backends = _backend_entry_points(os.path.join(dist_info, "entry_points.txt"))
    manifest = os.path.join(dist_info, MANIFEST_FILENAME)
    has_manifest = os.path.isfile(manifest)
    if not backends and not has_manifest and canonical(name) != TRITON_DISTRIBUTION:
        return None
    real_name, real_version = _metadata_name_version(dist_info)
    return Distribution(
        real_name or name, real_version or version, dist_info, root, order, manifest if has_manifest else None, backends
    )


#: entry_points.txt and METADATA headers bigger than this are not a distribution's own.
MAX_METADATA_BYTES = 4 * 1024 * 1024
_NONBLOCKING = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def read_small_text(path: str, limit: int = MAX_METADATA_BYTES) -> str | None:
    """A regular file's text, at most ``limit`` bytes; None for anything else. Never blocks:
    a FIFO where a METADATA should be must not hang ``import triton``."""
    import stat

    try:
        fd = os.open(path, _NONBLOCKING)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _backend_entry_points(path: str) -> dict[str, str]:
    """The ``triton.backends`` section of an entry_points.txt, in file order."""
    text = read_small_text(path)
    if text is None or BACKENDS_GROUP not in text:
        return {}
    return parse_entry_points(text).get(BACKENDS_GROUP, {})


def parse_entry_points(text: str, *, strict: bool = False) -> dict[str, dict[str, str]]:
    """INI as the entry-points specification defines it: ``[group]``, ``name = value``.

    Keys are case-sensitive and ``=`` is the only delimiter. At import time lines that fit
    no rule are skipped (a broken file must not break ``import triton``); with ``strict``
    (the packager, checking a wheel) they raise ``ValueError`` naming the line.
    """
    groups: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = groups.setdefault(line[1:-1].strip(), {})
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if strict and (current is None or not sep or not key or key in current):
            problem = "outside any [group]" if current is None else "duplicate name" if key in current else (
                "not 'name = value'")
            raise ValueError(f"line {number}: {problem}: {line!r}")
        if current is not None and sep:
            current[key] = value.strip()
    return groups


def _metadata_name_version(dist_info: str) -> tuple[str, str]:
    """Name and Version from the METADATA (or PKG-INFO) headers; empty when unreadable."""
    name = version = ""
    for file in ("METADATA", "PKG-INFO"):
        text = read_small_text(os.path.join(dist_info, file))
        if text is None:
            continue
        for line in text.splitlines():
            if not line.strip():
                break
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
        return name, version
    return name, version


def _backends_dir(triton: Distribution | None) -> str | None:
    roots = [triton.root] if triton else []
    for root in roots + [p or "." for p in sys.path]:
        candidate = os.path.join(root, "triton", "backends")
        if os.path.isdir(candidate):
            return candidate
    return None


def _in_tree(backends_dir: str | None, triton: Distribution | None) -> list[Candidate]:
    """Triton's TRITON_BACKENDS_IN_TREE=1 scan: directories under triton/backends/."""
    if backends_dir is None:
        return []
    try:
        names = os.listdir(backends_dir)
    except OSError:
        return []
    found: list[Candidate] = []
    for name in names:
        if os.path.isdir(os.path.join(backends_dir, name)) and not name.startswith("__"):
            found.append(Candidate(name, f"triton.backends.{name}", "in-tree", triton, len(found)))
    return found

