"""Assemble a manifest from what a pass over a wheel found.

Shared by the build hook and ``migrate``: finding the backends a wheel provides (declared
``triton.backends`` entry points, or the ``triton/backends/<name>/`` directories that
Triton 3.2/3.3 and vendor forks scan), the plugin libraries among its artifacts, the
build record, and (:func:`describe`) the manifest itself with the files added beside it.

A vendor release may rename the ``triton`` package (``tokenspeed_triton``): its Triton then
reads the entry-point group ``<package>.backends`` and scans ``<package>/backends/``. Which
package a wheel's backends plug into is read from the wheel (:func:`triton_packages`).

The manifest vouches for every file of the output wheel (coverage "all"): each file the
writer copied, and each file added here, hashed from its final bytes before anything is
sealed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from triton_backend_runtime.manifest import model as m

from .. import __version__
from ..formats import DEFAULT_PACKAGE, EntryPoints, backends_group, render
from ..scanning import artifact_from_bytes
from ..wheel import WheelContents

__all__ = [
    "Backends", "Injection", "added_files", "backend_shapes", "build_record", "describe", "find_backends",
    "find_plugins", "triton_packages", "triton_requirement"
]

#: ``<prefix>backends/<name>/compiler.py`` or ``driver.py``: what Triton's directory scan loads.
_BACKEND_SHAPE = re.compile(r"^(?P<prefix>(?:[^/]+/)*)backends/(?P<name>[^/]+)/(?P<kind>compiler|driver)\.py$")
_GROUP_SUFFIX = ".backends"
_COMPILER_BASES = {"BaseBackend"}
_DRIVER_BASES = {"DriverBase", "GPUDriver"}


@dataclass
class Injection:
    """What a plan adds to ``.dist-info``: the manifest to seal, and the files (name ->
    final bytes) written beside it, which the manifest already lists as artifacts."""

    manifest: m.Manifest
    files: dict[str, bytes]


@dataclass
class Backends:
    """Backends found, the entry points the wheel must declare for them, and the Triton
    package they plug into (the group is ``<package>.backends``)."""

    backends: list[m.Backend]
    entry_points: EntryPoints
    package: str = DEFAULT_PACKAGE


def find_backends(
    contents: WheelContents, overrides: dict[str, str] | None = None, package: str = DEFAULT_PACKAGE
) -> Backends:
    """Overrides (name -> package) win; else entry points declared in ``<package>.backends``;
    else the ``<package>/backends/<name>/`` directories."""
    group = backends_group(package)
    declared = contents.entry_points.get(group, {})
    if overrides:
        chosen = dict(overrides)
    elif declared:
        chosen = {name: _module(value) for name, value in declared.items()}
    else:
        chosen = _scanned_directories(contents.names, package)
    backends = [_describe(name, module, contents) for name, module in sorted(chosen.items())]
    points = {g: dict(names) for g, names in contents.entry_points.items()}
    if chosen:
        points[group] = {**declared, **chosen} if not overrides else dict(chosen)
    return Backends(backends, points, package)


def _module(value: str) -> str:
    return value.split(":")[0].strip()


def _scanned_directories(names: list[str], package: str) -> dict[str, str]:
    """Directory-scan era: every <package>/backends/<name>/ holding compiler.py and driver.py."""
    return {
        name: f"{package}.backends.{name}"
        for prefix, name in backend_shapes(names)
        if prefix == f"{package}/"
    }


def backend_shapes(names: list[str]) -> list[tuple[str, str]]:
    """(prefix, name) of every ``<prefix>backends/<name>/`` holding both compiler.py and
    driver.py, wherever it is in the wheel: what a directory scan would load."""
    kinds: dict[tuple[str, str], set[str]] = {}
    for path in names:
        match = _BACKEND_SHAPE.match(path)
        if match:
            kinds.setdefault((match["prefix"], match["name"]), set()).add(match["kind"])
    return sorted(key for key, found in kinds.items() if found == {"compiler", "driver"})


def triton_packages(contents: WheelContents) -> list[str]:
    """The Triton packages the wheel's backends plug into, read from the wheel: a
    ``<package>.backends`` group whose entry points name packages with compiler.py and
    driver.py in the wheel (``triton.backends`` counts whatever it names), and every
    top-level ``<package>/backends/<name>/`` directory. Empty: nothing says (``triton``)."""
    found = {prefix[:-1] for prefix, _ in backend_shapes(contents.names) if _top_level(prefix)}
    members = set(contents.names)
    for group, names in contents.entry_points.items():
        package = group[: -len(_GROUP_SUFFIX)]
        if not group.endswith(_GROUP_SUFFIX) or not package.isidentifier() or not names:
            continue
        if package == DEFAULT_PACKAGE or all(_has_backend_files(_module(v), members) for v in names.values()):
            found.add(package)
    return sorted(found)


def _has_backend_files(module: str, members: set[str]) -> bool:
    base = module.replace(".", "/")
    return f"{base}/compiler.py" in members and f"{base}/driver.py" in members


def _top_level(prefix: str) -> bool:
    """``pkg/``: one segment naming an importable package."""
    return prefix.count("/") == 1 and prefix[:-1].isidentifier()


def _describe(name: str, package: str, contents: WheelContents) -> m.Backend:
    base = package.replace(".", "/")
    compiler = _single_subclass(contents, f"{base}/compiler.py", f"{package}.compiler", _COMPILER_BASES)
    driver = _single_subclass(contents, f"{base}/driver.py", f"{package}.driver", _DRIVER_BASES)
    return m.Backend(name=name, package=package, compiler=compiler, driver=driver, targets=[])


def _single_subclass(contents: WheelContents, path: str, module: str, bases: set[str]) -> str | None:
    """``module:Class`` when the source defines exactly one class deriving from ``bases``."""
    source = contents.read_member(path)
    if source is None:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    classes = [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(_base_name(b) in bases for b in node.bases)
    ]
    return f"{module}:{classes[0]}" if len(classes) == 1 else None


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def find_plugins(artifacts: list[m.Artifact]) -> list[m.Plugin]:
    return [
        m.Plugin(path=a.path, api=a.elf.plugin.api, name=None)
        for a in artifacts
        if a.elf is not None and a.elf.plugin is not None
    ]


def triton_requirement(contents: WheelContents) -> str:
    """The Triton specifier from METADATA's Requires-Dist, '' when it names none."""
    for line in contents.metadata.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "triton" and not req.marker:
            return str(req.specifier)
    return ""


def build_record(artifacts: list[m.Artifact], epoch: int | None) -> m.Build:
    compilers = sorted({c for a in artifacts if a.elf for c in a.elf.compiler})
    return m.Build(tool="backend-packager", tool_version=__version__, compiler=compilers, source_date_epoch=epoch)


def describe(
    contents: WheelContents,
    backends: list[m.Backend],
    entry_points: EntryPoints,
    *,
    requirements: m.Requirements,
    provenance: m.Provenance,
    epoch: int | None,
    protocol_version: str = m.PROTOCOL_VERSION,
    triton_package: str = DEFAULT_PACKAGE,
    plugins: list[m.Plugin] | None = None,
) -> Injection:
    """The manifest for ``contents`` and the ``entry_points.txt`` it is injected with.

    Its artifacts are every file of the output: the copied ones as the writer described
    them, and ``entry_points.txt`` hashed from the bytes that will be written.
    """
    files = added_files(contents.dist_info, entry_points)
    added = [artifact_from_bytes(path, data) for path, data in files.items()]
    manifest = m.Manifest(
        schema_version=m.SCHEMA_VERSION,
        name=contents.name,
        version=contents.version,
        tags=sorted(contents.tags),
        protocol_version=protocol_version,
        requirements=requirements,
        backends=backends,
        plugins=find_plugins(contents.artifacts) if plugins is None else plugins,
        artifacts=sorted([*contents.artifacts, *added], key=lambda a: a.path),
        build=build_record(contents.artifacts, epoch),
        provenance=provenance,
        coverage=m.COVERAGE_ALL,
        triton_package=triton_package,
    )
    return Injection(manifest, files)


def added_files(dist_info: str, entry_points: EntryPoints) -> dict[str, bytes]:
    """The ``.dist-info`` files a rewrite adds besides the manifest: the entry points, when
    there are any (rendered by the function ``prepare_metadata_for_build_wheel`` uses)."""
    text = render(entry_points)
    return {f"{dist_info}/entry_points.txt": text.encode("utf-8")} if text else {}
