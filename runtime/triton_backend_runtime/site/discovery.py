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

Triton itself (``Discovery.triton``) is the distribution whose RECORD lists the
``triton/__init__.py`` that ``import triton`` would run (``<package>/__init__.py`` for a
vendor release that renames the package), never the one named ``triton``:
forks install the package under their own names, and a fork installed over ``triton``
leaves two RECORDs claiming it (``Discovery.core_claims``, the one the file matches first).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import field

from ..base import BACKENDS_GROUP, MANIFEST_FILENAME, RegularFileError, canonicalize_name, read_regular, record

__all__ = [
    "CORE_INIT", "Candidate", "DEFAULT_PACKAGE", "Discovery", "Distribution", "IN_TREE_ENV", "MAX_INIT_BYTES",
    "MAX_METADATA_BYTES", "backends_group", "core_init", "core_root", "core_version", "discover",
    "RecordSyntaxError", "metadata_name_version", "other_dist_infos", "package_of", "parse_entry_points",
    "read_small_bytes", "read_small_text", "record_lines", "record_row", "record_row_matches", "renamed_cores",
]

IN_TREE_ENV = "TRITON_BACKENDS_IN_TREE"
#: The import package of an upstream Triton (vendor releases may rename it).
DEFAULT_PACKAGE = "triton"
#: What ``import triton`` runs, as a wheel path: the core is the distribution whose RECORD
#: lists it in the sys.path entry it is imported from, whatever that distribution's name.
CORE_INIT = "triton/__init__.py"


def core_init(package: str = DEFAULT_PACKAGE) -> str:
    """What ``import <package>`` runs, as a wheel path (:data:`CORE_INIT` for ``triton``)."""
    return f"{package}/__init__.py"


@record()
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
        return canonicalize_name(self.name)

    def label(self) -> str:
        return f"{self.name} {self.version}"


@record(eq=False)  # compared by identity
class Candidate:
    """One backend as Triton would find it: a name and the package it imports."""

    name: str
    package: str
    source: str  # "entry-point" or "in-tree"
    dist: Distribution | None
    order: int


@record(eq=False)  # compared by identity
class Discovery:
    """What one pass over ``sys.path`` found."""

    candidates: list[Candidate]
    distributions: list[Distribution]  # every one with a backend or a manifest, path order
    triton: Distribution | None
    in_tree: bool
    #: Every distribution whose RECORD lists the ``triton/__init__.py`` that is imported
    #: (more than one: overlapping installs; ``triton`` is the one the file on disk matches).
    core_claims: list[Distribution] = field(default_factory=list)
    #: The Triton package discovered for (``triton``, or a vendor release's rename).
    package: str = "triton"


def backends_group(package: str) -> str:
    """The entry-point group a Triton imported as ``package`` reads: ``triton.backends``, or
    ``<package>.backends`` for a vendor release that renames the package."""
    return f"{package}.backends"


def package_of(backends_dir: str | None) -> str:
    """The Triton package whose ``backends/__init__.py`` is running (it passes its own
    directory, ``<package>/backends``); ``triton`` when that is not known."""
    if backends_dir:
        head, leaf = os.path.split(os.path.normpath(backends_dir))
        package = os.path.basename(head)
        if leaf == "backends" and package.isidentifier():
            return package
    return DEFAULT_PACKAGE


def discover(
    path: list[str] | None = None, *, in_tree: bool | None = None, backends_dir: str | None = None,
    package: str | None = None,
) -> Discovery:
    """Find backends the way Triton 3.9 does; ``in_tree`` defaults to TRITON_BACKENDS_IN_TREE.

    ``package`` is the Triton package (default: the one ``backends_dir`` belongs to, else
    ``triton``): a renamed one reads the group ``<package>.backends`` and scans
    ``<package>/backends/``, as its own ``_discover_backends()`` does."""
    if in_tree is None:
        in_tree = os.environ.get(IN_TREE_ENV, "") == "1"
    package = package or package_of(backends_dir)
    entries = sys.path if path is None else path
    dists = _distributions(entries, backends_group(package))
    claims = _core_claims(entries, dists, package)
    triton = claims[0] if claims else None
    if in_tree:
        candidates = _in_tree(backends_dir or _backends_dir(triton, package), triton, package)
    else:
        pairs = [(name, value, d) for d in dists for name, value in d.backends.items()]
        candidates = [Candidate(n, v, "entry-point", d, i) for i, (n, v, d) in enumerate(pairs)]
    wanted = [d for d in dists if d.backends or d.manifest] + [d for d in claims if all(d is not x for x in dists)]
    return Discovery(candidates, sorted(wanted, key=lambda d: d.order), triton, in_tree, claims, package)


def _distributions(path: list[str], group: str = BACKENDS_GROUP) -> list[Distribution]:
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
            if canonicalize_name(name) in seen:
                continue
            seen.add(canonicalize_name(name))
            dist = _inspect(os.path.join(root, info), name, version.partition("-")[0], root, order, group=group)
            if dist is not None:
                found.append(dist)
    return found


def _inspect(dist_info: str, name: str, version: str, root: str, order: int, *, force: bool = False,
             group: str = BACKENDS_GROUP) -> Distribution | None:
    backends = _backend_entry_points(os.path.join(dist_info, "entry_points.txt"), group)
    manifest = os.path.join(dist_info, MANIFEST_FILENAME)
    has_manifest = os.path.isfile(manifest)
    if not backends and not has_manifest and not force:
        return None
    real_name, real_version = metadata_name_version(dist_info)
    return Distribution(
        real_name or name, real_version or version, dist_info, root, order, manifest if has_manifest else None, backends
    )


def core_root(path: list[str], package: str = DEFAULT_PACKAGE) -> tuple[int, str] | None:
    """The ``sys.path`` entry (index, directory) ``import <package>`` imports from: the first
    holding ``<package>/__init__.py`` (the path finder's rule for a regular package)."""
    return next(_core_roots(path, core_init(package)), None)


def _core_roots(path: list[str], init: str) -> Iterator[tuple[int, str]]:
    for order, entry in enumerate(path):
        root = entry or "."
        if os.path.isfile(os.path.join(root, *init.split("/"))):
            yield order, root


def _core_claims(path: list[str], dists: list[Distribution], package: str = DEFAULT_PACKAGE) -> list[Distribution]:
    """The distributions whose RECORD (PEP 376) lists the ``<package>/__init__.py`` that is
    imported, the one the file on disk matches first. Forks install the package under other
    names (``triton-pascal``, ``fbtriton``, ...), so ownership is read from the RECORDs, never
    assumed from a name. When no RECORD claims the imported file (a copy in the working
    directory shadows the install), the first claimed one further along ``sys.path``: its
    ``libtriton.so`` is what backends are checked against, and the core check (:mod:`.core`)
    refuses the shadowing copy."""
    init = core_init(package)
    for order, root in _core_roots(path, init):
        claims = _claims_in(root, order, dists, init)
        if claims:
            return claims
    return []


def _claims_in(root: str, order: int, dists: list[Distribution], init: str) -> list[Distribution]:
    """In one ``sys.path`` entry: RECORDs of distributions named like Triton are read first,
    the others only when none of those claims the file (one bounded read per RECORD)."""
    try:
        infos = sorted(n for n in os.listdir(root) if n.endswith(".dist-info"))
    except OSError:
        return []
    hinted = [n for n in infos if "triton" in n.lower()]
    rows = _claiming(root, hinted, init) or _claiming(root, [n for n in infos if n not in hinted], init)
    known = {d.dist_info: d for d in dists}
    claims: list[tuple[Distribution, str]] = []
    for info, row in rows:
        dist_info = os.path.join(root, info)
        stem = info[: -len(".dist-info")]
        name, _, version = stem.partition("-")
        dist = known.get(dist_info) or _inspect(dist_info, name, version, root, order, force=True)
        if dist is not None:
            claims.append((dist, row))
    if len(claims) > 1:
        on_disk = os.path.join(root, *init.split("/"))
        claims.sort(key=lambda claim: not record_row_matches(claim[1], on_disk))
    return [dist for dist, _ in claims]


#: ``__version__ = '3.9.0'`` as Triton's ``__init__.py`` writes it (any quote, one line).
_VERSION_LINE = re.compile(r"""^__version__\s*=\s*['"]([^'"\n]{1,64})['"]""", re.MULTILINE)
#: Triton's ``__init__.py`` sets ``__version__`` in its first lines; this much is read.
MAX_INIT_BYTES = 64 * 1024


def core_version(triton: Distribution | None, package: str = DEFAULT_PACKAGE) -> str | None:
    """``<package>.__version__`` of the core, parsed from its ``__init__.py`` without importing
    it (a bounded read); None when it is not there or not a plain string assignment."""
    if triton is None:
        return None
    data = read_small_bytes(os.path.join(triton.root, *core_init(package).split("/")), MAX_INIT_BYTES)
    match = _VERSION_LINE.search(data.decode("utf-8", "replace")) if data else None
    return match.group(1) if match else None


def _claiming(root: str, infos: list[str], init: str) -> list[tuple[str, str]]:
    """(dist-info name, RECORD row) for each of ``infos`` whose RECORD lists ``init``."""
    out = []
    for info in infos:
        text = read_small_text(os.path.join(root, info, "RECORD"))
        row = record_row(text, init) if text else None
        if row is not None:
            out.append((info, row))
    return out


#: A RECORD row of a Triton's ``<package>/backends/__init__.py`` (the package: group 1). Compiled
#: on first use, as ``is_shared_library``'s pattern: a warm import does not look for renamed cores.
_BACKENDS_INIT_ROW = r"(?m)^([A-Za-z_][A-Za-z0-9_]{0,99})/backends/__init__\.py,"


def renamed_cores(dists: list[Distribution]) -> list[tuple[Distribution, str]]:
    """(distribution, package) for each of ``dists`` whose RECORD installs a Triton under
    another package name: ``<package>/__init__.py`` and ``<package>/backends/__init__.py``,
    ``<package>`` not ``triton``. One bounded read per distribution."""
    found = []
    for dist in dists:
        text = read_small_text(os.path.join(dist.dist_info, "RECORD")) or ""
        packages = {m.group(1) for m in re.finditer(_BACKENDS_INIT_ROW, text)} - {DEFAULT_PACKAGE}
        found += [(dist, p) for p in sorted(packages) if record_row(text, core_init(p)) is not None]
    return found


def other_dist_infos(dist: Distribution) -> list[str]:
    """The ``.dist-info`` directory names in ``dist``'s ``sys.path`` entry but its own, sorted
    (none where the entry cannot be listed)."""
    try:
        infos = sorted(n for n in os.listdir(dist.root) if n.endswith(".dist-info"))
    except OSError:
        return []
    return [n for n in infos if os.path.join(dist.root, n) != dist.dist_info]


class RecordSyntaxError(ValueError):
    """A RECORD row the csv module refuses (a field past its limit; a NUL byte before 3.11), at row ``number``."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(message)
        self.number = number


def record_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """Every row of a RECORD file as installers read it (the csv module's default dialect:
    a quoted path may hold a comma), each with its number; blank rows are counted, not
    yielded. The one reader of a whole RECORD, for both distributions; callers judge the
    fields. :func:`record_row` is the warm path's lookup of one row."""
    import csv
    import io

    number = 0
    try:
        for number, row in enumerate(csv.reader(io.StringIO(text)), 1):  # noqa: B007 (read below)
            if row:
                yield number, row
    except csv.Error as exc:
        raise RecordSyntaxError(number + 1, str(exc)) from None


def record_row(text: str, wheel_path: str) -> str | None:
    """The RECORD row of ``wheel_path`` (unquoted), found without splitting the whole file."""
    key = wheel_path + ","
    start = 0 if text.startswith(key) else text.find("\n" + key) + 1
    if start == 0 and not text.startswith(key):
        return None
    end = text.find("\n", start)
    return text[start: end if end >= 0 else len(text)].rstrip("\r")


def record_row_matches(row: str, path: str, limit: int = 16 << 20) -> bool:
    """Whether the file at ``path`` is the one a RECORD row describes: the size first (a stat),
    then the sha256 (PEP 376 urlsafe base64, no padding), read no further than that size
    (a file above ``limit`` bytes is not read: no match)."""
    import base64
    import hashlib

    _, hash_field, size = (row.rsplit(",", 2) + ["", ""])[:3]
    algorithm, _, digest = hash_field.partition("=")
    if algorithm != "sha256" or not (size.isascii() and size.isdigit()) or len(size) > 15 or int(size) > limit:
        return False
    try:
        if os.stat(path).st_size != int(size):
            return False
    except OSError:
        return False
    data = read_small_bytes(path, int(size) + 1)
    if data is None or len(data) != int(size):
        return False
    ours = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return ours == digest


#: entry_points.txt and METADATA headers bigger than this are not a distribution's own.
MAX_METADATA_BYTES = 4 * 1024 * 1024


def read_small_text(path: str, limit: int = MAX_METADATA_BYTES) -> str | None:
    """A regular file's text, at most ``limit`` bytes; None for anything else. Never blocks:
    a FIFO where a METADATA should be must not hang ``import triton``."""
    data = read_small_bytes(path, limit)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_small_bytes(path: str, limit: int = MAX_METADATA_BYTES) -> bytes | None:
    """A regular file's first ``limit`` bytes; None for anything else (never blocks)."""
    try:
        return read_regular(path, limit, truncate=True)
    except RegularFileError:
        return None


def _backend_entry_points(path: str, group: str = BACKENDS_GROUP) -> dict[str, str]:
    """The ``group`` (``triton.backends``) section of an entry_points.txt, in file order."""
    text = read_small_text(path)
    if text is None or group not in text:
        return {}
    return parse_entry_points(text).get(group, {})


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


def metadata_name_version(dist_info: str) -> tuple[str, str]:
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


def _backends_dir(triton: Distribution | None, package: str = DEFAULT_PACKAGE) -> str | None:
    roots = [triton.root] if triton else []
    for root in roots + [p or "." for p in sys.path]:
        candidate = os.path.join(root, package, "backends")
        if os.path.isdir(candidate):
            return candidate
    return None


def _in_tree(backends_dir: str | None, triton: Distribution | None, package: str = DEFAULT_PACKAGE
             ) -> list[Candidate]:
    """Triton's TRITON_BACKENDS_IN_TREE=1 scan: directories under <package>/backends/."""
    if backends_dir is None:
        return []
    try:
        names = os.listdir(backends_dir)
    except OSError:
        return []
    found: list[Candidate] = []
    for name in names:
        if os.path.isdir(os.path.join(backends_dir, name)) and not name.startswith("__"):
            found.append(Candidate(name, f"{package}.backends.{name}", "in-tree", triton, len(found)))
    return found

